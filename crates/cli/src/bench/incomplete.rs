//! The INCOMPLETE note a stopped run leaves in its bundle: which runs finished, which did not,
//! and why it stopped.

use std::path::Path;

use super::error::RunError;
use crate::bundle;
use crate::launch::signals;

/// What the runs have done so far, for the INCOMPLETE note.
#[derive(Default)]
pub struct RunProgress {
    /// How many runs the plan has.
    pub total: usize,
    /// The runs that finished, as `arm NAME round N (raw/FILE.json)`.
    pub finished: Vec<String>,
    /// The run under way, if any.
    pub current: Option<String>,
}

/// Writes the bundle's INCOMPLETE note: which runs finished and why the run stopped.
pub fn write_incomplete(dir: &Path, progress: &RunProgress, why: &RunError) -> std::io::Result<()> {
    let mut text = String::from(
        "This bundle is unfinished: the `capshim bench` run that wrote it stopped before it sealed it.\n\
         It has no SHA256SUMS and no report; `capshim report` refuses it. Do not use its figures; rerun `capshim bench`.\n\n",
    );
    let mut reason = match why {
        RunError::Interrupted { signal, .. } => format!(
            "interrupted by {signal}; capshim passed it on to the running llama-bench, waited for it and started no further runs"
        ),
        other => other.to_string(),
    };
    let mut source = std::error::Error::source(why);
    while let Some(cause) = source {
        let text = cause.to_string();
        if !reason.contains(&text) {
            reason.push_str(": ");
            reason.push_str(&text);
        }
        source = cause.source();
    }
    text.push_str(&format!("Why it stopped: {reason}\n\n"));
    text.push_str(&format!(
        "Runs finished ({} of {}):\n",
        progress.finished.len(),
        progress.total
    ));
    if progress.finished.is_empty() {
        text.push_str("  none\n");
    }
    for run in &progress.finished {
        text.push_str(&format!("  {run}\n"));
    }
    if let Some(run) = &progress.current {
        text.push_str(&format!(
            "\nRun that did not finish (its raw files are partial):\n  {run}\n"
        ));
    }
    let done = progress.finished.len() + usize::from(progress.current.is_some());
    text.push_str(&format!(
        "\nRuns never started: {}\n",
        progress.total.saturating_sub(done)
    ));
    std::fs::write(dir.join(bundle::INCOMPLETE_FILE), text)
}

/// The error of a run stopped by signal `number`.
pub fn interrupted(number: i32) -> RunError {
    RunError::Interrupted {
        signal: signals::name(number),
        number,
        note: bundle::INCOMPLETE_FILE,
    }
}
