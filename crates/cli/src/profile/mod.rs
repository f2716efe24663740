//! The profile options shared by `explain`, `run`, `probe --compare` and `agent`, and how
//! they resolve to one validated [`Profile`].
//!
//! Resolution: a base (`--profile NAME` or `--profile-file FILE.toml`; without either,
//! `native` where the host chip is known and `apple9-64k`, with a note saying why, where it is
//! not), then `--family-max`, `--threadgroup-memory` and `--working-set` override its fields.
//! The result is checked by [`capshim_profile::env::parse`] over the variables the shim will
//! receive, so anything the CLI accepts the shim accepts too, and against the sanity limits
//! ([`capshim_profile::limits`]): a value beyond any known Apple GPU is refused unless
//! `--allow-beyond-hardware` is given.
//!
//! - [`chip`]: which chip the host is (`--cpu-brand` or `sysctl`).
//! - [`file`]: reading a `--profile-file` TOML file.
//! - [`sanity`]: applying the sanity limits to the options as given.
//! - [`settings`]: what a profile carries besides the shim's values: variables and tool
//!   arguments (a profile file's `[env]` and `[args]`).

pub mod chip;
mod file;
mod sanity;
pub mod settings;

use std::fmt;
use std::path::PathBuf;

use capshim_profile::named::{self, Lookup, NamedProfile};
use capshim_profile::number::parse_u64;
use capshim_profile::{Profile, env};
use clap::Args;
use thiserror::Error;

use crate::input_file::InputError;
use crate::platform::facts::{self, SystemFacts};
pub use chip::ChipMatch;

/// The most bytes a profile file may have: a few lines of TOML.
const PROFILE_FILE_MAX: u64 = 1 << 20;

/// The help heading of the profile options.
const HEADING: &str = "Profile options";

/// Profile options, flattened into every command that applies a profile.
#[derive(Debug, Clone, Default, PartialEq, Eq, Args)]
pub struct ProfileArgs {
    /// Named profile: native (the host chip's own answers; the default where the chip is
    /// known), apple9-64k (the first published experiment's; the default elsewhere) or stock;
    /// host is read as native (see `capshim profiles`)
    #[arg(long, value_name = "NAME", conflicts_with = "profile_file", help_heading = HEADING)]
    pub profile: Option<String>,

    /// Read the profile from a TOML file with the fields apple_family_max,
    /// max_threadgroup_memory and recommended_working_set_size (optional: name, an [env]
    /// table of variables for the workload, an [args] table of tool arguments: bench, common,
    /// command); a regular file or a shell's <(...), never a FIFO or device
    #[arg(long, value_name = "FILE.toml", help_heading = HEADING)]
    pub profile_file: Option<PathBuf>,

    /// Highest Apple MTLGPUFamily to answer true, 1001 (Apple1) to 1999, e.g. 1007 for Apple7;
    /// above 1010 (Apple10, the newest known) needs --allow-beyond-hardware
    #[arg(long, value_name = "N", value_parser = parse_number, help_heading = HEADING)]
    pub family_max: Option<u64>,

    /// Floor for maxThreadgroupMemoryLength, in bytes (decimal or 0x hex), e.g. 32768; above
    /// 65536 needs --allow-beyond-hardware
    #[arg(long, value_name = "BYTES", value_parser = parse_number, help_heading = HEADING)]
    pub threadgroup_memory: Option<u64>,

    /// Floor for recommendedMaxWorkingSetSize, in bytes (decimal or 0x hex); unchanged when
    /// absent; above this machine's memory needs --allow-beyond-hardware
    #[arg(long, value_name = "BYTES", value_parser = parse_number, help_heading = HEADING)]
    pub working_set: Option<u64>,

    /// The host chip's CPU brand, instead of `sysctl machdep.cpu.brand_string`, e.g.
    /// "Apple M1 Ultra (Virtual)": native's values, and the default becomes native; accepted
    /// with every profile
    #[arg(long, value_name = "STRING", help_heading = HEADING)]
    pub cpu_brand: Option<String>,

