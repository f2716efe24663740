//! The machine an experiment ran on, for its `environment.json`: OS, kernel, hardware model
//! and CPU brand, read from the usual places on each platform (`sw_vers` and `sysctl` on
//! macOS; `/etc/os-release`, `/proc/cpuinfo` and DMI on Linux). Anything unavailable is
//! `null`, never an error.

use std::process::Command;

use serde::Serialize;

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
