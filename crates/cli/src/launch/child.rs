//! One measured process of an experiment (`bench`'s llama-bench, `verify`'s llama.cpp tools):
//! started with an arm's environment change, stdout and stderr to files, SIGINT, SIGTERM and
//! SIGHUP passed on to it, and a signal that stopped it told apart from its own failure.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use nix::sys::signal::{Signal, killpg};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;

use super::environment::EnvChange;
use super::group;
use super::signals::Forwarder;

/// A process that ran to its end (successfully or not).
#[derive(Debug)]
pub struct Finished {
    /// How it exited.
    pub status: ExitStatus,
    /// When it started, in seconds since the Unix epoch.
    pub started: u64,
    /// Wall time, in seconds.
    pub seconds: f64,
    /// What stopped it, when it or a process of its group stopped rather than ran to its end:
    /// capshim then ended it, as nothing would continue it.
    pub stopped: Option<Stop>,
    /// How many processes of its group still ran when it exited, ended then ([`group::end`];
    /// only with `group`).
    pub left: usize,
}

/// A stop that ended a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// The process itself was stopped by this signal.
    Signal(i32),
    /// A process of its group (this pid) stayed stopped while the process waited for it.
    Child(u32),
}

impl Finished {
    /// How it ended, for a failed run: its exit status, or the signal that stopped it and why
    /// that stops a run.
    pub fn reason(&self) -> String {
        match self.stopped {
            Some(Stop::Child(pid)) => format!(
                "a process it started (pid {pid}) stopped and stayed stopped (SIGTTIN when it \
                 reads the terminal, SIGTTOU when it writes to or sets it up, or SIGSTOP), which \
                 a measured command is not given (its stdin is /dev/null, in a process group of \
                 its own); capshim ended the group: give the command its input in a file or \
                 its arguments"
            ),
            Some(Stop::Signal(number)) => {
                let name = super::signals::name(number);
                let terminal = match Signal::try_from(number) {
                    Ok(Signal::SIGTTIN) => Some("read the terminal"),
                    Ok(Signal::SIGTTOU) => Some("wrote to or set up the terminal"),
                    _ => None,
                };
                match terminal {
                    Some(did) => format!(
                        "stopped by {name}: it {did}, which a measured command is not given (its \
                         stdin is /dev/null, in a process group of its own); capshim ended it: \
                         give the command its input in a file or its arguments"
                    ),
                    None => {
                        format!("stopped by {name}; nothing would continue it, so capshim ended it")
                    }
                }
            }
            None => self.status.to_string(),
        }
    }
}

