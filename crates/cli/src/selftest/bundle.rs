//! A selftest evidence bundle (`capshim selftest -o DIR`), kind `selftest`:
//!
//! - `raw/`: what the processes left, as they left it: the probe's status file, stdout and
//!   stderr ([`PROBE_STATUS`], [`PROBE_STDOUT`], [`PROBE_STDERR`]) and the kernel process's
//!   ([`KERNELS_STATUS`], [`KERNELS_JSON`], its stdout, and [`KERNELS_STDERR`]);
//! - `environment.json`: the experiment layer's header (kind, layout, times, the machine), the
//!   files used (the shim library,
//!   the probe), and under `selftest` the [`Manifest`]: the profile, the stock answers and how
//!   each process ended;
//! - `checks.json` and `report.md`, derived from those alone ([`super::evaluate`]):
//!   `checks.json` is exactly what `--json` printed;
//! - `SHA256SUMS` over every file.
//!
//! The processes write their raw files into the bundle as they run
//! ([`super::child::run_with_shim`]); [`seal`] adds the rest through the experiment layer.
//!
//! [`check`] is `capshim report`'s side: it derives `checks.json` and `report.md` again from
//! the raw files and the manifest and compares them byte for byte (after the checksums).

use std::path::Path;

use capshim_profile::device::Answers;
use serde::{Deserialize, Serialize};

use super::{Evidence, Kernels, Probe, ProcessRecord, ProfileRecord, Report, evaluate, render};
use crate::bundle::BundleError;
use crate::bundle::identity::{FileId, file_id};
use crate::bundle::schema::compare_derived;
use crate::experiment::ExperimentError;
pub use crate::experiment::machine::Machine;
use crate::experiment::record::Header;
use crate::experiment::seal::{read_manifest, write_sealed};

/// The `kind` of a selftest bundle's `environment.json`.
pub const KIND: &str = "selftest";
/// Version of the selftest bundle layout (`schema_version` of `environment.json`): 2 since
/// its header and machine record are the experiment layer's ([`Header`]); layout 1 had a
/// machine record of its own (`os`, `arch`, `cpu_brand`, `os_version`) and is derived the same
/// way, from the same raw files and manifest.
pub const SCHEMA_VERSION: u32 = 2;

/// The probe's status file.
pub const PROBE_STATUS: &str = "raw/probe.status.jsonl";
/// The probe's stdout.
pub const PROBE_STDOUT: &str = "raw/probe.stdout";
/// The probe's stderr.
pub const PROBE_STDERR: &str = "raw/probe.stderr";
/// The kernel process's status file.
pub const KERNELS_STATUS: &str = "raw/kernels.status.jsonl";
/// The kernel process's stdout: the kernels' outputs.
pub const KERNELS_JSON: &str = "raw/kernels.json";
/// The kernel process's stderr.
pub const KERNELS_STDERR: &str = "raw/kernels.stderr";
/// The derived checks, as `--json` prints them.
pub const CHECKS_FILE: &str = "checks.json";
/// The derived report.
pub const REPORT_FILE: &str = "report.md";

/// How one process ended (its outputs are in `raw/`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProcessEntry {
    /// Program and arguments.
    pub argv: Vec<String>,
    /// Exit code (`null`: killed by a signal).
    pub exit_code: Option<i32>,
    /// Wall time, in milliseconds.
    pub time_ms: f64,
}

/// The probe, in the manifest.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum ProbeEntry {
    /// Not run, and why.
    Skipped {
        /// Why.
        reason: String,
    },
    /// Run: its files are [`PROBE_STATUS`], [`PROBE_STDOUT`], [`PROBE_STDERR`].
    Ran(ProcessEntry),
}

/// The kernel process, in the manifest.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum KernelsEntry {
    /// No Metal device.
    NoDevice {
        /// Why.
        reason: String,
    },
    /// Run: its files are [`KERNELS_STATUS`], [`KERNELS_JSON`], [`KERNELS_STDERR`].
    Ran(ProcessEntry),
}

