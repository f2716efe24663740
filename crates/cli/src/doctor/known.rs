//! Known guest problems no capability answer fixes, from `data/known-problems.toml` (built
//! into capshim): each entry with its sources, the versions it affects, and a condition over
//! the facts doctor gathers. An entry whose condition holds gets its status (`warn` or
//! `fail`); one whose condition does not hold is `ok` ("not affected"); one whose facts are
//! not known is `skip`. The host preference is the one entry doctor checks itself: on the
//! host it reads the user default; inside a guest it cannot.

use serde::Deserialize;

use super::gather::Gathered;
use super::{Check, SourceRef, Status};
use crate::deploy::host::{DOMAIN, KEY};
use crate::platform::facts::SystemFacts;

/// The known-problems file, as built in.
pub const FILE: &str = include_str!("../../data/known-problems.toml");
/// Its path in the repository, for messages.
pub const FILE_PATH: &str = "crates/cli/data/known-problems.toml";

/// The file's shape.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KnownProblems {
    /// Every entry.
    pub problem: Vec<Problem>,
}

/// One known problem.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Problem {
    /// The check's id is `known.<id>`.
    pub id: String,
    /// What it is about, a short phrase.
    pub title: String,
    /// What goes wrong, one line.
    pub summary: String,
    /// What is known, and what is not.
    pub detail: String,
    /// What to do.
    pub fix: String,
    /// The versions and setups it was seen on.
    pub affected: String,
    /// The status when the condition holds.
    pub status: Severity,
    /// The condition (absent: always).
    #[serde(default)]
    pub when: When,
    /// `host-preference`: the entry doctor checks itself.
    #[serde(default)]
    pub kind: Kind,
    /// Where it comes from.
    pub sources: Vec<Source>,
}

/// How bad a problem is when it applies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Worth knowing; capshim still works.
    Warn,
    /// The workload it names will fail.
    Fail,
}

/// What an entry is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// Evaluated with [`When`].
    #[default]
    Condition,
    /// The host preference, read on the host.
    HostPreference,
}

/// A condition: every key given must hold.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct When {
    /// A VM guest (true) or the host (false).
    pub guest: Option<bool>,
    /// The Metal device is the paravirtual one.
    pub paravirtual: Option<bool>,
    /// The macOS major version is within these bounds.
    pub macos_major: Option<Bounds>,
    /// The Metal device answers `supportsFamily:` true for each of these families.
    pub answers: Option<Vec<i64>>,
}

/// Inclusive bounds; either may be absent.
#[derive(Clone, Copy, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Bounds {
    /// The lowest value that holds.
    pub min: Option<u32>,
    /// The highest value that holds.
    pub max: Option<u32>,
}

/// A source of an entry.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Source {
    /// Its name.
    pub name: String,
    /// Where it is.
    pub url: String,
    /// What it says, with its date.
    pub says: String,
}

/// Parses a known-problems file.
///
/// # Errors
/// What is wrong with it, from the TOML parser, or an entry without a source.
pub fn parse(text: &str) -> Result<Vec<Problem>, String> {
    let file: KnownProblems = toml::from_str(text).map_err(|e| e.to_string())?;
    if let Some(p) = file.problem.iter().find(|p| p.sources.is_empty()) {
        return Err(format!("entry {:?} names no source", p.id));
    }
    Ok(file.problem)
}

/// Whether a condition holds: `Ok(bool)`, or `Err(what)` naming the fact that is not known.
pub fn holds(when: &When, g: &Gathered) -> Result<bool, String> {
    let mut result = true;
    if let Some(want) = when.guest {
        let guest = g
            .guest
            .as_ref()
            .map_err(|_| "whether this is a guest".to_string())?;
        result &= *guest == want;
    }
    if let Some(want) = when.paravirtual {
        let paravirtual = g
            .paravirtual()
            .ok_or_else(|| "the Metal device's name".to_string())?;
        result &= paravirtual == want;
    }
    if let Some(bounds) = when.macos_major {
        let major = g
            .macos_major()
            .ok_or_else(|| "the macOS version".to_string())?;
        result &=
            bounds.min.is_none_or(|min| major >= min) && bounds.max.is_none_or(|max| major <= max);
    }
    if let Some(families) = &when.answers {
        let device = g
            .device
            .as_ref()
            .map_err(|_| "the Metal device's answers".to_string())?;
        result &= families
            .iter()
            .all(|f| device.families.get(f).copied().unwrap_or(false));
    }
    Ok(result)
}

