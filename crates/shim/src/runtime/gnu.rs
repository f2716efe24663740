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
//! ([`lazy`]), so a process without Objective-C never loads GCC's runtime because of the shim.
//! A class loaded later is seen by standing in for `__objc_exec_class`, the function through
//! which every module compiled by GCC registers its classes from its constructor: the shim's
//! (preloaded, so found first) calls the runtime's, then looks for the watched class, outside
//! the runtime's lock.

use std::ffi::{CStr, c_void};
use std::sync::OnceLock;

use super::objc::{look_up_class, superclass};
use super::{Class, Imp, Sel, Types, Watch, WatchUnavailable};
use lazy::class_getInstanceMethod;

/// Which runtime this module calls.
pub(super) const KIND: &str = "gnu";

/// The runtime functions, looked up in the loaded images (`dlsym(RTLD_DEFAULT, …)`) at their
/// first call and kept. Until GCC's libobjc is loaded they are not found: each then returns
/// zero (a null class, method or name), which the callers read as "absent", and is looked up
/// again at its next call.
#[allow(non_snake_case)] // the C names
pub(super) mod lazy {
    use std::ffi::{c_char, c_void};
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// The address of the loaded function `name` (NUL-terminated), or 0.
    pub(super) fn find(name: &'static str, cache: &AtomicUsize) -> usize {
        let known = cache.load(Ordering::Relaxed);
        if known != 0 {
            return known;
        }
        // SAFETY: dlsym with RTLD_DEFAULT and a NUL-terminated name only searches loaded
        // images.
        let found = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr().cast()) } as usize;
        cache.store(found, Ordering::Relaxed);
        found
    }

    macro_rules! lazy {
        ($($name:ident($($arg:ident: $ty:ty),*) -> $ret:ty;)*) => {$(
            /// GCC's function of the same name; zero while libobjc is not loaded.
            ///
            /// # Safety
            /// As the runtime function itself.
            pub(in super::super) unsafe fn $name($($arg: $ty),*) -> $ret {
                static CACHE: AtomicUsize = AtomicUsize::new(0);
                let address = find(concat!(stringify!($name), "\0"), &CACHE);
                if address == 0 {
                    // SAFETY: every return type here is a pointer or an integer, for which
                    // all-zero bytes are a valid value (null, or 0).
                    return unsafe { std::mem::zeroed() };
                }
                let function: unsafe extern "C" fn($($ty),*) -> $ret =
                    // SAFETY: `address` is libobjc's function `$name`, whose C signature is
                    // the one declared here (GCC's objc/runtime.h); a function's address may
                    // be transmuted to its own function-pointer type.
                    unsafe { std::mem::transmute(address) };
                // SAFETY: forwarded from the caller.
                unsafe { function($($arg),*) }
            }
        )*};
    }

    lazy! {
        objc_lookUpClass(name: *const c_char) -> *mut c_void;
        sel_registerName(name: *const c_char) -> *const c_void;
        class_getInstanceMethod(class: *mut c_void, sel: *const c_void) -> *mut c_void;
        method_getImplementation(method: *mut c_void) -> usize;
        method_getTypeEncoding(method: *mut c_void) -> *const c_char;
        class_getName(class: *mut c_void) -> *const c_char;
        class_getSuperclass(class: *mut c_void) -> *mut c_void;
        class_copyMethodList(class: *mut c_void, count: *mut u32) -> *mut *mut c_void;
        method_getName(method: *mut c_void) -> *const c_void;
        sel_isEqual(a: *const c_void, b: *const c_void) -> u8;
        class_addMethod(class: *mut c_void, sel: *const c_void, imp: usize, types: *const c_char) -> u8;
        method_setImplementation(method: *mut c_void, imp: usize) -> usize;
        class_respondsToSelector(class: *mut c_void, sel: *const c_void) -> u8;
        __objc_resolve_class_links() -> ();
    }
}

use lazy::{
    __objc_resolve_class_links, class_addMethod, class_respondsToSelector, method_setImplementation,
};

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
