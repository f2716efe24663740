//! The facts about this machine that capshim reads, through one trait: the real system
//! ([`Real`]: runs `/usr/bin/csrutil`, `/usr/sbin/sysctl` and `/usr/bin/defaults`, reads
//! files and their extended attributes, asks Metal for its default device), or values a test
//! sets ([`Fake`], tests only). Everything that depends on the machine takes a
//! `&dyn SystemFacts`: choosing a profile (the CPU brand, the memory), the pre-flight checks
//! of `run`, `bench` and `agent` (`launch::preflight`), and every check of `capshim doctor`,
//! so each is tested on any platform with injected facts.

use std::path::Path;
use std::process::Command;
use std::sync::OnceLock;

use capshim_macho::{self as macho, Binary};

use super::sip::Sip;
use crate::device::DeviceReport;

/// The extended attribute macOS sets on files downloaded by a quarantine-aware program
/// (a browser, AirDrop, most archive tools); Gatekeeper refuses to load such a library.
pub const QUARANTINE: &str = "com.apple.quarantine";

/// What the checks need to know about this machine and its files.
pub trait SystemFacts {
    /// System Integrity Protection, from `csrutil status`.
    fn sip(&self) -> Sip;

    /// The value of the extended attribute `name` of the file `path` (following symbolic
    /// links): `Ok(None)` when the file has no such attribute.
    ///
    /// # Errors
    /// Why the attribute could not be read (the file is missing, ...).
    fn extended_attribute(&self, path: &Path, name: &str) -> Result<Option<Vec<u8>>, String>;

    /// The file's mode bits (`st_mode`, following symbolic links), e.g. `0o104755` for a
    /// setuid program.
    ///
    /// # Errors
    /// Why the file could not be read.
    fn file_mode(&self, path: &Path) -> Result<u32, String>;

    /// What the file is: format, architectures, code signature, `__RESTRICT` section
    /// ([`macho::inspect_file`]).
    ///
    /// # Errors
    /// [`macho::OpenError`] when it is not a regular file or cannot be opened.
    fn binary(&self, path: &Path) -> Result<Binary, macho::OpenError>;

    /// The first [`HEAD`] bytes of the file (fewer when it is shorter), to tell what a file
    /// that is no binary is ([`file_head`]).
    ///
    /// # Errors
    /// Why the file could not be read (missing, not a regular file, ...).
    fn file_head(&self, path: &Path) -> Result<Vec<u8>, String>;

    /// One `sysctl` value, trimmed.
    ///
    /// # Errors
    /// A message naming the command and why it failed; off macOS, that this is not macOS.
    fn sysctl(&self, name: &str) -> Result<String, String>;

    /// A user default (`defaults read DOMAIN KEY`), trimmed: `Ok(None)` when it is not set.
    ///
    /// # Errors
    /// A message naming the command and why it failed; off macOS, that this is not macOS.
    fn user_default(&self, domain: &str, key: &str) -> Result<Option<String>, String>;

    /// The default Metal device's answers, as `capshim probe` reads them (macOS).
    ///
    /// # Errors
    /// Why there is none: Metal returned no device, or this is not macOS.
    fn metal_device(&self) -> Result<DeviceReport, String>;

    /// The CPU brand a Mac or macOS guest reports (`sysctl machdep.cpu.brand_string`), e.g.
    /// "Apple M1 Ultra (Virtual)" inside a guest.
    ///
    /// # Errors
    /// As [`SystemFacts::sysctl`].
    fn cpu_brand(&self) -> Result<String, String> {
        self.sysctl("machdep.cpu.brand_string")
    }

    /// The physical memory of this Mac or macOS guest, in bytes (`sysctl hw.memsize`).
    ///
    /// # Errors
    /// As [`SystemFacts::sysctl`], or `sysctl` printed something else than a number.
    fn physical_memory(&self) -> Result<u64, String> {
        let text = self.sysctl("hw.memsize")?;
        text.parse()
            .map_err(|_| format!("`sysctl -n hw.memsize` printed {text:?}, not a number of bytes"))
    }
}

/// Why a macOS fact cannot be read on `os`: "this is linux, not macOS, so there is no
/// machdep.cpu.brand_string to read".
pub fn not_macos(os: &str, what: &str) -> String {
    format!("this is {os}, not macOS, so there is no {what} to read")
}

/// This machine. `csrutil status` runs at most once per `Real`.
#[derive(Debug, Default)]
pub struct Real {
    sip: OnceLock<Sip>,
}

/// Where macOS keeps `csrutil`: run by absolute path, so a `csrutil` earlier on `PATH`
/// cannot answer for it.
pub const CSRUTIL: &str = "/usr/bin/csrutil";
/// Where macOS keeps `sysctl` (as [`CSRUTIL`]).
pub const SYSCTL: &str = "/usr/sbin/sysctl";
/// Where macOS keeps `defaults` (as [`CSRUTIL`]).
pub const DEFAULTS: &str = "/usr/bin/defaults";

