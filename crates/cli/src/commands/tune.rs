//! `capshim tune`: the fastest correct settings for this guest, by a budgeted search of the
//! knob catalogue against a reference arm, into an evidence bundle with a recommendation.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;

use super::UsageError;
use super::experiment::{ExperimentArgs, LlamaBenchArgs, ShimArgs, existing_file};
use crate::analysis::interval::NOISE;
use crate::arms::{Arm, STOCK, Spec};
use crate::bench::plan::{Plan as BenchPlan, check_arm_args, check_extra_args};
use crate::bundle::workload::{Measure, Workload as Workload_};
use crate::launch::environment::ScopeArg;
use crate::launch::{Os, preflight};
use crate::llama::tools;
use crate::platform::facts;
use crate::tune::knobs::{self, Candidate, Found, Platform, Workload};
use crate::tune::manifest::{ArmRecord, RECOMMENDATION};
use crate::tune::plan::{ArmOptions, CommandMode, Plan, Reference, VerifySetup, parse_budget};
use crate::tune::probe::{Probe, probe};
use crate::tune::runner;
use crate::tune::search::Config;

const AFTER_HELP: &str = "\
What it tries: the knobs of the catalogue (crates/cli/data/knobs.toml; --list-knobs prints it) that
exist on this platform and in the llama.cpp found, one at a time from the reference arm; knobs
that do not apply here are left out with a note (on stderr and in the bundle). A short llama-bench
run first (-p 0 -n 1 -r 1, before the bundle exists) finds llama.cpp's build and whether the CPU
does part of the work (the threads knob); environment.json records what it found. After the
first stage the best single knobs that ran faster than the reference are combined, and the
combinations join the search.

