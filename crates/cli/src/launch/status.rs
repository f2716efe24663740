//! The shim's status file (`CAPSHIM_STATUS_FILE`): its events, the one reader of it (used by
//! `capshim run` and `probe` for their summary line, and by `bench` and `report` for the
//! activation check), and the one-line summary of whether the shim activated.
//!
//! The shim appends one JSON object per event:
//! `{"pid":123,"process":"probe","event":"active"|"inactive"|"hooked"|"failed",
//!   "reason":null|"…","class":null|"AppleParavirtDevice","profile":null|{…}}`.
//! "Activated" means at least one `hooked` event: a device class answers differently.

use std::path::Path;

use serde::{Deserialize, Serialize};

/// The profile values a status event reports.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusProfile {
    /// Highest Apple family answered true.
    pub apple_family_max: i64,
    /// Threadgroup memory floor, in bytes.
    pub max_threadgroup_memory: u64,
    /// Working set floor, in bytes; `null` when left alone.
    pub recommended_working_set_size: Option<u64>,
}

/// One line of the status file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusEvent {
    /// Process id.
    pub pid: u32,
    /// Executable name.
    pub process: String,
    /// `active`, `inactive`, `hooked` or `failed`.
    pub event: String,
    /// Why (for `inactive` and `failed`).
    #[serde(default)]
    pub reason: Option<String>,
    /// The device class (for `hooked` and `failed`).
    #[serde(default)]
    pub class: Option<String>,
    /// The profile (for `active`).
    #[serde(default)]
    pub profile: Option<StatusProfile>,
}

/// A status file that cannot be read as the shim's JSON lines.
#[derive(Debug, thiserror::Error)]
#[error(
    "{path}: line {line} is not a capshim status event ({why}); \
     the file must be written only by the shim through CAPSHIM_STATUS_FILE: use a fresh file per run"
)]
pub struct StatusFileError {
    /// The file.
    pub path: String,
    /// 1-based line number.
    pub line: usize,
    /// What the JSON parser said.
    pub why: String,
}

impl StatusEvent {
    /// Reads status-file text line by line, skipping blank lines: each item is one event, or
    /// the error naming `path` (only used in messages) and the 1-based line number.
    pub fn parse_lines<'a>(
        path: &'a str,
        text: &'a str,
    ) -> impl Iterator<Item = Result<StatusEvent, StatusFileError>> + 'a {
        text.lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
            .map(move |(i, l)| {
                serde_json::from_str(l).map_err(|e| StatusFileError {
                    path: path.to_string(),
                    line: i + 1,
                    why: e.to_string(),
                })
            })
    }

    /// Parses a whole status file. `path` is only used in error messages.
    ///
    /// # Errors
    /// [`StatusFileError`] on the first line that is not a status event.
    pub fn parse_file(path: &str, text: &str) -> Result<Vec<StatusEvent>, StatusFileError> {
        StatusEvent::parse_lines(path, text).collect()
    }

    /// Reads and parses the status file at `path`; a file that is missing or unreadable holds
    /// no events (the shim did not write it).
    ///
    /// # Errors
    /// [`StatusFileError`] on the first line that is not a status event.
    pub fn read_file(path: &Path) -> Result<Vec<StatusEvent>, StatusFileError> {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        StatusEvent::parse_file(&path.display().to_string(), &text)
    }
}

/// What one process reported.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProcessStatus {
    /// Process id.
    pub pid: u32,
    /// Executable name.
    pub process: String,
    /// The configuration was accepted (`active`).
    pub accepted: bool,
    /// Classes hooked.
    pub hooked: Vec<String>,
    /// Classes whose hook failed, with the reason.
    pub failed: Vec<(String, String)>,
    /// Reasons given for staying stock (`inactive`).
    pub inactive: Vec<String>,
}

impl ProcessStatus {
    fn who(&self) -> String {
        format!("{} (pid {})", self.process, self.pid)
    }

    /// Why this process did not activate, in words.
    pub fn stock_reason(&self) -> String {
        if let Some((class, reason)) = self.failed.first() {
            format!("hook failed on {class}: {reason}")
        } else if let Some(reason) = self.inactive.first() {
            reason.clone()
        } else if self.accepted {
            "configuration accepted but no Metal device was created".to_string()
        } else {
            "no activation reported".to_string()
        }
    }
}

