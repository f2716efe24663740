//! The INCOMPLETE note a stopped verify run leaves in its bundle: which steps finished, which
//! did not, and why it stopped.

use std::path::{Path, PathBuf};

use super::error::VerifyError;
use crate::bundle;
use crate::launch::signals;

/// What the run has done so far.
#[derive(Default)]
pub struct Progress {
    /// Steps planned.
    pub total: usize,
    /// Steps finished, as `arm NAME: TOOL (raw/FILE)`.
    pub finished: Vec<String>,
    /// The step under way, if any.
    pub current: Option<String>,
    /// A base being written with `--save-base` whose description is not written yet: removed
    /// when the run stops, so that no half-written base is left to be compared with.
    pub partial_base: Option<PathBuf>,
}

/// Writes the bundle's INCOMPLETE note; `removed` is the partial base deleted, if any.
pub fn write_incomplete(
    dir: &Path,
    progress: &Progress,
    why: &VerifyError,
    removed: Option<&Path>,
) -> std::io::Result<()> {
    let mut text = String::from(
        "This bundle is unfinished: the `capshim verify` run that wrote it stopped before it sealed it.\n\
         It has no SHA256SUMS, summary.json or report.md; `capshim report` refuses it. Do not use its\n\
         raw files as a verdict; rerun `capshim verify`.\n\n",
    );
    let mut reason = match why {
        VerifyError::Interrupted { signal, .. } => format!(
            "interrupted by {signal}; capshim passed it on to the running llama.cpp tool, waited for \
             it and started no further step"
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
        "Steps finished ({} of {}):\n",
        progress.finished.len(),
        progress.total
    ));
    if progress.finished.is_empty() {
        text.push_str("  none\n");
    }
    for step in &progress.finished {
        text.push_str(&format!("  {step}\n"));
    }
    if let Some(step) = &progress.current {
        text.push_str(&format!(
            "\nStep that did not finish (its raw files are partial):\n  {step}\n"
        ));
    }
    let done = progress.finished.len() + usize::from(progress.current.is_some());
    text.push_str(&format!(
        "\nSteps never started: {}\n",
        progress.total.saturating_sub(done)
    ));
    if let Some(base) = removed {
        text.push_str(&format!(
            "\nThe base being saved, {}, was incomplete and has been removed.\n",
            base.display()
        ));
    }
    std::fs::write(dir.join(bundle::INCOMPLETE_FILE), text)
}

/// The error of a run stopped by signal `number`.
pub fn interrupted(number: i32) -> VerifyError {
    VerifyError::Interrupted {
        signal: signals::name(number),
        number,
        note: bundle::INCOMPLETE_FILE,
    }
}
