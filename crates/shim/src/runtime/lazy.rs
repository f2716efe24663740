//! GCC's runtime functions for the GNU build (`gnu.rs`, `objc.rs`), not linked but
//! looked up in the loaded images (`dlsym(RTLD_DEFAULT, …)`) at their first call and kept.
//! Until GCC's libobjc is loaded they are not found: each then returns zero (a null class,
//! method or name), which the callers read as "absent", and is looked up again at its next
//! call.
#![allow(non_snake_case)] // the C names

use std::ffi::{c_char, c_void};
use std::sync::atomic::{AtomicUsize, Ordering};

/// The address of the loaded function `name` (NUL-terminated), or 0.
fn find(name: &'static str, cache: &AtomicUsize) -> usize {
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
        pub(super) unsafe fn $name($($arg: $ty),*) -> $ret {
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
