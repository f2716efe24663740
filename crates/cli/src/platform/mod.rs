//! Platform-specific facts: `sysctl` values, System Integrity Protection, files' extended
//! attributes ([`facts`], [`sip`]) and the Metal device (macOS only).
//!
//! Everything here runs programs or calls Metal; the rest of the CLI takes its results as
//! plain values (or through the [`Machine`] trait) so it can be tested anywhere.

#[cfg(target_os = "macos")]
pub mod metal;

pub mod facts;
pub mod sip;

/// The CPU brand string a Mac or macOS guest reports (`sysctl machdep.cpu.brand_string`),
/// e.g. "Apple M1 Ultra (Virtual)" inside a guest.
///
/// # Errors
/// On systems other than macOS, or when `sysctl` fails, a message saying so.
pub fn cpu_brand() -> Result<String, String> {
    if !cfg!(target_os = "macos") {
        return Err(format!(
            "this is {}, not macOS, so there is no machdep.cpu.brand_string to read",
            std::env::consts::OS
        ));
    }
    cpu_brand_from(&facts::Real::default())
}

/// As [`cpu_brand`], from `facts` (on any system).
///
/// # Errors
/// When `sysctl` fails, its message.
pub fn cpu_brand_from(facts: &dyn facts::SystemFacts) -> Result<String, String> {
    facts.sysctl("machdep.cpu.brand_string")
}

#[cfg(test)]
mod tests {
    use super::facts::Fake;
    use super::sip::Sip;

    #[test]
    fn the_cpu_brand_is_sysctl_s() {
        let mut mac = Fake::new(Sip::Enabled);
        assert!(super::cpu_brand_from(&mac).is_err());
        mac.sysctls.push((
            "machdep.cpu.brand_string".into(),
            "Apple M1 Ultra (Virtual)".into(),
        ));
        assert_eq!(
            super::cpu_brand_from(&mac).as_deref(),
            Ok("Apple M1 Ultra (Virtual)")
        );
    }
}

/// The physical memory of this Mac or macOS guest in bytes (`sysctl hw.memsize`).
///
/// # Errors
/// On systems other than macOS (where no macOS guest's memory can be read), or when `sysctl`
/// fails or prints something else than a number, a message saying so.
pub fn physical_memory() -> Result<u64, String> {
    if !cfg!(target_os = "macos") {
        return Err(format!(
            "this is {}, not a macOS guest, so there is no hw.memsize to read",
            std::env::consts::OS
        ));
    }
    let text = facts::sysctl("hw.memsize")?;
    text.parse()
        .map_err(|_| format!("`sysctl -n hw.memsize` printed {text:?}, not a number of bytes"))
}

/// The facts about this machine that choosing a profile depends on, behind a trait so that
/// resolution is tested with injected facts.
pub trait Machine {
    /// As [`cpu_brand`].
    ///
    /// # Errors
    /// Why the brand cannot be read.
    fn cpu_brand(&self) -> Result<String, String>;

    /// As [`physical_memory`].
    ///
    /// # Errors
    /// Why the memory size cannot be read.
    fn physical_memory(&self) -> Result<u64, String>;
}

/// The machine capshim runs on.
#[derive(Clone, Copy, Debug, Default)]
pub struct ThisMachine;

impl Machine for ThisMachine {
    fn cpu_brand(&self) -> Result<String, String> {
        cpu_brand()
    }

    fn physical_memory(&self) -> Result<u64, String> {
        physical_memory()
    }
}
