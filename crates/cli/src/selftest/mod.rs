//! `capshim selftest`: does this machine's GPU really do what a profile claims?
//!
//! Two processes run with the shim and the profile: the probe (`capshim probe`, or the program
//! given), whose status file shows whether the shim activated where a device was created; and,
//! on macOS, the kernel process (capshim itself), which compiles and runs one small Metal
//! kernel for each capability the profile claims beyond the stock answers and prints their
//! outputs. Everything they leave is [`Evidence`]; [`evaluate`] turns it into one
//! [`TimedCheck`] per check (doctor's keys plus `time_ms`), comparing each kernel's output
//! with the CPU's ([`reference`]). A bundle keeps the evidence and re-derives the checks from
//! it ([`bundle`]).
//!
//! - [`kernels`]: the kernels, their sources and the kernel process's side.
//! - [`reference`]: the CPU reference of each kernel.
//! - [`render`]: the text and Markdown reports.
//! - [`child`]: the processes started with the shim, as steps of the experiment.
//! - [`experiment`]: the selftest on the experiment layer (steps, signals, seal, INCOMPLETE).
//! - [`bundle`]: the evidence bundle, sealed and checked.

pub mod bundle;
pub mod child;
pub mod experiment;
pub mod kernels;
pub mod reference;
pub mod render;

#[cfg(test)]
mod tests;

use capshim_profile::device::Answers;
use capshim_profile::{GpuFamily, Profile};
use serde::{Deserialize, Serialize};

use crate::doctor::{Check, Counts, Status};
use crate::launch::status::{StatusEvent, StatusProfile, Summary};
use kernels::{Kernel, KernelRuns};

/// Exit code when a claim does not hold (a verdict, as `verify`'s `different`).
pub const EXIT_CLAIM_FAILED: u8 = 5;

/// The reason given for every kernel check where there is no Metal device.
pub const NO_METAL: &str = "no Metal device";

/// The profile a selftest checks, as recorded.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProfileRecord {
    /// `native`, `apple9-64k`, `custom` or a profile file's name.
    pub name: String,
    /// Highest Apple family answered true.
    pub apple_family_max: i64,
    /// Threadgroup memory floor, in bytes.
    pub max_threadgroup_memory: u64,
    /// Working set floor, in bytes; `null` when left alone.
    pub recommended_working_set_size: Option<u64>,
    /// Where the values come from, in words.
    pub provenance: String,
}

impl ProfileRecord {
    /// The record of `profile`, called `name`.
    pub fn new(name: &str, profile: &Profile, provenance: &str) -> ProfileRecord {
        ProfileRecord {
            name: name.to_string(),
            apple_family_max: profile.apple_family_max,
            max_threadgroup_memory: profile.max_threadgroup_memory,
            recommended_working_set_size: profile.recommended_working_set_size,
            provenance: provenance.to_string(),
        }
    }

    /// The profile's values.
    ///
    /// # Errors
    /// When the family is outside 1001–1999 (a record not written by capshim).
    pub fn profile(&self) -> Result<Profile, String> {
        Profile::new(
            self.apple_family_max,
            self.max_threadgroup_memory,
            self.recommended_working_set_size,
        )
        .map_err(|e| e.to_string())
    }
}

/// One process run with the shim, as it ended.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProcessRecord {
    /// Program and arguments.
    pub argv: Vec<String>,
    /// Exit code (`None`: killed by a signal).
    pub exit_code: Option<i32>,
    /// Wall time, in milliseconds.
    pub time_ms: f64,
    /// Its status file's text.
    pub status: String,
    /// Its stdout.
    pub stdout: String,
    /// Its stderr.
    pub stderr: String,
}

/// The probe: run, or why not.
#[derive(Clone, Debug, PartialEq)]
pub enum Probe {
    /// Not run (on Linux without `--probe`).
    Skipped(String),
    /// Run with the shim.
    Ran(ProcessRecord),
}

/// The kernels: run in a process with the shim (which printed [`KernelRuns`] on stdout), or
/// why not.
#[derive(Clone, Debug, PartialEq)]
pub enum Kernels {
    /// No Metal device to run them on; the reason starts with [`NO_METAL`].
    NoDevice(String),
    /// The kernel process ran.
    Ran(ProcessRecord),
}

/// Where the kernels run: the one interface to Metal. The real one starts capshim's kernel
/// process with the shim (macOS) or says there is no Metal device; tests inject outcomes.
pub trait Gpu {
    /// Runs `kernels`, the threadgroup memory test with `threadgroup_bytes`.
    ///
    /// # Errors
    /// When the kernel process cannot be started or waited for.
    fn run(&self, kernels: &[Kernel], threadgroup_bytes: u64) -> anyhow::Result<Kernels>;
}

