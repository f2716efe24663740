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
#[cfg(target_os = "linux")]
fn count(pgid: i32) -> usize {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    entries
        .filter_map(Result::ok)
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .bytes()
                .all(|b| b.is_ascii_digit())
        })
        .filter_map(|e| std::fs::read_to_string(e.path().join("stat")).ok())
        .filter(|stat| {
            // `pid (comm) state ppid pgrp ...`: comm may hold spaces and parentheses, so the
            // fields are counted from the last `)`.
            let Some((_, rest)) = stat.rsplit_once(')') else {
                return false;
            };
            let mut fields = rest.split_whitespace();
            let state = fields.next().unwrap_or("Z");
            let group = fields.nth(1).and_then(|g| g.parse::<i32>().ok());
            group == Some(pgid) && state != "Z" && state != "X"
        })
        .count()
}

/// How many processes of the group `pgid` are running (zombies, already ended, are not), as
/// `ps` lists them.
#[cfg(not(target_os = "linux"))]
fn count(pgid: i32) -> usize {
    let Ok(out) = std::process::Command::new("ps")
        .args(["-A", "-o", "pgid=,stat="])
        .output()
    else {
        // Without ps, assume something is left: the signals below are harmless if not.
        return 1;
    };
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|line| {
            let mut fields = line.split_whitespace();
            let group = fields.next().and_then(|g| g.parse::<i32>().ok());
            let state = fields.next().unwrap_or("Z");
            group == Some(pgid) && !state.starts_with('Z')
        })
        .count()
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
