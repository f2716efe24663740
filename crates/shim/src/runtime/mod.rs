//! The few Objective-C runtime calls the hook needs, behind one small interface.
//!
//! The C API both runtimes share is declared once (`objc.rs`); what differs lives in
//! one module per runtime: `apple` (macOS, `libobjc.A.dylib`) and `gnu` (GCC's libobjc on
//! Linux, used to test the shim on a real runtime). The hook
//! logic in [`crate::hook`] is plain Rust over the [`Runtime`] trait, so its
//! all-or-nothing installation is also unit-tested against a fake runtime.

use std::ffi::{CStr, c_char, c_void};

#[cfg(target_vendor = "apple")]
pub mod apple;
#[cfg(not(target_vendor = "apple"))]
pub mod gnu;
mod objc;

#[cfg(target_vendor = "apple")]
use apple as platform;
#[cfg(not(target_vendor = "apple"))]
use gnu as platform;

/// The runtime of this process (Apple's on macOS, GCC's GNU runtime elsewhere).
pub use objc::ObjcRuntime as Native;

/// An Objective-C class pointer (`Class`), never null.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Class(pub *mut c_void);

/// An interned selector (`SEL`).
#[repr(transparent)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Sel(pub *const c_void);

/// A method implementation (`IMP`), as an address. Zero means "none".
#[repr(transparent)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Imp(pub usize);

/// A method's Objective-C type encoding, owned by the runtime (or static). Only the
/// runtime modules and [`Types::from_static`] make one, so a `Types` always points at a
/// valid NUL-terminated string.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Types(*const c_char);

impl Types {
    /// A type encoding from a static string, e.g. `c"v16@0:8"`.
    pub fn from_static(encoding: &'static CStr) -> Types {
        Types(encoding.as_ptr())
    }

    /// The raw pointer, for passing back to the runtime.
    pub fn as_ptr(self) -> *const c_char {
        self.0
    }

    /// Wraps a pointer the runtime returned; `None` when null.
    pub(crate) fn from_runtime(encoding: *const c_char) -> Option<Types> {
        (!encoding.is_null()).then_some(Types(encoding))
    }
}

/// A resolved instance method: its current implementation and its type encoding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Resolved {
    /// The implementation a message to an instance of the class runs now
    /// (the class's own, or inherited).
    pub imp: Imp,
    /// The method's Objective-C type encoding, needed to add an override.
    pub types: Types,
}

/// The runtime operations the hook uses. Implementations must be callable from any thread.
pub trait Runtime {
    /// `objc_lookUpClass`: the class named `name`, if it is loaded. Never triggers a
    /// class-loading handler.
    fn look_up_class(&self, name: &CStr) -> Option<Class>;
    /// `sel_registerName`.
    fn selector(&self, name: &CStr) -> Sel;
    /// `class_getInstanceMethod` + `method_getImplementation`/`method_getTypeEncoding`:
    /// the method instances of `class` run for `sel`, inherited or not.
    fn resolve(&self, class: Class, sel: Sel) -> Option<Resolved>;
    /// `class_replaceMethod`: makes `class` itself answer `sel` with `imp` (adding an override
    /// when the method was inherited). Returns false when the runtime refused.
    fn replace(&self, class: Class, sel: Sel, imp: Imp, types: Types) -> bool;
    /// `class_getName`.
    fn class_name(&self, class: Class) -> String;
    /// `class_getSuperclass`; `None` at a root class.
    fn superclass(&self, class: Class) -> Option<Class>;
}

/// `object_getClass` for a receiver the runtime passed to one of our method
/// implementations.
///
/// # Safety
/// `object` must be a valid, non-null Objective-C object pointer.
pub unsafe fn object_class(object: *mut c_void) -> Option<Class> {
    // SAFETY: forwarded from the caller: `object` is a live object.
    unsafe { platform::object_class(object) }
}

/// Asks the runtime to call `callback` whenever new Objective-C classes are loaded
/// (a new image on macOS, each class on the GNU runtime), so the hook can be
/// installed when Metal is loaded late. Calls may come from any thread.
pub fn on_classes_loaded(callback: fn()) {
    platform::on_classes_loaded(callback);
}
