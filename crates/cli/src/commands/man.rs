//! `capshim man`: the manual pages, generated from the same definitions as `--help`.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, CommandFactory};

use crate::docgen;

const AFTER_HELP: &str = "\
Without --out-dir, prints capshim(1) on stdout (try `capshim man | man -l -`). With --out-dir,
writes capshim.1 and one page per subcommand (capshim-run.1, capshim-bench.1, ...); an existing
page, or a symbolic link in its place, is refused unless --force, which replaces it (a link is
replaced by the page, never written through).

Exit codes: 0 written, 1 a page exists or cannot be written, 2 bad command line.";

/// Arguments of `capshim man`.
#[derive(Debug, Args)]
#[command(after_help = AFTER_HELP)]
pub struct ManArgs {
    /// Write every page into this directory (created if missing).
    #[arg(long = "out-dir", value_name = "DIR")]
    out_dir: Option<PathBuf>,
    /// Replace pages that already exist in --out-dir.
    #[arg(long, requires = "out_dir")]
    force: bool,
}

/// Prints or writes the man pages.
pub fn execute(args: ManArgs) -> anyhow::Result<ExitCode> {
    let pages = docgen::man_pages(super::Cli::command());
    match args.out_dir {
        None => {
            let mut out = std::io::stdout().lock();
            out.write_all(&pages[0].1).context("writing to stdout")?;
        }
        Some(dir) => {
            for path in docgen::write_pages(&pages, &dir, args.force)? {
                eprintln!("wrote {}", path.display());
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
