//! llama-bench's machine output: `-o json` (one array) and `-o jsonl` (one object per line).
//!
//! Only the fields capshim uses are read; every other field is ignored, so newer llama-bench
//! builds that add fields keep working.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

/// Identifies one llama-bench test: prompt length, generated tokens and context depth.
///
/// Rows from several files merge when their keys are equal.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub struct TestKey {
    /// `n_prompt`: prompt tokens processed (the 512 of pp512).
    pub n_prompt: u64,
    /// `n_gen`: tokens generated (the 128 of tg128).
    pub n_gen: u64,
    /// `n_depth`: tokens already in the context before the test (0 unless `-d` was given).
    pub n_depth: u64,
    /// What the test measures: llama-bench's tokens/s, or a `bench --command` workload's
    /// value (its token counts are then 0).
    #[serde(skip_serializing_if = "Quantity::is_throughput")]
    pub quantity: Quantity,
}

/// What a test's samples are, and which way is better.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Quantity {
    /// llama-bench's `samples_ts`, tokens/s: higher is better.
    #[default]
    Throughput,
    /// A command's wall time, in seconds: lower is better (test `wall`).
    Wall,
    /// A number read from a command's output (test `metric`), higher or lower better.
    Metric {
        /// Whether a lower value is better (`--lower-is-better`).
        lower_is_better: bool,
    },
}

impl Quantity {
    /// Whether this is llama-bench's throughput.
    pub fn is_throughput(&self) -> bool {
        *self == Quantity::Throughput
    }

    /// Whether a lower value is better: then a speedup is reference / arm, so that above 1
    /// still means the arm is better.
    pub fn lower_is_better(&self) -> bool {
        matches!(
            self,
            Quantity::Wall
                | Quantity::Metric {
                    lower_is_better: true
                }
        )
    }
}

impl TestKey {
    /// The test of a `bench --command` workload measuring `quantity`: `wall` or `metric`.
    pub fn command(quantity: Quantity) -> TestKey {
        TestKey {
            n_prompt: 0,
            n_gen: 0,
            n_depth: 0,
            quantity,
        }
    }

    /// The test's name as llama-bench's own table writes it: `pp512`, `tg128`, `pp512+tg128`,
    /// with ` @ d<depth>` appended when the depth is not zero; `wall` or `metric` for a
    /// command's.
    pub fn name(&self) -> String {
        match self.quantity {
            Quantity::Throughput => {}
            Quantity::Wall => return "wall".to_string(),
            Quantity::Metric { .. } => return "metric".to_string(),
        }
        let mut name = match (self.n_prompt, self.n_gen) {
            (p, 0) => format!("pp{p}"),
            (0, g) => format!("tg{g}"),
            (p, g) => format!("pp{p}+tg{g}"),
        };
        if self.n_depth > 0 {
            name.push_str(&format!(" @ d{}", self.n_depth));
        }
        name
    }
}

impl fmt::Display for TestKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

/// The model a row measured, as llama-bench describes it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct ModelId {
    /// `model_filename` as given to llama-bench (a path on the machine that ran it).
    pub filename: String,
    /// `model_type`, e.g. `llama 1B Q4_K - Medium`.
    pub model_type: String,
    /// `model_size`, in bytes.
    pub size_bytes: Option<u64>,
    /// `model_n_params`: parameter count.
    pub n_params: Option<u64>,
}

impl ModelId {
    /// A short label: the file name without directory and without `.gguf`.
    pub fn label(&self) -> String {
        let base = self
            .filename
            .rsplit(['/', '\\'])
            .next()
            .unwrap_or(&self.filename);
        base.strip_suffix(".gguf").unwrap_or(base).to_string()
    }

    /// Whether two rows measured the same model: same type, size and parameter count.
    /// The path is not compared, since the host and the guest see the file at different paths.
    pub fn same_model(&self, other: &ModelId) -> bool {
        self.model_type == other.model_type
            && self.size_bytes == other.size_bytes
            && self.n_params == other.n_params
    }
}

impl fmt::Display for ModelId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({}", self.label(), self.model_type)?;
        if let Some(bytes) = self.size_bytes {
            write!(f, ", {bytes} bytes")?;
        }
        f.write_str(")")
    }
}

