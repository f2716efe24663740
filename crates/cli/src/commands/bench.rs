//! `capshim bench`: the stock / unlocked / host experiment, end to end, into an evidence bundle.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use super::UsageError;
use super::experiment::{ArmArgs, ExperimentArgs, LlamaBenchArgs, existing_file, sealed_failure};
use crate::analysis::interval::{CONFIDENCE_LEVEL, MIN_ROUNDS, NOISE, percent_text};
use crate::bench::command::{self, Plan as CommandPlan};
use crate::bench::plan::{Plan, check_arm_args, check_baseline, check_extra_args, planned_tests};
use crate::bench::{baseline, runner};
use crate::bundle::workload::{DEFAULT_UNIT, Measure, Workload};
use crate::launch::environment::ScopeArg;
use crate::launch::{Os, preflight};
use crate::platform::facts;

/// The text after the options: how bench runs, its statistics (with the constants they use),
/// its output, signals, exit codes and examples.
fn after_help() -> String {
    let level = percent_text(CONFIDENCE_LEVEL);
    let band = percent_text(NOISE);
    let min = MIN_ROUNDS;
    let exact = crate::analysis::host::EXACT_UP_TO;
    format!(
        "\
Arms: `stock` (no shim) and one per --arm / --profile (default: native, the host chip's own answers,
where the chip is known from this machine's CPU brand or --cpu-brand; elsewhere apple9-64k, the
first published experiment's profile, with a note saying why). `LABEL=` names an arm, e.g.
`--profile again=stock` adds a second stock arm for an A/A check; an arm is a named profile, a
profile file or explicit values, plus llama.cpp variables for that arm only, e.g.
`--arm apple9-nobf16=apple9-64k,GGML_METAL_BF16_DISABLE=1` (docs/verify.md has the grammar).
An arm's llama-bench arguments are its `bench-args=` item (and a profile file's [args] bench),
e.g. `--arm fa1=native,bench-args=-fa 1 -ub 256`: split into words as a shell splits them ('...'
and \"...\" quote, no expansions; a comma inside quotes stays in the item), added after the
arguments after `--`, for that arm only. Options capshim sets or refuses after `--`, the
test-shaping -d and -pg, sweeps, and any option also given after `--` are refused (exit 2).
`common-args=` (verify's tools, which spell e.g. `-fa on`) and `command-args=` (--command's)
are not given to llama-bench.
Labels name files: letters, digits, '.', '_', '-'; `host` is the bare-metal baseline's (an
unlabelled `--profile host` is read as native). Each arm runs llama-bench as a fresh process
(`-o json`, added by capshim), once per round (default: 12 rounds of -r 3), in an order drawn at
random for each round, so that drift, a periodic disturbance or a burst of slow processes meets
every arm alike and no pattern of the machine can fall in step with the arms. The shim is injected
(DYLD_INSERT_LIBRARIES on macOS, LD_PRELOAD on Linux) only into arms with a profile; an arm whose
shim did not hook a device is an error unless --allow-inactive.

Statistics: figures are medians of samples_ts (tokens/s); speedup = arm median / stock median.
Samples of one llama-bench process share its conditions, so the unit of the interval is the round:
each round gives one paired ratio (the arm's median over stock's in the same round), and the {level}%
interval is the Wilcoxon signed-rank (Hodges-Lehmann) interval of their logs. Its level (at least
{level}%, reported exactly) is exact, by each round's random order and whatever the machine's noise,
when the arm changes speed by a constant factor and nothing an arm does carries over to later
processes. It is approximate under carry-over (in simulation, a 1%, 2% or 5% slowdown of the next
process gave 0.88, 0.67, 0.36 coverage at 12 rounds on a quiet machine), for arms of very different
durations under wall-clock disturbances (0.72-0.92 at a 7x speedup), and for an effect that is not
constant (the interval is then of the pseudo-median of the rounds' ratios, neither their mean nor
their median); the report warns of carry-over and unequal durations it can see. It needs
at least {min} rounds; below that the speedup has no interval (`—`, JSON null) and the report says
how many rounds are needed. The main table prints e.g. `7.20× [7.13 7.26] faster` (the paired
estimate, its interval, the verdict): faster or slower only when the whole interval lies beyond the
±{band}% noise band, `no measurable difference` when it lies within it, `inconclusive` otherwise.
Each arm's line gives the half-width (±%) and, when wider than ±{band}%, about how many rounds would
bring it within. More rounds narrow the interval; more -r barely does. docs/bench.md derives the
method and gives A/A figures.
--cooldown SECONDS pauses between one process and the next (recorded in environment.json), the
remedy to try when the report warns of carry-over.

Any workload (--command CMD, instead of -m): each arm runs `/bin/sh -c CMD` as a fresh process,
once per round in random order, with the arm's shim, variables and `command-args=` (appended to
CMD, each word shell-quoted); its stdout and stderr go to raw/<arm>-r<round>.stdout and .stderr.
The value is the process's wall time (test `wall`, seconds, lower is better: speedup = stock /
arm, so above 1 the arm is faster), or with --metric REGEX the number its first capture group
finds in stdout, else stderr (test `metric`, higher is better; --lower-is-better flips it; --unit
names it). --warmup N runs each arm N times first, unmeasured; --prepare CMD runs before each
measured run, untimed, without the shim or the arm's variables. The shell runs without the shim:
it hands the injection variable to the command (macOS strips DYLD_* from /bin/sh). The command
runs in a process group of its own, which signals are passed on to; what of it still runs when
the shell exits is ended (SIGTERM, then SIGKILL), with a warning. It has no terminal: a shell
stopped by SIGTTIN (it read the terminal) or SIGTTOU fails its run. A run that exits non-zero,
is killed or stopped, or prints no match of --metric or a value not above 0, fails (exit 1,
naming its exit status and the last lines of its stderr and stdout; --keep-going records it).
Statistics, verdicts, bundles, report and --sign are as for llama-bench; the llama-bench options
(-m, -r, -p, -n, -d, --baseline, --llama-bench, --llama-dir, --skip-preflight, arguments after
`--`) are refused with it (exit 2).

