//! GCC's GNU Objective-C runtime (`libobjc.so`), used on Linux to test the shim
//! against a real runtime and a simulated Metal library.
//!
//! Differences from Apple's runtime that matter here: `object_getClass` is an
//! inline function in the headers (an object's class is its first word,
//! `class_pointer`), and loading is observed through the `_objc_load_callback`
//! hook, which `__objc_exec_class` calls for every class it loads.

use std::ffi::{CStr, c_char, c_void};
use std::sync::OnceLock;

use super::{Class, Imp, Resolved, Runtime, Sel, Types};

#[link(name = "objc")]
unsafe extern "C" {
    fn objc_lookUpClass(name: *const c_char) -> *mut c_void;
    fn sel_registerName(name: *const c_char) -> *const c_void;
    fn class_getInstanceMethod(class: *mut c_void, sel: *const c_void) -> *mut c_void;
    fn method_getImplementation(method: *mut c_void) -> usize;
    fn method_getTypeEncoding(method: *mut c_void) -> *const c_char;
    fn class_addMethod(
        class: *mut c_void,
        sel: *const c_void,
        imp: usize,
        types: *const c_char,
    ) -> u8;
    fn method_setImplementation(method: *mut c_void, imp: usize) -> usize;
    fn class_respondsToSelector(class: *mut c_void, sel: *const c_void) -> u8;
    fn class_getName(class: *mut c_void) -> *const c_char;
    fn class_getSuperclass(class: *mut c_void) -> *mut c_void;
    static mut _objc_load_callback: Option<unsafe extern "C" fn(*mut c_void, *mut c_void)>;
}

/// The GNU runtime; a unit struct because all state lives in the runtime itself.
#[derive(Clone, Copy, Debug, Default)]
pub struct ObjcRuntime;

impl Runtime for ObjcRuntime {
    fn look_up_class(&self, name: &CStr) -> Option<Class> {
        // SAFETY: `name` is a valid NUL-terminated string; objc_lookUpClass only reads the
        // class table under the runtime's lock and returns Nil when the class is absent.
        let class = unsafe { objc_lookUpClass(name.as_ptr()) };
        (!class.is_null()).then_some(Class(class))
    }

    fn selector(&self, name: &CStr) -> Sel {
        // SAFETY: `name` is a valid NUL-terminated string; the runtime copies it when interning.
        Sel(unsafe { sel_registerName(name.as_ptr()) })
    }

    fn resolve(&self, class: Class, sel: Sel) -> Option<Resolved> {
        // SAFETY: `class` came from the runtime (objc_lookUpClass or an object's class
        // pointer) and `sel` from sel_registerName; the call only searches method lists.
        let method = unsafe { class_getInstanceMethod(class.0, sel.0) };
        if method.is_null() {
            return None;
        }
        // SAFETY: `method` is the non-null Method the runtime just returned; methods are
        // never freed while their class is loaded.
        let (imp, types) = unsafe {
            (
                method_getImplementation(method),
                method_getTypeEncoding(method),
            )
        };
        let types = Types::from_runtime(types)?;
        (imp != 0).then_some(Resolved {
            imp: Imp(imp),
            types,
        })
    }

