//! `capshim run`: one workload with the shim, and proof of whether it activated.

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, ExitCode};

use clap::Args;

use crate::launch::environment::{ShimArgs, child_env};
use crate::launch::preflight::{self, PreflightError};
use crate::launch::signals::Forwarder;
use crate::launch::status::Summary;
use crate::launch::{Os, dylib, exit};
use crate::platform::facts;
use crate::profile::ProfileArgs;

/// Exit code when capshim itself fails before running the command (as `env` and `nohup` use).
pub const EXIT_CAPSHIM_FAILED: u8 = 125;
/// Exit code when the command exists but cannot be executed (as a shell reports it).
pub const EXIT_NOT_EXECUTABLE: u8 = 126;
/// Exit code when the command is not found (as a shell reports it).
pub const EXIT_NOT_FOUND: u8 = 127;
/// Exit code for `--require-active` when the shim did not activate.
pub const EXIT_NOT_ACTIVE: u8 = 4;

/// Run one command with the shim injected for it (and, by default, its children), then say
/// on stderr whether the shim activated
#[derive(Debug, Args)]
#[command(after_help = "\
Sets the shim's CAPSHIM_* variables and the injection variable (DYLD_INSERT_LIBRARIES on
macOS, LD_PRELOAD on Linux) for this command only: the shim library goes first in
DYLD_INSERT_LIBRARIES and last in LD_PRELOAD, where each loader runs its initializer before
those of the libraries already there, which stay; a capshim library already there (named
libcapshim.dylib or libcapshim.so, or any file carrying capshim's version record, whatever its
name) is dropped, so that one shim hooks. It runs the command
with stdin/stdout/stderr attached, and afterwards prints one line on stderr from the shim's
status file: `capshim: activated: hooked CLASS in PROCESS (pid N)` or
`capshim: not activated: …` with the reason. Inherited CAPSHIM_* variables, and the published
shims' LUME_METAL_*, TART_METAL_* and VEERTU_ANKA_GPU_*, are dropped so exactly the chosen
profile applies. (The shim reads those published names too, each with its own shim's meaning,
when set by hand: docs/shim.md lists every variable.) capshim outlives Ctrl-C (the command gets
it too) and passes SIGTERM and SIGHUP on to the command, so the line is always printed.

A --profile-file's [env] variables are set for the command too (after the shim's). Its [args]
are not added: capshim cannot know the command's options, so run prints them as a suggested
command line (`capshim: note: the profile suggests ...`) and runs the command as given.

The shim library is, unless --dylib is given, the first found of: next to the capshim
executable; ../lib/capshim/ beside it; /usr/local/lib/capshim/; /opt/homebrew/lib/capshim/
(macOS); ~/.local/lib/capshim/. With System Integrity Protection on, and on Linux, that is
libcapshim.dylib (libcapshim.so); with SIP off or its state unknown, the guard library
libcapshim_guard.dylib (the shim plus an exec guard; libcapshim.dylib when it is not found).
`capshim doctor` shows which applies and why.

Before running, capshim checks that the command exists and is executable, that the library's
architecture can load into it, and on macOS that the shim will load: it refuses a quarantined
library (xattr -d com.apple.quarantine FILE), setuid/setgid or otherwise restricted programs
(App Store programs among them: their encryption makes them restricted), hardened-runtime
programs without the com.apple.security.cs.allow-dyld-environment-variables entitlement or
with library validation (a framework Python's launcher is checked with the Python.app
interpreter it re-execs), Ollama's own app and release archive and LM Studio (each refusal
names the way that works, e.g. Homebrew's ollama), and, while System Integrity Protection is on,
programs under /bin, /sbin, /usr/bin, /usr/sbin, /usr/libexec, /usr/lib, /System and scripts run by
them (dyld strips DYLD_INSERT_LIBRARIES there). With SIP off, DYLD_INSERT_LIBRARIES reaches
Apple's own programs, which are arm64e, and dyld terminates them because the library is arm64
only. The guard library prevents that in every process that loaded it: before it starts such a
program (or a script run by one) it takes capshim out of that program's DYLD_INSERT_LIBRARIES
and CAPSHIM_* variables. It cannot help in a process that did not load it, such as a shell a CI
runner starts with the variable exported; run warns about this. --skip-preflight skips the
checks of the command, not those of the library.

Examples:
  capshim run -- llama-bench -m model.gguf -p 512 -n 128
  capshim run --profile native --require-active -- ./llama-server -m model.gguf
  capshim run --scope process --log queries -- python3 train.py
  capshim run --only-process llama-bench -- ./bench.sh

