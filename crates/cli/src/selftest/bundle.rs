//! A selftest evidence bundle (`capshim selftest -o DIR`), kind `selftest`:
//!
//! - `raw/`: what the processes left, as they left it: the probe's status file, stdout and
//!   stderr ([`PROBE_STATUS`], [`PROBE_STDOUT`], [`PROBE_STDERR`]) and the kernel process's
//!   ([`KERNELS_STATUS`], [`KERNELS_JSON`], its stdout, and [`KERNELS_STDERR`]);
//! - `environment.json`: the kind and layout, the machine, the files used (the shim library,
//!   the probe), and under `selftest` the [`Manifest`]: the profile, the stock answers and how
//!   each process ended;
//! - `checks.json` and `report.md`, derived from those alone ([`super::evaluate`]):
//!   `checks.json` is exactly what `--json` printed;
//! - `SHA256SUMS` over every file.
//!
//! [`check`] is `capshim report`'s side: it derives `checks.json` and `report.md` again from
//! the raw files and the manifest and compares them byte for byte (after the checksums).

use std::path::{Path, PathBuf};

use capshim_profile::device::Answers;
use serde::{Deserialize, Serialize};

use super::{Evidence, Kernels, Probe, ProcessRecord, ProfileRecord, Report, evaluate, render};
use crate::bundle::identity::{FileId, IdentifyError, file_id};
use crate::bundle::schema::compare_derived;
use crate::bundle::{self, BundleError, time};

/// The `kind` of a selftest bundle's `environment.json`.
pub const KIND: &str = "selftest";
/// Version of the selftest bundle layout (`schema_version` of `environment.json`).
pub const SCHEMA_VERSION: u32 = 1;

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

/// The machine, as far as capshim read it.
#[derive(Clone, Debug, Serialize)]
pub struct Machine {
    /// `std::env::consts::OS`.
    pub os: &'static str,
    /// `std::env::consts::ARCH`.
    pub arch: &'static str,
    /// `sysctl machdep.cpu.brand_string`, when read.
    pub cpu_brand: Option<String>,
    /// `sysctl kern.osproductversion`, when read.
    pub os_version: Option<String>,
}

/// The files the selftest used, hashed.
#[derive(Clone, Debug, Serialize)]
pub struct Files {
    /// The shim library.
    pub dylib: Option<FileId>,
    /// The probe program.
    pub probe: Option<FileId>,
}

#[derive(Serialize)]
struct Environment<'a> {
    schema_version: u32,
    kind: &'static str,
    capshim_version: &'a str,
    started_utc: String,
    finished_utc: String,
    machine: &'a Machine,
    injection_variable: &'static str,
    files: Files,
    selftest: &'a Manifest,
}

#[derive(Deserialize)]
struct EnvironmentFile {
    selftest: Option<Manifest>,
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
    /// The machine.
    pub machine: &'a Machine,
    /// The shim library.
    pub dylib: Option<&'a Path>,
    /// The probe program.
    pub probe: Option<&'a Path>,
    /// `DYLD_INSERT_LIBRARIES` or `LD_PRELOAD`.
    pub injection_variable: &'static str,
}

/// Writes the bundle `dir` (which must not exist) for `evidence` and its `report`, sealed.
///
/// # Errors
/// [`BundleError::Exists`] when `dir` exists; [`BundleError::Io`] when a file cannot be
/// written or a used file read.
pub fn write(
    dir: &Path,
    evidence: &Evidence,
    report: &Report,
    with: &Written<'_>,
) -> Result<PathBuf, BundleError> {
    let dir = bundle::create_named(Some(dir), "capshim-selftest")?;
    let put = |name: &str, text: &str| {
        let path = dir.join(name);
        std::fs::write(&path, text).map_err(BundleError::io("cannot write", &path))
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
    let identify = |path: Option<&Path>| {
        path.map(|p| {
            file_id(p).map_err(|e| match e {
                IdentifyError::Io { path, source } => BundleError::Io {
                    action: "cannot read",
                    path,
                    source,
                },
                other => BundleError::Io {
                    action: "cannot identify",
                    path: p.to_path_buf(),
                    source: std::io::Error::other(other.to_string()),
                },
            })
        })
        .transpose()
    };
    let manifest = manifest(evidence);
    let env = Environment {
        schema_version: SCHEMA_VERSION,
        kind: KIND,
        capshim_version: &evidence.capshim_version,
        started_utc: time::iso(with.started),
        finished_utc: time::iso(time::now()),
        machine: with.machine,
        injection_variable: with.injection_variable,
        files: Files {
            dylib: identify(with.dylib)?,
            probe: identify(with.probe)?,
        },
        selftest: &manifest,
    };
    put(
        "environment.json",
        &(serde_json::to_string_pretty(&env).expect("a record serializes") + "\n"),
    )?;
    for (name, text) in derived(report) {
        put(name, &text)?;
    }
    bundle::write_sums(&dir)?;
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
    let not_a_bundle = |why: String| BundleError::NotABundle {
        path: dir.to_path_buf(),
        why,
    };
    let text = raw(dir, "environment.json")?;
    let env: EnvironmentFile = serde_json::from_str(&text)
        .map_err(|e| not_a_bundle(format!("environment.json is not a selftest record: {e}")))?;
    let m = env
        .selftest
        .ok_or_else(|| not_a_bundle("environment.json has no `selftest` manifest".into()))?;
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
