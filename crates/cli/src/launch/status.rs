//! The shim's status file (`CAPSHIM_STATUS_FILE`): its events, the one reader of it (used by
//! `capshim run` and `probe` for their summary line, and by `bench` and `report` for the
//! activation check), and the one-line summary of whether the shim activated.
//!
//! The shim appends one JSON object per event:
//! `{"pid":123,"process":"probe","event":"active"|"inactive"|"hooked"|"failed",
//!   "reason":null|"…","class":null|"AppleParavirtDevice","profile":null|{…}}`.
//! "Activated" means at least one `hooked` event: a device class answers differently.
//!
//! `run` and `probe` read the file after the workload, which any process of it may have
//! written to at length, so their [`Summary`] reads it as a stream within a fixed bound of
//! memory: lines of up to [`MAX_LINE`] bytes (a longer line counts as unreadable), the events
//! of the first [`MAX_PROCESSES`] processes, [`MAX_PER_KIND`] hooked classes, failures and
//! reasons per process, and names and reasons cut at [`MAX_TEXT`] bytes. Every other event is
//! counted, not kept, and the summary line says how many; a `hooked` event is always counted,
//! so activation is found wherever it is in the file.

use std::collections::HashMap;
use std::io::BufRead;
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

    /// Reads and parses the status file at `path` (bench's and verify's strict reader), within
    /// a fixed bound of memory: at most [`MAX_STRICT_FILE`] bytes are read, and a longer file
    /// is refused unread. A file that is missing or cannot be opened holds no events (the shim
    /// did not write it).
    ///
    /// # Errors
    /// [`StatusFileError`] on a file longer than [`MAX_STRICT_FILE`] bytes (naming the line
    /// it passes the bound on), on a file that is not UTF-8, or on the first line that is not a status event.
    pub fn read_file(path: &Path) -> Result<Vec<StatusEvent>, StatusFileError> {
        use std::io::Read;
        let shown = path.display().to_string();
        let error = |line: usize, why: String| StatusFileError {
            path: shown.clone(),
            line,
            why,
        };
        let Ok(file) = std::fs::File::open(path) else {
            return Ok(Vec::new());
        };
        let mut bytes = Vec::new();
        file.take(MAX_STRICT_FILE + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| error(0, format!("cannot be read: {e}")))?;
        // The line a byte offset is on, 1-based.
        let line_at =
            |bytes: &[u8], at: usize| 1 + bytes[..at].iter().filter(|&&b| b == b'\n').count();
        if bytes.len() as u64 > MAX_STRICT_FILE {
            return Err(error(
                line_at(&bytes, bytes.len() - 1),
                format!(
                    "the file goes on past {MAX_STRICT_FILE} bytes, where one run's shim writes \
                     a few hundred"
                ),
            ));
        }
        let text = String::from_utf8(bytes).map_err(|e| {
            let line = line_at(e.as_bytes(), e.utf8_error().valid_up_to());
            error(line, "not UTF-8".to_string())
        })?;
        StatusEvent::parse_file(&shown, &text)
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

/// The longest status file [`StatusEvent::read_file`] (bench's and verify's strict reader)
/// reads, in bytes: one llama.cpp run's shim writes a few events of a few hundred bytes each.
pub const MAX_STRICT_FILE: u64 = 1 << 20;

/// The longest status line [`Summary`] reads, in bytes: an event is a few hundred.
pub const MAX_LINE: usize = 16 * 1024;
/// The most processes [`Summary`] keeps the events of.
pub const MAX_PROCESSES: usize = 1024;
/// The most hooked classes, failures and reasons for staying stock [`Summary`] keeps per
/// process, each.
pub const MAX_PER_KIND: usize = 4;
/// The longest process name, class or reason [`Summary`] keeps, in bytes.
pub const MAX_TEXT: usize = 512;

/// Everything the status file says, per process in order of first appearance, within the
/// bounds above.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Summary {
    /// One entry per process that wrote an event (the first [`MAX_PROCESSES`]).
    pub processes: Vec<ProcessStatus>,
    /// Lines that were not status events (e.g. cut short, or longer than [`MAX_LINE`]).
    pub unreadable_lines: usize,
    /// Events read but not kept: beyond [`MAX_PER_KIND`] of a kind in one process, or of a
    /// process beyond the first [`MAX_PROCESSES`].
    pub left_out: usize,
    /// Processes beyond the first [`MAX_PROCESSES`] that hooked a device class.
    pub hooked_unlisted: usize,
    /// Where each kept process is in `processes`, by pid.
    index: HashMap<u32, usize>,
    /// The pids beyond the first [`MAX_PROCESSES`] seen hooking, up to [`MAX_PROCESSES`] (to
    /// count each once).
    unlisted_pids: Vec<u32>,
}

/// `text` cut to at most [`MAX_TEXT`] bytes at a character boundary, `…` marking the cut.
fn capped(mut text: String) -> String {
    if text.len() > MAX_TEXT {
        let mut end = MAX_TEXT;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push('…');
    }
    text
}

