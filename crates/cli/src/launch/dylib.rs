//! Finding and checking the shim library before anything runs.

use std::path::{Path, PathBuf};

use thiserror::Error;

use super::Os;
use crate::macho::{self, Arch, Binary, Format};

/// Why the shim library cannot be used.
#[derive(Debug, Error)]
pub enum DylibError {
    /// No candidate location holds the library.
    #[error(
        "{name} not found; looked in: {}; build it (`cargo build -p capshim`), install it in one of those folders, or pass --dylib PATH",
        .searched.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
    )]
    NotFound {
        /// The file name looked for.
        name: &'static str,
        /// Every path tried, in order.
        searched: Vec<PathBuf>,
    },
    /// The given path cannot be read.
    #[error("cannot read the shim library {path}: {source}; check the path given to --dylib")]
    Unreadable {
        /// The path.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not a shared library of this platform's format.
    #[error(
        "{path} is not {expected} shared library ({found}); pass the {name} built for this system with --dylib"
    )]
    WrongFormat {
        /// The path.
        path: PathBuf,
        /// "a Mach-O" or "an ELF".
        expected: &'static str,
        /// What it is instead.
        found: String,
        /// The library file name expected.
        name: &'static str,
    },
}

/// Where the shim library is looked for, in order: next to the `capshim` executable, in
/// `../lib/capshim/` beside it (a `PREFIX/bin` + `PREFIX/lib` install), then
/// `/usr/local/lib/capshim/`, on macOS `/opt/homebrew/lib/capshim/`, and
/// `~/.local/lib/capshim/`.
pub fn candidates(exe_dir: Option<&Path>, home: Option<&Path>, os: Os) -> Vec<PathBuf> {
    let name = os.library_name();
    let mut out = Vec::new();
    if let Some(dir) = exe_dir {
        out.push(dir.join(name));
        if let Some(prefix) = dir.parent() {
            out.push(prefix.join("lib/capshim").join(name));
        }
    }
    out.push(Path::new("/usr/local/lib/capshim").join(name));
    if os == Os::MacOs {
        out.push(Path::new("/opt/homebrew/lib/capshim").join(name));
    }
    if let Some(home) = home {
        out.push(home.join(".local/lib/capshim").join(name));
    }
    out
}

/// The explicit `--dylib` path, or the first candidate that exists, made absolute.
///
/// # Errors
/// [`DylibError::NotFound`] listing every place looked in.
pub fn locate(explicit: Option<&Path>, os: Os) -> Result<PathBuf, DylibError> {
    if let Some(path) = explicit {
        return std::path::absolute(path).map_err(|source| DylibError::Unreadable {
            path: path.to_path_buf(),
            source,
        });
    }
    let exe = std::env::current_exe().ok();
    let exe_dir = exe.as_deref().and_then(Path::parent);
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let searched = candidates(exe_dir, home.as_deref(), os);
    searched
        .iter()
        .find(|p| p.is_file())
        .cloned()
        .ok_or(DylibError::NotFound {
            name: os.library_name(),
            searched,
        })
}

/// Reads the library and checks it is a shared library in `os`'s format.
/// Returns its architectures.
///
/// # Errors
/// [`DylibError`] naming the file and what to do.
pub fn check(path: &Path, os: Os) -> Result<Vec<Arch>, DylibError> {
    let bytes = std::fs::read(path).map_err(|source| DylibError::Unreadable {
        path: path.to_path_buf(),
        source,
    })?;
    check_bytes(path, &bytes, os)
}

/// As [`check`], over bytes already read.
pub fn check_bytes(path: &Path, bytes: &[u8], os: Os) -> Result<Vec<Arch>, DylibError> {
    let (expected, format) = match os {
        Os::MacOs => ("a Mach-O", Format::MachO),
        Os::Linux => ("an ELF", Format::Elf),
    };
    let wrong = |found: String| DylibError::WrongFormat {
        path: path.to_path_buf(),
        expected,
        found,
        name: os.library_name(),
    };
    match macho::inspect(bytes) {
        Binary::Native { format: f, slices } if f == format => {
            if slices.iter().all(|s| !s.shared_library) {
                return Err(wrong("an executable, not a library".to_string()));
            }
            Ok(slices.iter().map(|s| s.arch).collect())
        }
        Binary::Native { format: f, .. } => Err(wrong(format!("a {f:?} file"))),
        Binary::Script { .. } => Err(wrong("a script".to_string())),
        Binary::Unknown => Err(wrong("not a native binary".to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::macho::testdata::macho;
    use object::macho as m;

    #[test]
    fn candidates_are_documented_order() {
        let c = candidates(
            Some(Path::new("/opt/capshim/bin")),
            Some(Path::new("/home/u")),
            Os::MacOs,
        );
        let c: Vec<String> = c.iter().map(|p| p.display().to_string()).collect();
        assert_eq!(
            c,
            [
                "/opt/capshim/bin/libcapshim.dylib",
                "/opt/capshim/lib/capshim/libcapshim.dylib",
                "/usr/local/lib/capshim/libcapshim.dylib",
                "/opt/homebrew/lib/capshim/libcapshim.dylib",
                "/home/u/.local/lib/capshim/libcapshim.dylib",
            ]
        );
        let linux = candidates(None, None, Os::Linux);
        assert_eq!(
            linux,
            [PathBuf::from("/usr/local/lib/capshim/libcapshim.so")]
        );
    }

    #[test]
    fn missing_library_lists_where_it_looked() {
        let err = check(Path::new("/nonexistent/libcapshim.so"), Os::Linux).unwrap_err();
        assert!(err.to_string().contains("--dylib"), "{err}");
        let err = DylibError::NotFound {
            name: "libcapshim.so",
            searched: candidates(None, None, Os::Linux),
        };
        assert!(
            err.to_string()
                .contains("/usr/local/lib/capshim/libcapshim.so")
        );
    }

    #[test]
    fn library_format_must_match_the_platform() {
        let dylib = macho(m::CPU_TYPE_ARM64, 0, m::MH_DYLIB, None);
        let p = Path::new("libcapshim.dylib");
        assert_eq!(
            check_bytes(p, &dylib, Os::MacOs).unwrap(),
            vec![Arch::Arm64]
        );
        let err = check_bytes(p, &dylib, Os::Linux).unwrap_err().to_string();
        assert!(err.contains("not an ELF shared library"), "{err}");
        let exe = macho(m::CPU_TYPE_ARM64, 0, m::MH_EXECUTE, None);
        let err = check_bytes(p, &exe, Os::MacOs).unwrap_err().to_string();
        assert!(err.contains("executable"), "{err}");
        assert!(check_bytes(p, b"#!/bin/sh\n", Os::MacOs).is_err());
    }
}
