//! Runs the experiment: every arm as a fresh llama-bench process per round, in ABBA order, with
//! the shim injected only into unlocked arms; then analyses the bundle and seals it.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use capshim_profile::Profile;
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;

use super::environment;
use super::schedule::interleave;
use crate::analysis::AnalyzeError;
use crate::analysis::{Role, Summary, analyze};
use crate::bundle::load::LoadError;
use crate::bundle::{self, BundleError, Manifest, ManifestArm, ManifestRun, RAW_DIR, time};
use crate::export::{self, ExportError};
use crate::launch::Os;
use crate::launch::signals::{self, Forwarder};
use crate::launch::status::{StatusEvent, StatusFileError};
use crate::llama::bench_json::ParseError;
use crate::llama::{Activation, read_bench_file};

/// Why a bench run stopped.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// An extra llama-bench argument is refused.
    #[error(
        "the llama-bench option {arg:?} after `--` is refused: {why}; remove it from the extra arguments"
    )]
    RefusedArg {
        /// The argument.
        arg: String,
        /// Why, and what to use instead.
        why: &'static str,
    },
    /// An extra llama-bench argument asks for a sweep of a setting.
    #[error(
        "the llama-bench option {option} after `--` sweeps a setting ({why}): llama-bench would run every \
         value as the same test, and capshim refuses to pool those into one median; pass one value per \
         option after `--` (e.g. `-- -t 8`) and run capshim bench once per setting"
    )]
    Sweep {
        /// The option and its value(s) as given.
        option: String,
        /// What makes it a sweep.
        why: String,
    },
    /// The bundle could not be created or sealed.
    #[error(transparent)]
    Bundle(#[from] BundleError),
    /// A file operation failed.
    #[error("{action} {path}: {source}")]
    Io {
        /// What was being done.
        action: &'static str,
        /// On which path.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// llama-bench could not be started.
    #[error("cannot start llama-bench {path}: {source}; check --llama-bench")]
    Spawn {
        /// The executable.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// llama-bench exited with an error.
    #[error(
        "llama-bench failed in arm {arm} round {round} ({status}); its stderr ({stderr}) ends with:\n  {tail}\n\
         fix the cause above (model path, llama-bench options after `--`) and rerun"
    )]
    LlamaFailed {
        /// The arm.
        arm: String,
        /// The round.
        round: u32,
        /// How it exited.
        status: String,
        /// Its stderr file.
        stderr: PathBuf,
        /// The last lines of its stderr.
        tail: String,
    },
    /// llama-bench's output is unreadable.
    #[error(transparent)]
    Output(#[from] ParseError),
    /// The shim's status file is unreadable.
    #[error(transparent)]
    Status(#[from] StatusFileError),
    /// An unlocked arm ran stock.
    #[error(
        "the shim did not activate in arm {arm} round {round}: no `hooked` event in {status_file} and no \
         `capshim: hooked` line in {stderr_file}; {said}. An \"unlocked\" arm that is silently stock would \
         be a false result. Check that {inject} can load {dylib} (macOS: the host setting \
         ForceUnrestrictedDeviceFeatureLevel, SIP and hardened runtime; Linux has no Metal, so \
         the shim never activates there), or pass --allow-inactive to measure anyway",
        inject = Os::current().injection_var()
    )]
    NotActivated {
        /// The arm.
        arm: String,
        /// The round.
        round: u32,
        /// The status file.
        status_file: PathBuf,
        /// The stderr file.
        stderr_file: PathBuf,
        /// What the shim said on stderr.
        said: String,
        /// The shim library.
        dylib: String,
    },
    /// A raw file of the new bundle is unreadable.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// The arms cannot be compared.
    #[error(transparent)]
    Analyze(#[from] AnalyzeError),
    /// An output format failed.
    #[error(transparent)]
    Export(#[from] ExportError),
    /// A JSON file could not be written.
    #[error("cannot serialize {what}: {source}")]
    Json {
        /// Which file.
        what: &'static str,
        /// The serializer's error.
        source: serde_json::Error,
    },
    /// A signal stopped the run.
    #[error(
        "interrupted by {signal}: llama-bench was stopped and no further runs were started; \
         the bundle is unfinished (no SHA256SUMS), see its {note} note"
    )]
    Interrupted {
        /// The signal's name, e.g. `SIGTERM`.
        signal: String,
        /// The signal's number.
        number: i32,
        /// The note's file name.
        note: &'static str,
    },
    /// Any of the above, after the bundle directory was created.
    #[error("bench stopped; the raw files written so far are in {dir}")]
    Stopped {
        /// The partial bundle.
        dir: PathBuf,
        /// Why.
        #[source]
        source: Box<RunError>,
    },
}

