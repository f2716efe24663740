//! Tests of [`analyze`](super::analyze), and the arms and rows other tests build inputs from.

use super::*;

/// A row of `model` with `samples` for test (p, g).
pub(crate) fn row(model: &str, p: u64, g: u64, samples: &[f64]) -> BenchRow {
    BenchRow {
        unit: None,
        key: TestKey {
            n_prompt: p,
            n_gen: g,
            n_depth: 0,
            quantity: Default::default(),
        },
        model: ModelId {
            filename: format!("/m/{model}.gguf"),
            model_type: model.to_string(),
            size_bytes: Some(1000),
            n_params: Some(10),
        },
        samples_ts: samples.to_vec(),
        build_commit: Some("abc123".into()),
        build_number: Some(42),
        backends: None,
        n_threads: None,
        n_gpu_layers: None,
        settings: Vec::new(),
    }
}

fn with(mut row: BenchRow, field: &str, value: &str) -> BenchRow {
    row.settings.push((field.into(), value.into()));
    row
}

#[test]
fn each_bundle_is_compared_within_itself() {
    let grouped = |name: &str, role, group: &str, v: f64| {
        let mut a = arm(name, role, vec![vec![row("m", 512, 0, &[v])]]);
        a.group = Some(group.into());
        a
    };
    let inputs = vec![
        grouped("a/host", Role::Host, "a", 200.0),
        grouped("a/stock", Role::Stock, "a", 10.0),
        grouped("b/stock", Role::Stock, "b", 20.0),
        grouped("b/u", Role::Other, "b", 100.0),
    ];
    let s = analyze(&inputs).unwrap();
    let cell = |s: &Summary, arm: &str| s.rows[0].arms.get(arm).unwrap().clone().unwrap();
    assert_eq!(cell(&s, "a/stock").percent_of_host, Some(5.0));
    // b has no host arm: a's is not b's reference.
    assert_eq!(cell(&s, "b/u").percent_of_host, None);
    assert_eq!(cell(&s, "b/stock").percent_of_host, None);
    assert_eq!(cell(&s, "b/u").speedup_vs_stock, Some(5.0));
    // An explicit reference (report --host a/host) applies to every arm.
    let mut explicit = inputs.clone();
    explicit[0].reference_for_all = true;
    let s = analyze(&explicit).unwrap();
    assert_eq!(cell(&s, "b/u").percent_of_host, Some(50.0));
    assert_eq!(cell(&s, "b/u").speedup_vs_stock, Some(5.0));
}

#[test]
fn rows_of_one_test_with_different_settings_are_not_pooled() {
    // `llama-bench -t 1,2` writes two pp512 rows into one file.
    let err = analyze(&[arm(
        "stock",
        Role::Stock,
        vec![vec![
            with(row("m", 512, 0, &[1.0]), "n_threads", "1"),
            with(row("m", 512, 0, &[2.0]), "n_threads", "2"),
        ]],
    )])
    .unwrap_err()
    .to_string();
    for part in [
        "arm stock, test pp512",
        "stock-0.json",
        "n_threads = 1",
        "n_threads = 2",
        "one value per option",
        "after `--`",
    ] {
        assert!(err.contains(part), "{part:?} missing: {err}");
    }
    // Across two files of one arm.
    let err = analyze(&[arm(
        "u",
        Role::Other,
        vec![
            vec![with(row("m", 512, 0, &[1.0]), "flash_attn", "false")],
            vec![with(row("m", 512, 0, &[2.0]), "flash_attn", "true")],
        ],
    )])
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("u-0.json") && err.contains("u-1.json") && err.contains("flash_attn = false"),
        "{err}"
    );
    // A field only one row has (another llama-bench build) is not a difference.
    analyze(&[arm(
        "u",
        Role::Other,
        vec![
            vec![row("m", 512, 0, &[1.0])],
            vec![with(row("m", 512, 0, &[2.0]), "flash_attn", "true")],
        ],
    )])
    .unwrap();
    // Different tests may differ (llama-bench -p 512 -n 128 in one run is fine).
    analyze(&[arm(
        "u",
        Role::Other,
        vec![vec![
            with(row("m", 512, 0, &[1.0]), "n_threads", "1"),
            with(row("m", 0, 128, &[2.0]), "n_threads", "2"),
        ]],
    )])
    .unwrap();
    // Across arms: a warning, not an error.
    let s = analyze(&[
        arm(
            "stock",
            Role::Stock,
            vec![vec![with(row("m", 512, 0, &[1.0]), "n_gpu_layers", "0")]],
        ),
        arm(
            "u",
            Role::Other,
            vec![vec![with(row("m", 512, 0, &[2.0]), "n_gpu_layers", "99")]],
        ),
    ])
    .unwrap();
    assert!(
        s.warnings.iter().any(|w| w.contains("test pp512")
            && w.contains("n_gpu_layers = 0")
            && w.contains("n_gpu_layers = 99")
            && w.contains("rerun them with the same llama-bench options")),
        "{:?}",
        s.warnings
    );
    // Asked for by an arm's own bench-args: said so, with no advice to undo it.
    let mut fa = arm(
        "fa1",
        Role::Other,
        vec![vec![with(row("m", 512, 0, &[2.0]), "flash_attn", "true")]],
    );
    fa.args = vec!["-fa".into(), "1".into()];
    let s = analyze(&[
        arm(
            "stock",
            Role::Stock,
            vec![vec![with(row("m", 512, 0, &[1.0]), "flash_attn", "false")]],
        ),
        fa,
    ])
    .unwrap();
    assert!(
        s.warnings
            .iter()
            .any(|w| w.contains("flash_attn = true, as their bench-args ask")
                && !w.contains("rerun")),
        "{:?}",
        s.warnings
    );
}

