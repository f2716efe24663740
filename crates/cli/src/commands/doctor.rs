//! `capshim doctor`: check everything capshim knows can go wrong, with the fix.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use crate::doctor::{self, Options};
use crate::launch::{Os, dylib};
use crate::platform::facts::{self, SystemFacts};

/// Check this machine, the shim library and (after --) a program for everything capshim knows
/// can go wrong: one line per check, ok, warn, fail or skip, each with the fix
#[derive(Debug, Args)]
#[command(after_help = "\
Run it in the macOS guest (or on the host). It checks, one line each:
  the machine    macOS version, VM guest or host (kern.hv_vmm_present), the chip and its
                 recommended profile, hw.model
  the device     the Metal device's answers (as `capshim probe`), its name and architecture
  the library    libcapshim found (as `capshim run` looks, or --dylib), its architectures,
                 the quarantine attribute, its signature, and that it is this CLI's version
  sip            System Integrity Protection and what it means for DYLD_INSERT_LIBRARIES
  the program    with -- PROGRAM: `capshim run`'s pre-flight (architectures, hardened runtime,
                 library validation, restricted and SIP-protected programs), a framework
                 Python's interpreter, and what to do for Ollama, llama.cpp, whisper.cpp,
                 Python and app bundles
  known          known guest problems (stale mmap buffers on macOS 14, missing argument
                 encoders, indirect command buffers, MLX with Metal3, atomic ordering on
                 macOS 27) with their sources, and the host preference
Statuses: ok; warn (worth knowing or changing); fail (capshim or the workload cannot work as
things are); skip (cannot be checked here). On a system that is not macOS the checks that
need it are skipped, failures are shown as warnings, and doctor exits 0. docs/doctor.md
explains every check.

Examples:
  capshim doctor
  capshim doctor --verbose
  capshim doctor --json > doctor.json
  capshim doctor -- llama-server
  capshim doctor --dylib ./libcapshim.dylib -- /opt/homebrew/bin/ollama

Exit codes:
  0  nothing failed (warnings and skipped checks allowed)
  1  at least one check failed (or an error writing the report)
  2  usage error")]
pub struct DoctorArgs {
    /// Print JSON: {"capshim_version":…,"os":…,"macos":…,"checks":[{"id","status","summary","detail","fix"},…],"counts":{…},"exit_code":…}
    #[arg(long)]
    json: bool,

    /// Print each check's detail and sources under its line
    #[arg(short, long)]
    verbose: bool,

    /// The shim library to check (default: searched like `capshim run`)
    #[arg(long, value_name = "PATH")]
    dylib: Option<PathBuf>,

    /// A program to check as `capshim run` would, after --
    #[arg(last = true, value_name = "PROGRAM")]
    program: Vec<OsString>,
}

/// Runs `capshim doctor`.
pub fn execute(args: DoctorArgs) -> anyhow::Result<ExitCode> {
    let os = Os::current();
    let facts = facts::Real::default();
    let options = Options {
        os,
        arch: doctor::library::this_arch(),
        library: dylib::locate_for(args.dylib.as_deref(), os, &facts.sip())
            .map(|located| located.path)
            .map_err(|e| e.to_string())
            .and_then(|path| match std::fs::symlink_metadata(&path) {
                // locate does not look at an explicit --dylib; doctor must not call it found.
                Ok(_) => Ok(path),
                Err(e) => Err(format!("{}: {e}", path.display())),
            }),
        program: (!args.program.is_empty()).then_some(args.program),
        path_var: std::env::var_os("PATH"),
        injected: std::env::var_os(os.injection_var())
            .filter(|v| !v.is_empty())
            .map(|v| v.to_string_lossy().into_owned()),
    };
    let report = doctor::run(&facts, &options);
    let text = if args.json {
        serde_json::to_string_pretty(&report)? + "\n"
    } else {
        crate::term::paint_doctor(&doctor::render(&report, args.verbose))
    };
    super::out(&text)?;
    Ok(ExitCode::from(report.exit_code))
}
