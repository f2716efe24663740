//! Installing the capability hooks, and the replacement method implementations.
//!
//! The hook point is the one the published reference shim proved: Metal calls
//! `-[_MTLDevice initGPUFamilySupport]` while it sets a device up. We replace
//! that method once; each time it runs we hook the concrete class of the
//! device (once per class) and then call the original.
//!
//! On a concrete class, `supportsFamily:`, `maxThreadgroupMemoryLength` and,
//! only when the profile sets it, `recommendedMaxWorkingSetSize` are replaced
//! all-or-nothing: every method is resolved first, then replaced and checked;
//! if any step fails, what was replaced is put back and the class stays stock.
//! Each hooked class keeps its own original implementations, published in a
//! fixed table that the replacements read without locking or allocating.

use std::cell::Cell;
use std::ffi::{CStr, c_void};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};

use capshim_profile::{Profile, policy};

use crate::report;
use crate::runtime::{self, Class, Imp, Native, Resolved, Runtime, Sel};

/// The private base class every Metal device inherits from.
pub const BASE_CLASS: &CStr = c"_MTLDevice";
/// The base-class method Metal calls while setting up a device.
pub const BASE_SELECTOR: &CStr = c"initGPUFamilySupport";

/// The queries the shim answers, in table order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Query {
    /// `-supportsFamily:(MTLGPUFamily)` → BOOL.
    SupportsFamily = 0,
    /// `-maxThreadgroupMemoryLength` → NSUInteger, bytes.
    MaxThreadgroupMemory = 1,
    /// `-recommendedMaxWorkingSetSize` → uint64_t, bytes.
    WorkingSet = 2,
}

impl Query {
    /// All queries, in table order.
    pub const ALL: [Query; 3] = [
        Query::SupportsFamily,
        Query::MaxThreadgroupMemory,
        Query::WorkingSet,
    ];

    /// The Objective-C selector.
    pub fn selector(self) -> &'static CStr {
        match self {
            Query::SupportsFamily => c"supportsFamily:",
            Query::MaxThreadgroupMemory => c"maxThreadgroupMemoryLength",
            Query::WorkingSet => c"recommendedMaxWorkingSetSize",
        }
    }

    fn replacement(self) -> Imp {
        match self {
            Query::SupportsFamily => Imp(supports_family as *const () as usize),
            Query::MaxThreadgroupMemory => Imp(max_threadgroup_memory as *const () as usize),
            Query::WorkingSet => Imp(recommended_working_set_size as *const () as usize),
        }
    }

    /// The queries a profile needs hooked: the working set only when configured.
    pub fn wanted(profile: &Profile) -> &'static [Query] {
        if profile.recommended_working_set_size.is_some() {
            &Query::ALL
        } else {
            &Query::ALL[..2]
        }
    }
}

/// Why a class could not be hooked; it then stays stock.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HookError {
    /// The class does not respond to a selector we must replace.
    MissingMethod(&'static CStr),
    /// The runtime refused, or did not apply, a replacement.
    ReplaceFailed(&'static CStr),
    /// The fixed table of hooked classes is full.
    TooManyClasses,
}

impl std::fmt::Display for HookError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HookError::MissingMethod(sel) => write!(f, "no method -{}", sel.to_string_lossy()),
            HookError::ReplaceFailed(sel) => {
                write!(
                    f,
                    "the runtime did not replace -{} (put back what was replaced)",
                    sel.to_string_lossy()
                )
            }
            HookError::TooManyClasses => write!(f, "more than {MAX_CLASSES} device classes"),
        }
    }
}

