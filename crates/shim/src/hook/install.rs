//! All-or-nothing installation of replacement methods on one class.

use std::ffi::CStr;

use crate::query::Expected;
use crate::runtime::{Class, Imp, Resolved, Runtime};

/// One method to replace: its selector, the replacement, and the signature the class's
/// method must have for the replacement to stand in for it.
#[derive(Clone, Copy, Debug)]
pub struct Replacement {
    /// The selector, e.g. `supportsFamily:`.
    pub selector: &'static CStr,
    /// The replacement implementation, a function of this library.
    pub imp: Imp,
    /// The accepted signature of the method it replaces.
    pub expected: Expected,
}

/// Why a class could not be hooked; it then stays stock.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HookError {
    /// The class does not respond to a selector we must replace.
    MissingMethod(&'static CStr),
    /// The class's method has another signature than the replacement implements.
    WrongSignature {
        /// The selector.
        selector: &'static CStr,
        /// The method's type encoding, as the runtime gave it.
        found: String,
        /// What the replacement needs.
        expected: &'static str,
    },
    /// The runtime refused, or did not apply, a replacement.
    ReplaceFailed(&'static CStr),
    /// The fixed table of hooked classes is full.
    TooManyClasses(usize),
}

impl std::fmt::Display for HookError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HookError::MissingMethod(sel) => write!(f, "no method -{}", sel.to_string_lossy()),
            HookError::WrongSignature {
                selector,
                found,
                expected,
            } => write!(
                f,
                "-{} has type encoding {found:?}, expected {expected}",
                selector.to_string_lossy()
            ),
            HookError::ReplaceFailed(sel) => write!(
                f,
                "the runtime did not replace -{} (put back what was replaced)",
                sel.to_string_lossy()
            ),
            HookError::TooManyClasses(max) => write!(f, "more than {max} device classes"),
        }
    }
}

