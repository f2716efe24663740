//! What a verify bundle's `environment.json` records: the machine, the files with their
//! checksums, the arms, every process run, and the [`Manifest`] its derived files come from.

use serde::Serialize;

use super::manifest::{KIND, Manifest, SCHEMA_VERSION, Step};
use crate::arms::Arm;
use crate::bench::environment::Machine;
use crate::bundle::identity::FileId;
use crate::launch::environment::EnvChange;

/// One process of a verify run.
#[derive(Clone, Debug, Serialize)]
pub struct StepRecord {
    /// The arm.
    pub arm: String,
    /// The step.
    pub step: Step,
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
}

/// The files a verify run used.
#[derive(Serialize)]
pub struct Files {
    /// The GGUF model.
    pub model: FileId,
    /// The text (`path` is `built-in` for the text that ships with capshim).
    pub text: Option<FileId>,
    /// The shim library, when an arm used it.
    pub dylib: Option<FileId>,
    /// llama.cpp's tools, by name.
    #[serde(serialize_with = "tools_as_object")]
    pub tools: Vec<(&'static str, FileId)>,
}

fn tools_as_object<S: serde::Serializer>(
    tools: &[(&'static str, FileId)],
    s: S,
) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeMap;
    let mut map = s.serialize_map(Some(tools.len()))?;
    for (name, id) in tools {
        map.serialize_entry(name, id)?;
    }
    map.end()
}

/// The whole of a verify bundle's `environment.json`.
#[derive(Serialize)]
pub struct Environment<'a> {
    /// Layout version.
    pub schema_version: u32,
    /// `verify`.
    pub kind: &'static str,
    /// capshim's version.
    pub capshim_version: &'static str,
    /// When the run started, UTC.
    pub started_utc: String,
    /// When it finished, UTC.
    pub finished_utc: String,
    /// The machine.
    pub machine: Machine,
    /// `DYLD_INSERT_LIBRARIES` or `LD_PRELOAD`.
    pub injection_variable: &'static str,
    /// The files.
    pub files: Files,
    /// The arms, with their profiles' values and provenance.
    pub arms: &'a [Arm],
    /// Every process, in the order run.
    pub steps: &'a [StepRecord],
    /// What the derived files come from.
    pub verify: &'a Manifest,
}

impl Environment<'_> {
    /// The layout version and kind.
    pub const HEADER: (u32, &'static str) = (SCHEMA_VERSION, KIND);
}
