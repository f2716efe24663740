//! The shim library: found, its format and architectures, the quarantine attribute, its code
//! signature, and its version against this CLI's (the version record read from the file,
//! without loading it).

use std::path::{Path, PathBuf};

use capshim_macho::{Arch, Binary, Slice};

use super::gather::Gathered;
use super::{Check, Status, VERSION};
use crate::launch::dylib;
use crate::launch::preflight::PreflightError;
use crate::platform::facts::{QUARANTINE, SystemFacts};

/// What doctor read of the library.
#[derive(Clone, Debug)]
pub struct Library {
    /// Where it is, or why it was not found.
    pub path: Result<PathBuf, String>,
    /// What the file is, when found.
    pub binary: Option<Result<Binary, String>>,
}

impl Library {
    /// Reads the library at `located`, when found.
    pub fn inspect(facts: &dyn SystemFacts, located: &Result<PathBuf, String>) -> Library {
        Library {
            binary: located
                .as_ref()
                .ok()
                .map(|path| facts.binary(path).map_err(|e| e.to_string())),
            path: located.clone(),
        }
    }

    /// Its path, when found.
    pub fn found(&self) -> Option<&Path> {
        self.path.as_deref().ok()
    }

    /// Its slices, when it is a native binary.
    pub fn slices(&self) -> &[Slice] {
        match &self.binary {
            Some(Ok(Binary::Native { slices, .. })) => slices,
            _ => &[],
        }
    }

    /// Its architectures (empty when not found or not a native binary).
    pub fn arches(&self) -> Vec<Arch> {
        self.slices().iter().map(|s| s.arch).collect()
    }
}

/// The architecture this capshim was built for, as a library slice must be to load into the
/// programs it runs (arm64 on Apple Silicon).
pub fn this_arch() -> Arch {
    match std::env::consts::ARCH {
        "aarch64" => Arch::Arm64,
        "x86_64" => Arch::X86_64,
        _ => Arch::Other(0, 0),
    }
}

/// `library.found`, `library.format`, `library.quarantine`, `library.signature`,
/// `library.version`.
pub fn checks(facts: &dyn SystemFacts, lib: &Library, g: &Gathered) -> Vec<Check> {
    let found = match &lib.path {
        Ok(path) => Check::ok("library.found", format!("{}", path.display()), {
            let (chosen, why) = dylib::choose(g.os, &facts.sip());
            let flavor = dylib::Flavor::of_path(path, g.os);
            let name = |f: dylib::Flavor| f.file_name(g.os);
            if flavor == chosen {
                format!(
                    "{}, which `capshim run`, `bench` and `agent` inject (--dylib, else the first found where they look): {why}",
                    name(flavor)
                )
            } else {
                format!(
                    "{}, given with --dylib or the only one found; without --dylib, `capshim run`, `bench` and `agent` look for {} first: {why}",
                    name(flavor),
                    name(chosen)
                )
            }
        }),
        // The line says where it looked (or what the --dylib path is): the one thing a reader
        // needs to act on, shown without --verbose.
        Err(why) => Check::with(
            "library.found",
            Status::Fail,
            format!("{} not found: {}", g.os.library_name(), where_looked(why)),
            why.clone(),
            if why.contains("; looked in: ") {
                "put libcapshim next to the capshim executable or in one of the folders listed, or pass --dylib PATH"
            } else {
                "check the path given with --dylib (the library file itself), or leave --dylib out to look in the usual folders"
            },
        ),
    };
    let Some(path) = lib.found() else {
        let skip = |id: &str| {
            Check::with(
                id,
                Status::Skip,
                "no library to check",
                "see library.found",
                "see library.found",
            )
        };
        return vec![
            found,
            skip("library.format"),
            skip("library.quarantine"),
            skip("library.signature"),
            skip("library.version"),
        ];
    };
    vec![
        found,
        file_format(lib, path, g),
        quarantine(facts, path, g),
        signature(lib, path, g),
        version(lib),
    ]
}

/// The places named in `why` (a [`dylib::DylibError`] or a `--dylib` path's error): the
/// folders looked in, or the path and its error.
fn where_looked(why: &str) -> String {
    match why.split_once("; looked in: ") {
        Some((_, rest)) => {
            let folders = rest.split_once("; ").map_or(rest, |(list, _)| list);
            format!("looked in {folders}")
        }
        None => why
            .split_once("; ")
            .map_or(why, |(first, _)| first)
            .to_string(),
    }
}

