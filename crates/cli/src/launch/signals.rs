//! Signals while the workload runs: `capshim run` stays alive to report on the command.
//!
//! SIGINT and SIGQUIT from a terminal reach the whole foreground process group, so the
//! command already has them: capshim only survives them. SIGTERM and SIGHUP are usually
//! sent to capshim alone (`kill`, `timeout`, a closing terminal): capshim passes them on to
//! the command and reports when it exits.
//!
//! An experiment's measured process that ignores or outlasts the signal would keep the whole
//! experiment waiting, and `timeout -k` would then kill capshim before it leaves its INCOMPLETE
//! note, with the process (in a group of its own, for `bench --command`) running on. So in an
//! experiment a second signal, or [`KILL_AFTER`] without an exit, sends SIGKILL. `capshim run`
//! never escalates: a server's orderly shutdown may take as long as it needs.

use std::sync::Arc;
use std::sync::atomic::{AtomicI32, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use signal_hook::consts::{SIGHUP, SIGINT, SIGQUIT, SIGTERM};
use signal_hook::iterator::{Handle, Signals};

/// How long an experiment's measured process has, after the first signal passed on to it,
/// before it gets SIGKILL (10 s: llama-bench and llama.cpp's tools end at once on SIGTERM; a
/// command that cleans up has this long).
pub const KILL_AFTER: Duration = Duration::from_secs(10);

/// Catches the signals above until dropped; forwards SIGTERM and SIGHUP to the child (one
/// that arrives before the child is known is held and sent when it is).
pub struct Forwarder {
    child: Arc<AtomicI32>,
    received: Arc<AtomicI32>,
    pending: Arc<AtomicI32>,
    handle: Handle,
    thread: Option<JoinHandle<()>>,
}

impl Forwarder {
    /// Starts catching, before the command is spawned so that no signal is missed.
    ///
    /// # Errors
    /// When the signal handlers cannot be installed.
    pub fn start() -> std::io::Result<Forwarder> {
        Self::start_with(false)
    }

    /// As [`Forwarder::start`] for an experiment's measured processes: SIGINT is passed on too
    /// (`capshim bench`'s SIGINT may come from `kill -INT` rather than the terminal; a child
    /// that gets it twice from a Ctrl-C still stops once), and a process still running
    /// [`KILL_AFTER`] after the first signal passed on to it, or when a second one comes, gets
    /// SIGKILL (its whole group, for a group). The first SIGINT, SIGTERM or SIGHUP is
    /// remembered: see [`Forwarder::received`].
    ///
    /// # Errors
    /// When the signal handlers cannot be installed.
    pub fn start_for_experiment() -> std::io::Result<Forwarder> {
        Self::start_with(true)
    }

    /// [`Forwarder::start`] (`false`) or [`Forwarder::start_for_experiment`] (`true`).
    fn start_with(experiment: bool) -> std::io::Result<Forwarder> {
        let forward_interrupt = experiment;
        let mut signals = Signals::new([SIGINT, SIGQUIT, SIGTERM, SIGHUP])?;
        let handle = signals.handle();
        let child = Arc::new(AtomicI32::new(0));
        let pending = Arc::new(AtomicI32::new(0));
        let received = Arc::new(AtomicI32::new(0));
        let (target, held, first) = (
            Arc::clone(&child),
            Arc::clone(&pending),
            Arc::clone(&received),
        );
        let thread = std::thread::spawn(move || {
            // The target the last signal was passed on to: a second one for it escalates.
            let mut signalled = 0;
            for number in signals.forever() {
                if number != SIGQUIT {
                    let _ = first.compare_exchange(0, number, Ordering::SeqCst, Ordering::SeqCst);
                }
                if number == SIGQUIT || (number == SIGINT && !forward_interrupt) {
                    continue;
                }
                match target.load(Ordering::SeqCst) {
                    0 => {
                        held.store(number, Ordering::SeqCst);
                        // The child may have been set meanwhile: whoever takes the held
                        // signal sends it, exactly once.
                        // Only take it back when there is a child to give it to; otherwise
                        // forward_to takes it.
                        let pid = target.load(Ordering::SeqCst);
                        if pid != 0 {
                            let number = held.swap(0, Ordering::SeqCst);
                            if number != 0 {
                                send(pid, number);
                            }
                        }
                    }
                    pid if experiment && pid == signalled => {
                        crate::term::line(format!(
                            "capshim: {} again: sending SIGKILL to the measured process",
                            name(number)
                        ));
                        send(pid, Signal::SIGKILL as i32);
                    }
                    pid => {
                        send(pid, number);
                        if experiment {
                            signalled = pid;
                            kill_later(Arc::clone(&target), pid, number);
                        }
                    }
                }
            }
        });
        Ok(Forwarder {
            child,
            received,
            pending,
            handle,
            thread: Some(thread),
        })
    }

    /// Sets the process that SIGTERM and SIGHUP are passed on to.
    pub fn forward_to(&self, pid: u32) {
        self.target(i32::try_from(pid).unwrap_or(0));
    }

    /// Sets the process group (the id of its leader, `pgid`) that SIGTERM and SIGHUP are passed
    /// on to: every process of it gets them, as a terminal's signals reach a foreground job
    /// (`bench --command`, whose shell may run the workload as its child).
    pub fn forward_to_group(&self, pgid: u32) {
        // kill(2) with a negative pid signals the process group of that id.
        self.target(i32::try_from(pgid).map_or(0, |p| -p));
    }

    /// Sets the target (a pid, or minus a process group's id) and hands it a held signal.
    fn target(&self, pid: i32) {
        self.child.store(pid, Ordering::SeqCst);
        let held = self.pending.swap(0, Ordering::SeqCst);
        if held != 0 && pid != 0 {
            send(pid, held);
        }
    }
}

impl Forwarder {
    /// The first SIGINT, SIGTERM or SIGHUP caught so far.
    pub fn received(&self) -> Option<i32> {
        match self.received.load(Ordering::SeqCst) {
            0 => None,
            n => Some(n),
        }
    }

    /// Forgets the child (it has exited): signals are no longer passed on, nor held.
    pub fn clear(&self) {
        self.child.store(0, Ordering::SeqCst);
        self.pending.store(0, Ordering::SeqCst);
    }
}

/// A signal's name, e.g. `SIGTERM`.
pub fn name(number: i32) -> String {
    Signal::try_from(number).map_or_else(|_| format!("signal {number}"), |s| s.as_str().to_string())
}

/// After [`KILL_AFTER`], SIGKILL to `pid` (a process, or minus a group's id) if it is still the
/// target in `target` (cleared when the process exited), naming the signal `number` it outlasted.
fn kill_later(target: Arc<AtomicI32>, pid: i32, number: i32) {
    std::thread::spawn(move || {
        std::thread::sleep(KILL_AFTER);
        if target.load(Ordering::SeqCst) == pid {
            crate::term::line(format!(
                "capshim: the measured process still runs {} s after {}: sending SIGKILL",
                KILL_AFTER.as_secs(),
                name(number)
            ));
            send(pid, Signal::SIGKILL as i32);
        }
    });
}

fn send(pid: i32, number: i32) {
    if let Ok(signal) = Signal::try_from(number) {
        let _ = kill(Pid::from_raw(pid), signal);
        if pid < 0 {
            // A stopped process (one that read the terminal, in a background group) would
            // hold the signal until continued: continue the group so that it gets it.
            let _ = kill(Pid::from_raw(pid), Signal::SIGCONT);
        }
    }
}

impl Drop for Forwarder {
    fn drop(&mut self) {
        self.handle.close();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;
    use std::time::{Duration, Instant};

    /// The test below sends SIGHUP to its own process, and every `Forwarder` alive in it
    /// would catch it: in the test harness's process, another test's experiment would stop as
    /// interrupted, or pass it on to that test's child. So it runs alone, in a new process of
    /// this test binary (`--ignored --exact`), with this variable set.
    const ALONE: &str = "CAPSHIM_SIGNALS_TEST_ALONE";

    #[test]
    fn a_signal_that_arrives_before_the_child_is_known_is_passed_on_when_it_is() {
        let name = "launch::signals::tests::held_signal_passed_on_in_a_process_of_its_own";
        let out = Command::new(std::env::current_exe().unwrap())
            .args(["--ignored", "--exact", name, "--test-threads", "1"])
            .env(ALONE, "1")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains("1 passed"),
            "{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    #[test]
    #[ignore = "run by the test above, in a process of its own"]
    fn held_signal_passed_on_in_a_process_of_its_own() {
        assert!(
            std::env::var_os(ALONE).is_some(),
            "run it through the test above"
        );
        let forwarder = Forwarder::start().unwrap();
        // SIGHUP, not SIGTERM: both are forwarded the same way, and a stray SIGTERM would
        // kill a harness run without --exact.
        kill(Pid::this(), Signal::SIGHUP).unwrap();
        // Let the forwarding thread see it while no child is registered.
        std::thread::sleep(Duration::from_millis(300));
        let mut child = Command::new("sh")
            .args(["-c", "trap 'exit 42' HUP; while :; do sleep 0.05; done"])
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(200)); // the trap is set
        forwarder.forward_to(child.id());
        let deadline = Instant::now() + Duration::from_secs(20);
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if Instant::now() > deadline {
                child.kill().unwrap();
                panic!("the held signal was never passed on");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        assert_eq!(status.code(), Some(42));
        drop(forwarder);
    }
}
