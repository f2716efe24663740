//! The facts several checks share, read once: the macOS version, guest or host, the CPU
//! brand, the model, the Metal device, and whether doctor itself runs with a shim injected.

use super::Options;
use crate::device::DeviceReport;
use crate::launch::Os;
use crate::platform::facts::SystemFacts;

/// `sysctl` names doctor reads.
pub const OS_VERSION: &str = "kern.osproductversion";
/// 1 inside a virtual machine, 0 on the host.
pub const VMM_PRESENT: &str = "kern.hv_vmm_present";
/// The model identifier, e.g. `VirtualMac2,1` in a guest.
pub const MODEL: &str = "hw.model";

/// The shared facts, each a value or why it could not be read.
#[derive(Clone, Debug)]
pub struct Gathered {
    /// The system doctor checks.
    pub os: Os,
    /// This machine's architecture.
    pub arch: capshim_macho::Arch,
    /// Its name, `macos` or e.g. `linux`.
    pub os_name: String,
    /// `sysctl kern.osproductversion`, e.g. "26.5.2".
    pub macos_version: Result<String, String>,
    /// `sysctl kern.hv_vmm_present`: a guest (true) or the host (false).
    pub guest: Result<bool, String>,
    /// `sysctl machdep.cpu.brand_string`.
    pub brand: Result<String, String>,
    /// `sysctl hw.model`.
    pub model: Result<String, String>,
    /// The default Metal device.
    pub device: Result<DeviceReport, String>,
    /// The injection variable in doctor's own environment, when set.
    pub injected: Option<String>,
}

impl Gathered {
    /// Reads the facts.
    pub fn collect(facts: &dyn SystemFacts, options: &Options) -> Gathered {
        let os_name = match options.os {
            Os::MacOs => "macos".to_string(),
            Os::Linux if cfg!(target_os = "macos") => "linux".to_string(),
            Os::Linux => std::env::consts::OS.to_string(),
        };
        let guest = facts.sysctl(VMM_PRESENT).and_then(|v| match v.as_str() {
            "1" => Ok(true),
            "0" => Ok(false),
            other => Err(format!(
                "`sysctl -n {VMM_PRESENT}` printed {other:?}, not 0 or 1"
            )),
        });
        Gathered {
            os: options.os,
            arch: options.arch,
            os_name,
            macos_version: facts.sysctl(OS_VERSION),
            guest,
            brand: facts.cpu_brand(),
            model: facts.sysctl(MODEL),
            device: facts.metal_device(),
            injected: options.injected.clone(),
        }
    }

    /// Whether this is macOS.
    pub fn macos(&self) -> bool {
        self.os == Os::MacOs
    }

    /// The macOS major version (26 for "26.5.2"), when known.
    pub fn macos_major(&self) -> Option<u32> {
        let version = self.macos_version.as_ref().ok()?;
        version.split('.').next()?.trim().parse().ok()
    }

    /// Whether the Metal device is the paravirtual one (by its name), when there is one.
    pub fn paravirtual(&self) -> Option<bool> {
        let device = self.device.as_ref().ok()?;
        Some(device.name.as_deref()?.contains("Paravirtual"))
    }
}