/// Replaces `selectors` on `class` with `replacements`, all or nothing.
///
/// Every method is resolved first; `publish` then receives them as they are (the
/// implementation the class runs now, and its type encoding) before anything is replaced,
/// so that a replacement called on another thread the moment it is installed already finds
/// its original. On failure every method already replaced is put back, and the class
/// answers as before. Returns the resolved originals.
pub fn install_all<R: Runtime>(
    rt: &R,
    class: Class,
    selectors: &[&'static CStr],
    replacements: &[Imp],
    publish: impl FnOnce(&[Resolved]),
) -> Result<Vec<Resolved>, HookError> {
    let mut resolved = Vec::with_capacity(selectors.len());
    for &name in selectors {
        let sel = rt.selector(name);
        let method = rt
            .resolve(class, sel)
            .ok_or(HookError::MissingMethod(name))?;
        resolved.push((name, sel, method));
    }
    let originals: Vec<Resolved> = resolved.iter().map(|&(_, _, method)| method).collect();
    publish(&originals);
    for (done, (&(name, sel, method), &imp)) in resolved.iter().zip(replacements).enumerate() {
        let applied = rt.replace(class, sel, imp, method.types)
            && rt.resolve(class, sel).map(|now| now.imp) == Some(imp);
        if !applied {
            for &(_, sel, method) in &resolved[..=done] {
                rt.replace(class, sel, method.imp, method.types);
            }
            return Err(HookError::ReplaceFailed(name));
        }
    }
    Ok(originals)
}

/// How many distinct device classes can be hooked in one process.
pub const MAX_CLASSES: usize = 32;

const EMPTY: u8 = 0;
const HOOKED: u8 = 1;
const FAILED: u8 = 2;
/// Originals published, replacements being installed by the thread holding the lock.
const INSTALLING: u8 = 3;

/// One device class and its original implementations. `class` is published last
/// (Release) so a reader that sees it (Acquire) also sees the rest.
struct Slot {
    class: AtomicUsize,
    state: AtomicU8,
    originals: [AtomicUsize; 3],
}

impl Slot {
    const fn new() -> Slot {
        Slot {
            class: AtomicUsize::new(0),
            state: AtomicU8::new(EMPTY),
            originals: [const { AtomicUsize::new(0) }; 3],
        }
    }
}

static SLOTS: [Slot; MAX_CLASSES] = [const { Slot::new() }; MAX_CLASSES];
static INSTALL: Mutex<()> = Mutex::new(());
static BASE_ORIGINAL: AtomicUsize = AtomicUsize::new(0);
static BASE_STATE: AtomicU8 = AtomicU8::new(EMPTY);
static PROFILE: std::sync::OnceLock<Profile> = std::sync::OnceLock::new();

fn slot_of(class: Class) -> Option<&'static Slot> {
    SLOTS
        .iter()
        .take_while(|slot| slot.class.load(Ordering::Acquire) != 0)
        .find(|slot| slot.class.load(Ordering::Acquire) == class.0 as usize)
}

fn lock() -> std::sync::MutexGuard<'static, ()> {
    // A poisoned lock only means a panic was caught while it was held. Slots are filled in
    // order and each is published whole (originals before class), so the table is still
    // consistent; a class left INSTALLING is simply not retried.
    INSTALL
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Arms the hook with `profile`, registers for late-loaded classes, and hooks the base class
/// now if Metal is already loaded. Called once, from the initializer, when configuration is
/// accepted.
pub fn arm(profile: Profile) {
    if PROFILE.set(profile).is_err() {
        return;
    }
    runtime::on_classes_loaded(install_base);
    install_base();
}

/// Replaces `-[_MTLDevice initGPUFamilySupport]` if `_MTLDevice` is loaded and it was not
/// done yet. Cheap when already done, so it can run on every image or class load.
fn install_base() {
    if BASE_STATE.load(Ordering::Acquire) != EMPTY {
        return;
    }
    let rt = Native;
    let Some(base) = rt.look_up_class(BASE_CLASS) else {
        return;
    };
    let outcome = {
        let _guard = lock();
        if BASE_STATE.load(Ordering::Acquire) != EMPTY {
            return;
        }
        let init = Imp(init_gpu_family_support as *const () as usize);
        let result = install_all(&rt, base, &[BASE_SELECTOR], &[init], |originals| {
            BASE_ORIGINAL.store(originals[0].imp.0, Ordering::Release);
        });
        BASE_STATE.store(
            if result.is_ok() { HOOKED } else { FAILED },
            Ordering::Release,
        );
        result
    };
    if let Err(error) = outcome {
        report::failed(&rt.class_name(base), &error.to_string());
    }
}

