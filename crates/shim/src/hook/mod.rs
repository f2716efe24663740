//! Installing the capability hooks.
//!
//! The hook point is the one the published reference shim proved: Metal calls
//! `-[_MTLDevice initGPUFamilySupport]` while it sets a device up. We replace that method once
//! ([`arm`]): at the shim's initializer when Metal was loaded with the program (its classes are
//! mapped by then), or, for a Metal loaded later, when the runtime reports `_MTLDevice` (on
//! Apple's runtime just before its `+initialize`, which comes before any device exists). Never
//! from a callback the runtime runs under its own lock: Apple's lock is not recursive (see
//! docs/apple-runtime.md). Each time the replaced method runs we hook the concrete class of
//! the device (once per class) and then call the original.
//!
//! On a concrete class, `supportsFamily:`, `maxThreadgroupMemoryLength` and, only when the
//! profile sets it, `recommendedMaxWorkingSetSize` are replaced all-or-nothing
//! ([`install::install_all`]); the replacements live in [`table`].

pub mod install;
pub mod table;

use std::ffi::{CStr, c_void};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

use capshim_profile::Profile;

use crate::query::{BASE_EXPECTED, Query, family_argument_is_32_bit};
use crate::report;
use crate::runtime::{self, Class, Imp, Native, Runtime, Sel};
use install::{HookError, Replacement, install_all};
use table::{EMPTY, FAILED, HOOKED, INSTALLING, MAX_CLASSES, PROFILE};

/// The private base class every Metal device inherits from.
pub const BASE_CLASS: &CStr = c"_MTLDevice";
/// The base-class method Metal calls while setting up a device.
pub const BASE_SELECTOR: &CStr = c"initGPUFamilySupport";

static INSTALL: Mutex<()> = Mutex::new(());
static BASE_ORIGINAL: AtomicUsize = AtomicUsize::new(0);
static BASE_STATE: AtomicU8 = AtomicU8::new(EMPTY);
/// Run once, after the first device class is hooked (`CAPSHIM_SCOPE=process` then takes the
/// shim out of the environment children inherit).
static AFTER_FIRST_HOOK: OnceLock<fn()> = OnceLock::new();

fn lock() -> std::sync::MutexGuard<'static, ()> {
    // A poisoned lock only means a panic was caught while it was held. Entries are filled in
    // order and each is published whole (originals before class), so the table is still
    // consistent; a class left INSTALLING is simply not retried.
    INSTALL
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Arms the hook with `profile`: replaces `-[_MTLDevice initGPUFamilySupport]` now if Metal is
/// loaded, else asks the runtime to report `_MTLDevice` when it appears. `after_first_hook`
/// runs once, after the first device class is hooked. Called once, from the initializer,
/// when configuration is accepted; later calls do nothing.
pub fn arm(profile: Profile, after_first_hook: Option<fn()>) {
    if PROFILE.set(profile).is_err() {
        return;
    }
    if let Some(after) = after_first_hook {
        let _ = AFTER_FIRST_HOOK.set(after);
    }
    match Native.look_up_class(BASE_CLASS) {
        Some(base) => install_base(base),
        None => {
            if let Err(why) = runtime::watch_for_class(BASE_CLASS, install_base) {
                report::failed(&BASE_CLASS.to_string_lossy(), why.0);
            }
        }
    }
}

/// In a `fork()`ed child under `CAPSHIM_SCOPE=process`: every replacement answers with the
/// original from now on, and no further class is hooked. Async-signal-safe (one atomic store).
pub extern "C" fn disarm_after_fork() {
    table::DISARMED.store(true, Ordering::Relaxed);
}

/// Replaces `-[_MTLDevice initGPUFamilySupport]` on `base`, once. Cheap when already done, so
/// the runtime may report the class more than once.
fn install_base(base: Class) {
    if BASE_STATE.load(Ordering::Acquire) != EMPTY {
        return;
    }
    let rt = Native;
    let outcome = {
        let _guard = lock();
        if BASE_STATE.load(Ordering::Acquire) != EMPTY {
            return;
        }
        let replacement = Replacement {
            selector: BASE_SELECTOR,
            imp: Imp(init_gpu_family_support as *const () as usize),
            expected: BASE_EXPECTED,
        };
        // SAFETY: init_gpu_family_support takes (self, _cmd) and returns a pointer-sized value
        // it passes through, which BASE_EXPECTED (no argument, a scalar or no result) matches;
        // it is a function of this library, which is never unloaded.
        let result = unsafe {
            install_all(&rt, base, &[replacement], |originals| {
                BASE_ORIGINAL.store(originals[0].imp.0, Ordering::Release);
            })
        };
        BASE_STATE.store(
            if result.is_ok() { HOOKED } else { FAILED },
            Ordering::Release,
        );
        result
    };
    if let Err(error) = outcome {
        report::failed(&rt.class_name(base), &error.to_string());
    }
}

