//! The processes a selftest starts with the shim: the probe, and on macOS the kernel process
//! (capshim itself, `selftest --kernel-child`). Each runs as one step of the experiment
//! ([`Context::run_tool`]: signals passed on, progress for the INCOMPLETE note), with its
//! status file, stdout and stderr written straight into the bundle's `raw/`, and its wall time
//! measured.

use std::cell::RefCell;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::bundle::{
    KERNELS_JSON, KERNELS_STATUS, KERNELS_STDERR, PROBE_STATUS, PROBE_STDERR, PROBE_STDOUT,
};
use super::kernels::Kernel;
use super::{Gpu, Kernels, NO_METAL, ProcessRecord};
use crate::experiment::tool::ToolRun;
use crate::experiment::{Context, ExperimentError, io};
use crate::launch::Os;
use crate::launch::environment::{EnvChange, ShimSettings, child_env};

/// Where one process's outputs go in the bundle: its status file, stdout and stderr.
pub type RawFiles = [&'static str; 3];

/// The probe's raw files.
pub const PROBE_FILES: RawFiles = [PROBE_STATUS, PROBE_STDOUT, PROBE_STDERR];

/// The kernel process's raw files.
pub const KERNEL_FILES: RawFiles = [KERNELS_STATUS, KERNELS_JSON, KERNELS_STDERR];

/// The change to capshim's own environment that gives a child exactly [`child_env`]'s
/// environment: the variables it drops removed, those it adds or changes set (as text).
pub fn env_change(parent: &[(OsString, OsString)], settings: &ShimSettings, os: Os) -> EnvChange {
    let child = child_env(parent.iter().cloned(), settings, os);
    let text = |s: &OsString| s.to_string_lossy().into_owned();
    let mut change = EnvChange::default();
    for (name, _) in parent {
        if !child.iter().any(|(k, _)| k == name) {
            change.removed.push(text(name));
        }
    }
    for (name, value) in &child {
        if !parent.iter().any(|(k, v)| k == name && v == value) {
            change.set.push((text(name), text(value)));
        }
    }
    change
}

/// Runs `program` with `args` and the shim as `settings` say (their status file the bundle's
/// `files[0]`), stdin closed, stdout and stderr to `files[1]` and `files[2]` in the bundle
/// `dir`, as the step called `what`; and records how it ended. A process that exits non-zero
/// is evidence, not an error: the checks judge it.
///
/// # Errors
/// When it cannot be started or an output file cannot be written or read;
/// [`ExperimentError::Interrupted`] when a signal stopped it.
pub fn run_with_shim(
    cx: &mut Context,
    dir: &Path,
    step: (&'static str, &str),
    program: &Path,
    args: &[String],
    settings: &ShimSettings,
    files: RawFiles,
) -> Result<ProcessRecord, ExperimentError> {
    let (tool, what) = step;
    // Absolute, so that a process that changes directory still writes into the bundle.
    let dir = std::fs::canonicalize(dir).map_err(io("cannot resolve", dir))?;
    let [status_file, stdout, stderr] = files.map(|f| dir.join(f));
    let settings = ShimSettings {
        status_file: Some(status_file.clone()),
        ..settings.clone()
    };
    let parent: Vec<(OsString, OsString)> = std::env::vars_os().collect();
    let env = env_change(&parent, &settings, Os::current());
    let run = ToolRun {
        tool,
        program,
        args,
        env: &env,
        stdout: &stdout,
        stderr: &stderr,
    };
    cx.progress.start(what.to_string());
    let finished = cx.run_tool(&run)?;
    cx.progress.finish();
    // The shim writes its status file only when it loads: an empty one says it did not.
    if !status_file.exists() {
        std::fs::write(&status_file, "").map_err(io("cannot write", &status_file))?;
    }
    let read = |path: &Path| {
        std::fs::read(path)
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .map_err(io("cannot read", path))
    };
    Ok(ProcessRecord {
        argv: run.argv(),
        exit_code: finished.status.code(),
        time_ms: finished.seconds * 1000.0,
        status: read(&status_file)?,
        stdout: read(&stdout)?,
        stderr: read(&stderr)?,
    })
}

/// The kernels' outcome where there is no Metal device, `why` not.
pub fn no_device(why: &str) -> Kernels {
    Kernels::NoDevice(format!("{NO_METAL} ({why})"))
}

/// The real [`Gpu`]: capshim's kernel process with the shim, as a step of the experiment,
/// where there is a Metal device.
pub struct ShimmedKernels<'c, 'a> {
    /// This capshim executable.
    pub exe: PathBuf,
    /// The shim's settings (profile, library).
    pub settings: ShimSettings,
    /// Why there is no Metal device, when there is none.
    pub no_device: Option<String>,
    /// The bundle directory.
    pub dir: PathBuf,
    /// The experiment's context the step runs in.
    pub cx: RefCell<&'c mut Context<'a>>,
}

impl Gpu for ShimmedKernels<'_, '_> {
    /// # Errors
    /// An [`ExperimentError`] (inside the `anyhow::Error`) when the process cannot be run or a
    /// signal stopped it.
    fn run(&self, kernels: &[Kernel], threadgroup_bytes: u64) -> anyhow::Result<Kernels> {
        if let Some(why) = &self.no_device {
            return Ok(no_device(why));
        }
        let mut args = vec![
            "selftest".to_string(),
            "--kernel-child".to_string(),
            "--threadgroup-bytes".to_string(),
            threadgroup_bytes.to_string(),
        ];
        for k in kernels {
            args.push("--kernel".to_string());
            args.push(k.name().to_string());
        }
        let mut cx = self.cx.borrow_mut();
        let record = run_with_shim(
            &mut cx,
            &self.dir,
            ("the kernel process", "kernel process"),
            &self.exe,
            &args,
            &self.settings,
            KERNEL_FILES,
        )?;
        Ok(Kernels::Ran(record))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::launch::environment::ScopeArg;

    fn settings() -> ShimSettings {
        ShimSettings {
            profile: Some(capshim_profile::Profile::new(1009, 65536, None).unwrap()),
            library: PathBuf::from("/nonexistent/libcapshim.so"),
            scope: ScopeArg::Children,
            only_process: None,
            log: None,
            status_file: None,
        }
    }

    #[test]
    fn the_change_gives_the_child_the_environment_run_gives() {
        let parent: Vec<(OsString, OsString)> = [
            ("PATH", "/bin"),
            ("CAPSHIM_APPLE_FAMILY_MAX", "1003"),
            ("LD_PRELOAD", "/x/other.so"),
        ]
        .iter()
        .map(|(k, v)| (OsString::from(k), OsString::from(v)))
        .collect();
        let change = env_change(&parent, &settings(), Os::Linux);
        // The inherited shim variable is replaced, the other library kept, PATH untouched.
        assert!(change.removed.is_empty(), "{:?}", change.removed);
        assert!(
            change
                .set
                .contains(&("CAPSHIM_APPLE_FAMILY_MAX".into(), "1009".into())),
            "{:?}",
            change.set
        );
        let preload = change.set.iter().find(|(k, _)| k == "LD_PRELOAD").unwrap();
        assert!(
            preload.1.contains("/nonexistent/libcapshim.so") && preload.1.contains("other.so"),
            "{preload:?}"
        );
        assert!(!change.set.iter().any(|(k, _)| k == "PATH"));
        // An inherited alias the child drops is removed.
        let mut parent = parent;
        parent.push(("LUME_METAL_FAMILY".into(), "1".into()));
        let change = env_change(&parent, &settings(), Os::Linux);
        assert_eq!(change.removed, ["LUME_METAL_FAMILY"]);
    }

    #[test]
    fn without_a_device_the_kernels_are_not_run() {
        assert_eq!(
            no_device("this is linux"),
            Kernels::NoDevice("no Metal device (this is linux)".into())
        );
    }
}
