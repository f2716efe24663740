//! What a bench run will do, checked before anything runs: the arms, the llama-bench
//! arguments, and which extra llama-bench options capshim refuses.

use std::path::PathBuf;

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
    check_sweeps(extra)
}

/// One arm to run: the arm syntax `bench` shares with `verify`.
pub use crate::arms::Arm as ArmPlan;

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
}
