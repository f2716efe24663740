//! Arms: the configurations `capshim bench` and `capshim verify` compare, one syntax for both.
//!
//! An arm is a label plus a profile (a named profile, a profile file or explicit values, as
//! `capshim run` takes them) plus, optionally, environment variables and tool arguments for
//! that arm only (a profile file's `[env]` and `[args]` first, then the arm's own items). On the command line each is `--arm [LABEL=]ITEM[,ITEM...]` (`--profile` is the same
//! option: `--profile again=stock` and `--profile apple9-64k` keep working), for example
//! `--arm apple9-nobf16=apple9-64k,GGML_METAL_BF16_DISABLE=1`.
//!
//! The arm `stock` (no shim) always runs first; `host` is reserved for the bare-metal
//! baseline (an unlabelled `--profile host` is the `native` arm, as `host` is read as
//! `native` everywhere). Profiles are looked up through [`crate::profile::ProfileArgs`],
//! exactly as `run` and `explain` look them up.
//!
//! - [`spec`]: the grammar of one arm.

pub mod spec;

use std::ffi::OsString;
use std::path::Path;

use capshim_profile::Profile;
use serde::Serialize;

use crate::analysis::Role;
use crate::launch::environment::{EnvChange, arm_env};
use crate::platform::facts::SystemFacts;
use crate::profile::settings::{self, ToolArgs};
use crate::profile::{ProfileArgs, ProfileArgsError, Resolved};

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
    /// Tool arguments for this arm's processes, per tool they are written for (each tool gets
    /// only its own).
    pub args: ToolArgs,
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
            args: ToolArgs::default(),
            provenance: "no shim: the device's own answers".to_string(),
        }
    }

    /// The environment change for one of this arm's processes, from capshim's own environment
    /// `parent` (names and values): capshim's own settings and the injection variable
    /// removed, the injection variable's other libraries kept, then (with a profile) the
    /// shim's variables, its status file and the injection of `dylib`, then the arm's own
    /// variables ([`arm_env`]).
    pub fn env_change_from(
        &self,
        dylib: Option<&Path>,
        status_file: &Path,
        parent: impl IntoIterator<Item = (OsString, OsString)>,
    ) -> EnvChange {
        let mut change = arm_env(self.profile.as_ref(), dylib, status_file, parent);
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
    /// The CPU brand names no chip capshim knows.
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
    /// The arm's tool arguments are refused.
    #[error("arm {label:?}: {problem}")]
    Args {
        /// The arm's label.
        label: String,
        /// What is refused and why, with the fix.
        problem: String,
    },
    /// The profile cannot be resolved.
    #[error("arm {label:?}: {source}")]
    Profile {
        /// The arm's label.
        label: String,
        /// Why.
        source: ProfileArgsError,
    },
}

impl ArmError {
    /// Whether this is a mistake in the command line itself (exit code 2), rather than a
    /// profile that cannot be read, matched or accepted (exit code 1).
    pub fn is_usage(&self) -> bool {
        match self {
            ArmError::Profile { source, .. } => matches!(
                source,
                ProfileArgsError::UnknownName(_) | ProfileArgsError::StockWithOverrides(_)
            ),
            ArmError::Brand { .. } => false,
            _ => true,
        }
    }
}

/// How arms are chosen besides the ones given: the settings every arm shares.
#[derive(Clone, Copy, Debug, Default)]
pub struct Options<'a> {
    /// Add the default profile's arm (`native` where the host chip is known, else
    /// `apple9-64k`, as every command picks it) when no arm is given.
    pub default_arm: bool,
    /// Labels beyond [`RESERVED`] this command keeps for itself, with why.
    pub reserved: &'a [(&'a str, &'static str)],
    /// The host chip's CPU brand instead of this machine's (`--cpu-brand`).
    pub cpu_brand: Option<&'a str>,
    /// `--allow-beyond-hardware`.
    pub allow_beyond_hardware: bool,
}

