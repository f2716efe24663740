//! `capshim verify`: does a profile keep llama.cpp's results right? Every arm against the
//! reference, into an evidence bundle with a verdict per arm.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::bail;
use clap::Args;

use super::UsageError;
use super::experiment::{ArmArgs, ExperimentArgs, existing_file, sealed_failure};
use crate::llama::tools;
use crate::verify::base;
use crate::verify::manifest::{GreedySettings, KernelSettings};
use crate::verify::plan::{self, Plan, Reference, Text, Tools};
use crate::verify::runner;
use crate::verify::thresholds::{self, Thresholds};

/// Exit code when at least one arm's results differ from the reference's.
pub const EXIT_DIFFERENT: u8 = 5;

const AFTER_HELP: &str = "\
Arms: `stock` (no shim) always runs; add arms with --arm / --profile as in `capshim bench`
(default: native where the host chip is known, else apple9-64k), e.g. `--profile again=stock`
for an A/A check, or `--arm apple9-nobf16=apple9-64k,GGML_METAL_BF16_DISABLE=1`. An arm's
`common-args=` item (and a profile file's [args] common) goes to its llama-perplexity and
llama-completion after the arguments after `--`, e.g. `--arm fa=native,common-args=-fa on`
(words split as a shell splits them, no expansions; docs/verify.md); options refused after `--`,
given twice, or repeating one after `--` are refused (exit 2); `bench-args=` is llama-bench's
and not given here. A CPU reference: `--arm cpu=stock,LLAMA_ARG_N_GPU_LAYERS=0 --reference cpu`
(the common tools read LLAMA_ARG_N_GPU_LAYERS as -ngl). Each arm runs, in order:
  1. llama-perplexity on the text (-c tokens per chunk, --chunks chunks): the reference arm saves
     its logits (the base), every other arm is compared with them: mean and 99th-percentile KL
     divergence, top-1 agreement (how often both rank the same next token first), perplexity;
  2. llama-completion: greedy decoding (temperature 0) of --prompt for -n tokens; the first
     character where an arm's text differs from the reference's is reported;
  3. test-backend-ops -b MTL0: every op on the Metal device against the CPU; a build without
     Metal has no MTL0 and its kernel tests are `not run`.
The reference is the stock arm, --reference LABEL, or a base saved elsewhere (--base FILE, e.g.
from `capshim verify --save-base FILE` on the bare-metal host): then every arm, stock included,
is compared with it. --save-base FILE keeps the reference's base (about 2 bytes x vocabulary x
scored tokens, never copied into a bundle) and writes FILE.capshim.json beside it (the model's
SHA-256, the greedy text, the kernel results); without arms it runs the reference alone.

Verdicts: `equivalent` when every metric is within its threshold (--max-kld 0.0001,
--max-kld-p99 0.001, --min-top1 0.99, --max-ppl-change 0.01, and no kernel test failing that
passes in the reference), else `different` naming each threshold crossed; `not run` when an
arm's shim did not activate (unless --allow-inactive). docs/verify.md gives the defaults'
sources: llama.cpp's own quantization comparisons.

Tools are found in --llama-dir DIR, else on PATH, else in the cache scripts/llama/build.sh
builds. Output: the report on stdout (Markdown, or summary.json with --json), progress on stderr,
and an evidence bundle that is never overwritten: raw/<arm>-<step>.stdout, .stderr and
.status.jsonl, environment.json (with the manifest), and derived from them summary.json and
report.md, then SHA256SUMS (and, with --sign KEYFILE, SHA256SUMS.sig: docs/bundles.md says what
each proves). `capshim report BUNDLE` checks and shows it again. A signal (Ctrl-C, SIGTERM,
SIGHUP) stops the running tool; the bundle is left unsealed with an INCOMPLETE note.