/// Everything a selftest saw; the checks are derived from it alone.
#[derive(Clone, Debug, PartialEq)]
pub struct Evidence {
    /// The capshim version that ran it.
    pub capshim_version: String,
    /// The system (`macos`, `linux`).
    pub os: String,
    /// The profile checked.
    pub profile: ProfileRecord,
    /// The stock answers the claims are measured from.
    pub stock: Answers,
    /// Where the stock answers come from, in words.
    pub stock_source: String,
    /// The probe.
    pub probe: Probe,
    /// The kernels; `None` when the profile claims no capability beyond stock.
    pub kernels: Option<Kernels>,
}

/// Whether the profile claims a kernel's capability beyond the stock answers, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Claim {
    /// The kernel.
    pub kernel: Kernel,
    /// Claimed beyond stock.
    pub claimed: bool,
    /// Why (or why not), in words.
    pub why: String,
}

/// llama.cpp's gate families for a kernel's capability (`LLAMA_CPP_GATES`); none for
/// threadgroup memory.
fn gate(kernel: Kernel) -> &'static [i64] {
    let flag = match kernel {
        Kernel::SimdReduction => "simdgroup_reduction",
        Kernel::SimdgroupMatrix => "simdgroup_mm",
        Kernel::Bfloat => "bfloat",
        Kernel::ThreadgroupMemory => return &[],
    };
    capshim_profile::consumers::llama_cpp::LLAMA_CPP_GATES
        .iter()
        .find(|g| g.flag == flag)
        .map_or(&[], |g| g.any_of)
}

fn family_names(families: &[i64]) -> String {
    families
        .iter()
        .map(|&f| GpuFamily(f).name().map_or(f.to_string(), str::to_string))
        .collect::<Vec<_>>()
        .join(" or ")
}

/// What `profile` claims beyond `stock`, for every kernel in order.
pub fn claims(profile: &Profile, stock: &Answers) -> Vec<Claim> {
    let shimmed = stock.with_profile(profile);
    Kernel::ALL
        .iter()
        .map(|&kernel| {
            if kernel == Kernel::ThreadgroupMemory {
                let (was, now) = (stock.max_threadgroup_memory, shimmed.max_threadgroup_memory);
                return Claim {
                    kernel,
                    claimed: now > was,
                    why: if now > was {
                        format!("the profile answers {now} bytes of threadgroup memory, stock {was}")
                    } else {
                        format!("the stock device already answers {was} bytes, as much as the profile")
                    },
                };
            }
            let families = gate(kernel);
            let answered = |a: &Answers| {
                families
                    .iter()
                    .copied()
                    .find(|&f| a.families.get(&f).copied().unwrap_or(false))
            };
            let names = family_names(families);
            let (claimed, why) = match (answered(stock), answered(&shimmed)) {
                (Some(f), _) => (
                    false,
                    format!(
                        "the stock device already answers {}: nothing claimed beyond it",
                        family_names(&[f])
                    ),
                ),
                (None, Some(f)) => (
                    true,
                    format!(
                        "the profile answers {} (llama.cpp's gate: {names}), the stock device does not",
                        family_names(&[f])
                    ),
                ),
                (None, None) => (false, format!("the profile does not answer {names}")),
            };
            Claim {
                kernel,
                claimed,
                why,
            }
        })
        .collect()
}

/// A check with its measured time: doctor's keys plus `time_ms`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TimedCheck {
    /// `id`, `status`, `summary`, `detail`, `fix` as `capshim doctor --json` writes them.
    #[serde(flatten)]
    pub check: Check,
    /// The time the check measured (the process or the kernel), in milliseconds; `null` when
    /// nothing ran.
    pub time_ms: Option<f64>,
}

/// Everything a selftest found; serialised as `capshim selftest --json`:
/// `{"capshim_version","os","profile","checks":[…],"counts":{…},"exit_code"}`.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// The capshim version that ran it.
    pub capshim_version: String,
    /// The system it ran on.
    pub os: String,
    /// The profile checked: its name and values.
    pub profile: String,
    /// Every check, in order: `activation`, then `kernel.NAME` for each kernel.
    pub checks: Vec<TimedCheck>,
    /// How many of each status.
    pub counts: Counts,
    /// 0 when every claim holds, [`EXIT_CLAIM_FAILED`] when one does not.
    pub exit_code: u8,
}