Exit codes:
  N    the command's own exit status; 128+N when it was killed by signal N
  4    --require-active was given and the shim did not activate
  2    usage error (bad options)
  125  capshim failed before running the command (bad profile, shim library missing, of the
       wrong format or architecture, quarantined, or refused by the command's restrictions)
  126  the command was found but cannot be executed (also: it is a model or other data
       file, not a program)
  127  the command was not found")]
pub struct RunArgs {
    #[command(flatten)]
    profile: ProfileArgs,

    #[command(flatten)]
    shim: ShimArgs,

    /// Exit with code 4 when the shim did not activate (no device class was hooked)
    #[arg(long)]
    require_active: bool,

    /// Skip the checks of the command (architecture, code signature, restrictions, SIP)
    #[arg(long)]
    skip_preflight: bool,

    /// The command and its arguments, after `--`
    #[arg(last = true, required = true, value_name = "CMD")]
    command: Vec<OsString>,
}

/// The note for a profile file's `[args]`: the command line with them, per tool they are
/// written for; `None` when it has none.
fn suggested_args(
    args: &crate::profile::settings::ToolArgs,
    command: &[OsString],
) -> Option<String> {
    if args.is_empty() {
        return None;
    }
    let line: Vec<String> = command
        .iter()
        .map(|w| w.to_string_lossy().into_owned())
        .collect();
    let mut parts = Vec::new();
    for (words, tool) in [
        (&args.common, "for llama.cpp's common tools"),
        (&args.bench, "for llama-bench"),
        (&args.command, "for the workload"),
    ] {
        if !words.is_empty() {
            parts.push(format!("`{} {}` ({tool})", line.join(" "), words.join(" ")));
        }
    }
    Some(format!(
        "the profile suggests {}; its [args] are not added by run, which cannot know the \
         command's options",
        parts.join(", or ")
    ))
}

fn fail(code: u8, error: impl std::fmt::Display) -> ExitCode {
    crate::term::error(error);
    ExitCode::from(code)
}

/// Runs `capshim run`. Errors are reported here, with the exit codes above.
pub fn execute(args: RunArgs) -> anyhow::Result<ExitCode> {
    let os = Os::current();
    let resolved = match args.profile.resolve() {
        Ok(r) => r,
        Err(e) => return Ok(fail(EXIT_CAPSHIM_FAILED, e)),
    };
    let (command, rest) = args
        .command
        .split_first()
        .expect("clap requires at least one command word");
    let path_var = std::env::var_os("PATH");
    let program = match preflight::resolve_program(command, path_var.as_deref()) {
        Ok(p) => p,
        Err(e @ (PreflightError::NotExecutable(_) | PreflightError::NotAProgram { .. })) => {
            return Ok(fail(EXIT_NOT_EXECUTABLE, e));
        }
        Err(e) => return Ok(fail(EXIT_NOT_FOUND, e)),
    };

    let library = match resolved.profile {
        None => PathBuf::new(),
        Some(_) => {
            let library = match dylib::locate_here(args.shim.dylib.as_deref(), os) {
                Ok(l) => l,
                Err(e) => return Ok(fail(EXIT_CAPSHIM_FAILED, e)),
            };
            let arches = match dylib::check(&library, os) {
                Ok(a) => a,
                Err(e) => return Ok(fail(EXIT_CAPSHIM_FAILED, e)),
            };
            let launch = preflight::Launch {
                program: &program,
                library: &library,
                library_arches: &arches,
                scope: args.shim.scope,
                os,
                skip_program: args.skip_preflight,
            };
            match preflight::check(&facts::Real::default(), &launch) {
                Ok(warnings) => {
                    for w in warnings {
                        crate::term::warning(w);
                    }
                }
                Err(e @ PreflightError::NotAProgram { .. }) => {
                    return Ok(fail(EXIT_NOT_EXECUTABLE, e));
                }
                Err(e) => return Ok(fail(EXIT_CAPSHIM_FAILED, e)),
            }
            library
        }
    };

    let status_file = tempfile::Builder::new()
        .prefix("capshim-status-")
        .suffix(".jsonl")
        .tempfile()
        .map_err(|e| {
            anyhow::anyhow!("cannot create the status file in the temporary folder: {e}; set TMPDIR to a writable folder")
        });
    let status_file = match status_file {
        Ok(f) => f,
        Err(e) => return Ok(fail(EXIT_CAPSHIM_FAILED, e)),
    };
    let settings = args.shim.settings(
        resolved.profile,
        library,
        command,
        Some(status_file.path().to_path_buf()),
    );
    let mut env = child_env(std::env::vars_os(), &settings, os);
    // The profile file's variables, after the shim's: a workload setting, not capshim's.
    for (name, value) in &resolved.env {
        env.retain(|(n, _)| n.as_os_str() != name.as_str());
        env.push((name.into(), value.into()));
    }
    if let Some(line) = suggested_args(&resolved.args, &args.command) {
        crate::term::note(line);
    }

    // Stay alive to report: survive Ctrl-C (the command gets it too), pass SIGTERM and
    // SIGHUP on to the command.
    let forwarder = match Forwarder::start() {
        Ok(f) => Some(f),
        Err(e) => {
            eprintln!(
                "capshim: warning: cannot catch signals ({e}); the summary line is lost if capshim is interrupted"
            );
            None
        }
    };
    let child = Command::new(&program)
        .arg0(command)
        .args(rest)
        .env_clear()
        .envs(env)
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(fail(EXIT_NOT_FOUND, format!("{}: {e}", program.display())));
        }
        Err(e) => {
            return Ok(fail(
                EXIT_NOT_EXECUTABLE,
                format!("cannot execute {}: {e}", program.display()),
            ));
        }
    };
    if let Some(f) = &forwarder {
        f.forward_to(child.id());
    }
    let status = child.wait();
    drop(forwarder);
    let status = match status {
        Ok(s) => s,
        Err(e) => {
            return Ok(fail(
                EXIT_CAPSHIM_FAILED,
                format!("waiting for {}: {e}", program.display()),
            ));
        }
    };

    let activated = if resolved.profile.is_none() {
        crate::term::activation(
            "capshim: not activated: --profile stock runs the command without the shim",
        );
        false
    } else {
        let summary = Summary::read_file(status_file.path());
        crate::term::activation(&summary.line());
        summary.activated()
    };
    if args.require_active && !activated {
        return Ok(ExitCode::from(EXIT_NOT_ACTIVE));
    }
    Ok(ExitCode::from(exit::shell_code(status)))
}
