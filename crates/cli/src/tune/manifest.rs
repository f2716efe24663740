//! What a tune bundle's derived files come from, kept in `environment.json` under `tune`: the
//! search's settings, every candidate with the arm it ran as, every stage with its rounds and
//! the raw file of each process, and each verify run of a candidate (a verify bundle inside the
//! tune bundle). `capshim report` replays the search from it and the raw files.

use std::path::{Component, Path};

use serde::{Deserialize, Serialize};

use super::knobs::{Candidate, Setting};
use crate::analysis::interval::MIN_ROUNDS;
use crate::arms::Arm;

/// The layout of tune bundles this capshim writes (`schema_version` of `environment.json`).
pub const SCHEMA_VERSION: u32 = 1;

/// The most rounds a first stage may plan (`tune.first_rounds`); capshim plans far fewer.
pub const MAX_FIRST_ROUNDS: usize = 1000;

/// The recommendation: a profile file, written when there is a winner.
pub const RECOMMENDATION: &str = "recommended.toml";

/// The derived files of a sealed tune bundle (the recommendation only with a winner).
pub const DERIVED_FILES: [&str; 3] = ["summary.json", "report.md", RECOMMENDATION];

/// The manifest.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Manifest {
    /// The model's file name.
    pub model: String,
    /// The reference arm's label.
    pub reference: String,
    /// The budget (`--budget`), in seconds.
    pub budget_seconds: f64,
    /// The part of the budget the search could spend; the rest was kept for verify.
    pub search_seconds: f64,
    /// Rounds every candidate runs in its first stage.
    pub first_rounds: usize,
    /// The noise band a winner's interval must lie wholly above, a fraction.
    pub band: f64,
    /// Every candidate, in the search's index order.
    pub candidates: Vec<CandidateRecord>,
    /// The knobs left out, each with why.
    pub left_out: Vec<String>,
    /// Every stage run, in order.
    pub stages: Vec<StageRecord>,
    /// Every verify run of a candidate against the reference, in order.
    pub verify: Vec<VerifyRecord>,
    /// Why the search ended: `complete` (the search had no further stage) or `budget` (the
    /// time for the search was up).
    pub ended: String,
    /// With `--command`: the command tuned (its wall time measured, lower is better), instead
    /// of llama-bench.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// With `--command`: the `--check` command that stands in for verify.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check: Option<String>,
}

/// One setting of a candidate.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct SettingRecord {
    /// The knob.
    pub knob: String,
    /// Its value in words.
    pub value: String,
    /// The arm items that apply it.
    pub arm_items: Vec<String>,
}

/// One candidate, and the arm it ran as.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CandidateRecord {
    /// Its label (the arm's).
    pub label: String,
    /// What it changes from the reference.
    pub settings: Vec<SettingRecord>,
    /// Its `--arm` text.
    pub arm: String,
    /// The stage after which it was added (a combination), `None` for a single knob.
    pub added_after_stage: Option<usize>,
    /// The arm as resolved: its profile's values, variables and tool arguments.
    pub resolved: ArmRecord,
}

/// An arm's settings as resolved, what a recommendation profile file holds.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct ArmRecord {
    /// The profile's name (`stock`, `apple9-64k`, `native`...).
    pub profile_name: String,
    /// The highest Apple family answered true; `None` without the shim (stock).
    pub apple_family_max: Option<i64>,
    /// The threadgroup memory floor, in bytes.
    pub max_threadgroup_memory: Option<u64>,
    /// The working set floor, in bytes.
    pub recommended_working_set_size: Option<u64>,
    /// Variables, in order.
    pub env: Vec<(String, String)>,
    /// llama-bench's arguments.
    pub bench_args: Vec<String>,
    /// llama.cpp's common tools' arguments.
    pub common_args: Vec<String>,
    /// A `--command` workload's arguments (`command-args`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub command_args: Vec<String>,
}

