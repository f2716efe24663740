//! The INCOMPLETE note a stopped run (`bench` or `verify`) leaves in its bundle instead of a
//! seal: which runs finished, the one under way and how it ended, how many never started,
//! and why the run stopped. Every sentence is worded from what is true of the bundle: a run
//! is called partial only when it was cut short, and derived files are named when they exist.

use std::path::Path;

use super::INCOMPLETE_FILE;

/// The run (or step) under way when the work stopped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Current {
    /// `arm NAME round N (raw/FILE.json)`, or the step's label.
    pub label: String,
    /// Whether its process ended (with or without a usable result) rather than being cut short.
    pub ended: bool,
}

/// What the work has done so far.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Progress {
    /// How many runs (or steps) are planned.
    pub total: u64,
    /// The ones that finished and were accepted, in order.
    pub finished: Vec<String>,
    /// The one under way, if any.
    pub current: Option<Current>,
}

impl Progress {
    /// A run starts.
    pub fn start(&mut self, label: String) {
        self.current = Some(Current {
            label,
            ended: false,
        });
    }

    /// The current run's process ended; its result is being checked.
    pub fn ended(&mut self) {
        if let Some(current) = &mut self.current {
            current.ended = true;
        }
    }

    /// The current run finished and its result was accepted.
    pub fn finish(&mut self) {
        if let Some(current) = self.current.take() {
            self.finished.push(current.label);
        }
    }
}

/// Everything the note says.
pub struct Note<'a> {
    /// The command that wrote the bundle: `bench` or `verify`.
    pub command: &'static str,
    /// What one unit of work is called: `run` or `step`.
    pub unit: &'static str,
    /// How far it got.
    pub progress: &'a Progress,
    /// Why it stopped, in words.
    pub reason: String,
    /// The derived files a sealed bundle of this kind has: those present are named.
    pub derived: &'a [&'static str],
    /// A last paragraph, if any.
    pub footer: Option<String>,
}

fn capital(word: &str) -> String {
    let mut chars = word.chars();
    chars.next().map_or_else(String::new, |c| {
        c.to_ascii_uppercase().to_string() + chars.as_str()
    })
}

/// The note's text for the bundle `dir`.
pub fn text(dir: &Path, note: &Note) -> String {
    let Note {
        command,
        unit,
        progress,
        ..
    } = note;
    let units = format!("{}s", capital(unit));
    let present: Vec<&str> = note
        .derived
        .iter()
        .copied()
        .filter(|f| dir.join(f).is_file())
        .collect();
    let derived = if present.is_empty() {
        let (last, rest) = note.derived.split_last().unwrap_or((&"report", &[]));
        let files = if rest.is_empty() {
            last.to_string()
        } else {
            format!("{} or {last}", rest.join(", "))
        };
        format!(", and no {files}")
    } else {
        format!(
            "; its {} {} written but never sealed",
            present.join(", "),
            if present.len() == 1 { "was" } else { "were" }
        )
    };
    let mut text = format!(
        "This bundle is unfinished: the `capshim {command}` run that wrote it stopped before it sealed it.\n\
         It has no SHA256SUMS{derived}; `capshim report` refuses it.\n\
         Do not use its figures; rerun `capshim {command}`.\n\n\
         Why it stopped: {}\n\n{units} finished ({} of {}):\n",
        note.reason,
        progress.finished.len(),
        progress.total
    );
    if progress.finished.is_empty() {
        text.push_str("  none\n");
    }
    for done in &progress.finished {
        text.push_str(&format!("  {done}\n"));
    }
    if let Some(current) = &progress.current {
        let what = if current.ended {
            format!(
                "{} that ended but was not accepted (see why it stopped; its raw files are as it left them)",
                capital(unit)
            )
        } else {
            format!("{} cut short (its raw files are partial)", capital(unit))
        };
        text.push_str(&format!("\n{what}:\n  {}\n", current.label));
    }
    let started = progress.finished.len() as u64 + u64::from(progress.current.is_some());
    text.push_str(&format!(
        "\n{units} never started: {}\n",
        progress.total.saturating_sub(started)
    ));
    if let Some(footer) = &note.footer {
        text.push_str(&format!("\n{footer}\n"));
    }
    text
}

/// Writes the note into the bundle `dir`.
///
/// # Errors
/// The I/O error when it cannot be written.
pub fn write(dir: &Path, note: &Note) -> std::io::Result<()> {
    std::fs::write(dir.join(INCOMPLETE_FILE), text(dir, note))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn note<'a>(progress: &'a Progress) -> Note<'a> {
        Note {
            command: "bench",
            unit: "run",
            progress,
            reason: "the reason".into(),
            derived: &["summary.json", "report.md"],
            footer: None,
        }
    }

    #[test]
    fn the_note_says_partial_only_of_a_run_cut_short() {
        let tmp = tempfile::tempdir().unwrap();
        let mut p = Progress {
            total: 4,
            ..Progress::default()
        };
        p.start("arm stock round 1".into());
        p.finish();
        p.start("arm x round 1".into());
        let cut = text(tmp.path(), &note(&p));
        assert!(
            cut.contains("Runs finished (1 of 4):\n  arm stock round 1\n"),
            "{cut}"
        );
        assert!(cut.contains("Run cut short (its raw files are partial):\n  arm x round 1"));
        assert!(cut.contains("Runs never started: 2"), "{cut}");
        assert!(
            cut.contains("It has no SHA256SUMS, and no summary.json or report.md;"),
            "{cut}"
        );

        p.ended();
        let ended = text(tmp.path(), &note(&p));
        assert!(!ended.contains("partial"), "{ended}");
        assert!(
            ended.contains("Run that ended but was not accepted"),
            "{ended}"
        );

        // Every run finished; the reports were written, the seal was not.
        p.current = None;
        p.finished.push("arm x round 1".into());
        std::fs::write(tmp.path().join("report.md"), "r").unwrap();
        let sealing = text(tmp.path(), &note(&p));
        assert!(
            sealing.contains("It has no SHA256SUMS; its report.md was written but never sealed"),
            "{sealing}"
        );
        assert!(!sealing.contains("no report"), "{sealing}");
        assert!(!sealing.contains("partial"), "{sealing}");
        assert!(sealing.contains("Runs never started: 2"), "{sealing}");
    }
}
