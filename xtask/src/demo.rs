//! `cargo xtask demo`: libcapshim in the simulated guest, stock and unlocked side by side.
//!
//! Builds the shim, runs the simulated guest's probe (an Objective-C program on GCC's
//! runtime, asking a simulated paravirtual Metal device) once as shipped and once with
//! `LD_PRELOAD=libcapshim.so` and a profile, and prints every answer and llama.cpp's
//! and Metal's own derived decisions in two columns. The last line checks the probe's
//! decisions against the ones `capshim_profile` predicts for the same profile.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};
use capshim_profile::consumers::{Inputs, LlamaCpp, Metal};
use capshim_profile::device::Answers;
use capshim_profile::{GpuFamily, Profile, env};

/// Options of `cargo xtask demo`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Highest Apple MTLGPUFamily to answer true (1001–1999); the published profile's 1009 by default.
    #[arg(long, default_value_t = 1009)]
    family_max: i64,
    /// Threadgroup memory floor, bytes.
    #[arg(long, default_value_t = 65536)]
    threadgroup_memory: u64,
}

/// Runs the demo and prints the table on stdout.
pub fn run(args: Args) -> anyhow::Result<()> {
    let profile = Profile::new(args.family_max, args.threadgroup_memory, None)
        .map_err(|e| anyhow::anyhow!("--family-max: {e}"))?;
    let guest = capshim_simguest::guest().map_err(|e| anyhow::anyhow!("{e}"))?;
    let shim = build_shim()?;

    let stock = probe(&guest.probe, None, &profile)?;
    let unlocked = probe(&guest.probe, Some(&shim), &profile)?;
    let class = capshim_simguest::PARAVIRTUAL;
    let get = |run: &BTreeMap<String, String>, key: &str| -> String {
        run.get(&format!("{class}.{key}"))
            .cloned()
            .unwrap_or_else(|| "?".into())
    };

    println!(
        "capshim demo: {} in the simulated guest ({class}, GNU Objective-C runtime)",
        relative_to_workspace(&shim).display()
    );
    println!("profile: {profile}\n");
    println!("{:<44} {:>12} {:>12}", "answer", "stock", "unlocked");
    for family in GpuFamily::known() {
        let key = format!("family.{}", family.0);
        let label = format!(
            "supportsFamily: {} ({})",
            family.name().unwrap_or("?"),
            family.0
        );
        row(&label, &get(&stock.0, &key), &get(&unlocked.0, &key));
    }
    for (label, key) in [
        (
            "maxThreadgroupMemoryLength (bytes)",
            "max_threadgroup_memory",
        ),
        (
            "recommendedMaxWorkingSetSize (bytes)",
            "recommended_working_set_size",
        ),
    ] {
        row(label, &get(&stock.0, key), &get(&unlocked.0, key));
    }
    println!("\nllama.cpp (ggml_metal_device_init) decides");
    for (label, key) in [
        ("simdgroup reduction", "llama.simdgroup_reduction"),
        ("simdgroup matrix mul.", "llama.simdgroup_mm"),
        ("has bfloat", "llama.bfloat"),
        ("has tensor", "llama.tensor"),
    ] {
        row(label, &get(&stock.0, key), &get(&unlocked.0, key));
    }
    let unlocked_answers = Answers::paravirtual_stock().with_profile(&profile);
    let predicted = LlamaCpp::decide(&Inputs::new(&unlocked_answers), false);
    let before = LlamaCpp::decide(&Inputs::new(&Answers::paravirtual_stock()), false);
    row(
        "ops sent to the CPU",
        &before.cpu_fallback_ops.len().to_string(),
        &predicted.cpu_fallback_ops.len().to_string(),
    );
    println!("\nMetal (_MTLDevice) decides");
    let metal_key = "metal.bf16_emulation";
    row(
        "bf16 emulation (requiresBFloat16Emulation)",
        &get(&stock.0, metal_key),
        &get(&unlocked.0, metal_key),
    );
    let metal_predicted = Metal::decide(&Inputs::new(&unlocked_answers));
    println!("\nwhat the shim said in the unlocked run:");
    for line in unlocked.1.lines().filter(|l| l.starts_with("capshim:")) {
        println!("  {line}");
    }
    let llama_matches = ["simdgroup_reduction", "simdgroup_mm", "bfloat", "tensor"]
        .iter()
        .all(|flag| get(&unlocked.0, &format!("llama.{flag}")) == predicted.flag(flag).to_string());
    let metal_matches = get(&unlocked.0, metal_key) == metal_predicted.bf16_emulation.to_string();
    if !(llama_matches && metal_matches) {
        bail!("the probe's decisions differ from capshim_profile's prediction for this profile");
    }
    println!(
        "\nthe probe's decisions (llama.cpp's and Metal's) match capshim_profile's prediction for this profile"
    );
    Ok(())
}

/// `path` relative to the workspace root when it lies inside it (`target/release/...`), so
/// the demo's output names no build machine's folders; otherwise `path` itself.
fn relative_to_workspace(path: &Path) -> &Path {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    match root.canonicalize() {
        Ok(root) => path.strip_prefix(&root).unwrap_or(path),
        Err(_) => path,
    }
}

fn row(label: &str, stock: &str, unlocked: &str) {
    let mark = if stock == unlocked {
        ""
    } else {
        "  <- changed"
    };
    println!("{label:<44} {stock:>12} {unlocked:>12}{mark}");
}

/// Builds libcapshim.so in release mode and returns its path.
fn build_shim() -> anyhow::Result<PathBuf> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let status = Command::new(cargo)
        .args(["build", "--release", "--quiet", "-p", "capshim"])
        .status()
        .context("running cargo build -p capshim")?;
    if !status.success() {
        bail!("cargo build --release -p capshim failed ({status})");
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target"));
    let so = target.join("release/libcapshim.so");
    if !so.exists() {
        bail!("{} was not produced by cargo build", so.display());
    }
    Ok(so.canonicalize()?)
}

/// Runs the probe, stock or with the shim and `profile`; returns its answers and stderr.
fn probe(
    probe: &Path,
    shim: Option<&Path>,
    profile: &Profile,
) -> anyhow::Result<(BTreeMap<String, String>, String)> {
    let mut cmd = Command::new(probe);
    for (name, _) in std::env::vars_os() {
        if capshim_profile::env::is_capshim_var(name.as_encoded_bytes()) || name == "LD_PRELOAD" {
            cmd.env_remove(name);
        }
    }
    if let Some(shim) = shim {
        cmd.env("LD_PRELOAD", shim).envs(env::vars_for(profile));
    }
    let out = cmd
        .output()
        .with_context(|| format!("running {}", probe.display()))?;
    if !out.status.success() {
        bail!(
            "{} failed ({}): {}",
            probe.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok((
        capshim_simguest::parse(&String::from_utf8_lossy(&out.stdout)),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    ))
}
