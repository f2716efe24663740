//! The part of the Objective-C runtime C API that Apple's runtime and GCC's GNU runtime
//! share, with the same names and meaning, each behind a small function. What differs
//! (replacing a method, reading an object's class, load notifications) lives in `apple.rs`
//! and `gnu.rs`; both build on this file, never the other way round.

use std::ffi::CStr;
#[cfg(any(target_vendor = "apple", feature = "apple-model"))]
use std::ffi::{c_char, c_void};

use super::{Class, Imp, Resolved, Sel, Types};

// Linked on Apple's runtime (libobjc is in every macOS process). GCC's libobjc is not linked:
// most Linux processes have no Objective-C at all, and loading it into each one is most of
// what the library would cost them; the GNU module looks these up when first called.
#[cfg(not(any(target_vendor = "apple", feature = "apple-model")))]
use super::lazy::{
    class_copyMethodList, class_getInstanceMethod, class_getName, class_getSuperclass,
    method_getImplementation, method_getName, method_getTypeEncoding, objc_lookUpClass,
    sel_isEqual, sel_registerName,
};

#[cfg(any(target_vendor = "apple", feature = "apple-model"))]
#[link(name = "objc")]
unsafe extern "C" {
    fn objc_lookUpClass(name: *const c_char) -> *mut c_void;
    fn sel_registerName(name: *const c_char) -> *const c_void;
    pub(super) fn class_getInstanceMethod(class: *mut c_void, sel: *const c_void) -> *mut c_void;
    fn method_getImplementation(method: *mut c_void) -> usize;
    fn method_getTypeEncoding(method: *mut c_void) -> *const c_char;
    fn class_getName(class: *mut c_void) -> *const c_char;
    fn class_getSuperclass(class: *mut c_void) -> *mut c_void;
    fn class_copyMethodList(class: *mut c_void, count: *mut u32) -> *mut *mut c_void;
    fn method_getName(method: *mut c_void) -> *const c_void;
    fn sel_isEqual(a: *const c_void, b: *const c_void) -> u8;
}

/// `objc_lookUpClass`; see [`Runtime::look_up_class`](super::Runtime::look_up_class).
pub(super) fn look_up_class(name: &CStr) -> Option<Class> {
    // SAFETY: `name` is a valid NUL-terminated string; objc_lookUpClass takes the runtime
    // lock itself, so it must not be called under it (we never are), and returns Nil
    // when the class is absent.
    Class::from_runtime(unsafe { objc_lookUpClass(name.as_ptr()) })
}

/// `sel_registerName`.
pub(super) fn selector(name: &CStr) -> Sel {
    // SAFETY: `name` is a valid NUL-terminated string; the runtime copies it when interning.
    Sel(unsafe { sel_registerName(name.as_ptr()) })
}

/// `class_getInstanceMethod` with the method's implementation and type encoding.
pub(super) fn resolve(class: Class, sel: Sel) -> Option<Resolved> {
    // SAFETY: `class` came from the runtime (objc_lookUpClass or an object's class
    // pointer) and `sel` from sel_registerName; the call searches method lists under the
    // runtime lock, which we do not hold.
    let method = unsafe { class_getInstanceMethod(class.as_ptr(), sel.as_ptr()) };
    if method.is_null() {
        return None;
    }
    // SAFETY: `method` is the non-null Method the runtime just returned; methods are
    // never freed while their class is loaded, and these two calls take no lock.
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

/// Whether `class` itself (not a superclass) has a method for `sel` in its own method list.
/// `class_copyMethodList` takes the runtime lock (which we do not hold), returns a malloc'd
/// array that we free, and runs no resolver.
pub(super) fn own_method_named(class: Class, sel: Sel) -> bool {
    let mut count = 0u32;
    // SAFETY: `class` came from the runtime and `count` is writable; the runtime returns NULL
    // or an array of `count` methods owned by the caller.
    let methods = unsafe { class_copyMethodList(class.as_ptr(), &mut count) };
    if methods.is_null() {
        return false;
    }
    // SAFETY: the runtime allocated `count` Method pointers at `methods`.
    let list = unsafe { std::slice::from_raw_parts(methods, count as usize) };
    // Selectors are compared with sel_isEqual: GCC's runtime may hand out a typed selector
    // for a method and an untyped one from sel_registerName for the same name.
    // SAFETY: each entry is a Method of `class`, alive while the class is loaded;
    // method_getName and sel_isEqual take no lock.
    let found = list
        .iter()
        .any(|&method| unsafe { sel_isEqual(method_getName(method), sel.as_ptr()) } != 0);
    // SAFETY: the array came from class_copyMethodList, which allocates it with malloc and
    // leaves it to the caller to free.
    unsafe { libc::free(methods.cast()) };
    found
}

/// Whether `class` is named `name`, without allocating (called for every class the process
/// initializes on Apple's runtime).
#[cfg(any(target_vendor = "apple", feature = "apple-model"))]
pub(super) fn class_name_is(class: Class, name: &CStr) -> bool {
    // SAFETY: `class` came from the runtime; class_getName returns its NUL-terminated name,
    // which lives as long as the class (objc4: takes no lock for a realized non-Swift class,
    // at most the demangling lock otherwise).
    let actual = unsafe { class_getName(class.as_ptr()) };
    // SAFETY: checked non-null; NUL-terminated as above.
    !actual.is_null() && unsafe { CStr::from_ptr(actual) } == name
}

/// `class_getName`, lossily decoded; `?` when the runtime has none.
pub(super) fn class_name(class: Class) -> String {
    // SAFETY: `class` came from the runtime; class_getName returns its NUL-terminated
    // name, which lives as long as the class.
    let name = unsafe { class_getName(class.as_ptr()) };
    if name.is_null() {
        return String::from("?");
    }
    // SAFETY: non-null and NUL-terminated, as above.
    unsafe { CStr::from_ptr(name) }
        .to_string_lossy()
        .into_owned()
}

/// `class_getSuperclass`; `None` at a root class.
pub(super) fn superclass(class: Class) -> Option<Class> {
    // SAFETY: `class` came from the runtime; class_getSuperclass only reads it.
    Class::from_runtime(unsafe { class_getSuperclass(class.as_ptr()) })
}
