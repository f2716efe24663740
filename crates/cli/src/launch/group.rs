//! The process group a command led (`bench --command`, `tune --command`): what is left of it
//! once its leader exited is ended, so that no child of the command writes into a sealed
//! bundle's files or runs on into the next measured run. A process that left the group
//! (`setsid`, `setpgid`) is out of reach, as it is of a terminal's job control.

use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

/// How long the group's processes have after SIGTERM before they get SIGKILL.
pub const GRACE: Duration = Duration::from_millis(1000);

/// Ends every process still running in the process group `pgid`: SIGTERM (with SIGCONT, so
/// that a stopped one gets it), then SIGKILL for whatever still runs after [`GRACE`]. Returns
/// how many were running when it began (0, at no cost, when the group is gone).
pub fn end(pgid: u32) -> usize {
    let Ok(raw) = i32::try_from(pgid) else {
        return 0;
    };
    let group = Pid::from_raw(raw);
    // Signal 0 only asks whether any process of the group exists.
    if killpg(group, None).is_err() {
        return 0;
    }
    let running = count(raw);
    if running == 0 {
        // Only zombies, waiting for their new parent to reap them.
        return 0;
    }
    let _ = killpg(group, Signal::SIGTERM);
    let _ = killpg(group, Signal::SIGCONT);
    if !wait_empty(raw, GRACE) {
        let _ = killpg(group, Signal::SIGKILL);
        wait_empty(raw, GRACE);
    }
    running
}

/// Whether the group `pgid` has no running process left within `limit`.
fn wait_empty(pgid: i32, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if killpg(Pid::from_raw(pgid), None).is_err() || count(pgid) == 0 {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// How many processes of the group `pgid` are running (zombies, already ended, are not).
fn count(pgid: i32) -> usize {
    members(pgid).len()
}

/// The processes of the group `pgid` that are not zombies: pid, and whether it is stopped.
#[cfg(target_os = "linux")]
fn members(pgid: i32) -> Vec<(u32, bool)> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            // `pid (comm) state ppid pgrp ...`: comm may hold spaces and parentheses, so the
            // fields are counted from the last `)`.
            let (_, rest) = stat.rsplit_once(')')?;
            let mut fields = rest.split_whitespace();
            let state = fields.next()?;
            let group = fields.nth(1)?.parse::<i32>().ok()?;
            (group == pgid && state != "Z" && state != "X").then_some((pid, state == "T"))
        })
        .collect()
}

/// The processes of the group `pgid` that are not zombies, as `ps` lists them: pid, and
/// whether it is stopped.
#[cfg(not(target_os = "linux"))]
fn members(pgid: i32) -> Vec<(u32, bool)> {
    let Ok(out) = std::process::Command::new("ps")
        .args(["-A", "-o", "pid=,pgid=,stat="])
        .output()
    else {
        // Without ps, assume something is left: the signals sent then are harmless if not.
        return vec![(0, false)];
    };
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let pid = fields.next()?.parse::<u32>().ok()?;
            let group = fields.next()?.parse::<i32>().ok()?;
            let state = fields.next()?;
            (group == pgid && !state.starts_with('Z')).then_some((pid, state.starts_with('T')))
        })
        .collect()
}

/// Looks, while a group's leader runs, for a process of the group that stays stopped: a child
/// the shell waits for that read the terminal (SIGTTIN) would wait forever, and the shell with
/// it. Looks after 1 s, then ever less often (every 30 s at most, so that a long run is barely
/// disturbed); a process seen stopped twice, half a second apart, has its group killed.
pub struct Watch {
    done: std::sync::mpsc::Sender<()>,
    thread: std::thread::JoinHandle<Option<u32>>,
}

impl Watch {
    /// Starts watching the group `pgid`.
    pub fn start(pgid: u32) -> Watch {
        let (done, stop) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::spawn(move || {
            let pgid = i32::try_from(pgid).ok()?;
            let mut pause = Duration::from_secs(1);
            let mut suspect: Option<u32> = None;
            loop {
                match stop.recv_timeout(pause) {
                    Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
                    _ => return None,
                }
                let stopped: Vec<u32> = members(pgid)
                    .into_iter()
                    .filter_map(|(pid, stopped)| stopped.then_some(pid))
                    .collect();
                if let Some(pid) = suspect.filter(|p| stopped.contains(p)) {
                    let _ = killpg(Pid::from_raw(pgid), Signal::SIGKILL);
                    return Some(pid);
                }
                suspect = stopped.first().copied();
                pause = if suspect.is_some() {
                    Duration::from_millis(500)
                } else {
                    (pause * 2).min(Duration::from_secs(30))
                };
            }
        });
        Watch { done, thread }
    }

    /// Stops watching (the leader exited): the process seen stopped, whose group was killed.
    pub fn finish(self) -> Option<u32> {
        let _ = self.done.send(());
        self.thread.join().ok().flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::CommandExt;
    use std::process::Command;

    #[test]
    fn what_a_group_leader_left_running_is_counted_and_ended() {
        let mut leader = Command::new("/bin/sh")
            .args(["-c", "sleep 30 & sleep 30 & echo started"])
            .stdout(std::process::Stdio::piped())
            .process_group(0)
            .spawn()
            .unwrap();
        let pgid = leader.id();
        assert!(leader.wait().unwrap().success());
        assert_eq!(end(pgid), 2);
        assert_eq!(count(i32::try_from(pgid).unwrap()), 0);
        assert_eq!(end(pgid), 0);
    }
}
