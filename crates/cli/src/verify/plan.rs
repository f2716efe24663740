//! What a verify run will do, checked before anything runs: the tools, the arms and the
//! reference, the text, each tool's arguments, and which extra llama.cpp options capshim
//! refuses.

use std::path::{Path, PathBuf};

use super::base::{Header, Sidecar};
use super::manifest::{GreedySettings, KernelSettings};
use super::thresholds::Thresholds;
use crate::arms::Arm;

/// The text that ships with capshim, written for it: about 2,800 words of plain English
/// prose (3,499 tokens for LLaMA's 32,000-token vocabulary), more than four contexts of 512.
pub const BUILTIN_TEXT: &str = include_str!("../../assets/verify-text.txt");

/// Tokens per chunk by default: llama-perplexity's own default context.
pub const DEFAULT_CTX: u64 = 512;

/// Chunks scored by default: 4 × 255 = 1,020 tokens compared, a base of about 2 bytes ×
/// vocabulary × 1,020 (65 MB for a 32,000-token vocabulary).
pub const DEFAULT_CHUNKS: u64 = 4;

/// Tokens of greedy decoding by default.
pub const DEFAULT_N_PREDICT: u32 = 128;

/// The seed passed to llama-completion (greedy decoding draws no random numbers; the seed
/// is fixed so that the command is the same every time).
pub const DEFAULT_SEED: u32 = 42;

/// The greedy decoding prompt by default.
pub const DEFAULT_PROMPT: &str = "The weather station stands on a low hill about two kilometres from the harbour, and every \
     morning the observer";

/// The device test-backend-ops tests by default: ggml-metal's first device (llama.cpp names
/// Metal devices `MTL0`, `MTL1`...; `-b` matches a device name exactly).
pub const DEFAULT_KERNEL_DEVICE: &str = "MTL0";

/// Options capshim sets itself or that change what the tools print; refused after `--`.
pub const REFUSED_ARGS: [(&[&str], &str); 11] = [
    (&["-m", "--model"], "give the model with capshim's -m"),
    (
        &[
            "-mu",
            "--model-url",
            "-hf",
            "-hfr",
            "--hf-repo",
            "-hff",
            "--hf-file",
            "-dr",
            "--docker-repo",
        ],
        "download the model first and give it with -m, so its checksum is recorded",
    ),
    (
        &["-f", "--file", "-bf", "--binary-file"],
        "give the text with --text",
    ),
    (&["-c", "--ctx-size"], "use capshim's -c"),
    (
        &[
            "--chunks",
            "--kl-divergence",
            "--kl-divergence-base",
            "--save-all-logits",
        ],
        "capshim runs the comparison itself (--base, --save-base, --chunks)",
    ),
    (
        &[
            "-n",
            "--predict",
            "--n-predict",
            "-p",
            "--prompt",
            "-s",
            "--seed",
        ],
        "use capshim's -n, --prompt and --seed",
    ),
    (
        &[
            "--temp",
            "--temperature",
            "--samplers",
            "--sampling-seq",
            "--top-k",
            "--top-p",
        ],
        "greedy decoding is capshim's (temperature 0)",
    ),
    (
        &[
            "-cnv",
            "--conversation",
            "-no-cnv",
            "--no-conversation",
            "-i",
            "--interactive",
            "-if",
            "--interactive-first",
        ],
        "llama-completion runs without conversation mode, on the prompt alone",
    ),
    (
        &[
            "--log-disable",
            "--log-file",
            "--log-jsonl",
            "--display-prompt",
            "--no-display-prompt",
            "-v",
            "--verbose",
            "--log-verbosity",
            "-lv",
        ],
        "capshim reads the tools' own output",
    ),
    (
        &[
            "--hellaswag",
            "--winogrande",
            "--multiple-choice",
            "--ppl-stride",
            "--ppl-output-type",
        ],
        "llama-perplexity then computes something else",
    ),
    (
        &[
            "-h",
            "--help",
            "--version",
            "-hf",
            "-hfr",
            "--hf-repo",
            "-hff",
            "--hf-file",
        ],
        "the tools then print no results (download a model first and give it with -m)",
    ),
];

