//! Checks before anything runs that the shim can load where it is injected.
//!
//! dyld never runs a program "stock" when an inserted library fails to load: it terminates
//! it, unless the system lets that process skip the library (docs/apple-runtime.md, rules 8
//! and 11). And where dyld drops the `DYLD_*` variables (restricted programs, SIP), the shim
//! is silently absent from the program and from everything it starts. So `run`, `bench` and
//! `agent` refuse, with the fix, every case capshim can tell in advance:
//!
//! - the library is quarantined ([`PreflightError::Quarantined`]);
//! - no architecture of the program (or of a script's interpreter) is one of the library's
//!   ([`PreflightError::ArchMismatch`], [`PreflightError::InterpreterArch`]);
//! - the program is restricted (setuid, a `__RESTRICT` section, FairPlay-encrypted by the App
//!   Store, `CS_RESTRICT`), hardened without the entitlement (read in XML or DER form),
//!   validates libraries, or is protected by SIP while SIP is on
//!   ([`PreflightError::WillNotLoad`], [`Restriction`]);
//! - for a framework Python's launcher, the same of the interpreter it re-execs in the same
//!   process ([`framework_interpreter`]);
//! - the program is an app capshim knows cannot be injected as it ships: Ollama's own
//!   release, LM Studio ([`PreflightError::KnownApp`], [`App`]), refused with the way that
//!   works.
//!
//! Where the outcome depends on a SIP status capshim cannot read, it warns instead; with SIP
//! off it warns what will happen to Apple's programs among the children
//! ([`apple_programs_warning`]). Every fact comes through [`SystemFacts`], so a later
//! `capshim doctor` can run the same checks, and tests inject the facts.

mod apps;
mod children;
mod data;
mod program;
mod python;
mod restriction;
mod target;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_programs;

use std::path::{Path, PathBuf};

use thiserror::Error;

use super::Os;
use super::dylib::Flavor;
use super::environment::ScopeArg;
use crate::platform::facts::{QUARANTINE, SystemFacts};
use capshim_macho::{Arch, Binary};

pub use apps::{App, OLLAMA_CHILDREN, OLLAMA_WORKING_PATH};
pub use children::apple_programs_warning;
pub use data::not_a_program;
pub use program::resolve_program;
pub use python::framework_interpreter;
pub use restriction::Restriction;

/// Folders whose programs macOS System Integrity Protection guards: dyld drops every
/// `DYLD_*` variable when it starts them (Apple: "Runtime Protections", SIP).
pub const SIP_PROTECTED: [&str; 7] = [
    "/bin/",
    "/sbin/",
    "/usr/bin/",
    "/usr/sbin/",
    "/usr/libexec/",
    "/usr/lib/",
    "/System/",
];

/// A reason not to run the program at all.
#[derive(Debug, Error)]
pub enum PreflightError {
    /// The command is not on `PATH` (or the path does not exist).
    #[error("{command}: command not found{}; check the spelling, or give its full path", .searched.as_deref().map(|p| format!(" in PATH ({p})")).unwrap_or_default())]
    NotFound {
        /// The command as given.
        command: String,
        /// The `PATH` searched, when it was looked up there.
        searched: Option<String>,
    },
    /// The file exists but cannot be executed.
    #[error("{0}: not an executable file; check its permissions (chmod +x) or the path")]
    NotExecutable(PathBuf),
    /// The file is no program the system can execute but a data format capshim recognises,
    /// such as a model file ([`not_a_program`]).
    #[error(
        "{path}: not a program: it is {what}, and the system executes only programs (a native executable, or a script whose first line starts with #!). To run it with the shim, {instead}"
    )]
    NotAProgram {
        /// The file.
        path: PathBuf,
        /// What it is, from its first bytes.
        what: String,
        /// What to run instead.
        instead: String,
    },
    /// The shim library cannot load into the program.
    #[error(
        "{program} is built for {} but the shim library is {}{}; the loader cannot inject it. Use a shim built for {} (pass it with --dylib), run the program's {} build, or skip this check with --skip-preflight",
        list(.program_arches), list(.library_arches),
        if .program_arches.iter().all(|a| *a == Arch::Arm64e) {
            " (an arm64e-only program, such as Apple's own platform binaries, loads only arm64e libraries)"
        } else { "" },
        list(.program_arches), list(.library_arches)
    )]
    ArchMismatch {
        /// The program.
        program: PathBuf,
        /// Its architectures.
        program_arches: Vec<Arch>,
        /// The shim library's architectures.
        library_arches: Vec<Arch>,
    },
    /// A script's interpreter is of an architecture the library cannot load into.
    #[error(
        "{script} is a script run by {interpreter}, which is built for {} while the shim library is {}: if System Integrity Protection is off, dyld terminates {interpreter} because it cannot load the library; if SIP is on, it strips DYLD_INSERT_LIBRARIES, so nothing the script starts gets the shim. Run the real program directly under capshim, give the script an interpreter of your own build on its #! line, or skip this check with --skip-preflight",
        list(.interpreter_arches), list(.library_arches)
    )]
    InterpreterArch {
        /// The script.
        script: PathBuf,
        /// Its interpreter (the `#!` line's program).
        interpreter: String,
        /// The interpreter's architectures.
        interpreter_arches: Vec<Arch>,
        /// The shim library's architectures.
        library_arches: Vec<Arch>,
    },
    /// The shim library carries the quarantine attribute.
    #[error(
        "{library} has the com.apple.quarantine attribute ({}): macOS refuses to load a quarantined library, and dyld then terminates the program rather than run it without the shim. If you trust this copy (built yourself, or checked against the release's SHA256SUMS), remove the attribute with `xattr -d com.apple.quarantine {library}`",
        quarantine_origin(.value)
    )]
    Quarantined {
        /// The library.
        library: PathBuf,
        /// The attribute's value (`flags;time;agent;id`).
        value: String,
    },
    /// An app capshim knows cannot be injected as it ships ([`App`]: Ollama's release, LM
    /// Studio): why, and the way that works.
    #[error(
        "{program} is {app}{}. What works: {}; or skip this check with --skip-preflight",
        .restriction.as_ref().map(|r| format!(": {r}")).unwrap_or_default(),
        .app.working_path()
    )]
    KnownApp {
        /// The program.
        program: PathBuf,
        /// Which app.
        app: App,
        /// What its own checks found, when they refused it.
        restriction: Option<Restriction>,
    },
    /// The shim will not load into the program, for a reason [`Restriction`] names.
    #[error("{subject}: {restriction}; or skip this check with --skip-preflight")]
    WillNotLoad {
        /// The program, or "SCRIPT (run by INTERPRETER)".
        subject: String,
        /// Why, and the fix.
        restriction: Restriction,
    },
}

