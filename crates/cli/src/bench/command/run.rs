//! One measured process of a `bench --command` workload for one arm: `sh -c` with the arm's
//! shim, variables and `command-args`, its output to files, leading a process group of its
//! own that signals are passed on to; its value (the wall time, or the number `--metric`
//! finds in its output); a failed run through the experiment layer's one rule; and the shim's
//! activation checked as bench checks it. [`run_one`] is public so that every experiment that
//! measures a command (bench, tune) runs it the same way.

use std::path::Path;

use regex::Regex;

use crate::arms::Arm;
use crate::bundle::workload::{Measure, Workload, metric_value};
use crate::experiment::error::NotActivated;
use crate::experiment::record::Process;
use crate::experiment::tool::{Failure, ToolRun, what_to_check};
use crate::experiment::{Context, ExperimentError, io};
use crate::launch::child::shell_quote;
use crate::launch::environment::EnvChange;
use crate::launch::status::StatusEvent;
use crate::llama::Activation;

/// The shell every command runs in: POSIX `sh`, at the path POSIX systems keep it.
pub const SHELL: &str = "/bin/sh";

/// The variable that carries the injection variable's value past the shell. macOS's dyld
/// removes every `DYLD_*` variable from a protected program's environment when it starts
/// (`/bin/sh` is one; dyld-1378 `ProcessConfig::Security::pruneEnvVars`), so a
/// `DYLD_INSERT_LIBRARIES` given to `sh` would never reach the workload; the script sets it
/// again from this variable, and the shell itself runs without the shim on every system.
pub const HANDOFF: &str = "CAPSHIM_BENCH_INJECT";

/// One process of a command for one arm, as [`run_one`] runs it.
pub struct Job<'a> {
    /// The command as given (`--command`), a shell command line.
    pub command: &'a str,
    /// The arm: its profile (the shim, or none), variables and `command-args`.
    pub arm: &'a Arm,
    /// The shim library, when the arm has a profile.
    pub dylib: Option<&'a Path>,
    /// What is measured.
    pub workload: &'a Workload,
    /// `workload`'s compiled `--metric` expression (`None` for the wall time).
    pub regex: Option<&'a Regex>,
    /// Measure an arm with a profile even when the shim did not activate (`--allow-inactive`).
    pub allow_inactive: bool,
}

/// Where one process's output goes.
pub struct Output<'a> {
    /// Its stdout (created).
    pub stdout: &'a Path,
    /// Its stderr (created).
    pub stderr: &'a Path,
    /// The shim's status file (created empty), for arms with a profile.
    pub status: Option<&'a Path>,
}

/// What one process gave.
pub struct Measured<W> {
    /// Its value, in the workload's unit: seconds for `wall`, the metric's own for `metric`.
    /// `None` when it failed and `--keep-going` recorded it (its record's `failed` says why).
    pub value: Option<f64>,
    /// Its record for `environment.json`.
    pub record: Process<W>,
}

/// The script `sh -c` runs for `arm`: the command as given, then the arm's `command-args`,
/// each shell-quoted; with the injection variable set in `env`, first a line that sets it
/// again from [`HANDOFF`] (which `env` then carries instead).
pub fn script(command: &str, arm: &Arm, env: &mut EnvChange) -> String {
    let mut line = command.to_string();
    for word in &arm.args.command {
        line.push(' ');
        line.push_str(&shell_quote(word));
    }
    let inject = crate::launch::Os::current().injection_var();
    match env.set.iter_mut().find(|(k, _)| k == inject) {
        Some(entry) => {
            entry.0 = HANDOFF.to_string();
            format!("{inject}=\"${HANDOFF}\"; export {inject}; unset {HANDOFF}\n{line}")
        }
        None => line,
    }
}

