//! The shim's configuration, read from environment variables, fail-closed.
//!
//! [`parse`] is one pure function over the variables, so every rule is tested
//! without touching a real environment. The shim calls it once, in its
//! initializer. Names are `CAPSHIM_*`; the published shims' names for the same
//! settings (`LUME_METAL_*`, `TART_METAL_*`, `VEERTU_ANKA_GPU_*`) are read too, with
//! each shim's documented meaning, so that capshim drops into a setup made for any of
//! them. Any two names of one setting that disagree leave the process stock.
//!
//! - [`names`]: the variables, the published shims' names and meanings, with sources.
//! - [`error`]: why the process stays stock.

mod error;
pub mod names;

pub use error::ConfigError;
pub use names::{
    ALL, Alias, FAMILY_MAX, LOG, ONLY_PROCESS, OWNER_PID, PREFIXES, SCOPE, SHIMS, STATUS_FILE,
    Shim, THREADGROUP_MEMORY, Var, WORKING_SET,
};

use crate::limits::Field;
use crate::number::parse_u64;
use crate::profile::{Profile, ProfileError};

/// Whether child processes inherit the injection.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Scope {
    /// Children inherit the injection and the variables (as the published shims do).
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
    /// Nothing until a device class is hooked: then one line per hooked class (the first with
    /// the profile and any note on its values), one per hook that failed; and at load only a
    /// configuration that is malformed or conflicting. A process that never creates a device
    /// says nothing.
    #[default]
    Activation,
    /// As `Activation`, plus the load-time lines: the profile accepted, the notes on its values,
    /// and why a process stays stock (another process's child, `CAPSHIM_ONLY_PROCESS`).
    Verbose,
    /// As `Verbose`, plus one line per distinct query with original and returned answer.
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

/// The variable each profile value came from, for messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sources {
    /// The family maximum's variable.
    pub apple_family_max: &'static str,
    /// The threadgroup memory's variable; `None` when it is the default of the shim whose
    /// family variable was read.
    pub max_threadgroup_memory: Option<&'static str>,
    /// The working set's variable; `None` when unset.
    pub recommended_working_set_size: Option<&'static str>,
}

impl Sources {
    /// The variable that set `field`, if one did.
    pub fn name_of(&self, field: Field) -> Option<&'static str> {
        match field {
            Field::AppleFamilyMax => Some(self.apple_family_max),
            Field::ThreadgroupMemory => self.max_threadgroup_memory,
            Field::WorkingSet => self.recommended_working_set_size,
        }
    }
}

/// An accepted configuration: the shim activates with it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// The answers to raise.
    pub profile: Profile,
    /// Which variable each value came from.
    pub sources: Sources,
    /// Whether children inherit the shim.
    pub scope: Scope,
    /// Executable name the shim is limited to, if any.
    pub only_process: Option<Vec<u8>>,
}

/// The result of reading the environment: where to report, and whether to activate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Parsed {
    /// Reporting settings, valid even when `config` is an error.
    pub outputs: Outputs,
    /// The accepted configuration, or why the process stays stock.
    pub config: Result<Config, ConfigError>,
}

/// A numeric setting as given: the name that supplied it, its shim, and the number.
#[derive(Clone, Copy, Debug)]
struct Given {
    name: &'static str,
    shim: Shim,
    value: u64,
}

/// The raw values of one setting, one slot per name in [`Var::names`] order.
type Raw = Vec<Option<Vec<u8>>>;