    fn replace(&self, class: Class, sel: Sel, imp: Imp, types: Types) -> bool {
        if imp.0 == 0 {
            return false;
        }
        // The GNU runtime builds dispatch tables lazily, and until a class has its own, it
        // shares one placeholder table with every other such class; an update made then can
        // reach that shared table and so other classes (seen with a device subclass whose
        // superclass had not been messaged yet). Asking each class in the chain whether it
        // responds to the selector makes the runtime install their own tables first.
        let mut chain = Some(class);
        while let Some(current) = chain {
            // SAFETY: `current` is `class` or one of its superclasses, from the runtime;
            // class_respondsToSelector installs the class's dispatch table under the runtime
            // lock and only reads otherwise.
            unsafe { class_respondsToSelector(current.0, sel.0) };
            chain = self.superclass(current);
        }
        // GNU's class_replaceMethod finds the method through the class hierarchy and so,
        // for an inherited method, changes the superclass's implementation for every
        // subclass. Apple's adds an override to the class itself, which is what we need:
        // change the class's own method, or add one when it only inherits it.
        // SAFETY: `class` and `sel` came from the runtime; class_getInstanceMethod only
        // searches method lists.
        let method = unsafe { class_getInstanceMethod(class.0, sel.0) };
        let inherited = match self.superclass(class) {
            // SAFETY: as above, for the superclass the runtime returned.
            Some(superclass) => {
                !method.is_null()
                    && method == unsafe { class_getInstanceMethod(superclass.0, sel.0) }
            }
            None => false,
        };
        if method.is_null() || inherited {
            // SAFETY: `imp` is one of our `extern "C"` implementations (or an original we saved)
            // with the signature `types` describes; `types` is the runtime's own copy of the
            // replaced method's encoding. class_addMethod copies what it needs and updates the
            // dispatch tables of the class and its subclasses.
            unsafe { class_addMethod(class.0, sel.0, imp.0, types.as_ptr()) != 0 }
        } else {
            // SAFETY: `method` is the class's own Method, just returned by the runtime; `imp`
            // has the signature of the implementation it replaces. method_setImplementation
            // updates the dispatch tables under the runtime lock.
            unsafe { method_setImplementation(method, imp.0) };
            true
        }
    }

    fn class_name(&self, class: Class) -> String {
        // SAFETY: `class` came from the runtime; class_getName returns its NUL-terminated
        // name, which lives as long as the class.
        let name = unsafe { class_getName(class.0) };
        if name.is_null() {
            return String::from("?");
        }
        // SAFETY: non-null and NUL-terminated, as above.
        unsafe { CStr::from_ptr(name) }
            .to_string_lossy()
            .into_owned()
    }

    fn superclass(&self, class: Class) -> Option<Class> {
        // SAFETY: `class` came from the runtime; class_getSuperclass only reads it.
        let superclass = unsafe { class_getSuperclass(class.0) };
        (!superclass.is_null()).then_some(Class(superclass))
    }
}

/// The class of `object`: its first word, as the GNU headers' inline `object_getClass` reads it.
///
/// # Safety
/// `object` must be a valid, non-null Objective-C object pointer.
pub unsafe fn object_class(object: *mut c_void) -> Option<Class> {
    // SAFETY: the caller guarantees `object` is a live object, whose first word is its
    // `class_pointer` in the GNU runtime's object layout.
    let class = unsafe { *(object as *const *mut c_void) };
    (!class.is_null()).then_some(Class(class))
}

static LOADED: OnceLock<fn()> = OnceLock::new();
static PREVIOUS: OnceLock<Option<unsafe extern "C" fn(*mut c_void, *mut c_void)>> = OnceLock::new();

unsafe extern "C" fn class_loaded(class: *mut c_void, category: *mut c_void) {
    if let Some(Some(previous)) = PREVIOUS.get() {
        // SAFETY: we pass on exactly the arguments the runtime gave us to the callback that
        // was installed before ours, as the runtime itself would have.
        unsafe { previous(class, category) };
    }
    if category.is_null()
        && let Some(callback) = LOADED.get()
    {
        // A panic must not unwind into the runtime's C frames.
        let _ = std::panic::catch_unwind(callback);
    }
}

/// Chains [`class_loaded`] into `_objc_load_callback`. Only the first call registers.
pub fn on_classes_loaded(callback: fn()) {
    if LOADED.set(callback).is_err() {
        return;
    }
    // SAFETY: `_objc_load_callback` is a plain function-pointer variable of libobjc. We read
    // and write it once, from the shim's initializer, before any code of ours could have
    // started threads; the runtime reads it under its own lock when it loads classes.
    unsafe {
        let slot = &raw mut _objc_load_callback;
        let _ = PREVIOUS.set(slot.read());
        slot.write(Some(class_loaded));
    }
}