fn sources(problem: &Problem) -> Vec<SourceRef> {
    problem
        .sources
        .iter()
        .map(|s| SourceRef {
            name: s.name.clone(),
            url: s.url.clone(),
            says: s.says.clone(),
        })
        .collect()
}

fn with_sources(check: Check, problem: &Problem) -> Check {
    Check {
        sources: sources(problem),
        ..check
    }
}

/// One `known.<id>` check per entry of the built-in file.
pub fn checks(facts: &dyn SystemFacts, g: &Gathered) -> Vec<Check> {
    match parse(FILE) {
        Ok(problems) => problems.iter().map(|p| check(facts, p, g)).collect(),
        Err(why) => vec![Check::with(
            "known",
            Status::Warn,
            "the built-in known-problems file cannot be read",
            format!("{FILE_PATH}: {why}"),
            "report this to capshim's maintainers",
        )],
    }
}

/// The check of one entry.
pub fn check(facts: &dyn SystemFacts, problem: &Problem, g: &Gathered) -> Check {
    let id = format!("known.{}", problem.id);
    if !g.macos() {
        let skipped = Check::not_macos(&id, g);
        return with_sources(
            Check {
                summary: format!(
                    "not checked (this is {}, not macOS): {}",
                    g.os_name, problem.title
                ),
                ..skipped
            },
            problem,
        );
    }
    let detail = format!("{} Affected: {}.", problem.detail, problem.affected);
    let applies = problem_status(problem);
    let checked = match problem.kind {
        Kind::HostPreference => {
            return with_sources(host_preference(facts, problem, g, &id), problem);
        }
        Kind::Condition => holds(&problem.when, g),
    };
    let check = match checked {
        Ok(true) => Check::with(
            &id,
            applies,
            problem.summary.clone(),
            detail,
            problem.fix.clone(),
        ),
        Ok(false) => Check::ok(&id, format!("not affected: {}", problem.title), detail),
        Err(unknown) => Check::with(
            &id,
            Status::Skip,
            format!("cannot tell ({unknown} is not known): {}", problem.title),
            detail,
            problem.fix.clone(),
        ),
    };
    with_sources(check, problem)
}

/// The host preference: read on the host, not readable in a guest.
fn host_preference(facts: &dyn SystemFacts, problem: &Problem, g: &Gathered, id: &str) -> Check {
    let says: Vec<String> = problem
        .sources
        .iter()
        .map(|s| format!("{}: {}", s.name, s.says))
        .collect();
    let detail = format!("{} Sources: {}.", problem.detail, says.join("; "));
    match &g.guest {
        Ok(true) => Check::with(
            id,
            Status::Skip,
            format!(
                "capshim cannot read the host's {KEY} from inside a guest; sources disagree on whether it matters"
            ),
            detail,
            problem.fix.clone(),
        ),
        Err(why) => Check::with(
            id,
            Status::Skip,
            format!("cannot tell whether this is the host, so {KEY} is not read"),
            format!("{why}. {detail}"),
            problem.fix.clone(),
        ),
        Ok(false) => match facts.user_default(DOMAIN, KEY) {
            Ok(Some(value)) if matches!(value.as_str(), "1" | "true" | "YES") => Check::ok(
                id,
                format!("{DOMAIN} {KEY} is set on this host"),
                format!(
                    "{detail} VMs started after it was set get the unrestricted feature level."
                ),
            ),
            Ok(value) => Check::with(
                id,
                problem_status(problem),
                format!(
                    "{DOMAIN} {KEY} is {} on this host",
                    if value.is_some() { "false" } else { "not set" }
                ),
                detail,
                "`capshim host enable`, then stop and start each VM (kronk measured no change in reported answers without it; Tart and Anka require it)",
            ),
            Err(why) => Check::with(
                id,
                Status::Warn,
                format!("cannot read {DOMAIN} {KEY}"),
                format!("{why}. {detail}"),
                "`capshim host status`",
            ),
        },
    }
}

fn problem_status(problem: &Problem) -> Status {
    match problem.status {
        Severity::Warn => Status::Warn,
        Severity::Fail => Status::Fail,
    }
}
