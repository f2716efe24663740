//! `capshim explain`: what a profile changes, computed with the shim's own policy functions
//! (`capshim_profile::policy` through `Answers::with_profile`) and the consumer rule tables.

mod render;

use capshim_profile::consumers::{
    Decisions, Inputs, LLAMA_CPP_SOURCE, LlamaCpp, METAL_JL_SOURCE, METAL_SOURCE, MLX_SOURCE,
    Metal, MetalJl, Mlx, PARAVIRTUAL_DEVICE_NAME, PYTORCH_SOURCE, Pytorch, TINYGRAD_SOURCE,
    Tinygrad, WHISPER_SOURCE, Whisper,
};
use capshim_profile::device::Answers;
use capshim_profile::named::{self, Chip};
use serde::Serialize;

use crate::device::DeviceReport;
use crate::profile::Resolved;

pub use render::render;

/// Where the built-in stock answers come from.
pub const STOCK_SOURCE: &str = "the stock Apple Paravirtual device as observed in a macOS 26.5.2 guest on an M1 Ultra host (macOS 26.6.1), 16 GiB guest";

/// Everything `explain` shows; serialised as `explain --json`.
///
/// Keys may be added, none renamed: `profile`, `before`, `after`, `consumers` are the
/// documented contract.
#[derive(Debug, Clone, Serialize)]
pub struct Explanation {
    /// The profile applied.
    pub profile: ProfileView,
    /// Where the `before` answers come from (built-in stock answers, or a probe file).
    pub starting_from: String,
    /// The device's answers without the shim.
    pub before: Answers,
    /// The answers with the shim and this profile.
    pub after: Answers,
    /// The device's name the consumers saw (the built-in stock device's, or the probe
    /// file's).
    pub device_name: Option<String>,
    /// The device's architecture name, when the probe file has one.
    pub architecture: Option<String>,
    /// What the consumers' decisions mean on the host chip, one line each (also under each
    /// consumer's `warnings`).
    pub warnings: Vec<String>,
    /// What known consumers decide from `after`.
    pub consumers: Consumers,
    /// What known consumers decide from `before`, for comparison.
    pub consumers_before: Consumers,
}

/// A profile's values, `null` for `stock`.
#[derive(Debug, Clone, Serialize)]
pub struct ProfileView {
    /// `stock`, `native`, `apple9-64k`, `custom` or a profile file's name.
    pub name: String,
    /// Highest Apple family answered true, or `null` for stock.
    pub apple_family_max: Option<i64>,
    /// Threadgroup memory floor in bytes, or `null` for stock.
    pub max_threadgroup_memory: Option<u64>,
    /// Working set floor in bytes, or `null` when unchanged.
    pub recommended_working_set_size: Option<u64>,
    /// Where the values come from.
    pub provenance: String,
    /// The host chip, when known (`--cpu-brand`, or this machine's brand), and how the
    /// profile differs from its bare-metal answers; `null` when not known.
    pub host_chip: Option<HostChip>,
}

/// The host chip a profile is explained for.
#[derive(Debug, Clone, Serialize)]
pub struct HostChip {
    /// The chip generation, e.g. `M1`.
    pub name: &'static str,
    /// The CPU brand it was matched from.
    pub brand: String,
    /// Where the brand came from: `--cpu-brand` or `sysctl machdep.cpu.brand_string`.
    pub matched_from: &'static str,
    /// Its bare-metal highest Apple family.
    pub apple_family: i64,
    /// Its bare-metal threadgroup memory, in bytes.
    pub threadgroup_memory: u64,
    /// How the profile differs from those answers, in words (empty for its `native` profile
    /// and for `stock`).
    pub differences: Vec<String>,
}

/// Decisions of every known consumer, each with the source its rules were read from.
///
/// JSON keys (added, never renamed): `llama.cpp` (with `tuning_family`, integer or null),
/// `mlx`, `metal` (with `bf16_emulation`), `whisper.cpp` (with `metal`), `pytorch` (with
/// `mps_device`), `metal.jl`, `tinygrad`.
#[derive(Debug, Clone, Serialize)]
pub struct Consumers {
    /// llama.cpp's Metal backend.
    #[serde(rename = "llama.cpp")]
    pub llama_cpp: Sourced<LlamaCpp>,
    /// MLX.
    pub mlx: Sourced<Mlx>,
    /// Metal itself.
    pub metal: Sourced<Metal>,
    /// whisper.cpp.
    #[serde(rename = "whisper.cpp")]
    pub whisper: Sourced<Whisper>,
    /// PyTorch's MPS backend.
    pub pytorch: Sourced<Pytorch>,
    /// Metal.jl.
    #[serde(rename = "metal.jl")]
    pub metal_jl: Sourced<MetalJl>,
    /// tinygrad.
    pub tinygrad: Sourced<Tinygrad>,
}

