//! From parsed llama-bench runs to the table: rows merged per test, per-arm statistics,
//! speedups, percent of host, confidence intervals and warnings. `capshim report` and
//! `capshim bench` both go through [`analyze`], so a bundle re-renders exactly.

use std::path::PathBuf;

use serde::Serialize;
use serde::ser::{SerializeMap, Serializer};

use super::stats::{self, Interval};
use crate::llama::{Activation, BenchRow, MetalReport, ModelId, TestKey};

/// What an arm is compared as.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The reference for speedups (a guest without the shim).
    Stock,
    /// The bare-metal reference for percent of host.
    Host,
    /// Any other arm: a profile, a second stock arm for an A/A check...
    Other,
}

/// One llama-bench output file of an arm.
#[derive(Clone, Debug)]
pub struct RunInput {
    /// 1-based round (for a bundle) or file position (for `report --arm`).
    pub round: u32,
    /// Where it came from, for error messages.
    pub path: PathBuf,
    /// Its results.
    pub rows: Vec<BenchRow>,
}

/// One arm's inputs.
#[derive(Clone, Debug)]
pub struct ArmInput {
    /// The arm's name: a column of the table.
    pub name: String,
    /// Its role.
    pub role: Role,
    /// Arms of one bundle share a group; an arm is compared only with the stock and host arms
    /// of its own group, or with a reference that applies to all (an arm without a group, or
    /// one with `reference_for_all`).
    pub group: Option<String>,
    /// Named explicitly with `report --stock` / `--host`: the reference of every arm, whatever
    /// its group.
    pub reference_for_all: bool,
    /// Its llama-bench outputs.
    pub runs: Vec<RunInput>,
    /// What ggml-metal reported in each run, when stderr was captured (bench bundles).
    pub metal: Vec<(u32, MetalReport)>,
    /// What the shim reported, when the run was launched by `capshim bench`.
    pub activation: Option<Activation>,
}

/// Why the inputs cannot be analysed.
#[derive(Debug, thiserror::Error)]
pub enum AnalyzeError {
    /// Two results of one arm measured different models.
    #[error(
        "arm {arm}: {first_path} measured {first} but {other_path} measured {other}; \
         all files of one arm must measure one model: run `capshim report` once per model"
    )]
    ModelMismatch {
        /// The arm.
        arm: String,
        /// File of the first model.
        first_path: PathBuf,
        /// The first model.
        first: String,
        /// File of the other model.
        other_path: PathBuf,
        /// The other model.
        other: String,
    },
    /// Two results of one test in one arm ran with different llama-bench settings: the
    /// message names the arm, the test, the file(s), the field and both values.
    #[error("{0}")]
    SettingsMismatch(String),
    /// Two arms have the same name.
    #[error("two arms are named {0:?}; give each arm its own name")]
    DuplicateArm(String),
    /// An arm has no results.
    #[error("arm {0:?} has no llama-bench results; give it at least one file")]
    EmptyArm(String),
}

/// Statistics of one arm on one test, in tokens/s.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ArmStats {
    /// Median of `samples_ts`, in tokens/s.
    pub median_ts: f64,
    /// Smallest sample, in tokens/s.
    pub min_ts: f64,
    /// Largest sample, in tokens/s.
    pub max_ts: f64,
    /// Number of samples.
    pub samples: usize,
    /// This arm's median / the stock arm's median; `null` for the stock arm itself or without one.
    pub speedup_vs_stock: Option<f64>,
    /// 100 × this arm's median / the host arm's median; `null` for the host arm itself or without one.
    pub percent_of_host: Option<f64>,
    /// 95% bootstrap interval of `speedup_vs_stock`.
    pub speedup_ci95: Option<Interval>,
    /// Coefficient of variation of the samples (standard deviation / mean).
    pub cv: Option<f64>,
    /// Per round (or per file): median and sample count.
    pub rounds: Vec<RoundStats>,
    /// Every sample, in tokens/s, in file order.
    pub samples_ts: Vec<f64>,
}

/// One round's share of an arm's samples.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RoundStats {
    /// 1-based round.
    pub round: u32,
    /// Median of the round's samples, in tokens/s.
    pub median_ts: f64,
    /// Number of samples in the round.
    pub samples: usize,
}

