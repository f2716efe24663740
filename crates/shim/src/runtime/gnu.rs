//! GCC's GNU Objective-C runtime (`libobjc.so`): what differs from Apple's.
//!
//! Used on Linux to test the shim on a real runtime and a simulated Metal library. GCC's
//! runtime is more forgiving than Apple's (its lock is recursive), so the Apple path is tested
//! separately, against a model of Apple's semantics (the `apple-model` feature).
//!
//! Differences that matter here: `object_getClass` is an inline function in the headers (an
//! object's class is its first word, `class_pointer`), and `class_replaceMethod` on an
//! inherited method changes the superclass's method.
//!
//! libobjc is not linked: every runtime function is looked up with `dlsym` when first called
//! (`lazy.rs`), so a process without Objective-C never loads GCC's runtime because of the shim.
//! A class loaded later is seen by standing in for `__objc_exec_class`, the function through
//! which every module compiled by GCC registers its classes from its constructor: the shim's
//! (preloaded, so found first) calls the runtime's, then looks for the watched class, outside
//! the runtime's lock.

use std::ffi::{CStr, c_void};
use std::sync::OnceLock;

use super::lazy::{
    __objc_resolve_class_links, class_addMethod, class_getInstanceMethod, class_respondsToSelector,
    method_setImplementation,
};
use super::objc::{look_up_class, superclass};
use super::{Class, Imp, Sel, Types, Watch, WatchUnavailable};

/// Which runtime this module calls.
pub(super) const KIND: &str = "gnu";

/// Links every loaded class to its superclass. While the GNU runtime is still loading a
/// module, a class's superclass field can still hold the
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

/// GCC's `__objc_exec_class(struct objc_module *)`, which each module's constructor calls to
/// register its classes; this library, preloaded, is found before libobjc. Passes the call on
/// to libobjc's, then, outside the runtime's lock, gives the watched class to the callback once
/// it is loaded. Runs before the shim's initializer for modules loaded with the program (their
/// constructors come first): nothing is watched yet then.
///
/// # Safety
/// Called by GCC-compiled module constructors with their module descriptor, as libobjc's is.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __objc_exec_class(module: *mut c_void) {
    static REAL: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let mut real = REAL.load(std::sync::atomic::Ordering::Relaxed);
    if real == 0 {
        // SAFETY: dlsym with RTLD_NEXT and a NUL-terminated name searches the images loaded
        // after this one: libobjc's own __objc_exec_class.
        real = unsafe { libc::dlsym(libc::RTLD_NEXT, c"__objc_exec_class".as_ptr()) } as usize;
        REAL.store(real, std::sync::atomic::Ordering::Relaxed);
    }
    if real != 0 {
        // SAFETY: `real` is libobjc's __objc_exec_class, `void (struct objc_module *)`; the
        // module pointer is passed on as the constructor gave it.
        let real: unsafe extern "C" fn(*mut c_void) = unsafe { std::mem::transmute(real) };
        // SAFETY: as above.
        unsafe { real(module) };
    }
    let Some(&(name, callback)) = WATCHED.get() else {
        return;
    };
    if let Some(class) = look_up_class(name) {
        // A panic must not unwind into the module's constructor.
        let _ = std::panic::catch_unwind(|| callback(class));
    }
}

/// Calls `callback` with the class named `name` when a module that GCC's runtime loads brings
/// it (see [`__objc_exec_class`]). Only the first call registers.
pub(super) fn watch_for_class(
    name: &'static CStr,
    callback: fn(Class),
) -> Result<(), WatchUnavailable> {
    let _ = WATCHED.set((name, callback));
    Ok(())
}
