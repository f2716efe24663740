//! Checks of the program before it runs: it exists and is executable, the shim library's
//! architecture can load into it, and on macOS whether the system will strip the DYLD
//! variables (SIP-protected paths, hardened runtime without the entitlement).

use std::ffi::OsStr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use thiserror::Error;

use super::Os;
use capshim_macho::{self as macho, Arch, Binary};

/// Folders whose programs macOS System Integrity Protection guards: dyld drops every
/// `DYLD_*` variable when it starts them (Apple: "Runtime Protections", SIP).
pub const SIP_PROTECTED: [&str; 7] = [
    "/bin/",
    "/sbin/",
    "/usr/bin/",
    "/usr/sbin/",
    "/usr/libexec/",
    "/usr/lib/",
    "/System/",
];

/// A reason not to run the program at all.
#[derive(Debug, Error)]
pub enum PreflightError {
    /// The command is not on `PATH` (or the path does not exist).
    #[error("{command}: command not found{}; check the spelling, or give its full path", .searched.as_deref().map(|p| format!(" in PATH ({p})")).unwrap_or_default())]
    NotFound {
        /// The command as given.
        command: String,
        /// The `PATH` searched, when it was looked up there.
        searched: Option<String>,
    },
    /// The file exists but cannot be executed.
    #[error("{0}: not an executable file; check its permissions (chmod +x) or the path")]
    NotExecutable(PathBuf),
    /// The shim library cannot load into the program.
    #[error(
        "{program} is built for {} but the shim library is {}{}; the loader cannot inject it. Use a shim built for {} (pass it with --dylib), run the program's {} build, or skip this check with --skip-preflight",
        list(.program_arches), list(.library_arches),
        if .program_arches.iter().all(|a| *a == Arch::Arm64e) {
            " (an arm64e-only program, such as Apple's own platform binaries, loads only arm64e libraries)"
        } else { "" },
        list(.program_arches), list(.library_arches)
    )]
    ArchMismatch {
        /// The program.
        program: PathBuf,
        /// Its architectures.
        program_arches: Vec<Arch>,
        /// The shim library's architectures.
        library_arches: Vec<Arch>,
    },
}

fn list(arches: &[Arch]) -> String {
    arches
        .iter()
        .map(Arch::to_string)
        .collect::<Vec<_>>()
        .join("/")
}

