//! What `capshim report` asks of a verify bundle's manifest beyond the derivation: that it
//! agrees with the record of what ran. The derivation reads each arm's profile, whether the shim
//! was injected (which decides whether its activation is read) and its arguments from the
//! manifest (`verify`); `environment.json` also records every arm as resolved (`arms`) and every
//! process with its arguments and variables (`steps`). An edit of the manifest alone under a
//! regenerated `SHA256SUMS` (an arm whose shim never activated relabelled as one without the
//! shim) would otherwise be shown as derived. So, for each arm of the manifest:
//!
//! - the arm `arms` records has its profile, whether it has the shim's values, its variables
//!   and its `common-args`;
//! - `steps` records as many of its processes as the manifest has steps of it;
//! - each of them set the shim's family variable exactly when the arm has the shim (to the
//!   recorded profile's family), set the arm's variables, and (llama-perplexity and
//!   llama-completion) ran with the arm's `common-args` and the arguments after `--`.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::manifest::{Manifest, ManifestArm, Step};
use crate::experiment::record::EnvSeen;
use crate::profile::settings::holds_words;

/// An arm as `environment.json`'s `arms` records it: the fields checked here.
#[derive(Debug, Deserialize)]
struct ArmSeen {
    name: String,
    profile_name: String,
    profile: Option<ProfileSeen>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    #[serde(default)]
    args: Option<ArgsSeen>,
}

/// A profile's family, as recorded.
#[derive(Debug, Deserialize)]
struct ProfileSeen {
    apple_family_max: i64,
}

/// An arm's tool arguments, as recorded.
#[derive(Debug, Deserialize)]
struct ArgsSeen {
    #[serde(default)]
    common: Vec<String>,
}

/// A process as `environment.json`'s `steps` records it.
#[derive(Debug, Deserialize)]
struct StepSeen {
    arm: String,
    step: Step,
    argv: Vec<String>,
    env: EnvSeen,
}

/// The record `check` compares the manifest with.
#[derive(Debug, Deserialize)]
struct Record {
    arms: Vec<ArmSeen>,
    steps: Vec<StepSeen>,
}

/// Checks `manifest` against `environment_json` (the whole file's text).
///
/// # Errors
/// The first disagreement, naming the arm and the field (for a `BadManifest` of
/// `environment.json`), or why the record cannot be read.
pub fn check(manifest: &Manifest, environment_json: &str) -> Result<(), String> {
    let record: Record =
        serde_json::from_str(environment_json).map_err(|e| format!("arms, steps: {e}"))?;
    for (i, m) in manifest.arms.iter().enumerate() {
        let at = format!("verify.arms[{i}] ({:?})", m.name);
        let seen = record
            .arms
            .iter()
            .find(|a| a.name == m.name)
            .ok_or_else(|| format!("{at}: `arms` records no arm of that name"))?;
        agrees(m, seen).map_err(|why| format!("{at}: {why}"))?;
        let processes: Vec<&StepSeen> = record.steps.iter().filter(|s| s.arm == m.name).collect();
        if processes.len() != m.steps.len() {
            return Err(format!(
                "{at}: it has {} steps, but `steps` records {} of its processes",
                m.steps.len(),
                processes.len()
            ));
        }
        let family = seen
            .profile
            .as_ref()
            .map(|p| p.apple_family_max.to_string());
        for p in processes {
            ran_as(m, p, family.as_deref(), &manifest.extra_args)
                .map_err(|why| format!("{at}: its {} process {why}", p.step.name()))?;
        }
    }
    Ok(())
}

/// The manifest's arm `m` and the recorded arm `seen` agree.
fn agrees(m: &ManifestArm, seen: &ArmSeen) -> Result<(), String> {
    if seen.profile_name != m.profile {
        return Err(format!(
            "its profile is {:?}, but `arms` records {:?}",
            m.profile, seen.profile_name
        ));
    }
    if seen.profile.is_some() != m.shim {
        return Err(format!(
            "`shim` is {}, but `arms` records {} profile values",
            m.shim,
            if seen.profile.is_some() { "its" } else { "no" }
        ));
    }
    let env: BTreeMap<String, String> = m.env.iter().cloned().collect();
    if env != seen.env {
        return Err("its variables (`env`) are not those `arms` records".to_string());
    }
    let common = seen.args.as_ref().map_or(&[][..], |a| &a.common[..]);
    if common != m.args {
        return Err("its `args` are not the common-args `arms` records".to_string());
    }
    Ok(())
}

/// The process `p` of arm `m` ran as `m` says: the shim's family variable set to `family`
/// exactly when it has the shim, its variables set, and (the llama.cpp tools) its arguments and
/// the arguments after `--` (`extra`) given.
fn ran_as(
    m: &ManifestArm,
    p: &StepSeen,
    family: Option<&str>,
    extra: &[String],
) -> Result<(), String> {
    let name = capshim_profile::env::FAMILY_MAX.primary;
    let set = p.env.set.get(name).map(String::as_str);
    if m.shim && set != family {
        return Err(format!("did not set {name} to its profile's family"));
    }
    if !m.shim && set.is_some() {
        return Err(format!("set {name}, but the arm has no shim"));
    }
    if let Some((k, v)) = p.env.first_unset(&m.env) {
        return Err(format!("did not set {k}={v}"));
    }
    if p.step != Step::Kernels && !(holds_words(&p.argv, &m.args) && holds_words(&p.argv, extra)) {
        return Err("did not run with the arm's `args` and `extra_args`".to_string());
    }
    Ok(())
}
