//! The `bench --command` experiment on the experiment layer: the shim library identified
//! before the first run; `--warmup` runs of each arm, unmeasured; then every round's arms in
//! that round's random order ([`crate::experiment::rounds`]), each measured run after its
//! `--prepare` command; the library checked unchanged; then the seal, a bench bundle whose
//! manifest names the workload. A failure or a signal leaves the bundle unsealed with an
//! INCOMPLETE note; with `--keep-going` a failed run is recorded as failed and the rounds go on.

use std::path::Path;

use serde::Serialize;

use super::run::SHELL;
use super::{Job, Output, Plan, run_one};
use crate::analysis::input::ProcessRun;
use crate::analysis::{Role, SCHEMA_VERSION};
use crate::arms::Arm;
use crate::bench::derive::{DERIVED_FILES, derive};
use crate::bench::environment::{Round, RunRecord};
use crate::bench::runner::WORDS;
use crate::bench::seal::Outcome;
use crate::bundle::identity::{FileId, Stamp, identify};
use crate::bundle::workload::Workload;
use crate::bundle::{self, Manifest, ManifestArm, ManifestRun, RAW_DIR};
use crate::experiment::record::{Header, Process};
use crate::experiment::rounds::run_rounds;
use crate::experiment::seal::{SealedBundle, write_sealed};
use crate::experiment::tool::{Failure, ToolRun};
use crate::experiment::{self, Context, Experiment, ExperimentError, Words, io};
use crate::launch::Os;

/// How `bench --command` speaks of itself.
const COMMAND_WORDS: Words = Words {
    running: "the command",
    tool_option: "--command",
    fix: "the command, its arm's variables and command-args",
    ..WORDS
};

/// What to check when `--prepare` fails: it runs as stock, so the arm's settings are not it.
const PREPARE_FIX: &str = "the --prepare command (it runs without the shim and without the \
                           arm's variables and command-args)";

/// Where in a bench a warm-up process ran.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Warmup {
    /// 1-based warm-up run of its arm.
    pub warmup: u32,
}

/// The files a command bench used: only the shim library is capshim's to identify (the
/// command's own files are the command's).
#[derive(Serialize)]
struct Files {
    /// The shim library, when an arm used it.
    dylib: Option<FileId>,
}

/// The whole of a command bench's `environment.json`.
#[derive(Serialize)]
struct Environment<'a> {
    /// Layout, kind (`bench`), capshim's version, times, the machine.
    #[serde(flatten)]
    header: Header,
    /// The command and what is measured (also in the manifest, `bundle.workload`).
    workload: &'a Workload,
    /// The shell the command runs in, as `SHELL -c COMMAND`.
    shell: &'static str,
    /// `DYLD_INSERT_LIBRARIES` or `LD_PRELOAD`.
    injection_variable: &'static str,
    /// The files the run used.
    files: Files,
    /// The arms, as planned.
    arms: &'a [Arm],
    /// Rounds.
    rounds: u32,
    /// Unmeasured runs of each arm before the first round.
    warmup: u32,
    /// The command run before each measured run, untimed.
    prepare: Option<&'a str>,
    /// The pause between one process and the next, in seconds (`--cooldown`; 0 for none).
    cooldown_seconds: f64,
    /// Every warm-up process, in the order run.
    warmup_runs: &'a [Process<Warmup>],
    /// Every `--prepare` process, in the order run.
    prepare_runs: &'a [RunRecord],
    /// Every measured process, in the order run: a `wall` bench's values.
    runs: &'a [RunRecord],
    /// Which raw files belong to which arm and round, and the workload.
    bundle: &'a Manifest,
}

/// A command bench of a [`Plan`].
struct CommandBench<'a> {
    plan: &'a Plan,
}

/// Runs the plan and writes the bundle.
///
/// # Errors
/// When the shim library cannot be hashed, the command fails (without `--keep-going`), the
/// shim did not activate in an unlocked arm (without `allow_inactive`), the library changed
/// during the runs, or the bundle cannot be written. Raw files written so far stay in the
/// bundle directory, which the error names.
pub fn run(plan: &Plan) -> Result<Outcome, ExperimentError> {
    experiment::run(&mut CommandBench { plan })
}