/// Hooks the concrete class of a device, once. Classes that fail stay stock and are not retried.
fn hook_device_class(class: Class) {
    // Done (or given up) for this class: nothing to do. A class still being installed by
    // another thread is not done: its device must not be set up before the replacements are
    // in, so fall through and wait for the lock, which that thread holds until it finishes.
    if slot_of(class).is_some_and(|slot| slot.state.load(Ordering::Acquire) != INSTALLING) {
        return;
    }
    let Some(profile) = PROFILE.get() else { return };
    let rt = Native;
    let outcome = {
        let _guard = lock();
        if slot_of(class).is_some() {
            return;
        }
        let Some(slot) = SLOTS
            .iter()
            .find(|slot| slot.class.load(Ordering::Acquire) == 0)
        else {
            drop(_guard);
            report::failed(
                &rt.class_name(class),
                &HookError::TooManyClasses.to_string(),
            );
            return;
        };
        let queries = Query::wanted(profile);
        let selectors: Vec<&'static CStr> = queries.iter().map(|q| q.selector()).collect();
        let replacements: Vec<Imp> = queries.iter().map(|q| q.replacement()).collect();
        // The slot is published with the originals before any method is replaced: a device
        // of this class answering on another thread (or a subclass calling `[super …]`) the
        // moment a replacement is installed must find its original, never nothing.
        let result = install_all(&rt, class, &selectors, &replacements, |originals| {
            for (&query, original) in queries.iter().zip(originals) {
                let imp = inherited_original(&rt, class, query, original.imp);
                slot.originals[query as usize].store(imp.0, Ordering::Relaxed);
            }
            slot.state.store(INSTALLING, Ordering::Relaxed);
            slot.class.store(class.0 as usize, Ordering::Release);
        });
        if result.is_ok() {
            slot.state.store(HOOKED, Ordering::Release);
        } else {
            // Not retried. Originals already published stay valid (what was replaced was put
            // back), so a call still on its way through a replacement is answered correctly.
            slot.state.store(FAILED, Ordering::Release);
            slot.class.store(class.0 as usize, Ordering::Release);
        }
        result
    };
    let name = rt.class_name(class);
    match outcome {
        Ok(_) => report::hooked(&name, profile),
        Err(error) => report::failed(&name, &error.to_string()),
    }
}

/// When a class inherits a method we already replaced in a hooked ancestor, the
/// "original" it resolved is our own replacement; its true original is the ancestor's.
fn inherited_original<R: Runtime>(rt: &R, class: Class, query: Query, resolved: Imp) -> Imp {
    if resolved != query.replacement() {
        return resolved;
    }
    let mut ancestor = rt.superclass(class);
    while let Some(current) = ancestor {
        if let Some(slot) = slot_of(current).filter(|s| s.state.load(Ordering::Relaxed) == HOOKED) {
            return Imp(slot.originals[query as usize].load(Ordering::Relaxed));
        }
        ancestor = rt.superclass(current);
    }
    Imp(0)
}

thread_local! {
    /// For each query, the receiver and hooked class whose original is running on this
    /// thread, so that an original calling `[super …]` into another hooked class continues
    /// above that class instead of recursing into itself.
    static RUNNING: [Cell<(usize, usize)>; 3] = const { [const { Cell::new((0, 0)) }; 3] };
}

/// The original implementation to call for `this`, and a guard that records it as running.
struct Dispatch {
    query: Query,
    previous: (usize, usize),
    imp: usize,
    class: Class,
}

impl Dispatch {
    fn enter(this: *mut c_void, query: Query) -> Option<Dispatch> {
        let rt = Native;
        let previous = RUNNING.with(|running| running[query as usize].get());
        // SAFETY: `this` is the receiver the runtime passed to our method implementation,
        // so it is a live object.
        let mut class = unsafe { runtime::object_class(this) }?;
        if previous.0 == this as usize && previous.1 != 0 {
            class = rt.superclass(Class(previous.1 as *mut c_void))?;
        }
        loop {
            // Any published original will do, even of a class whose hook then failed: what
            // was replaced there was put back, but a call may still be on its way through.
            let imp =
                slot_of(class).map_or(0, |s| s.originals[query as usize].load(Ordering::Relaxed));
            if imp != 0 {
                RUNNING
                    .with(|running| running[query as usize].set((this as usize, class.0 as usize)));
                return Some(Dispatch {
                    query,
                    previous,
                    imp,
                    class,
                });
            }
            class = rt.superclass(class)?;
        }
    }
}

impl Drop for Dispatch {
    fn drop(&mut self) {
        RUNNING.with(|running| running[self.query as usize].set(self.previous));
    }
}

type SupportsFamilyFn = unsafe extern "C" fn(*mut c_void, Sel, isize) -> u8;
type LengthFn = unsafe extern "C" fn(*mut c_void, Sel) -> usize;
type SizeFn = unsafe extern "C" fn(*mut c_void, Sel) -> u64;

