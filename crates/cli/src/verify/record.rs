//! What a verify bundle's `environment.json` records: the header and the machine
//! ([`crate::experiment::record`]), the files with their checksums, the arms, every process
//! run, and the [`Manifest`] its derived files come from.

use serde::Serialize;

use super::manifest::{Manifest, Step};
use crate::arms::Arm;
use crate::bundle::identity::FileId;
use crate::experiment::record::{Header, Process};

/// Where in a verify run a process ran: its step.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct StepAt {
    /// The step.
    pub step: Step,
}

/// One process of a verify run.
pub type StepRecord = Process<StepAt>;

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
    /// Layout, kind, capshim's version, times, the machine.
    #[serde(flatten)]
    pub header: Header,
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