/// Runs `job` once: `sh -c` of its [`script`], at `at` in the experiment (`what` names it in
/// messages: `arm NAME round N`), its output to `out`; returns its value and record. A
/// command that exits non-zero or is killed, or whose output has no match of `--metric`,
/// failed: without `--keep-going` that stops the experiment naming its exit status and its
/// output's last lines; with it, the run is recorded as failed (`value` `None`). An arm with a
/// profile whose shim did not activate stops it unless `allow_inactive`.
///
/// # Errors
/// [`ExperimentError`]: the shell cannot start, a file cannot be written or read, a signal
/// stopped it, the run failed (without `--keep-going`), or the shim did not activate.
pub fn run_one<W>(
    cx: &mut Context,
    job: &Job,
    out: &Output,
    at: W,
    what: String,
) -> Result<Measured<W>, ExperimentError> {
    if let Some(p) = out.status {
        std::fs::write(p, "").map_err(io("cannot create", p))?;
    }
    let mut env = job.arm.env_change_from(
        job.dylib,
        out.status.unwrap_or(Path::new("")),
        std::env::vars_os(),
    );
    let args = vec!["-c".to_string(), script(job.command, job.arm, &mut env)];
    let run = ToolRun {
        tool: "the command",
        program: Path::new(SHELL),
        args: &args,
        env: &env,
        stdout: out.stdout,
        stderr: out.stderr,
    };
    let finished = cx.run_tool_in_group(&run)?;
    let mut record = Process::new(&job.arm.name, at, run.argv(), env, &finished);
    let value = if finished.status.success() {
        match (job.workload.measure, job.regex) {
            (Measure::Metric, Some(re)) => {
                let read = |p: &Path| {
                    std::fs::read(p)
                        .map(|b| String::from_utf8_lossy(&b).into_owned())
                        .map_err(io("cannot read", p))
                };
                metric_value(re, &read(out.stdout)?, &read(out.stderr)?)
            }
            _ => Ok(finished.seconds),
        }
    } else {
        Err(finished.reason())
    };
    let value = match value {
        Ok(v) => v,
        Err(reason) => {
            cx.failed(Failure {
                tool: "the command",
                arm: job.arm.name.clone(),
                what,
                reason: reason.clone(),
                stderr: out.stderr.to_path_buf(),
                stdout: Some(out.stdout.to_path_buf()),
            })?;
            record.failed = Some(reason);
            return Ok(Measured {
                value: None,
                record,
            });
        }
    };
    if let (Some(_), Some(path)) = (&job.arm.profile, out.status) {
        let stderr = std::fs::read(out.stderr)
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default();
        let events = StatusEvent::read_file(path)?;
        let activation = Activation::from_evidence(true, &events, &stderr);
        if !activation.activated && !job.allow_inactive {
            let said = if activation.stderr_lines.is_empty() {
                "it printed no `capshim:` line on stderr".to_string()
            } else {
                format!("it said: {}", activation.stderr_lines.join(" | "))
            };
            return Err(ExperimentError::NotActivated(Box::new(NotActivated {
                what,
                status_file: path.to_path_buf(),
                stderr_file: out.stderr.to_path_buf(),
                said,
                check: what_to_check(&activation, job.dylib),
            })));
        }
    }
    Ok(Measured {
        value: Some(value),
        record,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_arms_words_are_appended_quoted_and_the_injection_is_handed_past_the_shell() {
        let mut arm = Arm::stock();
        arm.args.command = vec!["--name".into(), "x, y".into(), "it's".into()];
        let mut env = EnvChange::default();
        assert_eq!(
            script("python3 b.py", &arm, &mut env),
            r#"python3 b.py --name 'x, y' 'it'\''s'"#
        );
        let inject = crate::launch::Os::current().injection_var();
        env.set
            .push((inject.to_string(), "/lib/libcapshim.so".into()));
        let text = script("true", &Arm::stock(), &mut env);
        assert_eq!(
            text,
            format!("{inject}=\"${HANDOFF}\"; export {inject}; unset {HANDOFF}\ntrue")
        );
        assert_eq!(
            env.set,
            vec![(HANDOFF.to_string(), "/lib/libcapshim.so".to_string())]
        );
    }
}
