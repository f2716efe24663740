//! `report --baseline`: the bare-metal host's processes, taken as `bench --baseline` takes
//! them (llama-bench files, each one host process, or a host bench bundle's stock arm, the
//! bundle checked), as one arm named `baseline` that is every arm's host reference.

use std::path::PathBuf;

use clap::Args;

use crate::analysis::{ArmInput, Role, RunInput};
use crate::bench::baseline::{HostSource, add_once, check_one_host, read_source};
use crate::commands::UsageError;
use crate::llama::read_bench_file;

/// The arm `--baseline` adds.
pub const NAME: &str = "baseline";

/// `report --baseline`.
#[derive(Debug, Args)]
pub struct BaselineArgs {
    /// The bare-metal host for percent of host, as `capshim bench --baseline` takes it: a
    /// llama-bench JSON file made there (one process), or a bench bundle made there (its
    /// stock arm's processes, the bundle checked). Repeat for several host processes: with
    /// bench bundles of layout 6, percent of host then gets its two-sample interval
    /// (docs/bench.md, Percent of host). Shown as the arm `baseline`, every arm's host.
    #[arg(
        long = "baseline",
        value_name = "HOST.json|HOST_BUNDLE",
        conflicts_with_all = ["host", "partial", "matrix", "llama_json"]
    )]
    pub files: Vec<PathBuf>,
}

/// Adds the `--baseline` arm to `arms`, as every arm's host (an arm that was a host becomes
/// an ordinary arm).
///
/// # Errors
/// A baseline that cannot be read or fails its check (exit 1), or one given twice or an arm
/// already named `baseline` (exit 2).
pub fn add(args: &BaselineArgs, arms: &mut Vec<ArmInput>) -> anyhow::Result<()> {
    if args.files.is_empty() {
        return Ok(());
    }
    let mut sources: Vec<HostSource> = Vec::new();
    for given in &args.files {
        let source = read_source(given)?;
        for warning in &source.warnings {
            crate::term::warning(warning);
        }
        add_once(&mut sources, source).map_err(UsageError)?;
    }
    check_one_host(&sources)?;
    if arms.iter().any(|a| a.name == NAME) {
        return Err(UsageError(format!(
            "an arm is already named {NAME:?}, the name --baseline's host arm takes; rename that \
             arm (--arm NAME=FILE)"
        ))
        .into());
    }
    let mut runs = Vec::new();
    for (i, path) in sources.iter().flat_map(|s| &s.files).enumerate() {
        runs.push(RunInput {
            round: i as u32 + 1,
            rows: read_bench_file(path)?,
            path: path.clone(),
        });
    }
    for arm in arms.iter_mut().filter(|a| a.role == Role::Host) {
        arm.role = Role::Other;
    }
    arms.push(ArmInput {
        name: NAME.into(),
        role: Role::Host,
        group: None,
        reference_for_all: true,
        runs,
        args: Vec::new(),
        metal: Vec::new(),
        activation: None,
        randomized: false,
    });
    Ok(())
}
