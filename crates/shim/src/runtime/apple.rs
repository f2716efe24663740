//! Apple's Objective-C runtime (`/usr/lib/libobjc.A.dylib`), on macOS.
//!
//! Linked through a small `.tbd` text stub kept in the repository
//! (`crates/shim/stubs/libobjc.tbd`), because the cross-linker has no macOS SDK.

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
    fn class_replaceMethod(
        class: *mut c_void,
        sel: *const c_void,
        imp: usize,
        types: *const c_char,
    ) -> usize;
    fn class_getName(class: *mut c_void) -> *const c_char;
    fn class_getSuperclass(class: *mut c_void) -> *mut c_void;
    fn object_getClass(object: *mut c_void) -> *mut c_void;
}

unsafe extern "C" {
    // libdyld, part of libSystem on every macOS version.
    fn _dyld_register_func_for_add_image(callback: unsafe extern "C" fn(*const c_void, isize));
}

/// Apple's runtime; a unit struct because all state lives in the runtime itself.
#[derive(Clone, Copy, Debug, Default)]
pub struct ObjcRuntime;

impl Runtime for ObjcRuntime {
    fn look_up_class(&self, name: &CStr) -> Option<Class> {
        // SAFETY: `name` is NUL-terminated; objc_lookUpClass returns nil for unknown classes
        // and, unlike objc_getClass, never calls a class handler.
        let class = unsafe { objc_lookUpClass(name.as_ptr()) };
        (!class.is_null()).then_some(Class(class))
    }

    fn selector(&self, name: &CStr) -> Sel {
        // SAFETY: `name` is NUL-terminated; the runtime interns a copy.
        Sel(unsafe { sel_registerName(name.as_ptr()) })
    }

    fn resolve(&self, class: Class, sel: Sel) -> Option<Resolved> {
        // SAFETY: `class` and `sel` came from the runtime; the call searches method lists.
        let method = unsafe { class_getInstanceMethod(class.0, sel.0) };
        if method.is_null() {
            return None;
        }
        // SAFETY: `method` is a non-null Method just returned by the runtime, valid while
        // its class is loaded.
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
        // SAFETY: `class`/`sel` came from the runtime; `imp` is one of our `extern "C"`
        // implementations with the signature `types` describes (the encoding of the method
        // it replaces, owned by the runtime). class_replaceMethod takes the runtime lock and
        // flushes method caches.
        unsafe { class_replaceMethod(class.0, sel.0, imp.0, types.as_ptr()) };
        true
    }

    fn class_name(&self, class: Class) -> String {
        // SAFETY: `class` came from the runtime; the name lives as long as the class.
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
        // SAFETY: `class` came from the runtime.
        let superclass = unsafe { class_getSuperclass(class.0) };
        (!superclass.is_null()).then_some(Class(superclass))
    }
}

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