Before the first run the model, llama-bench, the shim and the baseline are hashed (SHA-256, with
a progress bar for a large model; Ctrl-C stops it) and their identity noted (device, inode,
size, modification and status-change times); after the last run they must be unchanged, or the
bench stops naming the file. A --baseline that
shares no test with -p/-n/-d is refused before the first run; tests it lacks are named.

Percent of host: each --baseline file is one llama-bench process on the bare-metal host (its -r
repetitions are that process's samples, not independent processes); a host bench bundle (checked
as `capshim report` checks it) gives its stock arm's processes. With several host processes the
figure is the two-sample Hodges-Lehmann estimate of the arm's rounds (per-process medians) against
the host's processes, with its {level}% Mann-Whitney interval (exact, or its normal approximation
beyond {exact} pairs). It needs 2 host processes and enough rounds (8 rounds with 2, 5 with 3) and
assumes each side's processes are independent, with the same scatter up to a shift; the host ran
at another time on another machine, so it covers process-to-process noise only, not a drift
between the sessions (docs/bench.md, Percent of host). With one host process percent of host is
the ratio of medians, rounded to the guest's round-to-round spread and marked `(1 host process)`.

Output: results on stdout (Markdown, or JSON with --json), progress on stderr, and an evidence
bundle directory that is never overwritten. Primary files: raw/<arm>-r<round>.json, .stderr and
.status.jsonl, raw/host.json (one --baseline file; raw/host-1.json, host-2.json... for
several host processes), environment.json (the machine, the files' checksums,
every command line, and the manifest of raw files). Derived from them: summary.json, results.csv,
report.md, chart.svg. SHA256SUMS lists every file's SHA-256: it shows that no file changed since
it was written, but anyone who edits the files can write a new one; `capshim report BUNDLE_DIR`
also derives every derived file again and refuses a mismatch. Only a signature says who sealed
it: --sign KEYFILE adds SHA256SUMS.sig (OpenSSH, namespace capshim-bundle; `capshim sign` adds one
later), checked with `capshim report --allowed-signers FILE --identity ID`. docs/bundles.md.

