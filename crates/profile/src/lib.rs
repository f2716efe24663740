//! capshim's pure core, shared by the injected shim and the `capshim` CLI.
//!
//! Nothing here touches the platform or uses `unsafe`: the shim feeds it the
//! process environment and the original Metal answers, and applies what it
//! returns. The same functions let the CLI predict, before anything runs,
//! what a profile will change.
//!
//! - [`family`]: every MTLGPUFamily value, its Apple name and range.
//! - [`profile`]: the values a profile raises, and their validation.
//! - [`env`]: the `CAPSHIM_*` environment and the published shims' names for it
//!   (`LUME_METAL_*`, `TART_METAL_*`, `VEERTU_ANKA_GPU_*`), parsed fail-closed, and the
//!   variables that set a profile.
//! - [`policy`]: the raise-only answer policy.
//! - [`named`]: named profiles (`stock`, `native`, `apple9-64k`) and the chip table.
//! - [`limits`]: values beyond any known Apple GPU, and values that change nothing.
//! - [`device`]: a device's capability answers, e.g. the stock paravirtual device.
//! - [`consumers`]: what llama.cpp, Metal itself, whisper.cpp, PyTorch, MLX, Metal.jl and
//!   tinygrad decide from a set of answers, each rule with its source.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod consumers;
pub mod device;
pub mod env;
pub mod family;
pub mod limits;
pub mod named;
pub mod number;
pub mod policy;
pub mod profile;

pub use env::{Config, ConfigError, LogMode, Outputs, Parsed, Scope};
pub use family::{FamilyRange, GpuFamily};
pub use profile::{Profile, ProfileError};