    /// Accept values beyond any known Apple GPU: a family above Apple10 (1010), threadgroup
    /// memory above 65536 bytes, a working set above this machine's physical memory
    #[arg(long, help_heading = HEADING)]
    pub allow_beyond_hardware: bool,
}

/// A profile resolved from the options, ready to explain or inject.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// What to call it in output: `stock`, `native`, `apple9-64k`, `custom`, or the file's `name`.
    pub name: String,
    /// The values; `None` for `stock`, which runs without the shim.
    pub profile: Option<Profile>,
    /// Where the values come from, in words.
    pub provenance: String,
    /// The host chip, when known (`--cpu-brand`, or this machine's brand).
    pub chip: Option<ChipMatch>,
    /// One-line notes for stderr: which default was used and why, `host` read as `native`.
    pub notes: Vec<String>,
    /// One-line warnings for stderr: values that change nothing, or beyond hardware but allowed.
    pub warnings: Vec<String>,
    /// Variables for the workload, from a profile file's `[env]` (empty otherwise).
    pub env: Vec<(String, String)>,
    /// Tool arguments, from a profile file's `[args]` (empty otherwise).
    pub args: settings::ToolArgs,
}

/// Why the profile options cannot be resolved.
#[derive(Debug, Error)]
pub enum ProfileArgsError {
    /// `--profile` names no known profile.
    #[error(
        "--profile {0:?} is not a known profile; use native, apple9-64k or stock (`capshim profiles` lists them), or give --family-max"
    )]
    UnknownName(String),
    /// Overrides were given together with `--profile stock`.
    #[error(
        "--profile stock runs without the shim, so {0} has nothing to change; drop it or pick another profile"
    )]
    StockWithOverrides(&'static str),
    /// `--profile native` (or `host`) where the host chip is not known.
    #[error(
        "cannot use --profile {asked}: the host chip is not known: {why}; pass the guest's brand with --cpu-brand \"Apple M1 Ultra (Virtual)\", or pick --profile apple9-64k"
    )]
    NativeUnknown {
        /// The profile as asked for: `native`, or `host (now called native)`.
        asked: String,
        /// Why the chip is not known.
        why: String,
    },
    /// The CPU brand given names no known chip.
    #[error(transparent)]
    UnknownBrand(#[from] named::UnknownBrand),
    /// The profile file cannot be read.
    #[error(
        "the profile file: {source}{}",
        // Where the path may simply be wrong; the other reasons carry their own advice.
        if matches!(source, InputError::Io { .. } | InputError::TooLarge { .. }) {
            "; check the path given to --profile-file"
        } else {
            ""
        }
    )]
    ReadFile {
        /// Why: the OS error, or not a regular file.
        source: crate::input_file::InputError,
    },
    /// The profile file is not valid profile TOML.
    #[error(
        "profile file {path} is not a valid profile: {message}; expected e.g.\n  apple_family_max = 1009\n  max_threadgroup_memory = 65536\n  # recommended_working_set_size = 17179869184"
    )]
    BadFile {
        /// The file.
        path: PathBuf,
        /// What is wrong, from the TOML parser or the field checks.
        message: String,
    },
    /// The values break the shim's own rules.
    #[error("{0}; the shim would refuse this profile and stay stock")]
    Refused(String),
    /// A value is beyond any known Apple GPU and `--allow-beyond-hardware` was not given.
    #[error("{0}")]
    BeyondHardware(String),
}

/// Accepts what the shim accepts: decimal digits or `0x` hex, no sign, spaces or suffix.
fn parse_number(text: &str) -> Result<u64, String> {
    parse_u64(text.as_bytes()).map_err(|e| e.to_string())
}

/// A partially known profile while options are applied on top of a base.
#[derive(Debug, Clone, Copy, Default)]
struct Fields {
    family_max: Option<u64>,
    threadgroup_memory: Option<u64>,
    working_set: Option<u64>,
}

