//! `capshim report --matrix DIR...`: bench and verify bundles of many machines in one table
//! ([`crate::export::matrix`]), and `--llama-json`, their raw llama-bench results with
//! `build_commit` set to the arm's name so that llama.cpp's `compare-llama-bench.py` can put two
//! arms of one build side by side (it pairs results by build commit).
//!
//! Every bundle is opened as `report` opens one ([`super::open`]): checksums, signature when
//! asked, and every derived file derived again and compared. The figures are then read from its
//! `summary.json`, which that check just proved is what its raw files derive to.

use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;
use serde_json::Value;

use super::open::{Opened, Signers, open};
use super::{ReportArgs, UsageError, out};
use crate::bundle::Manifest;
use crate::export::matrix::{self, BenchCell, MachineKey, Matrix, ModelKey, VerifyCell};

/// Reads a bundle's JSON file.
fn json(dir: &Path, name: &str) -> anyhow::Result<Value> {
    let path = dir.join(name);
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("{} is not JSON", path.display()))
}

fn text(v: &Value) -> String {
    v.as_str().unwrap_or_default().to_string()
}

/// The machine and model `environment.json` records.
fn machine_and_model(environment: &Value) -> (MachineKey, ModelKey) {
    let m = &environment["machine"];
    let chip = text(&m["cpu_brand"]);
    let hw_model = text(&m["hw_model"]);
    let os_name = text(&m["os_name"]);
    // Apple names its guests' hardware VirtualMac and their chip "(Virtual)"; a Mac that says
    // neither is the host. Another OS is neither, and the record cannot tell.
    let place = if hw_model.starts_with("VirtualMac") || chip.contains("(Virtual)") {
        "guest"
    } else if os_name == "macOS" {
        "host"
    } else {
        "unknown"
    };
    let os = [os_name, text(&m["os_version"])]
        .into_iter()
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    let file = &environment["files"]["model"];
    let name = Path::new(&text(&file["path"]))
        .file_name()
        .map(|n| n.to_string_lossy().trim_end_matches(".gguf").to_string())
        .unwrap_or_default();
    (
        MachineKey {
            chip,
            os,
            place: place.to_string(),
            hw_model,
        },
        ModelKey {
            sha256: text(&file["sha256"]),
            name,
        },
    )
}

/// A bench bundle's figures, from its checked `summary.json`.
fn bench_cells(dir: &Path, label: &str, matrix: &mut Matrix) -> anyhow::Result<()> {
    let (machine, model) = machine_and_model(&json(dir, "environment.json")?);
    let summary = json(dir, "summary.json")?;
    for row in summary["rows"].as_array().into_iter().flatten() {
        let test = text(&row["test"]);
        // In the summary's display order (host, stock, the others): JSON objects here are read
        // into sorted maps.
        for arm in summary["arm_order"].as_array().into_iter().flatten() {
            let arm = text(arm);
            let stats = &row["arms"][&arm];
            let Some(value) = stats["median_ts"].as_f64() else {
                continue;
            };
            let ci = &stats["speedup_ci95"];
            matrix.bench.push(BenchCell {
                bundle: label.to_string(),
                machine: machine.clone(),
                model: model.clone(),
                arm,
                test: test.clone(),
                value,
                speedup: stats["speedup_vs_stock"].as_f64(),
                ci95: ci["low"].as_f64().zip(ci["high"].as_f64()),
            });
        }
    }
    Ok(())
}

/// A verify bundle's verdicts, from its checked `summary.json` text.
fn verify_cells(
    dir: &Path,
    label: &str,
    summary_json: &str,
    matrix: &mut Matrix,
) -> anyhow::Result<()> {
    let (machine, model) = machine_and_model(&json(dir, "environment.json")?);
    let summary: Value = serde_json::from_str(summary_json)
        .with_context(|| format!("{}/summary.json is not JSON", dir.display()))?;
    // The reference arm first, then the others (read sorted by name).
    let reference = text(&summary["reference"]);
    let mut arms: Vec<(&String, &Value)> =
        summary["arms"].as_object().into_iter().flatten().collect();
    arms.sort_by_key(|(name, _)| **name != reference);
    for (arm, a) in arms {
        matrix.verify.push(VerifyCell {
            bundle: label.to_string(),
            machine: machine.clone(),
            model: model.clone(),
            arm: arm.clone(),
            verdict: text(&a["verdict"]),
            kld_mean: a["kld_mean"].as_f64(),
            kld_p99: a["kld_p99"].as_f64(),
            top1_agreement: a["top1_agreement"].as_f64(),
            ppl_delta: a["ppl_delta"].as_f64(),
        });
    }
    Ok(())
}

