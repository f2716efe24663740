//! [`Fake`]: facts a test chooses, for every check that reads the system.

use std::path::{Path, PathBuf};

use capshim_macho::{self as macho, Binary};

use super::{SystemFacts, not_macos};
use crate::device::DeviceReport;
use crate::platform::sip::Sip;

/// Facts a test chooses: every file, `sysctl` value or user default it did not describe is
/// missing, and there is no Metal device unless one is given.
#[derive(Debug, Clone)]
pub struct Fake {
    /// `Some(os)`: a system that is not macOS (`sysctl`, `defaults` and Metal answer as
    /// [`super::Real`] does there).
    pub not_macos: Option<&'static str>,
    /// What `sip()` answers.
    pub sip: Sip,
    /// (path, attribute name, value).
    pub attributes: Vec<(PathBuf, String, Vec<u8>)>,
    /// (path, mode bits, file bytes for `binary`).
    pub files: Vec<(PathBuf, u32, Vec<u8>)>,
    /// (sysctl name, value).
    pub sysctls: Vec<(String, String)>,
    /// (domain, key, value) of user defaults.
    pub defaults: Vec<(String, String, String)>,
    /// The Metal device, or why there is none.
    pub device: Result<DeviceReport, String>,
}

impl Fake {
    /// A Mac with SIP as given and no files.
    pub fn new(sip: Sip) -> Fake {
        Fake {
            not_macos: None,
            sip,
            attributes: Vec::new(),
            files: Vec::new(),
            sysctls: Vec::new(),
            defaults: Vec::new(),
            device: Err("MTLCreateSystemDefaultDevice returned no device".to_string()),
        }
    }

    /// Linux: no `sysctl` values, no SIP, no Metal.
    pub fn linux() -> Fake {
        Fake {
            not_macos: Some("linux"),
            sip: Sip::Unknown("this is linux, not macOS".to_string()),
            ..Fake::new(Sip::Enabled)
        }
    }

    /// A macOS guest (`kern.hv_vmm_present` 1, SIP on) with this CPU brand and memory.
    pub fn guest(brand: &str, memory: u64) -> Fake {
        Fake::new(Sip::Enabled)
            .with_sysctl("machdep.cpu.brand_string", brand)
            .with_sysctl("hw.memsize", &memory.to_string())
            .with_sysctl("kern.hv_vmm_present", "1")
    }

    /// Adds a file with mode `0o100755` (or `mode`, when not 0) and these bytes.
    pub fn file(mut self, path: &str, mode: u32, bytes: Vec<u8>) -> Fake {
        let mode = if mode == 0 { 0o100_755 } else { mode };
        self.files.push((path.into(), mode, bytes));
        self
    }

    /// Sets an extended attribute of a file.
    pub fn attribute(mut self, path: &str, name: &str, value: &[u8]) -> Fake {
        self.attributes
            .push((path.into(), name.to_string(), value.to_vec()));
        self
    }

    /// Sets a `sysctl` value.
    pub fn with_sysctl(mut self, name: &str, value: &str) -> Fake {
        self.sysctls.push((name.to_string(), value.to_string()));
        self
    }

    /// Sets a user default.
    pub fn with_default(mut self, domain: &str, key: &str, value: &str) -> Fake {
        self.defaults
            .push((domain.to_string(), key.to_string(), value.to_string()));
        self
    }

    /// Gives the machine a Metal device.
    pub fn with_device(mut self, device: DeviceReport) -> Fake {
        self.device = Ok(device);
        self
    }

    fn find(&self, path: &Path) -> Option<&(PathBuf, u32, Vec<u8>)> {
        self.files.iter().find(|(p, _, _)| p == path)
    }
}

impl SystemFacts for Fake {
    fn sip(&self) -> Sip {
        self.sip.clone()
    }

    fn extended_attribute(&self, path: &Path, name: &str) -> Result<Option<Vec<u8>>, String> {
        if self.find(path).is_none() {
            return Err(format!("{}: no such file", path.display()));
        }
        Ok(self
            .attributes
            .iter()
            .find(|(p, n, _)| p == path && n == name)
            .map(|(_, _, v)| v.clone()))
    }

    fn file_mode(&self, path: &Path) -> Result<u32, String> {
        self.find(path)
            .map(|(_, mode, _)| *mode)
            .ok_or_else(|| format!("{}: no such file", path.display()))
    }

    fn binary(&self, path: &Path) -> Result<Binary, macho::OpenError> {
        self.find(path)
            .map(|(_, _, bytes)| macho::inspect(bytes))
            .ok_or_else(|| {
                macho::OpenError::Io(std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    "no such file",
                ))
            })
    }

    fn file_head(&self, path: &Path) -> Result<Vec<u8>, String> {
        self.find(path)
            .map(|(_, _, bytes)| bytes[..bytes.len().min(super::HEAD)].to_vec())
            .ok_or_else(|| format!("{}: no such file", path.display()))
    }

    fn sysctl(&self, name: &str) -> Result<String, String> {
        if let Some(os) = self.not_macos {
            return Err(not_macos(os, name));
        }
        self.sysctls
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
            .ok_or_else(|| format!("unknown oid '{name}'"))
    }

    fn user_default(&self, domain: &str, key: &str) -> Result<Option<String>, String> {
        if let Some(os) = self.not_macos {
            return Err(not_macos(os, &format!("{domain} {key} default")));
        }
        Ok(self
            .defaults
            .iter()
            .find(|(d, k, _)| d == domain && k == key)
            .map(|(_, _, v)| v.clone()))
    }

    fn metal_device(&self) -> Result<DeviceReport, String> {
        if let Some(os) = self.not_macos {
            return Err(format!("this is {os}, not macOS: there is no Metal device"));
        }
        self.device.clone()
    }
}
