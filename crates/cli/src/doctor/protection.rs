//! System Integrity Protection (`csrutil status`) and what it means for
//! `DYLD_INSERT_LIBRARIES`: with SIP on, dyld removes the variable from Apple's programs;
//! with SIP off it reaches them, and dyld terminates Apple's arm64e programs because
//! libcapshim has no arm64e slice (docs/apple-runtime.md, rules 11 and 12). The words are
//! `run`'s own ([`apple_programs_warning`]).

use capshim_macho::Arch;

use super::gather::Gathered;
use super::library::Library;
use super::{Check, Status};
use crate::launch::dylib::Flavor;
use crate::launch::environment::ScopeArg;
use crate::launch::preflight::{SIP_PROTECTED, apple_programs_warning};
use crate::platform::facts::SystemFacts;
use crate::platform::sip::Sip;

/// The fix for Apple's programs being terminated with SIP off, with the plain library.
const ARM64E_FIX: &str = "use the guard library (libcapshim_guard.dylib, which capshim picks with SIP off unless --dylib names another); start the workload itself, not through a shell or script; or turn SIP back on (`csrutil enable` in recoveryOS)";
/// What is left to do with the guard library.
const GUARD_FIX: &str = "start workloads with capshim run or capshim agent, so that the processes that start Apple's programs load the guard library, not through a shell that exports DYLD_INSERT_LIBRARIES; or turn SIP back on (`csrutil enable` in recoveryOS)";

/// `sip`.
pub fn check(facts: &dyn SystemFacts, lib: &Library, g: &Gathered) -> Check {
    const ID: &str = "sip";
    if !g.macos() {
        return Check::not_macos(ID, g);
    }
    let sip = facts.sip();
    let arches = lib.arches();
    // Without a library, say what happens to the arm64-only libcapshim capshim ships.
    let arches = if arches.is_empty() {
        vec![Arch::Arm64]
    } else {
        arches
    };
    // The library doctor found (--dylib, else the one `run` would pick for this SIP state).
    let flavor = lib
        .found()
        .map_or(Flavor::Guard, |path| Flavor::of_path(path, g.os));
    let warning = apple_programs_warning(&sip, ScopeArg::Children, &arches, flavor);
    match (&sip, warning) {
        (Sip::Enabled, _) => Check::ok(
            ID,
            "System Integrity Protection is on: DYLD_INSERT_LIBRARIES reaches your own programs only",
            format!(
                "dyld removes DYLD_* variables when it starts a program under {}, and from everything such a program starts, so run workloads directly, not through /bin/sh or /usr/bin/env",
                SIP_PROTECTED.join(", ")
            ),
        ),
        (_, None) => Check::ok(
            ID,
            format!("{sip}, and the library has an arm64e slice"),
            "Apple's arm64e programs that receive DYLD_INSERT_LIBRARIES can load it",
        ),
        (Sip::Disabled, Some(warning)) if flavor == Flavor::Guard => Check::with(
            ID,
            Status::Warn,
            "System Integrity Protection is off: the guard library takes capshim out of the environment of Apple's arm64e programs, where it was loaded",
            warning,
            GUARD_FIX,
        ),
        (Sip::Disabled, Some(warning)) => Check::with(
            ID,
            Status::Warn,
            "System Integrity Protection is off: dyld will terminate Apple's arm64e programs that inherit the shim",
            warning,
            ARM64E_FIX,
        ),
        (Sip::Custom(_), Some(warning)) => Check::with(
            ID,
            Status::Warn,
            format!(
                "{sip}: capshim cannot tell whether Apple's programs receive DYLD_INSERT_LIBRARIES"
            ),
            warning,
            if flavor == Flavor::Guard {
                GUARD_FIX
            } else {
                ARM64E_FIX
            },
        ),
        (Sip::Unknown(_), Some(warning)) => Check::with(
            ID,
            Status::Warn,
            format!("{sip}"),
            warning,
            "check `csrutil status`; meanwhile start workloads directly, not through a shell",
        ),
    }
}