fn list(arches: &[Arch]) -> String {
    arches
        .iter()
        .map(Arch::to_string)
        .collect::<Vec<_>>()
        .join("/")
}

/// Who put a quarantine attribute there, from its value `flags;time;agent;id`.
fn quarantine_origin(value: &str) -> String {
    match value.split(';').nth(2).filter(|agent| !agent.is_empty()) {
        Some(agent) => format!("set by {agent} when it was downloaded or unpacked"),
        None => "it was downloaded or unpacked by a quarantine-aware program".to_string(),
    }
}

/// One launch to check.
#[derive(Clone, Copy, Debug)]
pub struct Launch<'a> {
    /// The program, as [`resolve_program`] found it.
    pub program: &'a Path,
    /// The shim library, already checked with `dylib::check`.
    pub library: &'a Path,
    /// The library's architectures (from `dylib::check`).
    pub library_arches: &'a [Arch],
    /// Whether the program's children inherit the shim.
    pub scope: ScopeArg,
    /// The system the launch is for.
    pub os: Os,
    /// `--skip-preflight`: skip the checks of the program (its architectures, code
    /// signature, restrictions, SIP protection). The library's own checks still run.
    pub skip_program: bool,
}

/// The checks of one launch: the library's quarantine attribute, the program's
/// ([`Launch::skip_program`] skips them), and on macOS what will happen to Apple's programs
/// among the children. Returns the warnings to print; an error means the launch cannot
/// work as asked.
///
/// # Errors
/// [`PreflightError`] naming the file, why the shim would not load, and the fix.
pub fn check(facts: &dyn SystemFacts, launch: &Launch<'_>) -> Result<Vec<String>, PreflightError> {
    let mut warnings = Vec::new();
    if launch.os == Os::MacOs {
        match facts.extended_attribute(launch.library, QUARANTINE) {
            Ok(Some(value)) => {
                return Err(PreflightError::Quarantined {
                    library: launch.library.to_path_buf(),
                    value: String::from_utf8_lossy(&value).into_owned(),
                });
            }
            Ok(None) => {}
            Err(why) => warnings.push(format!(
                "cannot check {} for the quarantine attribute ({why})",
                launch.library.display()
            )),
        }
    }
    // SIP only matters on macOS; read it once, when first needed.
    let sip = std::cell::OnceCell::new();
    let sip = || sip.get_or_init(|| facts.sip()).clone();
    if !launch.skip_program {
        let library_team = match facts.binary(launch.library) {
            Ok(Binary::Native { slices, .. }) => slices
                .iter()
                .find_map(|s| s.signature.as_ref().and_then(|sig| sig.team_id.clone())),
            _ => None,
        };
        let subject = target::Subject {
            library_arches: launch.library_arches,
            library_team: library_team.as_deref(),
            os: launch.os,
        };
        let outcome = target::check(facts, &subject, launch.program, &sip);
        let outcome = if launch.os == Os::MacOs {
            let child = |child: &Path| target::check(facts, &subject, child, &sip);
            apps::check(facts, launch.program, outcome, &child)
        } else {
            outcome
        };
        warnings.extend(outcome?);
        if let Some(interpreter) = framework_interpreter(launch.program) {
            warnings.extend(python::check(
                facts,
                &subject,
                launch.program,
                &interpreter,
                &sip,
            )?);
        }
    }
    if launch.os == Os::MacOs {
        warnings.extend(apple_programs_warning(
            &sip(),
            launch.scope,
            launch.library_arches,
            Flavor::of_path(launch.library, launch.os),
        ));
    }
    Ok(warnings)
}

fn sip_protected(path: &str) -> bool {
    SIP_PROTECTED.iter().any(|prefix| path.starts_with(prefix))
}
