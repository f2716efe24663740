//! The selftest on the experiment layer ([`crate::experiment`]): one arm (the profile), one
//! round of two steps, the probe and the kernel process, each run with the shim into the
//! bundle's `raw/` ([`super::child`]); then the checks derived from what they left
//! ([`super::evaluate`]) and, with `-o`, the bundle sealed through the layer. Without `-o` the
//! steps run in a scratch directory that is removed. A signal is passed on to the running
//! step and leaves the bundle unsealed with an INCOMPLETE note, as for bench and verify.

use std::cell::RefCell;
use std::path::{Path, PathBuf};

use capshim_profile::Profile;
use capshim_profile::device::Answers;

use super::bundle::{CHECKS_FILE, REPORT_FILE, Written, seal};
use super::child::{PROBE_FILES, ShimmedKernels, run_with_shim};
use super::{Evidence, Probe, ProfileRecord, Report, claimed_kernels, evaluate, run_claimed};
use crate::experiment::{self, Context, Experiment, ExperimentError, Words, machine};
use crate::launch::Os;
use crate::launch::environment::{ScopeArg, ShimSettings};

/// How selftest speaks of itself.
pub const WORDS: Words = Words {
    command: "selftest",
    unit: "step",
    running: "the probe or the kernel process",
    tool_option: "--probe",
    fix: "the probe given with --probe and the shim library (--dylib)",
    prefix: "capshim-selftest",
};

/// What a selftest checks, and with what: everything decided before the first process.
pub struct Plan {
    /// The profile checked.
    pub profile: Profile,
    /// Its record (name, values, provenance).
    pub record: ProfileRecord,
    /// The stock answers the claims are measured from.
    pub stock: Answers,
    /// Where they come from, in words.
    pub stock_source: String,
    /// Why there is no Metal device, when there is none.
    pub no_device: Option<String>,
    /// The probe and its arguments; `None` where there is none (Linux without `--probe`).
    pub probe: Option<(PathBuf, Vec<String>)>,
    /// The shim library, when a process runs with it.
    pub library: Option<PathBuf>,
    /// This capshim executable (the kernel process).
    pub exe: PathBuf,
    /// The bundle to write (`-o`); none is kept without it.
    pub output: Option<PathBuf>,
}

impl Plan {
    /// How many steps run: the probe, and the kernel process where one runs.
    fn steps(&self) -> u64 {
        let kernels =
            self.no_device.is_none() && !claimed_kernels(&self.profile, &self.stock).is_empty();
        u64::from(self.probe.is_some()) + u64::from(kernels)
    }
}

/// What a finished selftest hands back.
pub struct Outcome {
    /// The checks.
    pub report: Report,
    /// The sealed bundle, with `-o`.
    pub bundle: Option<PathBuf>,
}

struct Selftest<'a> {
    plan: &'a Plan,
}

/// Runs the selftest of `plan`.
///
/// # Errors
/// [`ExperimentError`]: a process that cannot be started, a signal, a bundle that cannot be
/// written; with `-o`, once the bundle exists, [`ExperimentError::Stopped`] naming it.
pub fn run(plan: &Plan) -> Result<Outcome, ExperimentError> {
    experiment::run(&mut Selftest { plan })
}

impl Experiment for Selftest<'_> {
    type Sealed = Outcome;

    fn words(&self) -> Words {
        WORDS
    }

    fn derived(&self) -> &'static [&'static str] {
        &[CHECKS_FILE, REPORT_FILE]
    }

    fn output(&self) -> Option<&Path> {
        self.plan.output.as_deref()
    }

    fn keeps_bundle(&self) -> bool {
        self.plan.output.is_some()
    }

    fn run_in(&mut self, dir: &Path, cx: &mut Context) -> Result<Outcome, ExperimentError> {
        let plan = self.plan;
        cx.progress.total = plan.steps();
        let settings = ShimSettings {
            profile: Some(plan.profile),
            library: plan.library.clone().unwrap_or_default(),
            scope: ScopeArg::Children,
            only_process: None,
            log: None,
            status_file: None,
        };
        let probe = match &plan.probe {
            Some((program, args)) => Probe::Ran(run_with_shim(
                cx,
                dir,
                ("the probe", "probe"),
                program,
                args,
                &settings,
                PROBE_FILES,
            )?),
            None => Probe::Skipped(
                "no probe: `capshim probe` needs macOS; on Linux give --probe with the simulated \
                 guest's probe"
                    .to_string(),
            ),
        };
        cx.check_signals()?;
        let started = cx.started;
        let gpu = ShimmedKernels {
            exe: plan.exe.clone(),
            settings,
            no_device: plan.no_device.clone(),
            dir: dir.to_path_buf(),
            cx: RefCell::new(cx),
        };
        let kernels = run_claimed(&gpu, &plan.profile, &plan.stock).map_err(|e| {
            e.downcast::<ExperimentError>()
                .unwrap_or_else(|e| ExperimentError::Derive(e.into()))
        })?;
        let evidence = Evidence {
            capshim_version: env!("CARGO_PKG_VERSION").to_string(),
            os: std::env::consts::OS.to_string(),
            profile: plan.record.clone(),
            stock: plan.stock.clone(),
            stock_source: plan.stock_source.clone(),
            probe,
            kernels,
        };
        let report = evaluate(&evidence).map_err(|why| ExperimentError::Derive(why.into()))?;
        if plan.output.is_none() {
            return Ok(Outcome {
                report,
                bundle: None,
            });
        }
        let written = Written {
            started,
            machine: &machine::collect(),
            dylib: plan.library.as_deref(),
            probe: plan.probe.as_ref().map(|(p, _)| p.as_path()),
            injection_variable: Os::current().injection_var(),
        };
        seal(dir, &evidence, &report, &written)?;
        Ok(Outcome {
            report,
            bundle: Some(dir.to_path_buf()),
        })
    }
}
