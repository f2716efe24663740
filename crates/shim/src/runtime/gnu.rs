//! GCC's GNU Objective-C runtime (`libobjc.so`): what differs from Apple's.
//!
//! Used on Linux to test the shim on a real runtime and a simulated Metal library. GCC's
//! runtime is more forgiving than Apple's (its lock is recursive), so the Apple path is tested
//! separately, against a model of Apple's semantics (the `apple-model` feature).
//!
//! Differences that matter here: `object_getClass` is an inline function in the headers (an
//! object's class is its first word, `class_pointer`), loading is observed through the
//! `_objc_load_callback` hook, which `__objc_exec_class` calls for every class it loads, and
//! `class_replaceMethod` on an inherited method changes the superclass's method.

use std::ffi::{CStr, c_char, c_void};
use std::sync::OnceLock;

use super::objc::{class_getInstanceMethod, class_name_is, superclass};
use super::{Class, Imp, Sel, Types, Watch, WatchUnavailable};

/// Which runtime this module calls.
pub(super) const KIND: &str = "gnu";

#[link(name = "objc")]
unsafe extern "C" {
    fn class_addMethod(
        class: *mut c_void,
        sel: *const c_void,
        imp: usize,
        types: *const c_char,
    ) -> u8;
    fn method_setImplementation(method: *mut c_void, imp: usize) -> usize;
    fn class_respondsToSelector(class: *mut c_void, sel: *const c_void) -> u8;
    fn __objc_resolve_class_links();
    static mut _objc_load_callback: Option<unsafe extern "C" fn(*mut c_void, *mut c_void)>;
}

/// Links every loaded class to its superclass. While the GNU runtime is still loading a
/// module (when it calls our load callback), a class's superclass field can still hold the
/// superclass's *name*: walking the hierarchy then would read a string as a class. The
/// runtime links classes itself at the end of loading; doing it earlier is what it does
/// anyway, and does nothing for classes already linked.
pub(super) fn link_classes() {
    // SAFETY: __objc_resolve_class_links takes no arguments, takes the runtime's (recursive)
    // lock, and only links classes whose superclass is loaded.
    unsafe { __objc_resolve_class_links() };
}

/// Makes `class` itself answer `sel` with `imp`; see [`crate::runtime::Runtime::replace`].
///
/// # Safety
/// As [`crate::runtime::Runtime::replace`]: `imp` has the signature `types` describes.
pub(super) unsafe fn replace(class: Class, sel: Sel, imp: Imp, types: Types) -> bool {
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
        unsafe { class_respondsToSelector(current.as_ptr(), sel.as_ptr()) };
        chain = superclass(current);
    }
    // GNU's class_replaceMethod finds the method through the class hierarchy and so,
    // for an inherited method, changes the superclass's implementation for every
    // subclass. Apple's adds an override to the class itself, which is what we need:
    // change the class's own method, or add one when it only inherits it.
    // SAFETY: `class` and `sel` came from the runtime; class_getInstanceMethod only
    // searches method lists.
    let method = unsafe { class_getInstanceMethod(class.as_ptr(), sel.as_ptr()) };
    let inherited = match superclass(class) {
        Some(superclass) => {
            // SAFETY: as above, for the superclass the runtime returned.
            let inherited = unsafe { class_getInstanceMethod(superclass.as_ptr(), sel.as_ptr()) };
            !method.is_null() && method == inherited
        }
        None => false,
    };
    if method.is_null() || inherited {
        // SAFETY: the caller guarantees `imp` has the signature `types` describes; `types` is
        // the runtime's own copy of the replaced method's encoding. class_addMethod copies what
        // it needs and updates the dispatch tables of the class and its subclasses.
        unsafe { class_addMethod(class.as_ptr(), sel.as_ptr(), imp.0, types.as_ptr()) != 0 }
    } else {
        // SAFETY: `method` is the class's own Method, just returned by the runtime; the caller
        // guarantees `imp` has its signature. method_setImplementation updates the dispatch
        // tables under the runtime lock.
        unsafe { method_setImplementation(method, imp.0) };
        true
    }
}

/// The class of `object`: its first word, as the GNU headers' inline `object_getClass` reads it.
///
/// # Safety
/// `object` must be a valid, non-null Objective-C object pointer.
pub(super) unsafe fn object_class(object: *mut c_void) -> Option<Class> {
    // SAFETY: the caller guarantees `object` is a live object, whose first word is its
    // `class_pointer` in the GNU runtime's object layout.
    Class::from_runtime(unsafe { *(object as *const *mut c_void) })
}

static WATCHED: OnceLock<Watch> = OnceLock::new();
static PREVIOUS: OnceLock<Option<unsafe extern "C" fn(*mut c_void, *mut c_void)>> = OnceLock::new();

unsafe extern "C" fn class_loaded(class: *mut c_void, category: *mut c_void) {
    if let Some(Some(previous)) = PREVIOUS.get() {
        // SAFETY: we pass on exactly the arguments the runtime gave us to the callback that
        // was installed before ours, as the runtime itself would have.
        unsafe { previous(class, category) };
    }
    let Some(&(name, callback)) = WATCHED.get() else {
        return;
    };
    if let Some(class) = Class::from_runtime(class).filter(|_| category.is_null())
        && class_name_is(class, name)
    {
        // A panic must not unwind into the runtime's C frames.
        let _ = std::panic::catch_unwind(|| callback(class));
    }
}

/// Calls `callback` with the class named `name` when GCC's runtime loads it, by chaining into
/// `_objc_load_callback`. Only the first call registers.
pub(super) fn watch_for_class(
    name: &'static CStr,
    callback: fn(Class),
) -> Result<(), WatchUnavailable> {
    if WATCHED.set((name, callback)).is_err() {
        return Ok(());
    }
    // SAFETY: `_objc_load_callback` is a plain function-pointer variable of libobjc. We read
    // and write it once, from the shim's initializer, before any code of ours could have
    // started threads; the runtime reads it under its own lock when it loads classes.
    unsafe {
        let slot = &raw mut _objc_load_callback;
        let _ = PREVIOUS.set(slot.read());
        slot.write(Some(class_loaded));
    }
    Ok(())
}