/// An ordered name → value map that serializes as a JSON object in insertion order.
#[derive(Clone, Debug, PartialEq)]
pub struct Ordered<T>(pub Vec<(String, T)>);

impl<T> Ordered<T> {
    /// The value for `name`.
    pub fn get(&self, name: &str) -> Option<&T> {
        self.0.iter().find(|(n, _)| n == name).map(|(_, v)| v)
    }
}

impl<T: Serialize> Serialize for Ordered<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

/// One test: every arm's statistics, `null` where an arm lacks the test.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Row {
    /// llama-bench's name, e.g. `pp512`.
    pub test: String,
    /// Prompt tokens.
    pub n_prompt: u64,
    /// Generated tokens.
    pub n_gen: u64,
    /// Context depth, in tokens.
    pub n_depth: u64,
    /// Model label (file name without `.gguf`).
    pub model: String,
    /// Per arm, in display order.
    pub arms: Ordered<Option<ArmStats>>,
}

/// Everything `report` prints and `bench` stores in `summary.json`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Summary {
    /// One entry per test, in the order llama-bench ran them.
    pub rows: Vec<Row>,
    /// Arm names in display order: host, stock, then the others.
    pub arm_order: Vec<String>,
    /// The stock arm's name, if any.
    pub stock: Option<String>,
    /// The host arm's name, if any.
    pub host: Option<String>,
    /// Each arm's role.
    pub roles: Ordered<Role>,
    /// Each arm's model.
    pub models: Ordered<ModelId>,
    /// What ggml-metal reported per arm (first run; bench bundles only).
    pub capabilities: Ordered<MetalReport>,
    /// What the shim reported per arm (bench bundles only).
    pub activation: Ordered<Activation>,
    /// llama.cpp builds seen, as `build_number (build_commit)`, per arm.
    pub llama_cpp_builds: Ordered<String>,
    /// Things a reader must know before trusting the figures.
    pub warnings: Vec<String>,
}

impl Summary {
    /// Arms that are neither stock nor host, in display order.
    pub fn other_arms(&self) -> Vec<&str> {
        self.arm_order
            .iter()
            .filter(|a| self.roles.get(a) == Some(&Role::Other))
            .map(String::as_str)
            .collect()
    }
}

/// The first llama-bench setting in which two rows differ: field, first value, other value.
/// Only fields both rows have are compared: llama-bench builds add and drop fields.
fn settings_difference(a: &BenchRow, b: &BenchRow) -> Option<(String, String, String)> {
    crate::llama::SETTING_FIELDS.iter().find_map(|field| {
        let (x, y) = (a.setting(field)?, b.setting(field)?);
        (x != y).then(|| ((*field).to_string(), x.to_string(), y.to_string()))
    })
}

struct Merged {
    samples: Vec<f64>,
    rounds: Vec<(u32, Vec<f64>)>,
}