fn check(id: &str, status: Status, summary: String, detail: String, fix: Option<String>) -> Check {
    Check {
        id: id.to_string(),
        status,
        summary,
        detail,
        fix,
        sources: Vec::new(),
    }
}

/// Milliseconds to three decimals, so that JSON written and derived again agree.
fn ms(value: f64) -> Option<f64> {
    Some((value * 1000.0).round() / 1000.0)
}

fn exit_text(code: Option<i32>) -> String {
    code.map_or_else(
        || "killed by a signal".to_string(),
        |c| format!("exit code {c}"),
    )
}

/// Whether a process's status file shows the shim hooked a device class, with `profile`'s
/// values: `Ok(line)` or `Err(why not)`.
fn activated(status: &str, profile: &ProfileRecord) -> Result<String, String> {
    let summary = Summary::from_lines(status);
    let line = summary.line();
    if !summary.activated() {
        return Err(line.strip_prefix("capshim: ").unwrap_or(&line).to_string());
    }
    let wanted = StatusProfile {
        apple_family_max: profile.apple_family_max,
        max_threadgroup_memory: profile.max_threadgroup_memory,
        recommended_working_set_size: profile.recommended_working_set_size,
    };
    let hooked: Vec<u32> = summary
        .processes
        .iter()
        .filter(|p| !p.hooked.is_empty())
        .map(|p| p.pid)
        .collect();
    let other = StatusEvent::parse_lines("", status)
        .filter_map(Result::ok)
        .find(|e| {
            e.event == "active"
                && hooked.contains(&e.pid)
                && e.profile.as_ref().is_some_and(|p| *p != wanted)
        });
    if let Some(e) = other {
        return Err(format!(
            "the shim in {} (pid {}) applied other values than the profile's: {:?}",
            e.process, e.pid, e.profile
        ));
    }
    Ok(line
        .strip_prefix("capshim: activated: ")
        .unwrap_or(&line)
        .to_string())
}

fn activation_check(e: &Evidence) -> TimedCheck {
    let (check, time) = match &e.probe {
        Probe::Skipped(reason) => (
            check(
                "activation",
                Status::Skip,
                format!("not checked: {reason}"),
                "the activation check runs a probe with the shim and reads its status file".into(),
                None,
            ),
            None,
        ),
        Probe::Ran(p) => {
            let program = p.argv.first().cloned().unwrap_or_default();
            let detail = format!(
                "{} ran with the shim ({}); its status file says whether the shim hooked the \
                 device class where the default device was created",
                p.argv.join(" "),
                exit_text(p.exit_code)
            );
            let c = match activated(&p.status, &e.profile) {
                Ok(line) => check("activation", Status::Ok, line, detail, None),
                Err(why) => check(
                    "activation",
                    Status::Fail,
                    why,
                    detail,
                    Some(format!(
                        "`capshim doctor -- {program}` shows what stops the shim"
                    )),
                ),
            };
            (c, ms(p.time_ms))
        }
    };
    TimedCheck {
        check,
        time_ms: time,
    }
}

/// The fix for a capability the GPU does not have: a profile that does not claim it.
fn fix(kernel: Kernel, e: &Evidence) -> String {
    let native = if e.profile.name == "native" {
        String::new()
    } else {
        "use --profile native (the host chip's own answers), or ".to_string()
    };
    if kernel == Kernel::ThreadgroupMemory {
        return format!(
            "{native}--threadgroup-memory {} (the device's own answer)",
            e.stock.max_threadgroup_memory
        );
    }
    let lowest_apple = gate(kernel)
        .iter()
        .copied()
        .filter(|f| (GpuFamily::APPLE_MIN..=GpuFamily::APPLE_BLOCK_MAX).contains(f))
        .min()
        .unwrap_or(GpuFamily::APPLE_MIN + 1);
    let lower = GpuFamily(lowest_apple - 1);
    format!(
        "{native}a lower family: --family-max {} ({}), which does not claim {}",
        lower.0,
        lower.name().unwrap_or("Apple"),
        kernel.capability()
    )
}

