//! The profile options shared by `explain`, `run`, `probe --compare` and `agent`, and how
//! they resolve to one validated [`Profile`].
//!
//! Resolution: a base (`--profile NAME` or `--profile-file FILE.toml`, default
//! `apple9-64k`), then `--family-max`, `--threadgroup-memory` and `--working-set`
//! override its fields. The result is checked by [`capshim_profile::env::parse`] over the
//! variables the shim will receive, so anything the CLI accepts the shim accepts too.
//!
//! - [`file`]: reading a `--profile-file` TOML file.

mod file;

use std::fmt;
use std::path::PathBuf;

use capshim_profile::named::{self, NamedProfile};
use capshim_profile::number::parse_u64;
use capshim_profile::{Profile, env};
use clap::Args;
use thiserror::Error;

use crate::platform;

/// The help heading of the profile options.
const HEADING: &str = "Profile options";

/// The profile used when no option names one: the published tested profile.
pub const DEFAULT_PROFILE: &str = "apple9-64k";

/// Profile options, flattened into every command that applies a profile.
#[derive(Debug, Clone, Default, PartialEq, Eq, Args)]
pub struct ProfileArgs {
    /// Named profile: stock, apple9-64k (default) or host (see `capshim profiles`)
    #[arg(long, value_name = "NAME", conflicts_with = "profile_file", help_heading = HEADING)]
    pub profile: Option<String>,

    /// Read the profile from a TOML file with the fields apple_family_max,
    /// max_threadgroup_memory and recommended_working_set_size (optional: name)
    #[arg(long, value_name = "FILE.toml", help_heading = HEADING)]
    pub profile_file: Option<PathBuf>,

    /// Highest Apple MTLGPUFamily to answer true, 1001 (Apple1) to 1999, e.g. 1007 for Apple7
    #[arg(long, value_name = "N", value_parser = parse_number, help_heading = HEADING)]
    pub family_max: Option<u64>,

    /// Floor for maxThreadgroupMemoryLength, in bytes (decimal or 0x hex), e.g. 65536
    #[arg(long, value_name = "BYTES", value_parser = parse_number, help_heading = HEADING)]
    pub threadgroup_memory: Option<u64>,

    /// Floor for recommendedMaxWorkingSetSize, in bytes (decimal or 0x hex); unchanged when absent
    #[arg(long, value_name = "BYTES", value_parser = parse_number, help_heading = HEADING)]
    pub working_set: Option<u64>,

    /// CPU brand to match for --profile host instead of `sysctl machdep.cpu.brand_string`,
    /// e.g. "Apple M1 Ultra (Virtual)"; implies --profile host
    #[arg(long, value_name = "STRING", conflicts_with = "profile_file", help_heading = HEADING)]
    pub cpu_brand: Option<String>,
}

/// A profile resolved from the options, ready to explain or inject.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// What to call it in output: `stock`, `apple9-64k`, `host`, `custom`, or the file's `name`.
    pub name: String,
    /// The values; `None` for `stock`, which runs without the shim.
    pub profile: Option<Profile>,
    /// Where the values come from, in words.
    pub provenance: String,
}

