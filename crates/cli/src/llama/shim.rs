//! The shim's own evidence: its `capshim:` stderr lines, and what they and its status file
//! (read by [`crate::launch::status`]) say together about whether it activated.

use serde::Serialize;

use crate::launch::status::StatusEvent;

/// One `capshim: ` line from a workload's stderr.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum ShimLine {
    /// `capshim: active in <process> (pid <n>): <profile> scope=<scope>` (`CAPSHIM_LOG=verbose`)
    Active {
        /// Executable name.
        process: String,
        /// Process id.
        pid: u32,
        /// The rest of the line: the profile values and the scope.
        detail: String,
    },
    /// `capshim: hooked <ClassName> in <process> (pid <n>)`, the process's first also followed
    /// by `: <profile> scope=<scope>` and any `; note: …`
    Hooked {
        /// The device class whose answers changed.
        class: String,
        /// Executable name.
        process: String,
        /// Process id.
        pid: u32,
    },
    /// `capshim: staying stock in <process> (pid <n>): <reason>`
    Stock {
        /// Executable name.
        process: String,
        /// Process id.
        pid: u32,
        /// Why.
        reason: String,
    },
    /// `capshim: hook failed on <ClassName> in <process> (pid <n>): <reason>`
    HookFailed {
        /// The class.
        class: String,
        /// Executable name.
        process: String,
        /// Process id.
        pid: u32,
        /// Why.
        reason: String,
    },
    /// Any other `capshim:` line, kept verbatim (without the prefix).
    Other {
        /// The text after `capshim: `.
        text: String,
    },
}

/// Splits `<process> (pid <n>)<rest>` into process, pid and what follows the closing parenthesis.
fn process_pid(text: &str) -> Option<(String, u32, &str)> {
    let open = text.rfind(" (pid ")?;
    let process = &text[..open];
    let after = &text[open + " (pid ".len()..];
    let close = after.find(')')?;
    let pid = after[..close].parse().ok()?;
    Some((process.to_string(), pid, &after[close + 1..]))
}

impl ShimLine {
    /// Parses one stderr line; `None` when it is not a `capshim: ` line.
    pub fn parse(line: &str) -> Option<ShimLine> {
        let text = line.trim_end().strip_prefix("capshim: ")?;
        let other = || ShimLine::Other {
            text: text.to_string(),
        };
        let parsed = if let Some(rest) = text.strip_prefix("active in ") {
            // The process name comes before the first "): ".
            rest.split_once("): ").and_then(|(head, detail)| {
                let (process, pid, _) = process_pid(&format!("{head})"))?;
                Some(ShimLine::Active {
                    process,
                    pid,
                    detail: detail.to_string(),
                })
            })
        } else if let Some(rest) = text.strip_prefix("hooked ") {
            rest.split_once(" in ").and_then(|(class, tail)| {
                let (process, pid, _) = process_pid(tail)?;
                Some(ShimLine::Hooked {
                    class: class.to_string(),
                    process,
                    pid,
                })
            })
        } else if let Some(rest) = text.strip_prefix("staying stock in ") {
            rest.split_once("): ").and_then(|(head, reason)| {
                let (process, pid, _) = process_pid(&format!("{head})"))?;
                Some(ShimLine::Stock {
                    process,
                    pid,
                    reason: reason.to_string(),
                })
            })
        } else if let Some(rest) = text.strip_prefix("hook failed on ") {
            rest.split_once(" in ").and_then(|(class, tail)| {
                let (head, reason) = tail.split_once("): ")?;
                let (process, pid, _) = process_pid(&format!("{head})"))?;
                Some(ShimLine::HookFailed {
                    class: class.to_string(),
                    process,
                    pid,
                    reason: reason.to_string(),
                })
            })
        } else {
            None
        };
        Some(parsed.unwrap_or_else(other))
    }
}

/// Whether the shim changed the answers in a run, from both of its reports.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Activation {
    /// Whether the arm was meant to run with the shim.
    pub expected: bool,
    /// At least one `hooked` event in the status file, or a `hooked` stderr line:
    /// the answers really changed.
    pub activated: bool,
    /// The shim was loaded and accepted its configuration (an `active` event or line), whether
    /// or not it then hooked anything.
    pub loaded: bool,
    /// Device classes hooked.
    pub hooked_classes: Vec<String>,
    /// Why the shim stayed stock or a hook failed, as it said.
    pub reasons: Vec<String>,
    /// Number of status file events read.
    pub status_events: usize,
    /// The shim's stderr lines, verbatim.
    pub stderr_lines: Vec<String>,
}