fn io(action: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> RunError {
    let path = path.to_path_buf();
    move |source| RunError::Io {
        action,
        path,
        source,
    }
}

/// llama-bench options capshim sets itself, or that make it print no results; refused after `--`.
pub const REFUSED_ARGS: [(&[&str], &str); 7] = [
    (
        &["-o", "--output", "-oe", "--output-err"],
        "capshim passes `-o json` itself and reads llama-bench's JSON",
    ),
    (&["-m", "--model"], "give the model with capshim's -m"),
    (&["-r", "--repetitions"], "use capshim's -r"),
    (&["-p", "--n-prompt"], "use capshim's -p"),
    (&["-n", "--n-gen"], "use capshim's -n"),
    (
        &["-h", "--help", "--version", "--list-devices"],
        "llama-bench then prints no results",
    ),
    (
        &["-hf", "-hfr", "--hf-repo", "-hff", "--hf-file"],
        "download the model first and give it with -m, so its checksum is recorded",
    ),
];

/// llama-bench options whose value may be a comma list (or that may be repeated) to sweep a
/// setting: each value runs as the same test, so results of several settings share a name. The
/// test-shaping `-d` (depth) and `-pg` are not here: they give different tests.
const SWEEP_OPTIONS: &[&[&str]] = &[
    &["-t", "--threads"],
    &["-ngl", "--n-gpu-layers"],
    &["-b", "--batch-size"],
    &["-ub", "--ubatch-size"],
    &["-ctk", "--cache-type-k"],
    &["-ctv", "--cache-type-v"],
    &["-fa", "--flash-attn"],
    &["-sm", "--split-mode"],
    &["-mg", "--main-gpu"],
    &["-nkvo", "--no-kv-offload"],
    &["-ncmoe", "--n-cpu-moe"],
    &["-C", "--cpu-mask"],
    &["--cpu-strict"],
    &["--poll"],
    &["-embd", "--embeddings"],
    &["-ts", "--tensor-split"],
    &["-mmp", "--mmap"],
    &["-dio", "--direct-io"],
    &["-nopo", "--no-op-offload"],
    &["--no-host"],
    &["-dev", "--device"],
    &["-rpc", "--rpc"],
];

/// Refuses a setting swept with a comma list or by repeating its option.
fn check_sweeps(extra: &[String]) -> Result<(), RunError> {
    let mut seen: Vec<(&[&str], String)> = Vec::new();
    for (i, arg) in extra.iter().enumerate() {
        let (flag, attached) = match arg.split_once('=') {
            Some((f, v)) => (f, Some(v)),
            None => (arg.as_str(), None),
        };
        let Some(names) = SWEEP_OPTIONS.iter().find(|names| names.contains(&flag)) else {
            continue;
        };
        let value = attached.or_else(|| extra.get(i + 1).map(String::as_str));
        let shown = match value {
            Some(v) if attached.is_none() => format!("{arg} {v}"),
            _ => arg.clone(),
        };
        if let Some(v) = value.filter(|v| v.contains(',')) {
            return Err(RunError::Sweep {
                option: shown,
                why: format!("{v:?} is a comma list"),
            });
        }
        if let Some((_, first)) = seen.iter().find(|(n, _)| n == names) {
            return Err(RunError::Sweep {
                option: shown,
                why: format!("the option is given twice, first as {first}"),
            });
        }
        seen.push((names, shown));
    }
    Ok(())
}

/// llama-bench's output formats, which may follow `-o` / `-oe` attached.
const OUTPUT_FORMATS: &[&str] = &["csv", "json", "jsonl", "md", "sql", "none"];

/// Checks the extra llama-bench arguments given after `--`.
///
/// # Errors
/// Names the first refused option and what to do instead.
pub fn check_extra_args(extra: &[String]) -> Result<(), RunError> {
    for arg in extra {
        let mut flag = arg.split_once('=').map_or(arg.as_str(), |(f, _)| f);
        // The attached forms `-ocsv` and `-oejson` (but not `-ot`, override-tensor).
        for short in ["-oe", "-o"] {
            if let Some(format) = flag.strip_prefix(short)
                && OUTPUT_FORMATS.contains(&format)
            {
                flag = short;
                break;
            }
        }
        for (flags, why) in REFUSED_ARGS {
            if flags.contains(&flag) {
                return Err(RunError::RefusedArg {
                    arg: arg.clone(),
                    why,
                });
            }
        }
    }
    check_sweeps(extra)
}

/// One arm to run.
#[derive(Clone, Debug, Serialize)]
pub struct ArmPlan {
    /// Its name in tables and file names.
    pub name: String,
    /// The named profile (`stock`, `apple9-64k`, `host`).
    pub profile_name: String,
    /// The profile's values; `None` runs without the shim.
    pub profile: Option<Profile>,
    /// Stock or other.
    pub role: Role,
}

/// Everything a bench run needs, validated.
#[derive(Clone, Debug)]
pub struct Plan {
    /// The llama-bench executable.
    pub llama_bench: PathBuf,
    /// The GGUF model.
    pub model: PathBuf,
    /// `-r`: repetitions per test and process.
    pub repetitions: u32,
    /// `-p`: prompt lengths, as llama-bench takes them (`512` or `128,512`).
    pub n_prompt: String,
    /// `-n`: generation lengths.
    pub n_gen: String,
    /// Extra llama-bench arguments.
    pub extra: Vec<String>,
    /// The arms, stock first.
    pub arms: Vec<ArmPlan>,
    /// Rounds.
    pub rounds: u32,
    /// The shim library, required when an arm has a profile.
    pub dylib: Option<PathBuf>,
    /// Measure an unlocked arm even when the shim did not activate.
    pub allow_inactive: bool,
    /// A bare-metal host's llama-bench JSON.
    pub baseline: Option<PathBuf>,
    /// The bundle directory, or `None` for a new dated one.
    pub output: Option<PathBuf>,
}

impl Plan {
    /// llama-bench's arguments, after the program name.
    pub fn llama_args(&self) -> Vec<String> {
        let mut args = vec![
            "-m".to_string(),
            self.model.display().to_string(),
            "-r".to_string(),
            self.repetitions.to_string(),
            "-p".to_string(),
            self.n_prompt.clone(),
            "-n".to_string(),
            self.n_gen.clone(),
            "-o".to_string(),
            "json".to_string(),
        ];
        args.extend(self.extra.iter().cloned());
        args
    }
}

/// The environment change of one arm.
#[derive(Clone, Debug, Default, Serialize)]
pub struct EnvChange {
    /// Variables set, in order (a JSON object, name to value).
    #[serde(serialize_with = "pairs_as_object")]
    pub set: Vec<(String, String)>,
    /// Variables removed from capshim's own environment.
    pub removed: Vec<String>,
}

fn pairs_as_object<S: serde::Serializer>(
    pairs: &[(String, String)],
    serializer: S,
) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeMap;
    let mut map = serializer.serialize_map(Some(pairs.len()))?;
    for (k, v) in pairs {
        map.serialize_entry(k, v)?;
    }
    map.end()
}

