//! What happens to Apple's own programs among the workload's children when System
//! Integrity Protection is off: `DYLD_INSERT_LIBRARIES` reaches them, they are arm64e, and
//! dyld terminates each one because libcapshim has no arm64e slice (docs/apple-runtime.md,
//! rule 12). `run` and `bench` print this before they start; `capshim doctor` can too.

use crate::launch::environment::ScopeArg;
use crate::platform::sip::Sip;
use capshim_macho::Arch;

/// Examples of Apple's arm64e programs a workload starts without naming them.
const EXAMPLES: &str = "/bin/sh, /bin/bash, /usr/bin/env, /usr/bin/tee, /usr/bin/uname";

/// The warning to print before a launch with the shim, or `None` when there is nothing to
/// fear: SIP on (dyld strips the variable from Apple's programs), or a library with an
/// arm64e slice.
pub fn apple_programs_warning(
    sip: &Sip,
    scope: ScopeArg,
    library_arches: &[Arch],
) -> Option<String> {
    if library_arches.contains(&Arch::Arm64e) {
        return None;
    }
    let premise = match sip.dyld_variables_reach_apple_programs() {
        Some(false) => return None,
        Some(true) => {
            format!("{sip}, so DYLD_INSERT_LIBRARIES reaches Apple's own programs. They are arm64e")
        }
        None => format!(
            "{sip}, and capshim cannot tell whether DYLD_INSERT_LIBRARIES then reaches Apple's own programs. If it does: they are arm64e"
        ),
    };
    let children = match scope {
        ScopeArg::Children => {
            "With --scope children (the default) every program the workload starts inherits the library."
        }
        ScopeArg::Process => {
            "With --scope process, children started after the shim has hooked a Metal device are not injected, but those started before (by a launcher script, or while the program starts up) still are."
        }
    };
    Some(format!(
        "{premise} and the shim library has no arm64e slice, so dyld terminates any of them the workload starts ({EXAMPLES}; shell scripts, system(), popen(), subprocess with a shell), printing \"terminating because inserted dylib ... could not be loaded\". {children} To avoid it: start the workload itself, not through a shell or script; use --scope process and let the program create its Metal device before it starts other programs; or turn SIP back on (`csrutil enable` in recoveryOS), which keeps the variable away from Apple's programs."
    ))
}
