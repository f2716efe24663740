//! The few Objective-C runtime calls the hook needs, behind one small interface.
//!
//! The C API both runtimes share is declared once (`objc.rs`); what differs lives in one
//! module per runtime: `apple` (Apple's `libobjc.A.dylib` on macOS, and on Linux with the
//! `apple-model` feature, against a preloaded model of Apple's semantics) and `gnu` (GCC's
//! libobjc on Linux, a real runtime that is more forgiving than Apple's, which the GNU build
//! does not link: `lazy` looks its functions up when first called). The hook logic in
//! [`crate::hook`] is plain Rust over the [`Runtime`] trait, so its all-or-nothing
//! installation is also unit-tested against a fake runtime.
//!
//! What each Apple runtime function does, and under which lock, is recorded with its objc4
//! source in docs/apple-runtime.md.

use std::ffi::{CStr, c_char, c_void};

#[cfg(any(target_vendor = "apple", feature = "apple-model"))]
mod apple;
#[cfg(not(any(target_vendor = "apple", feature = "apple-model")))]
mod gnu;
#[cfg(not(any(target_vendor = "apple", feature = "apple-model")))]
mod lazy;
mod objc;

#[cfg(any(target_vendor = "apple", feature = "apple-model"))]
use apple as platform;
#[cfg(not(any(target_vendor = "apple", feature = "apple-model")))]
use gnu as platform;

/// The process's Objective-C runtime (Apple's, or GCC's GNU runtime); a unit struct because
/// all state lives in the runtime.
#[derive(Clone, Copy, Debug, Default)]
pub struct Native;

impl Runtime for Native {
    fn look_up_class(&self, name: &CStr) -> Option<Class> {
        objc::look_up_class(name)
    }

    fn selector(&self, name: &CStr) -> Sel {
        objc::selector(name)
    }

    fn defines(&self, class: Class, sel: Sel) -> bool {
        platform::link_classes();
        let mut current = Some(class);
        while let Some(class) = current {
            if objc::own_method_named(class, sel) {
                return true;
            }
            current = objc::superclass(class);
        }
        false
    }

    fn resolve(&self, class: Class, sel: Sel) -> Option<Resolved> {
        // A method the class does not define is searched for in its superclasses, whose
        // links must be set up by then.
        platform::link_classes();
        objc::resolve(class, sel)
    }

    unsafe fn replace(&self, class: Class, sel: Sel, imp: Imp, types: Types) -> bool {
        // SAFETY: forwarded from the caller: `imp` has the signature `types` describes.
        imp.0 != 0 && unsafe { platform::replace(class, sel, imp, types) }
    }

    fn class_name(&self, class: Class) -> String {
        objc::class_name(class)
    }

    fn superclass(&self, class: Class) -> Option<Class> {
        objc::superclass(class)
    }
}

/// Which runtime this build of the shim calls: `"apple"` or `"gnu"`.
pub const KIND: &str = platform::KIND;

/// An Objective-C class pointer (`Class`), never null. Only the runtime modules make one
/// from a pointer, so a `Class` always came from the runtime.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Class(*mut c_void);

impl Class {
    /// Wraps a class pointer the runtime returned; `None` when null.
    pub(crate) fn from_runtime(class: *mut c_void) -> Option<Class> {
        (!class.is_null()).then_some(Class(class))
    }

    /// The raw pointer, for passing back to the runtime.
    pub fn as_ptr(self) -> *mut c_void {
        self.0
    }

    /// The pointer as an address, for lock-free tables.
    pub fn addr(self) -> usize {
        self.0 as usize
    }

    /// A stand-in class for tests of the hook logic against a fake runtime.
    #[cfg(test)]
    pub(crate) fn fake(addr: usize) -> Class {
        Class(addr as *mut c_void)
    }
}

/// An interned selector (`SEL`). Only the runtime modules make one.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Sel(*const c_void);

impl Sel {
    /// The raw pointer, for passing back to the runtime.
    pub fn as_ptr(self) -> *const c_void {
        self.0
    }

    /// A stand-in selector for tests of the hook logic against a fake runtime.
    #[cfg(test)]
    pub(crate) fn fake(name: &'static CStr) -> Sel {
        Sel(name.as_ptr().cast())
    }
}

/// A method implementation (`IMP`), as an address. Zero means "none".
#[repr(transparent)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Imp(pub usize);

/// A method's Objective-C type encoding, owned by the runtime (or static). Only the
/// runtime modules and [`Types::from_static`] make one, so a `Types` always points at a
/// valid NUL-terminated string that lives as long as the method.
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

    /// The encoding's bytes, without the terminating NUL.
    pub fn to_bytes(&self) -> &[u8] {
        // SAFETY: a `Types` is only made from a static C string or from a non-null encoding
        // the runtime returned for a method, which is NUL-terminated and never freed while
        // the method's class is loaded (classes are never unloaded once Metal uses them).
        unsafe { CStr::from_ptr(self.0) }.to_bytes()
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

/// The runtime operations the hook uses. Implementations must be callable from any thread,
/// and only from code the runtime does not run under its own lock (see docs/apple-runtime.md:
/// Apple's runtime lock is not recursive).
pub trait Runtime {
    /// `objc_lookUpClass`: the class named `name`, if it is loaded. Realizes the class but
    /// sends no `+initialize` and calls no class handler.
    fn look_up_class(&self, name: &CStr) -> Option<Class>;
    /// `sel_registerName`.
    fn selector(&self, name: &CStr) -> Sel;
    /// Whether `class` or one of its superclasses has a method for `sel` in its own method
    /// list (`class_copyMethodList`). Unlike `class_getInstanceMethod`, runs no
    /// `+resolveInstanceMethod:` for a missing method, so it never messages (and so never
    /// initializes) the class.
    fn defines(&self, class: Class, sel: Sel) -> bool;
    /// `class_getInstanceMethod` + `method_getImplementation`/`method_getTypeEncoding`:
    /// the method instances of `class` run for `sel`, inherited or not.
    fn resolve(&self, class: Class, sel: Sel) -> Option<Resolved>;
    /// `class_replaceMethod`: makes `class` itself answer `sel` with `imp` (adding an override
    /// when the method was inherited). Returns false when the runtime refused.
    ///
    /// # Safety
    /// `imp` must be a function with the C signature that `types` describes for `sel`, and
    /// must stay valid for the life of the process: every later message to an instance of
    /// `class` (or a subclass that inherits it) calls it.
    unsafe fn replace(&self, class: Class, sel: Sel, imp: Imp, types: Types) -> bool;
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

/// A class name to watch for and what to call with the class: [`watch_for_class`]'s arguments,
/// kept by the runtime module that calls back.
type Watch = (&'static CStr, fn(Class));

/// Why the runtime cannot report a class that appears later.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WatchUnavailable(pub &'static str);

/// Asks the runtime to call `callback` with the class named `name` when it appears, from a
/// context where the runtime may be called (never under the runtime's lock), so the hook can
/// be installed when Metal is loaded after the shim (Python importing MLX). Apple: just before
/// the class's `+initialize` (`_objc_addWillInitializeClassFunc`), or at once if it was already
/// initialized; GNU: when a module that defines it is loaded (`__objc_exec_class`). Calls may come from any
/// thread, and more than once.
///
/// # Errors
/// [`WatchUnavailable`] when this runtime has no such notification (Apple's runtime before
/// macOS 10.15); a Metal loaded later then stays stock.
pub fn watch_for_class(name: &'static CStr, callback: fn(Class)) -> Result<(), WatchUnavailable> {
    platform::watch_for_class(name, callback)
}