/// Merges, measures and compares the arms.
///
/// # Errors
/// [`AnalyzeError`] when an arm is empty, two arms share a name, or one arm's files measured
/// different models.
pub fn analyze(arms: &[ArmInput]) -> Result<Summary, AnalyzeError> {
    for (i, arm) in arms.iter().enumerate() {
        if arms[..i].iter().any(|a| a.name == arm.name) {
            return Err(AnalyzeError::DuplicateArm(arm.name.clone()));
        }
        if arm.runs.iter().all(|r| r.rows.is_empty()) {
            return Err(AnalyzeError::EmptyArm(arm.name.clone()));
        }
    }
    let mut warnings = Vec::new();

    // Display order: host, stock, others; stable within a role.
    let mut order: Vec<&ArmInput> = Vec::new();
    for role in [Role::Host, Role::Stock, Role::Other] {
        order.extend(arms.iter().filter(|a| a.role == role));
    }

    // One model per arm.
    let mut models = Vec::new();
    for arm in &order {
        let mut first: Option<(&ModelId, &PathBuf)> = None;
        for run in &arm.runs {
            for row in &run.rows {
                match first {
                    None => first = Some((&row.model, &run.path)),
                    Some((model, path)) if !model.same_model(&row.model) => {
                        return Err(AnalyzeError::ModelMismatch {
                            arm: arm.name.clone(),
                            first_path: path.clone(),
                            first: model.to_string(),
                            other_path: run.path.clone(),
                            other: row.model.to_string(),
                        });
                    }
                    Some(_) => {}
                }
            }
        }
        let (model, _) = first.expect("non-empty arm");
        models.push((arm.name.clone(), model.clone()));
    }
    // One set of llama-bench settings per test within an arm; differences across arms are
    // reported.
    let mut arm_settings: Vec<(&str, TestKey, &BenchRow)> = Vec::new();
    for arm in &order {
        let mut firsts: Vec<(&BenchRow, &PathBuf)> = Vec::new();
        for run in &arm.runs {
            for row in &run.rows {
                match firsts.iter().find(|(r, _)| r.key == row.key) {
                    None => firsts.push((row, &run.path)),
                    Some((first, path)) => {
                        if let Some((field, a, b)) = settings_difference(first, row) {
                            return Err(AnalyzeError::SettingsMismatch(format!(
                                "arm {}, test {}: {} ran it with {field} = {a} but {} ran it with \
                                 {field} = {b}; capshim would pool both into one median. Give llama-bench one value \
                                 per option (no comma lists such as `-t 1,2`; with `capshim bench`, pass one value \
                                 after `--`, e.g. `-- -t 8`) and report each setting separately",
                                arm.name,
                                row.key,
                                path.display(),
                                run.path.display()
                            )));
                        }
                    }
                }
            }
        }
        arm_settings.extend(firsts.iter().map(|(r, _)| (arm.name.as_str(), r.key, *r)));
    }
    for (i, (arm, key, row)) in arm_settings.iter().enumerate() {
        if let Some((first_arm, _, first)) = arm_settings[..i].iter().find(|(_, k, _)| k == key) {
            if let Some((field, a, b)) = settings_difference(first, row) {
                warnings.push(format!(
                    "test {key}: arm {first_arm} ran with {field} = {a} but arm {arm} with {field} = {b}: \
                     the arms differ in more than the shim; rerun them with the same llama-bench options"
                ));
            }
        }
    }

    if let Some((first_arm, first_model)) = models.first() {
        for (arm, model) in &models[1..] {
            if !model.same_model(first_model) {
                warnings.push(format!(
                    "arm {arm} measured {model} but arm {first_arm} measured {first_model}: \
                     the comparison is between different models"
                ));
            }
        }
    }

    // Tests in order of first appearance.
    let mut keys: Vec<TestKey> = Vec::new();
    for arm in &order {
        for run in &arm.runs {
            for row in &run.rows {
                if !keys.contains(&row.key) {
                    keys.push(row.key);
                }
            }
        }
    }
    let merged = |arm: &ArmInput, key: TestKey| -> Option<Merged> {
        let mut m = Merged {
            samples: Vec::new(),
            rounds: Vec::new(),
        };
        for run in &arm.runs {
            for row in run.rows.iter().filter(|r| r.key == key) {
                m.samples.extend(&row.samples_ts);
                match m.rounds.iter_mut().find(|(r, _)| *r == run.round) {
                    Some((_, v)) => v.extend(&row.samples_ts),
                    None => m.rounds.push((run.round, row.samples_ts.clone())),
                }
            }
        }
        (!m.samples.is_empty()).then_some(m)
    };
    // Never another bundle's reference: one's own group's, else one meant for every arm.
    let reference = |arm: &ArmInput, role: Role| -> Option<&ArmInput> {
        let global = |a: &&ArmInput| a.role == role && (a.group.is_none() || a.reference_for_all);
        arms.iter()
            .find(|a| a.role == role && a.reference_for_all)
            .or_else(|| {
                arms.iter()
                    .find(|a| a.role == role && a.group.is_some() && a.group == arm.group)
            })
            .or_else(|| arms.iter().find(global))
    };

    let mut rows = Vec::new();
    for key in keys {
        let mut cells = Vec::new();
        for arm in &order {
            let Some(m) = merged(arm, key) else {
                cells.push((arm.name.clone(), None));
                continue;
            };
            let median = stats::median(&m.samples).expect("non-empty");
            let (min, max) = stats::range(&m.samples).expect("non-empty");
            let stock = reference(arm, Role::Stock)
                .filter(|s| s.name != arm.name)
                .and_then(|s| merged(s, key));
            let host = reference(arm, Role::Host)
                .filter(|h| h.name != arm.name)
                .and_then(|h| merged(h, key));
            let cv = stats::coefficient_of_variation(&m.samples);
            let mut noise = Vec::new();
            if let Some(cv) = cv.filter(|cv| *cv > stats::CV_WARNING) {
                noise.push(format!(
                    "samples vary by {:.1}% (coefficient of variation above {:.0}%)",
                    cv * 100.0,
                    stats::CV_WARNING * 100.0
                ));
            }
            let rounds: Vec<RoundStats> = m
                .rounds
                .iter()
                .map(|(round, v)| RoundStats {
                    round: *round,
                    median_ts: stats::median(v).expect("non-empty"),
                    samples: v.len(),
                })
                .collect();
            let round_medians: Vec<f64> = rounds.iter().map(|r| r.median_ts).collect();
            if let Some(drift) =
                stats::round_drift(&round_medians, median).filter(|d| *d > stats::DRIFT_WARNING)
            {
                let each: Vec<String> = rounds
                    .iter()
                    .map(|r| format!("r{} {:.2}", r.round, r.median_ts))
                    .collect();
                noise.push(format!(
                    "round medians drift apart by {:.1}% ({} tokens/s)",
                    drift * 100.0,
                    each.join(", ")
                ));
            }
            if !noise.is_empty() {
                warnings.push(format!(
                    "arm {}, {}: {}: another workload may have been running; rerun on a quiet machine",
                    arm.name,
                    key,
                    noise.join(" and ")
                ));
            }
            let stock_median = stock.as_ref().and_then(|s| stats::median(&s.samples));
            let host_median = host.as_ref().and_then(|h| stats::median(&h.samples));
            cells.push((
                arm.name.clone(),
                Some(ArmStats {
                    median_ts: median,
                    min_ts: min,
                    max_ts: max,
                    samples: m.samples.len(),
                    speedup_vs_stock: stock_median.map(|s| median / s),
                    percent_of_host: host_median.map(|h| 100.0 * median / h),
                    speedup_ci95: stock.as_ref().and_then(|s| {
                        let groups = |m: &Merged| -> Vec<Vec<f64>> {
                            m.rounds.iter().map(|(_, v)| v.clone()).collect()
                        };
                        let (num, den) = (groups(&m), groups(s));
                        let num: Vec<&[f64]> = num.iter().map(Vec::as_slice).collect();
                        let den: Vec<&[f64]> = den.iter().map(Vec::as_slice).collect();
                        stats::bootstrap_ratio_ci(&num, &den)
                    }),
                    cv,
                    rounds,
                    samples_ts: m.samples.clone(),
                }),
            ));
        }
        let label_arm = order
            .iter()
            .find(|a| a.role == Role::Stock)
            .or(order.first())
            .map(|a| a.name.as_str());
        let model = models
            .iter()
            .find(|(n, _)| Some(n.as_str()) == label_arm)
            .map(|(_, m)| m.label())
            .unwrap_or_default();
        rows.push(Row {
            test: key.name(),
            n_prompt: key.n_prompt,
            n_gen: key.n_gen,
            n_depth: key.n_depth,
            model,
            arms: Ordered(cells),
        });
    }

    let mut capabilities = Vec::new();
    let mut activation = Vec::new();
    let mut builds = Vec::new();
    for arm in &order {
        if let Some((_, first)) = arm.metal.first() {
            for (round, other) in &arm.metal[1..] {
                if other != first {
                    warnings.push(format!(
                        "arm {}: ggml-metal reported different capabilities in round {round} ({}) than in round {} ({})",
                        arm.name,
                        other.describe(),
                        arm.metal[0].0,
                        first.describe()
                    ));
                }
            }
            capabilities.push((arm.name.clone(), first.clone()));
        }
        if let Some(a) = &arm.activation {
            if a.expected && !a.activated {
                warnings.push(format!(
                    "arm {}: {}; its figures are a stock guest's, not an unlocked one's",
                    arm.name,
                    a.describe()
                ));
            } else if !a.expected && a.activated {
                warnings.push(format!(
                    "arm {}: the shim hooked {} although this arm runs without it; check the environment for \
                     DYLD_INSERT_LIBRARIES/LD_PRELOAD",
                    arm.name,
                    a.hooked_classes.join(", ")
                ));
            }
            activation.push((arm.name.clone(), a.clone()));
        }
        let mut seen: Vec<String> = Vec::new();
        for row in arm.runs.iter().flat_map(|r| &r.rows) {
            let build = match (&row.build_number, &row.build_commit) {
                (Some(n), Some(c)) => format!("{n} ({c})"),
                (Some(n), None) => n.to_string(),
                (None, Some(c)) => c.clone(),
                (None, None) => continue,
            };
            if !seen.contains(&build) {
                seen.push(build);
            }
        }
        if !seen.is_empty() {
            builds.push((arm.name.clone(), seen.join(", ")));
        }
    }

    let find = |role: Role| {
        order
            .iter()
            .find(|a| a.role == role)
            .map(|a| a.name.clone())
    };
    Ok(Summary {
        rows,
        arm_order: order.iter().map(|a| a.name.clone()).collect(),
        stock: find(Role::Stock),
        host: find(Role::Host),
        roles: Ordered(order.iter().map(|a| (a.name.clone(), a.role)).collect()),
        models: Ordered(models),
        capabilities: Ordered(capabilities),
        activation: Ordered(activation),
        llama_cpp_builds: Ordered(builds),
        warnings,
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A row of `model` with `samples` for test (p, g).
    pub(crate) fn row(model: &str, p: u64, g: u64, samples: &[f64]) -> BenchRow {
        BenchRow {
            key: TestKey {
                n_prompt: p,
                n_gen: g,
                n_depth: 0,
            },
            model: ModelId {
                filename: format!("/m/{model}.gguf"),
                model_type: model.to_string(),
                size_bytes: Some(1000),
                n_params: Some(10),
            },
            samples_ts: samples.to_vec(),
            build_commit: Some("abc123".into()),
            build_number: Some(42),
            backends: None,
            n_threads: None,
            n_gpu_layers: None,
            settings: Vec::new(),
        }
    }

    fn with(mut row: BenchRow, field: &str, value: &str) -> BenchRow {
        row.settings.push((field.into(), value.into()));
        row
    }

    #[test]
    fn each_bundle_is_compared_within_itself() {
        let grouped = |name: &str, role, group: &str, v: f64| {
            let mut a = arm(name, role, vec![vec![row("m", 512, 0, &[v])]]);
            a.group = Some(group.into());
            a
        };
        let inputs = vec![
            grouped("a/host", Role::Host, "a", 200.0),
            grouped("a/stock", Role::Stock, "a", 10.0),
            grouped("b/stock", Role::Stock, "b", 20.0),
            grouped("b/u", Role::Other, "b", 100.0),
        ];
        let s = analyze(&inputs).unwrap();
        let cell = |s: &Summary, arm: &str| s.rows[0].arms.get(arm).unwrap().clone().unwrap();
        assert_eq!(cell(&s, "a/stock").percent_of_host, Some(5.0));
        // b has no host arm: a's is not b's reference.
        assert_eq!(cell(&s, "b/u").percent_of_host, None);
        assert_eq!(cell(&s, "b/stock").percent_of_host, None);
        assert_eq!(cell(&s, "b/u").speedup_vs_stock, Some(5.0));
        // An explicit reference (report --host a/host) applies to every arm.
        let mut explicit = inputs.clone();
        explicit[0].reference_for_all = true;
        let s = analyze(&explicit).unwrap();
        assert_eq!(cell(&s, "b/u").percent_of_host, Some(50.0));
        assert_eq!(cell(&s, "b/u").speedup_vs_stock, Some(5.0));
    }

    #[test]
    fn rows_of_one_test_with_different_settings_are_not_pooled() {
        // `llama-bench -t 1,2` writes two pp512 rows into one file.
        let err = analyze(&[arm(
            "stock",
            Role::Stock,
            vec![vec![
                with(row("m", 512, 0, &[1.0]), "n_threads", "1"),
                with(row("m", 512, 0, &[2.0]), "n_threads", "2"),
            ]],
        )])
        .unwrap_err()
        .to_string();
        for part in [
            "arm stock, test pp512",
            "stock-0.json",
            "n_threads = 1",
            "n_threads = 2",
            "one value per option",
            "after `--`",
        ] {
            assert!(err.contains(part), "{part:?} missing: {err}");
        }
        // Across two files of one arm.
        let err = analyze(&[arm(
            "u",
            Role::Other,
            vec![
                vec![with(row("m", 512, 0, &[1.0]), "flash_attn", "false")],
                vec![with(row("m", 512, 0, &[2.0]), "flash_attn", "true")],
            ],
        )])
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("u-0.json")
                && err.contains("u-1.json")
                && err.contains("flash_attn = false"),
            "{err}"
        );
        // A field only one row has (another llama-bench build) is not a difference.
        analyze(&[arm(
            "u",
            Role::Other,
            vec![
                vec![row("m", 512, 0, &[1.0])],
                vec![with(row("m", 512, 0, &[2.0]), "flash_attn", "true")],
            ],
        )])
        .unwrap();
        // Different tests may differ (llama-bench -p 512 -n 128 in one run is fine).
        analyze(&[arm(
            "u",
            Role::Other,
            vec![vec![
                with(row("m", 512, 0, &[1.0]), "n_threads", "1"),
                with(row("m", 0, 128, &[2.0]), "n_threads", "2"),
            ]],
        )])
        .unwrap();
        // Across arms: a warning, not an error.
        let s = analyze(&[
            arm(
                "stock",
                Role::Stock,
                vec![vec![with(row("m", 512, 0, &[1.0]), "n_gpu_layers", "0")]],
            ),
            arm(
                "u",
                Role::Other,
                vec![vec![with(row("m", 512, 0, &[2.0]), "n_gpu_layers", "99")]],
            ),
        ])
        .unwrap();
        assert!(
            s.warnings.iter().any(|w| w.contains("test pp512")
                && w.contains("n_gpu_layers = 0")
                && w.contains("n_gpu_layers = 99")),
            "{:?}",
            s.warnings
        );
    }

    pub(crate) fn arm(name: &str, role: Role, runs: Vec<Vec<BenchRow>>) -> ArmInput {
        ArmInput {
            name: name.into(),
            role,
            group: None,
            reference_for_all: false,
            runs: runs
                .into_iter()
                .enumerate()
                .map(|(i, rows)| RunInput {
                    round: i as u32 + 1,
                    path: PathBuf::from(format!("{name}-{i}.json")),
                    rows,
                })
                .collect(),
            metal: Vec::new(),
            activation: None,
        }
    }

    #[test]
    fn medians_speedups_and_percent_of_host() {
        let s = analyze(&[
            arm(
                "unlocked",
                Role::Other,
                vec![vec![row("m", 512, 0, &[90.0, 100.0, 110.0])]],
            ),
            arm(
                "stock",
                Role::Stock,
                // even count over two files: median (9 + 11) / 2 = 10
                vec![
                    vec![row("m", 512, 0, &[9.0, 12.0])],
                    vec![row("m", 512, 0, &[11.0, 8.0])],
                ],
            ),
            arm("host", Role::Host, vec![vec![row("m", 512, 0, &[200.0])]]),
        ])
        .unwrap();
        assert_eq!(s.arm_order, vec!["host", "stock", "unlocked"]);
        assert_eq!(s.other_arms(), vec!["unlocked"]);
        let r = &s.rows[0];
        assert_eq!(r.test, "pp512");
        let stock = r.arms.get("stock").unwrap().as_ref().unwrap();
        assert_eq!(
            (stock.median_ts, stock.min_ts, stock.max_ts, stock.samples),
            (10.0, 8.0, 12.0, 4)
        );
        assert_eq!(stock.speedup_vs_stock, None);
        assert_eq!(stock.percent_of_host, Some(5.0));
        assert_eq!(stock.rounds.len(), 2);
        assert_eq!(stock.rounds[0].median_ts, 10.5);
        let unlocked = r.arms.get("unlocked").unwrap().as_ref().unwrap();
        assert_eq!(unlocked.median_ts, 100.0);
        assert_eq!(unlocked.speedup_vs_stock, Some(10.0));
        assert_eq!(unlocked.percent_of_host, Some(50.0));
        assert!(unlocked.speedup_ci95.unwrap().contains(10.0));
        let host = r.arms.get("host").unwrap().as_ref().unwrap();
        assert_eq!(host.percent_of_host, None);
        assert_eq!(host.speedup_vs_stock, Some(20.0));
        // 8..12 around 10 is a large spread: flagged.
        assert!(
            s.warnings
                .iter()
                .any(|w| w.starts_with("arm stock, pp512: samples vary")),
            "{:?}",
            s.warnings
        );
    }

    #[test]
    fn missing_rows_stay_missing() {
        let s = analyze(&[
            arm(
                "stock",
                Role::Stock,
                vec![vec![row("m", 512, 0, &[10.0]), row("m", 0, 128, &[1.0])]],
            ),
            arm(
                "unlocked",
                Role::Other,
                vec![vec![row("m", 512, 0, &[20.0])]],
            ),
        ])
        .unwrap();
        assert_eq!(s.rows.len(), 2);
        assert_eq!(s.rows[1].test, "tg128");
        assert_eq!(s.rows[1].arms.get("unlocked"), Some(&None));
        assert_eq!(s.host, None);
        let json = serde_json::to_value(&s.rows[1]).unwrap();
        assert!(json["arms"]["unlocked"].is_null());
        // Speedup against a stock arm that lacks the test is null, not zero.
        let s = analyze(&[
            arm("stock", Role::Stock, vec![vec![row("m", 512, 0, &[10.0])]]),
            arm("u", Role::Other, vec![vec![row("m", 0, 128, &[20.0])]]),
        ])
        .unwrap();
        let u = s.rows[1].arms.get("u").unwrap().as_ref().unwrap();
        assert_eq!(u.speedup_vs_stock, None);
    }

    #[test]
    fn one_arm_one_model() {
        let err = analyze(&[arm(
            "stock",
            Role::Stock,
            vec![
                vec![row("tiny", 512, 0, &[1.0])],
                vec![row("gemma", 512, 0, &[1.0])],
            ],
        )])
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("stock-0.json") && err.contains("stock-1.json"),
            "{err}"
        );
        assert!(err.contains("run `capshim report` once per model"), "{err}");
        // Different models across arms: allowed, with a warning.
        let s = analyze(&[
            arm(
                "stock",
                Role::Stock,
                vec![vec![row("tiny", 512, 0, &[1.0])]],
            ),
            arm("u", Role::Other, vec![vec![row("gemma", 512, 0, &[1.0])]]),
        ])
        .unwrap();
        assert!(
            s.warnings[0].contains("different models"),
            "{:?}",
            s.warnings
        );
    }

    #[test]
    fn drift_between_rounds_is_flagged() {
        let s = analyze(&[arm(
            "stock",
            Role::Stock,
            vec![
                vec![row("m", 512, 0, &[100.0, 100.1, 100.2])],
                vec![row("m", 512, 0, &[110.0, 110.1, 110.2])],
            ],
        )])
        .unwrap();
        assert!(
            s.warnings
                .iter()
                .any(|w| w.contains("round medians drift apart")),
            "{:?}",
            s.warnings
        );
    }

    #[test]
    fn duplicate_and_empty_arms_are_refused() {
        let a = arm("x", Role::Stock, vec![vec![row("m", 1, 0, &[1.0])]]);
        assert!(matches!(
            analyze(&[a.clone(), a]),
            Err(AnalyzeError::DuplicateArm(_))
        ));
        assert!(matches!(
            analyze(&[arm("y", Role::Other, vec![vec![]])]),
            Err(AnalyzeError::EmptyArm(_))
        ));
    }
}
