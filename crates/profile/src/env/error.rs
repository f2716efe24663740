//! Why the shim stays stock.

use std::fmt;

use super::names::FAMILY_MAX;
use crate::profile::ProfileError;

/// Why the shim stays stock.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConfigError {
    /// No profile variable is set at all: the normal state of a process not meant to be shimmed.
    NotConfigured,
    /// The family maximum is 0 under a name whose shim documents 0 as "stay stock" (Lume,
    /// Tart): asked for, so said only in the status file.
    Disabled {
        /// The variable, e.g. `TART_METAL_APPLE_FAMILY_MAX`.
        var: &'static str,
        /// The shim that documents 0 so, e.g. `Tart`.
        shim: &'static str,
    },
    /// A profile value is set but the required family maximum is not.
    MissingFamily {
        /// The variable that was set without it.
        set: &'static str,
        /// The family variable of the same shim.
        family: &'static str,
    },
    /// A value does not parse.
    Malformed {
        /// The variable's name as it appeared in the environment.
        var: &'static str,
        /// The value, lossily decoded for display.
        value: String,
        /// The rule it broke.
        why: String,
    },
    /// The family maximum parsed but is out of range.
    OutOfRange {
        /// The variable's name as it appeared in the environment.
        var: &'static str,
        /// Why.
        error: ProfileError,
    },
    /// Two names of one setting are both set, to different numbers.
    Conflict {
        /// The first name, in the order capshim, Lume, Tart, Anka.
        first: &'static str,
        /// Its value.
        first_value: String,
        /// The second name.
        second: &'static str,
        /// Its value.
        second_value: String,
    },
}

impl ConfigError {
    /// Whether the shim should stay stock without a stderr line (only a status-file event):
    /// nothing was asked for, or stock was asked for.
    pub fn is_quiet(&self) -> bool {
        matches!(
            self,
            ConfigError::NotConfigured | ConfigError::Disabled { .. }
        )
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::NotConfigured => {
                write!(f, "not configured: {} is not set", FAMILY_MAX.primary)
            }
            ConfigError::Disabled { var, shim } => write!(
                f,
                "{var}=0: {shim} documents 0 as stock capabilities, so this process stays stock"
            ),
            ConfigError::MissingFamily { set, family } => write!(
                f,
                "{set} is set but {family} is not; set it (e.g. 1009) to activate, or unset {set}"
            ),
            ConfigError::Malformed { var, value, why } => {
                write!(f, "{var}={:?} is malformed: {why}", clip(value))
            }
            ConfigError::OutOfRange { var, error } => write!(f, "{var}: {error}"),
            ConfigError::Conflict {
                first,
                first_value,
                second,
                second_value,
            } => write!(
                f,
                "{first}={:?} and {second}={:?} disagree; unset one of them",
                clip(first_value),
                clip(second_value)
            ),
        }
    }
}

impl std::error::Error for ConfigError {}

/// A value as messages show it: at most 64 characters, then `…`, so that one stray huge
/// variable cannot flood a log line.
fn clip(value: &str) -> String {
    match value.char_indices().nth(64) {
        Some((cut, _)) => format!("{}…", &value[..cut]),
        None => value.to_string(),
    }
}
