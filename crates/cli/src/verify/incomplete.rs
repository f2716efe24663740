//! The INCOMPLETE note a stopped verify run leaves in its bundle (worded by
//! [`crate::bundle::incomplete`]): which steps finished, which did not, why it stopped, and
//! the half-written base removed.

use std::path::{Path, PathBuf};

use super::error::VerifyError;
use crate::bundle::identity::IdentifyError;
use crate::bundle::incomplete::{self, Note};
use crate::bundle::{self};
use crate::launch::signals;

/// What the run has done so far.
#[derive(Default)]
pub struct Progress {
    /// The steps, as `arm NAME: TOOL (raw/FILE)`.
    pub work: incomplete::Progress,
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
    let reason = match why {
        VerifyError::Interrupted { signal, .. } => format!(
            "interrupted by {signal}; capshim passed it on to the running llama.cpp tool, waited for \
             it and started no further step"
        ),
        VerifyError::Identify(e @ IdentifyError::Stopped { .. }) => {
            format!("{e}, before the first step; no step was started")
        }
        other => crate::format::chain(other),
    };
    incomplete::write(
        dir,
        &Note {
            command: "verify",
            unit: "step",
            progress: &progress.work,
            reason,
            derived: &["summary.json", "report.md"],
            footer: removed.map(|base| {
                format!(
                    "The base being saved, {}, was incomplete and has been removed.",
                    base.display()
                )
            }),
        },
    )
}

/// The error of a run stopped by signal `number`.
pub fn interrupted(number: i32) -> VerifyError {
    VerifyError::Interrupted {
        signal: signals::name(number),
        number,
        note: bundle::INCOMPLETE_FILE,
    }
}
