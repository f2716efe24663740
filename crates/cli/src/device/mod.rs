//! What `capshim probe` reports about a Metal device, and how `explain --stock` reads it back.
//!
//! JSON shape (keys may be added, none renamed): `{"name":"Apple Paravirtual device",
//! "architecture":"…","families":{"1001":true,…},"max_threadgroup_memory":32768,
//! "recommended_working_set_size":12009603072,"max_buffer_length":…,
//! "has_unified_memory":true,"llama.cpp":{…}}`. `families` and `max_threadgroup_memory` are
//! the same as `explain --json`'s `before`.
//!
//! - [`render`]: the text tables `capshim probe` and `probe --compare` print.

mod render;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use capshim_profile::GpuFamily;
use capshim_profile::consumers::{Inputs, LlamaCpp};
use capshim_profile::device::Answers;
use serde::{Deserialize, Serialize};
use thiserror::Error;

pub use render::{render, render_compare};

/// One device's answers as a probe read them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceReport {
    /// `-[MTLDevice name]`, e.g. "Apple Paravirtual device".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// `-[MTLDevice architecture].name` (macOS 14 and later), e.g. `applegpu_g13s` on bare
    /// metal; MLX routes kernels by it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub architecture: Option<String>,
    /// `supportsFamily:` for every named MTLGPUFamily value (keys are the numbers).
    #[serde(deserialize_with = "family_keys")]
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
    /// Named families the file did not answer, taken as false (set when read, never written).
    #[serde(skip)]
    pub missing_families: Vec<GpuFamily>,
}

/// `families` keys: MTLGPUFamily numbers as strings, non-negative and within i64.
fn family_keys<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<BTreeMap<i64, bool>, D::Error> {
    use serde::de::Error;
    let raw = BTreeMap::<String, bool>::deserialize(deserializer)?;
    raw.into_iter()
        .map(|(key, value)| {
            let digits = key.strip_prefix('-').unwrap_or(&key);
            let integer = !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit());
            match key.parse::<i64>() {
                Ok(n) if n >= 0 => Ok((n, value)),
                Ok(_) => Err(D::Error::custom(format!(
                    "\"families\" key {key:?} is negative; MTLGPUFamily values are non-negative integers such as \"1007\""
                ))),
                Err(_) if integer => Err(D::Error::custom(format!(
                    "\"families\" key {key:?} is out of range (larger than {}); MTLGPUFamily values are integers such as \"1007\"",
                    i64::MAX
                ))),
                Err(_) => Err(D::Error::custom(format!(
                    "\"families\" key {key:?} is not an integer; keys are MTLGPUFamily numbers such as \"1007\""
                ))),
            }
        })
        .collect()
}

/// Why a probe JSON file cannot be used.
#[derive(Debug, Error)]
pub enum ReportError {
    /// The file cannot be read.
    #[error("{source}; check the path given to --stock")]
    Read {
        /// Why: the OS error, or not a regular file.
        source: crate::input_file::InputError,
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
    /// Builds a report from answers, adding llama.cpp's decisions (the Metal probe's
    /// constructor, so unused off macOS outside tests).
    #[cfg_attr(not(target_os = "macos"), allow(dead_code))]
    pub fn new(
        name: Option<String>,
        answers: &Answers,
        max_buffer_length: Option<u64>,
        has_unified_memory: Option<bool>,
    ) -> DeviceReport {
        let inputs = Inputs {
            device_name: name.as_deref(),
            ..Inputs::new(answers)
        };
        let llama_cpp = Some(LlamaCpp::decide(&inputs, false));
        DeviceReport {
            name,
            architecture: None,
            families: answers.families.clone(),
            max_threadgroup_memory: answers.max_threadgroup_memory,
            recommended_working_set_size: answers.recommended_working_set_size,
            max_buffer_length,
            has_unified_memory,
            llama_cpp,
            missing_families: Vec::new(),
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

    /// Parses `capshim probe --json` output (or `probe --compare --json`, whose `stock`
    /// answers are used); `path` is only used in messages. A named family the file does not
    /// answer is taken as not supported (false) and listed in
    /// [`DeviceReport::missing_families`]: a device answers false for what it does not know,
    /// and leaving it out would hide what the profile raises.
    ///
    /// # Errors
    /// [`ReportError::Parse`] when the text is not probe JSON or has no family answers.
    pub fn from_json(path: &Path, text: &str) -> Result<DeviceReport, ReportError> {
        let parse_error = |message: String| ReportError::Parse {
            path: path.to_path_buf(),
            message,
        };
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|e| parse_error(e.to_string()))?;
        // `probe --compare --json` output holds the stock answers under "stock".
        let value = match value.get("stock") {
            Some(stock) if value.get("families").is_none() => stock.clone(),
            _ => value,
        };
        let mut report: DeviceReport =
            serde_json::from_value(value).map_err(|e| parse_error(e.to_string()))?;
        if report.families.is_empty() {
            return Err(parse_error("\"families\" is empty".to_string()));
        }
        for family in GpuFamily::known() {
            if let std::collections::btree_map::Entry::Vacant(entry) =
                report.families.entry(family.0)
            {
                entry.insert(false);
                report.missing_families.push(family);
            }
        }
        Ok(report)
    }

    /// The warning to print when [`DeviceReport::missing_families`] is not empty.
    pub fn missing_warning(&self, label: &str) -> Option<String> {
        if self.missing_families.is_empty() {
            return None;
        }
        let names: Vec<String> = self
            .missing_families
            .iter()
            .map(ToString::to_string)
            .collect();
        Some(format!(
            "{label} has no answer for {}; they are taken as not supported (false). `capshim probe --json` in the guest writes all of them",
            names.join(", ")
        ))
    }

    /// Reads a probe JSON file.
    ///
    /// # Errors
    /// [`ReportError`] naming the file.
    pub fn read(path: &Path) -> Result<DeviceReport, ReportError> {
        // A probe report is a few kilobytes of JSON.
        let text = crate::input_file::read_text(path, 1 << 20, "a probe report")
            .map_err(|source| ReportError::Read { source })?;
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
        assert_eq!(back.llama_cpp, None);

        let minimal =
            r#"{"families":{"1001":true,"5001":false},"max_threadgroup_memory":32768,"future":1}"#;
        let r = DeviceReport::from_json(Path::new("x.json"), minimal).unwrap();
        assert_eq!(r.families.len(), GpuFamily::known().count());
        assert!(r.families[&1001]);
        assert!(!r.families[&1009]);
        assert_eq!(r.missing_families.len(), GpuFamily::known().count() - 2);
        let compared = format!(r#"{{"profile":"p","stock":{minimal},"shimmed":{{}}}}"#);
        assert_eq!(
            DeviceReport::from_json(Path::new("c.json"), &compared).unwrap(),
            r
        );

        for (key, says) in [
            ("apple7", "is not an integer"),
            ("1001.5", "is not an integer"),
            ("-1", "is negative"),
            ("99999999999999999999", "is out of range"),
        ] {
            let text = format!(r#"{{"families":{{"{key}":true}},"max_threadgroup_memory":1}}"#);
            let err = DeviceReport::from_json(Path::new("bad.json"), &text)
                .unwrap_err()
                .to_string();
            assert!(err.contains("bad.json") && err.contains(says), "{err}");
            assert!(err.contains(&format!("{key:?}")), "{err}");
        }

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