Interrupting: SIGINT (Ctrl-C), SIGTERM or SIGHUP is passed on to the running llama-bench; capshim
waits for it (SIGKILL when it still runs 10 s later or a second signal comes), starts no further
runs, leaves the bundle unsealed (no SHA256SUMS) with an INCOMPLETE note naming the runs that
finished and why it stopped, and exits 128 + the signal's number. A signal while the model is
hashed stops that too, the same way.

Exit codes:
  0    the bundle was written
  1    error (llama-bench or the --command failed, the shim did not activate, bad input, bundle
       exists, a file changed during the runs, a --baseline bundle that fails its check or host
       files of different models or settings or of another model than -m, a --sign key that
       cannot sign here, signing failed: the bundle is then sealed, unsigned; with --keep-going,
       an arm other than a failed reference that has no result: the bundle is sealed)
  2    bad command line (also: -r 0, --rounds 0, a negative or non-numeric --cooldown, a bad or
       duplicate arm label, an unknown profile name, a refused llama-bench option after `--` or
       in an arm's bench-args: a sweep (comma list, range, repeated option) or -t 0; a
       --baseline without a test of -p/-n, a --baseline file or bundle given twice or as a copy;
       --command with a llama-bench option, --warmup, --prepare or --metric without --command, a
       --metric without a capture group)
  129  stopped by SIGHUP, 130 by SIGINT, 143 by SIGTERM (the bundle is unfinished)

Examples:
  capshim bench -m tinyllama-1.1b-q4_k_m.gguf -- -t 8 -ngl 99
  capshim bench -m model.gguf --baseline host.json --rounds 12 -o evidence-m1-ultra
  capshim bench -m model.gguf --baseline host-bundle -o vs-host   # the host bundle's stock arm
  capshim bench -m model.gguf --profile again=stock   # A/A check: expect no difference
  capshim bench -m m.gguf --arm fa1=native,bench-args='-fa 1' --arm fa0=native,bench-args='-fa 0'
  capshim bench -m model.gguf --rounds 30 -o evidence-precise   # a narrower interval
  capshim bench -m model.gguf --sign ~/.ssh/id_ed25519 -o evidence-signed
  capshim bench --command 'python3 gen.py' --metric 'tokens/s: ([0-9.]+)' --unit tokens/s --warmup 1
"
    )
}

