//! Why the shim will not load into a program capshim can read, each with its fix. The
//! rules are dyld's and AMFI's (docs/apple-runtime.md, rule 11).

use std::fmt;

use capshim_macho::signature::{ALLOW_DYLD_ENV, DISABLE_LIBRARY_VALIDATION};

use super::SIP_PROTECTED;

/// Why the shim will not load into a program.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Restriction {
    /// The file is setuid or setgid: dyld ignores `DYLD_*` variables in a process started
    /// from one (`issetugid`).
    SetId {
        /// Its mode bits.
        mode: u32,
    },
    /// A `__RESTRICT,__restrict` section: dyld treats the program as restricted.
    RestrictSection,
    /// FairPlay-encrypted (an App Store program): dyld tells AMFI, which gives the process
    /// no `DYLD_*` variables.
    FairPlayEncrypted,
    /// `CS_RESTRICT` in its code signature (`codesign -o restrict`), while SIP's debugging
    /// restrictions are on.
    CodeSignatureRestrict,
    /// The hardened runtime without the `allow-dyld-environment-variables` entitlement:
    /// the `DYLD_*` variables are ignored.
    HardenedWithoutDyldEnvironment,
    /// Library validation (the hardened runtime without `disable-library-validation`, or
    /// `CS_REQUIRE_LV`): only libraries of Apple or of the program's team load.
    LibraryValidation {
        /// From the hardened runtime (else from `CS_REQUIRE_LV`).
        hardened: bool,
        /// The program's team, when it has one.
        program_team: Option<String>,
        /// The library's team, when it has one.
        library_team: Option<String>,
    },
    /// The program is in a SIP-protected folder and SIP is on: dyld removes the `DYLD_*`
    /// variables from it and from everything it starts.
    SipProtected,
    /// A script whose interpreter is in a SIP-protected folder, with SIP on.
    SipProtectedInterpreter {
        /// The interpreter.
        interpreter: String,
    },
}

impl fmt::Display for Restriction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Restriction::SetId { mode } => write!(
                f,
                "it is setuid/setgid (mode {:o}): dyld ignores DYLD_* variables in such programs, so the shim will not load. Run a copy without those bits (cp it elsewhere, then chmod u-s,g-s on the copy)",
                mode & 0o7777
            ),
            Restriction::RestrictSection => f.write_str(
                "it has a __RESTRICT,__restrict section, which makes dyld treat it as restricted and ignore DYLD_* variables, so the shim will not load. Use a build without that section (it comes from the link option -sectcreate __RESTRICT __restrict)",
            ),
            Restriction::FairPlayEncrypted => f.write_str(
                "it is FairPlay-encrypted, as the App Store delivers programs (LC_ENCRYPTION_INFO_64 with cryptid 1): dyld reports that to the system's policy (AMFI), which makes the process restricted, so dyld ignores DYLD_* variables and the shim will not load. Re-signing cannot change an encrypted copy: use a build of the program from outside the App Store (its developer's download, or one built from source)",
            ),
            Restriction::CodeSignatureRestrict => f.write_str(
                "its code signature carries the restrict flag (CS_RESTRICT, `codesign -o restrict`): while SIP's debugging restrictions are on, dyld ignores DYLD_* variables for it, so the shim will not load. Re-sign it without the flag (`codesign --force -s - PROGRAM` signs it ad hoc with no options)",
            ),
            Restriction::HardenedWithoutDyldEnvironment => write!(
                f,
                "it uses the hardened runtime without the {ALLOW_DYLD_ENV} entitlement: macOS ignores DYLD_INSERT_LIBRARIES for it, so the shim will not load. Re-sign it with that entitlement (`codesign --force --options runtime --entitlements FILE.plist -s IDENTITY PROGRAM`), or sign it without the hardened runtime (`codesign --force -s - PROGRAM`)"
            ),
            Restriction::LibraryValidation {
                hardened,
                program_team,
                library_team,
            } => {
                let why = if *hardened {
                    "it uses the hardened runtime with library validation"
                } else {
                    "its code signature requires library validation (CS_REQUIRE_LV, `codesign -o library`)"
                };
                let program = match program_team {
                    Some(team) => format!("its own team ({team})"),
                    None => "its own team".to_string(),
                };
                let library = match library_team {
                    Some(team) => format!("signed by team {team}"),
                    None => "ad-hoc signed".to_string(),
                };
                write!(
                    f,
                    "{why}: it loads only libraries signed by Apple or by {program}, and the shim library is {library}, so macOS refuses it (dyld then either runs the program without the shim or terminates it). Re-sign the program with the {DISABLE_LIBRARY_VALIDATION} entitlement, sign libcapshim.dylib with the program's team identity (`codesign --force -s IDENTITY libcapshim.dylib`), or sign the program ad hoc without the hardened runtime (`codesign --force -s - PROGRAM`)"
                )
            }
            Restriction::SipProtected => write!(
                f,
                "it is in a folder System Integrity Protection protects ({}) and SIP is on: dyld removes DYLD_* variables when it starts such a program, from it and from everything it starts, so the shim will not load anywhere in it. Run the real workload directly under capshim, or a copy or build of the program outside those folders",
                SIP_PROTECTED.join(", ")
            ),
            Restriction::SipProtectedInterpreter { interpreter } => write!(
                f,
                "the script is run by {interpreter}, which System Integrity Protection protects, and SIP is on: dyld removes DYLD_* variables when it starts {interpreter}, so nothing the script starts gets the shim. Run the real program directly under capshim"
            ),
        }
    }
}