impl ArmRecord {
    /// The record of a resolved arm.
    pub fn of(arm: &Arm) -> ArmRecord {
        ArmRecord {
            profile_name: arm.profile_name.clone(),
            apple_family_max: arm.profile.as_ref().map(|p| p.apple_family_max),
            max_threadgroup_memory: arm.profile.as_ref().map(|p| p.max_threadgroup_memory),
            recommended_working_set_size: arm
                .profile
                .as_ref()
                .and_then(|p| p.recommended_working_set_size),
            env: arm.env.clone(),
            bench_args: arm.args.bench.clone(),
            common_args: arm.args.common.clone(),
            command_args: arm.args.command.clone(),
        }
    }
}

impl CandidateRecord {
    /// The record of `candidate`, run as the arm `arm` from the `--arm` text `spec`.
    pub fn new(
        candidate: &Candidate,
        spec: String,
        arm: &Arm,
        added_after_stage: Option<usize>,
    ) -> Self {
        CandidateRecord {
            label: candidate.label.clone(),
            settings: candidate.settings.iter().map(SettingRecord::of).collect(),
            arm: spec,
            added_after_stage,
            resolved: ArmRecord::of(arm),
        }
    }
}

impl SettingRecord {
    /// The record of `setting`.
    pub fn of(setting: &Setting) -> Self {
        SettingRecord {
            knob: setting.knob.clone(),
            value: setting.value.clone(),
            arm_items: setting.arm_items.clone(),
        }
    }

    /// `knob=value`, for tables.
    pub fn text(&self) -> String {
        format!("{}={}", self.knob, self.value)
    }
}

/// One stage.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct StageRecord {
    /// 1-based stage number.
    pub number: usize,
    /// The candidates (indices) in it.
    pub alive: Vec<usize>,
    /// The rounds the search asked for.
    pub rounds_planned: usize,
    /// How many candidates were added just before it ([`super::search::Halving::add`]).
    pub added: usize,
    /// The rounds that ran (fewer than planned when the time was up).
    pub rounds: Vec<RoundRecord>,
}

/// One round: the reference and every candidate of the stage, once each.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RoundRecord {
    /// The round's number, counted over the whole run (it names the raw files).
    pub round: u32,
    /// Every process, in the order run.
    pub runs: Vec<RunRecord>,
}

/// One llama-bench process.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunRecord {
    /// The arm's label.
    pub arm: String,
    /// Its output (llama-bench's JSON, or a command's stdout), relative to the bundle.
    pub json: String,
    /// Its stderr, relative to the bundle.
    pub stderr: String,
    /// Why it failed, when `--keep-going` recorded it as failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed: Option<String>,
    /// With `--command`: its wall time, seconds (what a command's rounds compare).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seconds: Option<f64>,
}

/// One verify run of a candidate against the reference (or, with `--command`, one run of
/// `--check` with the candidate's settings).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct VerifyRecord {
    /// The candidate's label.
    pub label: String,
    /// The verify bundle, relative to the tune bundle; for a `--check` run, its stdout file.
    pub bundle: String,
    /// Whether this is a `--check` run: its verdict is its exit code's.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub check: bool,
    /// The verify command's exit code (`None` when killed by a signal).
    pub exit_code: Option<i32>,
}

impl Manifest {
    /// The first path the manifest names that is not plainly inside the bundle (absolute, with
    /// `..`, or empty), if any: `report` reads only files inside it.
    pub fn path_outside(&self) -> Option<&str> {
        let runs = self
            .stages
            .iter()
            .flat_map(|s| &s.rounds)
            .flat_map(|r| &r.runs)
            .flat_map(|r| [r.json.as_str(), r.stderr.as_str()]);
        let verify = self.verify.iter().map(|v| v.bundle.as_str());
        runs.chain(verify).find(|rel| {
            rel.is_empty()
                || !Path::new(rel)
                    .components()
                    .all(|c| matches!(c, Component::Normal(_)))
        })
    }

