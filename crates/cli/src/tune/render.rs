//! A tune bundle's `report.md` and its recommendation profile file, from the summary.

use super::manifest::{CandidateRecord, RECOMMENDATION};
use super::summary::Summary;
use crate::analysis::interval::percent_text;

/// A level (a fraction) in percent with at most two decimals: 0.995 → `99.5`, 0.99545 →
/// `99.55`.
fn level_text(level: f64) -> String {
    let text = format!("{:.2}", level * 100.0);
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// A ratio as a speedup: `1.043×`, or `—` when there is none.
fn ratio(value: Option<f64>) -> String {
    value.map_or_else(|| "—".to_string(), |v| format!("{v:.3}×"))
}

/// The result in a line, for the terminal: the winner, too few rounds to tell, or no setting
/// beats the reference.
pub fn headline(s: &Summary) -> String {
    match &s.winner {
        Some(w) => format!("winner {w}"),
        None if nothing_ran(s) => NOTHING_RAN.to_string(),
        None if s.too_few_rounds => too_few(s),
        None => "no setting beats the reference here".to_string(),
    }
}

/// Why there is no result when no candidate has a round: no more rounds would tell, as no run
/// of them gave a figure.
const NOTHING_RAN: &str = "no candidate gave a figure: every one of its runs (or the \
                           reference's) failed, as the warnings say";

/// Whether no candidate has a paired round (every run failed, or the reference's did).
fn nothing_ran(s: &Summary) -> bool {
    s.winner.is_none() && s.candidates.iter().all(|c| c.rounds == 0)
}

/// `too few rounds to tell (N needed at the XX% level)`.
fn too_few(s: &Summary) -> String {
    format!(
        "too few rounds to tell ({} needed at the {}% level)",
        s.rounds_needed,
        level_text(s.level)
    )
}

/// `report.md`.
pub fn markdown(s: &Summary) -> String {
    let mut out = String::new();
    let what = match &s.command {
        Some(command) => format!("`{command}`"),
        None => s.model.clone(),
    };
    out.push_str(&format!(
        "# capshim tune: {what}\n\nReference arm: `{}`. Budget: {:.0} s. The search {}.\n\n",
        s.reference,
        s.budget_seconds,
        if s.ended == "complete" {
            "ran to its end"
        } else {
            "stopped when its time was up"
        }
    ));
    let band = percent_text(s.band);
    out.push_str(&match (&s.winner, &s.verify) {
        (None, _) if nothing_ran(s) => format!(
            "**No result: {NOTHING_RAN}.** A larger --budget would not help: fix what made \
             them fail.\n\n"
        ),
        (None, _) if s.too_few_rounds => format!(
            "**No result: {}.** No candidate that stayed to the end ran that many rounds, so \
             none has an interval the winner rule could read: this says nothing about whether \
             a setting is faster. Give a larger --budget.\n\n",
            too_few(s)
        ),
        (Some(w), Some(v)) if v.verdict == "passed" => format!(
            "**Winner: `{w}`**, faster than the reference beyond the ±{band}% band, and its \
             --check passed (its output: `{}`).\n\n",
            v.bundle
        ),
        (Some(w), Some(v)) => format!(
            "**Winner: `{w}`**, faster than the reference beyond the ±{band}% band and verified \
             `{}` against it (verify bundle `{}`).\n\n",
            v.verdict, v.bundle
        ),
        (Some(w), None) => format!(
            "**Winner: `{w}`**, faster than the reference beyond the ±{band}% band. Its results \
             were NOT checked: give --check to check them.\n\n"
        ),
        (None, _) if s.command.is_some() && s.check.is_some() => format!(
            "**No setting beats the reference here**: no candidate was faster by an interval \
             wholly above the ±{band}% band and passed --check.\n\n"
        ),
        (None, _) if s.command.is_some() => format!(
            "**No setting beats the reference here**: no candidate was faster by an interval \
             wholly above the ±{band}% band.\n\n"
        ),
        (None, _) => format!(
            "**No setting beats the reference here**: no candidate was faster by an interval \
             wholly above the ±{band}% band and verified `equivalent`.\n\n"
        ),
    });
    for w in &s.warnings {
        out.push_str(&format!("**Warning:** {w}.\n\n"));
    }
    out.push_str(if s.command.is_some() {
        "Speed is reference / candidate wall time of the command (higher is faster), paired by \
         round; the interval is the one the winner rule read.\n\n"
    } else {
        "Speed is candidate / reference throughput (the geometric mean over llama-bench's \
         tests), paired by round; the interval is the one the winner rule read.\n\n"
    });
    out.push_str(
        "| rank | candidate | settings | rounds | speed | interval | eliminated after stage |\n",
    );
    out.push_str("|---:|---|---|---:|---:|---|---:|\n");
    for (i, c) in s.candidates.iter().enumerate() {
        let settings: Vec<String> = c.settings.iter().map(|s| s.text()).collect();
        let interval = match (c.interval_low, c.interval_high, c.interval_level) {
            (Some(l), Some(h), Some(level)) => {
                format!("[{l:.3} {h:.3}] ({}%)", level_text(level))
            }
            _ if c.rounds < s.rounds_needed => format!(
                "— ({} rounds needed at {}%)",
                s.rounds_needed,
                level_text(s.level)
            ),
            _ => "—".to_string(),
        };
        out.push_str(&format!(
            "| {} | `{}`{} | {} | {} | {} | {} | {} |\n",
            i + 1,
            c.label,
            if s.winner.as_deref() == Some(c.label.as_str()) {
                " (winner)"
            } else {
                ""
            },
            settings.join(", "),
            c.rounds,
            ratio(c.estimate),
            interval,
            c.eliminated_after
                .map_or_else(|| "—".to_string(), |n| n.to_string())
        ));
    }
    if !s.verify_runs.is_empty() {
        out.push_str("\n## Verify\n\n");
        for v in &s.verify_runs {
            out.push_str(&if s.command.is_some() {
                format!(
                    "- `{}`: --check {} (its output: `{}`)\n",
                    v.label, v.verdict, v.bundle
                )
            } else {
                format!(
                    "- `{}`: {} (its verify bundle, inside this one: `capshim report \
                     BUNDLE_DIR/{}`)\n",
                    v.label, v.verdict, v.bundle
                )
            });
        }
    }
    if !s.left_out.is_empty() {
        out.push_str("\n## Knobs left out\n\n");
        for note in &s.left_out {
            out.push_str(&format!("- {note}\n"));
        }
    }
    if let (Some(w), Some(file), Some(command)) = (&s.winner, s.recommendation, &s.command) {
        out.push_str(&format!(
            "\n## Using the result\n\n`{file}` holds `{w}`'s settings as a profile file:\n\n\
             ```\ncapshim run --profile-file {file} -- {command}\n\
             capshim bench --command '{command}' --arm {w}=file={file}\n```\n"
        ));
    } else if let (Some(w), Some(file)) = (&s.winner, s.recommendation) {
        out.push_str(&format!(
            "\n## Using the result\n\n`{file}` holds `{w}`'s settings as a profile file:\n\n\
             ```\ncapshim run --profile-file {file} -- llama-server -m MODEL.gguf\n\
             capshim bench -m MODEL.gguf --arm {w}=file={file}\n```\n\n`run` applies its \
             variables and prints its tool arguments as a suggested command line; `bench` and \
             `verify` apply both.\n"
        ));
    } else if s.winner.is_some() {
        out.push_str(
            "\nThe winner runs without the shim (stock): no profile file is written; use its \
             settings as the table gives them.\n",
        );
    }
    out
}

/// A TOML basic string.
fn quoted(text: &str) -> String {
    serde_json::to_string(text).expect("a string serializes")
}

/// An array of TOML strings.
fn words(args: &[String]) -> String {
    let items: Vec<String> = args.iter().map(|a| quoted(a)).collect();
    format!("[{}]", items.join(", "))
}

/// The recommendation: the winner's settings as a profile file (the extended format with
/// `[env]` and `[args]`, docs/profiles.md). The winner must have a profile.
pub fn profile_file(winner: &CandidateRecord) -> String {
    let r = &winner.resolved;
    let mut out = format!(
        "# The settings `capshim tune` found fastest here (its report.md says how): {}.\n\
         # Use: capshim run --profile-file {RECOMMENDATION} -- CMD, or an arm file={RECOMMENDATION}.\n",
        winner.label
    );
    out.push_str(&format!(
        "name = {}\n",
        quoted(&format!("tune-{}", winner.label))
    ));
    if let Some(family) = r.apple_family_max {
        out.push_str(&format!("apple_family_max = {family}\n"));
    }
    if let Some(bytes) = r.max_threadgroup_memory {
        out.push_str(&format!("max_threadgroup_memory = {bytes}\n"));
    }
    if let Some(bytes) = r.recommended_working_set_size {
        out.push_str(&format!("recommended_working_set_size = {bytes}\n"));
    }
    if !r.env.is_empty() {
        out.push_str("\n[env]\n");
        for (name, value) in &r.env {
            out.push_str(&format!("{name} = {}\n", quoted(value)));
        }
    }
    if !r.bench_args.is_empty() || !r.common_args.is_empty() || !r.command_args.is_empty() {
        out.push_str("\n[args]\n");
        if !r.bench_args.is_empty() {
            out.push_str(&format!("bench = {}\n", words(&r.bench_args)));
        }
        if !r.common_args.is_empty() {
            out.push_str(&format!("common = {}\n", words(&r.common_args)));
        }
        if !r.command_args.is_empty() {
            out.push_str(&format!("command = {}\n", words(&r.command_args)));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tune::manifest::{ArmRecord, SettingRecord};

    #[test]
    fn levels_show_at_most_two_decimals() {
        assert_eq!(level_text(0.995), "99.5");
        assert_eq!(level_text(0.9954545454545455), "99.55");
        assert_eq!(level_text(0.99), "99");
    }

    #[test]
    fn the_recommendation_reads_back_as_the_winners_profile() {
        let winner = CandidateRecord {
            label: "fa-1".into(),
            settings: vec![SettingRecord {
                knob: "flash-attn".into(),
                value: "1".into(),
                arm_items: vec!["bench-args=-fa 1".into(), "common-args=-fa on".into()],
            }],
            arm: "fa-1=apple9-64k,bench-args=-fa 1,common-args=-fa on".into(),
            added_after_stage: None,
            resolved: ArmRecord {
                profile_name: "apple9-64k".into(),
                apple_family_max: Some(1009),
                max_threadgroup_memory: Some(65536),
                recommended_working_set_size: None,
                env: vec![("GGML_METAL_NO_RESIDENCY".into(), "1 \"x\"".into())],
                bench_args: vec!["-fa".into(), "1".into()],
                common_args: vec!["-fa".into(), "on".into()],
                command_args: vec!["--steps".into(), "2".into()],
            },
        };
        let text = profile_file(&winner);
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join(RECOMMENDATION);
        std::fs::write(&path, &text).unwrap();
        let resolved = crate::profile::ProfileArgs {
            profile_file: Some(path),
            ..Default::default()
        }
        .resolve()
        .unwrap();
        assert_eq!(resolved.name, "tune-fa-1");
        let p = resolved.profile.unwrap();
        assert_eq!(
            (p.apple_family_max, p.max_threadgroup_memory),
            (1009, 65536)
        );
        assert_eq!(resolved.env, winner.resolved.env);
        assert_eq!(resolved.args.bench, ["-fa", "1"]);
        assert_eq!(resolved.args.common, ["-fa", "on"]);
        assert_eq!(resolved.args.command, ["--steps", "2"]);
    }
}
