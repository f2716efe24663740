//! What `capshim report` asks of a tune bundle's manifest beyond its replay: that each
//! candidate's record agrees with itself and with the processes that ran. The search replays
//! from the raw files, but a candidate's settings (its labels in the report) and its resolved
//! arm (the recommendation) are read from the manifest: an edit of either under a regenerated
//! `SHA256SUMS` would otherwise be shown as derived. So:
//!
//! - each setting is one of the knob catalogue's values, with that value's arm items;
//! - each arm item is in the candidate's resolved arm (its profile, variable or arguments);
//! - every process of the candidate ran with the resolved arm's variables, the shim variables
//!   of its profile (none without one) and, for llama-bench, its arguments;
//! - each arm (the reference, each candidate) ran as many processes as the stages record.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::knobs::Catalogue;
use super::manifest::{ArmRecord, CandidateRecord, Manifest};
use crate::arms::spec;
use crate::experiment::record::EnvSeen;
use crate::profile::settings::holds_words;

/// A process as `environment.json`'s `runs` records it: the fields checked here.
#[derive(Debug, Deserialize)]
pub struct RunSeen {
    /// The arm's label.
    pub arm: String,
    /// Program and arguments, as run.
    pub argv: Vec<String>,
    /// The environment change.
    pub env: EnvSeen,
}

/// Checks every candidate of `manifest` against `catalogue` and the processes `runs`.
///
/// # Errors
/// The first disagreement, naming the candidate and the field (for a `BadManifest` of
/// `environment.json`).
pub fn check(manifest: &Manifest, runs: &[RunSeen], catalogue: &Catalogue) -> Result<(), String> {
    for (i, c) in manifest.candidates.iter().enumerate() {
        let at = format!("tune.candidates[{i}] ({:?})", c.label);
        settings_are_the_catalogues(c, catalogue).map_err(|why| format!("{at}: {why}"))?;
        items_are_resolved(c).map_err(|why| format!("{at}: {why}"))?;
        for run in runs.iter().filter(|r| r.arm == c.label) {
            ran_as_resolved(&c.resolved, run, manifest.command.is_none())
                .map_err(|why| format!("{at}: a process of it (`runs`) {why}"))?;
        }
    }
    same_processes(manifest, runs)
}

/// The stages record as many processes of each arm (the reference's, each candidate's) as
/// `runs` holds, and `runs` holds no other arm's.
fn same_processes(manifest: &Manifest, runs: &[RunSeen]) -> Result<(), String> {
    let mut counts: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for r in manifest
        .stages
        .iter()
        .flat_map(|s| &s.rounds)
        .flat_map(|r| &r.runs)
    {
        counts.entry(r.arm.as_str()).or_default().0 += 1;
    }
    for r in runs {
        counts.entry(r.arm.as_str()).or_default().1 += 1;
    }
    match counts.iter().find(|(_, (staged, ran))| staged != ran) {
        Some((arm, (staged, ran))) => Err(format!(
            "the stages (tune.stages) record {staged} processes of the arm {arm:?}, `runs` holds {ran}"
        )),
        None => Ok(()),
    }
}

/// Each setting of `c` is a value of a knob of `catalogue`, with that value's arm items.
fn settings_are_the_catalogues(c: &CandidateRecord, catalogue: &Catalogue) -> Result<(), String> {
    for s in &c.settings {
        let value = catalogue
            .knobs
            .iter()
            .find(|k| k.name == s.knob)
            .and_then(|k| k.values.iter().find(|v| v.value == s.value))
            .ok_or_else(|| format!("the setting {} is no value of the knob catalogue", s.text()))?;
        if value.items != s.arm_items {
            return Err(format!(
                "the setting {} applies {:?}, but the catalogue's {} applies {:?}",
                s.text(),
                s.arm_items,
                s.text(),
                value.items
            ));
        }
    }
    Ok(())
}

/// Each arm item of `c`'s settings is in its resolved arm.
fn items_are_resolved(c: &CandidateRecord) -> Result<(), String> {
    let r = &c.resolved;
    for s in &c.settings {
        for item in &s.arm_items {
            let parsed = spec::parse(&format!("x={item}"))
                .map_err(|e| format!("the setting {}'s item {item:?}: {e}", s.text()))?;
            let applied = parsed.name.as_ref().is_none_or(|n| *n == r.profile_name)
                && parsed.env.iter().all(|pair| r.env.contains(pair))
                && holds_words(&r.bench_args, &parsed.args.bench)
                && holds_words(&r.common_args, &parsed.args.common)
                && holds_words(&r.command_args, &parsed.args.command);
            if !applied {
                return Err(format!(
                    "the setting {}'s item {item:?} is not in its resolved arm (`resolved`)",
                    s.text()
                ));
            }
        }
    }
    Ok(())
}

/// Whether `run` ran with `r`'s variables, its profile's shim variables (none without a
/// profile) and, for llama-bench (`llama`), its arguments; what differs, if not.
fn ran_as_resolved(r: &ArmRecord, run: &RunSeen, llama: bool) -> Result<(), String> {
    if let Some((name, value)) = run.env.first_unset(&r.env) {
        return Err(format!(
            "did not set {name}={value}, which `resolved.env` holds"
        ));
    }
    let profile = r.apple_family_max.map(|family| capshim_profile::Profile {
        apple_family_max: family,
        max_threadgroup_memory: r.max_threadgroup_memory.unwrap_or_default(),
        recommended_working_set_size: r.recommended_working_set_size,
    });
    match profile {
        Some(profile) => {
            for (name, value) in capshim_profile::env::vars_for(&profile) {
                if run.env.set.get(name) != Some(&value) {
                    return Err(format!(
                        "did not set {name}={value}, which its resolved profile gives"
                    ));
                }
            }
        }
        None => {
            let family = capshim_profile::env::FAMILY_MAX.primary;
            if run.env.set.contains_key(family) {
                return Err(format!("set {family}, but its resolved arm has no profile"));
            }
        }
    }
    if llama && !holds_words(&run.argv, &r.bench_args) {
        return Err(format!(
            "did not run with `resolved.bench_args` {:?}",
            r.bench_args
        ));
    }
    Ok(())
}