fn file_format(lib: &Library, path: &Path, g: &Gathered) -> Check {
    const ID: &str = "library.format";
    let binary = match &lib.binary {
        Some(Ok(binary)) => binary,
        other => {
            let why = match other {
                Some(Err(why)) => why.clone(),
                _ => "it was not read".to_string(),
            };
            return Check::with(
                ID,
                Status::Fail,
                format!("cannot read {}", path.display()),
                why,
                "check the file's permissions, or pass another copy with --dylib",
            );
        }
    };
    let arches = match dylib::check_binary(path, binary, g.os) {
        Ok(arches) => arches,
        Err(e) => {
            return Check::with(
                ID,
                Status::Fail,
                format!("{} is not a usable shim library", path.display()),
                e.to_string(),
                e.to_string(),
            );
        }
    };
    let list: Vec<String> = arches.iter().map(Arch::to_string).collect();
    let mine = g.arch;
    if !arches.contains(&mine) {
        return Check::with(
            ID,
            Status::Fail,
            format!(
                "{} has no {mine} slice ({}): it cannot load into this machine's programs",
                path.display(),
                list.join(", ")
            ),
            "dyld terminates a program whose inserted library has no slice of its architecture",
            format!("install the {mine} build of libcapshim (a capshim release for this machine)"),
        );
    }
    let arm64e = if g.macos() && !arches.contains(&Arch::Arm64e) {
        "; no arm64e slice, so Apple's own arm64e programs cannot load it (see sip)"
    } else {
        ""
    };
    Check::ok(
        ID,
        format!("a shared library for {}", list.join(", ")),
        format!("it loads into this machine's {mine} programs{arm64e}"),
    )
}

fn quarantine(facts: &dyn SystemFacts, path: &Path, g: &Gathered) -> Check {
    const ID: &str = "library.quarantine";
    if !g.macos() {
        return Check::not_macos(ID, g);
    }
    match facts.extended_attribute(path, QUARANTINE) {
        Ok(None) => Check::ok(
            ID,
            "no quarantine attribute",
            format!("macOS loads it without asking Gatekeeper ({QUARANTINE} is not set)"),
        ),
        Ok(Some(value)) => {
            let refusal = PreflightError::Quarantined {
                library: path.to_path_buf(),
                value: String::from_utf8_lossy(&value).into_owned(),
            };
            Check::with(
                ID,
                Status::Fail,
                format!(
                    "{} is quarantined: macOS refuses to load it and dyld then terminates the program",
                    path.display()
                ),
                refusal.to_string(),
                format!(
                    "if you trust this copy (built yourself, or checked against the release's SHA256SUMS): xattr -d {QUARANTINE} {}",
                    path.display()
                ),
            )
        }
        Err(why) => Check::with(
            ID,
            Status::Warn,
            "cannot read the quarantine attribute",
            why,
            format!("check with `xattr -l {}`", path.display()),
        ),
    }
}

fn signature(lib: &Library, path: &Path, g: &Gathered) -> Check {
    const ID: &str = "library.signature";
    if !g.macos() {
        return Check::not_macos(ID, g);
    }
    let slices = lib.slices();
    let unsigned: Vec<String> = slices
        .iter()
        .filter(|s| s.signature.is_none())
        .map(|s| s.arch.to_string())
        .collect();
    if !unsigned.is_empty() {
        return Check::with(
            ID,
            Status::Fail,
            format!("the {} slice is not code-signed", unsigned.join(", ")),
            "macOS on Apple Silicon kills a process that maps unsigned arm64 code, so dyld cannot load it",
            format!("sign it ad hoc: codesign --force -s - {}", path.display()),
        );
    }
    let teams: Vec<String> = slices
        .iter()
        .filter_map(|s| s.signature.as_ref().and_then(|sig| sig.team_id.clone()))
        .collect();
    let summary = match teams.first() {
        Some(team) => format!("signed by team {team}"),
        None => "ad-hoc signed (no team)".to_string(),
    };
    Check::ok(
        ID,
        summary,
        "programs with library validation load only libraries of Apple or their own team; `capshim doctor -- PROGRAM` checks a program against it",
    )
}

fn version(lib: &Library) -> Check {
    const ID: &str = "library.version";
    let records: Vec<Option<&str>> = lib
        .slices()
        .iter()
        .map(|s| s.version_record.as_deref())
        .collect();
    if records.is_empty() || records.iter().all(Option::is_none) {
        return Check::with(
            ID,
            Status::Warn,
            format!("the library records no capshim version (this CLI is {VERSION})"),
            "libcapshim records which capshim built it since the version record was added; this one has none, so it is older or not capshim's",
            "install the capshim CLI and libcapshim from the same release (or rebuild both: cargo build -p capshim -p capshim-cli)",
        );
    }
    let differing: Vec<&str> = records
        .iter()
        .map(|r| r.unwrap_or("none"))
        .filter(|&r| r != VERSION)
        .collect();
    if differing.is_empty() {
        Check::ok(
            ID,
            format!("capshim {VERSION}, the same as this CLI"),
            "read from the library's version record without loading it",
        )
    } else {
        Check::with(
            ID,
            Status::Fail,
            format!(
                "the library is capshim {}, this CLI is {VERSION}",
                differing.join(", ")
            ),
            "the CLI checks profiles with its own rules and reads the status lines of its own shim; a library of another version may accept other variables, answer differently or report in another format",
            "install the capshim CLI and libcapshim from the same release (or rebuild both: cargo build -p capshim -p capshim-cli)",
        )
    }
}