/// Checks the extra llama.cpp arguments given after `--`.
///
/// # Errors
/// A message naming the first refused option and why.
pub fn check_extra_args(extra: &[String]) -> Result<(), String> {
    for arg in extra {
        let flag = arg.split_once('=').map_or(arg.as_str(), |(f, _)| f);
        if let Some((_, why)) = REFUSED_ARGS.iter().find(|(flags, _)| flags.contains(&flag)) {
            return Err(format!(
                "the llama.cpp option {arg:?} after `--` is refused: {why}; remove it from the \
                 extra arguments"
            ));
        }
    }
    Ok(())
}

/// llama.cpp's options for the layers offloaded to the GPU; its common tools read the same
/// setting from [`GPU_LAYERS_VAR`], and an option given on the command line overrides it.
pub const GPU_LAYERS_ARGS: [&str; 3] = ["-ngl", "--n-gpu-layers", "--gpu-layers"];

/// The variable llama.cpp's common tools read for the layers offloaded to the GPU.
pub const GPU_LAYERS_VAR: &str = "LLAMA_ARG_N_GPU_LAYERS";

/// Checks that no arm sets [`GPU_LAYERS_VAR`] while the extra arguments after `--` give one of
/// [`GPU_LAYERS_ARGS`]: the argument would override the arm's variable in every arm, so an arm
/// meant to run on the CPU (`cpu=stock,LLAMA_ARG_N_GPU_LAYERS=0`) would not.
///
/// # Errors
/// A message naming the option and the arm.
pub fn check_gpu_layers(extra: &[String], arms: &[Arm]) -> Result<(), String> {
    let Some(option) = extra.iter().find(|arg| {
        let flag = arg.split_once('=').map_or(arg.as_str(), |(f, _)| f);
        GPU_LAYERS_ARGS.contains(&flag)
    }) else {
        return Ok(());
    };
    match arms
        .iter()
        .find(|arm| arm.env.iter().any(|(name, _)| name == GPU_LAYERS_VAR))
    {
        Some(arm) => Err(format!(
            "the llama.cpp option {option:?} after `--` overrides {GPU_LAYERS_VAR} that arm {} \
             sets (llama.cpp reads the command line over the variable, in every arm): drop \
             {option:?} and set {GPU_LAYERS_VAR} in each arm instead, e.g. --arm \
             gpu=stock,{GPU_LAYERS_VAR}=99",
            arm.name
        )),
        None => Ok(()),
    }
}

/// Names of one llama.cpp common option, for finding an arm's `common-args` option repeated
/// after `--` under its other name.
const ALIASES: &[&[&str]] = &[
    &["-t", "--threads"],
    &["-tb", "--threads-batch"],
    &["-ngl", "--gpu-layers", "--n-gpu-layers"],
    &["-b", "--batch-size"],
    &["-ub", "--ubatch-size"],
    &["-fa", "--flash-attn"],
    &["-ctk", "--cache-type-k"],
    &["-ctv", "--cache-type-v"],
    &["-sm", "--split-mode"],
    &["-mg", "--main-gpu"],
    &["-ot", "--override-tensor"],
    &["-nkvo", "--no-kv-offload"],
    &["-dev", "--device"],
];

/// Checks every arm's `common-args` (for llama-perplexity and llama-completion): none of the
/// options refused after `--`, none twice, none that repeats an option given after `--`
/// (`extra`).
///
/// # Errors
/// [`crate::arms::ArmError::Args`] naming the arm and the option.
pub fn check_arm_args(arms: &[Arm], extra: &[String]) -> Result<(), crate::arms::ArmError> {
    for arm in arms {
        crate::arms::check_args(
            arm,
            "common-args",
            &arm.args.common,
            extra,
            ALIASES,
            |args| {
                check_extra_args(args).map_err(|e| {
                    e.replace(" after `--`", "").replace(
                        "remove it from the extra arguments",
                        "remove it from the arm",
                    )
                })
            },
        )?;
    }
    Ok(())
}