/// One test result of one llama-bench run.
#[derive(Clone, Debug, PartialEq)]
pub struct BenchRow {
    /// Which test.
    pub key: TestKey,
    /// Which model.
    pub model: ModelId,
    /// `samples_ts`: one throughput per repetition, in tokens/s (for a `bench --command`
    /// test, its one value, in `unit`).
    pub samples_ts: Vec<f64>,
    /// The unit of `samples_ts` when it is not tokens/s (a command's `seconds`, or its
    /// metric's unit); `None` for llama-bench's rows.
    pub unit: Option<String>,
    /// `build_commit` of the llama.cpp that ran it.
    pub build_commit: Option<String>,
    /// `build_number` of the llama.cpp that ran it.
    pub build_number: Option<i64>,
    /// `backends`, e.g. `Metal,BLAS` or `CPU`.
    pub backends: Option<String>,
    /// `n_threads`.
    pub n_threads: Option<i64>,
    /// `n_gpu_layers`.
    pub n_gpu_layers: Option<i64>,
    /// Every llama-bench setting the row carries ([`SETTING_FIELDS`]), as `(field, value)` with
    /// the value in JSON, in [`SETTING_FIELDS`] order. Rows of one test are only merged when
    /// these agree.
    pub settings: Vec<(String, String)>,
}

/// The fields of a llama-bench result that are settings of the run (its command-line options),
/// not results or descriptions of the machine or model. llama-bench sweeps a comma list given
/// to one option (`-t 1,2`) into one result per value, all with the same test name.
pub const SETTING_FIELDS: &[&str] = &[
    "n_batch",
    "n_ubatch",
    "n_threads",
    "cpu_mask",
    "cpu_strict",
    "poll",
    "type_k",
    "type_v",
    "n_gpu_layers",
    "n_cpu_moe",
    "split_mode",
    "main_gpu",
    "no_kv_offload",
    "flash_attn",
    "devices",
    "tensor_split",
    "tensor_buft_overrides",
    "rpc_servers",
    "use_mmap",
    "use_direct_io",
    "load_mode",
    "embeddings",
    "no_op_offload",
    "no_host",
];

impl BenchRow {
    /// The value of setting `field` in this row, if the row has it.
    pub fn setting(&self, field: &str) -> Option<&str> {
        self.settings
            .iter()
            .find(|(f, _)| f == field)
            .map(|(_, v)| v.as_str())
    }
}

/// The subset of a llama-bench object capshim reads.
#[derive(Deserialize)]
struct RawRow {
    n_prompt: u64,
    n_gen: u64,
    #[serde(default)]
    n_depth: u64,
    samples_ts: Vec<f64>,
    #[serde(default)]
    model_filename: String,
    #[serde(default)]
    model_type: String,
    model_size: Option<u64>,
    model_n_params: Option<u64>,
    build_commit: Option<String>,
    build_number: Option<i64>,
    backends: Option<String>,
    n_threads: Option<i64>,
    n_gpu_layers: Option<i64>,
}

/// Why a file is not usable llama-bench output.
#[derive(Debug, thiserror::Error)]
pub enum ParseError {
    /// The file could not be read.
    #[error("{source}; check the path")]
    Read {
        /// Why: the OS error, not a regular file, or too large.
        source: crate::input_file::InputError,
    },
    /// The file is empty.
    #[error(
        "{path} is empty: llama-bench printed no results (did it fail? look at its stderr); \
         rerun llama-bench with `-o json`"
    )]
    Empty {
        /// The file.
        path: PathBuf,
    },
    /// The file is not JSON or JSON lines.
    #[error(
        "{path} is not llama-bench JSON output ({why}); \
         give a file written by `llama-bench -o json` or `-o jsonl` (the default markdown output cannot be read)"
    )]
    NotJson {
        /// The file.
        path: PathBuf,
        /// What the JSON parser said, with the line.
        why: String,
    },
    /// A JSON object lacks llama-bench's fields.
    #[error(
        "{path}: result {index} is not a llama-bench result ({why}); \
         give a file written by `llama-bench -o json` or `-o jsonl`"
    )]
    NotLlamaBench {
        /// The file.
        path: PathBuf,
        /// 1-based position of the object in the file.
        index: usize,
        /// What is missing or wrong.
        why: String,
    },
    /// A result has no samples.
    #[error(
        "{path}: test {test} (result {index}) has no samples_ts values; \
         rerun llama-bench with -r 1 or more and keep the whole output"
    )]
    NoSamples {
        /// The file.
        path: PathBuf,
        /// 1-based position of the object in the file.
        index: usize,
        /// The test's name.
        test: String,
    },
    /// A sample is not a positive finite throughput.
    #[error(
        "{path}: test {test} (result {index}) has a samples_ts value {value} that is not a positive throughput; \
         the run is broken, rerun it"
    )]
    BadSample {
        /// The file.
        path: PathBuf,
        /// 1-based position of the object in the file.
        index: usize,
        /// The test's name.
        test: String,
        /// The value.
        value: f64,
    },
}