/// The environment of an arm: capshim's and the injection variable are always removed first (so
/// a stock arm is stock even when capshim itself runs under the shim); an arm with a profile then
/// gets the profile's variables, its status file and the injection variable.
pub fn arm_env(
    profile: Option<&Profile>,
    dylib: Option<&Path>,
    status_file: &Path,
    inherited: impl Iterator<Item = String>,
) -> EnvChange {
    let inject = Os::current().injection_var();
    let mut change = EnvChange::default();
    for name in inherited {
        if name == inject || capshim_profile::env::is_capshim_var(name.as_bytes()) {
            change.removed.push(name);
        }
    }
    change.removed.sort();
    if let (Some(profile), Some(dylib)) = (profile, dylib) {
        for (k, v) in capshim_profile::env::vars_for(profile) {
            change.set.push((k.to_string(), v));
        }
        change.set.push((
            capshim_profile::env::STATUS_FILE.primary.to_string(),
            status_file.display().to_string(),
        ));
        change.set.push((
            capshim_profile::env::LOG.primary.to_string(),
            "activation".to_string(),
        ));
        change
            .set
            .push((inject.to_string(), dylib.display().to_string()));
    }
    change
}

/// What happened in one process, for `environment.json`.
#[derive(Clone, Debug, Serialize)]
pub struct RunRecord {
    /// Arm name.
    pub arm: String,
    /// 1-based round.
    pub round: u32,
    /// Program and arguments, exactly as run.
    pub argv: Vec<String>,
    /// The same as one shell-quoted line.
    pub command_line: String,
    /// The environment change.
    pub env: EnvChange,
    /// Exit code (`null` when killed by a signal).
    pub exit_code: Option<i32>,
    /// Wall time, in seconds.
    pub seconds: f64,
    /// UTC start time.
    pub started_utc: String,
}