How: successive halving in rounds. Each round runs the reference and every candidate still in the
race once each, as fresh llama-bench processes, in an order drawn at random for that round; a
candidate's figure in a round is the log of its throughput over the reference's in the same round
(the geometric mean over llama-bench's tests, -p and -n). Every candidate gets a first stage of the
rounds an interval needs at the winner's level (9 for 7 to 12 candidates); the better half by the
Hodges-Lehmann estimate goes on with more rounds, and so on.
A winner must beat the reference by an interval wholly above the +2% band, at the level
1 - 0.05/m for m candidates, which needs 9 rounds for 7 to 12 candidates (2/2^n <= 0.05/m);
otherwise the result is `no setting beats the reference here`, or `too few rounds to tell` when no
candidate that stayed to the end ran that many rounds (a larger --budget is the fix).

Budget: the search spends 80% of --budget; the processes left are estimated from the seconds per
process so far, and a stage is cut short when its time is up, so the search ends at most one round
late. The rest is kept to verify the winner against the reference with `capshim verify` (KL
divergence, top-1 agreement, perplexity, greedy text, and Metal kernels where the build has them),
into verify-<label>/ in the bundle. A winner that is not `equivalent` is rejected and the next
candidate beating the band is verified, while the budget holds as long as the last verify took.

--command CMD: tunes any workload instead of llama-bench. Each arm runs `/bin/sh -c CMD` once per
round (with the shim, variables and command-args of its settings, as `capshim bench --command`
runs it); its wall time is measured and a candidate's figure is the log of the reference's time
over its own. The knobs are the catalogue's for any Metal workload: the profiles and MLX's
MLX_MAX_OPS_PER_BUFFER and MLX_MAX_MB_PER_BUFFER (macOS). --check CMD stands in for verify: it runs
once with each candidate that would win, exit 0 meaning its results are right (output in
raw/check-<label>.stdout); without --check, the winner is not checked and the report says so.

Output: the report on stdout (Markdown, or summary.json with --json), progress on stderr, and an
evidence bundle that is never overwritten: raw/<arm>-r<round>.json (.stdout for a command) and
.stderr per process, the verify bundles, environment.json (the machine, the files' checksums,
every arm and command line, the budget, the knobs left out, the manifest), and derived from them
summary.json, report.md and, with a winner, recommended.toml (a profile file: `capshim run
--profile-file recommended.toml -- CMD`, or an arm `file=recommended.toml` for bench and verify),
then SHA256SUMS.
`capshim report BUNDLE_DIR` checks it and derives it again. A signal (Ctrl-C, SIGTERM, SIGHUP) is
passed on to the running tool (SIGKILL after 10 s or a second signal); the bundle is left unsealed
with an INCOMPLETE note.

Exit codes:
  0    the search completed, with a winner or with none (also with --keep-going when runs
       failed: warnings name them)
  1    error (llama-bench or verify failed, the shim did not activate, no knob applies here, bad
       input, bundle exists, a file changed during the runs, a --sign key that cannot sign here;
       a --check that fails only rejects its candidate)
  2    bad command line (also: a --budget without a unit or longer than 7 days, a refused
       llama-bench option after `--`, a bad --reference, --command with -m or llama-bench's
       options, --check without --command)
  129  stopped by SIGHUP, 130 by SIGINT, 143 by SIGTERM (the bundle is unfinished)

Examples:
  capshim tune -m model.gguf
  capshim tune -m model.gguf --budget 1h -o tune-m1-ultra
  capshim tune -m model.gguf --reference apple9-64k --budget 4m -- -ngl 99
  capshim tune -m model.gguf -p 0 -n 128          # tune token generation alone
  capshim tune --command 'python3 gen.py' --check 'python3 gen.py --verify' --budget 10m
";

/// `--keep-going` as tune takes it (the search goes on without a failed candidate's figures).
const KEEP_GOING_HELP: &str = "Record a run whose tool fails (exits non-zero or is killed) as failed, with its \
     reason, and go on with the search, instead of stopping at the first. A round with a failed \
     run gives no figure for that candidate (none at all when the reference's run failed); the \
     search still completes (exit code 0), and the report, summary.json and stderr name each \
     failed run's candidate, round and reason in a warning.";

/// Arguments of `capshim tune`.
#[derive(Debug, Args)]
#[command(after_help = AFTER_HELP, mut_arg("keep_going", |a| a.help(KEEP_GOING_HELP)))]
pub struct TuneArgs {
    /// The GGUF model to tune for.
    #[arg(
        short = 'm',
        long = "model",
        value_name = "MODEL.gguf",
        required_unless_present_any = ["list_knobs", "command"]
    )]
    pub model: Option<PathBuf>,

    /// Tune this shell command instead of llama-bench: each arm runs `/bin/sh -c CMD` once per
    /// round, its wall time measured (lower is better); the knobs are the catalogue's for any
    /// Metal workload (the profiles, MLX's command-buffer limits). Not with -m or llama-bench's
    /// options.
    #[arg(
        long = "command",
        value_name = "CMD",
        conflicts_with_all = [
            "model", "llama_bench", "llama_dir", "repetitions", "n_prompt", "n_gen", "extra",
        ]
    )]
    pub command: Option<String>,

    /// With --command: a shell command that stands in for verify, run once with the settings of
    /// each candidate that would win (its shim, variables and command-args): exit 0 means its
    /// results are right; anything else rejects it. Without it, a command's winner is not
    /// checked, and the report says so.
    #[arg(long = "check", value_name = "CMD")]
    pub check: Option<String>,

    /// Print the knob catalogue (every knob, its values, where it exists, why and its source)
    /// as a Markdown table, and exit.
    #[arg(long = "list-knobs")]
    pub list_knobs: bool,

    #[command(flatten)]
    pub llama: LlamaBenchArgs,

    /// The arm to beat, and the one every candidate starts from: [LABEL=]ITEM[,ITEM...] as
    /// bench's --arm [default: native where the host chip is known, else apple9-64k].
    #[arg(long = "reference", value_name = "ARM")]
    pub reference: Option<String>,

    /// The time the whole run may take, search and verify: a number with a unit, s, m or h
    /// (90s, 4m, 1h, 1h30m), each unit once, at most 7 days (168h). The run ends within it plus
    /// one round (and the first verify).
    #[arg(long = "budget", default_value = "15m", value_name = "DURATION", value_parser = parse_budget)]
    pub budget: Duration,

    /// Repetitions per test in each llama-bench process (llama-bench -r).
    #[arg(
        short = 'r',
        long = "repetitions",
        default_value_t = 3,
        value_name = "N",
        value_parser = clap::value_parser!(u32).range(1..)
    )]
    pub repetitions: u32,

    /// Prompt tokens (llama-bench -p); 0 leaves prompt processing out of the figure.
    #[arg(
        short = 'p',
        long = "n-prompt",
        default_value = "512",
        value_name = "TOKENS"
    )]
    pub n_prompt: String,

    /// Generated tokens (llama-bench -n); 0 leaves generation out of the figure.
    #[arg(
        short = 'n',
        long = "n-gen",
        default_value = "128",
        value_name = "TOKENS"
    )]
    pub n_gen: String,

    /// Bundle directory to create (must not exist) [default: ./capshim-tune-YYYYMMDD-HHMMSS,
    /// UTC, with -2, -3... appended when taken].
    #[arg(short = 'o', long = "output", value_name = "BUNDLE_DIR")]
    pub output: Option<PathBuf>,

    #[command(flatten)]
    pub shim: ShimArgs,

    #[command(flatten)]
    pub experiment: ExperimentArgs,

    /// Extra llama-bench arguments for every arm, after `--` (e.g. `-- -ngl 99`); refused as
    /// bench refuses them.
    #[arg(last = true, value_name = "LLAMA_BENCH_ARGS")]
    pub extra: Vec<String>,
}

