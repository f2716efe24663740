//! Schema 6 from inputs to tables: [`analyze_with`] and the exporters, and that schema 5's
//! summary carries none of schema 6's fields.

use crate::analysis::tests::{arm, row};
use crate::analysis::*;
use crate::export::Exporter;
use crate::export::markdown::Markdown;
use crate::llama::BenchRow;
use interval::Verdict;

/// `n` rounds of stock and two arms, pp512 and tg128, each arm `ratio` × stock with a small
/// wobble per round.
fn bench(n: usize, ratio: f64) -> Vec<ArmInput> {
    let wobble = [
        1.0, 1.004, 0.997, 1.002, 0.999, 1.001, 0.998, 1.003, 1.0, 0.996,
    ];
    let runs = |scale: f64, shift: usize| -> Vec<Vec<BenchRow>> {
        (0..n)
            .map(|i| {
                let w = wobble[(i + shift) % wobble.len()];
                vec![
                    row("m", 512, 0, &[100.0 * scale * w]),
                    row("m", 0, 128, &[10.0 * scale * w]),
                ]
            })
            .collect()
    };
    vec![
        arm("stock", Role::Stock, runs(1.0, 0)),
        arm("unlocked", Role::Other, runs(ratio, 3)),
        arm("again", Role::Other, runs(1.0, 5)),
    ]
}

fn schema6(arms: &[ArmInput]) -> Summary {
    analyze_with(
        arms,
        &Options {
            derivation: Derivation::Schema6,
            ..Options::default()
        },
    )
    .unwrap()
}

#[test]
fn verdicts_are_read_at_the_family_level() {
    let s = schema6(&bench(8, 7.2));
    assert_eq!(s.schema_version, 6);
    let family = s.statistics.verdicts.clone().unwrap();
    assert_eq!(family.intervals, 4);
    assert!((family.verdict_level - 0.9875).abs() < 1e-12);
    let cell = |arm: &str, row: usize| s.rows[row].arms.get(arm).unwrap().clone().unwrap();
    for row in 0..2 {
        let u = cell("unlocked", row);
        let basis = u.verdict_basis.unwrap();
        assert_eq!(u.verdict, Some(Verdict::Faster));
        let wide = basis.interval.unwrap();
        let ci = u.speedup_ci95.unwrap();
        // The printed interval stays the 95% one; the verdict's is wider.
        assert_eq!(ci.level, interval::CONFIDENCE_LEVEL);
        assert!(
            wide.low <= ci.low && wide.high >= ci.high,
            "{wide:?} {ci:?}"
        );
        assert_eq!(wide.level, family.verdict_level);
        assert_eq!(u.round_ratios.as_ref().unwrap().len(), 8);
        let a = cell("again", row);
        assert_ne!(a.verdict, Some(Verdict::Faster));
        assert_ne!(a.verdict, Some(Verdict::Slower));
    }
    let md = Markdown.render(&s).unwrap();
    assert!(
        md.contains("all 4 together are right with at least 95% probability"),
        "{md}"
    );
    assert!(md.contains("at 98.75%"), "{md}");
}

#[test]
fn a_level_out_of_reach_is_inconclusive_and_names_the_rounds() {
    // 6 rounds, two intervals of one arm: 97.5% each, beyond 6 rounds' 96.9%.
    let mut arms = bench(6, 7.2);
    arms.pop();
    let s = schema6(&arms);
    let u = s.rows[0].arms.get("unlocked").unwrap().clone().unwrap();
    assert_eq!(u.verdict, Some(Verdict::Inconclusive));
    assert_eq!(u.verdict_basis.unwrap().rounds_needed, Some(7));
    // Schema 5 calls the same data faster.
    let five = analyze(&arms).unwrap();
    let u5 = five.rows[0].arms.get("unlocked").unwrap().clone().unwrap();
    assert_eq!(u5.verdict, Some(Verdict::Faster));
    let md = Markdown.render(&s).unwrap();
    assert!(
        md.contains("unlocked pp512: inconclusive: its verdict needs a 97.5% interval"),
        "{md}"
    );
    assert!(md.contains("--rounds 7"), "{md}");
}

#[test]
fn schema_5_summaries_carry_no_schema_6_field() {
    let s = analyze(&bench(8, 7.2)).unwrap();
    assert_eq!(s.schema_version, 5);
    let json = serde_json::to_string(&s).unwrap();
    for key in [
        "verdicts",
        "verdict_basis",
        "round_ratios",
        "ratio_of_medians",
    ] {
        assert!(!json.contains(&format!("\"{key}\"")), "{key} in {json}");
    }
    let six = serde_json::to_string(&schema6(&bench(8, 7.2))).unwrap();
    for key in [
        "verdicts",
        "verdict_basis",
        "round_ratios",
        "ratio_of_medians",
    ] {
        assert!(six.contains(&format!("\"{key}\"")), "{key} missing");
    }
}