fn shell_quote(arg: &str) -> String {
    if !arg.is_empty()
        && arg
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c))
    {
        arg.to_string()
    } else {
        format!("'{}'", arg.replace('\'', "'\\''"))
    }
}

/// A file's path, size and SHA-256, for `environment.json`.
#[derive(Clone, Debug, Serialize)]
pub struct FileId {
    /// Absolute path.
    pub path: String,
    /// Size, in bytes.
    pub bytes: u64,
    /// SHA-256, lowercase hex.
    pub sha256: String,
}

fn file_id(path: &Path) -> Result<FileId, RunError> {
    let bytes = std::fs::metadata(path)
        .map_err(io("cannot read", path))?
        .len();
    Ok(FileId {
        path: path.display().to_string(),
        bytes,
        sha256: bundle::sums::sha256_file(path).map_err(io("cannot read", path))?,
    })
}

#[derive(Serialize)]
struct Environment<'a> {
    capshim_version: &'static str,
    started_utc: String,
    finished_utc: String,
    machine: environment::Machine,
    llama_cpp: LlamaBuild,
    injection_variable: &'static str,
    files: Files,
    arms: &'a [ArmPlan],
    llama_bench_args: Vec<String>,
    rounds: u32,
    runs: &'a [RunRecord],
}

#[derive(Serialize)]
struct LlamaBuild {
    build_number: Option<i64>,
    build_commit: Option<String>,
}

#[derive(Serialize)]
struct Files {
    model: FileId,
    llama_bench: FileId,
    dylib: Option<FileId>,
    baseline: Option<FileId>,
}

#[derive(Serialize)]
struct SummaryFile<'a> {
    #[serde(flatten)]
    summary: &'a Summary,
    bundle: &'a Manifest,
}

/// The result of a bench run.
pub struct Outcome {
    /// The bundle directory.
    pub dir: PathBuf,
    /// `report.md`'s text.
    pub markdown: String,
    /// `summary.json`'s text.
    pub summary_json: String,
}

