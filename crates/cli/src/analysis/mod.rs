//! From parsed llama-bench runs to the table: rows merged per test, per-arm statistics,
//! speedups, percent of host, confidence intervals and warnings. `capshim report` and
//! `capshim bench` both go through [`analyze`], so a bundle re-renders exactly.
//!
//! - [`input`]: the arms and runs `analyze` reads.
//! - [`summary`]: the [`Summary`] it returns (`summary.json`).
//! - [`rows`]: one row per test, each arm against its stock and host references.
//! - [`stats`]: medians, ranges, variation, drift.
//! - [`interval`]: the speedup's interval from paired rounds, its verdict and precision.
//! - [`family`]: schema 6's family-wise verdicts, each read at `1 − 0.05/m`.
//! - [`design`], `checks`: schema 6's carry-over estimate and unequal-durations check.
//! - [`ranks`]: the signed-rank statistic, Walsh averages, normal and t quantiles.
//! - [`warnings`]: the text of every warning.
//! - [`host`]: schema 6's percent of host from several host processes, with its two-sample
//!   interval, or from one, rounded and marked.
//! - [`across`]: comparisons outside one bench's random order (no interval), and the host
//!   overhead per generated token.

pub mod across;
#[cfg(test)]
mod calibration;
#[cfg(test)]
mod calibration6;
#[cfg(test)]
mod calibration_host;
mod checks;
pub mod design;
pub mod family;
pub mod host;
pub mod input;
pub mod interval;
pub mod ranks;
mod rows;
#[cfg(test)]
pub(crate) mod sim;
pub mod stats;
mod summary;
#[cfg(test)]
pub(crate) mod tests;
mod warnings;

use std::path::PathBuf;

use crate::llama::{Activation, BenchRow, MetalReport, ModelId, TestKey};

pub use input::{ArmInput, Derivation, Options, Role, RunInput};
pub use summary::{
    ArmStats, FamilyVerdict, Method, Ordered, SCHEMA_VERSION, Summary, VerdictFamily,
};

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

/// The first llama-bench setting in which two rows differ: field, first value, other value.
/// Only fields both rows have are compared: llama-bench builds add and drop fields.
fn settings_difference(a: &BenchRow, b: &BenchRow) -> Option<(String, String, String)> {
    crate::llama::SETTING_FIELDS.iter().find_map(|field| {
        let (x, y) = (a.setting(field)?, b.setting(field)?);
        (x != y).then(|| ((*field).to_string(), x.to_string(), y.to_string()))
    })
}

/// Merges, measures and compares the arms, as schema 5 derives them: [`analyze_with`] and
/// [`Derivation::Schema5`].
///
/// # Errors
/// [`AnalyzeError`] when an arm is empty, two arms share a name, or one arm's files measured
/// different models.
pub fn analyze(arms: &[ArmInput]) -> Result<Summary, AnalyzeError> {
    analyze_with(arms, &Options::default())
}

/// The interval's method in words, as schema 5 states it.
const INTERVAL_SCHEMA_5: &str = "paired rounds: per round, ln(arm median / stock median); the Wilcoxon \
                       signed-rank (Hodges-Lehmann) interval of those, exact when the rounds ran in \
                       capshim bench's random arm order (else a warning names the arm)";

/// The interval's method in words, as schema 6 states it (docs/bench.md, "What is exact").
const INTERVAL_SCHEMA_6: &str = "paired rounds: per round, ln(arm median / stock median); the Wilcoxon \
    signed-rank (Hodges-Lehmann) interval of those. Its level holds by the random arm order when \
    the arm changes speed by a constant factor and nothing an arm does carries over to later \
    processes; it is approximate under carry-over, for arms of very different durations under \
    wall-clock disturbances, and for rounds not run in capshim bench's random order (warnings \
    say which); an effect that is not constant is estimated as the pseudo-median of the round ratios";

