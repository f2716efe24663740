//! Finding and checking the shim library before anything runs.

use std::path::{Path, PathBuf};

use thiserror::Error;

use super::Os;
use crate::platform::sip::Sip;
use capshim_macho::{self as macho, Arch, Binary, Format};

/// Which of capshim's two libraries a launch injects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavor {
    /// libcapshim: the shim alone.
    Plain,
    /// libcapshim_guard: the shim plus the exec guard, which takes capshim out of the
    /// environment of a program that cannot load it (Apple's arm64e programs, with SIP off;
    /// docs/apple-runtime.md, "The exec guard").
    Guard,
}

impl Flavor {
    /// The library's file name on `os`.
    pub const fn file_name(self, os: Os) -> &'static str {
        match (self, os) {
            (Flavor::Plain, _) => os.library_name(),
            (Flavor::Guard, Os::MacOs) => "libcapshim_guard.dylib",
            (Flavor::Guard, Os::Linux) => "libcapshim_guard.so",
        }
    }

    /// The flavor a library file is, by its file name (a `--dylib` path): the guard library's
    /// name, else the plain one.
    pub fn of_path(path: &Path, os: Os) -> Flavor {
        let guard = Flavor::Guard.file_name(os);
        if path.file_name().is_some_and(|name| name == guard) {
            Flavor::Guard
        } else {
            Flavor::Plain
        }
    }
}

/// The library a launch on `os` should inject with System Integrity Protection as `sip`
/// says, and why: the guard library when SIP is off or its state unknown (then
/// `DYLD_INSERT_LIBRARIES` may reach Apple's arm64e programs), the plain one with SIP on
/// (dyld keeps the variable from them) and on Linux (no SIP, no arm64e).
pub fn choose(os: Os, sip: &Sip) -> (Flavor, String) {
    match (os, sip.dyld_variables_reach_apple_programs()) {
        (Os::Linux, _) => (
            Flavor::Plain,
            "Linux has no System Integrity Protection and no arm64e programs, so the plain library"
                .to_owned(),
        ),
        (Os::MacOs, Some(false)) => (
            Flavor::Plain,
            format!(
                "{sip}, so dyld keeps DYLD_INSERT_LIBRARIES away from Apple's programs: the plain library"
            ),
        ),
        (Os::MacOs, Some(true)) => (
            Flavor::Guard,
            format!(
                "{sip}, so DYLD_INSERT_LIBRARIES reaches Apple's arm64e programs: the guard library, which takes capshim out of their environment"
            ),
        ),
        (Os::MacOs, None) => (
            Flavor::Guard,
            format!(
                "{sip}; DYLD_INSERT_LIBRARIES may reach Apple's arm64e programs: the guard library, which takes capshim out of their environment"
            ),
        ),
    }
}

/// A library found for a launch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Located {
    /// Its absolute path.
    pub path: PathBuf,
    /// Which library it is.
    pub flavor: Flavor,
    /// Why this one: `--dylib`, or [`choose`]'s reason (and a fallback to the plain library
    /// when the guard library is in none of the folders).
    pub why: String,
}

/// [`locate_for`] with this machine's SIP state (`csrutil status` on macOS): what `run`,
/// `bench` and `agent` inject.
///
/// # Errors
/// As [`locate_for`].
pub fn locate_here(explicit: Option<&Path>, os: Os) -> Result<PathBuf, DylibError> {
    use crate::platform::facts::{Real, SystemFacts};
    locate_for(explicit, os, &Real::default().sip()).map(|located| located.path)
}

/// As [`locate`], for the library [`choose`] picks: `--dylib` overrides; else the chosen
/// library's file in the folders of [`candidates`], falling back to the plain library (with
/// a reason saying so) when the guard library is in none of them.
///
/// # Errors
/// As [`locate`]: [`DylibError::NotFound`] lists where the chosen library was looked for.
pub fn locate_for(explicit: Option<&Path>, os: Os, sip: &Sip) -> Result<Located, DylibError> {
    if let Some(path) = explicit {
        let path = locate(Some(path), os)?;
        let flavor = Flavor::of_path(&path, os);
        return Ok(Located {
            path,
            flavor,
            why: "given with --dylib".to_owned(),
        });
    }
    let exe = std::env::current_exe().ok();
    let home = std::env::var_os("HOME").map(PathBuf::from);
    located_in(
        os,
        sip,
        exe.as_deref().and_then(Path::parent),
        home.as_deref(),
    )
}