/// Runs the plan and writes the bundle.
///
/// # Errors
/// When llama-bench fails, its output is unreadable, an unlocked arm did not activate (without
/// `allow_inactive`), or the bundle cannot be written. Raw files written so far stay in the
/// bundle directory, which the error names.
pub fn run(plan: &Plan) -> Result<Outcome, RunError> {
    let started = time::now();
    // Before the bundle exists: a signal from now on stops the run cleanly.
    let signals = Forwarder::start_with(true).map_err(|source| RunError::Io {
        action: "cannot catch signals for",
        path: PathBuf::from("capshim bench"),
        source,
    })?;
    let dir = bundle::create(plan.output.as_deref())?;
    let mut progress = RunProgress::default();
    run_in(plan, &dir, started, &signals, &mut progress).map_err(|e| {
        let _ = write_incomplete(&dir, &progress, &e);
        RunError::Stopped {
            dir: dir.clone(),
            source: Box::new(e),
        }
    })
}

impl RunError {
    /// The signal that stopped the run, when one did.
    pub fn interrupted_by(&self) -> Option<i32> {
        match self {
            RunError::Interrupted { number, .. } => Some(*number),
            RunError::Stopped { source, .. } => source.interrupted_by(),
            _ => None,
        }
    }
}

/// What the runs have done so far, for the INCOMPLETE note.
#[derive(Default)]
struct RunProgress {
    total: usize,
    finished: Vec<String>,
    current: Option<String>,
}

/// Writes the bundle's INCOMPLETE note: which runs finished and why the run stopped.
fn write_incomplete(dir: &Path, progress: &RunProgress, why: &RunError) -> std::io::Result<()> {
    let mut text = String::from(
        "This bundle is unfinished: the `capshim bench` run that wrote it stopped before it sealed it.\n\
         It has no SHA256SUMS and no report; `capshim report` refuses it. Do not use its figures; rerun `capshim bench`.\n\n",
    );
    let mut reason = match why {
        RunError::Interrupted { signal, .. } => format!(
            "interrupted by {signal}; capshim passed it on to the running llama-bench, waited for it and started no further runs"
        ),
        other => other.to_string(),
    };
    let mut source = std::error::Error::source(why);
    while let Some(cause) = source {
        let text = cause.to_string();
        if !reason.contains(&text) {
            reason.push_str(": ");
            reason.push_str(&text);
        }
        source = cause.source();
    }
    text.push_str(&format!("Why it stopped: {reason}\n\n"));
    text.push_str(&format!(
        "Runs finished ({} of {}):\n",
        progress.finished.len(),
        progress.total
    ));
    if progress.finished.is_empty() {
        text.push_str("  none\n");
    }
    for run in &progress.finished {
        text.push_str(&format!("  {run}\n"));
    }
    if let Some(run) = &progress.current {
        text.push_str(&format!(
            "\nRun that did not finish (its raw files are partial):\n  {run}\n"
        ));
    }
    let done = progress.finished.len() + usize::from(progress.current.is_some());
    text.push_str(&format!(
        "\nRuns never started: {}\n",
        progress.total.saturating_sub(done)
    ));
    std::fs::write(dir.join(bundle::INCOMPLETE_FILE), text)
}

fn interrupted(number: i32) -> RunError {
    RunError::Interrupted {
        signal: signals::name(number),
        number,
        note: bundle::INCOMPLETE_FILE,
    }
}

