//! `capshim doctor`: everything capshim knows can go wrong, checked against this machine, one
//! [`Check`] each with its status (`ok`, `warn`, `fail`, `skip`) and the fix.
//!
//! Every fact comes through [`SystemFacts`] (sysctl, csrutil, extended attributes, code
//! signatures, user defaults, the Metal device), so every check is tested with injected
//! facts on any platform. The checks, in the order they print:
//!
//! - [`machine`]: macOS version, VM guest or host, the chip and its profile, `hw.model`;
//! - [`device`]: the Metal device's answers, its name and its architecture name;
//! - [`library`]: libcapshim found, its format and architectures, quarantine, signature,
//!   and its version against this CLI's;
//! - [`protection`]: System Integrity Protection and what it means for the injection;
//! - [`program`] (with `-- PROGRAM`): `capshim run`'s pre-flight, the framework-Python
//!   launcher, and what to do for known workloads ([`workloads`]);
//! - [`known`]: the known guest problems of `data/known-problems.toml`, and the host
//!   preference.
//!
//! [`gather`] reads the facts the checks share; [`render`] prints the text report.

pub mod device;
pub mod gather;
pub mod known;
pub mod library;
pub mod machine;
pub mod program;
pub mod protection;
pub mod render;
pub mod workloads;

#[cfg(test)]
mod tests;

use std::ffi::OsString;
use std::path::PathBuf;

use serde::Serialize;

use crate::launch::Os;
use crate::platform::facts::SystemFacts;
use gather::Gathered;

pub use render::render;

/// What a check found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Nothing to do.
    Ok,
    /// Something to know, or to change before it bites; capshim still works.
    Warn,
    /// capshim cannot work as things are; the fix says what to change.
    Fail,
    /// Cannot be checked here (not macOS, no Metal device, no library, inside a guest).
    Skip,
}

impl Status {
    /// The word printed for it.
    pub fn word(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Warn => "warn",
            Status::Fail => "fail",
            Status::Skip => "skip",
        }
    }
}

/// A source a check rests on (known problems).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SourceRef {
    /// Its name, e.g. "tinygrad/tinygrad pull request 10225".
    pub name: String,
    /// Where it is.
    pub url: String,
    /// What it says.
    pub says: String,
}

/// One line of the report. JSON keys (added, never renamed): `id`, `status`, `summary`,
/// `detail`, `fix`, and `sources` for known problems.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Check {
    /// Stable identifier, e.g. `library.quarantine`, `known.stale-mmap-buffers`.
    pub id: String,
    /// What it found.
    pub status: Status,
    /// One line.
    pub summary: String,
    /// More: why, and what was read.
    pub detail: String,
    /// What to do; `null` when there is nothing to do.
    pub fix: Option<String>,
    /// The sources a known problem rests on.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub sources: Vec<SourceRef>,
}

impl Check {
    fn new(
        id: &str,
        status: Status,
        summary: impl Into<String>,
        detail: impl Into<String>,
    ) -> Check {
        Check {
            id: id.to_string(),
            status,
            summary: summary.into(),
            detail: detail.into(),
            fix: None,
            sources: Vec::new(),
        }
    }

    /// An `ok` check.
    pub fn ok(id: &str, summary: impl Into<String>, detail: impl Into<String>) -> Check {
        Check::new(id, Status::Ok, summary, detail)
    }

    /// A check with a status and a fix.
    pub fn with(
        id: &str,
        status: Status,
        summary: impl Into<String>,
        detail: impl Into<String>,
        fix: impl Into<String>,
    ) -> Check {
        Check {
            fix: Some(fix.into()),
            ..Check::new(id, status, summary, detail)
        }
    }

    /// A check that needs macOS, skipped on `g`'s system.
    pub fn not_macos(id: &str, g: &Gathered) -> Check {
        Check::with(
            id,
            Status::Skip,
            format!("not checked: this is {}, not macOS", g.os_name),
            "it needs a macOS guest (or host) on Apple Silicon",
            NOT_MACOS_FIX,
        )
    }
}

/// What `capshim doctor` was asked to check.
#[derive(Clone, Debug)]
pub struct Options {
    /// The system this capshim runs on.
    pub os: Os,
    /// This machine's architecture, which the library must have a slice of
    /// ([`library::this_arch`]).
    pub arch: capshim_macho::Arch,
    /// The shim library (`--dylib`, or found where `capshim run` looks), or why not found.
    pub library: Result<PathBuf, String>,
    /// `-- PROGRAM [ARGS]`: a program to check as `capshim run` would.
    pub program: Option<Vec<OsString>>,
    /// `PATH`, to find the program as a shell would.
    pub path_var: Option<OsString>,
    /// The injection variable in doctor's own environment (`DYLD_INSERT_LIBRARIES`), if set:
    /// the Metal answers doctor reads are then the shim's.
    pub injected: Option<String>,
}

/// How many checks have each status.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    /// `ok` checks.
    pub ok: usize,
    /// `warn` checks.
    pub warn: usize,
    /// `fail` checks.
    pub fail: usize,
    /// `skip` checks.
    pub skip: usize,
}

/// Everything doctor found; serialised as `capshim doctor --json`:
/// `{"capshim_version","os","macos","checks":[…],"counts":{…},"exit_code"}`.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// This capshim's version.
    pub capshim_version: &'static str,
    /// The system doctor ran on (`macos`, `linux`, …).
    pub os: String,
    /// Whether that is macOS (off macOS, checks that need it are `skip` and nothing fails).
    pub macos: bool,
    /// Every check, in order.
    pub checks: Vec<Check>,
    /// How many of each status.
    pub counts: Counts,
    /// 0 when nothing failed, 1 when something did.
    pub exit_code: u8,
}

/// The fix of every check skipped because this is not macOS (the text report says it once).
pub const NOT_MACOS_FIX: &str = "run `capshim doctor` in the macOS guest";

/// This capshim's version, which libcapshim's version record must match.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Runs every check.
pub fn run(facts: &dyn SystemFacts, options: &Options) -> Report {
    let g = Gathered::collect(facts, options);
    let lib = library::Library::inspect(facts, &options.library);
    let mut checks = Vec::new();
    checks.extend(machine::checks(&g));
    checks.extend(device::checks(&g));
    checks.extend(library::checks(facts, &lib, &g));
    checks.push(protection::check(facts, &lib, &g));
    if let Some(command) = &options.program {
        checks.extend(program::checks(
            facts,
            command,
            options.path_var.as_deref(),
            &lib,
            &g,
        ));
    }
    checks.extend(known::checks(facts, &g));
    if !g.macos() {
        // Off macOS nothing capshim is for can fail: say what would, as a warning.
        for check in checks.iter_mut().filter(|c| c.status == Status::Fail) {
            check.status = Status::Warn;
            check.detail = format!(
                "{} (a failure on macOS; this is {}, where only the simulated guest of capshim's tests uses the shim)",
                check.detail, g.os_name
            );
        }
    }
    let mut counts = Counts::default();
    for check in &checks {
        match check.status {
            Status::Ok => counts.ok += 1,
            Status::Warn => counts.warn += 1,
            Status::Fail => counts.fail += 1,
            Status::Skip => counts.skip += 1,
        }
    }
    Report {
        capshim_version: VERSION,
        os: g.os_name.clone(),
        macos: g.macos(),
        exit_code: u8::from(counts.fail > 0),
        checks,
        counts,
    }
}