fn usage(message: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(UsageError(message.into()))
}

/// A `--reference` that cannot be resolved, as a usage error (exit 2), in tune's words: the
/// profile lookup's messages name `run`'s options, which tune spells as `--reference` items.
fn reference_error(e: &dyn std::fmt::Display) -> anyhow::Error {
    let text = e
        .to_string()
        .replace("--profile ", "--reference ")
        .replace("--family-max ", "family-max=")
        .replace("--threadgroup-memory ", "threadgroup-memory=")
        .replace("--working-set ", "working-set=")
        .replace("--profile-file ", "file=");
    usage(format!("--reference: {text}"))
}

/// The reference arm from `--reference`, or the default arm.
fn reference(args: &TuneArgs) -> anyhow::Result<Reference> {
    let Some(text) = &args.reference else {
        let arm = args
            .shim
            .resolve(&[], true, &[])?
            .pop()
            .expect("the default arm");
        let items = arm.profile_name.clone();
        return Reference::new(arm, items).map_err(usage);
    };
    if text == STOCK {
        return Reference::new(Arm::stock(), STOCK.to_string()).map_err(usage);
    }
    let spec: Spec = crate::arms::spec::parse(text).map_err(|e| reference_error(&e))?;
    let items = match text.split_once('=') {
        Some((label, items)) if label == spec.label => items.to_string(),
        _ => text.clone(),
    };
    let arm = args
        .shim
        .resolve(std::slice::from_ref(text), false, &[])
        .map_err(|e| reference_error(&e))?
        .pop()
        .expect("the reference arm");
    Reference::new(arm, items).map_err(usage)
}

/// A candidate and the arm it runs as.
type Runnable = (Candidate, Arm);

