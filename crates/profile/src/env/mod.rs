//! The shim's configuration, read from environment variables, fail-closed.
//!
//! [`parse`] is one pure function over the variables, so every rule is tested
//! without touching a real environment. The shim calls it once, in its
//! initializer. Names are `CAPSHIM_*`; the published reference shim's
//! `LUME_METAL_*` names are accepted as aliases so existing LaunchAgents keep
//! working.

use std::fmt;

use crate::number::{NumberError, parse_u64};
use crate::profile::{Profile, ProfileError};

/// A setting's primary name and, where the reference shim had one, its alias.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Var {
    /// The `CAPSHIM_*` name.
    pub primary: &'static str,
    /// The reference shim's `LUME_METAL_*` name, if any.
    pub alias: Option<&'static str>,
}

/// Highest Apple family to answer true, 1001–1999. Required to activate.
pub const FAMILY_MAX: Var = Var {
    primary: "CAPSHIM_APPLE_FAMILY_MAX",
    alias: Some("LUME_METAL_APPLE_FAMILY_MAX"),
};
/// Threadgroup memory floor in bytes; default 65536.
pub const THREADGROUP_MEMORY: Var = Var {
    primary: "CAPSHIM_MAX_THREADGROUP_MEMORY",
    alias: Some("LUME_METAL_MAX_THREADGROUP_MEMORY"),
};
/// Working set floor in bytes; the working set is untouched when absent.
pub const WORKING_SET: Var = Var {
    primary: "CAPSHIM_RECOMMENDED_WORKING_SET_SIZE",
    alias: Some("LUME_METAL_RECOMMENDED_WORKING_SET_SIZE"),
};
/// `children` (default) or `process`.
pub const SCOPE: Var = Var {
    primary: "CAPSHIM_SCOPE",
    alias: None,
};
/// Activate only in a process whose executable name equals this.
pub const ONLY_PROCESS: Var = Var {
    primary: "CAPSHIM_ONLY_PROCESS",
    alias: None,
};
/// `activation` (default), `off` or `queries`.
pub const LOG: Var = Var {
    primary: "CAPSHIM_LOG",
    alias: None,
};
/// A file to which the shim appends one JSON object per event.
pub const STATUS_FILE: Var = Var {
    primary: "CAPSHIM_STATUS_FILE",
    alias: None,
};

/// Set by the shim itself, not by users: the pid it first activated in when it is limited to
/// one process (`CAPSHIM_SCOPE=process` or `CAPSHIM_ONLY_PROCESS`), so that an image the
/// process replaces itself with (a framework Python's launcher re-executing the interpreter)
/// counts as the same process and a child as another one. Launchers must not pass it on.
pub const OWNER_PID: &str = "CAPSHIM_OWNER_PID";

/// Every variable the shim reads, in the order the README lists them.
pub const ALL: [Var; 7] = [
    FAMILY_MAX,
    THREADGROUP_MEMORY,
    WORKING_SET,
    SCOPE,
    ONLY_PROCESS,
    LOG,
    STATUS_FILE,
];

/// Prefixes of the variables that belong to capshim; `CAPSHIM_SCOPE=process`
/// removes every variable with one of them so that children start stock.
pub const PREFIXES: [&str; 2] = ["CAPSHIM_", "LUME_METAL_"];

/// Whether child processes inherit the injection.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Scope {
    /// Children inherit the injection and the variables (as the reference shim does).
    #[default]
    Children,
    /// The shim removes itself and its variables from the environment, so children start stock.
    Process,
}

/// How much the shim writes to stderr.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub enum LogMode {
    /// Nothing, not even errors.
    Off,
    /// One line on activation, one per hooked class, one for each reason to stay stock.
    #[default]
    Activation,
    /// As `Activation`, plus one line per distinct query with original and returned answer.
    Queries,
}

/// Where the shim reports, known even when the configuration is refused, so that
/// the refusal itself can be reported.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Outputs {
    /// stderr verbosity; [`LogMode::Activation`] when `CAPSHIM_LOG` is absent or malformed.
    pub log: LogMode,
    /// `CAPSHIM_STATUS_FILE`, as raw bytes (a Unix path), when set and non-empty.
    pub status_file: Option<Vec<u8>>,
}