Exit codes:
  0    every compared arm is equivalent (or only the reference ran, with --save-base)
  5    at least one arm is different (also when another arm was not run, which the report names)
  1    error (a tool missing, failing or printing no result, the text too short, the reference's
       shim inactive, bundle exists, a --sign key that cannot sign here, the model, text or base
       changed during the steps, signing failed: the bundle is then sealed, unsigned), or an arm
       was not run (its shim did not activate; with --keep-going, a step of it failed, or the
       reference failed and nothing was compared)
  2    bad command line (also: bad or duplicate arm labels, --reference naming no arm, -ngl after
       `--` with an arm that sets LLAMA_ARG_N_GPU_LAYERS)
  129  stopped by SIGHUP, 130 by SIGINT, 143 by SIGTERM (the bundle is unfinished)

Examples:
  capshim verify -m model.gguf
  capshim verify -m model.gguf --profile again=stock                    # A/A: equivalent
  capshim verify -m model.gguf --save-base host.kld                     # on the bare-metal host
  capshim verify -m model.gguf --base host.kld --profile apple9-64k     # in the guest
  capshim verify -m model.gguf --arm nobf16=apple9-64k,GGML_METAL_BF16_DISABLE=1 -- -ngl 99
";

/// Arguments of `capshim verify`.
#[derive(Debug, Args)]
#[command(after_help = AFTER_HELP)]
pub struct VerifyArgs {
    /// The GGUF model.
    #[arg(short = 'm', long = "model", value_name = "MODEL.gguf")]
    pub model: PathBuf,

    #[command(flatten)]
    pub arms: ArmArgs,

    /// The arm the others are compared with [default: stock].
    #[arg(long = "reference", value_name = "LABEL", conflicts_with = "base")]
    pub reference: Option<String>,

    /// Compare every arm (stock included) with this saved base instead of a reference arm.
    #[arg(long = "base", value_name = "FILE", conflicts_with = "save_base")]
    pub base: Option<PathBuf>,

    /// Keep the reference's base in FILE (must not exist), with FILE.capshim.json beside it.
    #[arg(long = "save-base", value_name = "FILE")]
    pub save_base: Option<PathBuf>,

    /// The text to score [default: a text that ships with capshim, 3,499 LLaMA tokens].
    #[arg(long = "text", value_name = "FILE")]
    pub text: Option<PathBuf>,

    /// Tokens per chunk (llama-perplexity -c); the text needs at least twice as many [default:
    /// 512; with --base, the base's].
    #[arg(short = 'c', long = "ctx-size", value_name = "N")]
    pub ctx: Option<u64>,

    /// Chunks of the text scored at most (llama-perplexity --chunks) [default: 4; with --base,
    /// the base's].
    #[arg(long = "chunks", value_name = "N")]
    pub chunks: Option<u64>,

    /// The greedy decoding prompt [default: a sentence of the built-in text's opening].
    #[arg(long = "prompt", value_name = "TEXT")]
    pub prompt: Option<String>,

    /// Tokens of greedy decoding (llama-completion -n).
    #[arg(short = 'n', long = "n-predict", default_value_t = plan::DEFAULT_N_PREDICT, value_name = "N")]
    pub n_predict: u32,

    /// The seed passed to llama-completion.
    #[arg(long = "seed", default_value_t = plan::DEFAULT_SEED, value_name = "N")]
    pub seed: u32,

    /// Skip test-backend-ops.
    #[arg(long = "no-kernel-tests")]
    pub no_kernel_tests: bool,

    /// The device test-backend-ops tests against the CPU.
    #[arg(long = "kernel-device", default_value = plan::DEFAULT_KERNEL_DEVICE, value_name = "NAME")]
    pub kernel_device: String,

    /// Only these ops (test-backend-ops -o), e.g. MUL_MAT,FLASH_ATTN_EXT.
    #[arg(long = "kernel-ops", value_name = "LIST")]
    pub kernel_ops: Option<String>,

    /// Largest mean KL divergence of an equivalent arm, nats per token.
    #[arg(long = "max-kld", default_value_t = thresholds::MAX_KLD_MEAN, value_name = "NATS")]
    pub max_kld: f64,

    /// Largest 99th-percentile KL divergence of an equivalent arm, nats.
    #[arg(long = "max-kld-p99", default_value_t = thresholds::MAX_KLD_P99, value_name = "NATS")]
    pub max_kld_p99: f64,