/// How many bytes [`SystemFacts::file_head`] reads: enough for every signature
/// `launch::preflight` names a file format by.
pub const HEAD: usize = 64;

/// The first [`HEAD`] bytes of the file at `path`; refuses anything but a regular file
/// before opening it (a FIFO would block).
///
/// # Errors
/// A message naming the file and why it cannot be read.
pub fn file_head(path: &Path) -> Result<Vec<u8>, String> {
    use std::io::Read;
    let shown = |e: &dyn std::fmt::Display| format!("cannot read {}: {e}", path.display());
    macho::require_regular(path).map_err(|e| shown(&e))?;
    let mut head = Vec::with_capacity(HEAD);
    std::fs::File::open(path)
        .and_then(|file| file.take(HEAD as u64).read_to_end(&mut head))
        .map_err(|e| shown(&e))?;
    Ok(head)
}

/// Runs `program args` and returns its standard output, or a message naming the command.
fn output_of(program: &str, args: &[&str]) -> Result<String, String> {
    let shown = format!("{program} {}", args.join(" "));
    let output = Command::new(program)
        .args(args)
        .output()
        .map_err(|e| format!("cannot run `{shown}`: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "`{shown}` failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// Reads one value with `/usr/sbin/sysctl -n NAME`, trimmed; off macOS, says this is not
/// macOS.
///
/// # Errors
/// A message naming the command and why it failed.
pub fn sysctl(name: &str) -> Result<String, String> {
    if !cfg!(target_os = "macos") {
        return Err(not_macos(std::env::consts::OS, name));
    }
    output_of(SYSCTL, &["-n", name]).map(|text| text.trim().to_string())
}

/// Reads a user default with `/usr/bin/defaults read DOMAIN KEY`, trimmed: `Ok(None)` when
/// `defaults` says the pair does not exist.
///
/// # Errors
/// A message naming the command and why it failed; off macOS, that this is not macOS.
pub fn user_default(domain: &str, key: &str) -> Result<Option<String>, String> {
    if !cfg!(target_os = "macos") {
        return Err(not_macos(
            std::env::consts::OS,
            &format!("{domain} {key} default"),
        ));
    }
    let output = Command::new(DEFAULTS)
        .args(["read", domain, key])
        .output()
        .map_err(|e| format!("cannot run `{DEFAULTS} read {domain} {key}`: {e}"))?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    if output.status.success() {
        Ok(Some(
            String::from_utf8_lossy(&output.stdout).trim().to_string(),
        ))
    } else if stderr.contains("does not exist") {
        Ok(None)
    } else {
        Err(format!(
            "`{DEFAULTS} read {domain} {key}` failed ({}): {}",
            output.status,
            stderr.trim()
        ))
    }
}

impl SystemFacts for Real {
    fn sip(&self) -> Sip {
        self.sip
            .get_or_init(|| {
                if !cfg!(target_os = "macos") {
                    return Sip::Unknown(format!("this is {}, not macOS", std::env::consts::OS));
                }
                match output_of(CSRUTIL, &["status"]) {
                    Ok(text) => Sip::parse(&text),
                    Err(why) => Sip::Unknown(why),
                }
            })
            .clone()
    }

    fn extended_attribute(&self, path: &Path, name: &str) -> Result<Option<Vec<u8>>, String> {
        extended_attribute(path, name)
    }

    fn file_mode(&self, path: &Path) -> Result<u32, String> {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(path)
            .map(|m| m.mode())
            .map_err(|e| format!("cannot read {}: {e}", path.display()))
    }

    fn binary(&self, path: &Path) -> Result<Binary, macho::OpenError> {
        macho::inspect_file(path)
    }

    fn file_head(&self, path: &Path) -> Result<Vec<u8>, String> {
        file_head(path)
    }

    fn sysctl(&self, name: &str) -> Result<String, String> {
        sysctl(name)
    }

    fn user_default(&self, domain: &str, key: &str) -> Result<Option<String>, String> {
        user_default(domain, key)
    }

    #[cfg(target_os = "macos")]
    fn metal_device(&self) -> Result<DeviceReport, String> {
        super::metal::probe()
    }

    #[cfg(not(target_os = "macos"))]
    fn metal_device(&self) -> Result<DeviceReport, String> {
        Err(format!(
            "this is {}, not macOS: there is no Metal device",
            std::env::consts::OS
        ))
    }
}

#[cfg(target_os = "macos")]
fn extended_attribute(path: &Path, name: &str) -> Result<Option<Vec<u8>>, String> {
    use rustix::io::Errno;
    let mut value = vec![0u8; 4096];
    match rustix::fs::getxattr(path, name, &mut value[..]) {
        Ok(length) => {
            value.truncate(length);
            Ok(Some(value))
        }
        Err(Errno::NOATTR) => Ok(None),
        // Longer than 4096 bytes: there, with a value capshim does not need.
        Err(Errno::RANGE) => Ok(Some(Vec::new())),
        Err(e) => Err(format!(
            "cannot read the {name} attribute of {}: {e}",
            path.display()
        )),
    }
}

/// Extended attributes with Apple's names exist only on macOS.
#[cfg(not(target_os = "macos"))]
fn extended_attribute(path: &Path, _name: &str) -> Result<Option<Vec<u8>>, String> {
    std::fs::metadata(path)
        .map(|_| None)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))
}

#[cfg(test)]
mod fake;
#[cfg(test)]
pub use fake::Fake;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_real_system_reads_files_and_modes() {
        let real = Real::default();
        let me = std::env::current_exe().unwrap();
        assert!(matches!(real.binary(&me), Ok(Binary::Native { .. })));
        let mode = real.file_mode(&me).unwrap();
        assert_eq!(mode & 0o170_000, 0o100_000, "a regular file: {mode:o}");
        assert_eq!(real.extended_attribute(&me, QUARANTINE), Ok(None));
        let missing = Path::new("/nonexistent/capshim-facts");
        assert!(real.file_mode(missing).unwrap_err().contains("cannot read"));
        assert!(real.extended_attribute(missing, QUARANTINE).is_err());
    }

    #[cfg(not(target_os = "macos"))]
    #[test]
    fn off_macos_sip_is_unknown_and_says_why() {
        let sip = Real::default().sip();
        assert!(
            matches!(&sip, Sip::Unknown(why) if why.contains("not macOS")),
            "{sip:?}"
        );
    }

    #[cfg(not(target_os = "macos"))]
    #[test]
    fn off_macos_sysctl_defaults_and_metal_say_why() {
        let real = Real::default();
        assert_eq!(
            real.cpu_brand().unwrap_err(),
            format!(
                "this is {}, not macOS, so there is no machdep.cpu.brand_string to read",
                std::env::consts::OS
            )
        );
        assert!(real.physical_memory().unwrap_err().contains("hw.memsize"));
        assert!(real.metal_device().unwrap_err().contains("not macOS"));
        assert!(
            real.user_default("d", "k")
                .unwrap_err()
                .contains("not macOS")
        );
    }

    #[test]
    fn cpu_brand_and_memory_come_from_sysctl() {
        let mac = Fake::guest("Apple M1 Ultra (Virtual)", 16 << 30);
        assert_eq!(mac.cpu_brand().as_deref(), Ok("Apple M1 Ultra (Virtual)"));
        assert_eq!(mac.physical_memory(), Ok(16 << 30));
        let odd = Fake::new(Sip::Enabled).with_sysctl("hw.memsize", "lots");
        assert!(odd.physical_memory().unwrap_err().contains("\"lots\""));
        assert!(Fake::new(Sip::Enabled).cpu_brand().is_err());
        let linux = Fake::linux();
        assert!(
            linux
                .cpu_brand()
                .unwrap_err()
                .starts_with("this is linux, not macOS")
        );
    }

    #[test]
    fn the_fake_answers_what_it_was_given() {
        let fake = Fake::new(Sip::Disabled)
            .file("/opt/x/lib.dylib", 0, b"data".to_vec())
            .attribute("/opt/x/lib.dylib", QUARANTINE, b"0083;");
        let lib = Path::new("/opt/x/lib.dylib");
        assert_eq!(fake.sip(), Sip::Disabled);
        assert_eq!(
            fake.extended_attribute(lib, QUARANTINE),
            Ok(Some(b"0083;".to_vec()))
        );
        assert_eq!(fake.extended_attribute(lib, "other"), Ok(None));
        assert_eq!(fake.file_mode(lib), Ok(0o100_755));
        assert_eq!(fake.binary(lib).unwrap(), Binary::Unknown);
        assert!(fake.file_mode(Path::new("/elsewhere")).is_err());
        assert!(fake.sysctl("kern.osversion").is_err());
        assert!(fake.metal_device().is_err());
        let fake = fake.with_default("d", "k", "1");
        assert_eq!(fake.user_default("d", "k"), Ok(Some("1".to_string())));
        assert_eq!(fake.user_default("d", "other"), Ok(None));
        let device = DeviceReport::new(
            Some("Apple Paravirtual device".into()),
            &capshim_profile::device::Answers::paravirtual_stock(),
            None,
            None,
        );
        let fake = fake.with_device(device.clone());
        assert_eq!(fake.metal_device(), Ok(device));
        assert!(
            Fake::linux()
                .with_device(fake.device.unwrap())
                .metal_device()
                .is_err()
        );
    }
}
