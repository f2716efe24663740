//! On a Mac, the facts docs/apple-runtime.md could only read from Apple's sources and model,
//! checked against the real runtime and Metal (they run in the GitHub macOS job; on Linux
//! this file is empty and the simulated-guest suite stands in):
//!
//! - `_objc_addWillInitializeClassFunc` resolves, and reports `_MTLDevice` (rule 5);
//! - `_MTLDevice` exists and has `-initGPUFamilySupport` with an encoding the shim accepts;
//! - the default device's class, a subclass of `_MTLDevice`, answers each query the shim
//!   hooks with a method of the signature it accepts ("The guest's Metal");
//! - the simulated-guest suite (`tests/simulated_guest`) is Linux-only, and says so.
#![cfg(target_os = "macos")]

use std::ffi::{CStr, c_void};
use std::sync::Mutex;

use capshim::hook::{BASE_CLASS, BASE_SELECTOR};
use capshim::query::{BASE_EXPECTED, Query};
use capshim::runtime::{self, Class, Native, Runtime};

const METAL: &CStr = c"/System/Library/Frameworks/Metal.framework/Metal";

/// Loads Metal into this process (once is enough; dlopen counts references).
fn load_metal() {
    // SAFETY: dlopen with a NUL-terminated path; Metal's initializers are Apple's own.
    let handle = unsafe { libc::dlopen(METAL.as_ptr(), libc::RTLD_NOW) };
    assert!(!handle.is_null(), "cannot load {METAL:?}");
}

/// `MTLCreateSystemDefaultDevice()`: the default device (retained, never released here).
fn default_device() -> *mut c_void {
    load_metal();
    // SAFETY: dlsym with RTLD_DEFAULT and a NUL-terminated name only searches loaded images.
    let symbol =
        unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"MTLCreateSystemDefaultDevice".as_ptr()) };
    assert!(
        !symbol.is_null(),
        "Metal exports no MTLCreateSystemDefaultDevice"
    );
    // SAFETY: MTLCreateSystemDefaultDevice's C type is `id<MTLDevice> (void)` (Metal's
    // MTLDevice.h); a function's address may be transmuted to its own pointer type.
    let create: unsafe extern "C" fn() -> *mut c_void = unsafe { std::mem::transmute(symbol) };
    // SAFETY: no arguments; it returns a retained device or nil.
    let device = unsafe { create() };
    assert!(
        !device.is_null(),
        "MTLCreateSystemDefaultDevice returned nil: this Mac or VM has no Metal device"
    );
    device
}

/// The names of the classes the will-initialize callback reported.
static REPORTED: Mutex<Vec<String>> = Mutex::new(Vec::new());

fn record(class: Class) {
    // Runtime functions only, never a message: the class is about to be initialized.
    let name = Native.class_name(class);
    REPORTED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(name);
}

#[test]
fn will_initialize_resolves_and_reports_mtl_device() {
    runtime::watch_for_class(BASE_CLASS, record)
        .expect("_objc_addWillInitializeClassFunc did not resolve in this process");
    // Creating a device initializes _MTLDevice, if nothing did before; registering after that
    // calls back at once for it (rule 5), so the order of the tests does not matter.
    let _device = default_device();
    let reported = REPORTED.lock().unwrap_or_else(|e| e.into_inner()).clone();
    assert!(
        reported.iter().any(|n| n == "_MTLDevice"),
        "the callback never reported _MTLDevice; it reported {reported:?}"
    );
}

#[test]
fn mtl_device_has_the_hook_point_with_an_encoding_the_shim_accepts() {
    load_metal();
    let rt = Native;
    let base = rt
        .look_up_class(BASE_CLASS)
        .expect("Metal is loaded but has no _MTLDevice class");
    let sel = rt.selector(BASE_SELECTOR);
    assert!(
        rt.defines(base, sel),
        "_MTLDevice (or a superclass) defines no -initGPUFamilySupport"
    );
    let resolved = rt
        .resolve(base, sel)
        .expect("-initGPUFamilySupport does not resolve");
    let types = String::from_utf8_lossy(resolved.types.to_bytes()).into_owned();
    assert!(
        BASE_EXPECTED.accepts(resolved.types.to_bytes()),
        "-[_MTLDevice initGPUFamilySupport] has encoding {types:?}, not {}",
        BASE_EXPECTED.describe
    );
    eprintln!("-[_MTLDevice initGPUFamilySupport]: {types}");
}

/// Whether this Mac is a virtual machine (`sysctl kern.hv_vmm_present` is 1).
fn in_a_vm() -> bool {
    let out = std::process::Command::new("/usr/sbin/sysctl")
        .args(["-n", "kern.hv_vmm_present"])
        .output()
        .expect("sysctl");
    String::from_utf8_lossy(&out.stdout).trim() == "1"
}

#[test]
fn the_default_device_class_answers_each_query_with_a_signature_the_shim_accepts() {
    let device = default_device();
    // SAFETY: `device` is a live object MTLCreateSystemDefaultDevice returned.
    let class = unsafe { runtime::object_class(device) }.expect("the device has no class");
    let rt = Native;
    let name = rt.class_name(class);
    eprintln!("the default device's class: {name}");
    if in_a_vm() {
        assert_eq!(name, "AppleParavirtDevice", "the guest's device class");
    }
    // A subclass of _MTLDevice: the hook point is inherited by the device the shim hooks.
    let mut ancestors = Vec::new();
    let mut c = rt.superclass(class);
    while let Some(k) = c {
        ancestors.push(rt.class_name(k));
        c = rt.superclass(k);
    }
    assert!(
        ancestors.iter().any(|a| a == "_MTLDevice"),
        "{name} does not inherit from _MTLDevice: {ancestors:?}"
    );
    for q in Query::ALL {
        let sel = rt.selector(q.selector());
        let resolved = rt
            .resolve(class, sel)
            .unwrap_or_else(|| panic!("{name} does not answer {:?}", q.selector()));
        let types = String::from_utf8_lossy(resolved.types.to_bytes()).into_owned();
        assert!(
            q.expected().accepts(resolved.types.to_bytes()),
            "-[{name} {}] has encoding {types:?}, not {}",
            q.selector().to_string_lossy(),
            q.expected().describe
        );
        eprintln!("-[{name} {}]: {types}", q.selector().to_string_lossy());
    }
}

#[test]
fn the_simulated_guest_suite_is_linux_only() {
    let why = capshim_simguest::guest()
        .expect_err("the simulated guest is built on Linux only, yet it says it is built here");
    eprintln!(
        "note: tests/simulated_guest does not run here ({why}); this file checks the real \
         runtime and device instead"
    );
}
