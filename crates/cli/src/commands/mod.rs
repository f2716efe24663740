//! One module per subcommand; each is thin and calls into the concept modules.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

pub mod bench;
pub mod report;

/// Run Metal workloads in a macOS guest with the capability shim, and prove what it did.
#[derive(Debug, Parser)]
#[command(name = "capshim", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Measure stock vs unlocked (vs host) with llama-bench into an evidence bundle.
    Bench(bench::BenchArgs),
    /// Turn llama-bench JSON files or evidence bundles into the comparison table.
    Report(report::ReportArgs),
}

/// Runs the chosen subcommand and returns the process exit code.
pub fn dispatch(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Bench(args) => bench::execute(args),
        Command::Report(args) => report::execute(args),
    }
}
