//! What a bench bundle's `environment.json` records: the machine it ran on
//! ([`crate::experiment::machine`]), the files it used with their checksums, every llama-bench
//! process it ran, and the manifest the derived files come from.

use serde::Serialize;

use super::plan::ArmPlan;
use crate::bundle::Manifest;
use crate::bundle::identity::FileId;
use crate::experiment::record::{Header, Process};

/// Where in a bench a process ran: its round.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Round {
    /// 1-based round.
    pub round: u32,
}

/// What happened in one llama-bench process, for `environment.json`.
pub type RunRecord = Process<Round>;

/// The whole of `environment.json`.
#[derive(Serialize)]
pub struct Environment<'a> {
    /// Layout, kind, capshim's version, times, the machine.
    #[serde(flatten)]
    pub header: Header,
    /// The llama.cpp build, from llama-bench's first result row.
    pub llama_cpp: LlamaBuild,
    /// `DYLD_INSERT_LIBRARIES` or `LD_PRELOAD`.
    pub injection_variable: &'static str,
    /// The files the run used.
    pub files: Files,
    /// The arms, as planned.
    pub arms: &'a [ArmPlan],
    /// llama-bench's arguments after the program name, the same for every run.
    pub llama_bench_args: Vec<String>,
    /// Rounds.
    pub rounds: u32,
    /// The pause between one process and the next, in seconds (`--cooldown`; 0 for none).
    pub cooldown_seconds: f64,
    /// Every llama-bench process, in the order run.
    pub runs: &'a [RunRecord],
    /// Which raw files belong to which arm and round: what the derived files come from.
    pub bundle: &'a Manifest,
}

/// The llama.cpp build llama-bench reported.
#[derive(Serialize)]
pub struct LlamaBuild {
    /// `build_number`.
    pub build_number: Option<i64>,
    /// `build_commit`.
    pub build_commit: Option<String>,
}

/// The files a run used.
#[derive(Serialize)]
pub struct Files {
    /// The GGUF model.
    pub model: FileId,
    /// The llama-bench executable.
    pub llama_bench: FileId,
    /// The shim library, when an arm used it.
    pub dylib: Option<FileId>,
    /// The host's llama-bench JSON, when one file was given alone (`--baseline FILE`).
    pub baseline: Option<FileId>,
    /// Every host process's llama-bench JSON, when several were given or a host bundle (`--baseline`
    /// repeated); in the order of `raw/host-1.json`, `raw/host-2.json`...
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub baselines: Vec<FileId>,
    /// The `SHA256SUMS` of each host bench bundle given as `--baseline`, checked before the first run.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub baseline_bundles: Vec<FileId>,
}
