//! Arms: the configurations `capshim bench` and `capshim verify` compare, one syntax for both.
//!
//! An arm is a label plus a profile (a named profile, a profile file or explicit values, as
//! `capshim run` takes them) plus, optionally, environment variables for llama.cpp in that arm
//! only. On the command line each is `--arm [LABEL=]ITEM[,ITEM...]` (`--profile` is the same
//! option: `--profile again=stock` and `--profile apple9-64k` keep working), for example
//! `--arm apple9-nobf16=apple9-64k,GGML_METAL_BF16_DISABLE=1`.
//!
//! The arm `stock` (no shim) always runs first; `host` is reserved for the bare-metal
//! baseline. Profiles are looked up through [`crate::profile::ProfileArgs`], exactly as
//! `run` and `explain` look them up.
//!
//! - [`spec`]: the grammar of one arm.

pub mod spec;

use std::cell::Cell;
use std::path::Path;

use capshim_profile::Profile;
use serde::Serialize;

use crate::analysis::Role;
use crate::launch::environment::{EnvChange, arm_env};
use crate::profile::{DEFAULT_PROFILE, ProfileArgs, ProfileArgsError};

pub use spec::Spec;

/// The label of the arm that always runs, without the shim.
pub const STOCK: &str = "stock";

/// Labels no arm may take in any command: `host` names the bare-metal baseline (`bench
/// --baseline`, `report --host`, `percent_of_host`).
pub const RESERVED: [&str; 1] = ["host"];

/// One arm to run.
#[derive(Clone, Debug, Serialize)]
pub struct Arm {
    /// Its label: a column of tables, and the stem of its raw files.
    pub name: String,
    /// The profile it runs with, as the profile lookup names it (`stock`, `apple9-64k`,
    /// `custom`, a profile file's `name`...).
    pub profile_name: String,
    /// The profile's values; `None` runs without the shim.
    pub profile: Option<Profile>,
    /// Stock or other.
    pub role: Role,
    /// Environment variables for this arm's processes, on top of the shim's (a JSON object).
    #[serde(serialize_with = "crate::launch::environment::pairs_as_object")]
    pub env: Vec<(String, String)>,
    /// Where the profile's values come from, in words.
    pub provenance: String,
}

impl Arm {
    /// The always-run stock arm.
    pub fn stock() -> Arm {
        Arm {
            name: STOCK.to_string(),
            profile_name: STOCK.to_string(),
            profile: None,
            role: Role::Stock,
            env: Vec::new(),
            provenance: "no shim: the device's own answers".to_string(),
        }
    }

    /// The environment change for one of this arm's processes: capshim's own settings and the
    /// injection variable removed, then (with a profile) the shim's variables, its status file
    /// and the injection of `dylib`, then the arm's own variables.
    pub fn env_change(
        &self,
        dylib: Option<&Path>,
        status_file: &Path,
        inherited: impl Iterator<Item = String>,
    ) -> EnvChange {
        let mut change = arm_env(self.profile.as_ref(), dylib, status_file, inherited);
        change.set.extend(self.env.iter().cloned());
        change
    }
}

/// Why the arms cannot be built.
#[derive(Debug, thiserror::Error)]
pub enum ArmError {
    /// The arm's text does not follow the grammar.
    #[error(
        "arm {spec:?}: {problem}; write an arm as [LABEL=]ITEM[,ITEM...], e.g. --arm \
         apple9-nobf16=apple9-64k,GGML_METAL_BF16_DISABLE=1"
    )]
    Syntax {
        /// The arm as given.
        spec: String,
        /// What is wrong.
        problem: String,
    },
    /// The label cannot name files.
    #[error(
        "arm {spec:?}: the label {label:?} must be 1 to 64 letters, digits, '.', '_' or '-', not \
         starting with '.' or '-' (it names the arm's raw files); e.g. --profile again=stock"
    )]
    BadLabel {
        /// The arm as given.
        spec: String,
        /// The label.
        label: String,
    },
    /// The label is reserved.
    #[error(
        "arm {spec:?}: the label {label:?} is reserved ({why}); give the arm another label, e.g. \
         --profile {label}-arm={}", name.as_deref().unwrap_or("apple9-64k")
    )]
    Reserved {
        /// The arm as given.
        spec: String,
        /// The label.
        label: String,
        /// What it is reserved for.
        why: &'static str,
        /// The profile name the arm gave, for the suggestion.
        name: Option<String>,
    },
    /// Two arms share a label.
    #[error(
        "arm {spec:?}: an arm named {label:?} already exists{}; name it with LABEL=..., e.g. \
         --profile {label}-2={}",
        if label == STOCK { " (the stock arm always runs)" } else { "" },
        name.as_deref().unwrap_or("...")
    )]
    Duplicate {
        /// The arm as given.
        spec: String,
        /// The label.
        label: String,
        /// The profile name the arm gave, for the suggestion.
        name: Option<String>,
    },
    /// The profile cannot be resolved.
    #[error("arm {label:?}: {source}")]
    Profile {
        /// The arm's label.
        label: String,
        /// Why.
        source: ProfileArgsError,
    },
    /// The CPU brand names no chip the host-matched profile knows.
    #[error(
        "arm {label:?}: {problem}; give the host's brand with --cpu-brand \"Apple M1 Ultra (Virtual)\", \
         or use a fixed profile (e.g. --profile {label}=apple9-64k) or explicit values \
         (--arm {label}=family-max=N,threadgroup-memory=BYTES)"
    )]
    Brand {
        /// The arm's label.
        label: String,
        /// What is wrong with the brand.
        problem: String,
    },
    /// `--cpu-brand` was given but no arm matches the host's chip.
    #[error("{0}")]
    BrandUnused(ProfileArgsError),
}

