//! `capshim bench --command`: any workload measured per arm, in bench's design (hyperfine's
//! question, capshim's rounds and evidence). It is bench on the experiment layer with another
//! kind of process; its bundle is a bench bundle (schema 6) whose manifest names the workload
//! (`bundle.workload`), so `capshim report` derives it again like any other.
//!
//! - [`run`]: one measured process for one arm ([`run_one`], public for every experiment that
//!   measures a command) and its value.
//! - [`runner`]: the experiment: warm-up runs, then each round's arms in random order, each run
//!   after `--prepare`, then the seal.
//!
//! What is measured is [`crate::bundle::workload`]'s: the wall time of `sh -c COMMAND`
//! (seconds, lower is better), or the number the first capture group of `--metric` finds in
//! its stdout, else its stderr (higher is better unless `--lower-is-better`).

pub mod run;
pub mod runner;

use std::path::PathBuf;

pub use run::{Job, Output, run_one};

use crate::arms::Arm;
use crate::bundle::workload::Workload;

/// Everything a `bench --command` run needs, validated.
#[derive(Clone, Debug)]
pub struct Plan {
    /// The command and what is measured of it.
    pub workload: Workload,
    /// The arms, stock first.
    pub arms: Vec<Arm>,
    /// Rounds.
    pub rounds: u32,
    /// Unmeasured runs of each arm before the first round (`--warmup`).
    pub warmup: u32,
    /// A command run before each measured run, untimed (`--prepare`).
    pub prepare: Option<String>,
    /// The pause between one measured process and the next (`--cooldown`).
    pub cooldown: std::time::Duration,
    /// The shim library, required when an arm has a profile.
    pub dylib: Option<PathBuf>,
    /// Measure an unlocked arm even when the shim did not activate.
    pub allow_inactive: bool,
    /// Record a failed run as failed and go on (`--keep-going`).
    pub keep_going: bool,
    /// The bundle directory, or `None` for a new dated one.
    pub output: Option<PathBuf>,
}