/// The most bytes a llama-bench output file may have: each result is about a kilobyte, plus
/// its samples.
pub const MAX_BYTES: u64 = 256 << 20;

/// Reads and parses a llama-bench `-o json` or `-o jsonl` file: a regular file, or a shell's
/// `<(...)` pipe (see [`crate::input_file`]).
///
/// # Errors
/// [`ParseError`] naming the file when it cannot be read or is not llama-bench output.
pub fn read_bench_file(path: &Path) -> Result<Vec<BenchRow>, ParseError> {
    let text = crate::input_file::read_text(path, MAX_BYTES, "llama-bench JSON output")
        .map_err(|source| ParseError::Read { source })?;
    parse_bench_output(path, &text)
}

/// Parses llama-bench `-o json` (an array) or `-o jsonl` (one object per line) output.
/// `path` is only used in error messages.
///
/// # Errors
/// [`ParseError`] when the text is empty, not JSON, not llama-bench results, or has a
/// result without samples.
pub fn parse_bench_output(path: &Path, text: &str) -> Result<Vec<BenchRow>, ParseError> {
    let trimmed = text.trim_start();
    if trimmed.trim_end().is_empty() {
        return Err(ParseError::Empty {
            path: path.to_path_buf(),
        });
    }
    let not_json = |why: String| ParseError::NotJson {
        path: path.to_path_buf(),
        why,
    };
    let values: Vec<Value> = if trimmed.starts_with('[') {
        serde_json::from_str(trimmed).map_err(|e| {
            if e.is_eof() {
                not_json(format!(
                    "the JSON array ends early at line {} (did llama-bench stop before it finished?)",
                    e.line()
                ))
            } else {
                not_json(format!("{e}"))
            }
        })?
    } else if trimmed.starts_with('{') {
        let mut values = Vec::new();
        for (number, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let value = serde_json::from_str(line)
                .map_err(|e| not_json(format!("line {}: {e}", number + 1)))?;
            values.push(value);
        }
        values
    } else {
        let first = trimmed.lines().next().unwrap_or("");
        let shown: String = first.chars().take(60).collect();
        return Err(not_json(format!("it starts with {shown:?}")));
    };
    if values.is_empty() {
        return Err(ParseError::Empty {
            path: path.to_path_buf(),
        });
    }
    values
        .into_iter()
        .enumerate()
        .map(|(i, value)| row_from_value(path, i + 1, value))
        .collect()
}