pub(crate) fn arm(name: &str, role: Role, runs: Vec<Vec<BenchRow>>) -> ArmInput {
    ArmInput {
        name: name.into(),
        role,
        group: None,
        reference_for_all: false,
        runs: runs
            .into_iter()
            .enumerate()
            .map(|(i, rows)| RunInput {
                round: i as u32 + 1,
                path: PathBuf::from(format!("{name}-{i}.json")),
                rows,
            })
            .collect(),
        args: Vec::new(),
        metal: Vec::new(),
        activation: None,
        randomized: true,
    }
}

#[test]
fn medians_speedups_and_percent_of_host() {
    let s = analyze(&[
        arm(
            "unlocked",
            Role::Other,
            vec![vec![row("m", 512, 0, &[90.0, 100.0, 110.0])]],
        ),
        arm(
            "stock",
            Role::Stock,
            // even count over two files: median (9 + 11) / 2 = 10
            vec![
                vec![row("m", 512, 0, &[9.0, 12.0])],
                vec![row("m", 512, 0, &[11.0, 8.0])],
            ],
        ),
        arm("host", Role::Host, vec![vec![row("m", 512, 0, &[200.0])]]),
    ])
    .unwrap();
    assert_eq!(s.arm_order, vec!["host", "stock", "unlocked"]);
    assert_eq!(s.other_arms(), vec!["unlocked"]);
    let r = &s.rows[0];
    assert_eq!(r.test, "pp512");
    let stock = r.arms.get("stock").unwrap().as_ref().unwrap();
    assert_eq!(
        (stock.median_ts, stock.min_ts, stock.max_ts, stock.samples),
        (10.0, 8.0, 12.0, 4)
    );
    assert_eq!(stock.speedup_vs_stock, None);
    assert_eq!(stock.percent_of_host, Some(5.0));
    assert_eq!(stock.rounds.len(), 2);
    assert_eq!(stock.rounds[0].median_ts, 10.5);
    let unlocked = r.arms.get("unlocked").unwrap().as_ref().unwrap();
    assert_eq!(unlocked.median_ts, 100.0);
    assert_eq!(unlocked.speedup_vs_stock, Some(10.0));
    assert_eq!(unlocked.percent_of_host, Some(50.0));
    // One file against two: one paired round, below the minimum: no interval, and why.
    assert_eq!(unlocked.speedup_ci95, None);
    assert_eq!(unlocked.verdict, None);
    let why = unlocked.speedup_no_interval.as_deref().unwrap();
    assert!(
        why.contains("1 round with both arms")
            && why.contains(&format!("at least {}", interval::MIN_ROUNDS)),
        "{why}"
    );
    assert_eq!(stock.speedup_no_interval, None);
    let host = r.arms.get("host").unwrap().as_ref().unwrap();
    assert_eq!(host.percent_of_host, None);
    assert_eq!(host.speedup_vs_stock, Some(20.0));
    // 8..12 around 10 is a large spread: flagged.
    assert!(
        s.warnings
            .iter()
            .any(|w| w.starts_with("arm stock, pp512: samples vary")),
        "{:?}",
        s.warnings
    );
}