/// `-supportsFamily:`: the original answer OR the profile's Apple range.
unsafe extern "C" fn supports_family(this: *mut c_void, cmd: Sel, family: isize) -> u8 {
    catch_unwind(AssertUnwindSafe(|| {
        let (Some(profile), Some(call)) =
            (PROFILE.get(), Dispatch::enter(this, Query::SupportsFamily))
        else {
            report::unanswerable(Query::SupportsFamily);
            return 0;
        };
        // SAFETY: `call.imp` is the original implementation of `-supportsFamily:` for this
        // receiver's class, whose C signature is `BOOL (id, SEL, NSInteger)`; BOOL is one
        // byte on every runtime we support.
        let original =
            unsafe { std::mem::transmute::<usize, SupportsFamilyFn>(call.imp)(this, cmd, family) }
                != 0;
        let class = call.class;
        drop(call);
        let returned = policy::supports_family(profile, family as i64, original);
        report::query(
            class,
            Query::SupportsFamily,
            family as i64,
            original as u64,
            returned as u64,
        );
        u8::from(returned)
    }))
    .unwrap_or(0)
}

/// `-maxThreadgroupMemoryLength`: max(original, configured), bytes.
unsafe extern "C" fn max_threadgroup_memory(this: *mut c_void, cmd: Sel) -> usize {
    catch_unwind(AssertUnwindSafe(|| {
        let (Some(profile), Some(call)) = (
            PROFILE.get(),
            Dispatch::enter(this, Query::MaxThreadgroupMemory),
        ) else {
            report::unanswerable(Query::MaxThreadgroupMemory);
            return 0;
        };
        // SAFETY: `call.imp` is the original `-maxThreadgroupMemoryLength` for this receiver's
        // class: `NSUInteger (id, SEL)`.
        let original = unsafe { std::mem::transmute::<usize, LengthFn>(call.imp)(this, cmd) };
        let class = call.class;
        drop(call);
        let returned = policy::max_threadgroup_memory(profile, original as u64);
        report::query(
            class,
            Query::MaxThreadgroupMemory,
            0,
            original as u64,
            returned,
        );
        usize::try_from(returned).unwrap_or(original)
    }))
    .unwrap_or(0)
}

/// `-recommendedMaxWorkingSetSize`: max(original, configured), bytes.
unsafe extern "C" fn recommended_working_set_size(this: *mut c_void, cmd: Sel) -> u64 {
    catch_unwind(AssertUnwindSafe(|| {
        let (Some(profile), Some(call)) = (PROFILE.get(), Dispatch::enter(this, Query::WorkingSet))
        else {
            report::unanswerable(Query::WorkingSet);
            return 0;
        };
        // SAFETY: `call.imp` is the original `-recommendedMaxWorkingSetSize` for this
        // receiver's class: `uint64_t (id, SEL)`.
        let original = unsafe { std::mem::transmute::<usize, SizeFn>(call.imp)(this, cmd) };
        let class = call.class;
        drop(call);
        let returned = policy::recommended_working_set_size(profile, original);
        report::query(class, Query::WorkingSet, 0, original, returned);
        returned
    }))
    .unwrap_or(0)
}

