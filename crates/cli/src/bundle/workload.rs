//! What a `bench --command` bundle measured, as its manifest records it (`environment.json`'s
//! `bundle.workload`), and how one run's value is read back from its primary files: the wall
//! time from the process record, or the number a regular expression finds in the command's
//! output. The bench that ran it and `capshim report` read the values the same way, here.

use serde::{Deserialize, Serialize};

use crate::llama::BenchRow;
use crate::llama::bench_json::{ModelId, Quantity, TestKey};

/// The unit of a metric without `--unit`.
pub const DEFAULT_UNIT: &str = "value";

/// A `bench --command` workload: the command and what is measured of it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Workload {
    /// The command as given (`--command`), run as `sh -c COMMAND` with an arm's
    /// `command-args` appended, each word shell-quoted.
    pub command: String,
    /// `wall` (the process's wall time, seconds, lower is better) or `metric`.
    pub measure: Measure,
    /// With `metric`: the regular expression whose first capture group is the value
    /// (`--metric`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub regex: Option<String>,
    /// With `metric`: whether a lower value is better (`--lower-is-better`).
    #[serde(default)]
    pub lower_is_better: bool,
    /// The figures' unit: `seconds` for `wall`; `--unit` (else `value`) for `metric`.
    pub unit: String,
}

/// What is measured of a command.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Measure {
    /// The wall time of the whole `sh -c` process, seconds.
    Wall,
    /// A number printed by the command.
    Metric,
}

/// Why a run's value cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum ValueError {
    /// `--metric` is not a regular expression with a capture group.
    #[error(
        "--metric {regex:?} {why}; give a regular expression whose first group captures the number, e.g. --metric 'tokens/s: ([0-9.]+)'"
    )]
    BadRegex {
        /// The expression.
        regex: String,
        /// What is wrong.
        why: String,
    },
}

impl Workload {
    /// The test its rows carry: `wall` or `metric`, with the way that is better.
    pub fn key(&self) -> TestKey {
        TestKey::command(match self.measure {
            Measure::Wall => Quantity::Wall,
            Measure::Metric => Quantity::Metric {
                lower_is_better: self.lower_is_better,
            },
        })
    }

    /// The compiled `--metric` expression (`None` for `wall`).
    ///
    /// # Errors
    /// [`ValueError::BadRegex`] when it does not compile or has no capture group.
    pub fn regex(&self) -> Result<Option<regex::Regex>, ValueError> {
        let Some(text) = &self.regex else {
            return Ok(None);
        };
        let bad = |why: String| ValueError::BadRegex {
            regex: text.clone(),
            why,
        };
        let re = regex::Regex::new(text).map_err(|e| bad(format!("is not valid: {e}")))?;
        if re.captures_len() < 2 {
            return Err(bad("has no capture group `(...)` around the number".into()));
        }
        Ok(Some(re))
    }

    /// The analysis row of one run whose value is `value`, in [`Workload::unit`].
    pub fn row(&self, value: f64) -> BenchRow {
        BenchRow {
            key: self.key(),
            model: ModelId {
                filename: "command".to_string(),
                model_type: "command".to_string(),
                size_bytes: None,
                n_params: None,
            },
            samples_ts: vec![value],
            unit: Some(self.unit.clone()),
            build_commit: None,
            build_number: None,
            backends: None,
            n_threads: None,
            n_gpu_layers: None,
            settings: Vec::new(),
        }
    }
}

/// The value the first capture group of `re` finds in `stdout`, else in `stderr`: the first
/// match of the first output that has one. `Err` says why there is none, naming the regex.
pub fn metric_value(re: &regex::Regex, stdout: &str, stderr: &str) -> Result<f64, String> {
    for (text, name) in [(stdout, "stdout"), (stderr, "stderr")] {
        let Some(caps) = re.captures(text) else {
            continue;
        };
        let found = caps.get(1).map_or("", |m| m.as_str());
        return match found.trim().parse::<f64>() {
            Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
            // Speedups are ratios of values, and their logarithms are taken: 0 or below is
            // no measurement of a rate, a time or a size.
            Ok(v) if v.is_finite() => Err(format!(
                "--metric {:?} matched {:?} in its {name}, which is not a positive number (a \
                 measured value must be above 0)",
                re.as_str(),
                found
            )),
            _ => Err(format!(
                "--metric {:?} matched {:?} in its {name}, which is not a finite number",
                re.as_str(),
                found
            )),
        };
    }
    Err(format!(
        "no match of --metric {:?} in its stdout or stderr",
        re.as_str()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn metric(regex: &str) -> Workload {
        Workload {
            command: "true".into(),
            measure: Measure::Metric,
            regex: Some(regex.into()),
            lower_is_better: false,
            unit: DEFAULT_UNIT.into(),
        }
    }

    #[test]
    fn the_first_group_of_the_first_match_is_read_stdout_before_stderr() {
        let re = metric(r"tokens/s: ([0-9.]+)").regex().unwrap().unwrap();
        let out = "warmup\ntokens/s: 12.5\ntokens/s: 99\n";
        assert_eq!(metric_value(&re, out, "tokens/s: 7"), Ok(12.5));
        assert_eq!(metric_value(&re, "nothing", "tokens/s: 7"), Ok(7.0));
        let none = metric_value(&re, "nothing", "").unwrap_err();
        assert!(
            none.contains("no match of --metric") && none.contains("tokens/s"),
            "{none}"
        );
        let re = metric(r"v=(\S+)").regex().unwrap().unwrap();
        let nan = metric_value(&re, "v=abc", "").unwrap_err();
        assert!(nan.contains("not a finite number"), "{nan}");
        let re = metric(r"v: (\S+)").regex().unwrap().unwrap();
        for value in ["0", "-2.5", "0.0"] {
            let e = metric_value(&re, &format!("v: {value}"), "").unwrap_err();
            assert!(
                e.contains(&format!(
                    "matched \"{value}\" in its stdout, which is not a positive"
                )) && e.contains("--metric \"v: ("),
                "{e}"
            );
        }
        assert_eq!(metric_value(&re, "v: 1e-300", ""), Ok(1e-300));
    }

    #[test]
    fn a_regex_without_a_group_or_invalid_is_refused() {
        let e = metric("tokens/s").regex().unwrap_err().to_string();
        assert!(e.contains("no capture group"), "{e}");
        let e = metric("(").regex().unwrap_err().to_string();
        assert!(e.contains("is not valid"), "{e}");
    }

    #[test]
    fn wall_is_lower_is_better_and_named_wall() {
        let w = Workload {
            measure: Measure::Wall,
            regex: None,
            unit: "seconds".into(),
            ..metric("x")
        };
        assert_eq!(w.key().name(), "wall");
        assert!(w.key().quantity.lower_is_better());
        assert!(!metric("(x)").key().quantity.lower_is_better());
        assert_eq!(metric("(x)").key().name(), "metric");
    }
}
