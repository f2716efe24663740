//! The INCOMPLETE note a stopped bench run leaves in its bundle (worded by
//! [`crate::bundle::incomplete`]): which runs finished, which did not, and why it stopped.

use std::path::Path;

use super::derive::DERIVED_FILES;
use super::error::RunError;
use crate::bundle::incomplete::{self, Note, Progress};
use crate::bundle::{self, identity::IdentifyError};
use crate::launch::signals;

/// Writes the bundle's INCOMPLETE note: which runs finished and why the run stopped.
pub fn write_incomplete(dir: &Path, progress: &Progress, why: &RunError) -> std::io::Result<()> {
    let reason = match why {
        RunError::Interrupted { signal, .. } => format!(
            "interrupted by {signal}; capshim passed it on to the running llama-bench, waited for it and started no further runs"
        ),
        RunError::Identify(e @ IdentifyError::Stopped { .. }) => {
            format!("{e}, before the first run; no run was started")
        }
        other => crate::format::chain(other),
    };
    incomplete::write(
        dir,
        &Note {
            command: "bench",
            unit: "run",
            progress,
            reason,
            derived: &DERIVED_FILES,
            footer: None,
        },
    )
}

/// The error of a run stopped by signal `number`.
pub fn interrupted(number: i32) -> RunError {
    RunError::Interrupted {
        signal: signals::name(number),
        number,
        note: bundle::INCOMPLETE_FILE,
    }
}
