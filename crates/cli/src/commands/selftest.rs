//! `capshim selftest`: does this machine's GPU really do what a profile claims?

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use capshim_profile::device::Answers;
use clap::Args;

use super::{UsageError, out, sign, stopped};
use crate::experiment::seal::check_signing_key;
use crate::launch::{Os, dylib};
use crate::platform::facts::{self, SystemFacts};
use crate::profile::ProfileArgs;
use crate::selftest::experiment::{self, Plan};
use crate::selftest::kernels::{self, Kernel};
use crate::selftest::{ProfileRecord, claimed_kernels, render};

/// Check that this machine's GPU does what a profile claims: the shim activates in a probe,
/// and a small Metal kernel for each capability claimed beyond stock gives the CPU's results
#[derive(Debug, Args)]
#[command(after_help = "\
Checks, one line each (ok, fail or skip, with the time measured and, on a failure, the fix):
  activation                 the probe (`capshim probe`, or --probe PROGRAM) runs with the
                             shim and the profile; its status file must show the shim hooked
                             the device class where the default device was created, with the
                             profile's values
  kernel.simd_reduction      simd_sum and simd_max, claimed with Apple7 or Metal3
  kernel.simdgroup_matrix    simdgroup_float8x8 multiply-accumulate, claimed with Apple7
  kernel.bfloat              bfloat conversion and arithmetic, claimed with Apple6 or Metal3
  kernel.threadgroup_memory  every byte of the claimed threadgroup memory written and read
                             back, claimed when the profile raises maxThreadgroupMemoryLength
A kernel check runs only for a capability the profile claims beyond the stock answers (this
process's own device; without one, the stock paravirtual device's), in a second process with
the shim (capshim itself), and compares the kernel's output with the CPU's. A check that
cannot run is skipped, with the reason: a capability not claimed, no Metal device (every
kernel check off macOS), no probe (on Linux without --probe). A skipped check does not fail.
The kernels' sources are in crates/cli/src/selftest/kernels/; docs/selftest.md says what
each check proves.

-o DIR writes an evidence bundle of kind selftest (raw status files and outputs,
environment.json, checks.json, report.md, SHA256SUMS) that `capshim report DIR` checks and
shows; --sign KEYFILE also signs it (SHA256SUMS.sig, as bench and verify do; the key is
checked before anything runs). A selftest runs through the same experiment layer as bench
and verify: SIGINT (Ctrl-C), SIGTERM or SIGHUP is passed on to the running probe or kernel
process; capshim waits for it (SIGKILL after 10 s or a second signal), starts no further
process and exits 128 + the signal's number, leaving the bundle (with -o) unsealed, with an
INCOMPLETE note.

Examples:
  capshim selftest
  capshim selftest --profile apple9-64k --verbose
  capshim selftest --json -o selftest-native
  capshim selftest --probe ./probe            # Linux: the simulated guest's probe

Exit codes:
  0  every claim checked holds (skipped checks allowed)
  5  a claim does not hold: the shim did not activate, or a kernel failed or differs from the CPU
  1  error (the shim library missing or unusable, a process that cannot be started, the bundle
     directory exists or cannot be written, a --sign key that cannot sign here, signing failed:
     the bundle is then sealed, unsigned)
  2  usage error (also --profile stock, which claims nothing, and --sign without -o)
  129  stopped by SIGHUP, 130 by SIGINT, 143 by SIGTERM (with -o, the bundle is unfinished)")]
pub struct SelftestArgs {
    /// Print JSON: {"capshim_version":…,"os":…,"profile":…,"checks":[{"id","status","summary","detail","fix","time_ms"},…],"counts":{…},"exit_code":…}
    #[arg(long)]
    json: bool,

    /// Print each check's detail under its line
    #[arg(short, long)]
    verbose: bool,

    #[command(flatten)]
    profile: ProfileArgs,

    /// The shim library to inject (default: searched like `capshim run`)
    #[arg(long, value_name = "PATH")]
    dylib: Option<PathBuf>,

    /// The program to check activation in (default on macOS: `capshim probe --json`); on Linux
    /// the simulated guest's probe
    #[arg(long, value_name = "PROGRAM")]
    probe: Option<PathBuf>,

    /// Write an evidence bundle to this new directory
    #[arg(short = 'o', long = "output", value_name = "BUNDLE_DIR")]
    output: Option<PathBuf>,

    /// Sign the bundle (-o) when sealing it: SHA256SUMS.sig, an OpenSSH signature (ssh-keygen
    /// -Y sign, namespace capshim-bundle) with this private key, or the public key (.pub) of a
    /// key held by ssh-agent. Checked before anything runs: without a terminal, the key must
    /// sign without a passphrase (none, or held by ssh-agent).
    #[arg(long = "sign", value_name = "KEYFILE", requires = "output")]
    sign: Option<PathBuf>,