#[test]
fn missing_rows_stay_missing() {
    let s = analyze(&[
        arm(
            "stock",
            Role::Stock,
            vec![vec![row("m", 512, 0, &[10.0]), row("m", 0, 128, &[1.0])]],
        ),
        arm(
            "unlocked",
            Role::Other,
            vec![vec![row("m", 512, 0, &[20.0])]],
        ),
    ])
    .unwrap();
    assert_eq!(s.rows.len(), 2);
    assert_eq!(s.rows[1].test, "tg128");
    assert_eq!(s.rows[1].arms.get("unlocked"), Some(&None));
    assert_eq!(s.host, None);
    let json = serde_json::to_value(&s.rows[1]).unwrap();
    assert!(json["arms"]["unlocked"].is_null());
    // Speedup against a stock arm that lacks the test is null, not zero.
    let s = analyze(&[
        arm("stock", Role::Stock, vec![vec![row("m", 512, 0, &[10.0])]]),
        arm("u", Role::Other, vec![vec![row("m", 0, 128, &[20.0])]]),
    ])
    .unwrap();
    let u = s.rows[1].arms.get("u").unwrap().as_ref().unwrap();
    assert_eq!(u.speedup_vs_stock, None);
}

#[test]
fn one_arm_one_model() {
    let err = analyze(&[arm(
        "stock",
        Role::Stock,
        vec![
            vec![row("tiny", 512, 0, &[1.0])],
            vec![row("gemma", 512, 0, &[1.0])],
        ],
    )])
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("stock-0.json") && err.contains("stock-1.json"),
        "{err}"
    );
    assert!(err.contains("run `capshim report` once per model"), "{err}");
    // Different models across arms: allowed, with a warning.
    let s = analyze(&[
        arm(
            "stock",
            Role::Stock,
            vec![vec![row("tiny", 512, 0, &[1.0])]],
        ),
        arm("u", Role::Other, vec![vec![row("gemma", 512, 0, &[1.0])]]),
    ])
    .unwrap();
    assert!(
        s.warnings[0].contains("different models"),
        "{:?}",
        s.warnings
    );
}

/// The host and stock of different models are one disagreement, warned once (not as host
/// against stock and again as stock against host).
#[test]
fn different_models_of_two_references_are_warned_once() {
    let s = analyze(&[
        arm(
            "stock",
            Role::Stock,
            vec![vec![row("tiny", 512, 0, &[1.0])]],
        ),
        arm("host", Role::Host, vec![vec![row("gemma", 512, 0, &[1.0])]]),
    ])
    .unwrap();
    let warned = s.warnings.iter().filter(|w| w.contains("different models"));
    assert_eq!(warned.count(), 1, "{:?}", s.warnings);
}

#[test]
fn drift_between_rounds_is_flagged() {
    let s = analyze(&[arm(
        "stock",
        Role::Stock,
        vec![
            vec![row("m", 512, 0, &[100.0, 100.1, 100.2])],
            vec![row("m", 512, 0, &[110.0, 110.1, 110.2])],
        ],
    )])
    .unwrap();
    assert!(
        s.warnings
            .iter()
            .any(|w| w.contains("round medians drift apart")),
        "{:?}",
        s.warnings
    );
}

/// A command's figures (a wall time in seconds) keep their digits in the drift warning, as
/// in its table: 0.0612 s, not 0.06.
#[test]
fn a_commands_drift_is_shown_with_its_digits_and_unit() {
    let timed = |v: f64| BenchRow {
        unit: Some("s".into()),
        ..row("m", 512, 0, &[v, v, v])
    };
    let s = analyze(&[arm(
        "stock",
        Role::Stock,
        vec![vec![timed(0.0612)], vec![timed(0.0731)]],
    )])
    .unwrap();
    assert!(
        s.warnings
            .iter()
            .any(|w| w.contains("(r1 0.0612, r2 0.0731 s)")),
        "{:?}",
        s.warnings
    );
}

#[test]
fn duplicate_and_empty_arms_are_refused() {
    let a = arm("x", Role::Stock, vec![vec![row("m", 1, 0, &[1.0])]]);
    assert!(matches!(
        analyze(&[a.clone(), a]),
        Err(AnalyzeError::DuplicateArm(_))
    ));
    assert!(matches!(
        analyze(&[arm("y", Role::Other, vec![vec![]])]),
        Err(AnalyzeError::EmptyArm(_))
    ));
}

