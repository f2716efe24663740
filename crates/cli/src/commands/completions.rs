//! `capshim completions SHELL`: a completion script on stdout.

use std::process::ExitCode;

use clap::{Args, CommandFactory};

const AFTER_HELP: &str = "\
Install, e.g.:
  capshim completions bash > ~/.local/share/bash-completion/completions/capshim
  capshim completions zsh  > \"${fpath[1]}/_capshim\"
  capshim completions fish > ~/.config/fish/completions/capshim.fish

Exit codes: 0 written, 2 bad command line.";

/// Arguments of `capshim completions`.
#[derive(Debug, Args)]
#[command(after_help = AFTER_HELP)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    shell: clap_complete::Shell,
}

/// Prints the completion script for the chosen shell.
pub fn execute(args: CompletionsArgs) -> anyhow::Result<ExitCode> {
    let mut cmd = super::Cli::command();
    // Into memory first: clap_complete panics on a failed write, a closed pipe included.
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut cmd, "capshim", &mut script);
    super::out(&String::from_utf8_lossy(&script))?;
    Ok(ExitCode::SUCCESS)
}
