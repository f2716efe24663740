//! `capshim report`: llama-bench JSON files, or evidence bundles, to the comparison table.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::bail;
use clap::Args;

use crate::analysis::{ArmInput, Role, RunInput, SCHEMA_VERSION, analyze, interval};
use crate::bundle::{self, BundleError};
use crate::export::{Exporter, csv::Csv, json::Json, markdown::Markdown, svg::Svg};
use crate::llama::read_bench_file;
use crate::verify;

/// Exit code for a bundle whose files do not match its SHA256SUMS.
pub const EXIT_TAMPERED: u8 = 3;
/// Exit code for a bad command line (as clap's own).
pub const EXIT_USAGE: u8 = 2;

/// A command line that cannot work, found after clap parsed it: exit code 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct Usage(String);

macro_rules! usage {
    ($($arg:tt)*) => {
        return Err(Usage(format!($($arg)*)).into())
    };
}

/// The text after the options; the statistics' constants come from [`interval`].
fn after_help() -> String {
    format!(
        "\
Each --arm names a column and one or more llama-bench `-o json` or `-o jsonl` files; rows merge by
(n_prompt, n_gen, n_depth). The arm named `stock` (or --stock) is the reference for speedups
(unlocked median / stock median) and the arm named `host` (or --host) for percent of host
(100 × arm median / host median). Figures are medians of samples_ts, in tokens/s; rows an arm
lacks show as `missing`.

Each file is one llama-bench process (a round): file i of an arm is paired with file i of the
stock arm, so give them in the order they ran. A speedup gets a {level}% interval and a verdict
(faster, slower, no measurable difference within ±{band}%, inconclusive) from at least {min} such
pairs, as `capshim bench --help` describes; with fewer it has none, and the report says why.
{AFTER_HELP}",
        level = interval::percent_text(interval::CONFIDENCE_LEVEL),
        band = interval::percent_text(interval::NOISE),
        min = interval::MIN_ROUNDS,
    )
}

const AFTER_HELP: &str = "

BUNDLE_DIR arguments are evidence bundles written by `capshim bench`: their SHA256SUMS is checked
first, then they are re-rendered from their raw files; several bundles give one table, arms named
<bundle>/<arm>, each compared only with its own bundle's stock and host arms (no percent of host
when its bundle has no host arm), unless --stock / --host name an arm, which every arm then uses.
A bundle written by `capshim verify` is checked the same way (its summary.json and report.md are
derived again from its raw files) and its report printed (summary.json with --json), one per run.

Exit codes:
  0  the report was printed
  1  error (unreadable or non-llama-bench input, models disagree within an arm, ...)
  2  bad command line (also: no inputs, an --arm without NAME=FILE, --stock/--host naming no arm
     or both naming one)
  3  a bundle is not trustworthy: changed after it was written (SHA256SUMS mismatch, missing or
     added files), or unfinished (no SHA256SUMS: the run that wrote it was interrupted or
     failed; its INCOMPLETE note says why), or its report.md (verify bundles: or summary.json)
     is not what its raw files render to (SHA256SUMS regenerated after an edit); SHA256SUMS
     naming a path outside it

Examples:
  capshim report --arm host=host.json --arm stock=stock.json --arm unlocked=unlocked.json
  capshim report --arm stock=s1.json,s2.json --arm apple9-64k=u1.json,u2.json --json
  capshim report capshim-bench-20261130-210000
  capshim report bundle-m1 bundle-m2 --csv
";

/// Arguments of `capshim report`.
#[derive(Debug, Args)]
#[command(after_help = after_help())]
pub struct ReportArgs {
    /// Evidence bundle directories written by `capshim bench`.
    #[arg(value_name = "BUNDLE_DIR")]
    pub bundles: Vec<PathBuf>,

    /// An arm: its name and its llama-bench JSON/JSONL files. Repeat for each arm.
    #[arg(long = "arm", value_name = "NAME=FILE[,FILE...]")]
    pub arms: Vec<String>,

    /// The arm speedups are computed against [default: stock].
    #[arg(long = "stock", value_name = "NAME")]
    pub stock: Option<String>,

