//! What happens to Apple's own programs among the workload's children when System
//! Integrity Protection is off: `DYLD_INSERT_LIBRARIES` reaches them, they are arm64e (no
//! arm64 slice), and dyld terminates a program whose inserted library it cannot load;
//! capshim's libraries are arm64 only (docs/apple-runtime.md, "The exec guard"). The guard
//! library (libcapshim_guard) takes capshim out of such a program's environment in every
//! process that loaded it; it cannot help where it was not loaded. `run` and `bench` print
//! this before they start; `capshim doctor` can too.

use crate::launch::dylib::Flavor;
use crate::launch::environment::ScopeArg;
use crate::platform::sip::Sip;
use capshim_macho::Arch;

/// Examples of Apple's arm64e programs a workload starts without naming them.
const EXAMPLES: &str = "/bin/sh, /bin/bash, /usr/bin/env, /usr/bin/tee, /usr/bin/uname";

/// What the guard cannot do, for every warning that mentions it.
const GUARD_LIMIT: &str = "It cannot help where the library was not loaded: a process that did not load it (a shell a CI runner starts with DYLD_INSERT_LIBRARIES exported, or a program dyld refuses to inject, such as a hardened one) passes the variable on, and dyld terminates Apple's programs it starts.";

/// The warning to print before a launch with the shim, or `None` when there is nothing to
/// fear: SIP on (dyld strips the variable from Apple's programs), or a library with an
/// arm64e slice. `flavor` is the library injected: with the guard library the warning says
/// what the guard does and where it cannot help; with the plain one, what dyld will do.
pub fn apple_programs_warning(
    sip: &Sip,
    scope: ScopeArg,
    library_arches: &[Arch],
    flavor: Flavor,
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
    if flavor == Flavor::Guard {
        return Some(format!(
            "{premise}, and dyld terminates any of them whose inserted library has no arm64e slice ({EXAMPLES}). The guard library is injected: before a process that loaded it starts such a program (execve, posix_spawn, posix_spawnp; a script whose interpreter is one included), it takes capshim's entry out of that program's DYLD_INSERT_LIBRARIES and removes the CAPSHIM_* variables, so the program runs stock and its own children start without capshim. {GUARD_LIMIT}"
        ));
    }
    let children = match scope {
        ScopeArg::Children => {
            "With --scope children (the default) every program the workload starts inherits the library."
        }
        ScopeArg::Process => {
            "With --scope process, children started after the shim has hooked a Metal device are started without the shim in their environment by programs that read it from libc, but runtimes that copied the environment at start (Python's os.environ, Go, Java, Node) still pass it on, as do children started before."
        }
    };
    Some(format!(
        "{premise} and the plain shim library has no arm64e slice, so dyld terminates any of them the workload starts ({EXAMPLES}; shell scripts, system(), popen(), subprocess with a shell), printing \"terminating because inserted dylib ... could not be loaded\". {children} To avoid it: inject the guard library ({}; capshim picks it when SIP is off unless --dylib names another), which takes capshim out of the environment of such programs; start the workload itself, not through a shell or script; or turn SIP back on (`csrutil enable` in recoveryOS), which keeps the variable away from Apple's programs.",
        Flavor::Guard.file_name(crate::launch::Os::MacOs)
    ))
}
