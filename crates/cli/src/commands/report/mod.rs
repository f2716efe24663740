//! `capshim report`: llama-bench JSON files, or evidence bundles, to the comparison table.
//!
//! - [`open`]: checking a bundle (checksums, signature, derived files) before it is used.
//! - [`partial`]: `--partial`, the completed rounds of an unfinished bench bundle.
//! - [`matrix`]: `--matrix` and `--llama-json`, many bundles from many machines.

pub mod baseline;
mod help;
pub mod matrix;
pub mod open;
pub mod partial;

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::bail;
use clap::Args;
use sha2::{Digest, Sha256};

use self::open::{Opened, Signers, open};
use super::{UsageError, out};
use crate::analysis::input::ProcessRun;
use crate::analysis::{ArmInput, Derivation, Options, Role, RunInput, analyze, analyze_with};
use crate::bundle::schema::{Kind, as_written, unverified_mark};
use crate::bundle::{self, BundleError};
use crate::export::rounds_svg::RoundsSvg;
use crate::export::{Exporter, csv::Csv, json::Json, markdown::Markdown, svg::Svg};
use crate::llama::read_bench_file;

/// Exit code for a bundle that is not trustworthy: changed, unfinished, badly signed, or of a
/// layout this capshim does not derive again.
pub const EXIT_TAMPERED: u8 = 3;

/// Exit code for a report that was shown but is not of a complete, verified bundle
/// (`--as-written`).
pub const EXIT_UNVERIFIED: u8 = 4;

macro_rules! usage {
    ($($arg:tt)*) => {
        return Err(UsageError(format!($($arg)*)).into())
    };
}

/// Arguments of `capshim report`.
#[derive(Debug, Args)]
#[command(after_help = help::after_help())]
pub struct ReportArgs {
    /// Evidence bundle directories written by `capshim bench`, `capshim verify`, `capshim selftest`
    /// or `capshim tune`.
    #[arg(value_name = "BUNDLE_DIR")]
    pub bundles: Vec<PathBuf>,

    /// An arm: its name and its llama-bench JSON/JSONL files (regular files, or a shell's
    /// <(...); each once). Repeat for each arm.
    #[arg(long = "arm", value_name = "NAME=FILE[,FILE...]")]
    pub arms: Vec<String>,

    /// The arm speedups are computed against [default: stock].
    #[arg(long = "stock", value_name = "NAME")]
    pub stock: Option<String>,

    /// The bare-metal arm for percent of host [default: host].
    #[arg(long = "host", value_name = "NAME")]
    pub host: Option<String>,

    #[command(flatten)]
    pub baseline: baseline::BaselineArgs,
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

    /// Print the rounds' SVG (a bundle's rounds.svg): each round's ratio in time order, with
    /// the estimate and its interval as a band, a panel per test and arm. Bench bundles of
    /// layout 6 only.
    #[arg(long = "rounds-svg", group = "format")]
    pub rounds_svg: bool,

    /// Check each bundle's signature (SHA256SUMS.sig) with OpenSSH's ssh-keygen -Y verify
    /// against this allowed-signers file (lines `IDENTITY KEYTYPE KEY`, as git's
    /// gpg.ssh.allowedSignersFile); a missing or bad signature is exit code 3.
    #[arg(long, value_name = "FILE", requires = "identity")]
    pub allowed_signers: Option<PathBuf>,

    /// The identity (principal) in --allowed-signers that must have signed, e.g. an e-mail.
    #[arg(long, value_name = "ID", requires = "allowed_signers")]
    pub identity: Option<String>,

    /// Show a bundle of a layout this capshim does not derive again (unknown kind or
    /// schema_version) as written, its checksums checked and its derived files NOT: the first
    /// stdout line says UNVERIFIED, exit code 4.
    #[arg(long)]
    pub as_written: bool,