/// A decision with the consumer source its rule was read from.
#[derive(Debug, Clone, Serialize)]
pub struct Sourced<T> {
    /// The decision.
    #[serde(flatten)]
    pub decision: T,
    /// Which consumer source (and version) the rule table was read from.
    pub source: &'static str,
}

impl Consumers {
    /// Every consumer's decisions from `inputs`.
    pub fn decide(inputs: &Inputs<'_>) -> Consumers {
        let d = Decisions::decide(inputs);
        fn sourced<T>(decision: T, source: &'static str) -> Sourced<T> {
            Sourced { decision, source }
        }
        Consumers {
            llama_cpp: sourced(d.llama_cpp, LLAMA_CPP_SOURCE),
            mlx: sourced(d.mlx, MLX_SOURCE),
            metal: sourced(d.metal, METAL_SOURCE),
            whisper: sourced(d.whisper, WHISPER_SOURCE),
            pytorch: sourced(d.pytorch, PYTORCH_SOURCE),
            metal_jl: sourced(d.metal_jl, METAL_JL_SOURCE),
            tinygrad: sourced(d.tinygrad, TINYGRAD_SOURCE),
        }
    }

    /// Every warning of every consumer, prefixed with its name.
    pub fn warnings(&self) -> Vec<String> {
        let named = |name: &str, warnings: &[String]| -> Vec<String> {
            warnings.iter().map(|w| format!("{name}: {w}")).collect()
        };
        [
            named("llama.cpp", &self.llama_cpp.decision.warnings),
            named("Metal", &self.metal.decision.warnings),
            named("MLX", &self.mlx.decision.warnings),
        ]
        .concat()
    }
}

/// Applies `profile` to the stock answers (`stock = None`: the built-in paravirtual ones).
pub fn explain(profile: &Resolved, stock: Option<(&str, &DeviceReport)>) -> Explanation {
    let (starting_from, before, name, architecture) = match stock {
        Some((label, report)) => (
            match &report.name {
                Some(name) => format!("{name:?} as probed in {label}"),
                None => format!("the device probed in {label}"),
            },
            report.answers(),
            report.name.clone(),
            report.architecture.clone(),
        ),
        None => (
            STOCK_SOURCE.to_string(),
            Answers::paravirtual_stock(),
            Some(PARAVIRTUAL_DEVICE_NAME.to_string()),
            None,
        ),
    };
    let after = match &profile.profile {
        Some(p) => before.with_profile(p),
        None => before.clone(),
    };
    let chip: Option<&'static Chip> = profile.chip.as_ref().map(|m| m.chip);
    let inputs = |answers| Inputs {
        answers,
        profile: None,
        device_name: name.as_deref(),
        architecture: architecture.as_deref(),
        host_chip: chip,
    };
    let consumers = Consumers::decide(&Inputs {
        profile: profile.profile.as_ref(),
        ..inputs(&after)
    });
    let consumers_before = Consumers::decide(&inputs(&before));
    Explanation {
        profile: ProfileView {
            name: profile.name.clone(),
            apple_family_max: profile.profile.map(|p| p.apple_family_max),
            max_threadgroup_memory: profile.profile.map(|p| p.max_threadgroup_memory),
            recommended_working_set_size: profile
                .profile
                .and_then(|p| p.recommended_working_set_size),
            provenance: profile.provenance.clone(),
            host_chip: profile.chip.as_ref().map(|m| HostChip {
                name: m.chip.name,
                brand: m.brand.clone(),
                matched_from: m.matched_from,
                apple_family: m.chip.apple_family,
                threadgroup_memory: m.chip.threadgroup_memory,
                differences: profile
                    .profile
                    .map(|p| named::mismatches(&p, m.chip))
                    .unwrap_or_default()
                    .iter()
                    .map(ToString::to_string)
                    .collect(),
            }),
        },
        starting_from,
        device_name: name,
        architecture,
        warnings: consumers.warnings(),
        consumers,
        consumers_before,
        before,
        after,
    }
}

#[cfg(test)]
mod tests;
