//! What a bench run will do, checked before anything runs: the arms, the llama-bench
//! arguments, and which extra llama-bench options capshim refuses.

use std::path::PathBuf;

use crate::llama::TestKey;

/// Why the extra llama-bench arguments cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
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
    /// The host baseline has none of the tests the bench runs.
    #[error(
        "--baseline {file} has the tests {baseline}, but this bench runs {planned}: percent of host compares \
         the same tests, and none is in both; run the bench as the baseline was run (here {fix}, and \
         the same -d), or give a baseline of these tests"
    )]
    Baseline {
        /// The baseline file or bundle, as given.
        file: String,
        /// The baseline's tests.
        baseline: String,
        /// The bench's tests.
        planned: String,
        /// The `-p`/`-n` that would match.
        fix: String,
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
    /// `-t 0`: llama-bench passes zero threads to ggml, which aborts.
    #[error(
        "the llama-bench option {option} after `--` asks for zero threads: llama-bench passes the \
         number to ggml as it is (unlike llama.cpp's other tools, where 0 means every core), and \
         ggml aborts on it (GGML_ASSERT n_threads > 0), often printing nothing; give at least 1 \
         (e.g. `-- -t 8`), or leave -t out for llama-bench's default, this machine's cores"
    )]
    ZeroThreads {
        /// The option and its value as given.
        option: String,
    },
}

/// What llama-bench is asked for, as tests: `-p`, `-n`, `-pg` at every `-d` depth.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Planned {
    /// Every test, in llama-bench's order.
    pub tests: Vec<TestKey>,
}

/// A comma list of plain numbers; `None` for anything else (llama-bench's ranges such as
/// `128-512+128`, which capshim does not expand).
fn numbers(list: &str) -> Option<Vec<u64>> {
    list.split(',').map(|v| v.trim().parse().ok()).collect()
}

/// The tests llama-bench runs for `-p n_prompt -n n_gen` and the extra arguments (`-d`, `-pg`),
/// as llama-bench builds them: each depth, then each prompt length (ppP), generation length
/// (tgN) and `-pg` pair (ppP+tgN), zeros skipped. `None` when a value is not a plain list of
/// numbers, so the tests cannot be known before llama-bench runs.
pub fn planned_tests(n_prompt: &str, n_gen: &str, extra: &[String]) -> Option<Planned> {
    let mut depths = vec![0];
    let mut pairs = Vec::new();
    let mut args = extra.iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "-d" | "--n-depth" => depths = numbers(args.next()?)?,
            "-pg" => match numbers(args.next()?)?.as_slice() {
                [p, g] => pairs.push((*p, *g)),
                _ => return None,
            },
            _ => {}
        }
    }
    let (prompts, gens) = (numbers(n_prompt)?, numbers(n_gen)?);
    let mut tests = Vec::new();
    for &n_depth in &depths {
        let key = |n_prompt, n_gen| TestKey {
            n_prompt,
            n_gen,
            n_depth,
            quantity: Default::default(),
        };
        tests.extend(prompts.iter().filter(|&&p| p > 0).map(|&p| key(p, 0)));
        tests.extend(gens.iter().filter(|&&g| g > 0).map(|&g| key(0, g)));
        tests.extend(
            pairs
                .iter()
                .filter(|(p, g)| *p > 0 || *g > 0)
                .map(|&(p, g)| key(p, g)),
        );
    }
    Some(Planned { tests })
}