/// The candidates of the catalogue that apply here (the knobs `select`ed for what `probe`
/// found), as arms; the knobs left out, with why.
fn candidates(
    args: &TuneArgs,
    reference: &Reference,
    probe: Option<&Probe>,
) -> anyhow::Result<(Vec<Runnable>, Vec<String>)> {
    let options = ArmOptions {
        cpu_brand: args.shim.cpu_brand.clone(),
        allow_beyond_hardware: args.shim.allow_beyond_hardware,
    };
    let platform =
        Platform::current().ok_or_else(|| anyhow::anyhow!("tune runs on macOS and Linux only"))?;
    let catalogue = knobs::catalogue();
    let native_known = crate::profile::ProfileArgs {
        profile: Some(capshim_profile::named::NATIVE.to_string()),
        cpu_brand: args.shim.cpu_brand.clone(),
        ..Default::default()
    }
    .resolve()
    .is_ok();
    let found = Found {
        platform,
        workload: if probe.is_some() {
            Workload::Llama
        } else {
            Workload::Command
        },
        llama_build: probe.and_then(|p| {
            let commit = p.build_commit.as_deref().unwrap_or("");
            p.build_number
                .and_then(|n| knobs::llama_build(&catalogue, n, commit))
        }),
        cpu_work: probe.is_some_and(Probe::cpu_work),
        native_known,
        cpus: std::thread::available_parallelism().map_or(1, usize::from),
    };
    let selection = knobs::select(&catalogue, &found);
    for note in &selection.notes {
        crate::term::note(note);
    }
    let mut left_out: Vec<String> = selection
        .left_out
        .iter()
        .map(|l| format!("{}: {}", l.knob, l.reason))
        .collect();
    let mut out: Vec<Runnable> = Vec::new();
    for c in knobs::singles(&selection.knobs, &reference.arm.profile_name) {
        if c.label == reference.arm.name || out.iter().any(|(o, _)| o.label == c.label) {
            left_out.push(format!(
                "{}: its label is the reference's or taken",
                c.label
            ));
            continue;
        }
        let arm = c.arm_spec(&reference.base).and_then(|spec| {
            let arm = options.resolve(&spec).map_err(|e| e.to_string())?;
            // An option given after `--` applies to every arm alike: not searched.
            if let Some((flag, given)) = crate::profile::settings::repeated(
                &arm.args.bench,
                &args.extra,
                crate::bench::plan::SWEEP_OPTIONS,
            ) {
                return Err(format!(
                    "{flag} is given after `--` ({given}) for every arm, so it is not searched; \
                     to search it, give the reference's value in --reference (bench-args={given} \
                     ...) instead"
                ));
            }
            check_arm_args(std::slice::from_ref(&arm), &args.extra).map_err(|e| e.to_string())?;
            // A value the reference already has (its own -t 2) would be the reference again:
            // a placebo that costs budget and counts against the winner rule's level.
            if ArmRecord::of(&arm) == ArmRecord::of(&reference.arm) {
                return Err(format!(
                    "{} is the reference's own setting; nothing to compare",
                    c.settings
                        .iter()
                        .map(|s| format!("{}={}", s.knob, s.value))
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
            Ok(arm)
        });
        match arm {
            Ok(arm) => out.push((c, arm)),
            Err(e) => left_out.push(format!("{}: {e}", c.label)),
        }
    }
    Ok((out, left_out))
}

/// Builds and checks the plan from the command line.
fn plan(args: TuneArgs) -> anyhow::Result<(Plan, ExperimentArgs)> {
    if args.check.is_some() && args.command.is_none() {
        return Err(usage(
            "--check stands in for verify with --command only; llama-bench's winner is checked \
             by verify",
        ));
    }
    check_extra_args(&args.extra).map_err(|e| usage(e.to_string()))?;
    args.experiment.check()?;
    let reference = reference(&args)?;
    let (model, llama_bench, probe) = if args.command.is_some() {
        (PathBuf::new(), PathBuf::new(), None)
    } else {
        let model = existing_file(
            args.model.as_deref().unwrap_or(std::path::Path::new("")),
            "model",
            "give an existing GGUF file with -m",
        )?;
        let llama_bench = args.llama.llama_bench()?;
        let probe = probe(&llama_bench, &model, &args.extra).map_err(anyhow::Error::msg)?;
        (model, llama_bench, Some(probe))
    };
    let (candidates, left_out) = candidates(&args, &reference, probe.as_ref())?;
    for note in &left_out {
        crate::term::note(format!("left out: {note}"));
    }
    if candidates.is_empty() {
        anyhow::bail!(
            "no knob of the catalogue applies here (see the notes above), so there is nothing to \
             tune; docs/tune.md lists the knobs and where each exists"
        );
    }
    let config = Config {
        band: NOISE,
        ..Config::for_candidates(candidates.len())
    };
    let mut arms = vec![reference.arm.clone()];
    arms.extend(candidates.iter().map(|(_, arm)| arm.clone()));
    let needs_shim = arms.iter().any(|a| a.profile.is_some());
    let shim = args.shim.shim_library(needs_shim)?;
    let dylib = if let (Some((path, _)), Some(_)) = (&shim, &args.command) {
        // The command's programs are not known, so there is nothing to pre-flight.
        Some(path.clone())
    } else if let Some((path, arches)) = shim {
        let launch = preflight::Launch {
            program: &llama_bench,
            library: &path,
            library_arches: &arches,
            scope: ScopeArg::Children,
            os: Os::current(),
            skip_program: false,
        };
        for warning in preflight::check(&facts::Real::default(), &launch)? {
            crate::term::warning(warning);
        }
        Some(path)
    } else {
        None
    };
    let llama_dir = match &args.llama.llama_dir {
        Some(dir) => dir.clone(),
        None => llama_bench
            .parent()
            .map(std::path::Path::to_path_buf)
            .unwrap_or_default(),
    };
    let mut shim_args = Vec::new();
    if let Some(path) = &dylib {
        shim_args.extend(["--dylib".to_string(), path.display().to_string()]);
    }
    if let Some(brand) = &args.shim.cpu_brand {
        shim_args.extend(["--cpu-brand".to_string(), brand.clone()]);
    }
    if args.shim.allow_beyond_hardware {
        shim_args.push("--allow-beyond-hardware".to_string());
    }
    if args.shim.allow_inactive {
        shim_args.push("--allow-inactive".to_string());
    }
    let verify = VerifySetup {
        capshim: std::env::current_exe().map_err(|e| {
            anyhow::anyhow!("cannot find the capshim executable to run verify: {e}")
        })?,
        kernel_tests: tools::find("test-backend-ops", Some(&llama_dir)).is_ok(),
        llama_dir,
        shim_args,
    };
    Ok((
        Plan {
            bench: BenchPlan {
                llama_bench,
                model,
                repetitions: args.repetitions,
                n_prompt: args.n_prompt,
                n_gen: args.n_gen,
                n_depth: None,
                extra: args.extra,
                arms,
                rounds: 0,
                cooldown: Duration::ZERO,
                dylib,
                allow_inactive: args.shim.allow_inactive,
                keep_going: args.experiment.keep_going,
                baseline: Vec::new(),
                baseline_sums: Vec::new(),
                output: args.output,
            },
            reference,
            candidates: candidates.into_iter().map(|(c, _)| c).collect(),
            left_out,
            budget: args.budget,
            config,
            arm_options: ArmOptions {
                cpu_brand: args.shim.cpu_brand,
                allow_beyond_hardware: args.shim.allow_beyond_hardware,
            },
            verify,
            probe,
            command: args.command.map(|command| CommandMode {
                workload: Workload_ {
                    command,
                    measure: Measure::Wall,
                    regex: None,
                    lower_is_better: false,
                    unit: "seconds".to_string(),
                },
                check: args.check,
            }),
            combine_best: knobs::COMBINE_TOP,
            combine: knobs::combine,
        },
        args.experiment,
    ))
}

/// Runs `capshim tune`.
pub fn execute(args: TuneArgs) -> anyhow::Result<ExitCode> {
    if args.list_knobs {
        super::out(&knobs::markdown_table(&knobs::catalogue()))?;
        return Ok(ExitCode::SUCCESS);
    }
    let (plan, experiment) = plan(args)?;
    experiment.finish(runner::run(&plan), |outcome| {
        for warning in &outcome.warnings {
            crate::term::warning(warning);
        }
        match &outcome.winner {
            Some(winner) if outcome.recommended => crate::term::note(format!(
                "winner {winner}: its settings are in {}",
                outcome.bundle.dir.join(RECOMMENDATION).display()
            )),
            _ => crate::term::note(&outcome.verdict),
        }
        ExitCode::SUCCESS
    })
}