/// The run order of `bench(n, _)`'s arms, alternating which runs first, with durations.
fn sequence(n: usize, seconds: [f64; 3]) -> Vec<input::ProcessRun> {
    let names = ["stock", "unlocked", "again"];
    (0..n)
        .flat_map(|i| {
            let order: [usize; 3] = match i % 3 {
                0 => [0, 1, 2],
                1 => [2, 0, 1],
                _ => [1, 2, 0],
            };
            order.map(|a| input::ProcessRun {
                arm: names[a].into(),
                round: i as u32 + 1,
                seconds: Some(seconds[a]),
            })
        })
        .collect()
}

#[test]
fn the_run_order_gives_carry_over_and_durations() {
    let arms = bench(10, 7.2);
    let s = analyze_with(
        &arms,
        &Options {
            derivation: Derivation::Schema6,
            sequences: vec![sequence(10, [7.0, 1.0, 7.0])],
        },
    )
    .unwrap();
    let seconds = s.process_seconds.clone().unwrap();
    assert_eq!(seconds.get("unlocked"), Some(&1.0));
    let u = s.rows[0].arms.get("unlocked").unwrap().clone().unwrap();
    let c = u.carryover.unwrap();
    assert!(c.low <= c.estimate && c.estimate <= c.high, "{c:?}");
    // 7× shorter processes, but the rounds hardly scatter: the level stands.
    assert_eq!(u.unequal_durations, Some(false));
    assert!(
        !s.warnings.iter().any(|w| w.contains("in duration")),
        "{:?}",
        s.warnings
    );
    // Rounds that scatter by 10%: flagged, with a warning naming the arm.
    let mut noisy = arms.clone();
    for (i, run) in noisy[1].runs.iter_mut().enumerate() {
        for row in &mut run.rows {
            let w = if i % 2 == 0 { 1.12 } else { 0.9 };
            row.samples_ts.iter_mut().for_each(|v| *v *= w);
        }
    }
    let s = analyze_with(
        &noisy,
        &Options {
            derivation: Derivation::Schema6,
            sequences: vec![sequence(10, [7.0, 1.0, 7.0])],
        },
    )
    .unwrap();
    let u = s.rows[0].arms.get("unlocked").unwrap().clone().unwrap();
    assert_eq!(u.unequal_durations, Some(true));
    assert!(
        s.warnings
            .iter()
            .any(|w| w
                .starts_with("arm unlocked: its processes and stock's differ 7.0× in duration")),
        "{:?}",
        s.warnings
    );
    // Without the run order: neither.
    let s = schema6(&noisy);
    let u = s.rows[0].arms.get("unlocked").unwrap().clone().unwrap();
    assert_eq!((u.carryover, u.unequal_durations), (None, None));
}

#[test]
fn every_table_shows_one_point_per_arm() {
    // A noisy bench whose ratio of pooled medians differs from the paired estimate.
    let mut arms = bench(8, 1.0);
    arms.pop();
    for (i, run) in arms[1].runs.iter_mut().enumerate() {
        for row in &mut run.rows {
            let w = [1.3, 0.97, 0.96, 1.25, 0.98, 0.95, 1.2, 0.99][i];
            row.samples_ts.iter_mut().for_each(|v| *v *= w);
        }
    }
    let s = schema6(&arms);
    let u = s.rows[0].arms.get("unlocked").unwrap().clone().unwrap();
    let point = u.speedup_vs_stock.unwrap();
    let ratio = u.ratio_of_medians.unwrap();
    assert_eq!(point, u.speedup_precision.unwrap().center);
    assert!((point - ratio).abs() > 0.005, "{point} {ratio}");
    let shown = crate::export::format_speedup(Some(point));
    let md = Markdown.render(&s).unwrap();
    // The main table and the per-arm table show the same point; the ratio of medians only
    // under its own label.
    let main = md
        .lines()
        .find(|l| l.contains("| pp512 |") && l.contains('['))
        .unwrap();
    assert!(main.contains(&format!("{shown} [")), "{main}");
    let detail = md
        .lines()
        .find(|l| l.starts_with("| pp512 | unlocked"))
        .unwrap();
    let cells: Vec<&str> = detail.split('|').map(str::trim).collect();
    assert_eq!(cells[9], shown, "{detail}");
    assert_eq!(
        cells[13],
        crate::export::format_speedup(Some(ratio)),
        "{detail}"
    );
    assert!(md.contains("| ratio of medians |"), "{md}");
    // What the level rests on, in the report itself.
    assert!(
        md.contains("level is exact when the arm changes speed by a constant factor"),
        "{md}"
    );
    assert!(md.contains("pseudo-median of the rounds' ratios"), "{md}");
    let csv = crate::export::csv::Csv.render(&s).unwrap();
    let header = csv.lines().next().unwrap();
    assert!(header.contains("ratio_of_medians unlocked"), "{header}");
    let line = csv.lines().find(|l| l.contains("pp512,median_ts")).unwrap();
    assert!(line.contains(&point.to_string()) && line.contains(&ratio.to_string()));
    let json = serde_json::to_value(&s).unwrap();
    let cell = &json["rows"][0]["arms"]["unlocked"];
    assert_eq!(
        cell["speedup_vs_stock"],
        cell["speedup_precision"]["center"]
    );
    assert_eq!(cell["ratio_of_medians"].as_f64(), Some(ratio));
}

