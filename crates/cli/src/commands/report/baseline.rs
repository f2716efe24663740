//! `report --baseline`: the bare-metal host's processes, taken as `bench --baseline` takes
//! them (llama-bench files, each one host process, or a host bench bundle's stock arm, the
//! bundle checked), as one arm named `baseline` that is every arm's host reference.

use std::path::PathBuf;

use clap::Args;

use crate::analysis::{ArmInput, Role, RunInput};
use crate::bench::baseline::{HostSource, add_once, check_one_host, read_source};
use crate::bundle::sums::sha256_file;
use crate::commands::UsageError;
use crate::llama::{TestKey, read_bench_file};

/// The names of `keys`, each once, comma-separated (`pp64, tg16`).
fn names(keys: &[TestKey]) -> String {
    let mut names: Vec<String> = Vec::new();
    for key in keys {
        if !names.contains(&key.name()) {
            names.push(key.name());
        }
    }
    names.join(", ")
}

/// Refuses a host (`runs`, from `sources`, one model by [`check_one_host`]) of another model
/// than a measured arm's (not an input's own host): percent of host across models is
/// meaningless, as `bench --baseline` refuses it before the first run. Each arm is checked by
/// its first result (analysis refuses an arm of two models).
///
/// # Errors
/// The first arm of another model, naming the `--baseline`, both models and the fix (exit 1).
fn same_model(sources: &[HostSource], runs: &[RunInput], arms: &[ArmInput]) -> anyhow::Result<()> {
    let Some(host) = runs.iter().flat_map(|r| &r.rows).next().map(|r| &r.model) else {
        return Ok(());
    };
    // An input's own host (shown as an ordinary arm) is the input's, compared as it was.
    for arm in arms.iter().filter(|a| a.role != Role::Host) {
        let Some(theirs) = arm
            .runs
            .iter()
            .flat_map(|r| &r.rows)
            .next()
            .map(|r| &r.model)
        else {
            continue;
        };
        if !host.same_model(theirs) {
            let given: Vec<String> = sources
                .iter()
                .map(|s| s.given.display().to_string())
                .collect();
            anyhow::bail!(
                "--baseline {}: the host measured {host}, but the arm {:?} measured {theirs}: \
                 percent of host across models is meaningless; give a host measured with the \
                 same model file",
                given.join(", --baseline "),
                arm.name
            );
        }
    }
    Ok(())
}

/// The arm `--baseline` adds.
pub const NAME: &str = "baseline";

/// `report --baseline`.
#[derive(Debug, Args)]
pub struct BaselineArgs {
    /// The bare-metal host for percent of host, as `capshim bench --baseline` takes it: a
    /// llama-bench JSON file made there (one process), or a bench bundle made there (its
    /// stock arm's processes, the bundle checked). Repeat for several host processes: with
    /// bench bundles of layout 6, percent of host then gets its two-sample interval
    /// (docs/bench.md, Percent of host). Shown as the arm `baseline`, every arm's host; an
    /// input's own host arm becomes an ordinary arm (a warning says so).
    #[arg(
        long = "baseline",
        value_name = "HOST.json|HOST_BUNDLE",
        conflicts_with_all = ["host", "partial", "matrix", "llama_json"]
    )]
    pub files: Vec<PathBuf>,
}

/// Adds the `--baseline` arm to `arms`, as every arm's host (an arm that was a host becomes
/// an ordinary arm, with a warning saying so).
///
/// # Errors
/// A baseline that cannot be read or fails its check (exit 1); one given twice or as a copy,
/// one that shares no test with the arms, one that is also an arm's file, or an arm already
/// named `baseline` (exit 2).
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
    // The tests the other arms ran: a host that shares none of them gives no percent of host
    // at all (a `bench --command` bundle's workload, another -p/-n), refused as bench refuses it.
    let mut tested: Vec<TestKey> = Vec::new();
    for row in arms.iter().flat_map(|a| &a.runs).flat_map(|r| &r.rows) {
        if !tested.contains(&row.key) {
            tested.push(row.key);
        }
    }
    for source in &sources {
        if !source.tests.iter().any(|t| tested.contains(t)) {
            return Err(UsageError(format!(
                "--baseline {} has the tests {}, but the arms reported have {}: it shares no \
                 test with them (a `capshim bench --command` bundle has no llama-bench tests); \
                 give a host measured with the same -p/-n",
                source.given.display(),
                names(&source.tests),
                names(&tested)
            ))
            .into());
        }
    }
    // Each arm's files by content (SHA-256; a file no longer readable, a shell's <(...), is
    // compared by its results below).
    let arm_runs: Vec<(&ArmInput, &RunInput, Option<String>)> = arms
        .iter()
        .flat_map(|a| a.runs.iter().map(move |r| (a, r)))
        .map(|(a, r)| (a, r, sha256_file(&r.path).ok()))
        .collect();
    let mut runs = Vec::new();
    let files = sources.iter().flat_map(|s| s.files.iter().zip(&s.digests));
    for (i, (path, digest)) in files.enumerate() {
        let rows = read_bench_file(path)?;
        // A host process that is also an arm's would be compared with itself.
        if let Some((arm, run, _)) = arm_runs
            .iter()
            .find(|(_, r, d)| d.as_ref() == Some(digest) || r.rows == rows)
        {
            return Err(UsageError(format!(
                "--baseline {} holds the same results as {} of arm {:?}: one llama-bench \
                 process cannot be both the host and an arm; give the host's own files",
                path.display(),
                run.path.display(),
                arm.name
            ))
            .into());
        }
        runs.push(RunInput {
            round: i as u32 + 1,
            rows,
            path: path.clone(),
        });
    }
    same_model(&sources, &runs, arms)?;
    // One host: --baseline's. An input's own host arm is then an ordinary arm, said so.
    for arm in arms.iter_mut().filter(|a| a.role == Role::Host) {
        crate::term::warning(format!(
            "--baseline: percent of host is against --baseline's processes (the arm \
             {NAME:?}); the arm {:?}, a host of the reported input, is shown as an ordinary arm, \
             its own percent of host against {NAME:?}",
            arm.name
        ));
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