    /// Show an unfinished bench bundle (an INCOMPLETE note, no SHA256SUMS): the table of its
    /// completed rounds, those in which every arm gave a result. The first stdout line says
    /// PARTIAL; exit code 4. A bench stops for reasons that are not in its figures, so the
    /// intervals hold for the rounds that ran; nothing was sealed or derived again.
    #[arg(long, conflicts_with = "as_written")]
    pub partial: bool,
    /// Bundles from many machines in one table: a row per machine (chip, OS, guest or host,
    /// hw.model) and model (SHA-256), a column per arm and test; each bundle checked as above
    /// and compared only within itself. Markdown, or --csv (long form) or --svg (a heatmap).
    #[arg(long)]
    pub matrix: bool,

    /// Print the bench bundles' raw llama-bench results as one JSON array, `build_commit` set
    /// to each result's arm (stock, native ...), for llama.cpp's compare-llama-bench.py
    /// (`-i FILE -b stock -c native`).
    #[arg(long, conflicts_with_all = ["format", "matrix"])]
    pub llama_json: bool,
}

/// A file's device and inode: the same file however it is named (a link, `./`, /dev/fd/N).
fn file_key(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

/// The --arm arguments, parsed: names and files, each file given once per arm.
fn parse_arms(args: &ReportArgs) -> anyhow::Result<Vec<(String, Vec<PathBuf>)>> {
    let mut arms = Vec::new();
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
        let mut paths: Vec<PathBuf> = Vec::new();
        // Each file's identity once, in a map: one look-up per file, not a scan of the arm's
        // earlier files (3,000 files took seconds).
        let mut seen: HashMap<(u64, u64), usize> = HashMap::new();
        for file in files.split(',') {
            let path = PathBuf::from(file);
            let earlier = file_key(&path).and_then(|key| match seen.entry(key) {
                Entry::Occupied(e) => Some(*e.get()),
                Entry::Vacant(e) => {
                    e.insert(paths.len());
                    None
                }
            });
            if let Some(first) = earlier.map(|i| &paths[i]) {
                usage!(
                    "--arm {name}: {file} is given twice (also as {}): each file is one llama-bench \
                     process, and pooling it twice would count its samples twice; give each file once",
                    first.display()
                );
            }
            paths.push(path);
        }
        arms.push((name.to_string(), paths));
    }
    Ok(arms)
}

/// The bundles, each given once.
fn check_bundle_args(args: &ReportArgs) -> anyhow::Result<()> {
    for (i, dir) in args.bundles.iter().enumerate() {
        if !dir.is_dir() {
            bail!(
                "{} is not a directory: give llama-bench files with --arm NAME=FILE, and bundle directories as arguments",
                dir.display()
            );
        }
        let key = file_key(dir);
        if let Some(first) = args.bundles[..i].iter().find(|d| file_key(d) == key) {
            usage!(
                "the bundle {} is given twice (also as {}): its arms would be pooled with themselves; \
                 give each bundle once",
                dir.display(),
                first.display()
            );
        }
    }
    Ok(())
}

fn role_of(name: &str) -> Role {
    match name {
        "stock" => Role::Stock,
        "host" => Role::Host,
        _ => Role::Other,
    }
}