/// Appends the raw llama-bench results of a bench bundle's runs that did not fail, each with
/// `build_commit` set to its arm's name.
fn llama_results(dir: &Path, manifest: &Manifest, results: &mut Vec<Value>) -> anyhow::Result<()> {
    for arm in &manifest.arms {
        for run in arm.runs.iter().filter(|r| r.failed.is_none()) {
            let path = dir.join(&run.json);
            let raw = std::fs::read_to_string(&path)
                .with_context(|| format!("cannot read {}", path.display()))?;
            // llama-bench writes a JSON array (-o json) or one object a line (-o jsonl).
            let values: Vec<Value> = match serde_json::from_str::<Value>(&raw) {
                Ok(Value::Array(values)) => values,
                Ok(one) => vec![one],
                Err(_) => raw
                    .lines()
                    .filter(|l| !l.trim().is_empty())
                    .map(serde_json::from_str)
                    .collect::<Result<_, _>>()
                    .with_context(|| format!("{} is not llama-bench JSON", path.display()))?,
            };
            for mut v in values {
                if let Some(object) = v.as_object_mut() {
                    object.insert("build_commit".into(), Value::String(arm.name.clone()));
                }
                results.push(v);
            }
        }
    }
    Ok(())
}

/// Runs `report --matrix` (or `--llama-json`) over `args.bundles`.
///
/// # Errors
/// A usage error for options that do not apply; a bundle that fails its check (exit code 3
/// through [`crate::bundle::BundleError`]); unreadable files.
pub fn report(args: &ReportArgs, signers: Option<&Signers>) -> anyhow::Result<ExitCode> {
    if !args.arms.is_empty() || args.stock.is_some() || args.host.is_some() {
        return Err(UsageError(
            "--matrix and --llama-json take bundle directories only: each bundle's arms are \
             compared with its own stock arm, so --arm, --stock and --host do not apply"
                .into(),
        )
        .into());
    }
    if args.json {
        return Err(UsageError(
            "--matrix prints Markdown (the default), --csv or --svg; --json does not apply to it (--llama-json \
             prints the raw llama-bench results)"
                .into(),
        )
        .into());
    }
    if args.bundles.is_empty() {
        return Err(UsageError(
            "--matrix needs bundle directories, e.g. capshim report --matrix bundle-m1 bundle-m4"
                .into(),
        )
        .into());
    }
    let mut matrix = Matrix::default();
    let mut results = Vec::new();
    for dir in &args.bundles {
        let label = dir.display().to_string();
        match open(dir, signers, false)? {
            // A command's figures (a wall time, a metric) are not llama-bench's tokens/s: a
            // column of them beside llama-bench's would read as tokens/s.
            Opened::Bench(manifest, _) if manifest.workload.is_some() => {
                return Err(UsageError(format!(
                    "{} is a `capshim bench --command` bundle: its figures are the command's (a \
                     wall time or a --metric), not llama-bench's tokens/s, which {} compares \
                     across machines; show it with capshim report {}",
                    dir.display(),
                    if args.llama_json {
                        "--llama-json"
                    } else {
                        "--matrix"
                    },
                    dir.display()
                ))
                .into());
            }
            Opened::Bench(manifest, _) => {
                if args.llama_json {
                    llama_results(dir, &manifest, &mut results)?;
                } else {
                    bench_cells(dir, &label, &mut matrix)?;
                }
            }
            Opened::Verify { summary_json, .. } if !args.llama_json => {
                verify_cells(dir, &label, &summary_json, &mut matrix)?;
            }
            _ => {
                return Err(UsageError(format!(
                    "{} is not a bench bundle{}: give bench bundles{}",
                    dir.display(),
                    if args.llama_json {
                        ""
                    } else {
                        " or a verify bundle"
                    },
                    if args.llama_json {
                        " (only they hold llama-bench results)"
                    } else {
                        " and verify bundles"
                    }
                ))
                .into());
            }
        }
    }
    let text = if args.llama_json {
        serde_json::to_string_pretty(&results)? + "\n"
    } else if args.csv {
        matrix::csv(&matrix)?
    } else if args.svg {
        crate::export::matrix_svg::heatmap(&matrix)?
    } else {
        matrix::markdown(&matrix)
    };
    out(&text)?;
    Ok(ExitCode::SUCCESS)
}
