//! What a tune run will do, checked before anything runs: the reference arm, the candidates as
//! arms, llama-bench's plan (bench's, reused: its arguments, refusals and process runner), the
//! budget and how verify is run.

use std::path::PathBuf;
use std::time::Duration;

use super::compose::Base;
use super::knobs::Candidate;
use super::search::Config;
use crate::arms::{self, Arm, ArmError};
use crate::bench::plan::Plan as BenchPlan;

/// The longest `--budget` taken: 7 days (a search longer than that is a mistake in the unit).
pub const MAX_BUDGET: Duration = Duration::from_secs(7 * 24 * 3600);

/// The share of the budget kept for verifying the winner (the search spends the rest).
pub const VERIFY_SHARE: f64 = 0.2;

/// How the arms of candidates are resolved: the settings every arm shares.
#[derive(Clone, Debug, Default)]
pub struct ArmOptions {
    /// `--cpu-brand`.
    pub cpu_brand: Option<String>,
    /// `--allow-beyond-hardware`.
    pub allow_beyond_hardware: bool,
}

impl ArmOptions {
    /// The arm of the `--arm` text `spec` (never `stock` itself).
    ///
    /// # Errors
    /// [`ArmError`] naming the arm and the fix.
    pub fn resolve(&self, spec: &str) -> Result<Arm, ArmError> {
        let resolution = arms::resolve(
            &[spec.to_string()],
            arms::Options {
                default_arm: false,
                reserved: &[],
                cpu_brand: self.cpu_brand.as_deref(),
                allow_beyond_hardware: self.allow_beyond_hardware,
            },
            &crate::platform::facts::Real::default(),
        )?;
        Ok(resolution
            .arms
            .into_iter()
            .nth(1)
            .expect("one arm besides stock"))
    }
}

/// The reference arm: what every candidate is compared with, and what it starts from.
#[derive(Clone, Debug)]
pub struct Reference {
    /// The arm.
    pub arm: Arm,
    /// Its items (its `--arm` text without the label).
    pub items: String,
    /// Its settings by kind: what candidates start from ([`Candidate::arm_spec`]).
    pub base: Base,
}

impl Reference {
    /// The reference of items `items` (its `--arm` text without the label) resolved as `arm`.
    ///
    /// # Errors
    /// The arms grammar's message for items that do not parse.
    pub fn new(arm: Arm, items: String) -> Result<Reference, String> {
        let base = Base::new(&items, Some(&arm))?;
        Ok(Reference { arm, items, base })
    }
}

/// How a candidate is verified against the reference: `capshim verify` run as a child process
/// into a verify bundle inside the tune bundle.
#[derive(Clone, Debug)]
pub struct VerifySetup {
    /// The capshim executable.
    pub capshim: PathBuf,
    /// The folder of llama.cpp's tools.
    pub llama_dir: PathBuf,
    /// Whether test-backend-ops is there (else `--no-kernel-tests`).
    pub kernel_tests: bool,
    /// `--dylib`, `--cpu-brand`, `--allow-beyond-hardware`, `--allow-inactive`, as given.
    pub shim_args: Vec<String>,
}

/// `--command`: a command tuned instead of llama-bench.
#[derive(Clone, Debug)]
pub struct CommandMode {
    /// The command and what is measured of it (its wall time).
    pub workload: crate::bundle::workload::Workload,
    /// `--check`: run with each candidate that would win, exit 0 meaning its results are
    /// right; it stands in for verify.
    pub check: Option<String>,
}

/// Everything a tune run needs, checked.
#[derive(Clone, Debug)]
pub struct Plan {
    /// llama-bench's plan: the model, the tool, its arguments, the shim, `--allow-inactive`,
    /// `--keep-going`, the output; its arms are the reference then the candidates (more are
    /// added during the run, the combinations).
    pub bench: BenchPlan,
    /// The reference.
    pub reference: Reference,
    /// The candidates of the first stage, one knob each: `bench.arms[1 + i]` runs candidate i.
    pub candidates: Vec<Candidate>,
    /// The knobs left out, each with why.
    pub left_out: Vec<String>,
    /// `--budget`.
    pub budget: Duration,
    /// The search's settings.
    pub config: Config,
    /// How candidate arms are resolved.
    pub arm_options: ArmOptions,
    /// How verify runs.
    pub verify: VerifySetup,
    /// What the probe found of llama.cpp (recorded in `environment.json`); `None` with
    /// `--command`.
    pub probe: Option<super::probe::Probe>,
    /// `--command`: the command tuned instead of llama-bench (`bench`'s llama-bench fields are
    /// then unused).
    pub command: Option<CommandMode>,
    /// How many of the best single knobs are combined after the first stage.
    pub combine_best: usize,
    /// The combinations of the best single knobs (the catalogue's rule).
    pub combine: fn(&[Candidate]) -> Vec<Candidate>,
}

