//! The tune experiment on the experiment layer: the files identified, then stage after stage of
//! the search ([`super::search::Halving`]), each round running the reference and every
//! candidate still in the race once, in an order drawn at random for that round (the layer's
//! [`interleave`]), each process bench's llama-bench run ([`run_one`]); after the first stage
//! the best single knobs combined and added; then the winner verified; then the seal.
//!
//! Time: the search may spend [`Plan::search_time`] (the budget less the share kept for
//! verify). Before each stage the processes left are estimated from the seconds per process so
//! far; before each round the clock is read, and a stage is cut short when the time is up, so
//! the search ends at most one round late. The first qualifying candidate is always verified;
//! the next one only if the budget still holds as long as the last verify took.

use std::path::Path;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;

use super::derive::{self, accepted, qualifying, round_figures, verify_result};
use super::knobs::Candidate;
use super::manifest::{
    CandidateRecord, DERIVED_FILES, Manifest, RoundRecord, RunRecord, StageRecord,
};
use super::plan::{CommandMode, Plan};
use super::search::{Halving, Outcome as SearchOutcome};
use super::verifier::{self, VerifyProcess};
use crate::arms::Arm;
use crate::bench::command;
use crate::bench::environment::{Files, Round, RunRecord as BenchProcess};
use crate::bench::executor::run_one;
use crate::bench::runner::identify_files;
use crate::bundle::identity::{FileId, identify};
use crate::experiment::record::Header;
use crate::experiment::rounds::interleave;
use crate::experiment::seal::{Sealed, SealedBundle, write_sealed};
use crate::experiment::{self, Context, Experiment, ExperimentError, Words, io};
use crate::launch::Os;

/// How tune speaks of itself.
pub const WORDS: Words = Words {
    command: "tune",
    unit: "run",
    running: "the running llama-bench or capshim verify",
    tool_option: "--llama-bench",
    fix: "model path, llama-bench options after `--`",
    prefix: "capshim-tune",
};

/// How `tune --command` speaks of itself.
const COMMAND_WORDS: Words = Words {
    running: "the command or its --check",
    tool_option: "--command",
    fix: "the command, and the variables and command-args of its candidate",
    ..WORDS
};

/// The result of a tune run.
pub struct Outcome {
    /// The bundle and its reports.
    pub bundle: SealedBundle,
    /// The winner's label, if any.
    pub winner: Option<String>,
    /// Whether the bundle holds the recommendation profile file.
    pub recommended: bool,
    /// The result in words ([`super::render::headline`]).
    pub verdict: String,
    /// The summary's warnings (failed runs).
    pub warnings: Vec<String>,
}

impl Sealed for Outcome {
    fn bundle(&self) -> &SealedBundle {
        &self.bundle
    }
}

/// Runs the plan and writes the bundle.
///
/// # Errors
/// As bench's runs fail (a tool failing without `--keep-going`, an arm whose shim did not
/// activate without `--allow-inactive`, a signal, a file changed), or verify failing; the
/// bundle is then left unsealed with an INCOMPLETE note.
pub fn run(plan: &Plan) -> Result<Outcome, ExperimentError> {
    experiment::run(&mut Tune { plan })
}

struct Tune<'a> {
    plan: &'a Plan,
}

impl Experiment for Tune<'_> {
    type Sealed = Outcome;

    fn words(&self) -> Words {
        if self.plan.command.is_some() {
            COMMAND_WORDS
        } else {
            WORDS
        }
    }

    fn derived(&self) -> &'static [&'static str] {
        &DERIVED_FILES
    }

    fn output(&self) -> Option<&Path> {
        self.plan.bench.output.as_deref()
    }

    fn keep_going(&self) -> bool {
        self.plan.bench.keep_going
    }

    fn run_in(&mut self, dir: &Path, cx: &mut Context) -> Result<Outcome, ExperimentError> {
        let start = Instant::now();
        let dir = std::fs::canonicalize(dir).map_err(io("cannot resolve", dir))?;
        let (files, stamps) = if self.plan.command.is_some() {
            // A command's own files are not known; the shim's is.
            let mut stamps = Vec::new();
            let dylib = match self.plan.bench.dylib.as_deref() {
                Some(path) => {
                    let stop = || cx.signals.received();
                    let (id, stamp) = identify(path, "shim library", &stop)?;
                    stamps.push(stamp);
                    Some(id)
                }
                None => None,
            };
            (RunFiles::Command { dylib }, stamps)
        } else {
            let (files, stamps) = identify_files(&self.plan.bench, cx)?;
            (RunFiles::Llama(Box::new(files)), stamps)
        };
        let mut search = Search::new(self.plan, start);
        search.run(&dir, cx)?;
        search.verify(&dir, cx)?;
        for stamp in &stamps {
            stamp.check()?;
        }
        search.seal(&dir, cx, files)
    }
}