/// Where the text comes from.
#[derive(Clone, Debug)]
pub enum Text {
    /// [`BUILTIN_TEXT`].
    Builtin,
    /// A file given with `--text`.
    File(PathBuf),
}

/// The reference every arm is compared with.
#[derive(Clone, Debug)]
#[allow(clippy::large_enum_variant)] // one per run
pub enum Reference {
    /// An arm (index into [`Plan::arms`]): it saves the base.
    Arm(usize),
    /// A saved base (`--base`).
    Base {
        /// The file.
        path: PathBuf,
        /// Its header.
        header: Header,
        /// Its description, when beside it.
        sidecar: Option<(PathBuf, Sidecar)>,
    },
}

/// llama.cpp's tools.
#[derive(Clone, Debug)]
pub struct Tools {
    /// llama-perplexity.
    pub perplexity: PathBuf,
    /// llama-completion.
    pub completion: PathBuf,
    /// test-backend-ops, unless the kernel tests are off.
    pub backend_ops: Option<PathBuf>,
}

/// Everything a verify run needs, checked.
#[derive(Clone, Debug)]
pub struct Plan {
    /// The GGUF model.
    pub model: PathBuf,
    /// The tools.
    pub tools: Tools,
    /// The arms, stock first.
    pub arms: Vec<Arm>,
    /// The reference.
    pub reference: Reference,
    /// Where to save the reference's base (`--save-base`).
    pub save_base: Option<PathBuf>,
    /// The text.
    pub text: Text,
    /// Tokens per chunk.
    pub ctx: u64,
    /// Chunks at most.
    pub chunks: u64,
    /// Greedy decoding.
    pub greedy: GreedySettings,
    /// Kernel tests, unless off.
    pub kernels: Option<KernelSettings>,
    /// llama.cpp arguments for llama-perplexity and llama-completion.
    pub extra: Vec<String>,
    /// The shim library, when an arm has a profile.
    pub dylib: Option<PathBuf>,
    /// Compare arms whose shim did not activate.
    pub allow_inactive: bool,
    /// Record a failed step as failed and go on (`--keep-going`).
    pub keep_going: bool,
    /// The limits of `equivalent`.
    pub thresholds: Thresholds,
    /// The bundle directory, or `None` for a new dated one.
    pub output: Option<PathBuf>,
}

impl Plan {
    /// llama-perplexity's arguments: the reference saves its logits to `base` from `text`;
    /// every other arm is compared with them.
    pub fn perplexity_args(&self, saves: bool, text: &Path, base: &Path) -> Vec<String> {
        let mut args = vec!["-m".to_string(), self.model.display().to_string()];
        if saves {
            args.extend([
                "-f".to_string(),
                text.display().to_string(),
                "--chunks".to_string(),
                self.chunks.to_string(),
            ]);
        }
        args.extend([
            "-c".to_string(),
            self.ctx.to_string(),
            "--kl-divergence-base".to_string(),
            base.display().to_string(),
        ]);
        if !saves {
            args.push("--kl-divergence".to_string());
        }
        args.extend(self.extra.iter().cloned());
        args
    }

    /// llama-completion's arguments: greedy decoding of the prompt, the prompt not echoed.
    pub fn greedy_args(&self) -> Vec<String> {
        let g = &self.greedy;
        let mut args = vec![
            "-m".to_string(),
            self.model.display().to_string(),
            "-p".to_string(),
            g.prompt.clone(),
            "-n".to_string(),
            g.n_predict.to_string(),
            "--temp".to_string(),
            "0".to_string(),
            "-s".to_string(),
            g.seed.to_string(),
            "-no-cnv".to_string(),
            "--no-display-prompt".to_string(),
        ];
        args.extend(self.extra.iter().cloned());
        args
    }