/// Checks a host baseline's tests against the bench's, before the first run: none in common
/// is an error (no percent of host at all); each planned test the baseline lacks is a warning.
///
/// # Errors
/// [`PlanError::Baseline`] naming both sides' tests and the `-p`/`-n` that would match.
pub fn check_baseline(
    file: &str,
    baseline: &[TestKey],
    planned: &Planned,
) -> Result<Vec<String>, PlanError> {
    let names = |keys: &[TestKey]| {
        let mut names: Vec<String> = Vec::new();
        for key in keys {
            if !names.contains(&key.name()) {
                names.push(key.name());
            }
        }
        names.join(", ")
    };
    if !planned.tests.iter().any(|t| baseline.contains(t)) {
        let list = |pick: fn(&TestKey) -> Option<u64>| {
            let mut values: Vec<String> = Vec::new();
            for v in baseline.iter().filter_map(pick) {
                if !values.contains(&v.to_string()) {
                    values.push(v.to_string());
                }
            }
            if values.is_empty() {
                "0".to_string()
            } else {
                values.join(",")
            }
        };
        return Err(PlanError::Baseline {
            file: file.to_string(),
            baseline: names(baseline),
            planned: names(&planned.tests),
            fix: format!(
                "-p {} -n {}",
                list(|k| (k.n_gen == 0 && k.n_depth == 0).then_some(k.n_prompt)),
                list(|k| (k.n_prompt == 0 && k.n_depth == 0).then_some(k.n_gen))
            ),
        });
    }
    Ok(planned
        .tests
        .iter()
        .filter(|t| !baseline.contains(t))
        .map(|t| {
            format!(
                "the baseline {file} has no {t}: its percent of host will come from the other \
                 host processes, or be `—`; {file} has {}",
                names(baseline)
            )
        })
        .collect())
}