/// Reads one line into `line` (without its end), keeping at most `max` bytes: `None` at the
/// end of the input, `Some(false)` for a line longer than `max`, whose rest is skipped.
fn read_line_capped(
    reader: &mut impl BufRead,
    line: &mut Vec<u8>,
    max: usize,
) -> std::io::Result<Option<bool>> {
    line.clear();
    let (mut any, mut whole) = (false, true);
    loop {
        let buffer = reader.fill_buf()?;
        if buffer.is_empty() {
            return Ok(any.then_some(whole));
        }
        any = true;
        let (part, done) = match buffer.iter().position(|&b| b == b'\n') {
            Some(at) => (&buffer[..at], Some(at + 1)),
            None => (buffer, None),
        };
        if whole && line.len() + part.len() <= max {
            line.extend_from_slice(part);
        } else {
            whole = false;
            line.clear();
        }
        let used = done.unwrap_or(buffer.len());
        reader.consume(used);
        if done.is_some() {
            return Ok(Some(whole));
        }
    }
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
    /// Reads the status file at `path` as a stream, within the bounds of the module's
    /// constants; a missing or unreadable file holds no events. Never fails: unreadable
    /// lines are counted, and reading stops at an I/O error.
    pub fn read_file(path: &Path) -> Summary {
        match std::fs::File::open(path) {
            Ok(file) => Summary::from_reader(std::io::BufReader::new(file)),
            Err(_) => Summary::default(),
        }
    }

    /// Reads status-file text (JSON lines), as [`Summary::from_reader`].
    pub fn from_lines(text: &str) -> Summary {
        Summary::from_reader(text.as_bytes())
    }

    /// Reads status-file lines from `reader` one at a time, keeping what the module's
    /// constants allow. Never fails: unreadable lines are counted.
    pub fn from_reader(mut reader: impl BufRead) -> Summary {
        let mut summary = Summary::default();
        let mut line = Vec::new();
        while let Ok(Some(whole)) = read_line_capped(&mut reader, &mut line, MAX_LINE) {
            if !whole {
                summary.unreadable_lines += 1;
            } else if !line.trim_ascii().is_empty() {
                match serde_json::from_slice::<StatusEvent>(&line) {
                    Ok(event) => summary.add(event),
                    Err(_) => summary.unreadable_lines += 1,
                }
            }
        }
        summary
    }

    /// Adds one event, within the bounds.
    fn add(&mut self, event: StatusEvent) {
        let index = match self.index.get(&event.pid) {
            Some(&i) => i,
            None if self.processes.len() < MAX_PROCESSES => {
                self.processes.push(ProcessStatus {
                    pid: event.pid,
                    process: capped(event.process),
                    ..Default::default()
                });
                self.index.insert(event.pid, self.processes.len() - 1);
                self.processes.len() - 1
            }
            None => {
                self.left_out += 1;
                if event.event == "hooked" && !self.unlisted_pids.contains(&event.pid) {
                    self.hooked_unlisted += 1;
                    if self.unlisted_pids.len() < MAX_PROCESSES {
                        self.unlisted_pids.push(event.pid);
                    }
                }
                return;
            }
        };
        let p = &mut self.processes[index];
        let class = || capped(event.class.clone().unwrap_or_else(|| "?".to_string()));
        let reason = || {
            capped(
                event
                    .reason
                    .clone()
                    .unwrap_or_else(|| "no reason given".to_string()),
            )
        };
        let full = match event.event.as_str() {
            "active" => {
                p.accepted = true;
                false
            }
            "hooked" if p.hooked.contains(&class()) => false,
            "hooked" if p.hooked.len() < MAX_PER_KIND => {
                p.hooked.push(class());
                false
            }
            "failed" if p.failed.len() < MAX_PER_KIND => {
                p.failed.push((class(), reason()));
                false
            }
            "inactive" if p.inactive.len() < MAX_PER_KIND => {
                p.inactive.push(reason());
                false
            }
            "hooked" | "failed" | "inactive" => true,
            _ => {
                self.unreadable_lines += 1;
                false
            }
        };
        if full {
            self.left_out += 1;
        }
    }

    /// Whether any process hooked a device class, so answers really changed.
    pub fn activated(&self) -> bool {
        self.hooked_unlisted > 0 || self.processes.iter().any(|p| !p.hooked.is_empty())
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
            let mut active: Vec<String> = self
                .processes
                .iter()
                .filter(|p| !p.hooked.is_empty())
                .map(|p| format!("hooked {} in {}", p.hooked.join(", "), p.who()))
                .collect();
            if self.hooked_unlisted > 0 {
                active.push(format!(
                    "hooked in {} more process(es) after the first {MAX_PROCESSES}",
                    self.hooked_unlisted
                ));
            }
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
        if self.left_out > 0 {
            line.push_str(&format!(
                " ({} status event(s) left out: capshim keeps the first {MAX_PROCESSES} \
                 processes' events, {MAX_PER_KIND} of each kind per process)",
                self.left_out
            ));
        }
        line
    }
}

#[cfg(test)]
mod tests;