fn kernel_check(claim: &Claim, e: &Evidence) -> TimedCheck {
    let id = format!("kernel.{}", claim.kernel.name());
    let skip = |summary: String, detail: String| TimedCheck {
        check: check(&id, Status::Skip, summary, detail, None),
        time_ms: None,
    };
    if !claim.claimed {
        return skip(
            format!("not claimed beyond stock: {}", claim.why),
            format!(
                "a kernel runs only for a capability the profile claims beyond the stock answers ({})",
                e.stock_source
            ),
        );
    }
    let process = match &e.kernels {
        None => return skip("not run".to_string(), claim.why.clone()),
        Some(Kernels::NoDevice(reason)) => {
            return skip(format!("not run: {reason}"), claim.why.clone());
        }
        Some(Kernels::Ran(p)) => p,
    };
    let fail = |summary: String, detail: String, fix: String, time: Option<f64>| TimedCheck {
        check: check(&id, Status::Fail, summary, detail, Some(fix)),
        time_ms: time,
    };
    let doctor = "`capshim doctor` shows what stops the shim".to_string();
    if let Err(why) = activated(&process.status, &e.profile) {
        return fail(
            format!("the kernel process did not run with the profile: {why}"),
            claim.why.clone(),
            doctor,
            None,
        );
    }
    let runs: Option<KernelRuns> = serde_json::from_str(&process.stdout).ok();
    let run = runs
        .as_ref()
        .and_then(|r| r.runs.iter().find(|run| run.kernel == claim.kernel));
    let Some(run) = run else {
        return fail(
            format!(
                "the kernel process ({}) reported no result for this kernel",
                exit_text(process.exit_code)
            ),
            format!("{}; its stderr is in the bundle (-o DIR)", claim.why),
            fix(claim.kernel, e),
            None,
        );
    };
    let threadgroup_bytes = runs.as_ref().map_or(0, |r| r.threadgroup_bytes);
    let time = ms(run.time_ms);
    match (
        &run.error,
        run.output_hex.as_deref().and_then(kernels::from_hex),
    ) {
        (Some(err), _) => fail(
            format!("{} failed: {}", err.stage, err.message),
            format!(
                "{}; Metal refused or failed the kernel that needs it",
                claim.why
            ),
            fix(claim.kernel, e),
            time,
        ),
        (None, None) => fail(
            "the kernel process gave no readable output".to_string(),
            claim.why.clone(),
            fix(claim.kernel, e),
            time,
        ),
        (None, Some(output)) => {
            let verdict = reference::compare(claim.kernel, threadgroup_bytes, &output);
            let device = run.device.as_deref().unwrap_or("the default device");
            let detail = format!("{}; on {device}: {}", claim.why, verdict.detail);
            if verdict.holds {
                TimedCheck {
                    check: check(&id, Status::Ok, verdict.summary, detail, None),
                    time_ms: time,
                }
            } else {
                fail(verdict.summary, detail, fix(claim.kernel, e), time)
            }
        }
    }
}

/// The kernels `profile` claims beyond `stock`, to run.
pub fn claimed_kernels(profile: &Profile, stock: &Answers) -> Vec<Kernel> {
    claims(profile, stock)
        .into_iter()
        .filter(|c| c.claimed)
        .map(|c| c.kernel)
        .collect()
}

/// Runs, on `gpu`, the kernels `profile` claims beyond `stock` (the threadgroup memory test
/// with the answer the shim gives); `None` when it claims none.
///
/// # Errors
/// As [`Gpu::run`].
pub fn run_claimed(
    gpu: &dyn Gpu,
    profile: &Profile,
    stock: &Answers,
) -> anyhow::Result<Option<Kernels>> {
    let claimed = claimed_kernels(profile, stock);
    if claimed.is_empty() {
        return Ok(None);
    }
    let bytes = stock.with_profile(profile).max_threadgroup_memory;
    gpu.run(&claimed, bytes).map(Some)
}

/// The checks of `evidence`: `activation`, then one per kernel.
///
/// # Errors
/// When the recorded profile is not a valid profile.
pub fn evaluate(evidence: &Evidence) -> Result<Report, String> {
    let profile = evidence.profile.profile()?;
    let mut checks = vec![activation_check(evidence)];
    for claim in claims(&profile, &evidence.stock) {
        checks.push(kernel_check(&claim, evidence));
    }
    let mut counts = Counts::default();
    for c in &checks {
        match c.check.status {
            Status::Ok => counts.ok += 1,
            Status::Warn => counts.warn += 1,
            Status::Fail => counts.fail += 1,
            Status::Skip => counts.skip += 1,
        }
    }
    Ok(Report {
        capshim_version: evidence.capshim_version.clone(),
        os: evidence.os.clone(),
        profile: format!("{} ({profile})", evidence.profile.name),
        exit_code: if counts.fail > 0 {
            EXIT_CLAIM_FAILED
        } else {
            0
        },
        checks,
        counts,
    })
}
