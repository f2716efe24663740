//! `capshim bench`: the stock / unlocked / host experiment, end to end, into an evidence bundle.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::Args;

use crate::analysis::Role;
use crate::analysis::interval::{CONFIDENCE_LEVEL, MIN_ROUNDS, NOISE, percent_text};
use crate::bench::plan::{ArmPlan, Plan, check_extra_args};
use crate::bench::runner;
use crate::launch::{Os, dylib};
use crate::llama::read_bench_file;

/// The text after the options: how bench runs, its statistics (with the constants they use),
/// its output, signals, exit codes and examples.
fn after_help() -> String {
    let level = percent_text(CONFIDENCE_LEVEL);
    let band = percent_text(NOISE);
    let min = MIN_ROUNDS;
    format!(
        "\
Arms: `stock` (no shim) and one per --profile (default: apple9-64k, the published tested profile:
Apple families through Apple9 (1009), 65536 bytes of threadgroup memory). `--profile LABEL=NAME`
names an arm, e.g. `--profile again=stock` adds a second stock arm for an A/A check. Each arm runs
llama-bench as a fresh process (`-o json`, added by capshim), once per round (default: 10 rounds of
-r 3); pairs of rounds alternate the arm order (stock, unlocked, stock, unlocked, then unlocked,
stock, unlocked, stock, ...) so drift and the position in a round hit every arm alike. The shim is injected (DYLD_INSERT_LIBRARIES on macOS, LD_PRELOAD on Linux) only into
arms with a profile; an arm whose shim did not hook a device is an error unless --allow-inactive.
`--profile host` matches this machine's CPU brand, or the one given with --cpu-brand.

Statistics: figures are medians of samples_ts (tokens/s); speedup = arm median / stock median.
Samples of one llama-bench process share its conditions, so the unit of the interval is the round:
each round gives one paired ratio (the arm's median over stock's in the same round), and the {level}%
interval is Student's t over rounds (an AB/BA crossover: rounds - 2 degrees of freedom). It needs
at least {min} rounds; below that the speedup has no interval (`—`, JSON null) and the report says how
many rounds are needed. The main table prints e.g. `7.20× [7.13 7.26] faster` (the paired estimate,
its interval, the verdict): faster or slower only when the whole interval lies beyond the ±{band}% noise band, `no measurable difference` when it lies
within it, `inconclusive` otherwise. Each arm's line gives the half-width (±%) and, when wider than
±{band}%, about how many rounds would bring it within. More rounds narrow the interval; more -r barely
does. docs/bench.md derives the method and gives A/A figures.

Output: results on stdout (Markdown, or JSON with --json), progress on stderr, and an evidence
bundle directory that is never overwritten: raw/<arm>-r<round>.json, .stderr and .status.jsonl,
summary.json, results.csv, report.md, chart.svg, environment.json, SHA256SUMS.
Re-render or verify it with `capshim report BUNDLE_DIR`.

Interrupting: SIGINT (Ctrl-C), SIGTERM or SIGHUP is passed on to the running llama-bench; capshim
waits for it, starts no further runs, leaves the bundle unsealed (no SHA256SUMS) with an INCOMPLETE
note naming the runs that finished and why it stopped, and exits 128 + the signal's number.

Exit codes:
  0    the bundle was written
  1    error (llama-bench failed, the shim did not activate, bad input, bundle exists)
  2    bad command line
  129  stopped by SIGHUP, 130 by SIGINT, 143 by SIGTERM (the bundle is unfinished)

Examples:
  capshim bench -m tinyllama-1.1b-q4_k_m.gguf -- -t 8 -ngl 99
  capshim bench -m model.gguf --baseline host.json --rounds 12 -o evidence-m1-ultra
  capshim bench -m model.gguf --profile again=stock   # A/A check: expect no difference
  capshim bench -m model.gguf --rounds 30 -o evidence-precise   # a narrower interval
"
    )
}

/// Arguments of `capshim bench`.
#[derive(Debug, Args)]
#[command(after_help = after_help())]
pub struct BenchArgs {
    /// The GGUF model to benchmark.
    #[arg(short = 'm', long = "model", value_name = "MODEL.gguf")]
    pub model: PathBuf,

    /// llama-bench executable [default: `llama-bench` on PATH].
    #[arg(long = "llama-bench", value_name = "PATH")]
    pub llama_bench: Option<PathBuf>,

