//! `cargo xtask matrix-bench`: how long `capshim report --matrix` takes over many bundles.
//!
//! Builds capshim in release mode, seals one bench bundle of `--rounds` rounds (two arms,
//! stock and `again=stock`) with a stand-in llama-bench (a shell script printing llama-bench's
//! JSON: no model is loaded, so the bundle takes seconds), copies it `--bundles` times, and
//! times `capshim report --matrix --csv` over all the copies: every one is checked and derived
//! again, as for bundles from different machines. Copies make the same work per bundle as
//! distinct bundles of the same shape would. docs/report.md holds this machine's figure.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{Context, bail};

/// Options of `cargo xtask matrix-bench`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Bundles to report on.
    #[arg(long, default_value_t = 1000, value_name = "N")]
    bundles: usize,
    /// Rounds of the bundle (`capshim bench --rounds`).
    #[arg(long, default_value_t = 12, value_name = "K")]
    rounds: u32,
    /// Where the bundles go [default: target/matrix-bench/<unix time>].
    #[arg(short = 'o', long, value_name = "DIR")]
    output: Option<PathBuf>,
    /// Timed runs of the report (the figure is each run's time and their median).
    #[arg(long, default_value_t = 3, value_name = "K")]
    repeat: usize,
}

/// A stand-in llama-bench: llama-bench's `-o json` for one prompt and one generation test,
/// samples varying with the process id.
const FAKE_LLAMA_BENCH: &str = r#"#!/bin/sh
r=5
while [ $# -gt 0 ]; do
  case "$1" in -r) r=$2; shift ;; esac
  shift
done
echo "ggml_metal_device_init: GPU name:   MTL0 (Apple Paravirtual device)" >&2
echo "ggml_metal_device_init: GPU family: MTLGPUFamilyApple5  (1005)" >&2
w=$(( $$ % 7 ))
samples() {
  i=0; out=""
  while [ $i -lt $r ]; do
    out="$out${out:+, }$(( $1 + w + i % 3 ))"
    i=$((i + 1))
  done
  echo "$out"
}
row() {
  echo "  {\"build_commit\": \"bench01\", \"build_number\": 1, \"backends\": \"Metal\", \"model_filename\": \"/models/m.gguf\", \"model_type\": \"llama 1B Q4_K - Medium\", \"model_size\": 1000, \"model_n_params\": 2000, \"n_prompt\": $1, \"n_gen\": $2, \"n_depth\": 0, \"samples_ts\": [ $(samples $3) ]}"
}
echo "["
row 512 0 1000
echo ","
row 0 128 100
echo "]"
"#;

/// Runs the benchmark and prints the figures on stdout.
pub fn run(args: Args) -> anyhow::Result<()> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .context("xtask has no parent directory")?
        .to_path_buf();
    let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args(["build", "--release", "-p", "capshim-cli"])
        .current_dir(&root)
        .status()
        .context("cannot run cargo build")?;
    if !status.success() {
        bail!("cargo build --release -p capshim-cli failed");
    }
    let capshim = root.join("target/release/capshim");
    let out = args.output.clone().unwrap_or_else(|| {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        root.join(format!("target/matrix-bench/{now}"))
    });
    std::fs::create_dir_all(&out).with_context(|| format!("cannot create {}", out.display()))?;
    let llama = out.join("llama-bench");
    std::fs::write(&llama, FAKE_LLAMA_BENCH)?;
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&llama, std::fs::Permissions::from_mode(0o755))?;
    }
    let model = out.join("m.gguf");
    std::fs::write(&model, b"GGUF stand-in")?;
    let first = out.join("b0");
    let made = Command::new(&capshim)
        .arg("bench")
        .arg("-m")
        .arg(&model)
        .arg("--llama-bench")
        .arg(&llama)
        .args(["--profile", "again=stock", "--rounds"])
        .arg(args.rounds.to_string())
        .arg("-o")
        .arg(&first)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .context("cannot run capshim bench")?;
    if !made.success() {
        bail!("capshim bench with the stand-in llama-bench failed ({made})");
    }
    let mut dirs = vec![first.clone()];
    for i in 1..args.bundles {
        let dir = out.join(format!("b{i}"));
        let copied = Command::new("cp")
            .arg("-R")
            .arg(&first)
            .arg(&dir)
            .status()
            .context("cannot run cp")?;
        if !copied.success() {
            bail!("cp -R {} {} failed", first.display(), dir.display());
        }
        dirs.push(dir);
    }
    let mut seconds = Vec::new();
    for _ in 0..args.repeat.max(1) {
        let start = Instant::now();
        let report = Command::new(&capshim)
            .args(["report", "--matrix", "--csv"])
            .args(&dirs)
            .stdout(Stdio::null())
            .status()
            .context("cannot run capshim report")?;
        let took = start.elapsed().as_secs_f64();
        if !report.success() {
            bail!("capshim report --matrix failed ({report})");
        }
        seconds.push(took);
    }
    let mut sorted = seconds.clone();
    sorted.sort_by(f64::total_cmp);
    let each: Vec<String> = seconds.iter().map(|s| format!("{s:.2} s")).collect();
    println!(
        "capshim report --matrix --csv over {} bundles of {} rounds (2 arms, 2 tests): {} (median {:.2} s, {:.1} ms a bundle)",
        dirs.len(),
        args.rounds,
        each.join(", "),
        sorted[sorted.len() / 2],
        1000.0 * sorted[sorted.len() / 2] / dirs.len() as f64
    );
    Ok(())
}
