//! System Integrity Protection as `csrutil status` reports it, and what that means for
//! `DYLD_INSERT_LIBRARIES` reaching Apple's own programs.
//!
//! `csrutil status` prints one of (macOS 10.11 to 26):
//!
//! ```text
//! System Integrity Protection status: enabled.
//! System Integrity Protection status: disabled.
//! System Integrity Protection status: unknown (Custom Configuration).
//!
//! Configuration:
//!         Apple Internal: disabled
//!         Kext Signing: enabled
//!         Filesystem Protections: enabled
//!         Debugging Restrictions: disabled
//!         ...
//! ```
//!
//! (older systems print "enabled (Custom Configuration)" for the last form).

use std::fmt;

/// What `csrutil status` says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Sip {
    /// Every protection on: dyld removes `DYLD_*` variables when it starts a program under
    /// SIP's protection (Apple's programs in `/bin`, `/usr/bin`, `/System`, ...).
    Enabled,
    /// SIP off (`csrutil disable`): `DYLD_*` variables reach Apple's programs too.
    Disabled,
    /// Some protections off (`csrutil enable --without …`): each named protection and
    /// whether it is on. Whether Apple's programs receive `DYLD_*` variables then is not
    /// documented, so capshim does not guess.
    Custom(Vec<(String, bool)>),
    /// The status could not be read or understood: why.
    Unknown(String),
}

impl Sip {
    /// Reads `csrutil status` output. Anything unexpected gives [`Sip::Unknown`] quoting it.
    pub fn parse(output: &str) -> Sip {
        let Some(status) = output.lines().find_map(|line| {
            line.trim()
                .strip_prefix("System Integrity Protection status:")
        }) else {
            return Sip::Unknown(format!(
                "`csrutil status` printed no status line: {:?}",
                output.trim()
            ));
        };
        let status = status.trim().trim_end_matches('.');
        if status.contains("Custom Configuration") {
            let protections = output
                .lines()
                .filter_map(|line| {
                    let (name, value) = line.trim().split_once(':')?;
                    let on = match value.trim().trim_end_matches('.') {
                        "enabled" => true,
                        "disabled" => false,
                        _ => return None,
                    };
                    (!name.contains("System Integrity Protection status"))
                        .then(|| (name.trim().to_string(), on))
                })
                .collect();
            return Sip::Custom(protections);
        }
        match status {
            "enabled" => Sip::Enabled,
            "disabled" => Sip::Disabled,
            other => Sip::Unknown(format!("`csrutil status` says {other:?}")),
        }
    }

    /// Whether `DYLD_INSERT_LIBRARIES` reaches Apple's own programs (SIP-protected platform
    /// binaries): `Some(false)` with SIP on, `Some(true)` with SIP off, `None` when capshim
    /// cannot tell (a custom configuration, or the status is unknown).
    pub fn dyld_variables_reach_apple_programs(&self) -> Option<bool> {
        match self {
            Sip::Enabled => Some(false),
            Sip::Disabled => Some(true),
            Sip::Custom(_) | Sip::Unknown(_) => None,
        }
    }

    /// Whether SIP's debugging restrictions are on (`CSR_ALLOW_TASK_FOR_PID` not allowed),
    /// which is when dyld honours a program's `CS_RESTRICT` flag (dyld-852.2
    /// `configureProcessRestrictions`): `Some(true)` with SIP on, `Some(false)` with SIP off
    /// or "Debugging Restrictions: disabled" in a custom configuration, `None` when unknown.
    pub fn debugging_restricted(&self) -> Option<bool> {
        match self {
            Sip::Enabled => Some(true),
            Sip::Disabled => Some(false),
            Sip::Custom(protections) => Some(
                protections
                    .iter()
                    .find(|(name, _)| name == "Debugging Restrictions")
                    .is_none_or(|(_, on)| *on),
            ),
            Sip::Unknown(_) => None,
        }
    }
}