impl Experiment for CommandBench<'_> {
    type Sealed = Outcome;

    fn words(&self) -> Words {
        COMMAND_WORDS
    }

    fn derived(&self) -> &'static [&'static str] {
        &DERIVED_FILES
    }

    fn output(&self) -> Option<&Path> {
        self.plan.output.as_deref()
    }

    fn keep_going(&self) -> bool {
        self.plan.keep_going
    }

    fn cooldown(&self) -> std::time::Duration {
        self.plan.cooldown
    }

    fn run_in(&mut self, dir: &Path, cx: &mut Context) -> Result<Outcome, ExperimentError> {
        run_in(self.plan, dir, cx)
    }
}

/// Everything the runs record, for the seal.
#[derive(Default)]
struct Records {
    warmups: Vec<Process<Warmup>>,
    prepares: Vec<RunRecord>,
    runs: Vec<RunRecord>,
}

/// Runs `--prepare` before arm `arm`'s run in `round`, as stock (no shim, no arm variables),
/// its output to `raw/<stem>.prepare.stdout` and `.stderr`. Returns why it failed, when
/// `--keep-going` recorded it.
fn prepare(
    cx: &mut Context,
    command: &str,
    (dir, stem): (&Path, &str),
    (arm, round): (&str, u32),
    prepares: &mut Vec<RunRecord>,
) -> Result<Option<String>, ExperimentError> {
    let stdout = dir.join(format!("{RAW_DIR}/{stem}.prepare.stdout"));
    let stderr = dir.join(format!("{RAW_DIR}/{stem}.prepare.stderr"));
    let env = Arm::stock().env_change_from(None, Path::new(""), std::env::vars_os());
    let args = vec!["-c".to_string(), command.to_string()];
    let run = ToolRun {
        tool: "the --prepare command",
        program: Path::new(SHELL),
        args: &args,
        env: &env,
        stdout: &stdout,
        stderr: &stderr,
    };
    let finished = cx.run_tool_in_group(&run)?;
    let mut record = Process::new(arm, Round { round }, run.argv(), env, &finished);
    let failed = (!finished.status.success()).then(|| finished.reason());
    if let Some(reason) = &failed {
        cx.failed_fixing(
            Failure {
                tool: "the --prepare command",
                arm: arm.to_string(),
                what: format!("arm {arm} round {round}"),
                reason: reason.clone(),
                stderr,
                stdout: Some(stdout),
            },
            PREPARE_FIX,
        )?;
        record.failed = Some(reason.clone());
    }
    prepares.push(record);
    Ok(failed.map(|r| format!("--prepare failed: {r}")))
}

