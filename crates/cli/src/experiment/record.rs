//! What every experiment's `environment.json` records the same way: its header (layout,
//! kind, capshim's version, start and end, the machine) and each process it ran.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::machine::{self, Machine};
use crate::bundle::time;
use crate::launch::child::{self, Finished};
use crate::launch::environment::EnvChange;

/// The first fields of `environment.json`, in this order.
#[derive(Serialize)]
pub struct Header {
    /// The bundle's layout version.
    pub schema_version: u32,
    /// The experiment: `bench`, `verify`.
    pub kind: &'static str,
    /// capshim's version.
    pub capshim_version: &'static str,
    /// When the run started, UTC.
    pub started_utc: String,
    /// When it finished (now), UTC.
    pub finished_utc: String,
    /// The machine.
    pub machine: Machine,
}

impl Header {
    /// The header of a bundle of `kind` and layout `schema_version`, whose run started at
    /// `started` (Unix seconds) and ends now; the machine is read now.
    pub fn now(kind: &'static str, schema_version: u32, started: u64) -> Header {
        Header {
            schema_version,
            kind,
            capshim_version: env!("CARGO_PKG_VERSION"),
            started_utc: time::iso(started),
            finished_utc: time::iso(time::now()),
            machine: machine::collect(),
        }
    }
}

/// One process an experiment ran; `W` says where in the experiment (a round, a step).
#[derive(Clone, Debug, Serialize)]
pub struct Process<W> {
    /// The arm.
    pub arm: String,
    /// Where in the experiment: `round` (bench), `step` (verify).
    #[serde(flatten)]
    pub at: W,
    /// Program and arguments, exactly as run.
    pub argv: Vec<String>,
    /// The same as one shell-quoted line, with the variables set.
    pub command_line: String,
    /// The environment change.
    pub env: EnvChange,
    /// Exit code (`null` when killed by a signal).
    pub exit_code: Option<i32>,
    /// Wall time, in seconds.
    pub seconds: f64,
    /// UTC start time.
    pub started_utc: String,
    /// Why the run failed, when `--keep-going` recorded it as failed (schema 6).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failed: Option<String>,
}

impl<W> Process<W> {
    /// The record of `argv` run under `env` for `arm` at `at`, as it `finished`.
    pub fn new(arm: &str, at: W, argv: Vec<String>, env: EnvChange, finished: &Finished) -> Self {
        Process {
            arm: arm.to_string(),
            at,
            command_line: child::command_line(&env, &argv),
            argv,
            env,
            exit_code: finished.status.code(),
            seconds: finished.seconds,
            started_utc: time::iso(finished.started),
            failed: None,
        }
    }
}

/// A process's environment change as `environment.json` records it ([`EnvChange`]), read back
/// by `capshim report` to check a manifest against what ran: the variables set.
#[derive(Debug, Deserialize)]
pub struct EnvSeen {
    /// The variables set, name to value.
    pub set: BTreeMap<String, String>,
}

impl EnvSeen {
    /// The first of `pairs` (name, value) that this change did not set to that value.
    pub fn first_unset<'a>(&self, pairs: &'a [(String, String)]) -> Option<&'a (String, String)> {
        pairs
            .iter()
            .find(|(name, value)| self.set.get(name) != Some(value))
    }
}