/// Arguments of `capshim bench`.
#[derive(Debug, Args)]
#[command(after_help = after_help())]
pub struct BenchArgs {
    /// The GGUF model to benchmark.
    #[arg(
        short = 'm',
        long = "model",
        value_name = "MODEL.gguf",
        required_unless_present = "command"
    )]
    pub model: Option<PathBuf>,

    /// Benchmark this shell command instead of llama-bench: each arm runs `/bin/sh -c CMD`
    /// (its `command-args=` appended, shell-quoted) once per round, in random order. Measures
    /// the wall time (seconds, lower is better) unless --metric. Not with -m or any other
    /// llama-bench option.
    #[arg(
        long = "command",
        value_name = "CMD",
        conflicts_with_all = [
            "model", "llama_bench", "llama_dir", "baseline", "repetitions", "n_prompt",
            "n_gen", "n_depth", "skip_preflight", "extra",
        ]
    )]
    pub command: Option<String>,

    /// With --command: unmeasured runs of each arm before the first round (with its shim,
    /// variables and arguments) [default: 0].
    #[arg(long = "warmup", value_name = "N", requires = "command")]
    pub warmup: Option<u32>,

    /// With --command: a shell command run before each measured run, untimed, without the
    /// shim or the arm's variables (e.g. to clear a cache); its failure is the run's.
    #[arg(long = "prepare", value_name = "CMD", requires = "command")]
    pub prepare: Option<String>,

    /// With --command: measure the number the regular expression's first capture group finds
    /// in the command's stdout (else its stderr; the first match), e.g. 'tokens/s: ([0-9.]+)';
    /// higher is better. A run whose output has no match, or a value not above 0, fails.
    #[arg(long = "metric", value_name = "REGEX", requires = "command")]
    pub metric: Option<String>,

    /// With --metric: a lower value is better (a latency); the speedup is then stock / arm.
    #[arg(long = "lower-is-better", requires = "metric")]
    pub lower_is_better: bool,

    /// With --metric: the metric's unit, for the report (e.g. tokens/s) [default: value].
    #[arg(long = "unit", value_name = "UNIT", requires = "metric")]
    pub unit: Option<String>,

    #[command(flatten)]
    pub llama: LlamaBenchArgs,

    #[command(flatten)]
    pub arms: ArmArgs,

    /// The bare-metal host, for percent of host: a llama-bench JSON file made there (`-o
    /// json`; one file is one llama-bench process, its -r repetitions that process's
    /// samples), or a bench bundle made there (its stock arm's processes are the host's,
    /// the bundle checked as `capshim report` checks it). Repeat for several host processes:
    /// from 2 on (and enough rounds), percent of host gets a 95% two-sample interval; with
    /// one, it is rounded to the guest's spread and marked as a single host process.
    #[arg(long = "baseline", value_name = "HOST.json|HOST_BUNDLE")]
    pub baseline: Vec<PathBuf>,

    /// Repetitions per test in each llama-bench process (llama-bench -r). The interval is
    /// built on rounds, not repetitions: more rounds narrow it, more repetitions barely do.
    #[arg(
        short = 'r',
        long = "repetitions",
        default_value_t = 3,
        value_name = "N",
        value_parser = clap::value_parser!(u32).range(1..)
    )]
    pub repetitions: u32,

    /// Prompt tokens (llama-bench -p; a comma list is passed through).
    #[arg(
        short = 'p',
        long = "n-prompt",
        default_value = "512",
        value_name = "TOKENS"
    )]
    pub n_prompt: String,

    /// Generated tokens (llama-bench -n; a comma list is passed through).
    #[arg(
        short = 'n',
        long = "n-gen",
        default_value = "128",
        value_name = "TOKENS"
    )]
    pub n_gen: String,

    /// Context depths: each test runs after this many tokens already in the context
    /// (llama-bench -d; a comma list is passed through, e.g. `0,4096`) [default: llama-bench's,
    /// 0].
    #[arg(short = 'd', long = "n-depth", value_name = "TOKENS")]
    pub n_depth: Option<String>,

    /// Rounds: each arm runs once per round, in an order drawn at random for that round. The speedup's
    /// interval needs at least 6; each round is one paired observation of it. Verdicts are
    /// family-wise (level 1 - 0.05/m over the bench's m intervals), so they need a few more:
    /// 7 rounds for 2 intervals (one arm, pp and tg), 8 for 4.
    #[arg(long = "rounds", default_value_t = 12, value_name = "K", value_parser = clap::value_parser!(u32).range(1..))]
    pub rounds: u32,

    /// Seconds to pause between one llama-bench process and the next (not before the first),
    /// so that heat, caches or work one process leaves behind fade before the next starts:
    /// the remedy for carry-over (docs/bench.md, What is exact). Recorded in
    /// environment.json (`cooldown_seconds`) [default: 0].
    #[arg(
        long = "cooldown",
        value_name = "SECONDS",
        value_parser = parse_cooldown,
        allow_negative_numbers = true
    )]
    pub cooldown: Option<std::time::Duration>,

    /// Bundle directory to create (must not exist) [default: ./capshim-bench-YYYYMMDD-HHMMSS, UTC, with -2, -3... appended when taken].
    #[arg(short = 'o', long = "output", value_name = "BUNDLE_DIR")]
    pub output: Option<PathBuf>,

    /// Skip the architecture and code-signature checks of llama-bench.
    #[arg(long = "skip-preflight")]
    pub skip_preflight: bool,

    #[command(flatten)]
    pub experiment: ExperimentArgs,

    /// Extra llama-bench arguments, after `--` (e.g. `-- -t 8 -ngl 99`).
    #[arg(last = true, value_name = "LLAMA_BENCH_ARGS")]
    pub extra: Vec<String>,
}