    /// The bare-metal arm for percent of host [default: host].
    #[arg(long = "host", value_name = "NAME")]
    pub host: Option<String>,

    /// Print JSON: {"rows":[{"test","n_prompt","n_gen","n_depth","arms":{NAME:{median_ts,...}}}]}.
    #[arg(long, group = "format")]
    pub json: bool,

    /// Print CSV: one line per test and metric, a column per arm.
    #[arg(long, group = "format")]
    pub csv: bool,

    /// Print the Markdown table (the default).
    #[arg(long, group = "format")]
    pub markdown: bool,

    /// Print an SVG chart.
    #[arg(long, group = "format")]
    pub svg: bool,
}

/// The layout of a bundle's `summary.json` when it is older than this version's
/// [`SCHEMA_VERSION`] (`None` when current, or unreadable: then the report check decides).
fn older_schema(dir: &std::path::Path) -> Option<String> {
    let text = std::fs::read_to_string(dir.join("summary.json")).ok()?;
    let summary: serde_json::Value = serde_json::from_str(&text).ok()?;
    match summary.get("schema_version").map(serde_json::Value::as_u64) {
        None => Some("summary.json without schema_version: bootstrap intervals".into()),
        Some(Some(v)) if v < u64::from(SCHEMA_VERSION) => Some(format!("schema_version {v}")),
        _ => None,
    }
}

fn arm_inputs(args: &ReportArgs) -> anyhow::Result<Vec<ArmInput>> {
    let mut arms = Vec::new();
    let prefixed = args.bundles.len() > 1;
    for (i, dir) in args.bundles.iter().enumerate() {
        if !dir.is_dir() {
            bail!(
                "{} is not a directory: give llama-bench files with --arm NAME=FILE, and bundle directories as arguments",
                dir.display()
            );
        }
        bundle::verify(dir)?;
        let manifest = bundle::load::read_manifest(dir)?;
        // The sums only prove the files are as sealed, or that someone re-sealed them: the
        // report must also be what the raw files render to.
        let own = analyze(&bundle::load_arms(dir, &manifest, None)?)?;
        let rendered = Markdown.render(&own)?;
        if let Some(version) = older_schema(dir) {
            // An older capshim computed its intervals another way: its report cannot match
            // this version's rendering, which is what is printed.
            eprintln!(
                "capshim: note: {} was written by an older capshim ({version}); its checksums hold, but its \
                 report.md was not compared with the raw files: the report below is re-computed from them with \
                 this version's statistics",
                dir.display()
            );
        } else if std::fs::read_to_string(dir.join("report.md"))
            .ok()
            .as_deref()
            != Some(rendered.as_str())
        {
            return Err(BundleError::ReportMismatch {
                path: dir.to_path_buf(),
            }
            .into());
        }
        let prefix = prefixed.then(|| {
            let name = dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| format!("bundle{}", i + 1));
            if args.bundles[..i]
                .iter()
                .any(|d| d.file_name() == dir.file_name())
            {
                format!("{name}#{}", i + 1)
            } else {
                name
            }
        });
        arms.extend(bundle::load_arms(dir, &manifest, prefix.as_deref())?);
    }
    for spec in &args.arms {
        let Some((name, files)) = spec.split_once('=') else {
            usage!(
                "--arm {spec:?} has no `=`; write it as NAME=FILE[,FILE...], e.g. --arm stock=stock.json"
            );
        };
        if name.is_empty() || files.is_empty() {
            usage!(
                "--arm {spec:?}: both the name and at least one file are needed, e.g. --arm stock=stock.json"
            );
        }
        let mut runs = Vec::new();
        for (i, file) in files.split(',').enumerate() {
            let path = PathBuf::from(file);
            if path.is_dir() {
                bail!(
                    "--arm {name}: {file} is a directory; give a bundle directory as a plain argument (capshim report {file})"
                );
            }
            runs.push(RunInput {
                round: i as u32 + 1,
                rows: read_bench_file(&path)?,
                path,
            });
        }
        arms.push(ArmInput {
            name: name.to_string(),
            role: match name {
                "stock" => Role::Stock,
                "host" => Role::Host,
                _ => Role::Other,
            },
            group: None,
            reference_for_all: false,
            runs,
            metal: Vec::new(),
            activation: None,
        });
    }
    if arms.is_empty() {
        usage!(
            "nothing to report: give --arm NAME=FILE for each arm, or bundle directories written by `capshim bench`"
        );
    }
    // Roles: an arm named by --stock / --host takes that role from every other arm; otherwise
    // bundles keep their recorded roles and --arm arms go by the names `stock` and `host`.
    if let (Some(stock), Some(host)) = (&args.stock, &args.host)
        && stock == host
    {
        usage!(
            "--stock and --host both name arm {stock:?}: one arm cannot be both references (its speedup and \
             percent of host would be against itself); name the stock arm with --stock and the bare-metal \
             arm with --host"
        );
    }
    for (flag, name, role) in [
        ("--stock", args.stock.as_deref(), Role::Stock),
        ("--host", args.host.as_deref(), Role::Host),
    ] {
        let Some(name) = name else { continue };
        if !arms.iter().any(|a| a.name == name) {
            let names: Vec<&str> = arms.iter().map(|a| a.name.as_str()).collect();
            usage!(
                "{flag} {name:?} names no arm; the arms are: {}",
                names.join(", ")
            );
        }
        for arm in &mut arms {
            if arm.name == name {
                arm.role = role;
                arm.reference_for_all = true;
            } else if arm.role == role {
                arm.role = Role::Other;
            }
        }
    }
    Ok(arms)
}

