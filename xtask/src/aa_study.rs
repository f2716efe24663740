//! `cargo xtask aa-study`: how often `capshim bench` at its defaults calls two identical arms
//! different, on this machine, with the real llama-bench.
//!
//! Runs K A/A benches (`--profile again=stock`, every other bench option at its default) with
//! a release build of capshim, reads each one's `--json` summary, and prints per test the
//! share of benches whose interval excluded 1.00 (the false-positive rate: at most 5%, 4.25% at
//! bench's default 12 rounds), the
//! median half-width of the interval, and the verdicts. `--busy N` keeps N CPU-bound
//! processes (`yes > /dev/null`) running throughout, to measure a busy machine. The load
//! average is sampled before each bench. docs/bench.md holds this machine's figures.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use anyhow::{Context, bail};

/// Options of `cargo xtask aa-study`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// A/A benches to run.
    #[arg(long, default_value_t = 40, value_name = "K")]
    runs: usize,
    /// CPU-bound processes (`yes > /dev/null`) to keep running during the study.
    #[arg(long, default_value_t = 0, value_name = "N")]
    busy: usize,
    /// llama-bench [default: LLAMA_BENCH from `scripts/llama/build.sh --check`].
    #[arg(long, value_name = "PATH")]
    llama_bench: Option<PathBuf>,
    /// The model [default: TINY_MODEL from `scripts/llama/build.sh --check`].
    #[arg(short = 'm', long, value_name = "MODEL.gguf")]
    model: Option<PathBuf>,
    /// Where the bundles go [default: target/aa-study/<unix time>].
    #[arg(short = 'o', long, value_name = "DIR")]
    output: Option<PathBuf>,
    /// `capshim bench --rounds` [default: bench's own].
    #[arg(long, value_name = "K")]
    rounds: Option<u32>,
    /// `capshim bench -r` [default: bench's own].
    #[arg(short = 'r', long, value_name = "N")]
    repetitions: Option<u32>,
    /// llama-bench arguments passed after `capshim bench ... --`, e.g. `-- -t 1`.
    #[arg(last = true, value_name = "LLAMA_BENCH_ARGS")]
    llama_args: Vec<String>,
}

/// One A/A bench's figures for one test.
struct Outcome {
    test: String,
    speedup: f64,
    interval: Option<(f64, f64)>,
    half_width: Option<f64>,
    verdict: String,
}

/// Kills the CPU-bound helpers when dropped, whatever happens to the study.
struct Busy(Vec<Child>);

impl Drop for Busy {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Runs the study and prints its table on stdout.
pub fn run(args: Args) -> anyhow::Result<()> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .context("xtask has no parent directory")?
        .to_path_buf();
    let (llama_bench, model) = tools(&root, &args)?;
    let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args(["build", "--release", "-p", "capshim-cli"])
        .current_dir(&root)
        .status()
        .context("cannot run cargo build")?;
    if !status.success() {
        bail!("cargo build --release -p capshim-cli failed");
    }
    let capshim = root.join("target/release/capshim");
    let out = args.output.clone().unwrap_or_else(|| {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        root.join(format!("target/aa-study/{now}"))
    });
    std::fs::create_dir_all(&out).with_context(|| format!("cannot create {}", out.display()))?;

    let _busy = Busy(
        (0..args.busy)
            .map(|_| {
                Command::new("yes")
                    .stdout(Stdio::null())
                    .spawn()
                    .context("cannot start `yes` for --busy")
            })
            .collect::<anyhow::Result<_>>()?,
    );
    let mut outcomes: Vec<Outcome> = Vec::new();
    let mut loads = Vec::new();
    for k in 1..=args.runs {
        loads.push(load_average()?);
        let bundle = out.join(format!("aa-{k}"));
        let output = Command::new(&capshim)
            .arg("bench")
            .arg("-m")
            .arg(&model)
            .arg("--llama-bench")
            .arg(&llama_bench)
            .args(["--profile", "again=stock", "--json", "-o"])
            .arg(&bundle)
            .args(bench_args(&args))
            .stderr(Stdio::null())
            .output()
            .context("cannot run capshim bench")?;
        if !output.status.success() {
            bail!(
                "capshim bench failed for {} ({})",
                bundle.display(),
                output.status
            );
        }
        let summary: serde_json::Value =
            serde_json::from_slice(&output.stdout).with_context(|| {
                format!("{}: capshim bench --json printed no JSON", bundle.display())
            })?;
        for row in summary["rows"].as_array().context("summary has no rows")? {
            let again = &row["arms"]["again"];
            let o = Outcome {
                test: row["test"].as_str().unwrap_or("?").to_string(),
                speedup: again["speedup_vs_stock"].as_f64().unwrap_or(f64::NAN),
                interval: again["speedup_ci95"]["low"]
                    .as_f64()
                    .zip(again["speedup_ci95"]["high"].as_f64()),
                half_width: again["speedup_precision"]["half_width"].as_f64(),
                verdict: again["verdict"].as_str().unwrap_or("none").to_string(),
            };
            eprintln!(
                "aa-study: {k}/{} {} speedup {:.3} interval {} load {:.2}",
                args.runs,
                o.test,
                o.speedup,
                o.interval
                    .map_or("—".into(), |(l, h)| format!("{l:.3}–{h:.3}")),
                loads[k - 1]
            );
            outcomes.push(o);
        }
    }
    print!("{}", table(&args, &outcomes, &loads, &out));
    Ok(())
}

