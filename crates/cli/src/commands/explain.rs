//! `capshim explain`: what a profile will change, before you try it.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use super::out;
use crate::device::DeviceReport;
use crate::explain;
use crate::profile::ProfileArgs;

/// Show what a profile changes: every MTLGPUFamily answer, threadgroup memory and working set
/// before -> after, and what every known consumer decides (llama.cpp, Metal itself,
/// whisper.cpp, PyTorch, MLX, Metal.jl, tinygrad), with warnings for the host chip
#[derive(Debug, Args)]
#[command(after_help = "\
Starts from the stock Apple Paravirtual device's answers (or a `capshim probe --json` file)
and applies the profile with the same policy functions the shim uses: only Apple families
(1001-1999) and threadgroup memory are raised, the working set only when configured, never
lowered; Mac, Common, MacCatalyst and Metal families are never changed.

Each consumer's rules are read from its source, named in the output with its version:
llama.cpp's gates, its GPU family (the flash-attention tuning rows), FWHT sizes and
flash-attention configurations against the threadgroup memory; Metal's bf16 emulation
(off when Apple9 is answered); whisper.cpp on the GPU (Apple7); PyTorch's MPS device
(Mac2, never changed); MLX's residency sets and fast fence (Metal3, never changed) and its
kernel routes (from the architecture name in a --stock probe file). With the host chip
known (--cpu-brand, or this Mac's brand) it warns where a profile picks another chip's
tuning or turns bf16 emulation off on a GPU without bf16 (M1, M2).

Examples:
  capshim explain                                   # the default: native (chip known) or apple9-64k
  capshim explain --cpu-brand \"Apple M1 Ultra (Virtual)\"    # native on an M1 host
  capshim explain --profile apple9-64k --cpu-brand \"Apple M1 Ultra (Virtual)\"
  capshim explain --family-max 1007 --threadgroup-memory 32768 --json
  capshim probe --json > guest.json && capshim explain --stock guest.json --profile native
  capshim explain --stock <(capshim probe --json) --profile native      # in the guest

Exit codes:
  0  explained
  1  error: bad profile options (also a value beyond any known Apple GPU without
     --allow-beyond-hardware), unreadable or invalid --stock file, a FIFO or device given as
     --stock or --profile-file (message on stderr)
  2  usage error")]
pub struct ExplainArgs {
    #[command(flatten)]
    profile: ProfileArgs,
    /// Start from this `capshim probe --json` file instead of the built-in stock answers (a
    /// regular file, or a shell's <(...), never a FIFO or device)
    #[arg(long, value_name = "FILE.json")]
    stock: Option<PathBuf>,
    /// Print JSON: {"profile":…,"before":…,"after":…,"consumers":…}
    #[arg(long)]
    json: bool,
}

/// Runs `capshim explain`.
pub fn execute(args: ExplainArgs) -> anyhow::Result<ExitCode> {
    let profile = args.profile.resolve()?;
    let report = args.stock.as_deref().map(DeviceReport::read).transpose()?;
    let label = args
        .stock
        .as_ref()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    if let Some(warning) = report.as_ref().and_then(|r| r.missing_warning(&label)) {
        crate::term::warning(warning);
    }
    let e = explain::explain(&profile, report.as_ref().map(|r| (label.as_str(), r)));
    if args.json {
        out(&(serde_json::to_string_pretty(&e)? + "\n"))?;
    } else {
        out(&crate::term::paint_explain(&explain::render(&e)))?;
    }
    Ok(ExitCode::SUCCESS)
}
