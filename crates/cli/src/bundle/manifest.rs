//! A bench bundle's table of contents, stored under the `bundle` key of `environment.json`
//! (and copied into `summary.json`): which files belong to which arm and round, so that
//! `capshim report` derives a bundle's files again from its raw files.

use serde::{Deserialize, Serialize};

/// Version of the manifest layout.
pub const FORMAT: u32 = 1;

/// Which raw files make up a bundle.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// Layout version ([`FORMAT`]).
    pub format: u32,
    /// The model file as capshim gave it to llama-bench (`-m`): the name shown for the arms
    /// capshim ran, whatever llama-bench wrote (it garbles non-ASCII names in its JSON).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Every arm, in the order they were given.
    pub arms: Vec<ManifestArm>,
    /// A `bench --command` bundle's workload: then each run's `json` is the command's stdout,
    /// and its value is read as [`super::workload`] says. Absent for llama-bench bundles.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload: Option<super::workload::Workload>,
}

/// One arm of a bundle.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ManifestArm {
    /// The arm's name.
    pub name: String,
    /// `stock`, `host` or `other`.
    pub role: String,
    /// The named profile it ran with (`stock` for none), or `null` for a baseline file.
    pub profile: Option<String>,
    /// Whether the shim was injected.
    pub shim: bool,
    /// The arm's own llama-bench arguments (its `bench-args`), when it has any: a setting that
    /// differs between arms because of them is asked for, not a mistake.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// Its runs.
    pub runs: Vec<ManifestRun>,
}

/// One llama-bench process.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ManifestRun {
    /// 1-based round.
    pub round: u32,
    /// llama-bench's JSON output, relative to the bundle (a `bench --command` run's stdout).
    pub json: String,
    /// llama-bench's stderr, relative to the bundle, when it was captured.
    pub stderr: Option<String>,
    /// The shim's status file, relative to the bundle, for arms with the shim.
    pub status: Option<String>,
    /// Why the run failed, when `--keep-going` recorded it as failed (schema 6): its raw
    /// files hold no result and are not read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed: Option<String>,
}

/// Only the manifest of an `environment.json`, and its processes in the order run.
#[derive(Deserialize)]
pub(crate) struct EnvironmentFile {
    pub bundle: Option<Manifest>,
    /// A `bench --command` bundle's top-level copy of `bundle.workload`, for readers of the
    /// file; the manifest's is the one read, and this one must agree with it.
    #[serde(default)]
    pub workload: Option<serde_json::Value>,
    #[serde(default)]
    pub runs: Vec<RecordedRun>,
}

/// What the derivation reads of one process in `environment.json`'s `runs`.
#[derive(Deserialize)]
pub(crate) struct RecordedRun {
    pub arm: String,
    /// Absent for processes that are not a bench round (verify's steps).
    pub round: Option<u32>,
    pub seconds: Option<f64>,
}
