//! Why a verify run stopped: [`VerifyError`], for everything after the plan was checked.

use std::path::{Path, PathBuf};

use super::base::BaseError;
use super::derive::DeriveError;
use crate::bundle::BundleError;
use crate::bundle::identity::IdentifyError;

/// Why a verify run stopped.
#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    /// The bundle could not be created or sealed.
    #[error(transparent)]
    Bundle(#[from] BundleError),
    /// A file operation failed.
    #[error("{action} {path}: {source}")]
    Io {
        /// What was being done.
        action: &'static str,
        /// On which path.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A file cannot be identified (hashed), or a signal stopped its hashing.
    #[error(transparent)]
    Identify(#[from] IdentifyError),
    /// A tool could not be started.
    #[error("cannot start {tool} {path}: {source}; check --llama-dir")]
    Spawn {
        /// The tool.
        tool: &'static str,
        /// Its path.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A tool failed or crashed.
    #[error(
        "{tool} failed in arm {arm} ({status}); its stderr ({stderr}) ends with:\n  {tail}\n\
         fix the cause above (the model, the llama.cpp arguments after `--`) and rerun"
    )]
    ToolFailed {
        /// The tool.
        tool: &'static str,
        /// The arm.
        arm: String,
        /// How it exited.
        status: String,
        /// Its stderr file.
        stderr: PathBuf,
        /// The last lines of its stderr.
        tail: String,
    },
    /// A tool's output gives no result.
    #[error(transparent)]
    Output(#[from] DeriveError),
    /// The base cannot be used or written.
    #[error(transparent)]
    Base(#[from] BaseError),
    /// The reference arm's shim did not activate: nothing can be compared with it.
    #[error(
        "the reference arm {arm} cannot be compared with: {why}. {check}; or use the stock \
         reference, or pass --allow-inactive"
    )]
    ReferenceInactive {
        /// The arm.
        arm: String,
        /// What the shim said.
        why: String,
        /// What to check ([`crate::llama::shim::Activation::what_to_check`]).
        check: String,
    },
    /// A JSON file could not be written.
    #[error("cannot serialize {what}: {source}")]
    Json {
        /// Which file.
        what: &'static str,
        /// The serializer's error.
        source: serde_json::Error,
    },
    /// A signal stopped the run.
    #[error(
        "interrupted by {signal}: the running llama.cpp tool was stopped and no further step was \
         started; the bundle is unfinished (no SHA256SUMS), see its {note} note"
    )]
    Interrupted {
        /// The signal's name, e.g. `SIGTERM`.
        signal: String,
        /// The signal's number.
        number: i32,
        /// The note's file name.
        note: &'static str,
    },
    /// Any of the above, after the bundle directory was created.
    #[error("verify stopped; the raw files written so far are in {dir}")]
    Stopped {
        /// The unfinished bundle.
        dir: PathBuf,
        /// Why.
        #[source]
        source: Box<VerifyError>,
    },
}

impl VerifyError {
    /// The signal that stopped the run, when one did.
    pub fn interrupted_by(&self) -> Option<i32> {
        match self {
            VerifyError::Interrupted { number, .. } => Some(*number),
            VerifyError::Identify(IdentifyError::Stopped { signal, .. }) => Some(*signal),
            VerifyError::Stopped { source, .. } => source.interrupted_by(),
            _ => None,
        }
    }
}

/// The error for a failed file operation: `action` on `path`.
pub(super) fn io(action: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> VerifyError {
    let path = path.to_path_buf();
    move |source| VerifyError::Io {
        action,
        path,
        source,
    }
}
