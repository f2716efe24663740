//! Platform-specific facts: `sysctl` values (macOS) and the Metal device (macOS only).
//!
//! Everything here runs programs or calls Metal; the rest of the CLI takes its results as
//! plain values so it can be tested anywhere.

#[cfg(target_os = "macos")]
pub mod metal;

use std::process::Command;

/// Reads one value with `sysctl -n NAME` (macOS and BSDs), trimmed.
///
/// # Errors
/// A message naming the command and why it failed.
pub fn sysctl(name: &str) -> Result<String, String> {
    let output = Command::new("sysctl")
        .args(["-n", name])
        .output()
        .map_err(|e| format!("cannot run `sysctl -n {name}`: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "`sysctl -n {name}` failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&output.stdout).trim().to_string())
}

/// The CPU brand string a Mac or macOS guest reports (`sysctl machdep.cpu.brand_string`),
/// e.g. "Apple M1 Ultra (Virtual)" inside a guest.
///
/// # Errors
/// On systems other than macOS, or when `sysctl` fails, a message saying so.
pub fn cpu_brand() -> Result<String, String> {
    if !cfg!(target_os = "macos") {
        return Err(format!(
            "this is {}, not macOS, so there is no machdep.cpu.brand_string to read",
            std::env::consts::OS
        ));
    }
    sysctl("machdep.cpu.brand_string")
}