/// `-[_MTLDevice initGPUFamilySupport]`: hook the device's concrete class, then run the
/// original. The result is passed through as a pointer-sized value, which covers a `void`,
/// BOOL or object return alike.
unsafe extern "C" fn init_gpu_family_support(this: *mut c_void, cmd: Sel) -> usize {
    let _ = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: `this` is the receiver the runtime passed us, a live device object.
        if let Some(class) = unsafe { runtime::object_class(this) } {
            hook_device_class(class);
        }
    }));
    let original = BASE_ORIGINAL.load(Ordering::Acquire);
    if original == 0 {
        return 0;
    }
    // SAFETY: `original` is the implementation `-[_MTLDevice initGPUFamilySupport]` had before
    // we replaced it, published before our replacement was installed; it takes (self, _cmd).
    unsafe { std::mem::transmute::<usize, LengthFn>(original)(this, cmd) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::Types;
    use std::cell::RefCell;
    use std::collections::HashMap;

    /// A runtime whose methods live in a map, and whose `replace` can be told to fail.
    #[derive(Default)]
    struct FakeRuntime {
        methods: RefCell<HashMap<(usize, usize), usize>>,
        fail_on_replace: Option<usize>,
        replaces: RefCell<usize>,
    }

    impl Runtime for FakeRuntime {
        fn look_up_class(&self, _: &CStr) -> Option<Class> {
            None
        }
        fn selector(&self, name: &CStr) -> Sel {
            Sel(name.as_ptr().cast())
        }
        fn resolve(&self, class: Class, sel: Sel) -> Option<Resolved> {
            let imp = *self
                .methods
                .borrow()
                .get(&(class.0 as usize, sel.0 as usize))?;
            Some(Resolved {
                imp: Imp(imp),
                types: Types::from_static(c"v16@0:8"),
            })
        }
        fn replace(&self, class: Class, sel: Sel, imp: Imp, _: Types) -> bool {
            *self.replaces.borrow_mut() += 1;
            if self.fail_on_replace == Some(*self.replaces.borrow()) {
                return true; // claims success but does not apply: must be caught by the check
            }
            self.methods
                .borrow_mut()
                .insert((class.0 as usize, sel.0 as usize), imp.0);
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
    const CLASS: Class = Class(0x1000 as *mut c_void);

    fn runtime_with(methods: &[&CStr]) -> FakeRuntime {
        let rt = FakeRuntime::default();
        for (i, name) in methods.iter().enumerate() {
            rt.methods
                .borrow_mut()
                .insert((CLASS.0 as usize, name.as_ptr() as usize), 100 + i);
        }
        rt
    }

    fn snapshot(rt: &FakeRuntime) -> Vec<((usize, usize), usize)> {
        let mut all: Vec<_> = rt.methods.borrow().iter().map(|(k, v)| (*k, *v)).collect();
        all.sort();
        all
    }

    #[test]
    fn replaces_every_method_and_returns_the_originals() {
        let rt = runtime_with(&SELECTORS);
        let originals =
            install_all(&rt, CLASS, &SELECTORS, &[Imp(1), Imp(2), Imp(3)], |_| {}).unwrap();
        assert_eq!(
            originals.iter().map(|r| r.imp.0).collect::<Vec<_>>(),
            vec![100, 101, 102]
        );
        for (name, imp) in SELECTORS.iter().zip([1, 2, 3]) {
            assert_eq!(rt.resolve(CLASS, rt.selector(name)).unwrap().imp, Imp(imp));
        }
    }

    #[test]
    fn originals_are_published_before_anything_is_replaced() {
        let rt = runtime_with(&SELECTORS);
        let mut seen = Vec::new();
        install_all(
            &rt,
            CLASS,
            &SELECTORS,
            &[Imp(1), Imp(2), Imp(3)],
            |originals| {
                seen = originals.iter().map(|r| r.imp.0).collect();
                assert_eq!(*rt.replaces.borrow(), 0, "published after a replacement");
            },
        )
        .unwrap();
        assert_eq!(seen, vec![100, 101, 102]);
        assert_eq!(*rt.replaces.borrow(), 3);
    }

    #[test]
    fn a_missing_method_changes_nothing() {
        let rt = runtime_with(&SELECTORS[..2]);
        let before = snapshot(&rt);
        let err =
            install_all(&rt, CLASS, &SELECTORS, &[Imp(1), Imp(2), Imp(3)], |_| {}).unwrap_err();
        assert_eq!(
            err,
            HookError::MissingMethod(c"recommendedMaxWorkingSetSize")
        );
        assert_eq!(snapshot(&rt), before);
        assert_eq!(*rt.replaces.borrow(), 0);
    }

    #[test]
    fn a_replacement_that_does_not_apply_puts_everything_back() {
        for failing in 1..=3 {
            let mut rt = runtime_with(&SELECTORS);
            rt.fail_on_replace = Some(failing);
            let before = snapshot(&rt);
            let err =
                install_all(&rt, CLASS, &SELECTORS, &[Imp(1), Imp(2), Imp(3)], |_| {}).unwrap_err();
            assert_eq!(err, HookError::ReplaceFailed(SELECTORS[failing - 1]));
            assert_eq!(snapshot(&rt), before, "failure at replacement {failing}");
        }
    }

    #[test]
    fn the_working_set_is_hooked_only_when_configured() {
        let mut profile = Profile::new(1009, 65536, None).unwrap();
        assert_eq!(
            Query::wanted(&profile),
            &[Query::SupportsFamily, Query::MaxThreadgroupMemory]
        );
        profile.recommended_working_set_size = Some(1);
        assert_eq!(Query::wanted(&profile).len(), 3);
    }
}
