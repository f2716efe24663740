//! libcapshim: changes selected Metal capability answers inside one process.
//!
//! Injected with `DYLD_INSERT_LIBRARIES` on macOS (or `LD_PRELOAD` on Linux, where
//! it is tested against GCC's Objective-C runtime and a simulated Metal library).
//! Its initializer reads `CAPSHIM_*` (or the reference shim's `LUME_METAL_*`)
//! variables once; when they are valid it replaces `-[_MTLDevice
//! initGPUFamilySupport]` as soon as Metal is loaded, and from there hooks each
//! device class's `supportsFamily:`, `maxThreadgroupMemoryLength` and, when
//! configured, `recommendedMaxWorkingSetSize`, raising answers by the policy in
//! `capshim_profile::policy`. On anything unexpected it stays stock and says why.
//!
//! - [`runtime`]: the Objective-C runtime calls, one module per runtime.
//! - [`hook`]: all-or-nothing installation and the replacement implementations.
//! - [`report`]: stderr lines and status-file events.
//! - [`scope`]: leaving children stock with `CAPSHIM_SCOPE=process`.
//! - `init`: the initializer.

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

pub mod hook;
mod init;
pub mod report;
pub mod runtime;
pub mod scope;

pub use init::process_name;
