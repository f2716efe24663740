//! Why a bench run stopped: [`RunError`], for everything after the plan was checked.

use std::path::{Path, PathBuf};

use super::derive::DeriveError;
use crate::bundle::BundleError;
use crate::bundle::identity::IdentifyError;
use crate::launch::status::StatusFileError;
use crate::llama::bench_json::ParseError;

/// Why a bench run stopped.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
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
    /// llama-bench could not be started.
    #[error("cannot start llama-bench {path}: {source}; check --llama-bench")]
    Spawn {
        /// The executable.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// llama-bench exited with an error.
    #[error(
        "llama-bench failed in arm {arm} round {round} ({status}); its stderr ({stderr}) ends with:\n  {tail}\n\
         fix the cause above (model path, llama-bench options after `--`) and rerun"
    )]
    LlamaFailed {
        /// The arm.
        arm: String,
        /// The round.
        round: u32,
        /// How it exited.
        status: String,
        /// Its stderr file.
        stderr: PathBuf,
        /// The last lines of its stderr.
        tail: String,
    },
    /// llama-bench's output is unreadable.
    #[error(transparent)]
    Output(#[from] ParseError),
    /// The shim's status file is unreadable.
    #[error(transparent)]
    Status(#[from] StatusFileError),
    /// An unlocked arm ran stock.
    #[error(
        "the shim did not activate in arm {arm} round {round}: no `hooked` event in {status_file} and no \
         `capshim: hooked` line in {stderr_file}; {said}. An \"unlocked\" arm that is silently stock would \
         be a false result. {check}; or pass --allow-inactive to measure anyway"
    )]
    NotActivated {
        /// The arm.
        arm: String,
        /// The round.
        round: u32,
        /// The status file.
        status_file: PathBuf,
        /// The stderr file.
        stderr_file: PathBuf,
        /// What the shim said on stderr.
        said: String,
        /// What to check ([`crate::llama::shim::Activation::what_to_check`]).
        check: String,
    },
    /// A file the runs use cannot be identified, or changed during the runs.
    #[error(transparent)]
    Identify(#[from] IdentifyError),
    /// The derived files cannot be made from the raw files.
    #[error(transparent)]
    Derive(#[from] DeriveError),
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
        "interrupted by {signal}: llama-bench was stopped and no further runs were started; \
         the bundle is unfinished (no SHA256SUMS), see its {note} note"
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
    #[error("bench stopped; the raw files written so far are in {dir}, with an INCOMPLETE note")]
    Stopped {
        /// The partial bundle.
        dir: PathBuf,
        /// Why.
        #[source]
        source: Box<RunError>,
    },
}

impl RunError {
    /// The signal that stopped the run, when one did.
    pub fn interrupted_by(&self) -> Option<i32> {
        match self {
            RunError::Interrupted { number, .. } => Some(*number),
            RunError::Identify(IdentifyError::Stopped { signal, .. }) => Some(*signal),
            RunError::Stopped { source, .. } => source.interrupted_by(),
            _ => None,
        }
    }
}

/// The error for a failed file operation: `action` on `path`.
pub(super) fn io(action: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> RunError {
    let path = path.to_path_buf();
    move |source| RunError::Io {
        action,
        path,
        source,
    }
}