impl From<Profile> for Fields {
    fn from(p: Profile) -> Fields {
        Fields {
            family_max: u64::try_from(p.apple_family_max).ok(),
            threadgroup_memory: Some(p.max_threadgroup_memory),
            working_set: p.recommended_working_set_size,
        }
    }
}

/// The base a profile starts from, before overrides.
struct Base {
    name: String,
    fields: Fields,
    provenance: String,
    /// The `--profile-file` it was read from, for messages.
    file: Option<PathBuf>,
    /// The file's `[env]`.
    env: Vec<(String, String)>,
    /// The file's `[args]`.
    args: settings::ToolArgs,
}

impl ProfileArgs {
    /// Whether any of the value overrides is present.
    fn override_flag(&self) -> Option<&'static str> {
        if self.family_max.is_some() {
            Some("--family-max")
        } else if self.threadgroup_memory.is_some() {
            Some("--threadgroup-memory")
        } else if self.working_set.is_some() {
            Some("--working-set")
        } else {
            None
        }
    }

    /// Resolves the options on this machine (`sysctl` for the CPU brand and memory) and prints
    /// the notes and warnings on stderr, one `capshim: note:` / `capshim: warning:` line each.
    ///
    /// # Errors
    /// [`ProfileArgsError`] names the option at fault and what to do.
    pub fn resolve(&self) -> Result<Resolved, ProfileArgsError> {
        let resolved = self.resolve_with(&facts::Real::default())?;
        for note in &resolved.notes {
            crate::term::note(note);
        }
        for warning in &resolved.warnings {
            crate::term::warning(warning);
        }
        Ok(resolved)
    }

    /// As [`ProfileArgs::resolve`], with the machine's facts given and nothing printed.
    ///
    /// # Errors
    /// As [`ProfileArgs::resolve`].
    pub fn resolve_with(&self, machine: &dyn SystemFacts) -> Result<Resolved, ProfileArgsError> {
        let chip = chip::find(self.cpu_brand.as_deref(), machine)?;
        let mut notes = Vec::new();
        let Some(base) = self.base(&chip, &mut notes)? else {
            if let Some(flag) = self.override_flag() {
                return Err(ProfileArgsError::StockWithOverrides(flag));
            }
            let stock = named::find(named::STOCK).expect("stock is a fixed profile");
            return Ok(Resolved {
                name: stock.name.to_string(),
                profile: None,
                provenance: stock.provenance.to_string(),
                chip: chip.ok(),
                notes,
                warnings: Vec::new(),
                env: Vec::new(),
                args: settings::ToolArgs::default(),
            });
        };

        let Base {
            mut name,
            mut fields,
            mut provenance,
            file,
            env,
            args,
        } = base;
        let mut changed = Vec::new();
        if let Some(v) = self.family_max {
            fields.family_max = Some(v);
            changed.push(format!("--family-max {v}"));
        }
        if let Some(v) = self.threadgroup_memory {
            fields.threadgroup_memory = Some(v);
            changed.push(format!("--threadgroup-memory {v}"));
        }
        if let Some(v) = self.working_set {
            fields.working_set = Some(v);
            changed.push(format!("--working-set {v}"));
        }
        if !changed.is_empty() {
            provenance = format!("{name} with {}; {name}: {provenance}", changed.join(", "));
            name = "custom".to_string();
        }

        let profile = validate(fields)?;
        let warnings = sanity::check(self, file.as_deref(), &profile, machine)?;
        Ok(Resolved {
            name,
            profile: Some(profile),
            provenance,
            chip: chip.ok(),
            notes,
            warnings,
            env,
            args,
        })
    }

    /// The base profile, or `None` for `stock`.
    fn base(
        &self,
        chip: &Result<ChipMatch, String>,
        notes: &mut Vec<String>,
    ) -> Result<Option<Base>, ProfileArgsError> {
        if let Some(path) = &self.profile_file {
            let text = crate::input_file::read_text(path, PROFILE_FILE_MAX, "a profile file")
                .map_err(|source| ProfileArgsError::ReadFile { source })?;
            let parsed = file::parse(path, &text)?;
            return Ok(Some(Base {
                name: parsed.name.unwrap_or_else(|| "custom".to_string()),
                fields: parsed.fields,
                provenance: format!("profile file {}", path.display()),
                file: Some(path.clone()),
                env: parsed.env,
                args: parsed.args,
            }));
        }
        let native = |chip: &ChipMatch| Base {
            name: named::NATIVE.to_string(),
            fields: Fields::from(named::native(chip.chip)),
            provenance: format!(
                "bare-metal {} profile, matched from CPU brand {:?} ({})",
                chip.chip.name, chip.brand, chip.matched_from
            ),
            file: None,
            env: Vec::new(),
            args: settings::ToolArgs::default(),
        };
        let fixed = |p: NamedProfile| {
            p.profile.map(|profile| Base {
                name: p.name.to_string(),
                fields: Fields::from(profile),
                provenance: p.provenance.to_string(),
                file: None,
                env: Vec::new(),
                args: settings::ToolArgs::default(),
            })
        };
        let Some(name) = &self.profile else {
            return Ok(Some(match chip {
                Ok(chip) => native(chip),
                Err(why) => {
                    // Say so only when the default supplies a value the user did not give.
                    if self.family_max.is_none() || self.threadgroup_memory.is_none() {
                        notes.push(named::fallback_note(why));
                    }
                    let p = named::find(named::APPLE9_64K).expect("apple9-64k is a fixed profile");
                    fixed(p).expect("apple9-64k has values")
                }
            }));
        };
        match named::lookup(name) {
            Lookup::Fixed(p) => Ok(fixed(p)),
            Lookup::Native { via_host_alias } => {
                if via_host_alias {
                    notes.push(named::HOST_ALIAS_NOTE.to_string());
                }
                match chip {
                    Ok(chip) => Ok(Some(native(chip))),
                    Err(why) => Err(ProfileArgsError::NativeUnknown {
                        asked: if via_host_alias {
                            format!("{name} (now called native)")
                        } else {
                            name.clone()
                        },
                        why: why.clone(),
                    }),
                }
            }
            Lookup::Unknown => Err(ProfileArgsError::UnknownName(name.clone())),
        }
    }
}