/// `--cooldown`'s value: seconds, a non-negative finite number (`30`, `2.5`).
///
/// # Errors
/// A text naming the value and what is expected, which clap prints as a usage error (exit 2).
fn parse_cooldown(value: &str) -> Result<std::time::Duration, String> {
    let seconds: f64 = value.trim().parse().map_err(|_| {
        "not a number of seconds; give one such as --cooldown 30 or --cooldown 2.5".to_string()
    })?;
    if !seconds.is_finite() || seconds < 0.0 {
        return Err(format!(
            "{value} seconds is not a pause; give zero or more seconds, e.g. --cooldown 30"
        ));
    }
    std::time::Duration::try_from_secs_f64(seconds)
        .map_err(|e| format!("{value} seconds cannot be waited: {e}; give fewer seconds"))
}

/// Builds and checks the plan of `bench --command CMD` from the command line.
fn command_plan(args: BenchArgs, command: String) -> anyhow::Result<(CommandPlan, ExperimentArgs)> {
    args.experiment.check()?;
    if command.trim().is_empty() {
        return Err(UsageError(
            "--command is empty; give the shell command to benchmark, e.g. --command 'python3 bench.py'"
                .into(),
        )
        .into());
    }
    let unit = match (&args.metric, args.unit) {
        (None, _) => "seconds".to_string(),
        (Some(_), Some(unit)) => unit,
        (Some(_), None) => DEFAULT_UNIT.to_string(),
    };
    let workload = Workload {
        command,
        measure: if args.metric.is_some() {
            Measure::Metric
        } else {
            Measure::Wall
        },
        regex: args.metric,
        lower_is_better: args.lower_is_better,
        unit,
    };
    workload.regex().map_err(|e| UsageError(e.to_string()))?;
    let arms = args.arms.resolve(true, &[])?;
    for arm in &arms {
        if arm.args.command.is_empty() && !arm.args.is_empty() {
            crate::term::note(format!(
                "arm {:?}: its bench-args and common-args are not the command's; the command gets \
                 only an arm's command-args",
                arm.name
            ));
        }
    }
    let needs_shim = arms.iter().any(|a| a.profile.is_some());
    let dylib = if let Some((path, arches)) = args.arms.shim_library(needs_shim)? {
        // The library's own checks; the programs the command runs are the command's.
        let launch = preflight::Launch {
            program: std::path::Path::new(command::run::SHELL),
            library: &path,
            library_arches: &arches,
            scope: ScopeArg::Children,
            os: Os::current(),
            skip_program: true,
        };
        for warning in preflight::check(&facts::Real::default(), &launch)? {
            crate::term::warning(warning);
        }
        Some(path)
    } else {
        None
    };
    Ok((
        CommandPlan {
            workload,
            arms,
            rounds: args.rounds,
            warmup: args.warmup.unwrap_or(0),
            prepare: args.prepare,
            cooldown: args.cooldown.unwrap_or_default(),
            dylib,
            allow_inactive: args.arms.shim.allow_inactive,
            keep_going: args.experiment.keep_going,
            output: args.output,
        },
        args.experiment,
    ))
}