impl Activation {
    /// Combines the status file events and the stderr lines of one run.
    pub fn from_evidence(expected: bool, events: &[StatusEvent], stderr: &str) -> Activation {
        let mut a = Activation {
            expected,
            status_events: events.len(),
            ..Activation::default()
        };
        let add_class = |a: &mut Activation, class: &str| {
            if !a.hooked_classes.iter().any(|c| c == class) {
                a.hooked_classes.push(class.to_string());
            }
        };
        for e in events {
            match e.event.as_str() {
                "active" => a.loaded = true,
                "hooked" => {
                    a.activated = true;
                    add_class(&mut a, e.class.as_deref().unwrap_or("?"));
                }
                "inactive" | "failed" => {
                    let what = match &e.class {
                        Some(class) => format!("{} ({class})", e.event),
                        None => e.event.clone(),
                    };
                    a.reasons.push(format!(
                        "{what}: {}",
                        e.reason.as_deref().unwrap_or("no reason given")
                    ));
                }
                _ => {}
            }
        }
        for line in stderr.lines() {
            let Some(parsed) = ShimLine::parse(line) else {
                continue;
            };
            a.stderr_lines.push(line.trim_end().to_string());
            match parsed {
                ShimLine::Active { .. } => a.loaded = true,
                ShimLine::Hooked { class, .. } => {
                    a.activated = true;
                    add_class(&mut a, &class);
                }
                ShimLine::Stock { reason, .. } if events.is_empty() => {
                    a.reasons.push(format!("inactive: {reason}"));
                }
                ShimLine::HookFailed { class, reason, .. } if events.is_empty() => {
                    a.reasons.push(format!("failed ({class}): {reason}"));
                }
                _ => {}
            }
        }
        a
    }

    /// What to check when the shim should have activated and did not, for an error message:
    /// what the evidence says happened, and what to do about it. `inject` is the injection
    /// variable, `dylib` the library's path.
    pub fn what_to_check(&self, inject: &str, dylib: &str) -> String {
        if !self.reasons.is_empty() {
            "The shim loaded and said why it stayed stock: fix that".to_string()
        } else if self.loaded {
            "The shim loaded and accepted its profile, but the program created no Metal device: \
             a CPU-only llama.cpp build, or a system without Metal (Linux has none, so the shim \
             never activates there)"
                .to_string()
        } else {
            format!(
                "The shim did not load: check that {inject} can load {dylib} (in the guest, \
                 `capshim doctor -- PROGRAM` checks the library, SIP, the hardened runtime and \
                 library validation)"
            )
        }
    }

    /// The activation of an arm over all its runs: activated only when every run activated.
    /// `None` when there are no runs.
    pub fn combine(runs: &[Activation]) -> Option<Activation> {
        let first = runs.first()?;
        let mut all = Activation {
            expected: first.expected,
            activated: runs.iter().all(|r| r.activated),
            loaded: runs.iter().all(|r| r.loaded),
            ..Activation::default()
        };
        for run in runs {
            for class in &run.hooked_classes {
                if !all.hooked_classes.contains(class) {
                    all.hooked_classes.push(class.clone());
                }
            }
            for reason in &run.reasons {
                if !all.reasons.contains(reason) {
                    all.reasons.push(reason.clone());
                }
            }
            all.status_events += run.status_events;
            all.stderr_lines.extend(run.stderr_lines.iter().cloned());
        }
        if first.expected && !all.activated && runs.iter().any(|r| r.activated) {
            let stock = runs.iter().filter(|r| !r.activated).count();
            all.reasons
                .push(format!("{stock} of {} runs did not activate", runs.len()));
        }
        Some(all)
    }