/// [`locate_for`] without `--dylib`, searching the folders of [`candidates`] for an
/// executable in `exe_dir` and a home folder `home`.
fn located_in(
    os: Os,
    sip: &Sip,
    exe_dir: Option<&Path>,
    home: Option<&Path>,
) -> Result<Located, DylibError> {
    let (flavor, why) = choose(os, sip);
    let search = |flavor: Flavor| {
        let searched = candidates_of(flavor.file_name(os), exe_dir, home, os);
        match searched.iter().find(|p| p.is_file()).cloned() {
            Some(path) => Ok(path),
            None => Err(searched),
        }
    };
    let found = match search(flavor) {
        Ok(path) => Ok((path, flavor, why)),
        Err(searched) if flavor == Flavor::Guard => match search(Flavor::Plain) {
            Ok(path) => Ok((
                path,
                Flavor::Plain,
                format!(
                    "{why}; but {} is in none of the folders looked in, so the plain library, without the exec guard",
                    Flavor::Guard.file_name(os)
                ),
            )),
            Err(_) => Err(searched),
        },
        Err(searched) => Err(searched),
    };
    let (path, flavor, why) = found.map_err(|searched| DylibError::NotFound {
        name: flavor.file_name(os),
        searched,
    })?;
    check_path(&path, os)?;
    Ok(Located { path, flavor, why })
}

/// Why the shim library cannot be used.
#[derive(Debug, Error)]
pub enum DylibError {
    /// No candidate location holds the library.
    #[error(
        "{name} not found; looked in: {}; build it (`cargo build --release -p capshim` on the system it is for; for a Mac, `cargo xtask dist` on Linux), install it in one of those folders, or pass --dylib PATH",
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
    /// The path is not a regular file (a FIFO, device, folder): never opened.
    #[error(
        "{path} cannot be the shim library: {kind}, not a regular file; pass the path of {name} itself with --dylib"
    )]
    NotRegular {
        /// The path.
        path: PathBuf,
        /// What it is.
        kind: &'static str,
        /// The library file name expected.
        name: &'static str,
    },
    /// The path holds a character the loader splits its variable on.
    #[error(
        "the shim library path {path:?} contains {what}: {var} is split on {separators}, so the loader would look for pieces of the path and silently not load the shim; move or copy {name} to a path without {separators} and pass that with --dylib"
    )]
    UnsafePath {
        /// The path.
        path: PathBuf,
        /// "a space" or "a colon".
        what: &'static str,
        /// The injection variable.
        var: &'static str,
        /// "spaces or colons" or "colons".
        separators: &'static str,
        /// The library file name.
        name: &'static str,
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
    candidates_of(os.library_name(), exe_dir, home, os)
}