/// Builds and checks the plan from the command line.
fn plan(args: BenchArgs) -> anyhow::Result<(Plan, ExperimentArgs)> {
    // clap's `requires` alone lets these through next to -m: say which option needs which.
    for (given, option) in [
        (args.warmup.is_some(), "--warmup"),
        (args.prepare.is_some(), "--prepare"),
        (args.metric.is_some(), "--metric"),
        (args.unit.is_some(), "--unit"),
        (args.lower_is_better, "--lower-is-better"),
    ] {
        if given {
            return Err(UsageError(format!(
                "{option} applies to --command only; llama-bench benches measure tokens/s"
            ))
            .into());
        }
    }
    check_extra_args(&args.extra).map_err(|e| UsageError(e.to_string()))?;
    args.experiment.check()?;
    let Some(model) = &args.model else {
        return Err(
            UsageError("give the GGUF model with -m, or a command with --command".into()).into(),
        );
    };
    let model = existing_file(model, "model", "give an existing GGUF file with -m")?;
    let llama_bench = args.llama.llama_bench()?;
    let arms = args.arms.resolve(true, &[])?;
    check_arm_args(&arms, &args.extra).map_err(|e| UsageError(e.to_string()))?;
    for arm in &arms {
        if arm.args.bench.is_empty() && !(arm.args.common.is_empty() && arm.args.command.is_empty())
        {
            crate::term::note(format!(
                "arm {:?}: its common-args and command-args are not llama-bench's; llama-bench \
                 gets only an arm's bench-args",
                arm.name
            ));
        }
    }
    let needs_shim = arms.iter().any(|a| a.profile.is_some());
    let dylib = if let Some((path, arches)) = args.arms.shim_library(needs_shim)? {
        // Whether the shim can load into llama-bench (each arm runs it directly, scope
        // children).
        let launch = preflight::Launch {
            program: &llama_bench,
            library: &path,
            library_arches: &arches,
            scope: ScopeArg::Children,
            os: Os::current(),
            skip_program: args.skip_preflight,
        };
        for warning in preflight::check(&facts::Real::default(), &launch)? {
            crate::term::warning(warning);
        }
        Some(path)
    } else {
        None
    };
    let mut sources = Vec::new();
    for given in &args.baseline {
        let given = if given.is_dir() {
            given.clone()
        } else {
            existing_file(
                given,
                "baseline",
                "give the host's llama-bench -o json file, or a bench bundle made on the host",
            )?
        };
        let source = baseline::read_source(&given)?;
        for warning in &source.warnings {
            crate::term::warning(warning);
        }
        // The tests as llama-bench will build them, capshim's -d included.
        let mut shaping = args.extra.clone();
        if let Some(depth) = &args.n_depth {
            shaping.extend(["-d".to_string(), depth.clone()]);
        }
        if let Some(planned) = planned_tests(&args.n_prompt, &args.n_gen, &shaping) {
            let shown = source.given.display().to_string();
            let warnings = check_baseline(&shown, &source.tests, &planned)
                .map_err(|e| UsageError(e.to_string()))?;
            for warning in warnings {
                crate::term::warning(warning);
            }
        }
        baseline::add_once(&mut sources, source).map_err(UsageError)?;
    }
    baseline::check_one_host(&sources)?;
    baseline::check_model(&sources, &model)?;
    Ok((
        Plan {
            llama_bench,
            model,
            repetitions: args.repetitions,
            n_prompt: args.n_prompt,
            n_gen: args.n_gen,
            n_depth: args.n_depth,
            extra: args.extra,
            arms,
            rounds: args.rounds,
            cooldown: args.cooldown.unwrap_or_default(),
            dylib,
            allow_inactive: args.arms.shim.allow_inactive,
            keep_going: args.experiment.keep_going,
            baseline: sources.iter().flat_map(|s| s.files.clone()).collect(),
            baseline_sums: sources.iter().filter_map(|s| s.sums.clone()).collect(),
            output: args.output,
        },
        args.experiment,
    ))
}

/// Runs `capshim bench`.
pub fn execute(mut args: BenchArgs) -> anyhow::Result<ExitCode> {
    let result = match args.command.take() {
        Some(command) => {
            let (plan, experiment) = command_plan(args, command)?;
            (command::runner::run(&plan), experiment)
        }
        None => {
            let (plan, experiment) = plan(args)?;
            (runner::run(&plan), experiment)
        }
    };
    let (result, experiment) = result;
    experiment.finish(result, |outcome| {
        if outcome.no_result.is_empty() {
            ExitCode::SUCCESS
        } else {
            sealed_failure(format!(
                "no result for arm {}: every run of it failed (see the report)",
                outcome.no_result.join(", ")
            ))
        }
    })
}
