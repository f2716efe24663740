//! `capshim explain`: what a profile changes, computed with the shim's own policy functions
//! (`capshim_profile::policy` through `Answers::with_profile`) and the consumer rule tables.

mod render;

use capshim_profile::consumers::{LLAMA_CPP_SOURCE, LlamaCpp, MLX_SOURCE, Mlx};
use capshim_profile::device::Answers;
use capshim_profile::named;
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

/// Decisions of every known consumer.
#[derive(Debug, Clone, Serialize)]
pub struct Consumers {
    /// llama.cpp's Metal backend.
    #[serde(rename = "llama.cpp")]
    pub llama_cpp: Sourced<LlamaCpp>,
    /// MLX.
    pub mlx: Sourced<Mlx>,
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
    fn decide(answers: &Answers, paravirtual: bool) -> Consumers {
        Consumers {
            llama_cpp: Sourced {
                decision: LlamaCpp::decide(answers, false),
                source: LLAMA_CPP_SOURCE,
            },
            mlx: Sourced {
                decision: Mlx::decide(answers, paravirtual),
                source: MLX_SOURCE,
            },
        }
    }
}

/// Applies `profile` to the stock answers (`stock = None`: the built-in paravirtual ones).
pub fn explain(profile: &Resolved, stock: Option<(&str, &DeviceReport)>) -> Explanation {
    let (starting_from, before, paravirtual) = match stock {
        Some((label, report)) => (
            match &report.name {
                Some(name) => format!("{name:?} as probed in {label}"),
                None => format!("the device probed in {label}"),
            },
            report.answers(),
            report.is_paravirtual(),
        ),
        None => (STOCK_SOURCE.to_string(), Answers::paravirtual_stock(), true),
    };
    let after = match &profile.profile {
        Some(p) => before.with_profile(p),
        None => before.clone(),
    };
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
        consumers: Consumers::decide(&after, paravirtual),
        consumers_before: Consumers::decide(&before, paravirtual),
        before,
        after,
    }
}

#[cfg(test)]
mod tests;