    /// The first value of the manifest that the search's replay cannot take, as
    /// `tune.FIELD ...: why` (the manifest is `environment.json`'s `tune`): the settings out of
    /// range, and stages, rounds and runs that do not describe a search (a stage numbered out
    /// of order, more rounds than it planned, a round or a run given twice, a candidate that is
    /// not one). A bundle that capshim sealed has none; an edited one may.
    pub fn bad_value(&self) -> Option<String> {
        let max_seconds = super::plan::MAX_BUDGET.as_secs_f64();
        if !(MIN_ROUNDS..=MAX_FIRST_ROUNDS).contains(&self.first_rounds) {
            return Some(format!(
                "tune.first_rounds is {}, outside {MIN_ROUNDS} to {MAX_FIRST_ROUNDS}",
                self.first_rounds
            ));
        }
        if !(self.band.is_finite() && (0.0..1.0).contains(&self.band)) {
            return Some(format!("tune.band is {}, outside 0 to 1", self.band));
        }
        for (field, value) in [
            ("budget_seconds", self.budget_seconds),
            ("search_seconds", self.search_seconds),
        ] {
            if !(value.is_finite() && value > 0.0 && value <= max_seconds) {
                return Some(format!(
                    "tune.{field} is {value}, outside 0 to {max_seconds} seconds (7 days)"
                ));
            }
        }
        if self.search_seconds > self.budget_seconds {
            return Some(format!(
                "tune.search_seconds is {}, more than tune.budget_seconds {}",
                self.search_seconds, self.budget_seconds
            ));
        }
        let mut last_round = 0;
        for (i, stage) in self.stages.iter().enumerate() {
            let at = format!("tune.stages[{i}]");
            if stage.number != i + 1 {
                return Some(format!("{at}.number is {}, not {}", stage.number, i + 1));
            }
            if stage.rounds_planned == 0 || stage.rounds.len() > stage.rounds_planned {
                return Some(format!(
                    "{at}.rounds_planned is {}, with {} rounds run (a stage plans at least one, \
                     and runs no more than it planned)",
                    stage.rounds_planned,
                    stage.rounds.len()
                ));
            }
            let mut alive = stage.alive.clone();
            alive.sort_unstable();
            if alive.is_empty()
                || alive.windows(2).any(|w| w[0] == w[1])
                || alive.last().is_some_and(|&c| c >= self.candidates.len())
            {
                return Some(format!(
                    "{at}.alive is {:?}: not distinct candidates of the {} listed",
                    stage.alive,
                    self.candidates.len()
                ));
            }
            for (j, round) in stage.rounds.iter().enumerate() {
                if round.round <= last_round {
                    return Some(format!(
                        "{at}.rounds[{j}].round is {}, not after round {last_round} (a round \
                         given twice or out of order)",
                        round.round
                    ));
                }
                last_round = round.round;
                let mut arms: Vec<&str> = round.runs.iter().map(|r| r.arm.as_str()).collect();
                arms.sort_unstable();
                if let Some(w) = arms.windows(2).find(|w| w[0] == w[1]) {
                    return Some(format!(
                        "{at}.rounds[{j}].runs runs the arm {:?} twice in one round",
                        w[0]
                    ));
                }
            }
        }
        None
    }

    /// How many candidates the search started with (the single knobs).
    pub fn initial(&self) -> usize {
        self.candidates
            .iter()
            .filter(|c| c.added_after_stage.is_none())
            .count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_must_stay_inside_the_bundle() {
        let mut m = Manifest {
            stages: vec![StageRecord {
                number: 1,
                alive: vec![0],
                rounds_planned: 1,
                added: 0,
                rounds: vec![RoundRecord {
                    round: 1,
                    runs: vec![RunRecord {
                        arm: "ref".into(),
                        json: "raw/ref-r1.json".into(),
                        stderr: "raw/ref-r1.stderr".into(),
                        failed: None,
                        seconds: None,
                    }],
                }],
            }],
            ..Manifest::default()
        };
        assert_eq!(m.path_outside(), None);
        for bad in ["../x.json", "/etc/passwd", ""] {
            m.stages[0].rounds[0].runs[0].json = bad.into();
            assert_eq!(m.path_outside(), Some(bad));
        }
        m.stages[0].rounds[0].runs[0].json = "raw/ok.json".into();
        m.verify.push(VerifyRecord {
            label: "x".into(),
            bundle: "../elsewhere".into(),
            check: false,
            exit_code: Some(0),
        });
        assert_eq!(m.path_outside(), Some("../elsewhere"));
    }
}
