//! Apple's Objective-C runtime (`/usr/lib/libobjc.A.dylib`): what differs from GCC's.
//!
//! Built for macOS, and for Linux with the `apple-model` feature: there the functions below are
//! left undefined in `libcapshim.so` and come from a model of Apple's semantics preloaded before
//! it (`crates/simguest/applemodel`). On macOS the linker finds libobjc through a `.tbd` stub
//! (`crates/shim/stubs/libobjc.tbd`), because the cross-linker has no macOS SDK.
//!
//! Every behaviour relied on here is recorded, with its objc4 source, in docs/apple-runtime.md.

use std::ffi::{CStr, c_char, c_void};
use std::sync::OnceLock;

use super::objc::class_name_is;
use super::{Class, Imp, Sel, Types, Watch, WatchUnavailable};

/// Which runtime this module calls.
pub(super) const KIND: &str = "apple";

#[cfg_attr(target_vendor = "apple", link(name = "objc"))]
unsafe extern "C" {
    fn class_replaceMethod(
        class: *mut c_void,
        sel: *const c_void,
        imp: usize,
        types: *const c_char,
    ) -> usize;
    fn object_getClass(object: *mut c_void) -> *mut c_void;
}

/// Makes `class` itself answer `sel` with `imp`; see [`crate::runtime::Runtime::replace`].
///
/// objc4's `class_replaceMethod` changes the class's own method, or, when the class only
/// inherits it, adds an override to the class (returning nil); either way under the runtime
/// lock, flushing method caches.
///
/// # Safety
/// As [`crate::runtime::Runtime::replace`]: `imp` has the signature `types` describes.
pub(super) unsafe fn replace(class: Class, sel: Sel, imp: Imp, types: Types) -> bool {
    // SAFETY: `class`/`sel` came from the runtime; the caller guarantees `imp` matches `types`
    // (the runtime's own encoding of the replaced method). The return value (the previous
    // implementation, or nil for an added override) says nothing about success; the hook
    // checks that the replacement took effect by resolving the method again.
    unsafe { class_replaceMethod(class.as_ptr(), sel.as_ptr(), imp.0, types.as_ptr()) };
    true
}

/// Apple's runtime realizes a class (and its superclasses) before it returns it: nothing to do.
pub(super) fn link_classes() {}

/// `object_getClass(object)`.
///
/// # Safety
/// `object` must be a valid, non-null Objective-C object pointer (tagged pointers included).
pub(super) unsafe fn object_class(object: *mut c_void) -> Option<Class> {
    // SAFETY: the caller guarantees a live object; object_getClass takes no lock and handles
    // tagged pointers.
    Class::from_runtime(unsafe { object_getClass(object) })
}

/// The class name and callback [`watch_for_class`] was asked for, set once.
static WATCHED: OnceLock<Watch> = OnceLock::new();

/// `_objc_func_willInitializeClass`: `void (*)(void *context, Class cls)`.
type WillInitializeFunc = unsafe extern "C" fn(*mut c_void, *mut c_void);
/// `_objc_addWillInitializeClassFunc`: `void (*)(_objc_func_willInitializeClass, void *)`.
type AddWillInitializeFunc = unsafe extern "C" fn(WillInitializeFunc, *mut c_void);

/// Called by objc4 just before each class's `+initialize` (superclass first), outside the
/// runtime lock, and at registration for every class already initializing or initialized.
/// The class may be queried and changed with runtime functions, never messaged. Runs for
/// every class the process initializes, so it does no more than compare a name.
unsafe extern "C" fn will_initialize(_context: *mut c_void, class: *mut c_void) {
    let Some(&(name, callback)) = WATCHED.get() else {
        return;
    };
    let Some(class) = Class::from_runtime(class) else {
        return;
    };
    if class_name_is(class, name) {
        // A panic must not unwind into the runtime's C frames.
        let _ = std::panic::catch_unwind(|| callback(class));
    }
}

/// Calls `callback` with the class named `name` just before it is initialized (or at once, if
/// it already was), through `_objc_addWillInitializeClassFunc`. Only the first call registers.
pub(super) fn watch_for_class(
    name: &'static CStr,
    callback: fn(Class),
) -> Result<(), WatchUnavailable> {
    if WATCHED.set((name, callback)).is_err() {
        return Ok(());
    }
    // Looked up at run time rather than linked: it is SPI, exported since macOS 10.15, and a
    // missing import would stop the host process from starting.
    // SAFETY: dlsym with RTLD_DEFAULT and a NUL-terminated name only searches loaded images.
    let symbol = unsafe {
        libc::dlsym(
            libc::RTLD_DEFAULT,
            c"_objc_addWillInitializeClassFunc".as_ptr(),
        )
    };
    if symbol.is_null() {
        return Err(WatchUnavailable(
            "this Objective-C runtime has no _objc_addWillInitializeClassFunc (macOS 10.15 and \
             later have it), so a Metal loaded after start cannot be hooked",
        ));
    }
    // SAFETY: `symbol` is objc4's _objc_addWillInitializeClassFunc, whose C type is
    // AddWillInitializeFunc (runtime/objc-internal.h); a function's address may be transmuted
    // to its own function-pointer type.
    let add: AddWillInitializeFunc = unsafe { std::mem::transmute(symbol) };
    // SAFETY: `will_initialize` has the callback type objc4 expects and, being a function of
    // this image, stays valid for the life of the process (an inserted library is never
    // unloaded). The context pointer is unused. Registration calls back at once, outside any
    // runtime lock, for classes already initialized.
    unsafe { add(will_initialize, std::ptr::null_mut()) };
    Ok(())
}