#[test]
fn a_carry_over_the_evidence_shows_is_warned_and_kept_in_the_summary() {
    // Every process right after an unlocked one runs 6% slower.
    let order = sequence(12, [7.0, 7.0, 7.0]);
    let mut arms = bench(12, 1.0);
    for (i, p) in order.iter().enumerate() {
        let slowed = i > 0 && order[i - 1].arm == "unlocked";
        if !slowed {
            continue;
        }
        let a = arms.iter_mut().find(|a| a.name == p.arm).unwrap();
        let run = a.runs.iter_mut().find(|r| r.round == p.round).unwrap();
        for row in &mut run.rows {
            row.samples_ts.iter_mut().for_each(|v| *v *= 0.94);
        }
    }
    let options = |sequence| Options {
        derivation: Derivation::Schema6,
        sequences: vec![sequence],
    };
    let s = analyze_with(&arms, &options(order.clone())).unwrap();
    let c = s.rows[0].arms.get("unlocked").unwrap().clone().unwrap();
    let c = c.carryover.unwrap();
    assert!((c.estimate - (-0.06)).abs() < 0.01, "{c:?}");
    assert!(c.matters(), "{c:?}");
    let warning = s
        .warnings
        .iter()
        .find(|w| w.starts_with("carry-over:"))
        .expect("a carry-over warning");
    let named = format!("unlocked pp512 {:+.1}% [", c.estimate * 100.0);
    assert!(warning.contains(&named), "{warning}");
    assert!(warning.contains("interval excludes 0"), "{warning}");
    assert!(warning.contains("--cooldown"), "{warning}");
    // The interval stays in summary.json.
    let json = serde_json::to_value(&s).unwrap();
    assert!(json["rows"][0]["arms"]["unlocked"]["carryover"]["low"].is_f64());
    // None: no warning, the interval still in the summary.
    let s = analyze_with(&bench(12, 1.0), &options(order)).unwrap();
    assert!(
        !s.warnings.iter().any(|w| w.starts_with("carry-over:")),
        "{:?}",
        s.warnings
    );
    let json = serde_json::to_value(&s).unwrap();
    assert!(json["rows"][0]["arms"]["unlocked"]["carryover"]["high"].is_f64());
}

/// Percent of host in the tables: with several host processes its interval, with one the
/// rounded figure marked as a single host process, each with the paragraph saying how.
#[test]
fn percent_of_host_is_shown_with_its_interval_or_marked_as_one_host_process() {
    let with_hosts = |n: usize| {
        let mut arms = bench(12, 2.0);
        arms.push(arm(
            "host",
            Role::Host,
            (0..n)
                .map(|j| {
                    let w = 1.0 + 0.01 * j as f64;
                    vec![
                        row("m", 512, 0, &[400.0 * w]),
                        row("m", 0, 128, &[40.0 * w]),
                    ]
                })
                .collect(),
        ));
        schema6(&arms)
    };
    let md = Markdown.render(&with_hosts(4)).unwrap();
    let line = md.lines().find(|l| l.contains("| pp512 |")).unwrap();
    // unlocked at 200 tokens/s against a host at 400–412: about 49.6%, with its interval.
    assert!(line.contains("% [4"), "{line}");
    assert!(md.contains("two-sample Hodges-Lehmann estimate"), "{md}");
    assert!(!md.contains("(1 host process)"), "{md}");
    let csv = crate::export::csv::Csv.render(&with_hosts(4)).unwrap();
    assert!(
        csv.lines()
            .next()
            .unwrap()
            .contains("host_processes unlocked"),
        "{csv}"
    );

    let md = Markdown.render(&with_hosts(1)).unwrap();
    let line = md.lines().find(|l| l.contains("| pp512 |")).unwrap();
    assert!(line.contains("% (1 host process)"), "{line}");
    assert!(
        md.contains("Of host, unlocked pp512, again pp512, unlocked tg128, again tg128: no interval: a single host process"),
        "{md}"
    );
    assert!(!md.contains("With several host processes"), "{md}");
    // Schema 5 shows its ratio of medians, no interval, no mark, no paragraph.
    let mut arms = bench(12, 2.0);
    arms.push(arm(
        "host",
        Role::Host,
        vec![vec![row("m", 512, 0, &[400.0])]],
    ));
    let md = Markdown.render(&analyze(&arms).unwrap()).unwrap();
    assert!(
        !md.contains("host process") && !md.contains("Percent of host:"),
        "{md}"
    );
}