/// Everything the status file says, per process in order of first appearance.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Summary {
    /// One entry per process that wrote an event.
    pub processes: Vec<ProcessStatus>,
    /// Lines that were not status events (e.g. cut short).
    pub unreadable_lines: usize,
}

/// The most processes named in the one-line summary before "and N more".
const LISTED: usize = 3;

fn listed(items: Vec<String>) -> String {
    let extra = items.len().saturating_sub(LISTED);
    let mut shown: Vec<String> = items.into_iter().take(LISTED).collect();
    if extra > 0 {
        shown.push(format!("and {extra} more"));
    }
    shown.join("; ")
}

impl Summary {
    /// Reads the status file at `path`; a missing or unreadable file holds no events.
    /// Never fails: unreadable lines are counted.
    pub fn read_file(path: &Path) -> Summary {
        Summary::from_lines(&std::fs::read_to_string(path).unwrap_or_default())
    }

    /// Reads status-file text (JSON lines). Never fails: unreadable lines are counted.
    pub fn from_lines(text: &str) -> Summary {
        let mut summary = Summary::default();
        for event in StatusEvent::parse_lines("", text) {
            let Ok(event) = event else {
                summary.unreadable_lines += 1;
                continue;
            };
            let index = match summary.processes.iter().position(|p| p.pid == event.pid) {
                Some(i) => i,
                None => {
                    summary.processes.push(ProcessStatus {
                        pid: event.pid,
                        process: event.process.clone(),
                        ..Default::default()
                    });
                    summary.processes.len() - 1
                }
            };
            let p = &mut summary.processes[index];
            let class = event.class.unwrap_or_else(|| "?".to_string());
            let reason = event
                .reason
                .unwrap_or_else(|| "no reason given".to_string());
            match event.event.as_str() {
                "active" => p.accepted = true,
                "hooked" => p.hooked.push(class),
                "failed" => p.failed.push((class, reason)),
                "inactive" => p.inactive.push(reason),
                _ => summary.unreadable_lines += 1,
            }
        }
        summary
    }

    /// Whether any process hooked a device class, so answers really changed.
    pub fn activated(&self) -> bool {
        self.processes.iter().any(|p| !p.hooked.is_empty())
    }