/// What the derived files come from, besides `raw/`: `environment.json`'s `selftest`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// The capshim version that ran it.
    pub capshim_version: String,
    /// The system it ran on.
    pub os: String,
    /// The profile checked.
    pub profile: ProfileRecord,
    /// The stock answers the claims are measured from.
    pub stock: Answers,
    /// Where they come from.
    pub stock_source: String,
    /// The probe.
    pub probe: ProbeEntry,
    /// The kernel process; `null` when nothing was claimed beyond stock.
    pub kernels: Option<KernelsEntry>,
}

/// The files the selftest used, hashed.
#[derive(Clone, Debug, Serialize)]
pub struct Files {
    /// The shim library.
    pub dylib: Option<FileId>,
    /// The probe program.
    pub probe: Option<FileId>,
}

/// `environment.json`: the layer's header (layout, kind, version, times, the machine), then
/// what is particular to a selftest.
#[derive(Serialize)]
struct Environment<'a> {
    #[serde(flatten)]
    header: Header,
    injection_variable: &'static str,
    files: Files,
    selftest: &'a Manifest,
}

fn entry(p: &ProcessRecord) -> ProcessEntry {
    ProcessEntry {
        argv: p.argv.clone(),
        exit_code: p.exit_code,
        time_ms: p.time_ms,
    }
}

/// The manifest of `evidence`.
pub fn manifest(evidence: &Evidence) -> Manifest {
    Manifest {
        capshim_version: evidence.capshim_version.clone(),
        os: evidence.os.clone(),
        profile: evidence.profile.clone(),
        stock: evidence.stock.clone(),
        stock_source: evidence.stock_source.clone(),
        probe: match &evidence.probe {
            Probe::Skipped(reason) => ProbeEntry::Skipped {
                reason: reason.clone(),
            },
            Probe::Ran(p) => ProbeEntry::Ran(entry(p)),
        },
        kernels: evidence.kernels.as_ref().map(|k| match k {
            Kernels::NoDevice(reason) => KernelsEntry::NoDevice {
                reason: reason.clone(),
            },
            Kernels::Ran(p) => KernelsEntry::Ran(entry(p)),
        }),
    }
}

/// The derived files of `report`: `checks.json` and `report.md`.
pub fn derived(report: &Report) -> [(&'static str, String); 2] {
    let json = serde_json::to_string_pretty(report).expect("a report serializes") + "\n";
    [(CHECKS_FILE, json), (REPORT_FILE, render::markdown(report))]
}

/// What went into the bundle besides the evidence.
pub struct Written<'a> {
    /// When the selftest started, seconds since the Unix epoch.
    pub started: u64,
    /// The machine ([`crate::experiment::machine::collect`]).
    pub machine: &'a Machine,
    /// The shim library.
    pub dylib: Option<&'a Path>,
    /// The probe program.
    pub probe: Option<&'a Path>,
    /// `DYLD_INSERT_LIBRARIES` or `LD_PRELOAD`.
    pub injection_variable: &'static str,
}

/// Seals the bundle `dir`, whose raw files the processes of `evidence` left: the files used
/// hashed, then the layer's seal ([`write_sealed`]): `checks.json` and `report.md` from
/// `report`, `environment.json`, `SHA256SUMS`.
///
/// # Errors
/// When a used file cannot be read or a file cannot be written.
pub fn seal(
    dir: &Path,
    evidence: &Evidence,
    report: &Report,
    with: &Written<'_>,
) -> Result<(), ExperimentError> {
    let identify = |path: Option<&Path>| path.map(file_id).transpose();
    let manifest = manifest(evidence);
    let mut header = Header::now(KIND, SCHEMA_VERSION, with.started);
    header.machine = with.machine.clone();
    let env = Environment {
        header,
        injection_variable: with.injection_variable,
        files: Files {
            dylib: identify(with.dylib)?,
            probe: identify(with.probe)?,
        },
        selftest: &manifest,
    };
    write_sealed(dir, &derived(report), &env)
}