/// Why the profile options cannot be resolved.
#[derive(Debug, Error)]
pub enum ProfileArgsError {
    /// `--profile` names no known profile.
    #[error(
        "--profile {0:?} is not a known profile; use stock, apple9-64k or host (`capshim profiles` lists them), or give --family-max"
    )]
    UnknownName(String),
    /// Overrides were given together with `--profile stock`.
    #[error(
        "--profile stock runs without the shim, so {0} has nothing to change; drop it or pick another profile"
    )]
    StockWithOverrides(&'static str),
    /// `--cpu-brand` was given with a profile other than `host`.
    #[error("--cpu-brand only applies to --profile host, not --profile {0}; drop one of them")]
    BrandWithoutHost(String),
    /// The host chip could not be found.
    #[error(
        "cannot match --profile host: {0}; pass the guest's brand with --cpu-brand \"Apple M1 Ultra (Virtual)\""
    )]
    HostUndetected(String),
    /// The CPU brand names no known chip.
    #[error(transparent)]
    UnknownBrand(#[from] named::UnknownBrand),
    /// The profile file cannot be read.
    #[error("cannot read profile file {path}: {source}; check the path given to --profile-file")]
    ReadFile {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
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

    /// Resolves the options, detecting the host chip with `sysctl` when `--profile host`
    /// is asked without `--cpu-brand`.
    ///
    /// # Errors
    /// [`ProfileArgsError`] names the option at fault and what to do.
    pub fn resolve(&self) -> Result<Resolved, ProfileArgsError> {
        self.resolve_with(platform::cpu_brand)
    }

    /// As [`ProfileArgs::resolve`], with the CPU brand detector given (for tests).
    pub fn resolve_with(
        &self,
        detect_brand: impl FnOnce() -> Result<String, String>,
    ) -> Result<Resolved, ProfileArgsError> {
        let base_name = match (&self.profile, &self.cpu_brand) {
            (Some(name), Some(_)) if name != "host" => {
                return Err(ProfileArgsError::BrandWithoutHost(name.clone()));
            }
            (Some(name), _) => Some(name.as_str()),
            (None, Some(_)) => Some("host"),
            (None, None) => None,
        };

        let (mut name, fields, mut provenance) = if let Some(path) = &self.profile_file {
            let text =
                std::fs::read_to_string(path).map_err(|source| ProfileArgsError::ReadFile {
                    path: path.clone(),
                    source,
                })?;
            let (name, fields) = file::parse(path, &text)?;
            (
                name.unwrap_or_else(|| "custom".to_string()),
                fields,
                format!("profile file {}", path.display()),
            )
        } else {
            match base_name.unwrap_or(DEFAULT_PROFILE) {
                "host" => {
                    let (brand, how) = match &self.cpu_brand {
                        Some(brand) => (brand.clone(), "--cpu-brand"),
                        None => (
                            detect_brand().map_err(ProfileArgsError::HostUndetected)?,
                            "sysctl machdep.cpu.brand_string",
                        ),
                    };
                    let (profile, chip) = named::host(&brand)?;
                    (
                        "host".to_string(),
                        Fields::from(profile),
                        format!(
                            "bare-metal {chip} profile, matched from CPU brand {:?} ({how})",
                            brand.trim()
                        ),
                    )
                }
                other => {
                    let NamedProfile {
                        name,
                        provenance,
                        profile,
                        ..
                    } = named::find(other)
                        .ok_or_else(|| ProfileArgsError::UnknownName(other.to_string()))?;
                    let Some(profile) = profile else {
                        if let Some(flag) = self.override_flag() {
                            return Err(ProfileArgsError::StockWithOverrides(flag));
                        }
                        return Ok(Resolved {
                            name: name.to_string(),
                            profile: None,
                            provenance: provenance.to_string(),
                        });
                    };
                    (
                        name.to_string(),
                        Fields::from(profile),
                        provenance.to_string(),
                    )
                }
            }
        };

        let mut fields = fields;
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
        Ok(Resolved {
            name,
            profile: Some(profile),
            provenance,
        })
    }
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
mod tests {
    use super::*;

    fn no_sysctl() -> Result<String, String> {
        Err("no sysctl here".to_string())
    }

    fn resolve(args: ProfileArgs) -> Result<Resolved, ProfileArgsError> {
        args.resolve_with(no_sysctl)
    }

    #[test]
    fn default_is_the_published_profile() {
        let r = resolve(ProfileArgs::default()).unwrap();
        assert_eq!(r.name, "apple9-64k");
        assert_eq!(r.profile, Some(named::apple9_64k()));
    }

    #[test]
    fn stock_has_no_profile_and_refuses_overrides() {
        let args = ProfileArgs {
            profile: Some("stock".into()),
            ..Default::default()
        };
        assert_eq!(resolve(args.clone()).unwrap().profile, None);
        let err = resolve(ProfileArgs {
            threadgroup_memory: Some(1),
            ..args
        })
        .unwrap_err();
        assert!(err.to_string().contains("--threadgroup-memory"), "{err}");
    }

    #[test]
    fn cpu_brand_implies_host_and_detection_failure_says_what_to_do() {
        let r = resolve(ProfileArgs {
            cpu_brand: Some("Apple M2 Max (Virtual)".into()),
            ..Default::default()
        })
        .unwrap();
        assert_eq!(r.name, "host");
        assert_eq!(r.profile, Some(Profile::new(1008, 32768, None).unwrap()));
        assert!(r.provenance.contains("M2"), "{}", r.provenance);

        let err = resolve(ProfileArgs {
            profile: Some("host".into()),
            ..Default::default()
        })
        .unwrap_err();
        assert!(err.to_string().contains("--cpu-brand"), "{err}");

        let detected = ProfileArgs {
            profile: Some("host".into()),
            ..Default::default()
        }
        .resolve_with(|| Ok("Apple M5 (Virtual)\n".into()))
        .unwrap();
        assert_eq!(detected.profile.unwrap().apple_family_max, 1010);

        let err = resolve(ProfileArgs {
            cpu_brand: Some("Intel Xeon".into()),
            ..Default::default()
        })
        .unwrap_err();
        assert!(err.to_string().contains("apple9-64k"), "{err}");

        let err = resolve(ProfileArgs {
            profile: Some("apple9-64k".into()),
            cpu_brand: Some("Apple M1".into()),
            ..Default::default()
        })
        .unwrap_err();
        assert!(matches!(err, ProfileArgsError::BrandWithoutHost(_)));
    }

    #[test]
    fn overrides_make_a_custom_profile_checked_by_the_shim_rules() {
        let r = resolve(ProfileArgs {
            family_max: Some(1007),
            working_set: Some(1 << 34),
            ..Default::default()
        })
        .unwrap();
        assert_eq!(r.name, "custom");
        assert_eq!(
            r.profile,
            Some(Profile::new(1007, 65536, Some(1 << 34)).unwrap())
        );
        assert!(
            r.provenance.contains("--family-max 1007"),
            "{}",
            r.provenance
        );

        let err = resolve(ProfileArgs {
            family_max: Some(5001),
            ..Default::default()
        })
        .unwrap_err();
        assert!(err.to_string().contains("1001"), "{err}");
        assert!(matches!(
            resolve(ProfileArgs {
                profile: Some("apple10".into()),
                ..Default::default()
            }),
            Err(ProfileArgsError::UnknownName(_))
        ));
    }
}