/// Checks the text of a profile file as `--profile-file` reads it (its fields, `[env]` and
/// `[args]`, and its values as the shim would take them), without the machine's sanity checks
/// (which depend on the chip): what `capshim report` asks of a tune bundle's recommendation.
/// `path` is only used in messages.
///
/// # Errors
/// [`ProfileArgsError::BadFile`] or [`ProfileArgsError::Refused`], as `--profile-file` would
/// refuse it.
pub fn check_file_text(path: &std::path::Path, text: &str) -> Result<(), ProfileArgsError> {
    validate(file::parse(path, text)?.fields).map(|_| ())
}

/// Checks the values with the shim's own environment parser.
fn validate(fields: Fields) -> Result<Profile, ProfileArgsError> {
    let mut vars: Vec<(&str, String)> = Vec::new();
    if let Some(v) = fields.family_max {
        vars.push((env::FAMILY_MAX.primary, v.to_string()));
    }
    if let Some(v) = fields.threadgroup_memory {
        vars.push((env::THREADGROUP_MEMORY.primary, v.to_string()));
    }
    if let Some(v) = fields.working_set {
        vars.push((env::WORKING_SET.primary, v.to_string()));
    }
    env::parse(vars)
        .config
        .map(|config| config.profile)
        .map_err(|e| match e {
            // Name the setting as the user gave it, not as the shim's variable.
            env::ConfigError::OutOfRange { error, .. } => {
                ProfileArgsError::Refused(format!("--family-max / apple_family_max: {error}"))
            }
            other => ProfileArgsError::Refused(other.to_string()),
        })
}

impl fmt::Display for Resolved {
    /// `apple9-64k: apple_family_max=1009 (Apple9) …`, or `stock: no shim`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.profile {
            Some(p) => write!(f, "{}: {p}", self.name),
            None => write!(f, "{}: no shim, the device's own answers", self.name),
        }
    }
}

#[cfg(test)]
mod tests;
