//! Why an experiment stopped: [`ExperimentError`], the one error type of every experiment
//! (bench, verify, and those to come), for everything after its plan was checked. What is
//! particular to one experiment (its derivation, its base) comes in as [`ExperimentError::Derive`].

use std::path::{Path, PathBuf};

use super::Words;
use crate::bundle::BundleError;
use crate::bundle::identity::IdentifyError;
use crate::launch::status::StatusFileError;
use crate::llama::bench_json::ParseError;

/// Why an experiment stopped.
#[derive(Debug, thiserror::Error)]
pub enum ExperimentError {
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
    /// A file the runs use cannot be identified (hashed), changed during the runs, or a signal
    /// stopped its hashing.
    #[error(transparent)]
    Identify(#[from] IdentifyError),
    /// A tool could not be started.
    #[error("cannot start {tool} {path}: {source}; check {option}")]
    Spawn {
        /// The tool.
        tool: &'static str,
        /// Its path.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
        /// The option that names it.
        option: &'static str,
    },
    /// A tool failed, crashed, or gave no complete result (the first failed run, without
    /// `--keep-going`).
    #[error(transparent)]
    ToolFailed(Box<ToolFailed>),
    /// llama-bench's output is unreadable.
    #[error(transparent)]
    Output(#[from] ParseError),
    /// The shim's status file is unreadable.
    #[error(transparent)]
    Status(#[from] StatusFileError),
    /// An arm with the shim ran stock.
    #[error(transparent)]
    NotActivated(Box<NotActivated>),
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
        /// What to check.
        check: String,
    },
    /// What the experiment derives from its raw files cannot be made (its own error).
    #[error(transparent)]
    Derive(Box<dyn std::error::Error + Send + Sync>),
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
        "interrupted by {signal}: {} and no further {unit}s were started; the bundle is \
         unfinished (no SHA256SUMS), see its {note} note",
        if *in_pause { format!("it came during a --cooldown pause, when no {unit} was running,") } else { format!("{tool} was stopped") }
    )]
    Interrupted {
        /// The signal's name, e.g. `SIGTERM`.
        signal: String,
        /// The signal's number.
        number: i32,
        /// The tool, as [`Words::running`] says it.
        tool: &'static str,
        /// What one unit of work is called.
        unit: &'static str,
        /// The note's file name.
        note: &'static str,
        /// Whether it came during a `--cooldown` pause, when nothing was running to pass it on
        /// to.
        in_pause: bool,
    },
    /// A signal stopped an experiment that keeps no bundle (`selftest` without `-o`).
    #[error(
        "interrupted by {signal}: {tool} was stopped and no further {unit}s were started; no \
         bundle was asked for (-o), so nothing was kept"
    )]
    InterruptedUnkept {
        /// The signal's name, e.g. `SIGTERM`.
        signal: String,
        /// The signal's number.
        number: i32,
        /// The tool, as [`Words::running`] says it.
        tool: &'static str,
        /// What one unit of work is called.
        unit: &'static str,
    },
    /// Any of the above, after the bundle directory was created.
    #[error("{command} stopped; the raw files written so far are in {dir}{}", if *noted { ", with an INCOMPLETE note" } else { "" })]
    Stopped {
        /// The command.
        command: &'static str,
        /// The partial bundle.
        dir: PathBuf,
        /// Whether the INCOMPLETE note was written.
        noted: bool,
        /// Why.
        #[source]
        source: Box<ExperimentError>,
    },
}

/// A tool that failed, as the error that stops the experiment says it.
#[derive(Debug, thiserror::Error)]
#[error(
    "{tool} failed in {what} ({reason}); its stderr ({stderr}) {}{}\n\
     fix the cause {} ({fix}) and rerun",
    if tail.is_empty() { "is empty: it printed nothing before it ended".to_string() } else { format!("ends with:\n  {tail}") },
    stdout_tail.as_ref().map_or(String::new(), |(p, t)| format!("\nits stdout ({}) ends with:\n  {t}", p.display())),
    if tail.is_empty() && stdout_tail.is_none() { "of that exit" } else { "above" }
)]
pub struct ToolFailed {
    /// The tool.
    pub tool: &'static str,
    /// Which run: `arm NAME round N` or `arm NAME`.
    pub what: String,
    /// How it exited, or what its output lacks.
    pub reason: String,
    /// Its stderr file.
    pub stderr: PathBuf,
    /// The last lines of its stderr that hold something; empty when it holds nothing.
    pub tail: String,
    /// Its stdout file and last lines, when they are shown too (a `bench --command`
    /// workload's) and hold something.
    pub stdout_tail: Option<(PathBuf, String)>,
    /// What to check.
    pub fix: &'static str,
}

/// An arm with the shim whose run shows no sign the shim activated.
#[derive(Debug, thiserror::Error)]
#[error(
    "the shim did not activate in {what}: no `hooked` event in {status_file} and no \
     `capshim: hooked` line in {stderr_file}; {said}. An \"unlocked\" arm that is silently stock would \
     be a false result. {check}; or pass --allow-inactive to measure anyway"
)]
pub struct NotActivated {
    /// Which run: `arm NAME round N`.
    pub what: String,
    /// The status file.
    pub status_file: PathBuf,
    /// The stderr file.
    pub stderr_file: PathBuf,
    /// What the shim said on stderr.
    pub said: String,
    /// What to check ([`crate::llama::shim::Activation::what_to_check`]).
    pub check: String,
}

impl ExperimentError {
    /// The signal that stopped the run, when one did.
    pub fn interrupted_by(&self) -> Option<i32> {
        match self {
            ExperimentError::Interrupted { number, .. }
            | ExperimentError::InterruptedUnkept { number, .. } => Some(*number),
            ExperimentError::Identify(IdentifyError::Stopped { signal, .. }) => Some(*signal),
            ExperimentError::Stopped { source, .. } => source.interrupted_by(),
            _ => None,
        }
    }

    /// The error of a run stopped by signal `number`.
    pub fn interrupted(words: &Words, number: i32) -> Self {
        ExperimentError::Interrupted {
            signal: crate::launch::signals::name(number),
            number,
            tool: words.running,
            unit: words.unit,
            note: crate::bundle::INCOMPLETE_FILE,
            in_pause: false,
        }
    }

    /// The error of a run stopped by signal `number` during a `--cooldown` pause, when nothing
    /// ran.
    pub fn interrupted_in_pause(words: &Words, number: i32) -> Self {
        match Self::interrupted(words, number) {
            ExperimentError::Interrupted {
                signal,
                number,
                tool,
                unit,
                note,
                ..
            } => ExperimentError::Interrupted {
                signal,
                number,
                tool,
                unit,
                note,
                in_pause: true,
            },
            other => other,
        }
    }

    /// The same error for an experiment that keeps no bundle: an interruption says that
    /// nothing was kept, instead of naming a note.
    pub fn unkept(self) -> Self {
        match self {
            ExperimentError::Interrupted {
                signal,
                number,
                tool,
                unit,
                ..
            } => ExperimentError::InterruptedUnkept {
                signal,
                number,
                tool,
                unit,
            },
            other => other,
        }
    }

    /// An experiment's own derivation error.
    pub fn derive(e: impl std::error::Error + Send + Sync + 'static) -> Self {
        ExperimentError::Derive(Box::new(e))
    }
}

/// The error for a failed file operation: `action` on `path`.
pub fn io(action: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> ExperimentError {
    let path = path.to_path_buf();
    move |source| ExperimentError::Io {
        action,
        path,
        source,
    }
}
