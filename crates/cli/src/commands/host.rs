//! `capshim host`: the host Mac's preference for the unrestricted paravirtual device.

use std::process::ExitCode;

use clap::Args;

use super::out;
use crate::deploy::host::{self, Action, HostError, REMINDER, System};

/// Exit code when the command needs the macOS host and this is another system.
pub const EXIT_NOT_MACOS: u8 = 2;
/// Exit code when run inside a macOS guest.
pub const EXIT_IN_GUEST: u8 = 3;

/// Manage the host Mac's ParavirtualizedGraphics preference that unlocks guests' GPU answers
#[derive(Debug, Args)]
#[command(after_help = "\
Run on the host Mac (not in the guest). Manages the user default
com.apple.gpusw.ParavirtualizedGraphics ForceUnrestrictedDeviceFeatureLevel (bool) with
`defaults`; the host reads it when a VM starts, so stop and start each VM afterwards.
Refuses inside a guest (sysctl kern.hv_vmm_present = 1).

Examples:
  capshim host status
  capshim host enable
  capshim host disable --dry-run

Exit codes:
  0  done (status: printed)
  1  error: `defaults` or `sysctl` failed (message on stderr)
  2  usage error, or not macOS (without --dry-run)
  3  refused: this Mac is a VM guest")]
pub struct HostArgs {
    #[command(subcommand)]
    action: Action,

    /// Print the exact commands instead of running them (works on any system)
    #[arg(long, global = true)]
    dry_run: bool,
}

/// Runs `capshim host`.
pub fn execute(args: HostArgs) -> anyhow::Result<ExitCode> {
    if args.dry_run {
        out(&host::dry_run(args.action))?;
        return Ok(ExitCode::SUCCESS);
    }
    if !cfg!(target_os = "macos") {
        eprintln!(
            "capshim: error: capshim host needs the macOS host that runs the VMs (this is {}); use --dry-run to see the commands",
            std::env::consts::OS
        );
        return Ok(ExitCode::from(EXIT_NOT_MACOS));
    }
    match host::apply(args.action, &mut System) {
        Ok(state) => {
            out(&format!("{}\n", host::describe(state)))?;
            if args.action != Action::Status {
                out(&format!("{REMINDER}\n"))?;
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(e @ HostError::InGuest(_)) => {
            crate::term::error(e);
            Ok(ExitCode::from(EXIT_IN_GUEST))
        }
        Err(e) => Err(e.into()),
    }
}
