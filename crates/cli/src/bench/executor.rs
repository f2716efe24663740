//! One llama-bench process: its environment (the shim only in unlocked arms), its output
//! files, the signals passed on to it, its exit status and stderr tail, and whether the shim
//! activated; the result is a [`RunRecord`].

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use super::environment::RunRecord;
use super::error::{RunError, io};
use super::incomplete::interrupted;
use super::plan::{ArmPlan, Plan};
use crate::bundle::time;
use crate::launch::environment::arm_env;
use crate::launch::signals::Forwarder;
use crate::launch::status::StatusEvent;
use crate::llama::{Activation, read_bench_file};

/// Runs llama-bench once for `arm` in `round`: its JSON goes to `json_rel`, its stderr to
/// `stderr_rel` and the shim's status file (unlocked arms) to `status_rel`, all relative to
/// the bundle directory `dir`.
///
/// # Errors
/// When llama-bench cannot start or fails, its output is unreadable, a signal stopped it,
/// or an unlocked arm's shim did not activate (without `allow_inactive`).
#[allow(clippy::too_many_arguments)]
pub fn run_one(
    plan: &Plan,
    arm: &ArmPlan,
    round: u32,
    args: &[String],
    dir: &Path,
    json_rel: &str,
    stderr_rel: &str,
    status_rel: Option<&str>,
    signals: &Forwarder,
) -> Result<RunRecord, RunError> {
    let json_path = dir.join(json_rel);
    let stderr_path = dir.join(stderr_rel);
    let status_path = status_rel.map(|r| dir.join(r));
    if let Some(p) = &status_path {
        std::fs::write(p, "").map_err(io("cannot create", p))?;
    }
    let env = arm_env(
        arm.profile.as_ref(),
        plan.dylib.as_deref(),
        status_path.as_deref().unwrap_or(Path::new("")),
        std::env::vars_os().map(|(k, _)| k.to_string_lossy().into_owned()),
    );
    let mut cmd = Command::new(&plan.llama_bench);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&json_path).map_err(io("cannot create", &json_path))?)
        .stderr(std::fs::File::create(&stderr_path).map_err(io("cannot create", &stderr_path))?);
    for name in &env.removed {
        cmd.env_remove(name);
    }
    for (k, v) in &env.set {
        cmd.env(k, v);
    }
    let mut argv = vec![plan.llama_bench.display().to_string()];
    argv.extend(args.iter().cloned());
    let started = time::now();
    let clock = Instant::now();
    let mut child = cmd.spawn().map_err(|source| RunError::Spawn {
        path: plan.llama_bench.clone(),
        source,
    })?;
    signals.forward_to(child.id());
    let status = child.wait();
    signals.clear();
    let status = status.map_err(io("cannot wait for llama-bench", &plan.llama_bench))?;
    if !status.success() {
        // A Ctrl-C reaches llama-bench and capshim at once: llama-bench may be gone before
        // capshim's signal thread has noted it. Give it a moment before calling this a failure.
        let deadline = Instant::now() + std::time::Duration::from_millis(500);
        while signals.received().is_none() && Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        if let Some(number) = signals.received() {
            // Whatever llama-bench did with the signal, the run was cut short.
            return Err(interrupted(number));
        }
    }
    let seconds = clock.elapsed().as_secs_f64();
    let stderr = std::fs::read_to_string(&stderr_path).unwrap_or_default();
    if !status.success() {
        let tail: Vec<&str> = stderr.lines().rev().take(8).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        return Err(RunError::LlamaFailed {
            arm: arm.name.clone(),
            round,
            status: status.to_string(),
            stderr: stderr_path,
            tail: tail.join("\n  "),
        });
    }
    read_bench_file(&json_path)?;
    if let (Some(_), Some(path)) = (&arm.profile, &status_path) {
        let events = StatusEvent::read_file(path)?;
        let activation = Activation::from_evidence(true, &events, &stderr);
        if !activation.activated && !plan.allow_inactive {
            let said = if activation.stderr_lines.is_empty() {
                "it printed no `capshim:` line on stderr".to_string()
            } else {
                format!("it said: {}", activation.stderr_lines.join(" | "))
            };
            return Err(RunError::NotActivated {
                arm: arm.name.clone(),
                round,
                status_file: path.clone(),
                stderr_file: stderr_path,
                said,
                dylib: plan
                    .dylib
                    .as_deref()
                    .map(|d| d.display().to_string())
                    .unwrap_or_default(),
            });
        }
    }
    let mut command_line: Vec<String> = env
        .set
        .iter()
        .map(|(k, v)| format!("{k}={}", shell_quote(v)))
        .collect();
    command_line.extend(argv.iter().map(|a| shell_quote(a)));
    Ok(RunRecord {
        arm: arm.name.clone(),
        round,
        argv,
        command_line: command_line.join(" "),
        env,
        exit_code: status.code(),
        seconds,
        started_utc: time::iso(started),
    })
}

/// `arg` as a POSIX shell word: unchanged when it needs no quoting, else single-quoted.
fn shell_quote(arg: &str) -> String {
    if !arg.is_empty()
        && arg
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c))
    {
        arg.to_string()
    } else {
        format!("'{}'", arg.replace('\'', "'\\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_lines_are_shell_quoted() {
        assert_eq!(shell_quote("/a/b-c.gguf"), "/a/b-c.gguf");
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), "'it'\\''s'");
        assert_eq!(shell_quote(""), "''");
    }
}