impl Plan {
    /// The time the search may spend, the rest of the budget kept for verify.
    pub fn search_time(&self) -> Duration {
        self.budget.mul_f64(1.0 - VERIFY_SHARE)
    }
}

/// Parses a `--budget` value: one or more numbers each with a unit, `s`, `m` or `h` (`90s`,
/// `4m`, `1h`, `1h30m`, `2.5m`), each unit at most once, in all more than no time and at most
/// [`MAX_BUDGET`] (7 days).
///
/// # Errors
/// A text naming the value and what is expected, which clap prints as a usage error (exit 2).
pub fn parse_budget(value: &str) -> Result<Duration, String> {
    let fix = "give a duration such as 90s, 4m, 1h or 1h30m";
    let text = value.trim();
    if text.is_empty() {
        return Err(format!("an empty budget; {fix}"));
    }
    let mut seconds = 0.0;
    let mut seen: Vec<char> = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (number, after) = rest.split_at(digits);
        let letters = after
            .find(|c: char| !c.is_ascii_alphabetic())
            .unwrap_or(after.len());
        // A unit is a word of letters, or the one other character found there (`-`).
        let unit_len = if letters > 0 {
            letters
        } else {
            after.chars().next().map_or(0, char::len_utf8)
        };
        let (unit, next) = after.split_at(unit_len);
        let factor = match unit {
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            "" => {
                return Err(format!(
                    "{value:?}: {number} has no unit; {fix} (90 alone could be seconds or minutes)"
                ));
            }
            other => {
                return Err(format!(
                    "{value:?}: {other:?} is not a unit --budget takes (s, m, h); {fix}"
                ));
            }
        };
        let letter = unit.chars().next().unwrap_or_default();
        if seen.contains(&letter) {
            return Err(format!("{value:?}: the unit {unit} is given twice; {fix}"));
        }
        seen.push(letter);
        let n: f64 = number
            .parse()
            .map_err(|_| format!("{value:?}: {unit} needs a number before it; {fix}"))?;
        seconds += n * factor;
        rest = next;
    }
    let max = MAX_BUDGET.as_secs_f64();
    if !seconds.is_finite() || seconds > max {
        return Err(format!(
            "{value:?} is more than the longest budget, 7 days (168h); {fix}"
        ));
    }
    if seconds <= 0.0 {
        return Err(format!("{value:?} is no time to search in; {fix}"));
    }
    Duration::try_from_secs_f64(seconds).map_err(|e| format!("{value:?}: {e}; {fix}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budgets_take_seconds_minutes_hours_and_refuse_a_bare_number() {
        let secs = |v: &str| parse_budget(v).unwrap().as_secs_f64();
        assert_eq!(secs("90s"), 90.0);
        assert_eq!(secs("4m"), 240.0);
        assert_eq!(secs("15m"), 900.0);
        assert_eq!(secs("1h"), 3600.0);
        assert_eq!(secs("1h30m"), 5400.0);
        assert_eq!(secs("2.5m"), 150.0);
        assert_eq!(secs("168h"), 7.0 * 24.0 * 3600.0);
        for bad in ["90", "", "0s", "4x", "m", "1..5m", "-4m", "1h1m1h"] {
            assert!(parse_budget(bad).is_err(), "{bad:?} accepted");
        }
        let err = |v: &str| parse_budget(v).unwrap_err();
        assert!(err("90").contains("has no unit"));
        assert!(
            err("1ms").contains("\"ms\" is not a unit --budget takes"),
            "{}",
            err("1ms")
        );
        assert!(err("5m5m").contains("the unit m is given twice"));
        for huge in [
            "99999999999999999999h",
            "1000000000000000h",
            "169h",
            "10081m",
        ] {
            assert!(
                err(huge).contains("more than the longest budget, 7 days"),
                "{}",
                err(huge)
            );
        }
    }
}