/// The files a run used: llama-bench's (the model, llama-bench, the shim), or with `--command`
/// the shim's alone.
#[derive(Serialize)]
#[serde(untagged)]
enum RunFiles {
    Llama(Box<Files>),
    Command { dylib: Option<FileId> },
}

/// `environment.json`.
#[derive(Serialize)]
struct Environment<'a> {
    #[serde(flatten)]
    header: Header,
    injection_variable: &'static str,
    files: RunFiles,
    /// What the probe found of llama.cpp, which chose the knobs (not with `--command`).
    #[serde(skip_serializing_if = "Option::is_none")]
    probe: Option<&'a super::probe::Probe>,
    /// The reference, then every candidate, as run.
    arms: &'a [Arm],
    /// llama-bench's arguments before each arm's own (not with `--command`).
    #[serde(skip_serializing_if = "Option::is_none")]
    llama_bench_args: Option<Vec<String>>,
    /// With `--command`: the command and what is measured of it.
    #[serde(skip_serializing_if = "Option::is_none")]
    workload: Option<&'a crate::bundle::workload::Workload>,
    /// Every llama-bench process, in the order run.
    runs: &'a [BenchProcess],
    /// Every verify process.
    verify_runs: &'a [VerifyProcess],
    /// What the derived files come from.
    tune: &'a Manifest,
}

/// A search in progress.
struct Search<'a> {
    plan: &'a Plan,
    start: Instant,
    /// The reference, then the candidates by index (`arms[1 + i]`).
    arms: Vec<Arm>,
    candidates: Vec<Candidate>,
    halving: Halving,
    manifest: Manifest,
    runs: Vec<BenchProcess>,
    verify_runs: Vec<VerifyProcess>,
    /// Processes run, and their wall time with the time between them.
    processes: usize,
    seconds: f64,
    round: u32,
}

impl<'a> Search<'a> {
    fn new(plan: &'a Plan, start: Instant) -> Self {
        let candidates = plan.candidates.clone();
        let manifest = Manifest {
            model: plan
                .bench
                .model
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            reference: plan.reference.arm.name.clone(),
            budget_seconds: plan.budget.as_secs_f64(),
            search_seconds: plan.search_time().as_secs_f64(),
            first_rounds: plan.config.first_rounds,
            band: plan.config.band,
            candidates: candidates
                .iter()
                .zip(&plan.bench.arms[1..])
                .map(|(c, arm)| {
                    let spec = c
                        .arm_spec(&plan.reference.base)
                        .expect("written as an arm when the plan was made");
                    CandidateRecord::new(c, spec, arm, None)
                })
                .collect(),
            left_out: plan.left_out.clone(),
            ended: "complete".to_string(),
            command: plan.command.as_ref().map(|c| c.workload.command.clone()),
            check: plan.command.as_ref().and_then(|c| c.check.clone()),
            ..Manifest::default()
        };
        Search {
            plan,
            start,
            arms: plan.bench.arms.clone(),
            halving: Halving::new(candidates.len(), plan.config),
            candidates,
            manifest,
            runs: Vec::new(),
            verify_runs: Vec::new(),
            processes: 0,
            seconds: 0.0,
            round: 0,
        }
    }

    fn labels(&self) -> Vec<String> {
        self.candidates.iter().map(|c| c.label.clone()).collect()
    }

    /// The time the search has left.
    fn left(&self) -> Duration {
        self.plan.search_time().saturating_sub(self.start.elapsed())
    }

