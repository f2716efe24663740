//! What `analyze` reads: the arms, each with its llama-bench outputs and what the run
//! reported.

use std::path::PathBuf;

use serde::Serialize;

use crate::llama::{Activation, BenchRow, MetalReport};

/// What an arm is compared as.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The reference for speedups (a guest without the shim).
    Stock,
    /// The bare-metal reference for percent of host.
    Host,
    /// Any other arm: a profile, a second stock arm for an A/A check...
    Other,
}

/// One llama-bench output file of an arm.
#[derive(Clone, Debug)]
pub struct RunInput {
    /// 1-based round (for a bundle) or file position (for `report --arm`).
    pub round: u32,
    /// Where it came from, for error messages.
    pub path: PathBuf,
    /// Its results.
    pub rows: Vec<BenchRow>,
}

/// One arm's inputs.
#[derive(Clone, Debug)]
pub struct ArmInput {
    /// The arm's name: a column of the table.
    pub name: String,
    /// Its role.
    pub role: Role,
    /// Arms of one bundle share a group; an arm is compared only with the stock and host arms
    /// of its own group, or with a reference that applies to all (an arm without a group, or
    /// one with `reference_for_all`).
    pub group: Option<String>,
    /// Named explicitly with `report --stock` / `--host`: the reference of every arm, whatever
    /// its group.
    pub reference_for_all: bool,
    /// Its llama-bench outputs.
    pub runs: Vec<RunInput>,
    /// Its own llama-bench arguments (a bench arm's `bench-args`): settings that differ from
    /// another arm's because of them were asked for.
    pub args: Vec<String>,
    /// What ggml-metal reported in each run, when stderr was captured (bench bundles).
    pub metal: Vec<(u32, MetalReport)>,
    /// What the shim reported, when the run was launched by `capshim bench`.
    pub activation: Option<Activation>,
    /// Whether its rounds ran in `capshim bench`'s random order (an arm of a bench bundle):
    /// then its interval against its own bundle's stock arm holds by the randomization;
    /// otherwise (files given with `report --arm`) only under the assumption that each round's
    /// ratio scatters symmetrically and independently around the true one, and a warning
    /// says so.
    pub randomized: bool,
}

/// Which derivation [`analyze_with`](super::analyze_with) follows: the one of the bundle
/// schema whose derived files are being made or checked. Each schema's derived files come out
/// byte for byte as that schema's capshim wrote them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Derivation {
    /// Schema 5: each verdict read from its own 95% interval, the rounds hint at the
    /// large-sample width, the ratio of medians as the per-arm table's speedup.
    #[default]
    Schema5,
    /// Schema 6: family-wise verdicts (each read from its interval at `1 − 0.05/m`), the
    /// rounds hint for an 80% chance of the noise band, one speedup per arm (the paired
    /// estimate), the rounds' ratios, carry-over and unequal-duration checks.
    Schema6,
}

impl Derivation {
    /// The `schema_version` a summary of this derivation carries.
    pub fn schema_version(self) -> u32 {
        match self {
            Derivation::Schema5 => 5,
            Derivation::Schema6 => 6,
        }
    }
}

/// One llama-bench process, as bench ran it: `environment.json`'s `runs`, in the order run.
#[derive(Clone, Debug, PartialEq)]
pub struct ProcessRun {
    /// The arm's name (as in [`ArmInput::name`]).
    pub arm: String,
    /// 1-based round.
    pub round: u32,
    /// Its wall time, in seconds (model load included), when recorded.
    pub seconds: Option<f64>,
}

/// How [`analyze_with`](super::analyze_with) derives.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// The derivation (schema) to follow.
    pub derivation: Derivation,
    /// Per bench (bundle), its processes in the order run, when known (`environment.json`'s
    /// `runs`, arm names as the arms are named here, e.g. `<bundle>/<arm>` for several
    /// bundles; none for files given to `report --arm`): the carry-over estimate needs the
    /// order, the unequal-durations check the wall times. Used by [`Derivation::Schema6`] only.
    pub sequences: Vec<Vec<ProcessRun>>,
}
