//! `capshim report --partial BUNDLE`: the table of an unfinished bench bundle's completed
//! rounds. A bench stops on a signal or an error, never on what the figures say, so the rounds
//! that ran are an ordinary, smaller bench: their intervals hold at their stated level. What
//! is missing is the seal: nothing was checksummed or derived, so the table is marked partial
//! on stdout's first line and the exit code is 4, as for `--as-written`.
//!
//! The runs come from the INCOMPLETE note's list of finished runs (in the order run, each
//! naming its raw file); a round counts when every arm ran in it and gave a result.

use std::path::Path;
use std::process::ExitCode;

use anyhow::bail;

use super::{EXIT_UNVERIFIED, ReportArgs};
use crate::analysis::input::ProcessRun;
use crate::analysis::{Derivation, Options, analyze_with};
use crate::bundle::{
    self, INCOMPLETE_FILE, Manifest, ManifestArm, ManifestRun, RAW_DIR, SUMS_FILE,
};
use crate::commands::{UsageError, out};
use crate::export::Exporter;
use crate::llama::read_bench_file;

/// One finished run the note lists: `arm NAME round N (raw/NAME-rN.json)`.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Finished {
    arm: String,
    round: u32,
    json: String,
}

/// The finished runs of a bench's INCOMPLETE `note`, in the order run.
fn finished_runs(note: &str) -> Vec<Finished> {
    let Some((_, list)) = note.split_once("Runs finished (") else {
        return Vec::new();
    };
    list.lines()
        .skip(1)
        .map_while(|line| line.strip_prefix("  "))
        .filter_map(|line| {
            let rest = line.strip_prefix("arm ")?;
            let (arm, rest) = rest.rsplit_once(" round ")?;
            let (round, json) = rest.split_once(" (")?;
            let json = json.strip_suffix(')')?;
            let round: u32 = round.parse().ok()?;
            // Only a file of the bundle's raw folder, named as bench names it.
            let expected = format!("{RAW_DIR}/{arm}-r{round}.json");
            (json == expected).then(|| Finished {
                arm: arm.to_string(),
                round,
                json: json.to_string(),
            })
        })
        .collect()
}

