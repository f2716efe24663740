//! The experiment layer: one plan → rounds → seal → derive → report path that `bench`,
//! `verify` and every experiment to come run through (hyperfine's `Benchmark::run`, with the
//! command's shape a parameter, not a copy).
//!
//! An experiment is a type implementing [`Experiment`]: what it does before its bundle exists,
//! what it runs inside it (through [`Context`]: each process with [`Context::run_tool`],
//! rounds in random order with [`rounds::run_rounds`], a failed run through
//! [`Context::failed`]), and how it seals. [`run`] does the rest the same way for all: signals
//! caught and passed on, the bundle directory created, the INCOMPLETE note when it stops.
//!
//! - [`rounds`]: each round's random arm order, and the round loop with progress.
//! - [`tool`]: one tool process, and a failed run's reason and stderr tail.
//! - [`record`]: `environment.json`'s header and process records; [`machine`]: the machine.
//! - [`seal`]: the signing key checked before the first run, the seal (derived files,
//!   `environment.json`, `SHA256SUMS`), the sealed bundle presented, and a kind's manifest read
//!   back for `report`.
//! - [`incomplete`]: the note a stopped experiment leaves instead of a seal.
//! - [`space`]: a full file system told apart from a tool that printed nothing.
//! - [`error`]: [`ExperimentError`], why an experiment stopped.

pub mod error;
pub mod incomplete;
pub mod machine;
pub mod record;
pub mod rounds;
pub mod seal;
pub mod space;
pub mod tool;

#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};
use std::time::Duration;

pub use error::{ExperimentError, io};

use crate::bundle::incomplete::Progress;
use crate::bundle::{self, time};
use crate::launch::signals::Forwarder;

/// How an experiment speaks of itself in messages and notes.
#[derive(Clone, Copy, Debug)]
pub struct Words {
    /// The subcommand: `bench`, `verify`.
    pub command: &'static str,
    /// One unit of work: `run`, `step`.
    pub unit: &'static str,
    /// What a signal is passed on to: `llama-bench`, `the running llama.cpp tool`.
    pub running: &'static str,
    /// The option that names its tools: `--llama-bench`, `--llama-dir`.
    pub tool_option: &'static str,
    /// What to check when a tool fails.
    pub fix: &'static str,
    /// The prefix of a new dated bundle directory.
    pub prefix: &'static str,
}

/// A failed run recorded with `--keep-going`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failed {
    /// The arm.
    pub arm: String,
    /// Which run: `arm NAME round N`, `arm NAME`.
    pub what: String,
    /// Why it failed.
    pub reason: String,
}

/// What an experiment's runs have to hand: signals, progress, the failure rule.
pub struct Context<'a> {
    /// The signals caught since the experiment started.
    pub signals: &'a Forwarder,
    /// The units of work done so far, for the INCOMPLETE note.
    pub progress: Progress,
    /// When the experiment started, Unix seconds.
    pub started: u64,
    /// The experiment's words.
    pub words: Words,
    /// Whether a failed run is recorded and the experiment goes on (`--keep-going`).
    pub keep_going: bool,
    /// The failed runs recorded so far (only with `keep_going`).
    pub failed: Vec<Failed>,
    /// The pause between one process of the rounds and the next (`--cooldown`), zero for none.
    pub cooldown: Duration,
}

impl Context<'_> {
    /// The error to stop on when a signal was received.
    ///
    /// # Errors
    /// [`ExperimentError::Interrupted`] when one was.
    pub fn check_signals(&self) -> Result<(), ExperimentError> {
        match self.signals.received() {
            Some(number) => Err(ExperimentError::interrupted(&self.words, number)),
            None => Ok(()),
        }
    }

    /// The one rule for failed runs: without `--keep-going` the first stops the experiment
    /// (its error names the tool, how it ended and its stderr's last lines); with it, the run
    /// is recorded as failed with its reason, and the experiment goes on.
    ///
    /// # Errors
    /// [`ExperimentError::ToolFailed`] without `--keep-going`.
    pub fn failed(&mut self, failure: tool::Failure) -> Result<(), ExperimentError> {
        self.failed_fixing(failure, self.words.fix)
    }

    /// As [`Context::failed`], for a process whose fix is not the experiment's usual one
    /// (`bench --command`'s `--prepare`): `fix` says what to check.
    ///
    /// # Errors
    /// As [`Context::failed`].
    pub fn failed_fixing(
        &mut self,
        failure: tool::Failure,
        fix: &'static str,
    ) -> Result<(), ExperimentError> {
        if !self.keep_going {
            return Err(failure.into_error(fix));
        }
        crate::term::warning(format!(
            "{} failed in {} ({}); recorded as failed, going on (--keep-going)",
            failure.tool, failure.what, failure.reason
        ));
        self.progress.finish();
        self.failed.push(Failed {
            arm: failure.arm,
            what: failure.what,
            reason: failure.reason,
        });
        Ok(())
    }

    /// Whether `arm` has a failed run recorded.
    pub fn arm_failed(&self, arm: &str) -> bool {
        self.failed.iter().any(|f| f.arm == arm)
    }
}