/// The arms of the bundles and of the --arm files, and per bundle its processes in the order
/// run (arm names as the arms are named).
fn arm_inputs(
    args: &ReportArgs,
    bundles: &[(PathBuf, bundle::Manifest)],
    files: Vec<(String, Vec<PathBuf>)>,
) -> anyhow::Result<(Vec<ArmInput>, Vec<Vec<ProcessRun>>)> {
    let mut arms = Vec::new();
    let mut sequences = Vec::new();
    let prefixed = bundles.len() > 1;
    for (i, (dir, manifest)) in bundles.iter().enumerate() {
        let prefix = prefixed.then(|| {
            let name = dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| format!("bundle{}", i + 1));
            if bundles[..i]
                .iter()
                .any(|(d, _)| d.file_name() == dir.file_name())
            {
                format!("{name}#{}", i + 1)
            } else {
                name
            }
        });
        arms.extend(bundle::load_arms(dir, manifest, prefix.as_deref())?);
        sequences.push(bundle::load::read_runs(dir, prefix.as_deref())?);
    }
    for (name, paths) in files {
        // One name, one arm: a second --arm of the name would be refused by the analysis after
        // every file was read (exit 1); it is the command line's mistake (exit 2, as in bench).
        if arms.iter().any(|a: &ArmInput| a.name == name) {
            usage!(
                "the arm name {name:?} is given twice (by two --arm, or by an --arm and a \
                 bundle's arm): give each arm once, with all its files (--arm {name}=A.json,B.json)"
            );
        }
        let mut runs: Vec<RunInput> = Vec::new();
        // The content of each file read, by digest: a copy of a file (cp, or <(cat FILE)) is
        // the same llama-bench process under another name, and pooling it would count its
        // samples twice. The digest is of what was parsed, so a <(...) pipe is read once.
        let mut seen: HashMap<[u8; 32], PathBuf> = HashMap::new();
        for (i, path) in paths.into_iter().enumerate() {
            if path.is_dir() {
                bail!(
                    "--arm {name}: {} is a directory; give a bundle directory as a plain argument (capshim report {})",
                    path.display(),
                    path.display()
                );
            }
            let rows = read_bench_file(&path)?;
            let digest: [u8; 32] = Sha256::digest(format!("{rows:?}")).into();
            if let Some(first) = seen.get(&digest) {
                usage!(
                    "--arm {name}: {} holds the same results as {} (a copy of it): each file is \
                     one llama-bench process, and pooling it twice would count its samples \
                     twice; give each file once",
                    path.display(),
                    first.display()
                );
            }
            seen.insert(digest, path.clone());
            runs.push(RunInput {
                round: i as u32 + 1,
                rows,
                path,
            });
        }
        arms.push(ArmInput {
            role: role_of(&name),
            name,
            group: None,
            reference_for_all: false,
            runs,
            args: Vec::new(),
            metal: Vec::new(),
            activation: None,
            randomized: false,
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
    Ok((arms, sequences))
}

/// Prints a bundle that is reported on its own: a verify bundle, or one of another layout.
fn report_alone(args: &ReportArgs, dir: &Path, opened: Opened) -> anyhow::Result<ExitCode> {
    let what = opened.what();
    if args.bundles.len() > 1
        || !args.arms.is_empty()
        || args.stock.is_some()
        || args.host.is_some()
        || !args.baseline.files.is_empty()
    {
        usage!(
            "{} is {what}: it is reported on its own, without other bundles, --arm, --stock, --host or --baseline",
            dir.display()
        );
    }
    let text = match opened {
        Opened::Verify {
            markdown,
            summary_json,
        }
        | Opened::Tune {
            markdown,
            summary_json,
        } => {
            if args.csv || args.svg || args.rounds_svg {
                usage!(
                    "{} is {what}: only --json (its summary.json) or --markdown apply to it",
                    dir.display()
                );
            }
            if args.json { summary_json } else { markdown }
        }
        Opened::Selftest {
            markdown,
            checks_json,
        } => {
            if args.csv || args.svg || args.rounds_svg {
                usage!(
                    "{} is a `capshim selftest` bundle: only --json (its checks.json) or --markdown apply to it",
                    dir.display()
                );
            }
            if args.json { checks_json } else { markdown }
        }
        Opened::AsWritten { header, why } => {
            let file = match (&header.kind, args.json, args.csv, args.svg) {
                (Kind::Selftest, true, _, _) => "checks.json",
                (_, true, _, _) => "summary.json",
                (Kind::Bench, _, true, _) => "results.csv",
                (Kind::Bench, _, _, true) => "chart.svg",
                (Kind::Bench, _, _, _) if args.rounds_svg => "rounds.svg",
                (_, _, false, false) if !args.rounds_svg => "report.md",
                _ => usage!(
                    "{} is a {} bundle: only --json (its summary.json) or --markdown apply to it",
                    dir.display(),
                    header.kind.name()
                ),
            };
            let text = as_written(dir, file)?;
            let mark = unverified_mark(dir, file, &why);
            crate::term::warning(&mark);
            out(&format!("{mark}\n{text}"))?;
            return Ok(ExitCode::from(EXIT_UNVERIFIED));
        }
        Opened::Bench(..) => unreachable!("handled above"),
    };
    out(&text)?;
    Ok(ExitCode::SUCCESS)
}

/// The format asked for.
fn exporter(args: &ReportArgs) -> Box<dyn Exporter> {
    if args.json {
        Box::new(Json)
    } else if args.csv {
        Box::new(Csv)
    } else if args.svg {
        Box::new(Svg)
    } else if args.rounds_svg {
        Box::new(RoundsSvg)
    } else {
        Box::new(Markdown)
    }
}

fn report(args: &ReportArgs) -> anyhow::Result<ExitCode> {
    let files = parse_arms(args)?;
    check_bundle_args(args)?;
    if args.partial {
        let Some(dir) = args.bundles.first() else {
            usage!("--partial shows an unfinished bench bundle: give its directory");
        };
        return partial::report_partial(args, dir, exporter(args).as_ref());
    }
    let signers = match (&args.allowed_signers, &args.identity) {
        (Some(file), Some(identity)) => Some(Signers { file, identity }),
        _ => None,
    };
    if signers.is_some() && args.bundles.is_empty() {
        usage!(
            "--allowed-signers checks the signatures of bundles, and no bundle is given; llama-bench \
             files given with --arm carry no signature"
        );
    }
    if args.matrix || args.llama_json {
        return matrix::report(args, signers.as_ref());
    }
    let mut bundles = Vec::new();
    let mut layouts = Vec::new();
    for dir in &args.bundles {
        match open(dir, signers.as_ref(), args.as_written)? {
            Opened::Bench(manifest, schema) => {
                bundles.push((dir.clone(), manifest));
                layouts.push(schema);
            }
            other => return report_alone(args, dir, other),
        }
    }
    let files_empty = files.is_empty();
    let (mut arms, sequences) = arm_inputs(args, &bundles, files)?;
    baseline::add(&args.baseline, &mut arms)?;
    // Bundles of layout 6 alone are shown with schema 6's statistics; a layout 5 bundle, or
    // llama-bench files given with --arm, as schema 5 derives them.
    let schema6 = !layouts.is_empty() && layouts.iter().all(|l| *l >= 6) && files_empty;
    let mut summary = if schema6 {
        analyze_with(
            &arms,
            &Options {
                derivation: Derivation::Schema6,
                sequences,
            },
        )?
    } else {
        if args.rounds_svg {
            usage!(
                "--rounds-svg draws the rounds of bench bundles of layout 6; give only such bundles \
                 (llama-bench files given with --arm, and layout 5 bundles, have no rounds.svg)"
            );
        }
        analyze(&arms)?
    };
    // One bundle alone is shown as its own layout derives it (its summary.json's number).
    if layouts.len() == 1 && files_empty && args.baseline.files.is_empty() {
        summary.schema_version = layouts[0];
    }
    // As the bundle's own derivation says it: its runs --keep-going recorded as failed.
    for (dir, manifest) in &bundles {
        for warning in crate::bench::derive::failed_runs(manifest) {
            summary.warnings.push(if bundles.len() > 1 {
                format!("{}: {warning}", dir.display())
            } else {
                warning
            });
        }
    }
    out(&exporter(args).render(&summary)?)?;
    Ok(ExitCode::SUCCESS)
}

/// Runs `capshim report`.
pub fn execute(args: ReportArgs) -> anyhow::Result<ExitCode> {
    match report(&args) {
        Err(e) => match e.downcast_ref::<BundleError>() {
            Some(untrusted) if untrusted.untrusted() => {
                crate::term::error(crate::format::chain(untrusted));
                Ok(ExitCode::from(EXIT_TAMPERED))
            }
            _ => Err(e),
        },
        ok => ok,
    }
}