    /// One line for a report.
    pub fn describe(&self) -> String {
        if !self.expected {
            return if self.activated {
                "shim ACTIVE in an arm meant to be stock".to_string()
            } else {
                "no shim".to_string()
            };
        }
        if self.activated {
            format!("shim active, hooked {}", self.hooked_classes.join(", "))
        } else if self.reasons.is_empty() && self.loaded {
            "shim did NOT activate: it loaded with its profile but hooked no Metal device class \
             (Metal never created a device in the process)"
                .to_string()
        } else if self.reasons.is_empty() {
            format!(
                "shim did NOT activate: no `hooked` event ({} status events, {} capshim stderr lines)",
                self.status_events,
                self.stderr_lines.len()
            )
        } else {
            format!("shim did NOT activate: {}", self.reasons.join("; "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The hint follows the evidence: not loaded, loaded without a device, stayed stock.
    #[test]
    fn what_to_check_follows_the_evidence() {
        let hint = |stderr: &str| {
            Activation::from_evidence(true, &[], stderr).what_to_check("LD_PRELOAD", "/x/lib.so")
        };
        assert!(
            hint("").starts_with("The shim did not load: check that LD_PRELOAD can load /x/lib.so")
        );
        let loaded =
            hint("capshim: active in llama-bench (pid 1): apple_family_max=1009 (Apple9)\n");
        assert!(loaded.contains("created no Metal device"), "{loaded}");
        let stock = hint(
            "capshim: staying stock in llama-bench (pid 1): CAPSHIM_APPLE_FAMILY_MAX=\"x\" is malformed\n",
        );
        assert!(stock.contains("said why it stayed stock"), "{stock}");
    }

    #[test]
    fn parses_every_shim_line() {
        assert_eq!(
            ShimLine::parse("capshim: active in llama-bench (pid 812): apple_family_max=1009 (Apple9) max_threadgroup_memory=65536 recommended_working_set_size=unchanged scope=children"),
            Some(ShimLine::Active {
                process: "llama-bench".into(),
                pid: 812,
                detail: "apple_family_max=1009 (Apple9) max_threadgroup_memory=65536 recommended_working_set_size=unchanged scope=children".into()
            })
        );
        assert_eq!(
            ShimLine::parse("capshim: hooked AppleParavirtDevice in my tool (pid 9)\n"),
            Some(ShimLine::Hooked {
                class: "AppleParavirtDevice".into(),
                process: "my tool".into(),
                pid: 9
            })
        );
        // A process's first hooked line, with the profile and a note (the shim's default).
        assert_eq!(
            ShimLine::parse(
                "capshim: hooked AppleParavirtDevice in llama-bench (pid 812): apple_family_max=1999 max_threadgroup_memory=65536 recommended_working_set_size=unchanged scope=children; note: TART_METAL_APPLE_FAMILY_MAX: 1999 is above MTLGPUFamilyApple10 (1010): no hardware has it; answering as configured"
            ),
            Some(ShimLine::Hooked {
                class: "AppleParavirtDevice".into(),
                process: "llama-bench".into(),
                pid: 812
            })
        );
        assert_eq!(
            ShimLine::parse("capshim: staying stock in python3 (pid 10): _MTLDevice not loaded"),
            Some(ShimLine::Stock {
                process: "python3".into(),
                pid: 10,
                reason: "_MTLDevice not loaded".into()
            })
        );
        assert_eq!(
            ShimLine::parse(
                "capshim: hook failed on AGXDevice in llama-bench (pid 11): method supportsFamily: missing"
            ),
            Some(ShimLine::HookFailed {
                class: "AGXDevice".into(),
                process: "llama-bench".into(),
                pid: 11,
                reason: "method supportsFamily: missing".into()
            })
        );
        assert_eq!(
            ShimLine::parse("capshim: query supportsFamily:1007 original=false returned=true"),
            Some(ShimLine::Other {
                text: "query supportsFamily:1007 original=false returned=true".into()
            })
        );
        assert_eq!(ShimLine::parse("ggml_metal_device_init: x"), None);
    }

    const STATUS: &str = r#"{"pid":123,"process":"llama-bench","event":"active","reason":null,"class":null,"profile":{"apple_family_max":1009,"max_threadgroup_memory":65536,"recommended_working_set_size":null}}
{"pid":123,"process":"llama-bench","event":"hooked","reason":null,"class":"AppleParavirtDevice","profile":null}
"#;

    #[test]
    fn activation_needs_a_hooked_event() {
        let events = StatusEvent::parse_file("s.jsonl", STATUS).unwrap();
        assert_eq!(events.len(), 2);
        assert_eq!(events[0].profile.as_ref().unwrap().apple_family_max, 1009);
        let a = Activation::from_evidence(true, &events, "");
        assert!(a.activated);
        assert_eq!(a.hooked_classes, vec!["AppleParavirtDevice"]);
        assert_eq!(a.describe(), "shim active, hooked AppleParavirtDevice");

        // Active but nothing hooked: the answers never changed.
        let a = Activation::from_evidence(true, &events[..1], "");
        assert!(!a.activated);
        assert!(a.loaded);
        assert!(
            a.describe().contains(
                "did NOT activate: it loaded with its profile but hooked no Metal device class"
            ),
            "{}",
            a.describe()
        );

        let stock = r#"{"pid":5,"process":"llama-bench","event":"inactive","reason":"_MTLDevice not loaded","class":null,"profile":null}"#;
        let events = StatusEvent::parse_file("s.jsonl", stock).unwrap();
        let a = Activation::from_evidence(true, &events, "");
        assert_eq!(
            a.describe(),
            "shim did NOT activate: inactive: _MTLDevice not loaded"
        );

        // stderr alone is evidence too (status file unwritable).
        let a = Activation::from_evidence(
            true,
            &[],
            "capshim: hooked AppleParavirtDevice in llama-bench (pid 1)\n",
        );
        assert!(a.activated);
        assert_eq!(a.stderr_lines.len(), 1);

        assert_eq!(
            Activation::from_evidence(false, &[], "").describe(),
            "no shim"
        );
    }
}
