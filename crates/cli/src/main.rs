//! `capshim`: run a Metal workload with the capability shim, and see and prove what it did.

mod bench;
mod bundle;
mod commands;
mod export;
mod llama;

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
