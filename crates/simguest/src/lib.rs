//! A simulated macOS guest for testing capshim on Linux.
//!
//! `objc/MetalSim.m` is a small Metal library written in Objective-C for GCC's GNU
//! runtime: the private base class `_MTLDevice` with `-initGPUFamilySupport`, and
//! concrete device classes. `MTLParavirtualDevice` gives the stock answers of the
//! paravirtual device in a macOS 26 guest (DESIGN.md section 1: Apple1–Apple5 and
//! Common1–Common3, 32768 bytes of threadgroup memory, 12009603072 bytes of working
//! set). `MTLSimSecondDevice` (Apple1–4, Common1–2, 16384 bytes, 8 GiB),
//! `MTLSimSubDevice` (a subclass of the paravirtual device adding Mac2 through
//! `[super supportsFamily:]`) and `MTLSimBrokenDevice` (no
//! `-recommendedMaxWorkingSetSize`) exercise the shim's per-class handling.
//!
//! `objc/probe.m` prints each answer and llama.cpp's derived flags as
//! `Class.key=value` lines; [`parse`] reads them back.

use std::collections::BTreeMap;
use std::path::PathBuf;

/// The built artifacts, compiled by this crate's build script with GCC.
#[derive(Clone, Debug)]
pub struct Guest {
    /// `libMetalSim.so`, the simulated Metal library.
    pub metal: PathBuf,
    /// The probe linked against the Metal library (Metal loaded at start).
    pub probe: PathBuf,
    /// The probe that loads the Metal library with `dlopen` after start (or never, with `--no-metal`).
    /// `SIMGUEST_METAL=PATH` makes it load another build, such as [`Guest::metal_without_hook_point`].
    pub probe_dlopen: PathBuf,
    /// The simulated Metal library built without `-[_MTLDevice initGPUFamilySupport]`, the
    /// private method the shim hooks: what a macOS that dropped it would look like.
    pub metal_without_hook_point: PathBuf,
}

/// The simulated guest, or why it is not available on this platform.
///
/// # Errors
/// On targets other than Linux, where the build script does not build it.
pub fn guest() -> Result<Guest, &'static str> {
    if let Some(reason) = option_env!("SIMGUEST_UNAVAILABLE") {
        return Err(reason);
    }
    let dir = PathBuf::from(env!("SIMGUEST_DIR"));
    Ok(Guest {
        metal: dir.join("libMetalSim.so"),
        probe: dir.join("probe"),
        probe_dlopen: dir.join("probe-dlopen"),
        metal_without_hook_point: dir.join("libMetalSimWithoutHookPoint.so"),
    })
}

/// The class names the simulated Metal library defines, as a probe takes them with `--class`.
pub const PARAVIRTUAL: &str = "MTLParavirtualDevice";
/// A second concrete class with different stock answers.
pub const SECOND: &str = "MTLSimSecondDevice";
/// A subclass of the paravirtual device that calls `[super supportsFamily:]`.
pub const SUB: &str = "MTLSimSubDevice";
/// A class missing `-recommendedMaxWorkingSetSize`.
pub const BROKEN: &str = "MTLSimBrokenDevice";

/// Parses a probe's `key=value` lines (other lines are ignored).
pub fn parse(stdout: &str) -> BTreeMap<String, String> {
    stdout
        .lines()
        .filter_map(|line| line.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}