fn is_executable_file(path: &Path) -> bool {
    path.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Finds the program as a shell would: a command with a `/` is a path, otherwise the first
/// executable file of that name in `path_var`'s folders.
///
/// # Errors
/// [`PreflightError::NotFound`] or [`PreflightError::NotExecutable`].
pub fn resolve_program(
    command: &OsStr,
    path_var: Option<&OsStr>,
) -> Result<PathBuf, PreflightError> {
    let shown = command.to_string_lossy().into_owned();
    if command.as_encoded_bytes().contains(&b'/') {
        let path = PathBuf::from(command);
        if !path.exists() {
            return Err(PreflightError::NotFound {
                command: shown,
                searched: None,
            });
        }
        if !is_executable_file(&path) {
            return Err(PreflightError::NotExecutable(path));
        }
        return Ok(path);
    }
    let mut not_executable = None;
    for dir in std::env::split_paths(path_var.unwrap_or_default()) {
        let dir = if dir.as_os_str().is_empty() {
            PathBuf::from(".")
        } else {
            dir
        };
        let candidate = dir.join(command);
        if is_executable_file(&candidate) {
            return Ok(candidate);
        }
        if candidate.is_file() && not_executable.is_none() {
            not_executable = Some(candidate);
        }
    }
    match not_executable {
        Some(path) => Err(PreflightError::NotExecutable(path)),
        None => Err(PreflightError::NotFound {
            command: shown,
            searched: Some(path_var.unwrap_or_default().to_string_lossy().into_owned()),
        }),
    }
}

fn sip_protected(path: &str) -> bool {
    SIP_PROTECTED.iter().any(|prefix| path.starts_with(prefix))
}

/// Checks `program` (its resolved path and what [`macho::inspect_file`] read of it) against
/// the shim library's architectures. Returns warnings to print; an error means the run
/// cannot work.
///
/// # Errors
/// [`PreflightError::ArchMismatch`] when no architecture of the program is one of the
/// library's.
pub fn check(
    program: &Path,
    binary: &Binary,
    library_arches: &[Arch],
    os: Os,
) -> Result<Vec<String>, PreflightError> {
    let mut warnings = Vec::new();
    let shown = program.display();
    let real = program
        .canonicalize()
        .unwrap_or_else(|_| program.to_path_buf());
    if os == Os::MacOs && sip_protected(&real.to_string_lossy()) {
        warnings.push(format!(
            "{shown} is under a SIP-protected folder ({}): macOS strips DYLD_INSERT_LIBRARIES when it starts, so the shim will not load; copy the program elsewhere or run a build of your own",
            SIP_PROTECTED.join(", ")
        ));
    }
    match binary {
        Binary::Native { slices, .. } => {
            let matching: Vec<_> = slices
                .iter()
                .filter(|s| library_arches.contains(&s.arch))
                .collect();
            if matching.is_empty() && !library_arches.is_empty() {
                return Err(PreflightError::ArchMismatch {
                    program: program.to_path_buf(),
                    program_arches: slices.iter().map(|s| s.arch).collect(),
                    library_arches: library_arches.to_vec(),
                });
            }
            if os == Os::MacOs {
                let hardened = matching
                    .iter()
                    .filter_map(|s| s.signature.as_ref())
                    .find(|sig| sig.hardened_runtime);
                if let Some(sig) = hardened {
                    if !sig.allow_dyld_environment_variables {
                        warnings.push(format!(
                            "{shown} uses the hardened runtime without the {} entitlement: macOS ignores DYLD_INSERT_LIBRARIES for it, so the shim will not load; re-sign it with that entitlement (codesign --entitlements) or use a build without the hardened runtime",
                            macho::signature::ALLOW_DYLD_ENV
                        ));
                    } else if !sig.disable_library_validation {
                        warnings.push(format!(
                            "{shown} uses the hardened runtime with library validation: it loads only libraries signed by Apple or its own team, so an ad-hoc signed shim is refused unless the program has {} or the shim is signed by the same team",
                            macho::signature::DISABLE_LIBRARY_VALIDATION
                        ));
                    }
                }
            }
        }
        Binary::Script { interpreter } => {
            if os == Os::MacOs && sip_protected(interpreter) {
                warnings.push(format!(
                    "{shown} is a script run by {interpreter}, which is SIP-protected: macOS strips DYLD_INSERT_LIBRARIES there, and every program the script starts begins without the shim; run the real program directly under `capshim run`"
                ));
            }
        }
        Binary::Unknown => {}
    }
    Ok(warnings)
}

#[cfg(test)]
mod tests {
    use super::*;
    use capshim_macho::signature::ALLOW_DYLD_ENV;
    use capshim_macho::testdata::{entitlements, macho, universal};
    use object::macho as m;

    const ARM64: &[Arch] = &[Arch::Arm64];

    fn check(
        program: &Path,
        bytes: &[u8],
        library_arches: &[Arch],
        os: Os,
    ) -> Result<Vec<String>, PreflightError> {
        super::check(program, &macho::inspect(bytes), library_arches, os)
    }

    #[test]
    fn finds_programs_like_a_shell() {
        let found = resolve_program(
            OsStr::new("sh"),
            Some(OsStr::new("/nonexistent:/bin:/usr/bin")),
        )
        .unwrap();
        assert!(found.ends_with("sh"), "{found:?}");
        let err = resolve_program(
            OsStr::new("no-such-program-capshim"),
            Some(OsStr::new("/bin")),
        )
        .unwrap_err();
        assert!(matches!(err, PreflightError::NotFound { .. }));
        assert!(err.to_string().contains("no-such-program-capshim"), "{err}");
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("data");
        std::fs::write(&file, "x").unwrap();
        assert!(matches!(
            resolve_program(file.as_os_str(), None),
            Err(PreflightError::NotExecutable(_))
        ));
        assert!(matches!(
            resolve_program(OsStr::new("data"), Some(dir.path().as_os_str())),
            Err(PreflightError::NotExecutable(_))
        ));
    }

    #[test]
    fn architectures_must_overlap() {
        let x86 = macho(m::CPU_TYPE_X86_64, 3, m::MH_EXECUTE, None);
        let err = check(Path::new("/opt/x/tool"), &x86, ARM64, Os::MacOs).unwrap_err();
        assert!(
            err.to_string()
                .contains("built for x86_64 but the shim library is arm64"),
            "{err}"
        );

        let e_only = macho(
            m::CPU_TYPE_ARM64,
            m::CPU_SUBTYPE_ARM64E,
            m::MH_EXECUTE,
            None,
        );
        let err = check(Path::new("/opt/x/tool"), &e_only, ARM64, Os::MacOs).unwrap_err();
        assert!(err.to_string().contains("arm64e-only"), "{err}");

        let fat = universal(&[
            (m::CPU_TYPE_X86_64, 3, x86.clone()),
            (
                m::CPU_TYPE_ARM64,
                0,
                macho(m::CPU_TYPE_ARM64, 0, m::MH_EXECUTE, None),
            ),
        ]);
        assert_eq!(
            check(Path::new("/opt/x/tool"), &fat, ARM64, Os::MacOs).unwrap(),
            Vec::<String>::new()
        );
    }

    #[test]
    fn macos_warns_where_dyld_variables_are_stripped() {
        let plain = macho(m::CPU_TYPE_ARM64, 0, m::MH_EXECUTE, None);
        let w = check(Path::new("/usr/bin/true"), &plain, ARM64, Os::MacOs).unwrap();
        assert!(w[0].contains("SIP-protected"), "{w:?}");
        assert!(
            check(Path::new("/usr/bin/true"), &plain, ARM64, Os::Linux)
                .unwrap()
                .is_empty()
        );

        let w = check(Path::new("/opt/x/run.sh"), b"#!/bin/sh\n", ARM64, Os::MacOs).unwrap();
        assert!(w[0].contains("script run by /bin/sh"), "{w:?}");
        assert!(
            check(
                Path::new("/opt/x/run.sh"),
                b"#!/opt/homebrew/bin/bash\n",
                ARM64,
                Os::MacOs
            )
            .unwrap()
            .is_empty()
        );

        let hardened = macho(m::CPU_TYPE_ARM64, 0, m::MH_EXECUTE, Some((0x10000, None)));
        let w = check(Path::new("/opt/x/app"), &hardened, ARM64, Os::MacOs).unwrap();
        assert!(w[0].contains("hardened runtime without"), "{w:?}");

        let allowed = macho(
            m::CPU_TYPE_ARM64,
            0,
            m::MH_EXECUTE,
            Some((0x10000, Some(&entitlements(&[ALLOW_DYLD_ENV])))),
        );
        let w = check(Path::new("/opt/x/app"), &allowed, ARM64, Os::MacOs).unwrap();
        assert!(w[0].contains("library validation"), "{w:?}");
    }
}