/// Replaces each of `replacements` on `class`, all or nothing.
///
/// Every method is resolved and its signature checked first; `publish` then receives them as
/// they are (the implementation the class runs now, and its type encoding) before anything is
/// replaced, so that a replacement called on another thread the moment it is installed already
/// finds its original. On failure every method already replaced is put back, and the class
/// answers as before. Returns the resolved originals.
///
/// # Safety
/// Each replacement's `imp` must be a function, valid for the life of the process, with the C
/// signature that any type encoding its `expected` accepts describes.
pub unsafe fn install_all<R: Runtime>(
    rt: &R,
    class: Class,
    replacements: &[Replacement],
    publish: impl FnOnce(&[Resolved]),
) -> Result<Vec<Resolved>, HookError> {
    let mut resolved = Vec::with_capacity(replacements.len());
    for replacement in replacements {
        let sel = rt.selector(replacement.selector);
        // Checked first without a resolver: looking a missing method up would message (and
        // initialize) the class, possibly from the shim's initializer, before Metal's own.
        let method = rt
            .defines(class, sel)
            .then(|| rt.resolve(class, sel))
            .flatten()
            .ok_or(HookError::MissingMethod(replacement.selector))?;
        if !replacement.expected.accepts(method.types.to_bytes()) {
            return Err(HookError::WrongSignature {
                selector: replacement.selector,
                found: String::from_utf8_lossy(method.types.to_bytes()).into_owned(),
                expected: replacement.expected.describe,
            });
        }
        resolved.push((sel, method));
    }
    let originals: Vec<Resolved> = resolved.iter().map(|&(_, method)| method).collect();
    publish(&originals);
    for (done, (&(sel, method), replacement)) in resolved.iter().zip(replacements).enumerate() {
        // SAFETY: the caller guarantees `replacement.imp` has the signature its `expected`
        // accepts, and `method.types` was just accepted by it.
        let applied = unsafe { rt.replace(class, sel, replacement.imp, method.types) }
            && rt.resolve(class, sel).map(|now| now.imp) == Some(replacement.imp);
        if !applied {
            for &(sel, method) in &resolved[..=done] {
                // SAFETY: putting back the implementation the runtime itself had for this
                // class and selector, with its own encoding.
                unsafe { rt.replace(class, sel, method.imp, method.types) };
            }
            return Err(HookError::ReplaceFailed(replacement.selector));
        }
    }
    Ok(originals)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::query::Query;
    use crate::runtime::{Sel, Types};
    use std::cell::RefCell;
    use std::collections::HashMap;

    /// (class, selector) → (implementation, type encoding).
    type Methods = HashMap<(usize, usize), (usize, &'static CStr)>;

    /// A runtime whose methods live in a map, and whose `replace` can be told to fail.
    #[derive(Default)]
    struct FakeRuntime {
        methods: RefCell<Methods>,
        fail_on_replace: Option<usize>,
        replaces: RefCell<usize>,
    }

    impl Runtime for FakeRuntime {
        fn look_up_class(&self, _: &CStr) -> Option<Class> {
            None
        }
        fn selector(&self, name: &CStr) -> Sel {
            let name: &'static CStr = Box::leak(name.to_owned().into_boxed_c_str());
            SELECTORS
                .iter()
                .find(|s| **s == name)
                .map_or(Sel::fake(name), |s| Sel::fake(s))
        }
        fn defines(&self, class: Class, sel: Sel) -> bool {
            self.methods
                .borrow()
                .contains_key(&(class.addr(), sel.as_ptr() as usize))
        }
        fn resolve(&self, class: Class, sel: Sel) -> Option<Resolved> {
            let (imp, types) = *self
                .methods
                .borrow()
                .get(&(class.addr(), sel.as_ptr() as usize))?;
            Some(Resolved {
                imp: Imp(imp),
                types: Types::from_static(types),
            })
        }
        unsafe fn replace(&self, class: Class, sel: Sel, imp: Imp, _: Types) -> bool {
            *self.replaces.borrow_mut() += 1;
            if self.fail_on_replace == Some(*self.replaces.borrow()) {
                return true; // claims success but does not apply: must be caught by the check
            }
            let key = (class.addr(), sel.as_ptr() as usize);
            let types = self.methods.borrow()[&key].1;
            self.methods.borrow_mut().insert(key, (imp.0, types));
            true
        }
        fn class_name(&self, _: Class) -> String {
            "Fake".into()
        }
        fn superclass(&self, _: Class) -> Option<Class> {
            None
        }
    }

    const SELECTORS: [&CStr; 3] = [
        c"supportsFamily:",
        c"maxThreadgroupMemoryLength",
        c"recommendedMaxWorkingSetSize",
    ];
    const APPLE_TYPES: [&CStr; 3] = [c"B24@0:8q16", c"Q16@0:8", c"Q16@0:8"];

    fn class() -> Class {
        Class::fake(0x1000)
    }

    fn replacements() -> Vec<Replacement> {
        Query::ALL
            .iter()
            .zip(1..)
            .map(|(q, imp)| Replacement {
                selector: q.selector(),
                imp: Imp(imp),
                expected: q.expected(),
            })
            .collect()
    }

    fn runtime_with(methods: &[(&'static CStr, &'static CStr)]) -> FakeRuntime {
        let rt = FakeRuntime::default();
        for (i, (name, types)) in methods.iter().enumerate() {
            rt.methods
                .borrow_mut()
                .insert((class().addr(), name.as_ptr() as usize), (100 + i, *types));
        }
        rt
    }

    fn apple_methods() -> Vec<(&'static CStr, &'static CStr)> {
        SELECTORS.into_iter().zip(APPLE_TYPES).collect()
    }

    fn snapshot(rt: &FakeRuntime) -> Vec<((usize, usize), usize)> {
        let mut all: Vec<_> = rt.methods.borrow().iter().map(|(k, v)| (*k, v.0)).collect();
        all.sort();
        all
    }

    fn install(
        rt: &FakeRuntime,
        publish: impl FnOnce(&[Resolved]),
    ) -> Result<Vec<Resolved>, HookError> {
        // SAFETY: the fake runtime never calls the implementations it stores.
        unsafe { install_all(rt, class(), &replacements(), publish) }
    }

    #[test]
    fn replaces_every_method_and_returns_the_originals() {
        let rt = runtime_with(&apple_methods());
        let originals = install(&rt, |_| {}).unwrap();
        assert_eq!(
            originals.iter().map(|r| r.imp.0).collect::<Vec<_>>(),
            vec![100, 101, 102]
        );
        for (name, imp) in SELECTORS.iter().zip([1, 2, 3]) {
            assert_eq!(
                rt.resolve(class(), rt.selector(name)).unwrap().imp,
                Imp(imp)
            );
        }
    }

    #[test]
    fn originals_are_published_before_anything_is_replaced() {
        let rt = runtime_with(&apple_methods());
        let mut seen = Vec::new();
        install(&rt, |originals| {
            seen = originals.iter().map(|r| r.imp.0).collect();
            assert_eq!(*rt.replaces.borrow(), 0, "published after a replacement");
        })
        .unwrap();
        assert_eq!(seen, vec![100, 101, 102]);
        assert_eq!(*rt.replaces.borrow(), 3);
    }

    #[test]
    fn a_missing_method_changes_nothing() {
        let rt = runtime_with(&apple_methods()[..2]);
        let before = snapshot(&rt);
        let err = install(&rt, |_| panic!("published")).unwrap_err();
        assert_eq!(
            err,
            HookError::MissingMethod(c"recommendedMaxWorkingSetSize")
        );
        assert_eq!(snapshot(&rt), before);
        assert_eq!(*rt.replaces.borrow(), 0);
    }

    #[test]
    fn a_method_of_another_signature_changes_nothing() {
        let mut methods = apple_methods();
        methods[1].1 = c"I16@0:8";
        let rt = runtime_with(&methods);
        let before = snapshot(&rt);
        let err = install(&rt, |_| panic!("published")).unwrap_err();
        assert_eq!(
            err.to_string(),
            "-maxThreadgroupMemoryLength has type encoding \"I16@0:8\", expected an 8-byte integer and no argument"
        );
        assert_eq!(snapshot(&rt), before);
        assert_eq!(*rt.replaces.borrow(), 0);
    }

    #[test]
    fn a_replacement_that_does_not_apply_puts_everything_back() {
        for failing in 1..=3 {
            let mut rt = runtime_with(&apple_methods());
            rt.fail_on_replace = Some(failing);
            let before = snapshot(&rt);
            let err = install(&rt, |_| {}).unwrap_err();
            assert_eq!(err, HookError::ReplaceFailed(SELECTORS[failing - 1]));
            assert_eq!(snapshot(&rt), before, "failure at replacement {failing}");
        }
    }
}
