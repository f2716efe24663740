//! What llama.cpp and the shim report: llama-bench's JSON output, ggml-metal's device lines
//! on stderr, and the shim's own `capshim:` lines (its status file is read by `launch::status`).

pub mod bench_json;
pub mod metal;
pub mod shim;

pub use bench_json::{BenchRow, ModelId, SETTING_FIELDS, TestKey, read_bench_file};
pub use metal::MetalReport;
pub use shim::Activation;