/// Why a process gave no result of its own.
#[derive(Debug, thiserror::Error)]
pub enum ChildError {
    /// An output file cannot be created.
    #[error("cannot create {path}: {source}")]
    Create {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The program cannot be started.
    #[error("cannot start {program}: {source}")]
    Spawn {
        /// The program.
        program: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// Waiting for it failed.
    #[error("cannot wait for {program}: {source}")]
    Wait {
        /// The program.
        program: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A signal to capshim stopped the run; its number.
    #[error("interrupted by signal {0}")]
    Interrupted(i32),
}

/// Runs `program` with `args` under `env` (applied to capshim's own environment), its stdout
/// to `stdout` and its stderr to `stderr` (both created), stdin closed. A signal caught by
/// `signals` while it runs is passed on to it; a process that then fails counts as
/// interrupted, one that succeeds as finished (the caller checks `signals` before the next).
/// With `group`, the process leads a process group of its own and signals are passed on to
/// the whole group, so that a shell's children get them too (a terminal's Ctrl-C then no
/// longer reaches the group directly: capshim passes it on), and what is left of the group
/// when it exits is ended ([`group::end`], counted in [`Finished::left`]). A process that stops
/// (SIGTTIN when it reads the terminal, SIGSTOP) is ended and its [`Finished::stopped`] says by
/// what.
///
/// # Errors
/// [`ChildError`]; a process that ran and failed is a [`Finished`] with its status.
pub fn run_as(
    program: &Path,
    args: &[String],
    env: &EnvChange,
    (stdout, stderr): (&Path, &Path),
    signals: &Forwarder,
    group: bool,
) -> Result<Finished, ChildError> {
    let create = |path: &Path| {
        std::fs::File::create(path).map_err(|source| ChildError::Create {
            path: path.to_path_buf(),
            source,
        })
    };
    let mut cmd = Command::new(program);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(create(stdout)?)
        .stderr(create(stderr)?);
    if group {
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    }
    for name in &env.removed {
        cmd.env_remove(name);
    }
    for (k, v) in &env.set {
        cmd.env(k, v);
    }
    let started = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let clock = Instant::now();
    let child = cmd.spawn().map_err(|source| ChildError::Spawn {
        program: program.to_path_buf(),
        source,
    })?;
    if group {
        signals.forward_to_group(child.id());
    } else {
        signals.forward_to(child.id());
    }
    let watch = group.then(|| group::Watch::start(child.id()));
    let waited = wait(child.id());
    let seconds = clock.elapsed().as_secs_f64();
    signals.clear();
    let stopped_child = watch.and_then(group::Watch::finish);
    let left = if group { group::end(child.id()) } else { 0 };
    let (status, stopped) = waited.map_err(|source| ChildError::Wait {
        program: program.to_path_buf(),
        source,
    })?;
    let stopped = stopped.or(stopped_child.map(Stop::Child));
    if !status.success() {
        // A Ctrl-C reaches the process and capshim at once: the process may be gone before
        // capshim's signal thread has noted it. Give it a moment before calling this a failure.
        let deadline = Instant::now() + Duration::from_millis(500);
        while signals.received().is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        if let Some(number) = signals.received() {
            return Err(ChildError::Interrupted(number));
        }
    }
    Ok(Finished {
        status,
        started,
        seconds,
        stopped,
        left,
    })
}

/// Waits for the child `pid` to end, and for a stop: a stopped child would wait for a SIGCONT
/// that nothing sends, so it is ended (with its process group, if it leads one) and the signal
/// that stopped it returned.
fn wait(pid: u32) -> std::io::Result<(ExitStatus, Option<Stop>)> {
    use std::os::unix::process::ExitStatusExt;
    let pid = Pid::from_raw(i32::try_from(pid).map_err(std::io::Error::other)?);
    let mut stopped = None;
    loop {
        match waitpid(pid, Some(WaitPidFlag::WUNTRACED)) {
            // The wait(2) status encoding: the exit code in the second byte, a signal in the
            // low seven bits with 0x80 for a core dump.
            Ok(WaitStatus::Exited(_, code)) => {
                return Ok((ExitStatus::from_raw(code << 8), stopped));
            }
            Ok(WaitStatus::Signaled(_, signal, core)) => {
                let raw = signal as i32 | if core { 0x80 } else { 0 };
                return Ok((ExitStatus::from_raw(raw), stopped));
            }
            Ok(WaitStatus::Stopped(_, signal)) => {
                stopped.get_or_insert(Stop::Signal(signal as i32));
                // SIGKILL ends a stopped process too; the group's other processes go with it
                // (the group's id is its leader's; a child that leads none is killed alone).
                if killpg(pid, Signal::SIGKILL).is_err() {
                    let _ = nix::sys::signal::kill(pid, Signal::SIGKILL);
                }
            }
            Ok(_) | Err(nix::errno::Errno::EINTR) => {}
            Err(e) => return Err(std::io::Error::from(e)),
        }
    }
}

/// `arg` as a POSIX shell word: unchanged when it needs no quoting, else single-quoted.
pub fn shell_quote(arg: &str) -> String {
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

/// The command line that reproduces a run: the variables set, then the program and its
/// arguments, shell-quoted.
pub fn command_line(env: &EnvChange, argv: &[String]) -> String {
    let mut words: Vec<String> = env
        .set
        .iter()
        .map(|(k, v)| format!("{k}={}", shell_quote(v)))
        .collect();
    words.extend(argv.iter().map(|a| shell_quote(a)));
    words.join(" ")
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
        let env = EnvChange {
            set: vec![("GGML_X".into(), "a b".into())],
            removed: vec![],
        };
        assert_eq!(
            command_line(&env, &["/bin/tool".into(), "-p".into(), "x y".into()]),
            "GGML_X='a b' /bin/tool -p 'x y'"
        );
    }

    #[test]
    fn a_finished_process_keeps_its_status_and_output() {
        let tmp = tempfile::tempdir().unwrap();
        let (out, err) = (tmp.path().join("o"), tmp.path().join("e"));
        let signals = Forwarder::start_for_experiment().unwrap();
        let env = EnvChange {
            set: vec![("CHILD_TEST_VAR".into(), "seen".into())],
            removed: vec![],
        };
        let done = run_as(
            Path::new("/bin/sh"),
            &[
                "-c".into(),
                "echo $CHILD_TEST_VAR; echo oops >&2; exit 3".into(),
            ],
            &env,
            (&out, &err),
            &signals,
            false,
        )
        .unwrap();
        assert_eq!(done.status.code(), Some(3));
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "seen\n");
        assert_eq!(std::fs::read_to_string(&err).unwrap(), "oops\n");
        let missing = run_as(
            &tmp.path().join("no-such-tool"),
            &[],
            &EnvChange::default(),
            (&out, &err),
            &signals,
            true,
        );
        assert!(matches!(missing, Err(ChildError::Spawn { .. })));
    }
}
