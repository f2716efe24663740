//! The sanity limits applied to the profile options as the user gave them: a value beyond any
//! known Apple GPU is refused unless `--allow-beyond-hardware`; a value that changes nothing is
//! a warning. The decision is [`capshim_profile::limits::check`]; this names each value the way
//! it was given (`--threadgroup-memory 0`, or the field of a profile file).

use std::path::Path;

use capshim_profile::Profile;
use capshim_profile::limits::{self, Field, Finding};

use super::{ProfileArgs, ProfileArgsError};
use crate::platform::facts::SystemFacts;

/// How the user gave `field`: the override flag, or the profile file's field.
fn given_as(args: &ProfileArgs, file: Option<&Path>, field: Field) -> String {
    let (flag, key, value) = match field {
        Field::AppleFamilyMax => ("--family-max", "apple_family_max", args.family_max),
        Field::ThreadgroupMemory => (
            "--threadgroup-memory",
            "max_threadgroup_memory",
            args.threadgroup_memory,
        ),
        Field::WorkingSet => (
            "--working-set",
            "recommended_working_set_size",
            args.working_set,
        ),
    };
    match (value, file) {
        (Some(v), _) => format!("{flag} {v}"),
        (None, Some(path)) => format!("{key} in {}", path.display()),
        (None, None) => key.to_string(),
    }
}

/// Checks `profile` against the limits, with this machine's memory for the working set.
/// Returns the warnings to print.
///
/// # Errors
/// [`ProfileArgsError::BeyondHardware`] naming every value beyond hardware, and the flag that
/// accepts them, unless `--allow-beyond-hardware` was given.
pub(super) fn check(
    args: &ProfileArgs,
    file: Option<&Path>,
    profile: &Profile,
    machine: &dyn SystemFacts,
) -> Result<Vec<String>, ProfileArgsError> {
    let memory = profile
        .recommended_working_set_size
        .and_then(|_| machine.physical_memory().ok());
    let findings = limits::check(profile, memory);
    let said = |f: &Finding| format!("{}: {f}", given_as(args, file, f.field()));
    let (beyond, nothing): (Vec<Finding>, Vec<Finding>) =
        findings.into_iter().partition(Finding::beyond_hardware);
    if !beyond.is_empty() && !args.allow_beyond_hardware {
        let reasons: Vec<String> = beyond.iter().map(said).collect();
        return Err(ProfileArgsError::BeyondHardware(format!(
            "{}; pass --allow-beyond-hardware to use {} anyway",
            reasons.join("; "),
            if beyond.len() == 1 { "it" } else { "them" }
        )));
    }
    Ok(beyond
        .iter()
        .map(|f| format!("{}; used anyway (--allow-beyond-hardware)", said(f)))
        .chain(nothing.iter().map(said))
        .collect())
}
