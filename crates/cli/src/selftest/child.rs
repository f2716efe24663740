//! The processes a selftest starts with the shim: the probe, and on macOS the kernel process
//! (capshim itself, `selftest --kernel-child`), each with its own status file, its stdout and
//! stderr captured, and its wall time measured.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::Context;

use super::kernels::Kernel;
use super::{Gpu, Kernels, NO_METAL, ProcessRecord};
use crate::launch::Os;
use crate::launch::environment::{ShimSettings, child_env};

/// Runs `program` with `args` and the shim as `settings` say (their status file replaced by a
/// new one), stdin closed, and records how it ended.
///
/// # Errors
/// When the status file cannot be created or the program cannot be started.
pub fn run_with_shim(
    program: &Path,
    args: &[String],
    settings: &ShimSettings,
    os: Os,
) -> anyhow::Result<ProcessRecord> {
    let status_file = tempfile::Builder::new()
        .prefix("capshim-status-")
        .suffix(".jsonl")
        .tempfile()
        .context("cannot create the status file; set TMPDIR to a writable folder")?;
    let settings = ShimSettings {
        status_file: Some(status_file.path().to_path_buf()),
        ..settings.clone()
    };
    let env: Vec<(OsString, OsString)> = child_env(std::env::vars_os(), &settings, os);
    let clock = Instant::now();
    let output = Command::new(program)
        .args(args)
        .env_clear()
        .envs(env)
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("cannot run {}", program.display()))?;
    let time_ms = clock.elapsed().as_secs_f64() * 1000.0;
    let status = std::fs::read_to_string(status_file.path()).unwrap_or_default();
    let mut argv = vec![program.display().to_string()];
    argv.extend(args.iter().cloned());
    Ok(ProcessRecord {
        argv,
        exit_code: output.status.code(),
        time_ms,
        status,
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    })
}

/// The real [`Gpu`]: capshim's kernel process with the shim, where there is a Metal device.
pub struct ShimmedKernels {
    /// This capshim executable.
    pub exe: PathBuf,
    /// The shim's settings (profile, library).
    pub settings: ShimSettings,
    /// The system.
    pub os: Os,
    /// Why there is no Metal device, when there is none.
    pub no_device: Option<String>,
}

impl Gpu for ShimmedKernels {
    fn run(&self, kernels: &[Kernel], threadgroup_bytes: u64) -> anyhow::Result<Kernels> {
        if let Some(why) = &self.no_device {
            return Ok(Kernels::NoDevice(format!("{NO_METAL} ({why})")));
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
        Ok(Kernels::Ran(run_with_shim(
            &self.exe,
            &args,
            &self.settings,
            self.os,
        )?))
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
    fn a_process_is_recorded_with_its_outputs_and_the_shims_variables() {
        let p = run_with_shim(
            Path::new("/bin/sh"),
            &[
                "-c".into(),
                "echo $CAPSHIM_APPLE_FAMILY_MAX; echo $CAPSHIM_STATUS_FILE >&2; exit 3".into(),
            ],
            &settings(),
            Os::Linux,
        )
        .unwrap();
        assert_eq!(p.exit_code, Some(3));
        assert_eq!(p.stdout, "1009\n");
        assert!(p.stderr.contains("capshim-status-"), "{}", p.stderr);
        assert_eq!(p.argv[0], "/bin/sh");
        assert!(p.time_ms > 0.0);
    }

    #[test]
    fn without_a_device_the_kernels_are_not_run() {
        let gpu = ShimmedKernels {
            exe: PathBuf::from("/nonexistent/capshim"),
            settings: settings(),
            os: Os::Linux,
            no_device: Some("this is linux".into()),
        };
        assert_eq!(
            gpu.run(&[Kernel::Bfloat], 32768).unwrap(),
            Kernels::NoDevice("no Metal device (this is linux)".into())
        );
    }
}
