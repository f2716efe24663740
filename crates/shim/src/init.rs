//! The library initializer: read the configuration once, then arm the hook or stay stock.

use std::os::unix::ffi::OsStringExt;
use std::panic::catch_unwind;

use capshim_profile::{LogMode, Scope, env};

use crate::scope::{Lineage, invoked_name, process_name};
use crate::{hook, report, scope};

// Registered in the platform's initializer section so the loader runs it when the library is
// injected (before `main`) or dlopened. Nothing else of ours runs until Metal asks.
#[used]
#[cfg_attr(
    target_vendor = "apple",
    unsafe(link_section = "__DATA,__mod_init_func")
)]
#[cfg_attr(not(target_vendor = "apple"), unsafe(link_section = ".init_array"))]
static INITIALIZER: extern "C" fn() = initialize;

extern "C" fn initialize() {
    // Whatever happens, never unwind into the loader.
    let _ = catch_unwind(start);
}

/// A setting's value as it may be shown in a message: escaped, and at most 80 characters.
fn shown(value: &[u8]) -> String {
    let text = String::from_utf8_lossy(value);
    let mut escaped: String = text.escape_debug().take(80).collect();
    if escaped.len() < text.escape_debug().count() {
        escaped.push('…');
    }
    escaped
}

fn start() {
    // Reading the configuration is all a process pays at load unless it is configured; then
    // the runtime is asked whether Metal is there (or to report it later). The executable's
    // name is found only when CAPSHIM_ONLY_PROCESS needs it or a report is made.
    let parsed =
        env::parse(std::env::vars_os().map(|(name, value)| (name.into_vec(), value.into_vec())));
    report::init(parsed.outputs);
    let config = match parsed.config {
        Ok(config) => config,
        Err(error) => {
            // A malformed or conflicting configuration is the user's to fix: said at load.
            let level = if error.is_quiet() {
                LogMode::Off
            } else {
                LogMode::Activation
            };
            return report::inactive(&error.to_string(), level);
        }
    };
    let limited = config.scope == Scope::Process || config.only_process.is_some();
    let lineage = if limited {
        scope::current_lineage()
    } else {
        Lineage::First
    };
    if config.scope == Scope::Process
        && let Lineage::Child(owner) = lineage
    {
        // Another process with a copy of the owner's environment (started by it, whichever
        // copy of the environment it was given, or a later holder of its pid): stay stock,
        // silently (a shell or tool the workload runs is not the workload), and keep our own
        // children clean.
        let reason = format!(
            "{}=process: the shim belongs to pid {owner}, not to this process, which stays stock",
            env::SCOPE.primary
        );
        report::inactive(&reason, report::LOAD_TIME);
        if let Err(why) = scope::detach() {
            report::failed_at(report::LOAD_TIME, "environment", why);
        }
        return;
    }
    if let Some(only) = &config.only_process {
        // Either name counts: the real executable's, or the one it was started as; and an
        // image this very process replaced itself with (a framework Python's interpreter
        // after its launcher matched) is the process that matched.
        let process = process_name();
        report::set_process(process.clone());
        let invoked = invoked_name();
        let matches = only.as_slice() == process.as_bytes()
            || invoked
                .as_deref()
                .is_some_and(|name| only.as_slice() == name.as_bytes())
            || lineage == Lineage::SameProcess;
        if !matches {
            let reason = format!(
                "{}=\"{}\" does not match this process ({process})",
                env::ONLY_PROCESS.primary,
                shown(only)
            );
            // Processes the setting does not name stay stock silently: the tools a workload
            // runs (compilers, shells) and the shell that starts it alike.
            return report::inactive(&reason, report::LOAD_TIME);
        }
    }
    report::active(&config);
    if limited
        && lineage != Lineage::SameProcess
        && let Err(why) = scope::mark_owner()
    {
        report::failed_at(report::LOAD_TIME, "environment", why);
    }
    let after_first_hook: Option<fn()> = match config.scope {
        Scope::Process => Some(release_environment),
        Scope::Children => None,
    };
    // A child fork()ed without exec keeps this library, its hooks and its install lock, which
    // another thread may have held at the fork: the handler leaves the lock usable, and under
    // scope=process disarms the hooks (the child is another process).
    hook::prepare_for_fork(config.scope == Scope::Process);
    hook::arm(config.profile, after_first_hook);
}

/// `CAPSHIM_SCOPE=process`, once a device is hooked: children started from the live
/// environment from now on do not load the library.
fn release_environment() {
    if let Err(why) = scope::release() {
        // Children would inherit the shim; say so rather than pretend otherwise.
        report::failed("environment", why);
    }
}
