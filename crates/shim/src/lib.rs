//! libcapshim: changes selected Metal capability answers inside one process.
//!
//! Injected with `DYLD_INSERT_LIBRARIES` on macOS (or `LD_PRELOAD` on Linux, where
//! it is tested against GCC's Objective-C runtime and a simulated Metal library).
//! Its initializer reads `CAPSHIM_*` (or the reference shim's `LUME_METAL_*`)
//! variables once; when they are valid it replaces `-[_MTLDevice
//! initGPUFamilySupport]` once Metal is loaded (at once, or when the runtime reports
//! `_MTLDevice`, never from inside a runtime lock), and from there hooks each device
//! class's `supportsFamily:`, `maxThreadgroupMemoryLength` and, when configured,
//! `recommendedMaxWorkingSetSize`, raising answers by the policy in
//! `capshim_profile::policy`. On anything unexpected it stays stock and says why.
//!
//! The Apple runtime and loader behaviour this relies on is recorded, with its source, in
//! docs/apple-runtime.md. Built with the `apple-model` feature on Linux, the Apple path is
//! compiled against a preloaded model of that behaviour instead of Apple's libobjc.
//!
//! - [`runtime`]: the Objective-C runtime calls, one module per runtime.
//! - [`hook`]: all-or-nothing installation and the replacement implementations.
//! - [`query`]: the queries answered and the method signatures accepted for them.
//! - [`encoding`]: Objective-C type encodings, read far enough to check a signature.
//! - [`report`]: stderr lines and status-file events.
//! - [`scope`]: which processes the shim acts in (`CAPSHIM_SCOPE`, `CAPSHIM_ONLY_PROCESS`).
//! - [`version`]: the version record the CLI reads from the file (`capshim doctor`).
//! - [`guard`]: the exec guard of the guard library (`libcapshim_guard`, the same sources
//!   built as package `capshim-guard` with `--cfg capshim_guard`), for Macs with SIP off.
//! - `init`: the initializer.

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]
#![deny(clippy::undocumented_unsafe_blocks)]

pub mod encoding;
pub mod guard;
pub mod hook;
mod init;
pub mod query;
pub mod report;
pub mod runtime;
pub mod scope;
pub mod version;

pub use scope::process_name;
