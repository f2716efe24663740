//! Helpers shared by the integration tests: llama-bench output files with known samples.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// One llama-bench result in the exact `-o json` field layout (abbreviated to what matters).
pub fn result(model: &str, n_prompt: u64, n_gen: u64, samples: &[f64]) -> serde_json::Value {
    serde_json::json!({
        "build_commit": "a1b2c3d",
        "build_number": 7054,
        "cpu_info": "Apple M1 Ultra",
        "gpu_info": "Apple M1 Ultra",
        "backends": "Metal,BLAS",
        "model_filename": format!("/Users/bench/models/{model}.gguf"),
        "model_type": format!("{model} type"),
        "model_size": 668788096,
        "model_n_params": 1100048384,
        "n_batch": 2048,
        "n_ubatch": 512,
        "n_threads": 8,
        "n_gpu_layers": -1,
        "n_prompt": n_prompt,
        "n_gen": n_gen,
        "n_depth": 0,
        "test_time": "2026-11-30T20:00:00Z",
        "avg_ts": samples.iter().sum::<f64>() / samples.len() as f64,
        "stddev_ts": 0.0,
        "samples_ns": samples.iter().map(|_| 1000).collect::<Vec<_>>(),
        "samples_ts": samples,
    })
}

/// Writes `results` as llama-bench `-o json` (an array) to `dir/name`.
pub fn write_json(dir: &Path, name: &str, results: &[serde_json::Value]) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, serde_json::to_string_pretty(results).unwrap()).unwrap();
    path
}

/// Writes `results` as llama-bench `-o jsonl` (one object per line) to `dir/name`.
pub fn write_jsonl(dir: &Path, name: &str, results: &[serde_json::Value]) -> PathBuf {
    let path = dir.join(name);
    let text: String = results.iter().map(|r| format!("{r}\n")).collect();
    std::fs::write(&path, text).unwrap();
    path
}

/// `n` samples whose median is exactly `median` (odd `n`: `median` itself is the middle one;
/// even `n`: the two middle ones are symmetric around it), spread by about ±1%.
pub fn samples_with_median(median: f64, n: usize) -> Vec<f64> {
    let mut v = Vec::with_capacity(n);
    let half = n / 2;
    for i in 0..half {
        let d = median * 0.002 * (i + 1) as f64;
        v.push(median - d);
        v.push(median + d);
    }
    if n % 2 == 1 {
        v.push(median);
    }
    v
}

/// The `capshim` binary under test.
pub fn capshim() -> assert_cmd::Command {
    assert_cmd::Command::cargo_bin("capshim").unwrap()
}