    /// Smallest top-1 agreement of an equivalent arm, a fraction (0.99 is 99%).
    #[arg(long = "min-top1", default_value_t = thresholds::MIN_TOP1, value_name = "FRACTION")]
    pub min_top1: f64,

    /// Largest relative perplexity change of an equivalent arm, either way (0.01 is 1%).
    #[arg(long = "max-ppl-change", default_value_t = thresholds::MAX_PPL_CHANGE, value_name = "FRACTION")]
    pub max_ppl_change: f64,

    /// Count a greedy text that differs from the reference's as a difference.
    #[arg(long = "greedy-must-match")]
    pub greedy_must_match: bool,

    /// The folder of llama.cpp's tools (llama-perplexity, llama-completion, test-backend-ops).
    #[arg(long = "llama-dir", value_name = "DIR")]
    pub llama_dir: Option<PathBuf>,

    /// Bundle directory to create (must not exist) [default: ./capshim-verify-YYYYMMDD-HHMMSS].
    #[arg(short = 'o', long = "output", value_name = "BUNDLE_DIR")]
    pub output: Option<PathBuf>,

    #[command(flatten)]
    pub experiment: ExperimentArgs,

    /// Extra arguments for llama-perplexity and llama-completion, after `--` (e.g. `-- -ngl 99`).
    #[arg(last = true, value_name = "LLAMA_ARGS")]
    pub extra: Vec<String>,
}

fn usage(message: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(UsageError(message.into()))
}