fn row_from_value(path: &Path, index: usize, value: Value) -> Result<BenchRow, ParseError> {
    let not_bench = |why: String| ParseError::NotLlamaBench {
        path: path.to_path_buf(),
        index,
        why,
    };
    let Value::Object(map) = &value else {
        return Err(not_bench(format!("expected an object, found {value}")));
    };
    for field in ["n_prompt", "n_gen", "samples_ts"] {
        if !map.contains_key(field) {
            return Err(not_bench(format!("no `{field}` field")));
        }
    }
    let settings: Vec<(String, String)> = SETTING_FIELDS
        .iter()
        .filter_map(|f| map.get(*f).map(|v| ((*f).to_string(), v.to_string())))
        .collect();
    let raw: RawRow = serde_json::from_value(value).map_err(|e| not_bench(e.to_string()))?;
    let key = TestKey {
        n_prompt: raw.n_prompt,
        n_gen: raw.n_gen,
        n_depth: raw.n_depth,
        quantity: Quantity::Throughput,
    };
    if raw.samples_ts.is_empty() {
        return Err(ParseError::NoSamples {
            path: path.to_path_buf(),
            index,
            test: key.name(),
        });
    }
    if let Some(&value) = raw
        .samples_ts
        .iter()
        .find(|v| !(v.is_finite() && **v > 0.0))
    {
        return Err(ParseError::BadSample {
            path: path.to_path_buf(),
            index,
            test: key.name(),
            value,
        });
    }
    Ok(BenchRow {
        unit: None,
        key,
        model: ModelId {
            filename: raw.model_filename,
            model_type: raw.model_type,
            size_bytes: raw.model_size,
            n_params: raw.model_n_params,
        },
        samples_ts: raw.samples_ts,
        build_commit: raw.build_commit,
        build_number: raw.build_number,
        backends: raw.backends,
        n_threads: raw.n_threads,
        n_gpu_layers: raw.n_gpu_layers,
        settings,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two results in llama-bench's exact `-o json` layout (fields abbreviated).
    const JSON: &str = r#"[
  {
    "build_commit": "4fdf7b1",
    "build_number": 7054,
    "cpu_info": "AMD EPYC",
    "gpu_info": "",
    "backends": "CPU",
    "model_filename": "/cache/models/tiny-llama-q4_k_m.gguf",
    "model_type": "llama ?B Q4_K - Medium",
    "model_size": 21555200,
    "model_n_params": 40960000,
    "n_threads": 2,
    "n_gpu_layers": 99,
    "n_prompt": 32,
    "n_gen": 0,
    "n_depth": 0,
    "test_time": "2026-11-30T20:00:00Z",
    "avg_ns": 1000,
    "stddev_ns": 10,
    "avg_ts": 3000.5,
    "stddev_ts": 10.1,
    "samples_ns": [ 1000, 1010 ],
    "samples_ts": [ 3000.5, 2990.1 ]
  },
  {
    "build_commit": "4fdf7b1",
    "build_number": 7054,
    "model_filename": "/cache/models/tiny-llama-q4_k_m.gguf",
    "model_type": "llama ?B Q4_K - Medium",
    "model_size": 21555200,
    "model_n_params": 40960000,
    "n_prompt": 0,
    "n_gen": 8,
    "n_depth": 512,
    "samples_ns": [ 5 ],
    "samples_ts": [ 400.0 ]
  }
]
"#;

    #[test]
    fn reads_json_array_output() {
        let rows = parse_bench_output(Path::new("a.json"), JSON).unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].key.name(), "pp32");
        assert_eq!(rows[0].samples_ts, vec![3000.5, 2990.1]);
        assert_eq!(rows[0].build_number, Some(7054));
        assert_eq!(rows[0].model.label(), "tiny-llama-q4_k_m");
        assert_eq!(rows[1].key.name(), "tg8 @ d512");
        assert!(rows[0].model.same_model(&rows[1].model));
        assert_eq!(rows[0].setting("n_threads"), Some("2"));
        assert_eq!(rows[0].setting("n_gpu_layers"), Some("99"));
        assert_eq!(rows[0].setting("avg_ts"), None);
        assert_eq!(rows[1].setting("n_threads"), None);
    }

    #[test]
    fn reads_jsonl_output() {
        let text = "{\"n_prompt\": 512, \"n_gen\": 0, \"samples_ts\": [1.5]}\n\n{\"n_prompt\": 512, \"n_gen\": 128, \"n_depth\": 0, \"samples_ts\": [2, 3]}\n";
        let rows = parse_bench_output(Path::new("a.jsonl"), text).unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].key.name(), "pp512");
        assert_eq!(rows[1].key.name(), "pp512+tg128");
        assert_eq!(rows[1].samples_ts, vec![2.0, 3.0]);
    }

    #[test]
    fn bad_inputs_name_the_file_and_the_fix() {
        let cases: [(&str, &str); 7] = [
            ("", "is empty"),
            ("[]", "is empty"),
            (
                "| model | size |\n|---|---|\n",
                "default markdown output cannot be read",
            ),
            ("[\n  {\n    \"n_prompt\": 512,\n", "ends early"),
            ("[{\"n_prompt\": 1, \"n_gen\": 0}]", "no `samples_ts` field"),
            (
                "[{\"n_prompt\": 1, \"n_gen\": 0, \"samples_ts\": []}]",
                "has no samples_ts values",
            ),
            (
                "[{\"n_prompt\": 1, \"n_gen\": 0, \"samples_ts\": [-1]}]",
                "not a positive throughput",
            ),
        ];
        for (text, expected) in cases {
            let err = parse_bench_output(Path::new("some/file.json"), text)
                .unwrap_err()
                .to_string();
            assert!(err.contains("some/file.json"), "{err}");
            assert!(err.contains(expected), "{text:?}: {err}");
        }
        let err = parse_bench_output(Path::new("x.json"), "[1]").unwrap_err();
        assert!(err.to_string().contains("result 1"), "{err}");
    }

    #[test]
    fn test_names_follow_llama_bench() {
        let key = |p, g, d| TestKey {
            n_prompt: p,
            n_gen: g,
            n_depth: d,
            quantity: Quantity::Throughput,
        };
        assert_eq!(key(512, 0, 0).name(), "pp512");
        assert_eq!(key(0, 128, 0).name(), "tg128");
        assert_eq!(key(512, 128, 0).name(), "pp512+tg128");
        assert_eq!(key(512, 0, 4096).name(), "pp512 @ d4096");
    }
}