impl fmt::Display for Sip {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Sip::Enabled => f.write_str("System Integrity Protection is enabled"),
            Sip::Disabled => f.write_str("System Integrity Protection is disabled"),
            Sip::Custom(protections) => {
                let off: Vec<&str> = protections
                    .iter()
                    .filter(|(_, on)| !on)
                    .map(|(name, _)| name.as_str())
                    .collect();
                write!(
                    f,
                    "System Integrity Protection is in a custom configuration (off: {})",
                    if off.is_empty() {
                        "none listed".to_string()
                    } else {
                        off.join(", ")
                    }
                )
            }
            Sip::Unknown(why) => write!(f, "System Integrity Protection status unknown ({why})"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_three_forms_of_csrutil_status() {
        assert_eq!(
            Sip::parse("System Integrity Protection status: enabled.\n"),
            Sip::Enabled
        );
        assert_eq!(
            Sip::parse("System Integrity Protection status: disabled.\n"),
            Sip::Disabled
        );
        let custom = Sip::parse(
            "System Integrity Protection status: unknown (Custom Configuration).\n\n\
             Configuration:\n\tApple Internal: disabled\n\tKext Signing: enabled\n\
             \tFilesystem Protections: enabled\n\tDebugging Restrictions: disabled\n\
             \tDTrace Restrictions: enabled\n\tNVRAM Protections: enabled\n\
             \tBaseSystem Verification: enabled\n\n\
             This is an unsupported configuration, likely to break in the future and leave your machine in an unknown state.\n",
        );
        let Sip::Custom(protections) = &custom else {
            panic!("{custom:?}")
        };
        assert_eq!(protections.len(), 7);
        assert!(protections.contains(&("Debugging Restrictions".into(), false)));
        assert!(protections.contains(&("Filesystem Protections".into(), true)));
        assert_eq!(
            custom.to_string(),
            "System Integrity Protection is in a custom configuration (off: Apple Internal, Debugging Restrictions)"
        );
        // The older wording of a custom configuration.
        assert!(matches!(
            Sip::parse(
                "System Integrity Protection status: enabled (Custom Configuration).\n\nConfiguration:\n\tKext Signing: disabled\n"
            ),
            Sip::Custom(p) if p == [("Kext Signing".to_string(), false)]
        ));
    }

    #[test]
    fn what_each_status_means_for_apple_programs() {
        assert_eq!(
            Sip::Enabled.dyld_variables_reach_apple_programs(),
            Some(false)
        );
        assert_eq!(
            Sip::Disabled.dyld_variables_reach_apple_programs(),
            Some(true)
        );
        assert_eq!(
            Sip::Custom(vec![]).dyld_variables_reach_apple_programs(),
            None
        );
        assert_eq!(
            Sip::Unknown("x".into()).dyld_variables_reach_apple_programs(),
            None
        );
    }

    #[test]
    fn debugging_restrictions_follow_the_configuration() {
        assert_eq!(Sip::Enabled.debugging_restricted(), Some(true));
        assert_eq!(Sip::Disabled.debugging_restricted(), Some(false));
        let custom = |on| Sip::Custom(vec![("Debugging Restrictions".into(), on)]);
        assert_eq!(custom(false).debugging_restricted(), Some(false));
        assert_eq!(custom(true).debugging_restricted(), Some(true));
        assert_eq!(
            Sip::Custom(vec![("Kext Signing".into(), false)]).debugging_restricted(),
            Some(true)
        );
        assert_eq!(Sip::Unknown("x".into()).debugging_restricted(), None);
    }

    #[test]
    fn anything_else_is_unknown_and_quoted() {
        let sip = Sip::parse("csrutil: command not found");
        assert!(
            matches!(&sip, Sip::Unknown(why) if why.contains("command not found")),
            "{sip:?}"
        );
        let sip = Sip::parse("System Integrity Protection status: sideways.");
        assert!(
            matches!(&sip, Sip::Unknown(why) if why.contains("sideways")),
            "{sip:?}"
        );
    }
}