/// Builds and checks the plan from the command line.
fn plan(args: VerifyArgs) -> anyhow::Result<(Plan, ExperimentArgs)> {
    plan::check_extra_args(&args.extra).map_err(usage)?;
    args.experiment.check()?;
    let t = Thresholds {
        max_kld_mean: args.max_kld,
        max_kld_p99: args.max_kld_p99,
        min_top1: args.min_top1,
        max_ppl_change: args.max_ppl_change,
        greedy_must_match: args.greedy_must_match,
    };
    thresholds::check(&t).map_err(usage)?;
    if args.ctx.is_some_and(|c| c < 8) || args.chunks == Some(0) || args.n_predict == 0 {
        return Err(usage(
            "-c must be at least 8, and --chunks and -n at least 1",
        ));
    }
    let model = existing_file(&args.model, "model", "give an existing GGUF file with -m")?;
    let arms = args.arms.resolve(
        args.save_base.is_none(),
        &[("base", "it names a saved base as the reference")],
    )?;
    plan::check_gpu_layers(&args.extra, &arms).map_err(usage)?;
    plan::check_arm_args(&arms, &args.extra).map_err(|e| usage(e.to_string()))?;
    let reference = match (&args.base, &args.reference) {
        (Some(path), _) => {
            let path = existing_file(
                path,
                "base",
                "give the file `capshim verify --save-base` wrote",
            )?;
            let header = base::read_header(&path)?;
            if args.ctx.is_some_and(|c| c != u64::from(header.ctx)) || args.chunks.is_some() {
                return Err(usage(format!(
                    "the base {} fixes the text, -c ({}) and the chunks ({}): drop -c and --chunks",
                    path.display(),
                    header.ctx,
                    header.chunks
                )));
            }
            let sidecar = base::read_sidecar(&path)?;
            Reference::Base {
                path,
                header,
                sidecar,
            }
        }
        (None, Some(label)) => match arms.iter().position(|a| &a.name == label) {
            Some(i) => Reference::Arm(i),
            None => {
                let names: Vec<&str> = arms.iter().map(|a| a.name.as_str()).collect();
                return Err(usage(format!(
                    "--reference {label:?} names no arm; the arms are: {}",
                    names.join(", ")
                )));
            }
        },
        (None, None) => Reference::Arm(0),
    };
    if let Some(path) = &args.save_base {
        // Its folder must exist before llama-perplexity is asked to write there, and it must
        // not be the bundle's: the base (tens of MB) is kept beside bundles, never in one.
        let absolute = std::path::absolute(path).unwrap_or_else(|_| path.clone());
        if let Some(out) = &args.output {
            let out = std::path::absolute(out).unwrap_or_else(|_| out.clone());
            if absolute.starts_with(&out) {
                return Err(usage(format!(
                    "--save-base {} is inside the bundle directory {}: a base is kept beside \
                     bundles, not sealed into one; give a path outside it",
                    path.display(),
                    out.display()
                )));
            }
        }
        let folder = absolute.parent().unwrap_or(Path::new("/"));
        if !folder.is_dir() {
            return Err(usage(format!(
                "--save-base {}: the folder {} does not exist; create it first or give another \
                 path",
                path.display(),
                folder.display()
            )));
        }
        for file in [path.clone(), base::sidecar_path(path)] {
            if file.exists() {
                bail!(
                    "{} already exists: a base is never overwritten; give --save-base a new file",
                    file.display()
                );
            }
        }
    }
    let text = match &args.text {
        Some(path) => Text::File(existing_file(
            path,
            "text",
            "give a plain-text file with --text",
        )?),
        None => Text::Builtin,
    };
    let llama_dir = args.llama_dir.as_deref();
    let tools = Tools {
        perplexity: tools::find("llama-perplexity", llama_dir)?,
        completion: tools::find("llama-completion", llama_dir)?,
        backend_ops: if args.no_kernel_tests {
            None
        } else {
            Some(tools::find("test-backend-ops", llama_dir).map_err(|e| {
                anyhow::anyhow!("{e}; or skip the kernel tests with --no-kernel-tests")
            })?)
        },
    };
    let dylib = args
        .arms
        .shim_library(arms.iter().any(|a| a.profile.is_some()))?
        .map(|(path, _)| path);
    let save_base = args.save_base.map(|p| std::path::absolute(&p).unwrap_or(p));
    if args.text.is_some() && args.base.is_some() {
        return Err(usage(
            "--text has no effect with --base: the base holds the tokens of the text it was saved from",
        ));
    }
    let (ctx, chunks) = match &reference {
        Reference::Base { header, .. } => (u64::from(header.ctx), u64::from(header.chunks)),
        Reference::Arm(_) => (
            args.ctx.unwrap_or(plan::DEFAULT_CTX),
            args.chunks.unwrap_or(plan::DEFAULT_CHUNKS),
        ),
    };
    Ok((
        Plan {
            model,
            tools,
            arms,
            reference,
            save_base,
            text,
            ctx,
            chunks,
            greedy: GreedySettings {
                prompt: args
                    .prompt
                    .unwrap_or_else(|| plan::DEFAULT_PROMPT.to_string()),
                n_predict: args.n_predict,
                seed: args.seed,
            },
            kernels: (!args.no_kernel_tests).then_some(KernelSettings {
                device: args.kernel_device,
                ops: args.kernel_ops,
            }),
            extra: args.extra,
            dylib,
            allow_inactive: args.arms.shim.allow_inactive,
            keep_going: args.experiment.keep_going,
            thresholds: t,
            output: args.output,
        },
        args.experiment,
    ))
}

/// Runs `capshim verify`.
pub fn execute(args: VerifyArgs) -> anyhow::Result<ExitCode> {
    let (plan, experiment) = plan(args)?;
    experiment.finish(runner::run(&plan), |outcome| {
        if outcome.reference_failed {
            return sealed_failure(format!(
                "the reference arm {} failed: nothing was compared (see the report)",
                outcome.summary.reference
            ));
        }
        ExitCode::from(match outcome.summary.result {
            "different" => EXIT_DIFFERENT,
            "incomplete" => {
                let not_run: Vec<&str> = outcome
                    .summary
                    .arms
                    .iter()
                    .filter(|a| a.verdict == crate::verify::summary::Verdict::NotRun)
                    .map(|a| a.name.as_str())
                    .collect();
                crate::term::line(format!(
                    "capshim: error: not every arm was compared ({} not run: see the report); \
                     pass --allow-inactive to compare an arm whose shim did not activate",
                    not_run.join(", ")
                ));
                1
            }
            _ => 0,
        })
    })
}