    /// test-backend-ops' arguments: every op (or `--kernel-ops`) on the device against the CPU.
    pub fn kernel_args(&self, kernels: &KernelSettings) -> Vec<String> {
        let mut args = vec!["test".to_string(), "-b".to_string(), kernels.device.clone()];
        if let Some(ops) = &kernels.ops {
            args.extend(["-o".to_string(), ops.clone()]);
        }
        args
    }

    /// The label of the reference arm, or `base`.
    pub fn reference_name(&self) -> String {
        match &self.reference {
            Reference::Arm(i) => self.arms[*i].name.clone(),
            Reference::Base { .. } => "base".to_string(),
        }
    }

    /// The arms in the order they run: the reference arm first.
    pub fn order(&self) -> Vec<usize> {
        let first = match self.reference {
            Reference::Arm(i) => Some(i),
            Reference::Base { .. } => None,
        };
        first
            .into_iter()
            .chain((0..self.arms.len()).filter(|&i| Some(i) != first))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_arms_common_args_are_checked_like_the_shared_ones_and_against_them() {
        let v = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let arm = |common: &[&str]| {
            let mut a = Arm::stock();
            a.name = "fa".into();
            a.args.common = v(common);
            vec![Arm::stock(), a]
        };
        check_arm_args(&arm(&["-fa", "on", "-ub", "256"]), &v(&["-t", "2"])).unwrap();
        for (common, extra, says) in [
            (
                &["-c", "64"][..],
                &[][..],
                "\"-c\" is refused: use capshim's -c",
            ),
            (&["--temp", "1"], &[], "\"--temp\" is refused"),
            (
                &["--flash-attn", "on"],
                &["-fa", "off"],
                "option --flash-attn repeats -fa",
            ),
            (&["-t", "1", "-t", "2"], &[], "give -t twice"),
        ] {
            let e = check_arm_args(&arm(common), &v(extra))
                .unwrap_err()
                .to_string();
            assert!(
                e.contains(says) && e.starts_with("arm \"fa\": "),
                "{common:?}: {e}"
            );
            assert!(e.contains("common-args"), "{e}");
        }
    }

    #[test]
    fn options_capshim_sets_are_refused() {
        for bad in [
            "-m",
            "--ctx-size=256",
            "--kl-divergence",
            "-n",
            "--temp",
            "-cnv",
            "--log-disable",
            "-hf",
        ] {
            let e = check_extra_args(&["-t".into(), "2".into(), bad.into()]).unwrap_err();
            assert!(e.contains("after `--` is refused"), "{bad}: {e}");
        }
        check_extra_args(&[
            "-t".into(),
            "4".into(),
            "-ngl".into(),
            "99".into(),
            "-fa".into(),
            "on".into(),
        ])
        .unwrap();
    }

    #[test]
    fn gpu_layers_after_the_dashes_are_refused_only_with_an_arm_setting_the_variable() {
        let extra = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let mut cpu = Arm::stock();
        cpu.name = "cpu".to_string();
        cpu.env = vec![(GPU_LAYERS_VAR.to_string(), "0".to_string())];
        let plain = [Arm::stock()];
        let with_cpu = [Arm::stock(), cpu];
        assert!(check_gpu_layers(&extra(&["-ngl", "99"]), &plain).is_ok());
        assert!(check_gpu_layers(&extra(&["-t", "2"]), &with_cpu).is_ok());
        for flag in [
            &["-ngl", "99"][..],
            &["--n-gpu-layers=99"],
            &["--gpu-layers", "1"],
        ] {
            let e = check_gpu_layers(&extra(flag), &with_cpu).unwrap_err();
            assert!(e.contains(flag[0]) && e.contains("arm cpu sets"), "{e}");
        }
    }

    #[test]
    fn the_builtin_text_is_prose_long_enough() {
        let words = BUILTIN_TEXT.split_whitespace().count();
        // LLaMA's tokenizer gives 3,499 tokens (measured with llama-perplexity here); a model
        // with a larger vocabulary uses fewer, rarely under one per word.
        assert!(
            words as u64 >= DEFAULT_CTX * DEFAULT_CHUNKS,
            "{words} words"
        );
        assert!(BUILTIN_TEXT.is_ascii());
    }
}