/// llama-bench options capshim sets itself, or that make it print no results; refused after `--`.
pub const REFUSED_ARGS: [(&[&str], &str); 8] = [
    (
        &["-o", "--output", "-oe", "--output-err"],
        "capshim passes `-o json` itself and reads llama-bench's JSON",
    ),
    (&["-m", "--model"], "give the model with capshim's -m"),
    (&["-r", "--repetitions"], "use capshim's -r"),
    (&["-p", "--n-prompt"], "use capshim's -p"),
    (&["-n", "--n-gen"], "use capshim's -n"),
    (&["-d", "--n-depth"], "use capshim's -d"),
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
pub const SWEEP_OPTIONS: &[&[&str]] = &[
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

/// The sweep options whose integer values llama-bench also reads as ranges: `first-last`,
/// `first-last+step`, `first-last*mult` (its `--help`: "Ranges can be given as ...").
const RANGE_OPTIONS: &[&str] = &[
    "-t",
    "--threads",
    "-ngl",
    "--n-gpu-layers",
    "-b",
    "--batch-size",
    "-ub",
    "--ubatch-size",
    "-ncmoe",
    "--n-cpu-moe",
];

/// Whether an option's value is written as a range: a number, then `-` (a leading `-` is a
/// negative number, such as `-ngl -1`).
fn is_range(value: &str) -> bool {
    value
        .split_once('-')
        .is_some_and(|(first, _)| !first.is_empty() && first.bytes().all(|b| b.is_ascii_digit()))
}

/// Refuses a setting swept with a comma list, a range or by repeating its option.
fn check_sweeps(extra: &[String]) -> Result<(), PlanError> {
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
            return Err(PlanError::Sweep {
                option: shown,
                why: format!("{v:?} is a comma list"),
            });
        }
        if let Some(v) = value.filter(|v| RANGE_OPTIONS.contains(&flag) && is_range(v)) {
            return Err(PlanError::Sweep {
                option: shown,
                why: format!("{v:?} is a range, first-last[+step|*mult]"),
            });
        }
        if let Some((_, first)) = seen.iter().find(|(n, _)| n == names) {
            return Err(PlanError::Sweep {
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
pub fn check_extra_args(extra: &[String]) -> Result<(), PlanError> {
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
                return Err(PlanError::RefusedArg {
                    arg: arg.clone(),
                    why,
                });
            }
        }
    }
    check_sweeps(extra)?;
    for (i, arg) in extra.iter().enumerate() {
        let (flag, value) = match arg.split_once('=') {
            Some((f, v)) => (f, Some(v)),
            None => (arg.as_str(), extra.get(i + 1).map(String::as_str)),
        };
        if ["-t", "--threads"].contains(&flag) && value.is_some_and(|v| v.parse() == Ok(0u64)) {
            return Err(PlanError::ZeroThreads {
                option: if arg.contains('=') {
                    arg.clone()
                } else {
                    format!("{arg} {}", value.unwrap_or_default())
                },
            });
        }
    }
    Ok(())
}

/// One arm to run: the arm syntax `bench` shares with `verify`.
pub use crate::arms::Arm as ArmPlan;

/// llama-bench options that shape the tests measured; an arm's `bench-args` may not hold them
/// (after `--` they apply to every arm alike).
const TEST_SHAPING: [&str; 3] = ["-d", "--n-depth", "-pg"];

/// Checks every arm's `bench-args`: no option capshim refuses after `--`, none that shapes the
/// tests (`-d`, `-pg`), no sweep, and none that repeats an option given after `--` (`extra`).
///
/// # Errors
/// [`crate::arms::ArmError::Args`] naming the arm and the option.
pub fn check_arm_args(arms: &[ArmPlan], extra: &[String]) -> Result<(), crate::arms::ArmError> {
    for arm in arms {
        crate::arms::check_args(
            arm,
            "bench-args",
            &arm.args.bench,
            extra,
            SWEEP_OPTIONS,
            |args| {
                if let Some(flag) =
                    crate::profile::settings::options(args).find(|f| TEST_SHAPING.contains(f))
                {
                    return Err(format!(
                        "{flag} is refused: it changes the tests measured, which every arm \
                         shares; give it after `--`"
                    ));
                }
                check_extra_args(args).map_err(|e| match e {
                    PlanError::RefusedArg { arg, why } => format!("{arg:?} is refused: {why}"),
                    PlanError::Sweep { option, why } => format!(
                        "{option} sweeps a setting ({why}); give one value per arm, one arm \
                         per value"
                    ),
                    other => other.to_string(),
                })
            },
        )?;
    }
    Ok(())
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
    /// `-d`: context depths, as llama-bench takes them (`0,512`); llama-bench's default (0)
    /// when `None`.
    pub n_depth: Option<String>,
    /// Extra llama-bench arguments.
    pub extra: Vec<String>,
    /// The arms, stock first.
    pub arms: Vec<ArmPlan>,
    /// Rounds.
    pub rounds: u32,
    /// The pause between one process and the next (`--cooldown`).
    pub cooldown: std::time::Duration,
    /// The shim library, required when an arm has a profile.
    pub dylib: Option<PathBuf>,
    /// Measure an unlocked arm even when the shim did not activate.
    pub allow_inactive: bool,
    /// Record a failed run as failed and go on (`--keep-going`).
    pub keep_going: bool,
    /// The bare-metal host's processes: one llama-bench JSON file each (`--baseline` files,
    /// and the stock runs of host bench bundles), in the order given.
    pub baseline: Vec<PathBuf>,
    /// The `SHA256SUMS` of each host bench bundle given as `--baseline`.
    pub baseline_sums: Vec<PathBuf>,
    /// The bundle directory, or `None` for a new dated one.
    pub output: Option<PathBuf>,
}

impl Plan {
    /// Whether the baseline is one llama-bench file given alone, kept as `raw/host.json` and
    /// recorded as `files.baseline` (as before several host processes were accepted).
    pub fn single_baseline(&self) -> bool {
        self.baseline.len() == 1 && self.baseline_sums.is_empty()
    }

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
        ];
        if let Some(depth) = &self.n_depth {
            args.extend(["-d".to_string(), depth.clone()]);
        }
        args.extend(["-o".to_string(), "json".to_string()]);
        args.extend(self.extra.iter().cloned());
        args
    }

    /// llama-bench's arguments for `arm`: [`Plan::llama_args`], then the arm's `bench-args`.
    pub fn llama_args_for(&self, arm: &ArmPlan) -> Vec<String> {
        let mut args = self.llama_args();
        args.extend(arm.args.bench.iter().cloned());
        args
    }
}

#[cfg(test)]
mod tests;