/// Writes the bundle `dir` (which must not exist) for `evidence` gathered elsewhere (its raw
/// files from the records; the tests' injected evidence) and seals it.
///
/// # Errors
/// [`BundleError::Exists`] (in [`ExperimentError::Bundle`]) when `dir` exists; as [`seal`].
#[cfg(test)]
pub fn write(
    dir: &Path,
    evidence: &Evidence,
    report: &Report,
    with: &Written<'_>,
) -> Result<std::path::PathBuf, ExperimentError> {
    let dir = crate::bundle::create_named(Some(dir), "capshim-selftest")?;
    let put = |name: &str, text: &str| {
        let path = dir.join(name);
        std::fs::write(&path, text).map_err(crate::experiment::io("cannot write", &path))
    };
    if let Probe::Ran(p) = &evidence.probe {
        put(PROBE_STATUS, &p.status)?;
        put(PROBE_STDOUT, &p.stdout)?;
        put(PROBE_STDERR, &p.stderr)?;
    }
    if let Some(Kernels::Ran(p)) = &evidence.kernels {
        put(KERNELS_STATUS, &p.status)?;
        put(KERNELS_JSON, &p.stdout)?;
        put(KERNELS_STDERR, &p.stderr)?;
    }
    seal(&dir, evidence, report, with)?;
    Ok(dir)
}

/// A raw file's text; a missing file is an error naming it.
fn raw(dir: &Path, name: &str) -> Result<String, BundleError> {
    let path = dir.join(name);
    std::fs::read_to_string(&path).map_err(BundleError::io("cannot read", &path))
}

fn record(dir: &Path, p: &ProcessEntry, files: [&str; 3]) -> Result<ProcessRecord, BundleError> {
    Ok(ProcessRecord {
        argv: p.argv.clone(),
        exit_code: p.exit_code,
        time_ms: p.time_ms,
        status: raw(dir, files[0])?,
        stdout: raw(dir, files[1])?,
        stderr: raw(dir, files[2])?,
    })
}

/// The evidence a bundle holds: its manifest and raw files.
///
/// # Errors
/// As [`check`].
pub fn read(dir: &Path) -> Result<Evidence, BundleError> {
    let m: Manifest = read_manifest(dir, KIND)?;
    Ok(Evidence {
        capshim_version: m.capshim_version,
        os: m.os,
        profile: m.profile,
        stock: m.stock,
        stock_source: m.stock_source,
        probe: match &m.probe {
            ProbeEntry::Skipped { reason } => Probe::Skipped(reason.clone()),
            ProbeEntry::Ran(p) => {
                Probe::Ran(record(dir, p, [PROBE_STATUS, PROBE_STDOUT, PROBE_STDERR])?)
            }
        },
        kernels: match &m.kernels {
            None => None,
            Some(KernelsEntry::NoDevice { reason }) => Some(Kernels::NoDevice(reason.clone())),
            Some(KernelsEntry::Ran(p)) => Some(Kernels::Ran(record(
                dir,
                p,
                [KERNELS_STATUS, KERNELS_JSON, KERNELS_STDERR],
            )?)),
        },
    })
}

/// Checks the selftest bundle `dir` (of this capshim's layout; its checksums already
/// checked) and returns its `report.md` and `checks.json` texts.
///
/// # Errors
/// [`BundleError::Mismatch`] naming the derived file that differs; [`BundleError::BadRaw`]
/// when the manifest's profile is not a profile; [`BundleError::Io`] when a file cannot be
/// read; [`BundleError::NotABundle`] without a manifest.
pub fn check(dir: &Path) -> Result<(String, String), BundleError> {
    let evidence = read(dir)?;
    let report = evaluate(&evidence).map_err(|why| BundleError::BadRaw {
        path: dir.to_path_buf(),
        why,
    })?;
    let files = derived(&report);
    compare_derived(dir, KIND, &files)?;
    let [(_, checks_json), (_, markdown)] = files;
    Ok((markdown, checks_json))
}
