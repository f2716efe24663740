//! `capshim`: run a Metal workload with the capability shim, and see and prove what it did.

#![forbid(unsafe_code)]

mod bench;
mod bundle;
mod commands;
mod deploy;
mod device_report;
mod explain;
mod export;
mod launch;
mod llama;
mod macho;
mod platform;
mod profile_args;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = commands::Cli::parse();
    match commands::dispatch(cli) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("capshim: error: {error:#}");
            ExitCode::from(1)
        }
    }
}