    /// An unlocked arm: a named profile (apple9-64k, host, stock), optionally as LABEL=NAME.
    /// Repeat for several arms [default: apple9-64k].
    #[arg(long = "profile", value_name = "[LABEL=]NAME")]
    pub profiles: Vec<String>,

    /// The CPU brand `--profile host` arms match instead of this machine's (e.g. "Apple M1 Ultra
    /// (Virtual)"), to benchmark `host` off a macOS guest or for another chip.
    #[arg(long = "cpu-brand", value_name = "STRING")]
    pub cpu_brand: Option<String>,

    /// llama-bench JSON from the bare-metal host (`-o json`), for percent of host.
    #[arg(long = "baseline", value_name = "HOST.json")]
    pub baseline: Option<PathBuf>,

    /// Repetitions per test in each llama-bench process (llama-bench -r). The interval is
    /// built on rounds, not repetitions: more rounds narrow it, more repetitions barely do.
    #[arg(
        short = 'r',
        long = "repetitions",
        default_value_t = 3,
        value_name = "N"
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

    /// Rounds: each arm runs once per round; pairs of rounds alternate the order. The speedup's interval
    /// needs at least 4; each round is one paired observation of it.
    #[arg(long = "rounds", default_value_t = 10, value_name = "K")]
    pub rounds: u32,

    /// Bundle directory to create (must not exist) [default: ./capshim-bench-YYYYMMDD-HHMMSS, UTC, with -2, -3... appended when taken].
    #[arg(short = 'o', long = "output", value_name = "BUNDLE_DIR")]
    pub output: Option<PathBuf>,

    /// The shim library [default: libcapshim.dylib (macOS) or libcapshim.so (Linux), searched
    /// where `capshim run` looks: next to the capshim executable, ../lib/capshim/ beside it,
    /// /usr/local/lib/capshim/, /opt/homebrew/lib/capshim/ (macOS), ~/.local/lib/capshim/].
    #[arg(long = "dylib", value_name = "PATH")]
    pub dylib: Option<PathBuf>,

    /// Measure unlocked arms even when the shim did not activate (the report says so).
    #[arg(long = "allow-inactive")]
    pub allow_inactive: bool,

    /// Print summary.json instead of the Markdown report.
    #[arg(long = "json")]
    pub json: bool,

    /// Extra llama-bench arguments, after `--` (e.g. `-- -t 8 -ngl 99`).
    #[arg(last = true, value_name = "LLAMA_BENCH_ARGS")]
    pub extra: Vec<String>,
}

fn find_on_path(program: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
}

fn absolute(path: &Path, what: &str, fix: &str) -> anyhow::Result<PathBuf> {
    if !path.is_file() {
        bail!(
            "{what} {} does not exist or is not a file; {fix}",
            path.display()
        );
    }
    std::fs::canonicalize(path).with_context(|| format!("cannot resolve {what} {}", path.display()))
}

fn parse_profile(spec: &str, cpu_brand: Option<&str>) -> anyhow::Result<ArmPlan> {
    let (label, name) = spec.split_once('=').unwrap_or((spec, spec));
    if label.is_empty()
        || !label
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
    {
        bail!(
            "--profile {spec:?}: the arm label {label:?} must be letters, digits, '.', '_' or '-' (it names files)"
        );
    }
    let profile = if name == "host" {
        let (brand, how) = match cpu_brand {
            Some(brand) => (brand.to_string(), "given with --cpu-brand"),
            None => (
                crate::bench::environment::collect()
                    .cpu_brand
                    .unwrap_or_default(),
                "this machine's",
            ),
        };
        let (profile, _) = capshim_profile::named::host(&brand).map_err(|e| {
            anyhow::anyhow!(
                "--profile {spec:?}: {} ({how}); give the host's brand with --cpu-brand \"Apple M1 Ultra (Virtual)\", \
                 or benchmark a fixed profile such as --profile apple9-64k",
                e.problem()
            )
        })?;
        Some(profile)
    } else {
        match capshim_profile::named::find(name) {
            Some(named) => named.profile,
            None => {
                let mut known: Vec<&str> = capshim_profile::named::fixed()
                    .iter()
                    .map(|p| p.name)
                    .collect();
                known.push("host");
                bail!(
                    "--profile {spec:?}: no profile named {name:?}; known: {} (`capshim profiles` lists them)",
                    known.join(", ")
                );
            }
        }
    };
    Ok(ArmPlan {
        name: label.to_string(),
        profile_name: name.to_string(),
        profile,
        role: Role::Other,
    })
}