/// `capshim report` on a bundle written by `capshim verify`: checked, then its report (or
/// `summary.json` with `--json`) printed.
fn report_verify(args: &ReportArgs) -> anyhow::Result<ExitCode> {
    let [dir] = args.bundles.as_slice() else {
        usage!(
            "a bundle written by `capshim verify` is reported on its own: give one bundle per `capshim report`"
        );
    };
    if !args.arms.is_empty() || args.stock.is_some() || args.host.is_some() || args.csv || args.svg
    {
        usage!(
            "{} is a `capshim verify` bundle: only --json (its summary.json) or --markdown apply to it",
            dir.display()
        );
    }
    match verify::check::check(dir) {
        Ok((markdown, summary_json)) => {
            print!("{}", if args.json { summary_json } else { markdown });
            Ok(ExitCode::SUCCESS)
        }
        Err(e) if e.untrusted() => {
            eprintln!("capshim: error: {e}");
            Ok(ExitCode::from(EXIT_TAMPERED))
        }
        Err(e) => Err(e.into()),
    }
}

/// Runs `capshim report`.
pub fn execute(args: ReportArgs) -> anyhow::Result<ExitCode> {
    if args
        .bundles
        .iter()
        .any(|d| verify::check::is_verify_bundle(d))
    {
        return match report_verify(&args) {
            Err(e) if e.downcast_ref::<Usage>().is_some() => {
                eprintln!("capshim: error: {e}");
                Ok(ExitCode::from(EXIT_USAGE))
            }
            other => other,
        };
    }
    let arms = match arm_inputs(&args) {
        Ok(arms) => arms,
        Err(e) => {
            if let Some(usage) = e.downcast_ref::<Usage>() {
                eprintln!("capshim: error: {usage}");
                return Ok(ExitCode::from(EXIT_USAGE));
            }
            if let Some(
                tampered @ (BundleError::Tampered { .. }
                | BundleError::Unfinished { .. }
                | BundleError::ReportMismatch { .. }),
            ) = e.downcast_ref::<BundleError>()
            {
                eprintln!("capshim: error: {tampered}");
                return Ok(ExitCode::from(EXIT_TAMPERED));
            }
            return Err(e);
        }
    };
    let summary = analyze(&arms)?;
    let exporter: Box<dyn Exporter> = if args.json {
        Box::new(Json)
    } else if args.csv {
        Box::new(Csv)
    } else if args.svg {
        Box::new(Svg)
    } else {
        Box::new(Markdown)
    };
    print!("{}", exporter.render(&summary)?);
    Ok(ExitCode::SUCCESS)
}