impl ArmError {
    /// Whether this is a mistake in the command line itself (exit code 2), rather than a
    /// profile that cannot be read or matched (exit code 1).
    pub fn is_usage(&self) -> bool {
        match self {
            ArmError::Profile { source, .. } => matches!(
                source,
                ProfileArgsError::UnknownName(_) | ProfileArgsError::StockWithOverrides(_)
            ),
            ArmError::Brand { .. } | ArmError::BrandUnused(_) => false,
            _ => true,
        }
    }
}

/// Builds the arms: `stock` first, then one per spec in the order given (`default`, a profile
/// name, when there are none; no others when `default` is `None`). `reserved` lists labels
/// beyond [`RESERVED`] this command keeps for itself, with why. `cpu_brand` is matched by arms
/// of the host-matched profile instead of this machine's (`sysctl machdep.cpu.brand_string`).
///
/// # Errors
/// [`ArmError`] naming the arm at fault and the fix.
pub fn resolve(
    specs: &[String],
    default: Option<&str>,
    reserved: &[(&str, &'static str)],
    cpu_brand: Option<&str>,
) -> Result<Vec<Arm>, ArmError> {
    let texts: Vec<String> = if specs.is_empty() {
        default.map(str::to_string).into_iter().collect()
    } else {
        specs.to_vec()
    };
    let mut arms = vec![Arm::stock()];
    let brand_used = Cell::new(false);
    let mut brand_refusal = None;
    for text in &texts {
        let spec = spec::parse(text)?;
        let why = RESERVED
            .contains(&spec.label.as_str())
            .then_some("it names the bare-metal baseline")
            .or_else(|| {
                reserved
                    .iter()
                    .find(|(label, _)| *label == spec.label)
                    .map(|(_, why)| *why)
            });
        if let Some(why) = why {
            return Err(ArmError::Reserved {
                spec: spec.text.clone(),
                label: spec.label.clone(),
                why,
                name: spec.name.clone(),
            });
        }
        if arms.iter().any(|a| a.name == spec.label) {
            return Err(ArmError::Duplicate {
                spec: spec.text.clone(),
                label: spec.label.clone(),
                name: spec.name.clone(),
            });
        }
        let arm = resolve_one(&spec, cpu_brand, &brand_used, &mut brand_refusal)?;
        arms.push(arm);
    }
    if cpu_brand.is_some() && !brand_used.get() {
        // The profile lookup words this refusal, naming the host-matched profile itself.
        let refusal = brand_refusal.unwrap_or_else(|| {
            ProfileArgsError::BrandWithoutHost(default.unwrap_or(DEFAULT_PROFILE).to_string())
        });
        return Err(ArmError::BrandUnused(refusal));
    }
    Ok(arms)
}

/// Resolves one arm's profile through the profile lookup; `cpu_brand` is offered to a named
/// profile, which refuses it unless it matches the host's chip.
fn resolve_one(
    spec: &Spec,
    cpu_brand: Option<&str>,
    brand_used: &Cell<bool>,
    brand_refusal: &mut Option<ProfileArgsError>,
) -> Result<Arm, ArmError> {
    let args = ProfileArgs {
        profile: spec.name.clone(),
        profile_file: spec.file.clone(),
        family_max: spec.family_max,
        threadgroup_memory: spec.threadgroup_memory,
        working_set: spec.working_set,
        cpu_brand: None,
    };
    let failed = |source| match source {
        ProfileArgsError::UnknownBrand(brand) => ArmError::Brand {
            label: spec.label.clone(),
            problem: brand.problem(),
        },
        source => ArmError::Profile {
            label: spec.label.clone(),
            source,
        },
    };
    let mut resolved = None;
    if let (Some(brand), Some(_)) = (cpu_brand, &spec.name) {
        let with_brand = ProfileArgs {
            cpu_brand: Some(brand.to_string()),
            ..args.clone()
        };
        match with_brand.resolve() {
            Err(refusal @ ProfileArgsError::BrandWithoutHost(_)) => {
                brand_refusal.get_or_insert(refusal);
            }
            other => {
                brand_used.set(true);
                resolved = Some(other.map_err(failed)?);
            }
        }
    }
    let resolved = match resolved {
        Some(r) => r,
        None => args.resolve().map_err(failed)?,
    };
    Ok(Arm {
        name: spec.label.clone(),
        profile_name: resolved.name,
        profile: resolved.profile,
        role: Role::Other,
        env: spec.env.clone(),
        provenance: resolved.provenance,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arms(specs: &[&str]) -> Result<Vec<Arm>, ArmError> {
        let specs: Vec<String> = specs.iter().map(|s| s.to_string()).collect();
        resolve(&specs, Some(DEFAULT_PROFILE), &[], None)
    }

    #[test]
    fn stock_runs_first_and_the_default_fills_in() {
        let a = arms(&[]).unwrap();
        let names: Vec<&str> = a.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(names, ["stock", DEFAULT_PROFILE]);
        assert!(a[0].profile.is_none() && a[0].role == Role::Stock);
        assert_eq!(a[1].profile, Some(capshim_profile::named::apple9_64k()));
        let only = resolve(&[], None, &[], None).unwrap();
        assert_eq!(only.len(), 1);
    }

    #[test]
    fn an_arm_carries_its_environment_after_the_shims() {
        let a = arms(&["again=stock", "nobf16=apple9-64k,GGML_METAL_BF16_DISABLE=1"]).unwrap();
        assert_eq!(a[1].profile, None);
        assert_eq!(a[1].role, Role::Other);
        let change = a[2].env_change(
            Some(Path::new("/x/libcapshim.so")),
            Path::new("/b/s.jsonl"),
            ["CAPSHIM_LOG".to_string(), "PATH".to_string()].into_iter(),
        );
        assert_eq!(
            change.set.last().unwrap(),
            &("GGML_METAL_BF16_DISABLE".to_string(), "1".to_string())
        );
        assert!(
            change
                .set
                .iter()
                .any(|(k, _)| k == "CAPSHIM_APPLE_FAMILY_MAX")
        );
        assert_eq!(change.removed, ["CAPSHIM_LOG"]);
        let json = serde_json::to_value(&a[2]).unwrap();
        assert_eq!(json["env"]["GGML_METAL_BF16_DISABLE"], "1");
        assert_eq!(json["profile_name"], "apple9-64k");
        // Explicit values make a custom profile, checked by the shim's own rules.
        let a = arms(&["a7=family-max=1007,threadgroup-memory=32768"]).unwrap();
        assert_eq!(a[1].profile_name, "custom");
        assert_eq!(a[1].profile.unwrap().apple_family_max, 1007);
    }

    #[test]
    fn duplicates_and_reserved_labels_are_usage_errors() {
        for (specs, says) in [
            (&["stock"][..], "--profile stock-2=stock"),
            (
                &["a=stock", "a=apple9-64k"][..],
                "an arm named \"a\" already exists",
            ),
            (&["host=apple9-64k"][..], "is reserved"),
        ] {
            let e = arms(specs).unwrap_err();
            assert!(e.is_usage(), "{e}");
            assert!(e.to_string().contains(says), "{specs:?}: {e}");
        }
        let e = resolve(
            &["base=stock".into()],
            None,
            &[("base", "the saved base")],
            None,
        )
        .unwrap_err();
        assert!(e.to_string().contains("reserved (the saved base)"), "{e}");
        let e = arms(&["x=apple10"]).unwrap_err();
        assert!(e.is_usage(), "{e}");
        assert!(e.to_string().contains("arm \"x\""), "{e}");
    }

    #[test]
    fn a_cpu_brand_must_be_used_by_an_arm() {
        let e = resolve(
            &["apple9-64k".into()],
            None,
            &[],
            Some("Apple M1 Ultra (Virtual)"),
        )
        .unwrap_err();
        assert!(matches!(e, ArmError::BrandUnused(_)), "{e}");
        assert!(e.to_string().contains("--cpu-brand only applies to"), "{e}");
        // A profile refusing values is not a usage error.
        let e = arms(&["x=family-max=5001"]).unwrap_err();
        assert!(!e.is_usage(), "{e}");
    }
}
