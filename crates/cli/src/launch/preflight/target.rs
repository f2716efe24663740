//! The checks of the program itself (or, for a script, of its interpreter): architectures,
//! SIP protection, and what its file mode and code signature tell dyld.

use std::path::Path;

use super::restriction::Restriction;
use super::{PreflightError, SIP_PROTECTED, sip_protected};
use crate::launch::Os;
use crate::platform::facts::SystemFacts;
use crate::platform::sip::Sip;
use capshim_macho::{Arch, Binary, Slice};

/// What the program is checked against.
pub(super) struct Subject<'a> {
    /// The library's architectures.
    pub library_arches: &'a [Arch],
    /// The library's signing team, if any.
    pub library_team: Option<&'a str>,
    /// The system the launch is for.
    pub os: Os,
}

/// Checks `program`; `sip` reads System Integrity Protection when a check needs it.
pub(super) fn check(
    facts: &dyn SystemFacts,
    subject: &Subject<'_>,
    program: &Path,
    sip: &dyn Fn() -> Sip,
) -> Result<Vec<String>, PreflightError> {
    let shown = program.display().to_string();
    let binary = match facts.binary(program) {
        Ok(binary) => binary,
        Err(e) => {
            return Ok(vec![format!(
                "cannot read {shown} to check it ({e}); running it anyway"
            )]);
        }
    };
    let mut warnings = Vec::new();
    let macos = subject.os == Os::MacOs;
    match &binary {
        Binary::Native { slices, .. } => {
            let matching: Vec<&Slice> = slices
                .iter()
                .filter(|s| subject.library_arches.contains(&s.arch))
                .collect();
            if matching.is_empty() && !subject.library_arches.is_empty() {
                return Err(PreflightError::ArchMismatch {
                    program: program.to_path_buf(),
                    program_arches: binary.arches(),
                    library_arches: subject.library_arches.to_vec(),
                });
            }
            if macos {
                let real = program
                    .canonicalize()
                    .unwrap_or_else(|_| program.to_path_buf());
                if sip_protected(&real.to_string_lossy()) {
                    let sip = sip();
                    match sip.dyld_variables_reach_apple_programs() {
                        Some(false) => {
                            return Err(will_not_load(shown, Restriction::SipProtected));
                        }
                        None => warnings.push(format!(
                            "{shown} is under a SIP-protected folder ({}): unless System Integrity Protection is off, macOS strips DYLD_INSERT_LIBRARIES when it starts, so the shim will not load; run a copy or build of the program outside those folders ({sip})",
                            SIP_PROTECTED.join(", ")
                        )),
                        Some(true) => {}
                    }
                }
                restrictions(facts, subject, program, &matching, sip)
                    .map_err(|restriction| will_not_load(shown, restriction))?;
            }
        }
        Binary::Script { interpreter } if macos => {
            let protected = sip_protected(interpreter);
            let reach = if protected {
                sip().dyld_variables_reach_apple_programs()
            } else {
                None
            };
            if protected && reach == Some(false) {
                return Err(will_not_load(
                    shown,
                    Restriction::SipProtectedInterpreter {
                        interpreter: interpreter.clone(),
                    },
                ));
            }
            let found = facts.binary(Path::new(interpreter));
            if let Ok(found @ Binary::Native { .. }) = &found {
                let loads = found
                    .arches()
                    .iter()
                    .any(|arch| subject.library_arches.contains(arch));
                if !loads && !subject.library_arches.is_empty() {
                    return Err(PreflightError::InterpreterArch {
                        script: program.to_path_buf(),
                        interpreter: interpreter.clone(),
                        interpreter_arches: found.arches(),
                        library_arches: subject.library_arches.to_vec(),
                    });
                }
            }
            if protected && reach.is_none() {
                warnings.push(format!(
                    "{shown} is a script run by {interpreter}, which is SIP-protected: unless System Integrity Protection is off, macOS strips DYLD_INSERT_LIBRARIES there, and every program the script starts begins without the shim; run the real program directly under `capshim run` ({})",
                    sip()
                ));
            }
        }
        Binary::Unknown => warnings.extend(super::data::check(facts, program)?),
        Binary::Script { .. } => {}
    }
    Ok(warnings)
}

fn will_not_load(subject: String, restriction: Restriction) -> PreflightError {
    PreflightError::WillNotLoad {
        subject,
        restriction,
    }
}

/// What the file mode and the code signature of the slices the library can load into tell
/// dyld (docs/apple-runtime.md, rule 11).
fn restrictions(
    facts: &dyn SystemFacts,
    subject: &Subject<'_>,
    program: &Path,
    matching: &[&Slice],
    sip: &dyn Fn() -> Sip,
) -> Result<(), Restriction> {
    let mode = facts.file_mode(program).unwrap_or(0);
    if mode & 0o6000 != 0 {
        return Err(Restriction::SetId { mode });
    }
    if matching.iter().any(|s| s.restrict_section) {
        return Err(Restriction::RestrictSection);
    }
    if matching.iter().any(|s| s.fairplay_encrypted) {
        return Err(Restriction::FairPlayEncrypted);
    }
    for signature in matching.iter().filter_map(|s| s.signature.as_ref()) {
        if signature.hardened_runtime && !signature.allow_dyld_environment_variables {
            return Err(Restriction::HardenedWithoutDyldEnvironment);
        }
        if signature.restrict && sip().debugging_restricted() != Some(false) {
            return Err(Restriction::CodeSignatureRestrict);
        }
        let hardened_lv = signature.hardened_runtime && !signature.disable_library_validation;
        let same_team =
            signature.team_id.is_some() && signature.team_id.as_deref() == subject.library_team;
        if (hardened_lv || signature.require_library_validation) && !same_team {
            return Err(Restriction::LibraryValidation {
                hardened: hardened_lv,
                program_team: signature.team_id.clone(),
                library_team: subject.library_team.map(str::to_string),
            });
        }
    }
    Ok(())
}
