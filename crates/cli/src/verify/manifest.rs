//! What a verify bundle holds, stored under the `verify` key of its `environment.json`: the
//! settings, the arms and, per arm, the raw files of each step that ran. `summary.json` and
//! `report.md` are derived from it and the raw files alone, so `capshim report` re-derives
//! them to check them.

use std::path::{Component, Path};

use serde::{Deserialize, Serialize};

use super::thresholds::Thresholds;

/// Version of the verify bundle layout (`schema_version` of `environment.json` and
/// `summary.json`): 6 (this round's one new layout number, shared with bench) since a step
/// `--keep-going` recorded as failed is in the manifest; 1 before.
pub const SCHEMA_VERSION: u32 = 6;

/// The `kind` of a verify bundle's `environment.json` and `summary.json`.
pub const KIND: &str = "verify";

/// One step of an arm.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Step {
    /// llama-perplexity: the reference saves its logits, every other arm is compared with them.
    Perplexity,
    /// llama-completion: greedy decoding.
    Greedy,
    /// test-backend-ops: every op on the Metal device against the CPU.
    Kernels,
}

impl Step {
    /// The tool that runs the step.
    pub fn tool(self) -> &'static str {
        match self {
            Step::Perplexity => "llama-perplexity",
            Step::Greedy => "llama-completion",
            Step::Kernels => "test-backend-ops",
        }
    }

    /// The step's name in file names and messages.
    pub fn name(self) -> &'static str {
        match self {
            Step::Perplexity => "perplexity",
            Step::Greedy => "greedy",
            Step::Kernels => "kernels",
        }
    }
}

/// The raw files of one step, relative to the bundle.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepFiles {
    /// Which step.
    pub step: Step,
    /// Its stdout.
    pub stdout: String,
    /// Its stderr.
    pub stderr: String,
    /// The shim's status file, for arms with the shim.
    pub status: Option<String>,
    /// Why the step failed, when `--keep-going` recorded it as failed (schema 6): its raw
    /// files hold no result and are not read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed: Option<String>,
}

/// One arm of a verify bundle.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ManifestArm {
    /// Its label.
    pub name: String,
    /// The profile it ran with.
    pub profile: String,
    /// Whether the shim was injected.
    pub shim: bool,
    /// Its own environment variables.
    pub env: Vec<(String, String)>,
    /// Its own arguments of llama-perplexity and llama-completion (`common-args`), when it
    /// has any.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// The steps that ran, in order.
    pub steps: Vec<StepFiles>,
}

/// The greedy decoding settings.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GreedySettings {
    /// The prompt.
    pub prompt: String,
    /// Tokens to generate (`-n`).
    pub n_predict: u32,
    /// The seed (`-s`).
    pub seed: u32,
}

/// The kernel test settings.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelSettings {
    /// The device tested against the CPU (`-b`), e.g. `MTL0`.
    pub device: String,
    /// The ops tested (`-o`), all when `None`.
    pub ops: Option<String>,
}

/// The saved base a verify run used or wrote.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BaseRecord {
    /// Where it is (never copied into the bundle).
    pub path: String,
    /// Its size, in bytes.
    pub bytes: u64,
    /// Its SHA-256.
    pub sha256: String,
    /// Whether this run wrote it (`--save-base`) rather than read it (`--base`).
    pub saved: bool,
    /// Its description, copied into the bundle (`--base`), relative to the bundle.
    pub sidecar: Option<String>,
    /// What is known about it that weakens a comparison (another model, no description...).
    pub warnings: Vec<String>,
}

/// Everything a verify bundle's derived files come from, besides the raw files.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// The model's file name.
    pub model: String,
    /// The model's size, in bytes.
    pub model_bytes: u64,
    /// The reference: an arm's label, or `base` for a saved base.
    pub reference: String,
    /// The limits of `equivalent`.
    pub thresholds: Thresholds,
    /// Whether arms whose shim did not activate were compared anyway.
    pub allow_inactive: bool,
    /// Tokens per chunk.
    pub ctx: u64,
    /// Chunks scored at most.
    pub chunks: Option<u64>,
    /// The text: `built-in` or the file's name.
    pub text: String,
    /// Greedy decoding.
    pub greedy: GreedySettings,
    /// Kernel tests, when run.
    pub kernels: Option<KernelSettings>,
    /// llama.cpp arguments given after `--`.
    pub extra_args: Vec<String>,
    /// The base used or written.
    pub base: Option<BaseRecord>,
    /// The arms, in the order they ran (the reference first).
    pub arms: Vec<ManifestArm>,
}

impl Manifest {
    /// Every bundle-relative path the manifest names.
    pub fn paths(&self) -> impl Iterator<Item = &str> {
        self.arms
            .iter()
            .flat_map(|a| &a.steps)
            .flat_map(|s| [Some(&s.stdout), Some(&s.stderr), s.status.as_ref()])
            .chain(self.base.iter().map(|b| b.sidecar.as_ref()))
            .flatten()
            .map(String::as_str)
    }

    /// The first path that leads outside the bundle, if any.
    pub fn path_outside(&self) -> Option<&str> {
        self.paths().find(|rel| {
            rel.is_empty()
                || !Path::new(rel)
                    .components()
                    .all(|c| matches!(c, Component::Normal(_)))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_must_stay_inside_the_bundle() {
        let step = |stdout: &str| StepFiles {
            step: Step::Perplexity,
            stdout: stdout.into(),
            stderr: "raw/stock-perplexity.stderr".into(),
            status: None,
            failed: None,
        };
        let mut m = Manifest {
            model: "m.gguf".into(),
            model_bytes: 1,
            reference: "stock".into(),
            thresholds: Thresholds::default(),
            allow_inactive: false,
            ctx: 512,
            chunks: Some(4),
            text: "built-in".into(),
            greedy: GreedySettings {
                prompt: "p".into(),
                n_predict: 1,
                seed: 1,
            },
            kernels: None,
            extra_args: vec![],
            base: None,
            arms: vec![ManifestArm {
                name: "stock".into(),
                profile: "stock".into(),
                shim: false,
                env: vec![],
                args: vec![],
                steps: vec![step("raw/stock-perplexity.stdout")],
            }],
        };
        assert_eq!(m.path_outside(), None);
        for bad in ["../x", "/etc/passwd", "raw/../../x", ""] {
            m.arms[0].steps[0] = step(bad);
            assert_eq!(m.path_outside(), Some(bad));
        }
        assert_eq!(Step::Greedy.tool(), "llama-completion");
        assert_eq!(
            serde_json::to_string(&Step::Kernels).unwrap(),
            "\"kernels\""
        );
    }
}