/// Hooks the concrete class of a device, once. Classes that fail stay stock and are not retried.
fn hook_device_class(class: Class) {
    // Done (or given up) for this class: nothing to do. A class still being installed by
    // another thread is not done: its device must not be set up before the replacements are
    // in, so fall through and wait for the lock, which that thread holds until it finishes.
    if table::slot_of(class).is_some_and(|slot| slot.state() != INSTALLING) {
        return;
    }
    let Some(profile) = PROFILE.get() else { return };
    if table::DISARMED.load(Ordering::Relaxed) {
        static SAID: std::sync::Once = std::sync::Once::new();
        SAID.call_once(|| {
            report::inactive(
                "CAPSHIM_SCOPE=process: a child fork()ed from the process the shim belongs to; it stays stock",
                false,
            );
        });
        return;
    }
    let rt = Native;
    let outcome = {
        let _guard = lock();
        if table::slot_of(class).is_some() {
            return;
        }
        let Some((index, slot)) = table::free_slot() else {
            drop(_guard);
            let error = HookError::TooManyClasses(MAX_CLASSES);
            report::failed(&rt.class_name(class), &error.to_string());
            return;
        };
        let queries = Query::wanted(profile);
        let replacements: Vec<Replacement> = queries
            .iter()
            .map(|&query| Replacement {
                selector: query.selector(),
                imp: table::replacement(index, query),
                expected: query.expected(),
            })
            .collect();
        // The entry is published with the originals before any method is replaced: a device
        // of this class answering on another thread (or a subclass calling `[super …]`) the
        // moment a replacement is installed must find its original, never nothing.
        // SAFETY: entry `index`'s replacements have exactly the signatures `query.expected()`
        // accepts (table.rs), and live as long as the process.
        let result = unsafe {
            install_all(&rt, class, &replacements, |originals| {
                let imps: Vec<Imp> = queries
                    .iter()
                    .zip(originals)
                    .map(|(&query, original)| table::true_original(query, original.imp))
                    .collect();
                let narrow = family_argument_is_32_bit(originals[0].types.to_bytes());
                slot.publish(class, queries, &imps, narrow);
            })
        };
        match &result {
            Ok(_) => slot.finish(HOOKED),
            // Not retried. Originals already published stay valid (what was replaced was put
            // back), so a call still on its way through a replacement is answered correctly.
            Err(_) => {
                if table::slot_of(class).is_none() {
                    // Failed before publishing: record the class so it is not retried.
                    slot.publish(class, &[], &[], false);
                }
                slot.finish(FAILED);
            }
        }
        result
    };
    let name = rt.class_name(class);
    match outcome {
        Ok(_) => {
            report::hooked(&name, profile);
            if let Some(after) = AFTER_FIRST_HOOK.get() {
                static DONE: std::sync::Once = std::sync::Once::new();
                DONE.call_once(after);
            }
        }
        Err(error) => report::failed(&name, &error.to_string()),
    }
}

/// `-[_MTLDevice initGPUFamilySupport]`: hook the device's concrete class, then run the
/// original. The result is passed through as a pointer-sized value, which covers a `void`,
/// BOOL, integer or object result alike (checked against the method's encoding).
unsafe extern "C" fn init_gpu_family_support(this: *mut c_void, cmd: Sel) -> usize {
    let _ = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: `this` is the receiver the runtime passed us, a live device object.
        if let Some(class) = unsafe { runtime::object_class(this) } {
            hook_device_class(class);
        }
    }));
    let original = BASE_ORIGINAL.load(Ordering::Acquire);
    if original == 0 {
        return 0;
    }
    type InitFn = unsafe extern "C" fn(*mut c_void, Sel) -> usize;
    // SAFETY: `original` is the implementation `-[_MTLDevice initGPUFamilySupport]` had before
    // we replaced it, published before our replacement was installed; its encoding was checked
    // to take only (self, _cmd) and return nothing or a scalar.
    unsafe { std::mem::transmute::<usize, InitFn>(original)(this, cmd) }
}
