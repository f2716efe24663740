//! What `capshim probe` reports about a Metal device, and how `explain --stock` reads it back.
//!
//! JSON shape (keys may be added, none renamed): `{"name":"Apple Paravirtual device",
//! "families":{"1001":true,…},"max_threadgroup_memory":32768,
//! "recommended_working_set_size":12009603072,"max_buffer_length":…,
//! "has_unified_memory":true,"llama.cpp":{…}}`. `families` and `max_threadgroup_memory` are
//! the same as `explain --json`'s `before`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use capshim_profile::consumers::LlamaCpp;
use capshim_profile::device::Answers;
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// One device's answers as a probe read them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceReport {
    /// `-[MTLDevice name]`, e.g. "Apple Paravirtual device".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// `supportsFamily:` for every named MTLGPUFamily value (keys are the numbers).
    pub families: BTreeMap<i64, bool>,
    /// `maxThreadgroupMemoryLength`, in bytes.
    pub max_threadgroup_memory: u64,
    /// `recommendedMaxWorkingSetSize`, in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recommended_working_set_size: Option<u64>,
    /// `maxBufferLength`, in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_buffer_length: Option<u64>,
    /// `hasUnifiedMemory`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub has_unified_memory: Option<bool>,
    /// What llama.cpp decides from these answers (written by probe, ignored when read).
    #[serde(
        rename = "llama.cpp",
        default,
        skip_deserializing,
        skip_serializing_if = "Option::is_none"
    )]
    pub llama_cpp: Option<LlamaCpp>,
}

/// Why a probe JSON file cannot be used.
#[derive(Debug, Error)]
pub enum ReportError {
    /// The file cannot be read.
    #[error("cannot read {path}: {source}; check the path given to --stock")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not probe JSON.
    #[error(
        "{path} is not `capshim probe --json` output: {message}; create it in the guest with `capshim probe --json > FILE.json`"
    )]
    Parse {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
}

impl DeviceReport {
    /// Builds a report from answers, adding llama.cpp's decisions (used by probe, macOS only).
    #[cfg_attr(not(target_os = "macos"), allow(dead_code))]
    pub fn new(
        name: Option<String>,
        answers: &Answers,
        max_buffer_length: Option<u64>,
        has_unified_memory: Option<bool>,
    ) -> DeviceReport {
        DeviceReport {
            name,
            families: answers.families.clone(),
            max_threadgroup_memory: answers.max_threadgroup_memory,
            recommended_working_set_size: answers.recommended_working_set_size,
            max_buffer_length,
            has_unified_memory,
            llama_cpp: Some(LlamaCpp::decide(answers, false)),
        }
    }

    /// The capability answers alone.
    pub fn answers(&self) -> Answers {
        Answers {
            families: self.families.clone(),
            max_threadgroup_memory: self.max_threadgroup_memory,
            recommended_working_set_size: self.recommended_working_set_size,
        }
    }

    /// Whether this is the paravirtual device (by name); a report without a name is assumed
    /// to come from a guest, which is what `capshim probe` is for.
    pub fn is_paravirtual(&self) -> bool {
        self.name
            .as_deref()
            .is_none_or(|n| n.contains("Paravirtual"))
    }

    /// Parses probe JSON; `path` is only used in messages.
    ///
    /// # Errors
    /// [`ReportError::Parse`] when the text is not probe JSON or has no family answers.
    pub fn from_json(path: &Path, text: &str) -> Result<DeviceReport, ReportError> {
        let parse_error = |message: String| ReportError::Parse {
            path: path.to_path_buf(),
            message,
        };
        let report: DeviceReport =
            serde_json::from_str(text).map_err(|e| parse_error(e.to_string()))?;
        if report.families.is_empty() {
            return Err(parse_error("\"families\" is empty".to_string()));
        }
        Ok(report)
    }

    /// Reads a probe JSON file.
    ///
    /// # Errors
    /// [`ReportError`] naming the file.
    pub fn read(path: &Path) -> Result<DeviceReport, ReportError> {
        let text = std::fs::read_to_string(path).map_err(|source| ReportError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        DeviceReport::from_json(path, &text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_json_round_trips_and_extra_keys_are_ignored() {
        let stock = Answers::paravirtual_stock();
        let report = DeviceReport::new(
            Some("Apple Paravirtual device".into()),
            &stock,
            Some(1 << 30),
            Some(true),
        );
        let text = serde_json::to_string(&report).unwrap();
        assert!(text.contains("\"1001\":true"), "{text}");
        assert!(text.contains("\"llama.cpp\":{"), "{text}");
        let back = DeviceReport::from_json(Path::new("x.json"), &text).unwrap();
        assert_eq!(back.answers(), stock);
        assert!(back.is_paravirtual());
        assert_eq!(back.llama_cpp, None);

        let minimal =
            r#"{"families":{"1001":true,"5001":false},"max_threadgroup_memory":32768,"future":1}"#;
        let r = DeviceReport::from_json(Path::new("x.json"), minimal).unwrap();
        assert_eq!(r.families.len(), 2);

        for bad in ["{}", "[1]", r#"{"families":{},"max_threadgroup_memory":1}"#] {
            let err = DeviceReport::from_json(Path::new("bad.json"), bad)
                .unwrap_err()
                .to_string();
            assert!(
                err.contains("bad.json") && err.contains("capshim probe --json"),
                "{err}"
            );
        }
    }
}