    /// The one line `capshim run` prints on stderr after the workload exits.
    pub fn line(&self) -> String {
        let mut line = if self.processes.is_empty() {
            "capshim: not activated: the shim did not load (it wrote no status). Check that the \
             library's architecture matches the program, and on macOS that DYLD_INSERT_LIBRARIES \
             was not stripped (SIP-protected programs, scripts run by /bin/sh, hardened-runtime \
             programs without the allow-dyld-environment-variables entitlement)"
                .to_string()
        } else if self.activated() {
            let active: Vec<String> = self
                .processes
                .iter()
                .filter(|p| !p.hooked.is_empty())
                .map(|p| format!("hooked {} in {}", p.hooked.join(", "), p.who()))
                .collect();
            let mut line = format!("capshim: activated: {}", listed(active));
            let failures: Vec<String> = self
                .processes
                .iter()
                .flat_map(|p| {
                    p.failed.iter().map(|(class, reason)| {
                        format!("hook failed on {class} in {}: {reason}", p.who())
                    })
                })
                .collect();
            if !failures.is_empty() {
                line.push_str(&format!("; {}", listed(failures)));
            }
            let stock: Vec<String> = self
                .processes
                .iter()
                .filter(|p| p.hooked.is_empty())
                .map(|p| format!("{}: {}", p.who(), p.stock_reason()))
                .collect();
            if !stock.is_empty() {
                line.push_str(&format!("; stayed stock: {}", listed(stock)));
            }
            line
        } else {
            let stock: Vec<String> = self
                .processes
                .iter()
                .map(|p| format!("{}: {}", p.who(), p.stock_reason()))
                .collect();
            format!("capshim: not activated: {}", listed(stock))
        };
        if self.unreadable_lines > 0 {
            line.push_str(&format!(
                " ({} unreadable status line(s) ignored)",
                self.unreadable_lines
            ));
        }
        line
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ACTIVE: &str = r#"{"pid":10,"process":"probe","event":"active","reason":null,"class":null,"profile":{"apple_family_max":1009,"max_threadgroup_memory":65536,"recommended_working_set_size":null}}"#;
    const HOOKED: &str = r#"{"pid":10,"process":"probe","event":"hooked","reason":null,"class":"AppleParavirtDevice","profile":null}"#;
    const SH_ACTIVE: &str = r#"{"pid":9,"process":"sh","event":"active","reason":null,"class":null,"profile":{"apple_family_max":1009,"max_threadgroup_memory":65536,"recommended_working_set_size":null}}"#;

    #[test]
    fn empty_file_means_the_shim_did_not_load() {
        let s = Summary::from_lines("");
        assert!(!s.activated());
        assert!(s.line().contains("the shim did not load"), "{}", s.line());
    }

    #[test]
    fn hooked_class_means_activated() {
        let s = Summary::from_lines(&format!("{SH_ACTIVE}\n{ACTIVE}\n{HOOKED}\n"));
        assert!(s.activated());
        assert_eq!(
            s.line(),
            "capshim: activated: hooked AppleParavirtDevice in probe (pid 10); stayed stock: sh (pid 9): configuration accepted but no Metal device was created"
        );
    }

    #[test]
    fn accepted_without_a_device_is_not_activated() {
        let s = Summary::from_lines(SH_ACTIVE);
        assert!(!s.activated());
        assert_eq!(
            s.line(),
            "capshim: not activated: sh (pid 9): configuration accepted but no Metal device was created"
        );
    }

    #[test]
    fn reasons_from_inactive_and_failed_events() {
        let text = [
            r#"{"pid":5,"process":"a","event":"inactive","reason":"CAPSHIM_APPLE_FAMILY_MAX=\"x\" is malformed","class":null,"profile":null}"#,
            r#"{"pid":6,"process":"b","event":"active","reason":null,"class":null,"profile":null}"#,
            r#"{"pid":6,"process":"b","event":"failed","reason":"supportsFamily: not found","class":"AppleParavirtDevice","profile":null}"#,
            "{\"pid\":7,",
        ]
        .join("\n");
        let s = Summary::from_lines(&text);
        assert!(!s.activated());
        assert_eq!(
            s.line(),
            "capshim: not activated: a (pid 5): CAPSHIM_APPLE_FAMILY_MAX=\"x\" is malformed; b (pid 6): hook failed on AppleParavirtDevice: supportsFamily: not found (1 unreadable status line(s) ignored)"
        );
    }

    #[test]
    fn many_processes_are_summarised() {
        let mut lines = vec![ACTIVE.to_string(), HOOKED.to_string()];
        for pid in 20..26 {
            lines.push(format!(
                r#"{{"pid":{pid},"process":"sh","event":"active","reason":null,"class":null,"profile":null}}"#
            ));
        }
        lines.push(
            r#"{"pid":10,"process":"probe","event":"failed","reason":"no IMP","class":"OtherDevice","profile":null}"#
                .to_string(),
        );
        let line = Summary::from_lines(&lines.join("\n")).line();
        assert!(line.starts_with("capshim: activated: hooked AppleParavirtDevice in probe (pid 10); hook failed on OtherDevice in probe (pid 10): no IMP; stayed stock: sh (pid 20)"), "{line}");
        assert!(line.ends_with("and 3 more"), "{line}");
    }

    #[test]
    fn events_carry_the_profile() {
        let events =
            StatusEvent::parse_file("s.jsonl", &format!("{ACTIVE}\n\n{HOOKED}\n")).unwrap();
        assert_eq!(events.len(), 2);
        assert_eq!(events[0].profile.as_ref().unwrap().apple_family_max, 1009);
        assert_eq!(events[1].class.as_deref(), Some("AppleParavirtDevice"));
    }

    #[test]
    fn a_broken_status_file_is_an_error() {
        let err =
            StatusEvent::parse_file("raw/x.status.jsonl", "{\"pid\":1}\nnot json\n").unwrap_err();
        assert!(
            err.to_string().contains("raw/x.status.jsonl: line 1"),
            "{err}"
        );
    }

    #[test]
    fn a_missing_status_file_holds_no_events() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("none.jsonl");
        assert!(StatusEvent::read_file(&missing).unwrap().is_empty());
        assert_eq!(Summary::read_file(&missing), Summary::default());
    }
}
