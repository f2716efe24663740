//! A simulated macOS guest for testing capshim on Linux.
//!
//! - `objc/MetalSim.m`: a Metal library written in Objective-C for GCC's GNU runtime, shaped
//!   like the guest's (docs/apple-runtime.md, "The guest's Metal"): the private base class
//!   `_MTLDevice` owns `-supportsFamily:` (a search of a list that `-initGPUFamilySupport` fills
//!   from the concrete class's `-featureProfile`), `-maxThreadgroupMemoryLength`,
//!   `-recommendedMaxWorkingSetSize` and Metal's own `-requiresBFloat16Emulation`
//!   (`![self supportsFamily:1009]`). [`PARAVIRTUAL`] gives the stock answers of a macOS 26
//!   guest (Apple1–Apple5 and Common1–Common3, 32768 bytes of threadgroup memory, 12009603072
//!   bytes of working set) and overrides none of the queries. [`SECOND`], [`SUB`], [`NESTED`]
//!   and [`BROKEN`] exercise the shim's per-class handling.
//! - `objc/probe.m`: prints each answer and llama.cpp's derived flags as `Class.key=value`
//!   lines; [`parse`] reads them back.
//! - `applemodel/`: a model of Apple's runtime and loader semantics over GCC's runtime
//!   ([`Guest::apple_model`]), preloaded before an Apple-path build of the shim.
//! - `launcher/pythonw.c`: a framework Python's launcher, which re-executes the interpreter
//!   in the same process ([`Guest::python_launcher`]).
//! - `helpers/hold_install.c`: holds the thread installing a class's hooks
//!   ([`Guest::hold_install`]), so that a test can fork while the shim's install lock is held.
//! - `faults/`: two libraries doing what libcapshim 606a069 did on macOS, which the model must
//!   refuse ([`Guest::fault_load_image_lookup`], [`Guest::fault_add_image_lookup`]).

use std::collections::BTreeMap;
use std::path::PathBuf;

/// The built artifacts, compiled by this crate's build script with GCC.
#[derive(Clone, Debug)]
pub struct Guest {
    /// `libMetalSim.so`, the simulated Metal library.
    pub metal: PathBuf,
    /// The probe linked against the Metal library (Metal loaded at start, as a Metal app is).
    pub probe: PathBuf,
    /// The probe that loads the Metal library with `dlopen` after start (or never, with
    /// `--no-metal`). `SIMGUEST_METAL=PATH` makes it load another build, such as
    /// [`Guest::metal_without_hook_point`].
    pub probe_dlopen: PathBuf,
    /// The simulated Metal library built without `-[_MTLDevice initGPUFamilySupport]`, the
    /// private method the shim hooks: what a macOS that dropped it would look like. Its file
    /// is named `libMetalSim.so`, so that the linked probe loads it with
    /// `LD_LIBRARY_PATH` set to its folder.
    pub metal_without_hook_point: PathBuf,
    /// `libapplemodel.so`: Apple's runtime and loader semantics, to preload before the shim.
    pub apple_model: PathBuf,
    /// A framework Python's `bin/python3.12`: re-executes, in the same process,
    /// [`Guest::python_interpreter`] (a dlopen probe named `Python`).
    pub python_launcher: PathBuf,
    /// `…/Python.app/Contents/MacOS/Python`, the interpreter the launcher runs.
    pub python_interpreter: PathBuf,
    /// A library that looks a class up from an `objc_addLoadImageFunc` callback (under Apple's
    /// runtime lock): the model must abort the process, as libplatform does.
    pub fault_load_image_lookup: PathBuf,
    /// A library that looks `_MTLDevice` up from a dyld add-image callback and prints
    /// `add-image: _MTLDevice found|absent` for each call.
    pub fault_add_image_lookup: PathBuf,
    /// `libsimguest_hold.so`, preloaded first: the first `class_copyMethodList` for the class
    /// named by `SIMGUEST_HOLD_CLASS` sets `simguest_hold_started` and sleeps 1.5 s, inside the
    /// shim's install lock (probe `--fork-while-installing`).
    pub hold_install: PathBuf,
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
    let python = dir.join("Python.framework/Versions/3.12");
    Ok(Guest {
        metal: dir.join("libMetalSim.so"),
        probe: dir.join("probe"),
        probe_dlopen: dir.join("probe-dlopen"),
        metal_without_hook_point: dir.join("nohook/libMetalSim.so"),
        apple_model: dir.join("libapplemodel.so"),
        python_launcher: python.join("bin/python3.12"),
        python_interpreter: python.join("Resources/Python.app/Contents/MacOS/Python"),
        fault_load_image_lookup: dir.join("libfault_load_image_lookup.so"),
        fault_add_image_lookup: dir.join("libfault_add_image_lookup.so"),
        hold_install: dir.join("libsimguest_hold.so"),
    })
}

/// The paravirtual device's class, as a probe takes it with `--class`.
pub const PARAVIRTUAL: &str = "AppleParavirtDevice";
/// A second concrete class with different stock answers and its own
/// `-maxThreadgroupMemoryLength`.
pub const SECOND: &str = "MTLSimSecondDevice";
/// A subclass of the paravirtual device that calls `[super supportsFamily:]` and adds
/// MacCatalyst1 (4001).
pub const SUB: &str = "MTLSimSubDevice";
/// A class whose `-supportsFamily:` asks `[self supportsFamily:]`: Common3 (3003) as Apple4
/// (1004), Mac2 (2002) as Apple8 (1008).
pub const NESTED: &str = "MTLSimNestedDevice";
/// A class whose `-maxThreadgroupMemoryLength` returns a 4-byte `unsigned int`, which the
/// shim must refuse to replace (it stays stock).
pub const BROKEN: &str = "MTLSimBrokenDevice";

/// Parses a probe's `key=value` lines (other lines are ignored).
pub fn parse(stdout: &str) -> BTreeMap<String, String> {
    stdout
        .lines()
        .filter_map(|line| line.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}