fn run_in(plan: &Plan, dir: &Path, cx: &mut Context) -> Result<Outcome, ExperimentError> {
    let dir = std::fs::canonicalize(dir).map_err(io("cannot resolve", dir))?;
    let warmups = plan.arms.len() as u64 * u64::from(plan.warmup);
    cx.progress.total = warmups + plan.arms.len() as u64 * u64::from(plan.rounds);
    let mut stamps: Vec<Stamp> = Vec::new();
    let files = Files {
        dylib: match plan.dylib.as_deref() {
            Some(p) => {
                let (id, stamp) = identify(p, "shim library", &|| cx.signals.received())?;
                stamps.push(stamp);
                Some(id)
            }
            None => None,
        },
    };
    let regex = plan
        .workload
        .regex()
        .map_err(|e| ExperimentError::Derive(Box::new(e)))?;
    let job = |arm| Job {
        command: &plan.workload.command,
        arm,
        dylib: plan.dylib.as_deref(),
        workload: &plan.workload,
        regex: regex.as_ref(),
        allow_inactive: plan.allow_inactive,
    };
    let mut manifest = Manifest {
        format: bundle::manifest::FORMAT,
        model: None,
        workload: Some(plan.workload.clone()),
        arms: plan
            .arms
            .iter()
            .map(|a| ManifestArm {
                name: a.name.clone(),
                role: match a.role {
                    Role::Stock => "stock",
                    Role::Host => "host",
                    Role::Other => "other",
                }
                .to_string(),
                profile: Some(a.profile_name.clone()),
                shim: a.profile.is_some(),
                args: a.args.command.clone(),
                runs: Vec::new(),
            })
            .collect(),
    };
    let mut rec = Records::default();
    let files_of = |stem: &str, shim: bool| {
        (
            format!("{RAW_DIR}/{stem}.stdout"),
            format!("{RAW_DIR}/{stem}.stderr"),
            shim.then(|| format!("{RAW_DIR}/{stem}.status.jsonl")),
        )
    };
    // Warm-up first, each arm in turn: caches, compiled kernels and the like settle before
    // anything is measured.
    for arm in &plan.arms {
        for w in 1..=plan.warmup {
            cx.check_signals()?;
            let stem = format!("{}-w{w}", arm.name);
            let (out, err, status) = files_of(&stem, arm.profile.is_some());
            cx.progress
                .start(format!("arm {} warm-up {w} ({out})", arm.name));
            let (out, err, status) = (dir.join(out), dir.join(err), status.map(|s| dir.join(s)));
            let measured = run_one(
                cx,
                &job(arm),
                &Output {
                    stdout: &out,
                    stderr: &err,
                    status: status.as_deref(),
                },
                Warmup { warmup: w },
                format!("arm {} warm-up {w}", arm.name),
            )?;
            if measured.value.is_some() {
                cx.progress.finish();
            }
            rec.warmups.push(measured.record);
        }
    }
    let names: Vec<String> = plan.arms.iter().map(|a| a.name.clone()).collect();
    run_rounds(cx, &names, plan.rounds, |cx, slot| {
        let arm = &plan.arms[slot.arm];
        let stem = format!("{}-r{}", arm.name, slot.round);
        let (out_rel, err_rel, status_rel) = files_of(&stem, arm.profile.is_some());
        cx.progress
            .start(format!("arm {} round {} ({out_rel})", arm.name, slot.round));
        let prepared = match &plan.prepare {
            Some(command) => prepare(
                cx,
                command,
                (&dir, &stem),
                (&arm.name, slot.round),
                &mut rec.prepares,
            )?,
            None => None,
        };
        let failed = match prepared {
            Some(reason) => Some(reason),
            None => {
                let status = status_rel.as_ref().map(|s| dir.join(s));
                let measured = run_one(
                    cx,
                    &job(arm),
                    &Output {
                        stdout: &dir.join(&out_rel),
                        stderr: &dir.join(&err_rel),
                        status: status.as_deref(),
                    },
                    Round { round: slot.round },
                    format!("arm {} round {}", arm.name, slot.round),
                )?;
                let failed = measured.record.failed.clone();
                rec.runs.push(measured.record);
                failed
            }
        };
        if failed.is_none() {
            cx.progress.finish();
        }
        manifest.arms[slot.arm].runs.push(ManifestRun {
            round: slot.round,
            json: out_rel,
            stderr: Some(err_rel),
            status: status_rel,
            failed,
        });
        Ok(())
    })?;
    for stamp in &stamps {
        stamp.check()?;
    }
    seal(plan, &dir, cx, &manifest, files, &rec)
}

/// Derives and writes the reports, `environment.json` and `SHA256SUMS`.
fn seal(
    plan: &Plan,
    dir: &Path,
    cx: &Context,
    manifest: &Manifest,
    files: Files,
    rec: &Records,
) -> Result<Outcome, ExperimentError> {
    let order: Vec<ProcessRun> = rec
        .runs
        .iter()
        .map(|r| ProcessRun {
            arm: r.arm.clone(),
            round: r.at.round,
            seconds: Some(r.seconds),
        })
        .collect();
    let derived = derive(dir, manifest, SCHEMA_VERSION, &order).map_err(ExperimentError::derive)?;
    let env = Environment {
        header: Header::now("bench", SCHEMA_VERSION, cx.started),
        workload: &plan.workload,
        shell: SHELL,
        injection_variable: Os::current().injection_var(),
        files,
        arms: &plan.arms,
        rounds: plan.rounds,
        warmup: plan.warmup,
        prepare: plan.prepare.as_deref(),
        cooldown_seconds: plan.cooldown.as_secs_f64(),
        warmup_runs: &rec.warmups,
        prepare_runs: &rec.prepares,
        runs: &rec.runs,
        bundle: manifest,
    };
    write_sealed(dir, &derived.files, &env)?;
    let no_result = manifest
        .arms
        .iter()
        .filter(|a| a.role != "stock" && !a.runs.is_empty())
        .filter(|a| a.runs.iter().all(|r| r.failed.is_some()))
        .map(|a| a.name.clone())
        .collect();
    Ok(Outcome {
        no_result,
        bundle: SealedBundle {
            dir: dir.to_path_buf(),
            markdown: derived.text("report.md").to_string(),
            summary_json: derived.text("summary.json").to_string(),
        },
    })
}