    /// The stages, until the search has no further one or its time is up.
    fn run(&mut self, dir: &Path, cx: &mut Context) -> Result<(), ExperimentError> {
        let bar = ProgressBar::new(self.plan.search_time().as_secs().max(1));
        bar.set_style(
            ProgressStyle::with_template("{spinner} [{elapsed_precise}] {bar:30} {msg}")
                .expect("valid template"),
        );
        let mut added = 0;
        loop {
            let left = self.left();
            if left.is_zero() {
                self.manifest.ended = "budget".to_string();
                break;
            }
            let processes_left = if self.processes == 0 {
                usize::MAX
            } else {
                (left.as_secs_f64() / (self.seconds / self.processes as f64)) as usize
            };
            let Some(stage) = self.halving.next_stage(processes_left) else {
                // Over, or no round fits in the time left.
                if self.halving.next_stage(usize::MAX).is_some() {
                    self.manifest.ended = "budget".to_string();
                }
                break;
            };
            let mut record = StageRecord {
                number: stage.number,
                alive: stage.alive.clone(),
                rounds_planned: stage.rounds,
                added,
                rounds: Vec::new(),
            };
            added = 0;
            cx.progress.total = (self.processes + stage.processes()) as u64;
            let mut logs = vec![Vec::new(); stage.alive.len()];
            for r in 1..=stage.rounds {
                if self.left().is_zero() {
                    self.manifest.ended = "budget".to_string();
                    break;
                }
                let shown = format!(
                    "stage {}, round {r}/{}: {} candidate{}, {} left",
                    stage.number,
                    stage.rounds,
                    stage.alive.len(),
                    if stage.alive.len() == 1 { "" } else { "s" },
                    clock(self.left())
                );
                bar.set_message(shown.clone());
                if bar.is_hidden() {
                    crate::term::line(format!("capshim: tune: {shown}"));
                }
                let round = self
                    .round(dir, cx, &stage.alive, &bar)
                    .inspect_err(|_| bar.finish_and_clear())?;
                let labels = self.labels();
                let figures = round_figures(dir, &self.manifest, &labels, &round)
                    .map_err(ExperimentError::derive)?;
                for (c, f) in figures {
                    if let Some(i) = stage.alive.iter().position(|&a| a == c) {
                        logs[i].push(f);
                    }
                }
                record.rounds.push(round);
            }
            self.halving.record(&stage, &logs);
            self.manifest.stages.push(record);
            if self.manifest.ended == "budget" {
                break;
            }
            // Combinations only from a first stage that ran in full: its estimates are what
            // picks the knobs to combine.
            if stage.number == 1 {
                added = self.combine()?;
            }
        }
        bar.finish_and_clear();
        Ok(())
    }

    /// One round: the reference and every alive candidate once, in a random order.
    fn round(
        &mut self,
        dir: &Path,
        cx: &mut Context,
        alive: &[usize],
        bar: &ProgressBar,
    ) -> Result<RoundRecord, ExperimentError> {
        self.round += 1;
        let round = self.round;
        let arms: Vec<usize> = std::iter::once(0)
            .chain(alive.iter().map(|c| c + 1))
            .collect();
        let began = Instant::now();
        let mut record = RoundRecord {
            round,
            runs: Vec::new(),
        };
        for slot in interleave(arms.len(), 1, rand::rng()) {
            cx.check_signals()?;
            let arm = &self.arms[arms[slot.arm]];
            let stem = format!("{}-r{round}", arm.name);
            let out = if self.plan.command.is_some() {
                "stdout"
            } else {
                "json"
            };
            let json = format!("raw/{stem}.{out}");
            let stderr = format!("raw/{stem}.stderr");
            let status = arm
                .profile
                .is_some()
                .then(|| format!("raw/{stem}.status.jsonl"));
            cx.progress
                .start(format!("arm {} round {round} ({json})", arm.name));
            let (process, failed, seconds) = match &self.plan.command {
                None => {
                    let (process, failed) = run_one(
                        &self.plan.bench,
                        arm,
                        round,
                        &self.plan.bench.llama_args_for(arm),
                        dir,
                        (&json, &stderr, status.as_deref()),
                        cx,
                    )?;
                    (process, failed, None)
                }
                Some(mode) => {
                    let status_path = status.as_ref().map(|s| dir.join(s));
                    let measured = command::run_one(
                        cx,
                        &command::Job {
                            command: &mode.workload.command,
                            arm,
                            dylib: self.plan.bench.dylib.as_deref(),
                            workload: &mode.workload,
                            regex: None,
                            allow_inactive: self.plan.bench.allow_inactive,
                        },
                        &command::Output {
                            stdout: &dir.join(&json),
                            stderr: &dir.join(&stderr),
                            status: status_path.as_deref(),
                        },
                        Round { round },
                        format!("arm {} round {round}", arm.name),
                    )?;
                    let failed = measured.record.failed.clone();
                    (measured.record, failed, measured.value)
                }
            };
            if failed.is_none() {
                cx.progress.finish();
            }
            self.runs.push(process);
            record.runs.push(RunRecord {
                arm: arm.name.clone(),
                json,
                stderr,
                failed,
                seconds,
            });
            bar.set_position(self.start.elapsed().as_secs());
        }
        self.processes += arms.len();
        self.seconds += began.elapsed().as_secs_f64();
        Ok(record)
    }