/// Builds the arms: `stock` first, then one per spec in the order given (the default arm when
/// there are none and [`Options::default_arm`]). Profiles are resolved exactly as `run` and
/// `explain` resolve their options, on `machine`; their notes and warnings (which default was
/// taken and why, `host` read as `native`, values that change nothing) are returned once each.
///
/// # Errors
/// [`ArmError`] naming the arm at fault and the fix.
pub fn resolve(
    specs: &[String],
    options: Options<'_>,
    machine: &dyn SystemFacts,
) -> Result<Resolution, ArmError> {
    let mut resolution = Resolution {
        arms: vec![Arm::stock()],
        notes: Vec::new(),
    };
    let mut parsed = Vec::new();
    for text in specs {
        parsed.push(spec::parse(text)?);
    }
    if parsed.is_empty() && options.default_arm {
        let default = resolve_args(&Spec::default(), &options, machine)
            .map_err(|source| arm_error("default", source))?;
        parsed.push(Spec {
            label: default.name.clone(),
            ..Spec::default()
        });
    }
    for spec in &parsed {
        let why = RESERVED
            .contains(&spec.label.as_str())
            .then_some("it names the bare-metal baseline")
            .or_else(|| {
                options
                    .reserved
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
        if resolution.arms.iter().any(|a| a.name == spec.label) {
            return Err(ArmError::Duplicate {
                spec: spec.text.clone(),
                label: spec.label.clone(),
                name: spec.name.clone(),
            });
        }
        let resolved = resolve_args(spec, &options, machine)
            .map_err(|source| arm_error(&spec.label, source))?;
        for line in resolved.notes.iter().chain(&resolved.warnings) {
            if !resolution.notes.contains(line) {
                resolution.notes.push(line.clone());
            }
        }
        // A profile file's settings first; the arm's own items after them (a variable of
        // both takes the arm's value).
        let mut env = resolved.env;
        for (name, value) in &spec.env {
            env.retain(|(n, _)| n != name);
            env.push((name.clone(), value.clone()));
        }
        let mut args = resolved.args;
        args.extend(&spec.args);
        resolution.arms.push(Arm {
            name: spec.label.clone(),
            profile_name: resolved.name,
            profile: resolved.profile,
            role: Role::Other,
            env,
            args,
            provenance: resolved.provenance,
        });
    }
    Ok(resolution)
}

/// Checks one arm's arguments for a tool, `args`, against the arguments every arm gets,
/// `shared` (those after `--`): an option in both, or twice in `args`, is refused (`aliases`
/// are groups of names of one option); then `refuse` (the tool's own list of options capshim
/// sets itself or that change what is measured) names a refused one.
///
/// # Errors
/// [`ArmError::Args`] naming the arm, the option and the fix.
pub fn check_args(
    arm: &Arm,
    item: &str,
    args: &[String],
    shared: &[String],
    aliases: &[&[&str]],
    refuse: impl Fn(&[String]) -> Result<(), String>,
) -> Result<(), ArmError> {
    let problem = |problem: String| ArmError::Args {
        label: arm.name.clone(),
        problem,
    };
    if let Some((flag, given)) = settings::repeated(args, shared, aliases) {
        return Err(problem(format!(
            "its {item} option {flag} repeats {given}, given to every arm after `--`; give it in \
             one place: after `--` for every arm, or in each arm's {item}"
        )));
    }
    let flags: Vec<String> = settings::options(args).map(str::to_string).collect();
    for (i, flag) in flags.iter().enumerate() {
        if let Some((_, first)) =
            settings::repeated(std::slice::from_ref(flag), &flags[..i], aliases)
        {
            return Err(problem(format!(
                "its {item} give {flag} twice (first as {first}; a profile file's [args] count \
                 too); give it once"
            )));
        }
    }
    refuse(args).map_err(|e| problem(format!("{item}: {e}")))
}

/// The arms, and the lines to say about how their profiles were chosen.
#[derive(Clone, Debug)]
pub struct Resolution {
    /// `stock` first, then the others in order.
    pub arms: Vec<Arm>,
    /// Notes and warnings from resolving the profiles, each once, for stderr.
    pub notes: Vec<String>,
}

/// The error for arm `label`: an unknown brand worded with the options arms have.
fn arm_error(label: &str, source: ProfileArgsError) -> ArmError {
    match source {
        ProfileArgsError::UnknownBrand(brand) => ArmError::Brand {
            label: label.to_string(),
            problem: brand.problem(),
        },
        source => ArmError::Profile {
            label: label.to_string(),
            source,
        },
    }
}

/// Resolves one arm's profile through the same options `run` and `explain` take.
fn resolve_args(
    spec: &Spec,
    options: &Options<'_>,
    machine: &dyn SystemFacts,
) -> Result<Resolved, ProfileArgsError> {
    ProfileArgs {
        profile: spec.name.clone(),
        profile_file: spec.file.clone(),
        family_max: spec.family_max,
        threadgroup_memory: spec.threadgroup_memory,
        working_set: spec.working_set,
        cpu_brand: options.cpu_brand.map(str::to_string),
        allow_beyond_hardware: options.allow_beyond_hardware,
    }
    .resolve_with(machine)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::platform::facts::Fake as FakeMachine;

    fn on(
        machine: &FakeMachine,
        specs: &[&str],
        cpu_brand: Option<&str>,
    ) -> Result<Resolution, ArmError> {
        let specs: Vec<String> = specs.iter().map(|s| s.to_string()).collect();
        let options = Options {
            default_arm: true,
            cpu_brand,
            ..Options::default()
        };
        resolve(&specs, options, machine)
    }

    fn arms(specs: &[&str]) -> Result<Vec<Arm>, ArmError> {
        on(&FakeMachine::linux(), specs, None).map(|r| r.arms)
    }

    fn names(arms: &[Arm]) -> Vec<&str> {
        arms.iter().map(|a| a.name.as_str()).collect()
    }

    #[test]
    fn stock_runs_first_and_the_default_fills_in_as_every_command_picks_it() {
        let linux = on(&FakeMachine::linux(), &[], None).unwrap();
        assert_eq!(names(&linux.arms), ["stock", "apple9-64k"]);
        assert!(linux.arms[0].profile.is_none() && linux.arms[0].role == Role::Stock);
        assert_eq!(
            linux.arms[1].profile,
            Some(capshim_profile::named::apple9_64k())
        );
        assert!(
            linux.notes.iter().any(|n| n.contains("--cpu-brand")),
            "{:?}",
            linux.notes
        );
        let guest = FakeMachine::guest("Apple M1 Ultra (Virtual)", 1 << 36);
        let m1 = on(&guest, &[], None).unwrap();
        assert_eq!(names(&m1.arms), ["stock", "native"]);
        assert_eq!(m1.arms[1].profile.unwrap().apple_family_max, 1007);
        let branded = on(&FakeMachine::linux(), &[], Some("Apple M2 (Virtual)")).unwrap();
        assert_eq!(branded.arms[1].profile.unwrap().apple_family_max, 1008);
        let only = resolve(&[], Options::default(), &FakeMachine::linux()).unwrap();
        assert_eq!(only.arms.len(), 1);
    }

    #[test]
    fn host_alone_is_the_native_arm_with_a_note() {
        let r = on(
            &FakeMachine::linux(),
            &["host"],
            Some("Apple M3 Max (Virtual)"),
        )
        .unwrap();
        assert_eq!(names(&r.arms), ["stock", "native"]);
        assert_eq!(r.arms[1].profile.unwrap().apple_family_max, 1009);
        assert!(
            r.notes.iter().any(|n| n.contains("now called native")),
            "{:?}",
            r.notes
        );
        let e = arms(&["native"]).unwrap_err();
        assert!(!e.is_usage(), "an unknown chip is not a usage error: {e}");
        assert!(e.to_string().contains("--cpu-brand"), "{e}");
    }

    #[test]
    fn an_arm_carries_its_environment_after_the_shims() {
        let a = arms(&["again=stock", "nobf16=apple9-64k,GGML_METAL_BF16_DISABLE=1"]).unwrap();
        assert_eq!(a[1].profile, None);
        assert_eq!(a[1].role, Role::Other);
        let change = a[2].env_change_from(
            Some(Path::new("/x/libcapshim.so")),
            Path::new("/b/s.jsonl"),
            [("CAPSHIM_LOG", "activation"), ("PATH", "/bin")]
                .map(|(k, v)| (OsString::from(k), OsString::from(v))),
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
        let options = Options {
            reserved: &[("base", "the saved base")],
            ..Options::default()
        };
        let e = resolve(&["base=stock".into()], options, &FakeMachine::linux()).unwrap_err();
        assert!(e.to_string().contains("reserved (the saved base)"), "{e}");
        let e = arms(&["x=apple10"]).unwrap_err();
        assert!(e.is_usage(), "{e}");
        assert!(e.to_string().contains("arm \"x\""), "{e}");
    }

    #[test]
    fn values_beyond_hardware_are_refused_unless_allowed() {
        let e = arms(&["x=family-max=1999"]).unwrap_err();
        assert!(!e.is_usage(), "{e}");
        assert!(e.to_string().contains("--allow-beyond-hardware"), "{e}");
        let options = Options {
            allow_beyond_hardware: true,
            ..Options::default()
        };
        let r = resolve(
            &["x=family-max=1999".into()],
            options,
            &FakeMachine::linux(),
        )
        .unwrap();
        assert_eq!(r.arms[1].profile.unwrap().apple_family_max, 1999);
        // A profile refusing values is not a usage error either.
        let e = arms(&["x=family-max=5001"]).unwrap_err();
        assert!(!e.is_usage(), "{e}");
    }
}