fn run_in(
    plan: &Plan,
    dir: &Path,
    started: u64,
    signals: &Forwarder,
    done: &mut RunProgress,
) -> Result<Outcome, RunError> {
    let dir_abs = std::fs::canonicalize(dir).map_err(io("cannot resolve", dir))?;
    let args = plan.llama_args();
    let slots = interleave(plan.arms.len(), plan.rounds);
    let progress = ProgressBar::new(slots.len() as u64);
    progress.set_style(
        ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} runs  {msg}  ETA {eta}",
        )
        .expect("valid template"),
    );
    let mut manifest = Manifest {
        format: bundle::manifest::FORMAT,
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
                runs: Vec::new(),
            })
            .collect(),
    };
    let mut records = Vec::new();
    done.total = slots.len();
    for slot in &slots {
        if let Some(number) = signals.received() {
            progress.finish_and_clear();
            return Err(interrupted(number));
        }
        let arm = &plan.arms[slot.arm];
        let message = format!("arm {}, round {}/{}", arm.name, slot.round, plan.rounds);
        progress.set_message(message.clone());
        if progress.is_hidden() {
            eprintln!("capshim: bench: {message}");
        }
        let stem = format!("{}-r{}", arm.name, slot.round);
        let json_rel = format!("{RAW_DIR}/{stem}.json");
        let stderr_rel = format!("{RAW_DIR}/{stem}.stderr");
        let status_rel = arm
            .profile
            .is_some()
            .then(|| format!("{RAW_DIR}/{stem}.status.jsonl"));
        done.current = Some(format!(
            "arm {} round {} ({json_rel})",
            arm.name, slot.round
        ));
        let record = run_one(
            plan,
            arm,
            slot.round,
            &args,
            &dir_abs,
            &json_rel,
            &stderr_rel,
            status_rel.as_deref(),
            signals,
        )
        .inspect_err(|_| progress.finish_and_clear())?;
        done.finished.extend(done.current.take());
        records.push(record);
        manifest.arms[slot.arm].runs.push(ManifestRun {
            round: slot.round,
            json: json_rel,
            stderr: Some(stderr_rel),
            status: status_rel,
        });
        progress.inc(1);
    }
    progress.finish_and_clear();

    if let Some(baseline) = &plan.baseline {
        let rel = format!("{RAW_DIR}/host.json");
        std::fs::copy(baseline, dir.join(&rel))
            .map_err(io("cannot copy into the bundle", baseline))?;
        manifest.arms.push(ManifestArm {
            name: "host".into(),
            role: "host".into(),
            profile: None,
            shim: false,
            runs: vec![ManifestRun {
                round: 1,
                json: rel,
                stderr: None,
                status: None,
            }],
        });
    }

    let arms = bundle::load_arms(dir, &manifest, None)?;
    let summary = analyze(&arms)?;
    let summary_json = serde_json::to_string_pretty(&SummaryFile {
        summary: &summary,
        bundle: &manifest,
    })
    .map_err(|source| RunError::Json {
        what: "summary.json",
        source,
    })? + "\n";
    write(dir, "summary.json", &summary_json)?;
    let mut markdown = String::new();
    for exporter in export::all() {
        if exporter.file_name() == "summary.json" {
            continue;
        }
        let text = exporter.render(&summary)?;
        if exporter.file_name() == "report.md" {
            markdown = text.clone();
        }
        write(dir, exporter.file_name(), &text)?;
    }

    let first_row = arms
        .iter()
        .flat_map(|a| a.runs.iter())
        .flat_map(|r| r.rows.iter())
        .next();
    let env = Environment {
        capshim_version: env!("CARGO_PKG_VERSION"),
        started_utc: time::iso(started),
        finished_utc: time::iso(time::now()),
        machine: environment::collect(),
        llama_cpp: LlamaBuild {
            build_number: first_row.and_then(|r| r.build_number),
            build_commit: first_row.and_then(|r| r.build_commit.clone()),
        },
        injection_variable: Os::current().injection_var(),
        files: Files {
            model: file_id(&plan.model)?,
            llama_bench: file_id(&plan.llama_bench)?,
            dylib: plan.dylib.as_deref().map(file_id).transpose()?,
            baseline: plan.baseline.as_deref().map(file_id).transpose()?,
        },
        arms: &plan.arms,
        llama_bench_args: args,
        rounds: plan.rounds,
        runs: &records,
    };
    let env = serde_json::to_string_pretty(&env).map_err(|source| RunError::Json {
        what: "environment.json",
        source,
    })? + "\n";
    write(dir, "environment.json", &env)?;
    bundle::write_sums(dir)?;
    Ok(Outcome {
        dir: dir.to_path_buf(),
        markdown,
        summary_json,
    })
}

