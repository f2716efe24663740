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

use std::cell::UnsafeCell;
use std::ffi::{CStr, c_void};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};

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

static INSTALL: InstallLock = InstallLock(UnsafeCell::new(libc::PTHREAD_MUTEX_INITIALIZER));
static BASE_ORIGINAL: AtomicUsize = AtomicUsize::new(0);
static BASE_STATE: AtomicU8 = AtomicU8::new(EMPTY);
/// Run once, after the first device class is hooked (`CAPSHIM_SCOPE=process` then takes the
/// shim out of the environment children inherit).
static AFTER_FIRST_HOOK: OnceLock<fn()> = OnceLock::new();
/// Whether a `fork()`ed child answers stock (`CAPSHIM_SCOPE=process`).
static DISARM_IN_CHILD: AtomicBool = AtomicBool::new(false);

/// The lock that serializes installing hooks: a plain `pthread_mutex_t`, so that a `fork()`ed
/// child can make it usable again ([`after_fork_in_child`]) when another thread of the parent
/// held it at the fork: that thread does not exist in the child and would never release it.
struct InstallLock(UnsafeCell<libc::pthread_mutex_t>);

// SAFETY: the mutex is only used through pthread_mutex_lock/unlock, which synchronize the
// threads that share it.
unsafe impl Sync for InstallLock {}

struct InstallGuard;

impl Drop for InstallGuard {
    fn drop(&mut self) {
        // SAFETY: a guard exists only while this thread holds the lock (`lock`).
        unsafe { libc::pthread_mutex_unlock(INSTALL.0.get()) };
    }
}

fn lock() -> InstallGuard {
    // A panic caught while the lock was held still unlocks it (the guard's drop). Entries are
    // filled in order and each is published whole (originals before class), so the table
    // stays consistent; a class left INSTALLING is simply not retried.
    // SAFETY: a statically initialized default mutex, locked here and unlocked by the guard
    // on this thread; nothing locks it recursively (no runtime callback reaches `lock`
    // while this thread holds it: install_all only calls runtime functions that do not call
    // back into the shim).
    unsafe { libc::pthread_mutex_lock(INSTALL.0.get()) };
    InstallGuard
}

/// Registers the child handler of `fork()` (`pthread_atfork`), under every scope: in the child
/// the install lock is made usable again, and with `disarm` every replacement answers with the
/// original from then on and no further class is hooked. Called once, from the initializer.
pub fn prepare_for_fork(disarm: bool) {
    DISARM_IN_CHILD.store(disarm, Ordering::Relaxed);
    // SAFETY: pthread_atfork only records the handler; it is a function of this library, which
    // an inserted library never unloads, and does only async-signal-safe work.
    let _ = unsafe { libc::pthread_atfork(None, None, Some(after_fork_in_child)) };
}

/// The `fork()` child handler. Only the forking thread exists in the child, so no one holds
/// or waits for the install lock: re-initializing it is what Libc does for its own locks in
/// the child (`__environ_lock_fork_child`, stdlib/FreeBSD/getenv.c). An installation another
/// thread had under way stays INSTALLING and is never resumed or redone; what it published is
/// consistent (originals before replacements). Async-signal-safe: memory stores only.
extern "C" fn after_fork_in_child() {
    // SAFETY: no other thread exists in the child to hold or use the mutex; writing the static
    // initializer over it leaves an unlocked mutex, as at load.
    unsafe { INSTALL.0.get().write(libc::PTHREAD_MUTEX_INITIALIZER) };
    if DISARM_IN_CHILD.load(Ordering::Relaxed) {
        table::DISARMED.store(true, Ordering::Relaxed);
    }
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
            if let Err(why) = runtime::watch_for_class(BASE_CLASS, install_base_when_reported) {
                report::failed(&BASE_CLASS.to_string_lossy(), why.0);
            }
        }
    }
}

/// [`install_base`] from the runtime's notification. On Apple's runtime that comes with
/// `_MTLDevice`'s `+initialize` lock held (objc4 906 and later; docs/apple-runtime.md rule 5),
/// which every thread creating a device waits for: reports made there are held back and
/// written later ([`report::holding_back`]).
fn install_base_when_reported(base: Class) {
    report::holding_back(|| install_base(base));
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
        // Marked first: in a child fork()ed in the middle of this, the replacement may be in
        // already, and must not be installed again over itself.
        BASE_STATE.store(INSTALLING, Ordering::Release);
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
                report::LOAD_TIME,
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
        // The first device call after a report was held back under a class's +initialize lock.
        report::flush();
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