/// [`candidates`] for the file `name` (either library).
fn candidates_of(name: &str, exe_dir: Option<&Path>, home: Option<&Path>, os: Os) -> Vec<PathBuf> {
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

/// Refuses a library path the loader would split: glibc's `LD_PRELOAD` is a list
/// separated by spaces or colons, dyld's `DYLD_INSERT_LIBRARIES` by colons. Such a path
/// would be silently not loaded. Used by `run`, `bench`, `agent` and `probe`, through
/// [`locate`].
///
/// # Errors
/// [`DylibError::UnsafePath`] saying to move the library.
pub fn check_path(path: &Path, os: Os) -> Result<(), DylibError> {
    let bytes = path.as_os_str().as_encoded_bytes();
    let (splits, separators): (&[u8], _) = match os {
        Os::Linux => (b" :", "spaces or colons"),
        Os::MacOs => (b":", "colons"),
    };
    let Some(&found) = bytes.iter().find(|b| splits.contains(b)) else {
        return Ok(());
    };
    Err(DylibError::UnsafePath {
        path: path.to_path_buf(),
        what: if found == b' ' { "a space" } else { "a colon" },
        var: os.injection_var(),
        separators,
        name: os.library_name(),
    })
}

/// The explicit `--dylib` path, or the first candidate that exists, made absolute and
/// checked with [`check_path`].
///
/// # Errors
/// [`DylibError::NotFound`] listing every place looked in; [`DylibError::UnsafePath`]. An
/// explicit path is not looked at: `agent` writes paths of the machine the agent runs on.
pub fn locate(explicit: Option<&Path>, os: Os) -> Result<PathBuf, DylibError> {
    let path = match explicit {
        Some(path) => std::path::absolute(path).map_err(|source| DylibError::Unreadable {
            path: path.to_path_buf(),
            source,
        })?,
        None => {
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
                })?
        }
    };
    check_path(&path, os)?;
    Ok(path)
}

/// Checks the library is a regular file and a shared library in `os`'s format, reading
/// only its headers. Returns its architectures.
///
/// # Errors
/// [`DylibError`] naming the file and what to do.
pub fn check(path: &Path, os: Os) -> Result<Vec<Arch>, DylibError> {
    check_path(path, os)?;
    let binary = macho::inspect_file(path).map_err(|e| match e {
        macho::OpenError::NotRegular(kind) => DylibError::NotRegular {
            path: path.to_path_buf(),
            kind,
            name: os.library_name(),
        },
        macho::OpenError::Io(source) => DylibError::Unreadable {
            path: path.to_path_buf(),
            source,
        },
    })?;
    check_binary(path, &binary, os)
}

/// As [`check`], over bytes already read.
#[cfg(test)]
pub fn check_bytes(path: &Path, bytes: &[u8], os: Os) -> Result<Vec<Arch>, DylibError> {
    check_binary(path, &macho::inspect(bytes), os)
}

