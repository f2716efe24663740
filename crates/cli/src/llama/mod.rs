//! What llama.cpp and the shim report: llama-bench's JSON output, llama-perplexity's and
//! test-backend-ops' output, ggml-metal's device lines on stderr, and the shim's own `capshim:`
//! lines (its status file is read by `launch::status`); and where llama.cpp's tools are.

pub mod backend_ops;
pub mod bench_json;
pub mod closing;
pub mod gguf;
pub mod metal;
pub mod perplexity;
pub mod shim;
pub mod tools;

pub use bench_json::{BenchRow, ModelId, SETTING_FIELDS, TestKey, read_bench_file};
pub use metal::MetalReport;
pub use shim::Activation;
