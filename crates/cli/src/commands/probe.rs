//! `capshim probe`: the Metal device as this process sees it (macOS).

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};

use anyhow::{Context, bail};
use clap::Args;
use serde::Serialize;

use super::out;
use crate::device::{self, DeviceReport};
use crate::launch::environment::{ScopeArg, ShimSettings, child_env};
use crate::launch::status::Summary;
use crate::launch::{Os, dylib};
use crate::platform::facts::{self, SystemFacts};
use crate::profile::ProfileArgs;

/// Exit code on systems without Metal.
pub const EXIT_NO_METAL: u8 = 2;

/// Print the default Metal device's answers: name, architecture name, every MTLGPUFamily,
/// threadgroup memory, working set, max buffer length, unified memory, and what llama.cpp
/// derives (macOS)
#[derive(Debug, Args)]
#[command(after_help = "\
Creates the default Metal device (MTLCreateSystemDefaultDevice) and reads its answers. Run
under `capshim run` it shows the shimmed view; --compare runs itself twice, stock and with
the shim (profile options apply), and prints both side by side with the activation line.
--json prints the same shape as `capshim explain --json`'s \"before\" (plus more keys), so a
guest's real answers can be fed back with `capshim explain --stock FILE.json`.

Examples:
  capshim probe
  capshim probe --json > guest.json
  capshim run --profile native -- capshim probe
  capshim probe --compare --profile native

Exit codes:
  0  printed
  1  error: Metal returned no device, or a --compare run failed
  2  not macOS with Metal, or usage error")]
pub struct ProbeArgs {
    /// Print JSON: {"name":…,"architecture":…,"families":{"1001":true,…},"max_threadgroup_memory":…,…}
    #[arg(long)]
    json: bool,

    /// Probe stock and shimmed (with the profile options) and print both
    #[arg(long)]
    compare: bool,

    #[command(flatten)]
    profile: ProfileArgs,

    /// With --compare: the shim library to inject (default: searched like `capshim run`)
    #[arg(long, value_name = "PATH", requires = "compare")]
    dylib: Option<PathBuf>,
}

/// `--compare --json` output.
#[derive(Debug, Serialize)]
struct Comparison {
    profile: String,
    stock: DeviceReport,
    shimmed: DeviceReport,
    activated: bool,
    summary: String,
}

/// Runs this executable's `probe --json` with `settings` and parses what it prints.
fn probe_child(exe: &Path, settings: &ShimSettings, what: &str) -> anyhow::Result<DeviceReport> {
    let output = Command::new(exe)
        .args(["probe", "--json"])
        .env_clear()
        .envs(child_env(std::env::vars_os(), settings, Os::current()))
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("cannot run {} for the {what} probe", exe.display()))?;
    if !output.status.success() {
        bail!(
            "the {what} probe failed ({}); its messages are above",
            output.status
        );
    }
    let text = String::from_utf8_lossy(&output.stdout);
    Ok(DeviceReport::from_json(
        Path::new(&format!("the {what} probe's output")),
        &text,
    )?)
}

fn compare(args: &ProbeArgs) -> anyhow::Result<ExitCode> {
    let resolved = args.profile.resolve()?;
    if resolved.profile.is_none() {
        bail!(
            "--compare with --profile stock compares stock with stock; pick another profile (default: native, or apple9-64k where the host chip is not known)"
        );
    }
    let os = Os::current();
    let library = dylib::locate(args.dylib.as_deref(), os)?;
    dylib::check(&library, os)?;
    let exe = std::env::current_exe().context("cannot find the capshim executable to re-run")?;
    let status_file = tempfile::Builder::new()
        .prefix("capshim-status-")
        .suffix(".jsonl")
        .tempfile()
        .context("cannot create the status file; set TMPDIR to a writable folder")?;
    let stock_settings = ShimSettings {
        profile: None,
        library: library.clone(),
        scope: ScopeArg::Process,
        only_process: None,
        log: None,
        status_file: None,
    };
    let shim_settings = ShimSettings {
        profile: resolved.profile,
        status_file: Some(status_file.path().to_path_buf()),
        ..stock_settings.clone()
    };
    let stock = probe_child(&exe, &stock_settings, "stock")?;
    let shimmed = probe_child(&exe, &shim_settings, "shimmed")?;
    let summary = Summary::read_file(status_file.path());
    if args.json {
        let c = Comparison {
            profile: resolved.to_string(),
            stock,
            shimmed,
            activated: summary.activated(),
            summary: summary.line(),
        };
        out(&(serde_json::to_string_pretty(&c)? + "\n"))?;
    } else {
        out(&format!(
            "profile {resolved}\n{}",
            device::render_compare(&stock, &shimmed)
        ))?;
    }
    crate::term::activation(&summary.line());
    Ok(ExitCode::SUCCESS)
}

/// Runs `capshim probe`.
pub fn execute(args: ProbeArgs) -> anyhow::Result<ExitCode> {
    if !cfg!(target_os = "macos") {
        eprintln!(
            "capshim: error: capshim probe needs macOS with Metal (this is {}); `capshim explain` shows a stock guest's answers and what a profile changes",
            std::env::consts::OS
        );
        return Ok(ExitCode::from(EXIT_NO_METAL));
    }
    if args.compare {
        return compare(&args);
    }
    if args.profile != ProfileArgs::default() {
        bail!(
            "profile options apply only with --compare; to probe with the shim run `capshim run [profile options] -- capshim probe`"
        );
    }
    let report = facts::Real::default()
        .metal_device()
        .map_err(anyhow::Error::msg)?;
    if args.json {
        out(&(serde_json::to_string_pretty(&report)? + "\n"))?;
    } else {
        out(&device::render(&report))?;
    }
    Ok(ExitCode::SUCCESS)
}
