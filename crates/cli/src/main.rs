//! `capshim`: run a Metal workload with the capability shim, and see and prove what it did.

#![forbid(unsafe_code)]

mod analysis;
mod arms;
mod bench;
mod bundle;
mod commands;
mod deploy;
mod device;
mod docgen;
mod doctor;
mod experiment;
mod explain;
mod export;
mod format;
mod input_file;
mod launch;
mod llama;
mod platform;
mod profile;
mod selftest;
mod term;
mod tune;
mod verify;

use std::ffi::OsString;
use std::process::ExitCode;

use clap::Parser as _;

fn main() -> ExitCode {
    // As the system gave them: a program's arguments after `--` may be in any encoding.
    let args: Vec<OsString> = std::env::args_os().collect();
    let cli = match commands::Cli::try_parse_from(&args) {
        Ok(cli) => cli,
        Err(error) => {
            let args = args.get(1..).unwrap_or_default();
            let error = commands::clarify(error, args);
            let code = term::clap_error(&error);
            if let Some(tip) = commands::missing_separator_tip(args, &error) {
                term::note(tip);
            }
            return ExitCode::from(code);
        }
    };
    match commands::dispatch(cli) {
        Ok(code) => code,
        // The reader went away (`capshim report --json | head`): nothing left to say to it.
        Err(error) if broken_pipe(&error) => ExitCode::SUCCESS,
        Err(error) => {
            term::error(format::chain(&*error));
            if error.downcast_ref::<commands::UsageError>().is_some() {
                ExitCode::from(commands::EXIT_USAGE)
            } else {
                ExitCode::from(1)
            }
        }
    }
}

/// Whether the error comes from writing to a closed pipe (ripgrep's check).
fn broken_pipe(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
    })
}
