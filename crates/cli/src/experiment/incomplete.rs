//! The INCOMPLETE note a stopped experiment leaves in its bundle instead of a seal (worded by
//! [`crate::bundle::incomplete`]): which units of work finished, which did not, and why it
//! stopped, in the experiment's own words.

use std::path::Path;

use super::Words;
use super::error::ExperimentError;
use crate::bundle::identity::IdentifyError;
use crate::bundle::incomplete::{self, Note, Progress};

/// Writes the bundle's INCOMPLETE note; `derived` are the derived files a sealed bundle of
/// this kind has, `footer` a last paragraph.
///
/// # Errors
/// The I/O error when the note cannot be written.
pub fn write(
    dir: &Path,
    words: &Words,
    derived: &[&'static str],
    progress: &Progress,
    why: &ExperimentError,
    footer: Option<String>,
) -> std::io::Result<()> {
    let reason = match why {
        ExperimentError::Interrupted {
            signal,
            in_pause: true,
            ..
        } => format!(
            "interrupted by {signal} during a --cooldown pause, when no {unit} was running; \
             capshim started no further {unit}s",
            unit = words.unit
        ),
        ExperimentError::Interrupted { signal, .. } => format!(
            "interrupted by {signal}; capshim passed it on to {}, waited for it and started no \
             further {}s",
            words.running, words.unit
        ),
        ExperimentError::Identify(e @ IdentifyError::Stopped { .. }) => format!(
            "{e}, before the first {unit}; no {unit} was started",
            unit = words.unit
        ),
        other => crate::format::chain(other),
    };
    incomplete::write(
        dir,
        &Note {
            command: words.command,
            unit: words.unit,
            progress,
            reason,
            derived,
            footer,
        },
    )
}