#[test]
fn paired_rounds_give_an_interval_a_verdict_and_a_precision() {
    // Six rounds; the unlocked arm is 7.2× stock in every round, give or take 1%.
    let wobble = [1.0, 1.01, 0.99, 1.005, 0.995, 1.0];
    let stock: Vec<Vec<BenchRow>> = wobble
        .iter()
        .map(|w| vec![row("m", 512, 0, &[100.0 * w, 101.0 * w, 99.0 * w])])
        .collect();
    let unlocked: Vec<Vec<BenchRow>> = wobble
        .iter()
        .rev()
        .map(|w| vec![row("m", 512, 0, &[720.0 * w, 727.0 * w, 713.0 * w])])
        .collect();
    let again = stock.clone();
    let s = analyze(&[
        arm("stock", Role::Stock, stock),
        arm("unlocked", Role::Other, unlocked),
        arm("again", Role::Other, again),
    ])
    .unwrap();
    let cell = |arm: &str| s.rows[0].arms.get(arm).unwrap().clone().unwrap();
    let u = cell("unlocked");
    let ci = u.speedup_ci95.unwrap();
    assert!(ci.contains(7.2) && ci.low > 7.0 && ci.high < 7.4, "{ci:?}");
    assert_eq!(ci.level, interval::CONFIDENCE_LEVEL);
    assert_eq!(u.verdict, Some(interval::Verdict::Faster));
    let p = u.speedup_precision.unwrap();
    assert_eq!(p.rounds, 6);
    assert!((p.coverage - (1.0 - 2.0 / 64.0)).abs() < 1e-12, "{p:?}");
    assert!(p.half_width > 0.0 && p.half_width < 0.03, "{p:?}");
    assert_eq!(u.speedup_no_interval, None);
    // The same processes as stock: no difference at all, within the band.
    let a = cell("again");
    assert_eq!(a.verdict, Some(interval::Verdict::NoMeasurableDifference));
    assert_eq!(a.speedup_precision.unwrap().half_width, 0.0);
    let json = serde_json::to_value(&s).unwrap();
    let u = &json["rows"][0]["arms"]["unlocked"];
    assert_eq!(u["verdict"], "faster");
    assert!(u["speedup_ci95"]["low"].is_f64() && u["speedup_ci95"]["high"].is_f64());
    assert_eq!(u["speedup_precision"]["rounds"], 6);
    // analyze() is schema 5's derivation, and says so.
    assert_eq!(json["schema_version"], 5);
    assert_eq!(json["statistics"]["confidence_level"], 0.95);
}

#[test]
fn intervals_on_rounds_not_run_in_bench_order_are_flagged_once_per_arm() {
    let rounds = |scale: f64| -> Vec<Vec<BenchRow>> {
        [1.0, 1.02, 0.98, 1.01, 0.99, 1.0]
            .iter()
            .map(|w| {
                vec![
                    row("m", 512, 0, &[100.0 * scale * w]),
                    row("m", 0, 128, &[10.0 * scale * w]),
                ]
            })
            .collect()
    };
    let flagged = |arms: &[ArmInput]| -> Vec<String> {
        analyze(arms)
            .unwrap()
            .warnings
            .into_iter()
            .filter(|w| w.contains("side by side in one"))
            .collect()
    };
    // One bench bundle: by design, no warning.
    let bench = [
        arm("stock", Role::Stock, rounds(1.0)),
        arm("unlocked", Role::Other, rounds(7.0)),
    ];
    assert!(flagged(&bench).is_empty());
    // Files given with --arm: one warning for the arm, not one per test.
    let mut files = bench.clone();
    for a in &mut files {
        a.randomized = false;
    }
    let w = flagged(&files);
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(
        w[0].starts_with("arm unlocked:") && w[0].contains("of stock"),
        "{w:?}"
    );
    // capshim has no record of how files ran: it says it cannot know, not that they did not.
    assert!(w[0].contains("capshim cannot know whether"), "{w:?}");
    assert!(!w[0].contains("did not run"), "{w:?}");
    // Two bundles with one stock for all: each bundle's rounds ran apart from the other's, so
    // there is no interval to flag: a ratio of medians, its spread and a note ([`across`]).
    let mut two = bench.clone();
    two[0].group = Some("a".into());
    two[0].reference_for_all = true;
    two[1].group = Some("b".into());
    assert!(flagged(&two).is_empty());
    let s = analyze(&two).unwrap();
    for row in &s.rows {
        let u = row.arms.get("unlocked").unwrap().clone().unwrap();
        assert_eq!(
            (u.speedup_ci95, u.verdict, u.speedup_precision),
            (None, None, None)
        );
        assert!((u.speedup_vs_stock.unwrap() - 7.0).abs() < 1e-9, "{u:?}");
        let [lo, hi] = u.speedup_spread.unwrap();
        assert!(lo < 7.0 && hi > 7.0, "{lo} {hi}");
        assert!(
            u.speedup_no_interval
                .unwrap()
                .contains("did not run in the same capshim bench")
        );
    }
}