/// Merges, measures and compares the arms, following `options.derivation`.
///
/// # Errors
/// [`AnalyzeError`] when an arm is empty, two arms share a name, or one arm's files measured
/// different models.
pub fn analyze_with(arms: &[ArmInput], options: &Options) -> Result<Summary, AnalyzeError> {
    let derivation = options.derivation;
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

    let models = one_model_per_arm(&order)?;
    one_setting_per_test(&order, &mut warnings)?;
    // Only the pairs a speedup or percent of host is computed from: arms of different bundles
    // that are never compared may measure different models. Each pair once: the host against
    // stock and stock against the host are one disagreement.
    let mut warned: Vec<(&str, &str)> = Vec::new();
    for arm in &order {
        let model = &models
            .iter()
            .find(|(n, _)| *n == arm.name)
            .expect("every arm")
            .1;
        for role in [Role::Stock, Role::Host] {
            let Some(reference) = rows::reference(arms, arm, role).filter(|r| r.name != arm.name)
            else {
                continue;
            };
            let (_, theirs) = models
                .iter()
                .find(|(n, _)| *n == reference.name)
                .expect("every arm");
            let pair = (arm.name.as_str(), reference.name.as_str());
            if !model.same_model(theirs) && !warned.contains(&(pair.1, pair.0)) {
                warned.push(pair);
                warnings.push(warnings::different_models(
                    &arm.name,
                    model,
                    &reference.name,
                    theirs,
                ));
            }
        }
    }
    let mut rows = rows::rows(arms, &order, &models, derivation, &mut warnings);
    let schema6 = derivation == Derivation::Schema6;
    let verdicts = schema6.then(|| family::apply(&mut rows));
    let process_seconds =
        schema6.then(|| checks::apply(&mut rows, arms, &options.sequences, &mut warnings));
    let reported = reported(&order, &mut warnings);

    let find = |role: Role| {
        order
            .iter()
            .find(|a| a.role == role)
            .map(|a| a.name.clone())
    };
    Ok(Summary {
        schema_version: derivation.schema_version(),
        statistics: Method {
            confidence_level: interval::CONFIDENCE_LEVEL,
            noise_band: interval::NOISE,
            min_rounds: interval::MIN_ROUNDS,
            interval: match derivation {
                Derivation::Schema5 => INTERVAL_SCHEMA_5,
                Derivation::Schema6 => INTERVAL_SCHEMA_6,
            },
            verdicts,
        },
        rows,
        arm_order: order.iter().map(|a| a.name.clone()).collect(),
        stock: find(Role::Stock),
        host: find(Role::Host),
        roles: Ordered(order.iter().map(|a| (a.name.clone(), a.role)).collect()),
        models: Ordered(models),
        capabilities: Ordered(reported.capabilities),
        activation: Ordered(reported.activation),
        llama_cpp_builds: Ordered(reported.builds),
        process_seconds,
        warnings,
    })
}

/// Each arm's model, in `order`.
///
/// # Errors
/// [`AnalyzeError::ModelMismatch`] when one arm's files measured different models.
fn one_model_per_arm(order: &[&ArmInput]) -> Result<Vec<(String, ModelId)>, AnalyzeError> {
    let mut models = Vec::new();
    for arm in order {
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
    Ok(models)
}

/// One set of llama-bench settings per test within an arm; differences across arms are
/// added to `warnings`.
///
/// # Errors
/// [`AnalyzeError::SettingsMismatch`] naming the arm, test, files, field and values.
fn one_setting_per_test(
    order: &[&ArmInput],
    warnings: &mut Vec<String>,
) -> Result<(), AnalyzeError> {
    let mut arm_settings: Vec<(&ArmInput, TestKey, &BenchRow)> = Vec::new();
    for arm in order {
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
        arm_settings.extend(firsts.iter().map(|(r, _)| (*arm, r.key, *r)));
    }
    for (i, (arm, key, row)) in arm_settings.iter().enumerate() {
        if let Some((first_arm, _, first)) = arm_settings[..i].iter().find(|(_, k, _)| k == key) {
            if let Some((field, a, b)) = settings_difference(first, row) {
                warnings.push(warnings::settings_differ(
                    *key,
                    &first_arm.name,
                    &arm.name,
                    (&field, &a, &b),
                    !(first_arm.args.is_empty() && arm.args.is_empty()),
                ));
            }
        }
    }
    Ok(())
}

/// What the runs of each arm reported, by arm name.
struct Reported {
    /// What ggml-metal reported in the first run.
    capabilities: Vec<(String, MetalReport)>,
    /// What the shim reported.
    activation: Vec<(String, Activation)>,
    /// The llama.cpp builds seen, as `build_number (build_commit)`.
    builds: Vec<(String, String)>,
}

/// What the arms in `order` reported; capabilities that change between rounds and an arm
/// whose shim did not do what its role expects are added to `warnings`.
fn reported(order: &[&ArmInput], warnings: &mut Vec<String>) -> Reported {
    let mut capabilities = Vec::new();
    let mut activation = Vec::new();
    let mut builds = Vec::new();
    for arm in order {
        if let Some((_, first)) = arm.metal.first() {
            for (round, other) in &arm.metal[1..] {
                if other != first {
                    warnings.push(warnings::capabilities_differ(
                        &arm.name,
                        (*round, &other.describe()),
                        (arm.metal[0].0, &first.describe()),
                    ));
                }
            }
            capabilities.push((arm.name.clone(), first.clone()));
        }
        if let Some(a) = &arm.activation {
            if a.expected && !a.activated {
                warnings.push(warnings::not_activated(&arm.name, &a.describe()));
            } else if !a.expected && a.activated {
                warnings.push(warnings::hooked_without_shim(&arm.name, &a.hooked_classes));
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
    Reported {
        capabilities,
        activation,
        builds,
    }
}