    /// After the first stage: the best single knobs, those faster than the reference, combined
    /// and added to the search. Returns how many were added.
    fn combine(&mut self) -> Result<usize, ExperimentError> {
        let outcome: SearchOutcome = self.halving.outcome();
        let best: Vec<Candidate> = outcome
            .ranking
            .iter()
            .filter(|r| r.estimate.is_some_and(|e| e > 1.0))
            .take(self.plan.combine_best)
            .map(|r| self.candidates[r.candidate].clone())
            .collect();
        if best.len() < 2 {
            return Ok(0);
        }
        let mut added = 0;
        for combo in (self.plan.combine)(&best) {
            if self.arms.iter().any(|a| a.name == combo.label) {
                continue;
            }
            let arm = combo.arm_spec(&self.plan.reference.base).and_then(|spec| {
                self.plan
                    .arm_options
                    .resolve(&spec)
                    .and_then(|arm| {
                        crate::bench::plan::check_arm_args(
                            std::slice::from_ref(&arm),
                            &self.plan.bench.extra,
                        )
                        .map(|()| arm)
                    })
                    .map(|arm| (spec, arm))
                    .map_err(|e| e.to_string())
            });
            let (spec, arm) = match arm {
                Ok(arm) => arm,
                Err(e) => {
                    crate::term::warning(format!(
                        "the combination {} is left out: {e}",
                        combo.label
                    ));
                    continue;
                }
            };
            self.manifest
                .candidates
                .push(CandidateRecord::new(&combo, spec, &arm, Some(1)));
            self.arms.push(arm);
            self.candidates.push(combo);
            added += 1;
        }
        if added > 0 {
            self.halving.add(added);
        }
        Ok(added)
    }

    /// The qualifying candidates verified in order until one is `equivalent`: the first
    /// always, each next one only while the budget holds as long as the last verify took.
    fn verify(&mut self, dir: &Path, cx: &mut Context) -> Result<(), ExperimentError> {
        let outcome = self.halving.outcome();
        let mut last: Option<Duration> = None;
        for c in qualifying(&outcome, self.plan.config.band) {
            let label = self.candidates[c].label.clone();
            let left = self.plan.budget.saturating_sub(self.start.elapsed());
            if let Some(took) = last
                && left < took
            {
                crate::term::note(format!(
                    "no time left in the budget to verify {label} (the last verify took {:.1} s); \
                     it is not a winner",
                    took.as_secs_f64()
                ));
                break;
            }
            let began = Instant::now();
            let (record, process) = match &self.plan.command {
                None => {
                    crate::term::line(format!(
                        "capshim: tune: verifying {label} against {} (verify-{label})",
                        self.manifest.reference
                    ));
                    let spec = self.manifest.candidates[c].arm.clone();
                    verifier::verify(self.plan, &label, &spec, dir, cx)?
                }
                Some(CommandMode { check: None, .. }) => break,
                Some(CommandMode {
                    check: Some(check), ..
                }) => {
                    crate::term::line(format!("capshim: tune: checking {label} with --check"));
                    verifier::check(self.plan, check, &self.arms[c + 1], dir, cx)?
                }
            };
            last = Some(began.elapsed());
            let verdict = verify_result(dir, &record).verdict;
            let record_is_check = record.check;
            self.manifest.verify.push(record);
            self.verify_runs.push(process);
            if accepted(&verdict) {
                break;
            }
            crate::term::warning(format!(
                "{label} is faster but {}; it is rejected",
                if record_is_check {
                    format!("its --check {verdict}")
                } else {
                    format!("verify found it {verdict} against the reference")
                }
            ));
        }
        Ok(())
    }

    /// Derives and writes the derived files, `environment.json` and `SHA256SUMS`.
    fn seal(self, dir: &Path, cx: &Context, files: RunFiles) -> Result<Outcome, ExperimentError> {
        let derived = derive::derive(dir, &self.manifest).map_err(ExperimentError::derive)?;
        let env = Environment {
            header: Header::now("tune", super::manifest::SCHEMA_VERSION, cx.started),
            injection_variable: Os::current().injection_var(),
            files,
            probe: self.plan.probe.as_ref(),
            arms: &self.arms,
            llama_bench_args: self
                .plan
                .command
                .is_none()
                .then(|| self.plan.bench.llama_args()),
            workload: self.plan.command.as_ref().map(|c| &c.workload),
            runs: &self.runs,
            verify_runs: &self.verify_runs,
            tune: &self.manifest,
        };
        write_sealed(dir, &derived.files, &env)?;
        Ok(Outcome {
            bundle: SealedBundle {
                dir: dir.to_path_buf(),
                markdown: derived.text("report.md").to_string(),
                summary_json: derived.text("summary.json").to_string(),
            },
            recommended: derived
                .files
                .iter()
                .any(|(n, _)| *n == super::manifest::RECOMMENDATION),
            winner: derived.winner,
            verdict: derived.verdict,
            warnings: derived.warnings,
        })
    }
}

/// A duration as `m:ss`.
fn clock(d: Duration) -> String {
    let s = d.as_secs();
    format!("{}:{:02}", s / 60, s % 60)
}