/// An accepted configuration: the shim activates with it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// The answers to raise.
    pub profile: Profile,
    /// Whether children inherit the shim.
    pub scope: Scope,
    /// Executable name the shim is limited to, if any.
    pub only_process: Option<Vec<u8>>,
}

/// Why the shim stays stock.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConfigError {
    /// No profile variable is set at all: the normal state of a process not meant to be shimmed.
    NotConfigured,
    /// A profile value is set but the required family maximum is not.
    MissingFamily {
        /// The variable that was set without it.
        set: &'static str,
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
    /// A primary name and its alias are both set, to different values.
    Conflict {
        /// The `CAPSHIM_*` name.
        primary: &'static str,
        /// Its value.
        primary_value: String,
        /// The `LUME_METAL_*` name.
        alias: &'static str,
        /// Its value.
        alias_value: String,
    },
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::NotConfigured => {
                write!(f, "not configured: {} is not set", FAMILY_MAX.primary)
            }
            ConfigError::MissingFamily { set } => write!(
                f,
                "{set} is set but {} is not; set it (e.g. 1009) to activate, or unset {set}",
                FAMILY_MAX.primary
            ),
            ConfigError::Malformed { var, value, why } => {
                write!(f, "{var}={:?} is malformed: {why}", clip(value))
            }
            ConfigError::OutOfRange { var, error } => write!(f, "{var}: {error}"),
            ConfigError::Conflict {
                primary,
                primary_value,
                alias,
                alias_value,
            } => write!(
                f,
                "{primary}={:?} and {alias}={:?} disagree; unset one of them",
                clip(primary_value),
                clip(alias_value)
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

/// The result of reading the environment: where to report, and whether to activate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Parsed {
    /// Reporting settings, valid even when `config` is an error.
    pub outputs: Outputs,
    /// The accepted configuration, or why the process stays stock.
    pub config: Result<Config, ConfigError>,
}

/// Reads the shim's configuration from `(name, value)` pairs, e.g. a process environment.
///
/// Pure and total: any bytes are accepted as input and nothing panics. Names
/// not listed in [`ALL`] (or their aliases) are ignored; an empty value counts
/// as absent. The configuration is refused (the process stays stock) when the
/// family maximum is absent, any value is malformed or out of range, or a
/// primary and its alias are both set to different values.
pub fn parse<K, V>(vars: impl IntoIterator<Item = (K, V)>) -> Parsed
where
    K: AsRef<[u8]>,
    V: AsRef<[u8]>,
{
    let mut values: [RawPair; ALL.len()] = Default::default();
    for (name, value) in vars {
        let (name, value) = (name.as_ref(), value.as_ref());
        if value.is_empty() {
            continue;
        }
        for (slot, var) in values.iter_mut().zip(ALL) {
            if name == var.primary.as_bytes() {
                slot.0 = Some(value.to_vec());
            } else if var.alias.is_some_and(|alias| name == alias.as_bytes()) {
                slot.1 = Some(value.to_vec());
            }
        }
    }
    let raw = |var: Var| {
        let index = ALL.iter().position(|v| *v == var).unwrap_or(0);
        &values[index]
    };

    let log_raw = &raw(LOG).0;
    let log = log_raw.as_deref().map(parse_log);
    let outputs = Outputs {
        log: match log {
            Some(Ok(mode)) => mode,
            _ => LogMode::Activation,
        },
        status_file: raw(STATUS_FILE).0.clone(),
    };
    let config = (|| {
        if let Some(Err(error)) = log {
            return Err(error);
        }
        let family = number(FAMILY_MAX, raw(FAMILY_MAX))?;
        let threadgroup = number(THREADGROUP_MEMORY, raw(THREADGROUP_MEMORY))?;
        let working_set = number(WORKING_SET, raw(WORKING_SET))?;
        let scope = match raw(SCOPE).0.as_deref() {
            None | Some(b"children") => Scope::Children,
            Some(b"process") => Scope::Process,
            Some(other) => {
                return Err(malformed(
                    SCOPE.primary,
                    other,
                    "expected children or process",
                ));
            }
        };
        let only_process = raw(ONLY_PROCESS).0.clone();
        let Some((family_var, family)) = family else {
            return Err(match (threadgroup, working_set) {
                (Some((var, _)), _) | (None, Some((var, _))) => {
                    ConfigError::MissingFamily { set: var }
                }
                (None, None) => ConfigError::NotConfigured,
            });
        };
        let family = i64::try_from(family).map_err(|_| ConfigError::OutOfRange {
            var: family_var,
            error: ProfileError::FamilyOutOfRange(family.into()),
        })?;
        let profile = Profile::new(
            family,
            threadgroup.map_or(Profile::DEFAULT_MAX_THREADGROUP_MEMORY, |(_, v)| v),
            working_set.map(|(_, v)| v),
        )
        .map_err(|error| ConfigError::OutOfRange {
            var: family_var,
            error,
        })?;
        Ok(Config {
            profile,
            scope,
            only_process,
        })
    })();
    Parsed { outputs, config }
}

/// A setting's raw values under its primary name and its alias.
type RawPair = (Option<Vec<u8>>, Option<Vec<u8>>);

fn parse_log(value: &[u8]) -> Result<LogMode, ConfigError> {
    match value {
        b"activation" => Ok(LogMode::Activation),
        b"off" => Ok(LogMode::Off),
        b"queries" => Ok(LogMode::Queries),
        other => Err(malformed(
            LOG.primary,
            other,
            "expected activation, off or queries",
        )),
    }
}

fn malformed(var: &'static str, value: &[u8], why: impl Into<String>) -> ConfigError {
    ConfigError::Malformed {
        var,
        value: String::from_utf8_lossy(value).into_owned(),
        why: why.into(),
    }
}

/// Parses a numeric setting from its primary and alias values, returning the
/// name that supplied it and the value.
fn number(
    var: Var,
    (primary, alias): &RawPair,
) -> Result<Option<(&'static str, u64)>, ConfigError> {
    let alias_name = var.alias.unwrap_or(var.primary);
    let parse_one = |name: &'static str, bytes: &[u8]| {
        parse_u64(bytes).map_err(|e: NumberError| malformed(name, bytes, e.to_string()))
    };
    let primary_value = primary
        .as_deref()
        .map(|b| parse_one(var.primary, b))
        .transpose()?;
    let alias_value = alias
        .as_deref()
        .map(|b| parse_one(alias_name, b))
        .transpose()?;
    match (primary_value, alias_value) {
        (Some(p), Some(a)) if p != a => Err(ConfigError::Conflict {
            primary: var.primary,
            primary_value: String::from_utf8_lossy(primary.as_deref().unwrap_or_default())
                .into_owned(),
            alias: alias_name,
            alias_value: String::from_utf8_lossy(alias.as_deref().unwrap_or_default()).into_owned(),
        }),
        (Some(p), _) => Ok(Some((var.primary, p))),
        (None, Some(a)) => Ok(Some((alias_name, a))),
        (None, None) => Ok(None),
    }
}

/// The variables that configure the shim with `profile`, primary names only, values in
/// decimal: what [`parse`] reads back as the same profile. The working set variable appears
/// only when the profile sets one.
pub fn vars_for(profile: &Profile) -> Vec<(&'static str, String)> {
    let mut vars = vec![
        (FAMILY_MAX.primary, profile.apple_family_max.to_string()),
        (
            THREADGROUP_MEMORY.primary,
            profile.max_threadgroup_memory.to_string(),
        ),
    ];
    if let Some(bytes) = profile.recommended_working_set_size {
        vars.push((WORKING_SET.primary, bytes.to_string()));
    }
    vars
}

/// Whether an environment variable name belongs to capshim (see [`PREFIXES`]).
pub fn is_capshim_var(name: &[u8]) -> bool {
    PREFIXES
        .iter()
        .any(|prefix| name.starts_with(prefix.as_bytes()))
}

#[cfg(test)]
mod tests;