/// Builds and checks the plan from the command line.
fn plan(args: BenchArgs) -> anyhow::Result<(Plan, bool)> {
    check_extra_args(&args.extra)?;
    if args.rounds == 0 || args.repetitions == 0 {
        bail!("--rounds and -r must be at least 1");
    }
    let model = absolute(&args.model, "model", "give an existing GGUF file with -m")?;
    let llama_bench = match &args.llama_bench {
        Some(p) => absolute(p, "llama-bench", "give the llama-bench executable with --llama-bench")?,
        None => find_on_path("llama-bench").ok_or_else(|| {
            anyhow::anyhow!(
                "llama-bench is not on PATH; give it with --llama-bench PATH (on Linux, scripts/llama/build.sh builds one)"
            )
        })?,
    };
    let mut arms = vec![ArmPlan {
        name: "stock".into(),
        profile_name: "stock".into(),
        profile: None,
        role: Role::Stock,
    }];
    let specs = if args.profiles.is_empty() {
        vec!["apple9-64k".to_string()]
    } else {
        args.profiles.clone()
    };
    if args.cpu_brand.is_some()
        && !specs
            .iter()
            .any(|spec| spec.split_once('=').map_or(spec.as_str(), |(_, n)| n) == "host")
    {
        bail!(
            "--cpu-brand only applies to --profile host arms; add --profile host, or drop --cpu-brand"
        );
    }
    for spec in &specs {
        let arm = parse_profile(spec, args.cpu_brand.as_deref())?;
        let reserved = args.baseline.is_some() && arm.name == "host";
        if reserved || arms.iter().any(|a| a.name == arm.name) {
            bail!(
                "--profile {spec:?}: an arm named {:?} already exists; name it with LABEL=NAME, e.g. --profile {}-2={}",
                arm.name,
                arm.name,
                arm.profile_name
            );
        }
        arms.push(arm);
    }
    let needs_shim = arms.iter().any(|a| a.profile.is_some());
    let dylib = if needs_shim {
        let os = Os::current();
        let path = dylib::locate(args.dylib.as_deref(), os)?;
        let path = absolute(
            &path,
            "shim library",
            &format!(
                "build the shim (crates/shim: `cargo build` puts {} in target/<profile>/, next to capshim) or give it with --dylib PATH; \
                 it is injected with {}",
                os.library_name(),
                os.injection_var()
            ),
        )?;
        // The real file: what the loader opens, and where a space or colon would matter.
        dylib::check(&path, os)?;
        Some(path)
    } else {
        None
    };
    let baseline = match &args.baseline {
        Some(p) => {
            let p = absolute(p, "baseline", "give the host's llama-bench -o json file")?;
            read_bench_file(&p)?;
            Some(p)
        }
        None => None,
    };
    Ok((
        Plan {
            llama_bench,
            model,
            repetitions: args.repetitions,
            n_prompt: args.n_prompt,
            n_gen: args.n_gen,
            extra: args.extra,
            arms,
            rounds: args.rounds,
            dylib,
            allow_inactive: args.allow_inactive,
            baseline,
            output: args.output,
        },
        args.json,
    ))
}

/// Runs `capshim bench`.
pub fn execute(args: BenchArgs) -> anyhow::Result<ExitCode> {
    let (plan, json) = plan(args)?;
    let outcome = match runner::run(&plan) {
        Ok(outcome) => outcome,
        Err(e) => {
            if let Some(number) = e.interrupted_by() {
                let mut text = e.to_string();
                let mut source = std::error::Error::source(&e);
                while let Some(cause) = source {
                    let cause_text = cause.to_string();
                    if !text.contains(&cause_text) {
                        text.push_str(": ");
                        text.push_str(&cause_text);
                    }
                    source = cause.source();
                }
                eprintln!("capshim: error: {text}");
                return Ok(ExitCode::from(128 + u8::try_from(number).unwrap_or(0)));
            }
            return Err(e.into());
        }
    };
    if json {
        print!("{}", outcome.summary_json);
    } else {
        print!("{}", outcome.markdown);
    }
    eprintln!("capshim: evidence bundle: {}", outcome.dir.display());
    Ok(ExitCode::SUCCESS)
}