fn write(dir: &Path, name: &str, text: &str) -> Result<(), RunError> {
    let path = dir.join(name);
    std::fs::write(&path, text).map_err(io("cannot write", &path))
}

#[allow(clippy::too_many_arguments)]
fn run_one(
    plan: &Plan,
    arm: &ArmPlan,
    round: u32,
    args: &[String],
    dir: &Path,
    json_rel: &str,
    stderr_rel: &str,
    status_rel: Option<&str>,
    signals: &Forwarder,
) -> Result<RunRecord, RunError> {
    let json_path = dir.join(json_rel);
    let stderr_path = dir.join(stderr_rel);
    let status_path = status_rel.map(|r| dir.join(r));
    if let Some(p) = &status_path {
        std::fs::write(p, "").map_err(io("cannot create", p))?;
    }
    let env = arm_env(
        arm.profile.as_ref(),
        plan.dylib.as_deref(),
        status_path.as_deref().unwrap_or(Path::new("")),
        std::env::vars_os().map(|(k, _)| k.to_string_lossy().into_owned()),
    );
    let mut cmd = Command::new(&plan.llama_bench);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&json_path).map_err(io("cannot create", &json_path))?)
        .stderr(std::fs::File::create(&stderr_path).map_err(io("cannot create", &stderr_path))?);
    for name in &env.removed {
        cmd.env_remove(name);
    }
    for (k, v) in &env.set {
        cmd.env(k, v);
    }
    let mut argv = vec![plan.llama_bench.display().to_string()];
    argv.extend(args.iter().cloned());
    let started = time::now();
    let clock = Instant::now();
    let mut child = cmd.spawn().map_err(|source| RunError::Spawn {
        path: plan.llama_bench.clone(),
        source,
    })?;
    signals.forward_to(child.id());
    let status = child.wait();
    signals.clear();
    let status = status.map_err(io("cannot wait for llama-bench", &plan.llama_bench))?;
    if !status.success() {
        // A Ctrl-C reaches llama-bench and capshim at once: llama-bench may be gone before
        // capshim's signal thread has noted it. Give it a moment before calling this a failure.
        let deadline = Instant::now() + std::time::Duration::from_millis(500);
        while signals.received().is_none() && Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        if let Some(number) = signals.received() {
            // Whatever llama-bench did with the signal, the run was cut short.
            return Err(interrupted(number));
        }
    }
    let seconds = clock.elapsed().as_secs_f64();
    let stderr = std::fs::read_to_string(&stderr_path).unwrap_or_default();
    if !status.success() {
        let tail: Vec<&str> = stderr.lines().rev().take(8).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        return Err(RunError::LlamaFailed {
            arm: arm.name.clone(),
            round,
            status: status.to_string(),
            stderr: stderr_path,
            tail: tail.join("\n  "),
        });
    }
    read_bench_file(&json_path)?;
    if let (Some(_), Some(path)) = (&arm.profile, &status_path) {
        let events = StatusEvent::read_file(path)?;
        let activation = Activation::from_evidence(true, &events, &stderr);
        if !activation.activated && !plan.allow_inactive {
            let said = if activation.stderr_lines.is_empty() {
                "it printed no `capshim:` line on stderr".to_string()
            } else {
                format!("it said: {}", activation.stderr_lines.join(" | "))
            };
            return Err(RunError::NotActivated {
                arm: arm.name.clone(),
                round,
                status_file: path.clone(),
                stderr_file: stderr_path,
                said,
                dylib: plan
                    .dylib
                    .as_deref()
                    .map(|d| d.display().to_string())
                    .unwrap_or_default(),
            });
        }
    }
    let mut command_line: Vec<String> = env
        .set
        .iter()
        .map(|(k, v)| format!("{k}={}", shell_quote(v)))
        .collect();
    command_line.extend(argv.iter().map(|a| shell_quote(a)));
    Ok(RunRecord {
        arm: arm.name.clone(),
        round,
        argv,
        command_line: command_line.join(" "),
        env,
        exit_code: status.code(),
        seconds,
        started_utc: time::iso(started),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_format_options_are_refused() {
        for bad in [
            "-o",
            "--output",
            "-oe",
            "--output=csv",
            "-m",
            "-r",
            "-p",
            "--n-gen",
            "-hf",
            "-ocsv",
            "-ojsonl",
            "-oemd",
        ] {
            let err = check_extra_args(&["-t".into(), "2".into(), bad.into()]).unwrap_err();
            assert!(
                err.to_string().contains("after `--` is refused"),
                "{bad}: {err}"
            );
        }
        check_extra_args(&[
            "-t".into(),
            "2".into(),
            "-ngl".into(),
            "99".into(),
            "-fa".into(),
            "on".into(),
            "-ot".into(),
            "exps=CPU".into(),
        ])
        .unwrap();
    }

    #[test]
    fn sweeps_after_the_double_dash_are_refused() {
        let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        for (bad, expected) in [
            (args(&["-t", "1,2"]), "-t 1,2"),
            (args(&["-ngl", "0,99"]), "-ngl 0,99"),
            (args(&["--threads=4,8"]), "--threads=4,8"),
            (args(&["-fa", "0,1"]), "-fa 0,1"),
            (args(&["-t", "1", "--threads", "2"]), "first as -t 1"),
            (args(&["-ctk", "f16", "-ctk", "q8_0"]), "given twice"),
        ] {
            let err = check_extra_args(&bad).unwrap_err().to_string();
            assert!(err.contains(expected), "{bad:?}: {err}");
            assert!(err.contains("one value per option after `--`"), "{err}");
        }
        check_extra_args(&args(&[
            "-t", "8", "-ngl", "99", "-d", "0,512", "-pg", "512,128",
        ]))
        .unwrap();
    }

    #[test]
    fn only_unlocked_arms_get_the_shim() {
        let inherited = [
            "PATH",
            "LD_PRELOAD",
            "CAPSHIM_LOG",
            "LUME_METAL_APPLE_FAMILY_MAX",
            "HOME",
            "DYLD_INSERT_LIBRARIES",
        ]
        .map(String::from);
        let stock = arm_env(
            None,
            Some(Path::new("/x/libcapshim.so")),
            Path::new("/b/s.jsonl"),
            inherited.clone().into_iter(),
        );
        assert!(stock.set.is_empty());
        let inject = Os::current().injection_var();
        assert!(stock.removed.contains(&inject.to_string()));
        assert!(stock.removed.contains(&"CAPSHIM_LOG".to_string()));
        assert!(
            stock
                .removed
                .contains(&"LUME_METAL_APPLE_FAMILY_MAX".to_string())
        );
        assert!(!stock.removed.contains(&"PATH".to_string()));

        let profile = capshim_profile::named::apple9_64k();
        let unlocked = arm_env(
            Some(&profile),
            Some(Path::new("/x/libcapshim.so")),
            Path::new("/b/s.jsonl"),
            inherited.into_iter(),
        );
        let set: Vec<(&str, &str)> = unlocked
            .set
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        assert_eq!(
            set,
            vec![
                ("CAPSHIM_APPLE_FAMILY_MAX", "1009"),
                ("CAPSHIM_MAX_THREADGROUP_MEMORY", "65536"),
                ("CAPSHIM_STATUS_FILE", "/b/s.jsonl"),
                ("CAPSHIM_LOG", "activation"),
                (inject, "/x/libcapshim.so"),
            ]
        );
    }

    #[test]
    fn command_lines_are_shell_quoted() {
        assert_eq!(shell_quote("/a/b-c.gguf"), "/a/b-c.gguf");
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), "'it'\\''s'");
        assert_eq!(shell_quote(""), "''");
    }
}