/// Prints the partial table of the bench bundle `dir` in the format `exporter`; exit code 4.
///
/// # Errors
/// A usage error when `dir` is sealed (or not alone); an error when it has no INCOMPLETE note
/// of `capshim bench`, or no round in which every arm gave a result.
pub fn report_partial(
    args: &ReportArgs,
    dir: &Path,
    exporter: &dyn Exporter,
) -> anyhow::Result<ExitCode> {
    if args.bundles.len() != 1
        || !args.arms.is_empty()
        || args.stock.is_some()
        || args.host.is_some()
        || args.as_written
        || args.allowed_signers.is_some()
    {
        return Err(UsageError(
            "--partial shows one unfinished bench bundle on its own: give one BUNDLE_DIR, without \
             other bundles, --arm, --stock, --host, --as-written or --allowed-signers"
                .into(),
        )
        .into());
    }
    if dir.join(SUMS_FILE).exists() {
        return Err(UsageError(format!(
            "{} is sealed (it has {SUMS_FILE}): --partial is for a bench that stopped before its \
             seal; report it without --partial",
            dir.display()
        ))
        .into());
    }
    let note_path = dir.join(INCOMPLETE_FILE);
    let note = match std::fs::read_to_string(&note_path) {
        Ok(note) => note,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => bail!(
            "{} has no {INCOMPLETE_FILE} note: --partial shows the completed rounds of a bench \
             bundle whose run stopped, which its note lists; this directory has neither a seal \
             nor such a note",
            dir.display()
        ),
        Err(e) => bail!("cannot read {}: {e}", note_path.display()),
    };
    if note.contains("`capshim tune` run") {
        bail!(
            "{}: an unfinished `capshim tune` bundle: --partial shows a bench's completed rounds, \
             and a tune's result is its whole search (stages, eliminations, the winner's \
             verify), which a stopped run did not finish; its {INCOMPLETE_FILE} note says how \
             far it got, and the outputs of the runs that finished are in its {RAW_DIR}/ \
             directory: run `capshim tune` again",
            dir.display()
        );
    }
    if !note.contains("`capshim bench` run") {
        bail!(
            "{}: its {INCOMPLETE_FILE} note is not a `capshim bench` run's: --partial shows bench \
             bundles only",
            dir.display()
        );
    }
    // A `bench --command` bench's raw files are the command's outputs (`.stdout`), and its
    // wall times are written only at the seal: nothing here to show them from.
    let command_outputs = std::fs::read_dir(dir.join(RAW_DIR)).is_ok_and(|entries| {
        entries
            .flatten()
            .any(|e| e.file_name().to_string_lossy().ends_with(".stdout"))
    });
    if command_outputs {
        bail!(
            "{}: an unfinished `capshim bench --command` bundle: --partial shows llama-bench's \
             results, and a command's values are recorded only when the bench seals its bundle; \
             the outputs of the runs that finished are in its {RAW_DIR}/ directory, and its \
             {INCOMPLETE_FILE} note says how far it got",
            dir.display()
        );
    }
    let runs = finished_runs(&note);
    let mut arms: Vec<&str> = Vec::new();
    for run in &runs {
        if !arms.contains(&run.arm.as_str()) {
            arms.push(&run.arm);
        }
    }
    // A run counts when its JSON holds results (a run --keep-going recorded as failed does
    // not); a round when every arm has one.
    let usable =
        |run: &Finished| read_bench_file(&dir.join(&run.json)).is_ok_and(|r| !r.is_empty());
    let mut rounds: Vec<u32> = runs.iter().map(|r| r.round).collect();
    rounds.sort_unstable();
    rounds.dedup();
    rounds.retain(|&round| {
        arms.iter().all(|arm| {
            runs.iter()
                .any(|r| r.arm == *arm && r.round == round && usable(r))
        })
    });
    if rounds.is_empty() || !arms.contains(&"stock") {
        bail!(
            "{}: no round finished with every arm ({}) giving a result, so there is no table to \
             show; its {INCOMPLETE_FILE} note says how far it got",
            dir.display(),
            if arms.is_empty() {
                "none ran".to_string()
            } else {
                arms.join(", ")
            }
        );
    }
    let file = |rel: String| dir.join(&rel).is_file().then_some(rel);
    let manifest = Manifest {
        format: bundle::manifest::FORMAT,
        model: None,
        workload: None,
        arms: arms
            .iter()
            .map(|arm| {
                let status = |round| file(format!("{RAW_DIR}/{arm}-r{round}.status.jsonl"));
                ManifestArm {
                    name: arm.to_string(),
                    role: if *arm == "stock" { "stock" } else { "other" }.into(),
                    profile: None,
                    args: Vec::new(),
                    shim: rounds.iter().any(|r| status(*r).is_some()),
                    runs: rounds
                        .iter()
                        .map(|&round| ManifestRun {
                            round,
                            json: format!("{RAW_DIR}/{arm}-r{round}.json"),
                            stderr: file(format!("{RAW_DIR}/{arm}-r{round}.stderr")),
                            status: status(round),
                            failed: None,
                        })
                        .collect(),
                }
            })
            .collect(),
    };
    let inputs = bundle::load_arms(dir, &manifest, None)?;
    // The order run, for the carry-over estimate (durations are not in the note).
    let sequence = runs
        .iter()
        .map(|r| ProcessRun {
            arm: r.arm.clone(),
            round: r.round,
            seconds: None,
        })
        .collect();
    let mut summary = analyze_with(
        &inputs,
        &Options {
            derivation: Derivation::Schema6,
            sequences: vec![sequence],
        },
    )?;
    summary.warnings.push(format!(
        "partial: the {} completed rounds of an unfinished bench (rounds {}); the bench stopped \
         for a reason that is not in its figures (its {INCOMPLETE_FILE} note), so these rounds' \
         intervals hold at their stated level, but the bundle was never sealed or checked",
        rounds.len(),
        rounds
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    ));
    let mark = format!(
        "PARTIAL: {} is an unfinished bench bundle (no {SUMS_FILE}); shown: the table of its {} \
         completed round{} (every arm gave a result), not a complete, verified bundle",
        dir.display(),
        rounds.len(),
        if rounds.len() == 1 { "" } else { "s" }
    );
    crate::term::warning(&mark);
    out(&format!("{mark}\n{}", exporter.render(&summary)?))?;
    Ok(ExitCode::from(EXIT_UNVERIFIED))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_notes_finished_runs_are_read_in_order_and_nothing_else() {
        let note = "This bundle is unfinished: the `capshim bench` run that wrote it stopped.\n\n\
                    Why it stopped: interrupted by SIGINT\n\n\
                    Runs finished (3 of 24):\n  \
                    arm stock round 1 (raw/stock-r1.json)\n  \
                    arm my-arm round 1 (raw/my-arm-r1.json)\n  \
                    arm stock round 2 (raw/../../etc/passwd)\n\n\
                    Run cut short (its raw files are partial):\n  \
                    arm my-arm round 2 (raw/my-arm-r2.json)\n";
        let runs = finished_runs(note);
        assert_eq!(
            runs,
            [
                Finished {
                    arm: "stock".into(),
                    round: 1,
                    json: "raw/stock-r1.json".into()
                },
                Finished {
                    arm: "my-arm".into(),
                    round: 1,
                    json: "raw/my-arm-r1.json".into()
                },
            ]
        );
        assert!(finished_runs("Runs finished (0 of 4):\n  none\n").is_empty());
    }
}