/// As [`check`], over what the file was read to be.
///
/// # Errors
/// As [`check`].
pub fn check_binary(path: &Path, binary: &Binary, os: Os) -> Result<Vec<Arch>, DylibError> {
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
    match binary {
        Binary::Native { format: f, slices } if *f == format => {
            if slices.iter().all(|s| !s.shared_library) {
                return Err(wrong("an executable, not a library".to_string()));
            }
            Ok(slices.iter().map(|s| s.arch).collect())
        }
        Binary::Native { format: f, .. } => Err(wrong(match f {
            Format::Elf => "an ELF file".to_string(),
            Format::MachO => "a Mach-O file".to_string(),
        })),
        Binary::Script { .. } => Err(wrong("a script".to_string())),
        Binary::Unknown => Err(wrong("not a native binary".to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use capshim_macho::testdata::macho;
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
    fn sip_off_or_unknown_chooses_the_guard_library() {
        let unknown = Sip::Unknown("csrutil: not found".into());
        let custom = Sip::Custom(vec![("Debugging Restrictions".into(), false)]);
        assert_eq!(choose(Os::MacOs, &Sip::Enabled).0, Flavor::Plain);
        assert_eq!(choose(Os::MacOs, &Sip::Disabled).0, Flavor::Guard);
        assert_eq!(choose(Os::MacOs, &unknown).0, Flavor::Guard);
        assert_eq!(choose(Os::MacOs, &custom).0, Flavor::Guard);
        for sip in [Sip::Enabled, Sip::Disabled, unknown] {
            assert_eq!(choose(Os::Linux, &sip).0, Flavor::Plain);
        }
        assert!(
            choose(Os::MacOs, &Sip::Disabled)
                .1
                .contains("guard library")
        );
        assert_eq!(
            Flavor::of_path(Path::new("/x/libcapshim_guard.dylib"), Os::MacOs),
            Flavor::Guard
        );
        assert_eq!(
            Flavor::of_path(Path::new("/x/libcapshim.dylib"), Os::MacOs),
            Flavor::Plain
        );
    }

    #[test]
    fn the_chosen_library_is_searched_then_the_plain_one() {
        let dir = std::env::temp_dir().join(format!("capshim-dylib-flavor-{}", std::process::id()));
        let bin = dir.join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        let found = |sip: &Sip| located_in(Os::MacOs, sip, Some(&bin), None);
        // Neither library: the chosen one is named as not found.
        let err = found(&Sip::Disabled).unwrap_err().to_string();
        assert!(err.contains("libcapshim_guard.dylib not found"), "{err}");
        std::fs::write(bin.join("libcapshim.dylib"), b"x").unwrap();
        let plain = found(&Sip::Disabled).unwrap();
        assert_eq!(plain.flavor, Flavor::Plain);
        assert!(
            plain.why.contains("without the exec guard"),
            "{}",
            plain.why
        );
        std::fs::write(bin.join("libcapshim_guard.dylib"), b"x").unwrap();
        let guard = found(&Sip::Disabled).unwrap();
        assert_eq!(
            (guard.flavor, guard.path),
            (Flavor::Guard, bin.join("libcapshim_guard.dylib"))
        );
        assert_eq!(found(&Sip::Enabled).unwrap().flavor, Flavor::Plain);
        // --dylib overrides, its flavor by name.
        let given = locate_for(
            Some(&bin.join("libcapshim.dylib")),
            Os::MacOs,
            &Sip::Disabled,
        );
        assert_eq!(given.unwrap().flavor, Flavor::Plain);
        std::fs::remove_dir_all(&dir).unwrap();
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
        assert!(err.contains("(a Mach-O file)"), "{err}");
        let exe = macho(m::CPU_TYPE_ARM64, 0, m::MH_EXECUTE, None);
        let err = check_bytes(p, &exe, Os::MacOs).unwrap_err().to_string();
        assert!(err.contains("executable"), "{err}");
        assert!(check_bytes(p, b"#!/bin/sh\n", Os::MacOs).is_err());
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn an_elf_without_machos_wording() {
        let me = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        let err = check_bytes(Path::new("x"), &me, Os::MacOs)
            .unwrap_err()
            .to_string();
        assert!(err.contains("(an ELF file)"), "{err}");
    }

    #[test]
    fn paths_the_loader_would_split_are_refused() {
        for (path, os, what) in [
            ("/tmp/sp ace/libcapshim.so", Os::Linux, "a space"),
            ("/tmp/a:b/libcapshim.so", Os::Linux, "a colon"),
            ("/tmp/a:b/libcapshim.dylib", Os::MacOs, "a colon"),
        ] {
            let err = locate(Some(Path::new(path)), os).unwrap_err().to_string();
            assert!(err.contains(what), "{err}");
            assert!(err.contains(os.injection_var()), "{err}");
            assert!(err.contains("move or copy"), "{err}");
            assert!(check(Path::new(path), os).is_err());
        }
        assert!(check_path(Path::new("/tmp/sp ace/libcapshim.dylib"), Os::MacOs).is_ok());
        assert!(check_path(Path::new("/tmp/x/libcapshim.so"), Os::Linux).is_ok());
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn special_files_are_refused_before_reading() {
        let err = check(Path::new("/dev/zero"), Os::Linux).unwrap_err();
        assert!(matches!(err, DylibError::NotRegular { .. }), "{err}");
        assert!(err.to_string().contains("character device"), "{err}");
    }

    /// libc.so.6 is ET_DYN and names an interpreter (it can be run); it is still a shared
    /// library the loader preloads.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_shared_object_with_an_interpreter_is_a_library() {
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let libc = maps
            .lines()
            .filter_map(|l| l.split_whitespace().nth(5))
            .find(|p| p.contains("/libc.so") || p.contains("/libc-"))
            .expect("libc mapped");
        check(Path::new(libc), Os::Linux).unwrap();
        // A PIE executable, also ET_DYN with an interpreter, is accepted too.
        check(&std::env::current_exe().unwrap(), Os::Linux).unwrap();
    }
}