    /// Internal: run the kernels in this process and print their outputs as JSON
    #[arg(long, hide = true)]
    kernel_child: bool,

    /// Internal: a kernel for --kernel-child
    #[arg(long = "kernel", hide = true, value_enum)]
    kernels: Vec<Kernel>,

    /// Internal: the threadgroup memory test's size for --kernel-child, in bytes
    #[arg(long, hide = true, default_value_t = 32768)]
    threadgroup_bytes: u64,
}

/// The stock answers the claims are measured from, where they come from, and why there is no
/// Metal device (when there is none).
fn stock(os: Os) -> (Answers, String, Option<String>) {
    let fallback = "the stock paravirtual device's answers (docs/design.md)";
    if os != Os::MacOs {
        let why = format!("this is {}", std::env::consts::OS);
        return (
            Answers::paravirtual_stock(),
            format!("{fallback}; {why}"),
            Some(why),
        );
    }
    match facts::Real::default().metal_device() {
        Ok(report) => {
            let mut source = "this process's default Metal device, without the shim".to_string();
            if std::env::var_os(os.injection_var()).is_some_and(|v| !v.is_empty()) {
                source.push_str(&format!(
                    " ({} is set in capshim's own environment: if it names the shim, these answers are already raised)",
                    os.injection_var()
                ));
            }
            (report.answers(), source, None)
        }
        Err(why) => (
            Answers::paravirtual_stock(),
            format!("{fallback}; {why}"),
            Some(why),
        ),
    }
}

fn kernel_child(args: &SelftestArgs) -> anyhow::Result<ExitCode> {
    let runs = kernels::run_all(&args.kernels, args.threadgroup_bytes);
    out(&(serde_json::to_string(&runs)? + "\n"))?;
    Ok(ExitCode::SUCCESS)
}

/// Runs `capshim selftest`.
pub fn execute(args: SelftestArgs) -> anyhow::Result<ExitCode> {
    if args.kernel_child {
        return kernel_child(&args);
    }
    let plan = plan(&args)?;
    let outcome = match experiment::run(&plan) {
        Ok(outcome) => outcome,
        Err(e) => return stopped(e.interrupted_by(), e),
    };
    let report = &outcome.report;
    let text = if args.json {
        serde_json::to_string_pretty(report)? + "\n"
    } else {
        crate::term::paint_doctor(&render::text(report, args.verbose))
    };
    match &outcome.bundle {
        Some(dir) => sign::present(dir, args.sign.as_deref(), &text)?,
        None => out(&text)?,
    }
    Ok(ExitCode::from(report.exit_code))
}

/// Everything decided before the first process: the profile, the stock answers, the probe,
/// the shim library and the signing key, checked.
fn plan(args: &SelftestArgs) -> anyhow::Result<Plan> {
    let os = Os::current();
    let resolved = args.profile.resolve()?;
    let Some(profile) = resolved.profile else {
        return Err(UsageError(
            "--profile stock claims nothing beyond the device's answers, so there is nothing to \
             check; leave --profile out for the default (native, or apple9-64k where the host \
             chip is not known)"
                .to_string(),
        )
        .into());
    };
    if let Some(dir) = &args.output
        && dir.exists()
    {
        return Err(crate::bundle::BundleError::Exists(dir.clone()).into());
    }
    if let Some(key) = &args.sign {
        check_signing_key(key)?;
    }
    let (stock, stock_source, no_device) = stock(os);
    let claimed = claimed_kernels(&profile, &stock);
    let exe = std::env::current_exe().context("cannot find the capshim executable to re-run")?;
    let probe: Option<(PathBuf, Vec<String>)> = match (&args.probe, os) {
        (Some(p), _) => Some((p.clone(), Vec::new())),
        (None, Os::MacOs) => Some((exe.clone(), vec!["probe".into(), "--json".into()])),
        (None, Os::Linux) => None,
    };
    let runs_kernels = !claimed.is_empty() && no_device.is_none();
    let library = if probe.is_some() || runs_kernels {
        let library = dylib::locate(args.dylib.as_deref(), os)?;
        dylib::check(&library, os)?;
        Some(library)
    } else {
        None
    };
    Ok(Plan {
        record: ProfileRecord::new(&resolved.name, &profile, &resolved.provenance),
        profile,
        stock,
        stock_source,
        no_device,
        probe,
        library,
        exe,
        output: args.output.clone(),
    })
}
