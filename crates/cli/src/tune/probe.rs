//! What the catalogue needs to know about this llama.cpp before the knobs are chosen: one short
//! llama-bench process (`-p 0 -n 1 -r 1`, with the arguments after `--`) before the bundle
//! exists, read for the build (`build_number`, `build_commit`) and whether the CPU does part of
//! the work (a CPU-only build, or no layer on the GPU). Its findings are recorded in the
//! bundle's `environment.json` (`probe`).

use std::path::Path;
use std::process::{Command, Stdio};

use serde::Serialize;

use crate::llama::bench_json::parse_bench_output;

/// What the probe found.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Probe {
    /// llama-bench's `build_number`.
    pub build_number: Option<i64>,
    /// llama-bench's `build_commit`.
    pub build_commit: Option<String>,
    /// llama-bench's `backends` (`CPU`, `Metal,BLAS`).
    pub backends: Option<String>,
    /// llama-bench's `n_gpu_layers`.
    pub n_gpu_layers: Option<i64>,
}

impl Probe {
    /// Whether the CPU does part of the work: a build with no other backend than the CPU (and
    /// BLAS, which runs on it), or no layer on the GPU.
    pub fn cpu_work(&self) -> bool {
        let gpu = self.backends.as_deref().is_some_and(|b| {
            b.split(',')
                .map(str::trim)
                .any(|name| !name.is_empty() && name != "CPU" && name != "BLAS")
        });
        !gpu || self.n_gpu_layers == Some(0)
    }
}

/// Runs the probe: `llama_bench -m model -p 0 -n 1 -r 1 -o json EXTRA...`.
///
/// # Errors
/// A text naming llama-bench and what went wrong (it cannot start, fails, or prints no
/// result), with its stderr's last lines.
pub fn probe(llama_bench: &Path, model: &Path, extra: &[String]) -> Result<Probe, String> {
    let output = Command::new(llama_bench)
        .arg("-m")
        .arg(model)
        .args(["-p", "0", "-n", "1", "-r", "1", "-o", "json"])
        .args(extra)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot start {}: {e}", llama_bench.display()))?;
    let tail = || {
        let text = String::from_utf8_lossy(&output.stderr);
        let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
        lines[lines.len().saturating_sub(6)..].join("\n  ")
    };
    if !output.status.success() {
        return Err(format!(
            "{} failed in the probe run that finds its build ({}); its stderr ends with:\n  {}",
            llama_bench.display(),
            output.status,
            tail()
        ));
    }
    let rows =
        parse_bench_output(llama_bench, &String::from_utf8_lossy(&output.stdout)).map_err(|e| {
            format!(
                "the probe run of {} gave no result: {e}",
                llama_bench.display()
            )
        })?;
    let row = rows
        .first()
        .ok_or_else(|| format!("the probe run of {} gave no result", llama_bench.display()))?;
    Ok(Probe {
        build_number: row.build_number,
        build_commit: row.build_commit.clone(),
        backends: row.backends.clone(),
        n_gpu_layers: row.n_gpu_layers,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cpu_works_in_a_cpu_build_or_with_no_layer_on_the_gpu() {
        let probe = |backends: &str, ngl| Probe {
            build_number: Some(1),
            build_commit: None,
            backends: Some(backends.to_string()),
            n_gpu_layers: ngl,
        };
        assert!(probe("CPU", Some(-1)).cpu_work());
        assert!(probe("BLAS,CPU", Some(99)).cpu_work());
        assert!(!probe("Metal,BLAS", Some(99)).cpu_work());
        assert!(!probe("Metal", None).cpu_work());
        assert!(probe("Metal,BLAS", Some(0)).cpu_work());
    }
}
