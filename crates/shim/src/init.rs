//! The library initializer: read the configuration once, then arm the hook or stay stock.

use std::os::unix::ffi::OsStringExt;
use std::panic::catch_unwind;

use capshim_profile::{ConfigError, Scope, env};

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

/// The executable's file name, e.g. `llama-bench`; what `CAPSHIM_ONLY_PROCESS` is compared to.
pub fn process_name() -> String {
    std::env::current_exe()
        .ok()
        .and_then(|path| {
            path.file_name()
                .map(|name| name.to_string_lossy().into_owned())
        })
        .or_else(|| {
            std::env::args_os().next().map(|arg0| {
                std::path::Path::new(&arg0)
                    .file_name()
                    .unwrap_or_default()
                    .to_string_lossy()
                    .into_owned()
            })
        })
        .unwrap_or_else(|| String::from("?"))
}

fn start() {
    let parsed =
        env::parse(std::env::vars_os().map(|(name, value)| (name.into_vec(), value.into_vec())));
    let process = process_name();
    report::init(parsed.outputs, process.clone());
    let config = match parsed.config {
        Ok(config) => config,
        Err(error @ ConfigError::NotConfigured) => {
            return report::inactive(&error.to_string(), false);
        }
        Err(error) => return report::inactive(&error.to_string(), true),
    };
    if let Some(only) = &config.only_process
        && only.as_slice() != process.as_bytes()
    {
        let reason = format!(
            "{}={} does not match this process ({process})",
            env::ONLY_PROCESS.primary,
            String::from_utf8_lossy(only)
        );
        return report::inactive(&reason, true);
    }
    report::active(&config.profile, config.scope);
    if config.scope == Scope::Process
        && let Err(reason) = scope::detach()
    {
        // Children would inherit the shim; say so rather than pretend otherwise.
        report::failed("environment", reason);
    }
    hook::arm(config.profile);
}
