//! libcapshim injected with LD_PRELOAD into a simulated macOS guest: a Metal library and a
//! probe written in Objective-C (see crates/simguest).
//!
//! Every case runs against both builds of the shim: the GNU-runtime build on GCC's libobjc,
//! and the Apple path (`--features apple-model`) on the Apple-runtime model, which aborts a
//! process that takes Apple's runtime lock twice, runs dyld's add-image callbacks before a new
//! image's classes can be found, and calls willInitialize callbacks superclass first (see
//! docs/apple-runtime.md). Each runs the real probe as a separate process, with and without
//! the shim, and compares what the device answered.
//!
//! - answers: what the shim changes and what it never changes.
//! - loading: Metal linked, dlopen()ed late, never loaded, or without the hook point; threads.
//! - config: fail-closed configuration, the status file and query logging.
//! - scope: `CAPSHIM_SCOPE=process`, `CAPSHIM_ONLY_PROCESS`, a framework Python's re-exec.
//! - quiet: quiet by default; scope by behaviour, whatever copy of the environment a process got.
//! - threads: the environment while others read it; fork() while the install lock is held.
//! - model: the Apple-runtime model itself refuses what Apple's runtime refuses.
//!
//! Linux only: the simulated guest is built with GCC's Objective-C runtime. On a Mac,
//! `tests/macos_native.rs` checks the real runtime and device,
//! and a test there says that this suite did not run.
#![cfg(target_os = "linux")]

mod answers;
mod config;
mod harness;
mod loading;
mod model;
mod quiet;
mod scope;
mod threads;
