//! Reading the shim's status file (`CAPSHIM_STATUS_FILE`) and saying in one line whether it
//! activated.
//!
//! The shim appends one JSON object per event:
//! `{"pid":123,"process":"probe","event":"active"|"inactive"|"hooked"|"failed",
//!   "reason":null|"…","class":null|"MTLParavirtualDevice","profile":null|{…}}`.
//! "Activated" means at least one `hooked` event: a device class answers differently.

use serde::Deserialize;

/// One line of the status file.
#[derive(Debug, Clone, Deserialize)]
pub struct Event {
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
    /// Reads status-file text (JSON lines). Never fails: unreadable lines are counted.
    pub fn from_lines(text: &str) -> Summary {
        let mut summary = Summary::default();
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let Ok(event) = serde_json::from_str::<Event>(line) else {
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
    const HOOKED: &str = r#"{"pid":10,"process":"probe","event":"hooked","reason":null,"class":"MTLParavirtualDevice","profile":null}"#;
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
            "capshim: activated: hooked MTLParavirtualDevice in probe (pid 10); stayed stock: sh (pid 9): configuration accepted but no Metal device was created"
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
            r#"{"pid":6,"process":"b","event":"failed","reason":"supportsFamily: not found","class":"MTLParavirtualDevice","profile":null}"#,
            "{\"pid\":7,",
        ]
        .join("\n");
        let s = Summary::from_lines(&text);
        assert!(!s.activated());
        assert_eq!(
            s.line(),
            "capshim: not activated: a (pid 5): CAPSHIM_APPLE_FAMILY_MAX=\"x\" is malformed; b (pid 6): hook failed on MTLParavirtualDevice: supportsFamily: not found (1 unreadable status line(s) ignored)"
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
        assert!(line.starts_with("capshim: activated: hooked MTLParavirtualDevice in probe (pid 10); hook failed on OtherDevice in probe (pid 10): no IMP; stayed stock: sh (pid 20)"), "{line}");
        assert!(line.ends_with("and 3 more"), "{line}");
    }
}
