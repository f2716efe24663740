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
mod explain;
mod export;
mod format;
mod launch;
mod llama;
mod platform;
mod profile;
mod verify;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = commands::Cli::parse();
    match commands::dispatch(cli) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("capshim: error: {}", message(&error));
            if error.downcast_ref::<commands::UsageError>().is_some() {
                ExitCode::from(commands::EXIT_USAGE)
            } else {
                ExitCode::from(1)
            }
        }
    }
}

/// The error and its causes joined with ": ", leaving out a cause whose text the message
/// already holds (errors that name their OS error would otherwise print it twice).
fn message(error: &anyhow::Error) -> String {
    let mut text = error.to_string();
    for cause in error.chain().skip(1) {
        let cause = cause.to_string();
        if !text.contains(&cause) {
            text.push_str(": ");
            text.push_str(&cause);
        }
    }
    text
}