/// The `capshim bench` arguments the study adds to `--profile again=stock`.
fn bench_args(args: &Args) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(k) = args.rounds {
        out.extend(["--rounds".to_string(), k.to_string()]);
    }
    if let Some(r) = args.repetitions {
        out.extend(["-r".to_string(), r.to_string()]);
    }
    if !args.llama_args.is_empty() {
        out.push("--".into());
        out.extend(args.llama_args.iter().cloned());
    }
    out
}

/// llama-bench and the model: given, or from the llama.cpp cache of scripts/llama/build.sh.
fn tools(root: &Path, args: &Args) -> anyhow::Result<(PathBuf, PathBuf)> {
    if let (Some(l), Some(m)) = (&args.llama_bench, &args.model) {
        return Ok((l.clone(), m.clone()));
    }
    let out = Command::new("bash")
        .arg(root.join("scripts/llama/build.sh"))
        .arg("--check")
        .output()
        .context("cannot run scripts/llama/build.sh --check")?;
    if !out.status.success() {
        bail!(
            "no llama.cpp tools in the cache: run scripts/llama/build.sh, or give --llama-bench and -m"
        );
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let get = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{key}=")))
            .map(PathBuf::from)
    };
    let llama_bench = args.llama_bench.clone().or_else(|| get("LLAMA_BENCH"));
    let model = args.model.clone().or_else(|| get("TINY_MODEL"));
    match (llama_bench, model) {
        (Some(l), Some(m)) => Ok((l, m)),
        _ => bail!("scripts/llama/build.sh --check printed no LLAMA_BENCH or TINY_MODEL"),
    }
}

/// The 1-minute load average (/proc/loadavg); 0 where there is none.
fn load_average() -> anyhow::Result<f64> {
    match std::fs::read_to_string("/proc/loadavg") {
        Ok(text) => Ok(text
            .split_whitespace()
            .next()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0)),
        Err(_) => Ok(0.0),
    }
}

fn median(values: &mut [f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let n = values.len();
    Some(if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    })
}

/// The study's table: per test, the false-positive rate, the median half-width, the verdicts.
fn table(args: &Args, outcomes: &[Outcome], loads: &[f64], out: &Path) -> String {
    let mut text = format!(
        "A/A study: {} benches of `capshim bench --profile again=stock{}{}` with {} CPU-bound \
         process(es) beside; load average before each bench: median {:.2}, max {:.2}; bundles in {}\n\n",
        args.runs,
        if bench_args(args).is_empty() { "" } else { " " },
        bench_args(args).join(" "),
        args.busy,
        median(&mut loads.to_vec()).unwrap_or(0.0),
        loads.iter().copied().fold(0.0, f64::max),
        out.display()
    );
    text.push_str("| test | benches | with interval | excluded 1.00 | rate | median half-width | faster | slower | no measurable difference | inconclusive | median speedup |\n");
    text.push_str("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    let mut tests: Vec<&str> = Vec::new();
    for o in outcomes {
        if !tests.contains(&o.test.as_str()) {
            tests.push(&o.test);
        }
    }
    for test in tests {
        let of: Vec<&Outcome> = outcomes.iter().filter(|o| o.test == test).collect();
        let with: Vec<&&Outcome> = of.iter().filter(|o| o.interval.is_some()).collect();
        let excluded = with
            .iter()
            .filter(|o| o.interval.is_some_and(|(l, h)| !(l..=h).contains(&1.0)))
            .count();
        let count = |v: &str| of.iter().filter(|o| o.verdict == v).count();
        let mut hw: Vec<f64> = of.iter().filter_map(|o| o.half_width).collect();
        let mut speedups: Vec<f64> = of.iter().map(|o| o.speedup).collect();
        text.push_str(&format!(
            "| {test} | {} | {} | {excluded} | {:.1}% | {} | {} | {} | {} | {} | {:.3} |\n",
            of.len(),
            with.len(),
            100.0 * excluded as f64 / with.len().max(1) as f64,
            median(&mut hw).map_or("—".into(), |h| format!("±{:.1}%", 100.0 * h)),
            count("faster"),
            count("slower"),
            count("no_measurable_difference"),
            count("inconclusive"),
            median(&mut speedups).unwrap_or(f64::NAN),
        ));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: Args,
    }

    #[test]
    fn llama_bench_arguments_go_after_the_double_dash() {
        let cli = Cli::parse_from(["x", "--runs", "3", "--rounds", "6", "--", "-t", "1"]);
        assert_eq!(cli.args.runs, 3);
        assert_eq!(bench_args(&cli.args), ["--rounds", "6", "--", "-t", "1"]);
        let cli = Cli::parse_from(["x"]);
        assert!(bench_args(&cli.args).is_empty(), "the defaults add nothing");
    }

    #[test]
    fn the_table_counts_intervals_that_exclude_one() {
        let cli = Cli::parse_from(["x", "--runs", "3"]);
        let o = |low: f64, high: f64, verdict: &str| Outcome {
            test: "pp512".into(),
            speedup: (low * high).sqrt(),
            interval: Some((low, high)),
            half_width: Some((high / low).sqrt() - 1.0),
            verdict: verdict.into(),
        };
        let outcomes = [
            o(0.9, 1.1, "inconclusive"),
            o(1.01, 1.2, "inconclusive"),
            o(0.99, 1.01, "no_measurable_difference"),
        ];
        let text = table(&cli.args, &outcomes, &[1.0, 2.0, 3.0], Path::new("out"));
        assert!(text.contains("| pp512 | 3 | 3 | 1 | 33.3% |"), "{text}");
        assert!(text.contains("median 2.00, max 3.00"), "{text}");
    }
}
