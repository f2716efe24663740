//! What a bundle's `environment.json` records: the machine a bench ran on (OS, kernel,
//! hardware model and CPU brand, read from the usual places on each platform: `sw_vers` and
//! `sysctl` on macOS; `/etc/os-release`, `/proc/cpuinfo` and DMI on Linux; anything
//! unavailable is `null`, never an error), the files it used with their checksums, every
//! llama-bench process it ran, and the manifest the derived files come from.

use std::process::Command;

use serde::Serialize;

use super::plan::ArmPlan;
use crate::bundle::Manifest;
use crate::bundle::identity::FileId;
use crate::launch::environment::EnvChange;

/// What is known about the machine.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Machine {
    /// OS name, e.g. `macOS` or `Debian GNU/Linux`.
    pub os_name: Option<String>,
    /// OS version, e.g. `26.5.2` or `13`.
    pub os_version: Option<String>,
    /// OS build (macOS `sw_vers -buildVersion`).
    pub os_build: Option<String>,
    /// `uname -srvm`.
    pub kernel: Option<String>,
    /// `sysctl hw.model` on macOS (e.g. `VirtualMac2,1` in a guest); the DMI product name on Linux.
    pub hw_model: Option<String>,
    /// `sysctl machdep.cpu.brand_string` on macOS (e.g. `Apple M1 Ultra (Virtual)`);
    /// `/proc/cpuinfo`'s `model name` on Linux.
    pub cpu_brand: Option<String>,
    /// Logical CPUs.
    pub logical_cpus: Option<usize>,
}

fn command(program: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(program).args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (!text.is_empty()).then_some(text)
}

/// `KEY="value"` from os-release text.
pub fn os_release_field(text: &str, key: &str) -> Option<String> {
    text.lines().find_map(|line| {
        let (k, v) = line.split_once('=')?;
        (k.trim() == key).then(|| v.trim().trim_matches('"').to_string())
    })
}

/// The first `model name` of `/proc/cpuinfo` text.
pub fn cpuinfo_model_name(text: &str) -> Option<String> {
    text.lines().find_map(|line| {
        let (k, v) = line.split_once(':')?;
        (k.trim() == "model name").then(|| v.trim().to_string())
    })
}

/// Reads what it can about this machine.
pub fn collect() -> Machine {
    let mut m = Machine {
        kernel: command("uname", &["-srvm"]),
        logical_cpus: std::thread::available_parallelism().ok().map(|n| n.get()),
        ..Machine::default()
    };
    if cfg!(target_os = "macos") {
        m.os_name = command("sw_vers", &["-productName"]);
        m.os_version = command("sw_vers", &["-productVersion"]);
        m.os_build = command("sw_vers", &["-buildVersion"]);
        m.hw_model = command("/usr/sbin/sysctl", &["-n", "hw.model"]);
        m.cpu_brand = command("/usr/sbin/sysctl", &["-n", "machdep.cpu.brand_string"]);
    } else {
        if let Ok(text) = std::fs::read_to_string("/etc/os-release") {
            m.os_name = os_release_field(&text, "NAME");
            m.os_version = os_release_field(&text, "VERSION_ID")
                .or_else(|| os_release_field(&text, "VERSION"));
        }
        m.hw_model = std::fs::read_to_string("/sys/devices/virtual/dmi/id/product_name")
            .ok()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty());
        m.cpu_brand = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|t| cpuinfo_model_name(&t));
    }
    m
}

/// What happened in one process, for `environment.json`.
#[derive(Clone, Debug, Serialize)]
pub struct RunRecord {
    /// Arm name.
    pub arm: String,
    /// 1-based round.
    pub round: u32,
    /// Program and arguments, exactly as run.
    pub argv: Vec<String>,
    /// The same as one shell-quoted line.
    pub command_line: String,
    /// The environment change.
    pub env: EnvChange,
    /// Exit code (`null` when killed by a signal).
    pub exit_code: Option<i32>,
    /// Wall time, in seconds.
    pub seconds: f64,
    /// UTC start time.
    pub started_utc: String,
}

/// The whole of `environment.json`.
#[derive(Serialize)]
pub struct Environment<'a> {
    /// The bundle's layout version ([`SCHEMA_VERSION`](crate::analysis::SCHEMA_VERSION)).
    pub schema_version: u32,
    /// `bench`.
    pub kind: &'static str,
    /// capshim's version.
    pub capshim_version: &'static str,
    /// When the run started, UTC.
    pub started_utc: String,
    /// When it finished, UTC.
    pub finished_utc: String,
    /// The machine.
    pub machine: Machine,
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
    /// The host's llama-bench JSON, when given.
    pub baseline: Option<FileId>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_os_release_and_cpuinfo() {
        let os = "PRETTY_NAME=\"Debian GNU/Linux 13 (trixie)\"\nNAME=\"Debian GNU/Linux\"\nVERSION_ID=\"13\"\n";
        assert_eq!(
            os_release_field(os, "NAME").as_deref(),
            Some("Debian GNU/Linux")
        );
        assert_eq!(os_release_field(os, "VERSION_ID").as_deref(), Some("13"));
        assert_eq!(os_release_field(os, "ID"), None);
        let cpu = "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7B13\nflags\t\t: fpu\n";
        assert_eq!(cpuinfo_model_name(cpu).as_deref(), Some("AMD EPYC 7B13"));
    }

    #[test]
    fn collect_never_fails() {
        let m = collect();
        assert!(m.logical_cpus.unwrap_or(1) >= 1);
        if cfg!(target_os = "linux") {
            assert!(m.kernel.as_deref().unwrap_or("Linux").starts_with("Linux"));
        }
    }
}
