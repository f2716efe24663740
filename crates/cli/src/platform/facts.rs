//! The facts about this machine that capshim's checks read, through one trait: the real
//! system ([`Real`]: runs `/usr/bin/csrutil` and `/usr/sbin/sysctl`, reads files and their
//! extended attributes), or values a test sets ([`Fake`], tests only). The checks of
//! `run`, `bench` and `agent` (`launch::preflight`) take a `&dyn SystemFacts`, so every
//! refusal and warning is tested on any platform, and a later `capshim doctor` can run the
//! same checks.

use std::path::Path;
use std::process::Command;
use std::sync::OnceLock;

use capshim_macho::{self as macho, Binary};

use super::sip::Sip;

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

    /// One `sysctl` value, trimmed.
    ///
    /// # Errors
    /// A message naming the command and why it failed.
    fn sysctl(&self, name: &str) -> Result<String, String>;
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

/// Reads one value with `/usr/sbin/sysctl -n NAME` (macOS), trimmed.
///
/// # Errors
/// A message naming the command and why it failed.
pub fn sysctl(name: &str) -> Result<String, String> {
    output_of(SYSCTL, &["-n", name]).map(|text| text.trim().to_string())
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

    fn sysctl(&self, name: &str) -> Result<String, String> {
        sysctl(name)
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

/// Facts a test chooses: every file it did not describe is missing.
#[cfg(test)]
#[derive(Debug, Clone)]
pub struct Fake {
    /// What `sip()` answers.
    pub sip: Sip,
    /// (path, attribute name, value).
    pub attributes: Vec<(std::path::PathBuf, String, Vec<u8>)>,
    /// (path, mode bits, file bytes for `binary`).
    pub files: Vec<(std::path::PathBuf, u32, Vec<u8>)>,
    /// (sysctl name, value).
    pub sysctls: Vec<(String, String)>,
}

#[cfg(test)]
impl Fake {
    /// A Mac with SIP as given and no files.
    pub fn new(sip: Sip) -> Fake {
        Fake {
            sip,
            attributes: Vec::new(),
            files: Vec::new(),
            sysctls: Vec::new(),
        }
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

    fn find(&self, path: &Path) -> Option<&(std::path::PathBuf, u32, Vec<u8>)> {
        self.files.iter().find(|(p, _, _)| p == path)
    }
}

#[cfg(test)]
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

    fn sysctl(&self, name: &str) -> Result<String, String> {
        self.sysctls
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
            .ok_or_else(|| format!("unknown oid '{name}'"))
    }
}

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
    }
}