/// Two bundles (groups) of different models: rows name each model, and the different-models
/// warning names only pairs that are compared (an arm and its own group's stock, or the stock
/// named for all), never two bundles' arms that no figure relates.
#[test]
fn models_are_labelled_and_warned_about_per_comparison() {
    let grouped = |name: &str, role, model: &str, group: &str| {
        let mut a = arm(name, role, vec![vec![row(model, 512, 0, &[1.0])]]);
        a.group = Some(group.into());
        a
    };
    let arms = vec![
        grouped("a/stock", Role::Stock, "tiny", "a"),
        grouped("a/u", Role::Other, "tiny", "a"),
        grouped("b/stock", Role::Stock, "gemma", "b"),
        grouped("b/u", Role::Other, "gemma", "b"),
    ];
    let s = analyze(&arms).unwrap();
    assert_eq!(s.rows[0].model, "tiny, gemma");
    assert!(
        !s.warnings.iter().any(|w| w.contains("different models")),
        "{:?}",
        s.warnings
    );
    // a/stock named for every arm: b's arms are compared with it, and only they are named.
    let mut arms = arms;
    arms[0].reference_for_all = true;
    arms[2].role = Role::Other;
    let s = analyze(&arms).unwrap();
    let models: Vec<&String> = s
        .warnings
        .iter()
        .filter(|w| w.contains("different models"))
        .collect();
    assert_eq!(models.len(), 2, "{models:?}");
    assert!(models.iter().all(|w| w.starts_with("arm b/")), "{models:?}");
}

/// Schema 6: percent of host from several host processes gets the two-sample estimate and
/// interval; from one, the rounded ratio of medians, marked; schema 5 keeps its ratio of
/// medians and none of the new fields.
#[test]
fn percent_of_host_from_several_host_processes_and_from_one() {
    let guest: Vec<Vec<BenchRow>> = (0..12)
        .map(|i| vec![row("m", 512, 0, &[50.0 + (i % 4) as f64])])
        .collect();
    let hosts = |n: usize| -> Vec<Vec<BenchRow>> {
        (0..n)
            .map(|j| vec![row("m", 512, 0, &[100.0 + j as f64])])
            .collect()
    };
    let six = Options {
        derivation: Derivation::Schema6,
        sequences: Vec::new(),
    };
    let arms = |n| {
        vec![
            arm("stock", Role::Stock, guest.clone()),
            arm("u", Role::Other, guest.clone()),
            arm("host", Role::Host, hosts(n)),
        ]
    };
    let s = analyze_with(&arms(5), &six).unwrap();
    let stock = s.rows[0].arms.get("stock").unwrap().as_ref().unwrap();
    let ci = stock.percent_of_host_ci95.unwrap();
    let p = stock.percent_of_host.unwrap();
    assert!(
        ci.low < p && p < ci.high && ci.low > 48.0 && ci.high < 54.0,
        "{ci:?} {p}"
    );
    let basis = stock.percent_of_host_basis.as_ref().unwrap();
    assert_eq!((basis.host_processes, basis.guest_processes), (5, 12));
    assert!(basis.coverage.unwrap() >= 0.95);
    let json = serde_json::to_value(stock).unwrap();
    assert!(json["percent_of_host_ci95"]["low"].is_number(), "{json}");
    assert_eq!(json["percent_of_host_basis"]["host_processes"], 5);

    let s = analyze_with(&arms(1), &six).unwrap();
    let stock = s.rows[0].arms.get("stock").unwrap().as_ref().unwrap();
    // Rounds scatter by ~2.6%: 51.5 / 100 = 51.5% is shown to whole percent.
    assert_eq!(stock.percent_of_host, Some(52.0));
    assert_eq!(stock.percent_of_host_ci95, None);
    let basis = stock.percent_of_host_basis.as_ref().unwrap();
    assert_eq!((basis.host_processes, basis.resolution), (1, Some(1.0)));

    let s = analyze(&arms(5)).unwrap();
    let stock = s.rows[0].arms.get("stock").unwrap().as_ref().unwrap();
    assert_eq!(stock.percent_of_host, Some(100.0 * 51.5 / 102.0));
    assert_eq!(stock.percent_of_host_basis, None);
    let json = serde_json::to_value(stock).unwrap();
    assert!(json.get("percent_of_host_basis").is_none(), "{json}");
}