/// Reads the shim's configuration from `(name, value)` pairs, e.g. a process environment.
///
/// Pure and total: any bytes are accepted as input and nothing panics. Names not in
/// [`ALL`] (under any shim's name) are ignored; an empty value counts as absent; a name given
/// twice counts once, with its first value, as libc's `getenv` reads it (an empty first value
/// too: the name is then absent). The configuration is refused (the process stays stock)
/// when the family maximum is absent, any value is malformed or out of range, or two names of
/// one setting are set to different numbers (the same number in two spellings agrees). Under
/// a published shim's name, a value means what that shim documents: a family maximum of 0
/// under Lume's or Tart's name asks for stock ([`ConfigError::Disabled`]), and a family
/// maximum set alone raises threadgroup memory to that shim's default (65536 for all of them).
pub fn parse<K, V>(vars: impl IntoIterator<Item = (K, V)>) -> Parsed
where
    K: AsRef<[u8]>,
    V: AsRef<[u8]>,
{
    // Each slot: `None` until the name is first seen, then its value (`None` when empty).
    let mut seen: Vec<Vec<Option<Option<Vec<u8>>>>> = ALL
        .iter()
        .map(|var| vec![None; var.names().count()])
        .collect();
    for (name, value) in vars {
        let (name, value) = (name.as_ref(), value.as_ref());
        for (slots, var) in seen.iter_mut().zip(ALL) {
            for (slot, alias) in slots.iter_mut().zip(var.names()) {
                // The first entry of a name is the one libc's getenv returns (and the published
                // shims read): a later duplicate changes nothing.
                if name == alias.name.as_bytes() && slot.is_none() {
                    *slot = Some((!value.is_empty()).then(|| value.to_vec()));
                }
            }
        }
    }
    let values: Vec<Raw> = seen
        .into_iter()
        .map(|slots| slots.into_iter().map(Option::flatten).collect())
        .collect();
    let raw = |var: Var| {
        let index = ALL.iter().position(|v| *v == var).unwrap_or(0);
        &values[index]
    };

    let log = raw(LOG)[0].as_deref().map(parse_log);
    let outputs = Outputs {
        log: match log {
            Some(Ok(mode)) => mode,
            _ => LogMode::Activation,
        },
        status_file: raw(STATUS_FILE)[0].clone(),
    };
    let config = (|| {
        if let Some(Err(error)) = log {
            return Err(error);
        }
        let family = number(FAMILY_MAX, raw(FAMILY_MAX))?;
        let threadgroup = number(THREADGROUP_MEMORY, raw(THREADGROUP_MEMORY))?;
        let working_set = number(WORKING_SET, raw(WORKING_SET))?;
        let scope = match raw(SCOPE)[0].as_deref() {
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
        let only_process = raw(ONLY_PROCESS)[0].clone();
        let Some(family) = family else {
            return Err(match threadgroup.or(working_set) {
                Some(set) => ConfigError::MissingFamily {
                    set: set.name,
                    family: names::name_in(FAMILY_MAX, set.shim).unwrap_or(FAMILY_MAX.primary),
                },
                None => ConfigError::NotConfigured,
            });
        };
        if family.value == 0 && family.shim.zero_family_is_stock {
            return Err(ConfigError::Disabled {
                var: family.name,
                shim: family.shim.name,
            });
        }
        let out_of_range = |error| ConfigError::OutOfRange {
            var: family.name,
            error,
        };
        let family_max = i64::try_from(family.value)
            .map_err(|_| out_of_range(ProfileError::FamilyOutOfRange(family.value.into())))?;
        let profile = Profile::new(
            family_max,
            threadgroup.map_or(family.shim.default_threadgroup_memory, |g| g.value),
            working_set.map(|g| g.value),
        )
        .map_err(out_of_range)?;
        Ok(Config {
            profile,
            sources: Sources {
                apple_family_max: family.name,
                max_threadgroup_memory: threadgroup.map(|g| g.name),
                recommended_working_set_size: working_set.map(|g| g.name),
            },
            scope,
            only_process,
        })
    })();
    Parsed { outputs, config }
}

fn parse_log(value: &[u8]) -> Result<LogMode, ConfigError> {
    match value {
        b"activation" => Ok(LogMode::Activation),
        b"off" => Ok(LogMode::Off),
        b"verbose" => Ok(LogMode::Verbose),
        b"queries" => Ok(LogMode::Queries),
        other => Err(malformed(
            LOG.primary,
            other,
            "expected activation, verbose, off or queries",
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

/// Parses one value under `alias`'s rules: capshim's number syntax, and under a shim that
/// reads `strtoull(…, 0)`, no leading 0 before another digit (octal to that shim).
fn parse_one(alias: Alias, bytes: &[u8]) -> Result<u64, ConfigError> {
    if alias.shim.reads_octal && bytes.len() > 1 && bytes[0] == b'0' && bytes[1].is_ascii_digit() {
        return Err(malformed(
            alias.name,
            bytes,
            format!(
                "a leading 0 makes it octal to {}'s shim (C strtoull) but decimal to capshim; write it without the leading 0, or in 0x hex",
                alias.shim.name
            ),
        ));
    }
    parse_u64(bytes).map_err(|e| malformed(alias.name, bytes, e.to_string()))
}

/// Parses a numeric setting from every name it is given under: malformed values first, then
/// any two that disagree. Returns the first name given (in [`Var::names`] order) and its value.
fn number(var: Var, raw: &Raw) -> Result<Option<Given>, ConfigError> {
    let mut given: Vec<(Given, &[u8])> = Vec::new();
    for (alias, bytes) in var.names().zip(raw) {
        if let Some(bytes) = bytes {
            let value = parse_one(alias, bytes)?;
            given.push((
                Given {
                    name: alias.name,
                    shim: alias.shim,
                    value,
                },
                bytes,
            ));
        }
    }
    let Some(&(first, first_bytes)) = given.first() else {
        return Ok(None);
    };
    if let Some(&(second, second_bytes)) = given.iter().find(|(g, _)| g.value != first.value) {
        return Err(ConfigError::Conflict {
            first: first.name,
            first_value: String::from_utf8_lossy(first_bytes).into_owned(),
            second: second.name,
            second_value: String::from_utf8_lossy(second_bytes).into_owned(),
        });
    }
    Ok(Some(first))
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

/// Whether an environment variable name belongs to capshim or a shim it stands in for (see
/// [`PREFIXES`]).
pub fn is_capshim_var(name: &[u8]) -> bool {
    PREFIXES
        .iter()
        .any(|prefix| name.starts_with(prefix.as_bytes()))
}

#[cfg(test)]
mod properties;
#[cfg(test)]
mod tests;
