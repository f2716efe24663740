//! Apple's Objective-C runtime (`/usr/lib/libobjc.A.dylib`), on macOS.
//!
//! Linked through a small `.tbd` text stub kept in the repository
//! (`crates/shim/stubs/libobjc.tbd`), because the cross-linker has no macOS SDK.

use std::ffi::{c_char, c_void};
use std::sync::OnceLock;

use super::objc::ObjcRuntime;
use super::{Class, Imp, Sel, Types};

#[link(name = "objc")]
unsafe extern "C" {
    fn class_replaceMethod(
        class: *mut c_void,
        sel: *const c_void,
        imp: usize,
        types: *const c_char,
    ) -> usize;
    fn object_getClass(object: *mut c_void) -> *mut c_void;
}

unsafe extern "C" {
    // libdyld, part of libSystem on every macOS version.
    fn _dyld_register_func_for_add_image(callback: unsafe extern "C" fn(*const c_void, isize));
}

/// Makes `class` itself answer `sel` with `imp`; see [`crate::runtime::Runtime::replace`].
pub(super) fn replace(_rt: &ObjcRuntime, class: Class, sel: Sel, imp: Imp, types: Types) -> bool {
    // SAFETY: `class`/`sel` came from the runtime; `imp` is one of our `extern "C"`
    // implementations with the signature `types` describes (the encoding of the method
    // it replaces, owned by the runtime). class_replaceMethod takes the runtime lock and
    // flushes method caches.
    unsafe { class_replaceMethod(class.0, sel.0, imp.0, types.as_ptr()) };
    true
}

/// Apple's runtime realizes classes before anyone can look them up: nothing to do.
pub(super) fn link_classes() {}

/// `object_getClass(object)`.
///
/// # Safety
/// `object` must be a valid, non-null Objective-C object pointer (tagged pointers included).
pub unsafe fn object_class(object: *mut c_void) -> Option<Class> {
    // SAFETY: the caller guarantees a live object; object_getClass handles tagged pointers.
    let class = unsafe { object_getClass(object) };
    (!class.is_null()).then_some(Class(class))
}

static LOADED: OnceLock<fn()> = OnceLock::new();

type LoadImageFunc = unsafe extern "C" fn(*const c_void);

unsafe extern "C" fn objc_image_loaded(_header: *const c_void) {
    if let Some(callback) = LOADED.get() {
        let _ = std::panic::catch_unwind(callback);
    }
}

unsafe extern "C" fn dyld_image_added(_header: *const c_void, _slide: isize) {
    if let Some(callback) = LOADED.get() {
        let _ = std::panic::catch_unwind(callback);
    }
}

/// Registers for image loads: `objc_addLoadImageFunc` (macOS 13+: called once an image's
/// Objective-C classes are set up) when the runtime has it, else dyld's add-image callback.
/// Both also call back at once for every image already loaded. Only the first call registers.
pub fn on_classes_loaded(callback: fn()) {
    if LOADED.set(callback).is_err() {
        return;
    }
    // Looked up at run time rather than linked, so that the dylib still loads (and the
    // host process still starts) on a macOS without it.
    // SAFETY: dlsym with RTLD_DEFAULT and a NUL-terminated name only searches loaded images.
    let symbol = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"objc_addLoadImageFunc".as_ptr()) };
    if symbol.is_null() {
        // SAFETY: the callback has the signature dyld documents and stays valid for the life
        // of the process (it is a function in this image, which is never unloaded once
        // injected).
        unsafe { _dyld_register_func_for_add_image(dyld_image_added) };
    } else {
        // SAFETY: `symbol` is objc_addLoadImageFunc, `void (*)(void (*)(const struct
        // mach_header *))`; transmuting its address to that function type is sound.
        let add: unsafe extern "C" fn(LoadImageFunc) = unsafe { std::mem::transmute(symbol) };
        // SAFETY: as above; our callback lives as long as the process.
        unsafe { add(objc_image_loaded) };
    }
}
