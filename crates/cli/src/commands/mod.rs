//! One module per subcommand; each is thin and calls into the concept modules.

mod agent;
mod bench;
mod completions;
mod doctor;
mod experiment;
mod explain;
mod host;
mod man;
mod probe;
mod profiles;
mod report;
mod run;
mod selftest;
mod sign;
mod tune;
mod usage;
mod verify;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

pub use usage::{clarify, missing_separator_tip};

/// Exit code of a command line that cannot work (as clap's own).
pub const EXIT_USAGE: u8 = 2;

/// A mistake in the command line found after clap parsed it: `main` prints it and exits with
/// [`EXIT_USAGE`].
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// How `bench` and `verify` end on an error: stopped by signal `number` (128 + it, as a shell
/// reports, after saying why), or the error for `main` to print.
fn stopped<E>(number: Option<i32>, error: E) -> anyhow::Result<ExitCode>
where
    E: std::error::Error + Send + Sync + 'static,
{
    match number {
        Some(number) => {
            crate::term::error(crate::format::chain(&error));
            Ok(ExitCode::from(128 + u8::try_from(number).unwrap_or(0)))
        }
        None => Err(error.into()),
    }
}

/// Writes `text` to stdout and flushes it. A closed pipe (`capshim report --json | head`)
/// is an error of kind [`std::io::ErrorKind::BrokenPipe`], which `main` ends on quietly.
///
/// # Errors
/// The write's I/O error.
pub fn out(text: &str) -> std::io::Result<()> {
    crate::term::stdout(text)
}

/// Run Metal workloads in a macOS guest with the capability shim, and prove what it did.
#[derive(Debug, Parser)]
#[command(name = "capshim", version, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// List the named profiles (stock, native, apple9-64k) with their values and provenance
    Profiles(profiles::ProfilesArgs),
    Explain(explain::ExplainArgs),
    Run(run::RunArgs),
    Probe(probe::ProbeArgs),
    Agent(agent::AgentArgs),
    Host(host::HostArgs),
    Doctor(doctor::DoctorArgs),
    /// Measure stock vs unlocked (vs host) with llama-bench or any command (--command) into
    /// an evidence bundle.
    Bench(bench::BenchArgs),
    /// Turn llama-bench JSON files or evidence bundles into the comparison table.
    Report(report::ReportArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell)
    Completions(completions::CompletionsArgs),
    /// Print or write the manual pages
    Man(man::ManArgs),
    /// Check that a profile keeps llama.cpp's results right (KL divergence, top-1 agreement,
    /// greedy text, kernel tests), arm by arm, into an evidence bundle.
    Verify(verify::VerifyArgs),
    /// Sign a sealed evidence bundle with an OpenSSH key (adds SHA256SUMS.sig).
    Sign(sign::SignArgs),
    Selftest(selftest::SelftestArgs),
    /// Find the fastest settings for this machine that stay correct: a budgeted search of the
    /// knob catalogue with llama-bench or any command, the winner verified, into an evidence
    /// bundle.
    Tune(tune::TuneArgs),
}

/// Runs the chosen subcommand and returns the process exit code.
pub fn dispatch(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Profiles(args) => profiles::execute(args),
        Command::Explain(args) => explain::execute(args),
        Command::Run(args) => run::execute(args),
        Command::Probe(args) => probe::execute(args),
        Command::Agent(args) => agent::execute(args),
        Command::Host(args) => host::execute(args),
        Command::Doctor(args) => doctor::execute(args),
        Command::Bench(args) => bench::execute(args),
        Command::Report(args) => report::execute(args),
        Command::Completions(args) => completions::execute(args),
        Command::Man(args) => man::execute(args),
        Command::Verify(args) => verify::execute(args),
        Command::Sign(args) => sign::execute(args),
        Command::Selftest(args) => selftest::execute(args),
        Command::Tune(args) => tune::execute(args),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    /// The help's prose is wrapped by hand at 100 columns, the width clap wraps to when stdout
    /// is no terminal: a longer line is wrapped again, leaving a word alone on a line or an
    /// example broken mid-argument.
    #[test]
    fn help_texts_fit_in_100_columns() {
        let mut long = Vec::new();
        for sub in Cli::command().get_subcommands() {
            let texts = [sub.get_after_help(), sub.get_after_long_help()];
            for text in texts.into_iter().flatten() {
                for line in text.to_string().lines() {
                    if line.chars().count() > 100 {
                        long.push(format!("{}: {line}", sub.get_name()));
                    }
                }
            }
        }
        assert!(long.is_empty(), "{}", long.join("\n"));
    }
}
