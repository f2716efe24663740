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

/// Whether an environment variable name belongs to capshim (see [`PREFIXES`]).
pub fn is_capshim_var(name: &[u8]) -> bool {
    PREFIXES
        .iter()
        .any(|prefix| name.starts_with(prefix.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn config(vars: &[(&str, &str)]) -> Result<Config, ConfigError> {
        parse(vars.iter().map(|(k, v)| (k.as_bytes(), v.as_bytes()))).config
    }

    #[test]
    fn family_alone_activates_with_defaults() {
        let c = config(&[("CAPSHIM_APPLE_FAMILY_MAX", "1009")]).unwrap();
        assert_eq!(c.profile, Profile::new(1009, 65536, None).unwrap());
        assert_eq!(c.scope, Scope::Children);
        assert_eq!(c.only_process, None);
    }

    #[test]
    fn every_setting_is_read() {
        let parsed = parse([
            ("CAPSHIM_APPLE_FAMILY_MAX", "0x3EF"),
            ("CAPSHIM_MAX_THREADGROUP_MEMORY", "32768"),
            ("CAPSHIM_RECOMMENDED_WORKING_SET_SIZE", "17179869184"),
            ("CAPSHIM_SCOPE", "process"),
            ("CAPSHIM_ONLY_PROCESS", "llama-bench"),
            ("CAPSHIM_LOG", "queries"),
            ("CAPSHIM_STATUS_FILE", "/tmp/s.jsonl"),
            ("PATH", "/usr/bin"),
        ]);
        assert_eq!(parsed.outputs.log, LogMode::Queries);
        assert_eq!(
            parsed.outputs.status_file.as_deref(),
            Some(&b"/tmp/s.jsonl"[..])
        );
        let c = parsed.config.unwrap();
        assert_eq!(
            c.profile,
            Profile::new(1007, 32768, Some(17179869184)).unwrap()
        );
        assert_eq!(c.scope, Scope::Process);
        assert_eq!(c.only_process.as_deref(), Some(&b"llama-bench"[..]));
    }

    #[test]
    fn absent_and_empty_mean_not_configured() {
        assert_eq!(config(&[]), Err(ConfigError::NotConfigured));
        assert_eq!(
            config(&[("CAPSHIM_APPLE_FAMILY_MAX", "")]),
            Err(ConfigError::NotConfigured)
        );
        assert_eq!(
            config(&[("CAPSHIM_MAX_THREADGROUP_MEMORY", "65536")]),
            Err(ConfigError::MissingFamily {
                set: "CAPSHIM_MAX_THREADGROUP_MEMORY"
            })
        );
    }

    #[test]
    fn malformed_values_fail_closed_naming_the_variable() {
        for (var, value) in [
            ("CAPSHIM_APPLE_FAMILY_MAX", "+1009"),
            ("CAPSHIM_APPLE_FAMILY_MAX", "1009 "),
            ("CAPSHIM_APPLE_FAMILY_MAX", "Apple9"),
            ("CAPSHIM_MAX_THREADGROUP_MEMORY", "64k"),
            ("CAPSHIM_MAX_THREADGROUP_MEMORY", "0x"),
            (
                "CAPSHIM_RECOMMENDED_WORKING_SET_SIZE",
                "99999999999999999999",
            ),
            ("LUME_METAL_MAX_THREADGROUP_MEMORY", "-1"),
            ("CAPSHIM_SCOPE", "Process"),
            ("CAPSHIM_LOG", "verbose"),
        ] {
            let mut vars = vec![(var, value)];
            if var != "CAPSHIM_APPLE_FAMILY_MAX" {
                vars.push(("CAPSHIM_APPLE_FAMILY_MAX", "1009"));
            }
            match config(&vars) {
                Err(ConfigError::Malformed {
                    var: named,
                    value: shown,
                    ..
                }) => {
                    assert_eq!((named, shown.as_str()), (var, value));
                }
                other => panic!("{var}={value}: {other:?}"),
            }
        }
    }

    #[test]
    fn out_of_range_family_fails_closed() {
        let err = config(&[("CAPSHIM_APPLE_FAMILY_MAX", "18446744073709551615")]).unwrap_err();
        assert!(
            err.to_string()
                .contains("maximum 18446744073709551615 is outside"),
            "{err}"
        );
        for value in [
            "1000",
            "2000",
            "5001",
            "0",
            "18446744073709551615",
            "9223372036854775808",
        ] {
            assert!(
                matches!(
                    config(&[("CAPSHIM_APPLE_FAMILY_MAX", value)]),
                    Err(ConfigError::OutOfRange { .. })
                ),
                "{value}"
            );
        }
    }

    #[test]
    fn aliases_work_and_conflicts_fail_closed() {
        let c = config(&[
            ("LUME_METAL_APPLE_FAMILY_MAX", "1009"),
            ("LUME_METAL_MAX_THREADGROUP_MEMORY", "65536"),
        ])
        .unwrap();
        assert_eq!(c.profile.apple_family_max, 1009);
        // The same number in two spellings is no conflict.
        assert!(
            config(&[
                ("CAPSHIM_APPLE_FAMILY_MAX", "1009"),
                ("LUME_METAL_APPLE_FAMILY_MAX", "0x3f1")
            ])
            .is_ok()
        );
        let err = config(&[
            ("CAPSHIM_APPLE_FAMILY_MAX", "1009"),
            ("LUME_METAL_APPLE_FAMILY_MAX", "1007"),
        ])
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "CAPSHIM_APPLE_FAMILY_MAX=\"1009\" and LUME_METAL_APPLE_FAMILY_MAX=\"1007\" disagree; unset one of them"
        );
        let err = config(&[("LUME_METAL_APPLE_FAMILY_MAX", "2002")]).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("LUME_METAL_APPLE_FAMILY_MAX: Apple family maximum 2002"),
            "{err}"
        );
    }

    #[test]
    fn huge_values_are_clipped_in_messages() {
        let huge = "9".repeat(100_000);
        let err = config(&[("CAPSHIM_APPLE_FAMILY_MAX", &huge)]).unwrap_err();
        let shown = err.to_string();
        assert!(shown.len() < 200, "{} bytes", shown.len());
        assert!(
            shown.contains(&format!("\"{}…\"", "9".repeat(64))),
            "{shown}"
        );
    }

    #[test]
    fn a_malformed_log_mode_still_logs_the_refusal() {
        let parsed = parse([
            ("CAPSHIM_APPLE_FAMILY_MAX", "1009"),
            ("CAPSHIM_LOG", "loud"),
        ]);
        assert_eq!(parsed.outputs.log, LogMode::Activation);
        assert!(parsed.config.is_err());
    }

    #[test]
    fn capshim_variables_are_recognised_by_prefix() {
        assert!(is_capshim_var(b"CAPSHIM_LOG"));
        assert!(is_capshim_var(b"LUME_METAL_APPLE_FAMILY_MAX"));
        assert!(!is_capshim_var(b"LD_PRELOAD"));
        assert!(!is_capshim_var(b"CAPSHIMX"));
    }

    proptest! {
        #[test]
        fn never_panics_on_arbitrary_bytes(vars in proptest::collection::vec(
            (prop_oneof![
                Just(b"CAPSHIM_APPLE_FAMILY_MAX".to_vec()),
                Just(b"LUME_METAL_APPLE_FAMILY_MAX".to_vec()),
                Just(b"CAPSHIM_MAX_THREADGROUP_MEMORY".to_vec()),
                Just(b"CAPSHIM_RECOMMENDED_WORKING_SET_SIZE".to_vec()),
                Just(b"CAPSHIM_SCOPE".to_vec()),
                Just(b"CAPSHIM_LOG".to_vec()),
                Just(b"CAPSHIM_STATUS_FILE".to_vec()),
                proptest::collection::vec(any::<u8>(), 0..40),
            ], proptest::collection::vec(any::<u8>(), 0..40)),
            0..8,
        )) {
            let parsed = parse(vars);
            if let Ok(c) = parsed.config {
                prop_assert!((1001..=1999).contains(&c.profile.apple_family_max));
            }
        }

        #[test]
        fn any_valid_family_round_trips(family in 1001i64..=1999, tg in any::<u64>()) {
            let p = Profile::new(family, tg, None).unwrap();
            let c = parse(p.to_env()).config.unwrap();
            prop_assert_eq!(c.profile, p);
        }
    }
}