/// One kind of experiment: what it does before its bundle exists, inside it, and on a stop.
pub trait Experiment {
    /// What a sealed run returns.
    type Sealed;

    /// How it speaks of itself.
    fn words(&self) -> Words;

    /// The derived files of a sealed bundle of this kind.
    fn derived(&self) -> &'static [&'static str];

    /// The bundle directory asked for (`-o`); a new dated one when `None`.
    fn output(&self) -> Option<&Path>;

    /// Whether a failed run is recorded and the experiment goes on (`--keep-going`).
    fn keep_going(&self) -> bool {
        false
    }

    /// Whether the bundle is kept. An experiment that writes a bundle only when asked
    /// (`selftest` without `-o`) runs in a scratch directory instead, removed when it ends;
    /// a stop then leaves no note and returns its error as it is.
    fn keeps_bundle(&self) -> bool {
        true
    }

    /// The pause between one process of its rounds and the next (`--cooldown`): lets heat,
    /// caches and lingering work from one process fade before the next starts.
    fn cooldown(&self) -> Duration {
        Duration::ZERO
    }

    /// Work before the bundle exists (hashing files), stopped when `stop` returns a signal.
    ///
    /// # Errors
    /// Whatever stops the experiment before it starts.
    fn before(&mut self, _stop: &dyn Fn() -> Option<i32>) -> Result<(), ExperimentError> {
        Ok(())
    }

    /// The runs, in the bundle `dir`, then the seal.
    ///
    /// # Errors
    /// Whatever stops the experiment: the bundle is then left unsealed with a note.
    fn run_in(&mut self, dir: &Path, cx: &mut Context) -> Result<Self::Sealed, ExperimentError>;

    /// Called when the experiment stopped, before the note is written: undo what must not be
    /// left behind, and return the note's last paragraph, if any.
    fn on_stop(&mut self) -> Option<String> {
        None
    }
}

/// Runs the experiment `e` into a new bundle (into a scratch directory, removed at the end,
/// when it keeps none: [`Experiment::keeps_bundle`]).
///
/// # Errors
/// [`ExperimentError`]; once the bundle directory exists, [`ExperimentError::Stopped`] naming
/// it (its INCOMPLETE note says why).
pub fn run<E: Experiment>(e: &mut E) -> Result<E::Sealed, ExperimentError> {
    let words = e.words();
    let started = time::now();
    // Before anything else: a signal from now on stops the run cleanly.
    let program = PathBuf::from(format!("capshim {}", words.command));
    let signals =
        Forwarder::start_for_experiment().map_err(io("cannot catch signals for", &program))?;
    e.before(&|| signals.received())?;
    if let Some(number) = signals.received() {
        return Err(ExperimentError::interrupted(&words, number));
    }
    let scratch = if e.keeps_bundle() {
        None
    } else {
        let tmp = tempfile::Builder::new()
            .prefix(&format!("{}-", words.prefix))
            .tempdir()
            .map_err(io(
                "cannot create a scratch directory in",
                &std::env::temp_dir(),
            ))?;
        Some(tmp)
    };
    let dir = match &scratch {
        Some(tmp) => bundle::create_named(Some(&tmp.path().join("bundle")), words.prefix)?,
        None => bundle::create_named(e.output(), words.prefix)?,
    };
    let mut cx = Context {
        signals: &signals,
        progress: Progress::default(),
        started,
        words,
        keep_going: e.keep_going(),
        failed: Vec::new(),
        cooldown: e.cooldown(),
    };
    // A panic (a bug) in the runs or the seal still leaves the note: the bundle is then as
    // unfinished as after any other stop, and says so.
    let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| e.run_in(&dir, &mut cx)))
        .unwrap_or_else(|payload| Err(panicked(payload.as_ref())));
    ran.map_err(|err| {
        if scratch.is_some() {
            e.on_stop();
            return err.unkept();
        }
        let footer = e.on_stop();
        let note = dir.join(bundle::INCOMPLETE_FILE);
        let noted = match incomplete::write(&dir, &words, e.derived(), &cx.progress, &err, footer) {
            Ok(()) => true,
            Err(e) => {
                // The error below points to the note: say it is not there (or cut short).
                crate::term::warning(format!(
                    "cannot write the note {} ({e}); the bundle is unfinished all the same: it \
                     has no SHA256SUMS, so `capshim report` refuses it",
                    note.display()
                ));
                false
            }
        };
        ExperimentError::Stopped {
            command: words.command,
            dir: dir.clone(),
            noted,
            source: Box::new(err),
        }
    })
}

/// The error for a panic caught in an experiment, with its message (Rust's panic hook has
/// printed it, with where it happened).
fn panicked(payload: &(dyn std::any::Any + Send)) -> ExperimentError {
    let message = payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_default();
    ExperimentError::Derive(
        format!(
            "capshim panicked ({message}), a bug in capshim: please report it with this bundle's \
             raw files"
        )
        .into(),
    )
}
