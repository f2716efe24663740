//! `capshim report` on llama-bench files written here, with known medians.

mod common;

use common::{capshim, result, samples_with_median, write_json, write_jsonl};
use predicates::prelude::*;

/// The published M1 Ultra figures (docs/design.md, "The problem, in facts"), written as the three arms' llama-bench
/// files: host and unlocked in one `-o json` file each (10 samples, even count), stock split over
/// two files (5 + 4 samples, odd count) as two separate llama-bench runs. Returns the three
/// `--arm` arguments.
fn published(dir: &std::path::Path, model: &str, fig: [[f64; 3]; 2]) -> Vec<String> {
    let [pp, tg] = fig;
    let host = write_json(
        dir,
        &format!("{model}-host.json"),
        &[
            result(model, 512, 0, &samples_with_median(pp[0], 10)),
            result(model, 0, 128, &samples_with_median(tg[0], 10)),
        ],
    );
    // 5 + 4 samples: the merged median is the 5th of 9, the value itself.
    let mut pp_stock = samples_with_median(pp[1], 9);
    let pp_b = pp_stock.split_off(5);
    let mut tg_stock = samples_with_median(tg[1], 9);
    let tg_b = tg_stock.split_off(5);
    let stock_a = write_json(
        dir,
        &format!("{model}-stock-a.json"),
        &[
            result(model, 512, 0, &pp_stock),
            result(model, 0, 128, &tg_stock),
        ],
    );
    let stock_b = write_jsonl(
        dir,
        &format!("{model}-stock-b.jsonl"),
        &[result(model, 512, 0, &pp_b), result(model, 0, 128, &tg_b)],
    );
    let unlocked = write_json(
        dir,
        &format!("{model}-unlocked.json"),
        &[
            result(model, 512, 0, &samples_with_median(pp[2], 10)),
            result(model, 0, 128, &samples_with_median(tg[2], 10)),
        ],
    );
    vec![
        format!("--arm=host={}", host.display()),
        format!("--arm=stock={},{}", stock_a.display(), stock_b.display()),
        format!("--arm=unlocked={}", unlocked.display()),
    ]
}

fn report(args: &[String]) -> String {
    let out = capshim().arg("report").args(args).assert().success();
    String::from_utf8(out.get_output().stdout.clone()).unwrap()
}

/// Cells of the main table's line for `test`, trimmed.
fn table_line(markdown: &str, test: &str) -> Vec<String> {
    let line = markdown
        .lines()
        .find(|l| l.starts_with("| ") && l.split('|').nth(2).map(str::trim) == Some(test))
        .unwrap_or_else(|| panic!("no {test} line in\n{markdown}"));
    line.trim_matches('|')
        .split('|')
        .map(|c| c.trim().to_string())
        .collect()
}

#[test]
fn reproduces_the_published_tinyllama_table() {
    let tmp = tempfile::tempdir().unwrap();
    let args = published(
        tmp.path(),
        "TinyLlama 1.1B Q4_K_M",
        [[4871.99, 431.86, 4786.70], [286.71, 12.63, 206.60]],
    );
    let md = report(&args);
    assert_eq!(
        table_line(&md, "pp512"),
        [
            "TinyLlama 1.1B Q4_K_M",
            "pp512",
            "4871.99",
            "431.86",
            "4786.70",
            "11.08×",
            "98.25%"
        ]
    );
    assert_eq!(
        table_line(&md, "tg128"),
        [
            "TinyLlama 1.1B Q4_K_M",
            "tg128",
            "286.71",
            "12.63",
            "206.60",
            "16.36×",
            "72.06%"
        ]
    );
    insta::assert_snapshot!("published_tinyllama", md);
}

#[test]
fn reproduces_the_published_gemma_table() {
    // The published Gemma tg128 ratios (14.54×, 94.82%) were computed from unrounded medians;
    // these medians print as the published 52.38 / 3.41 / 49.67 and give the published ratios.
    let tmp = tempfile::tempdir().unwrap();
    let args = published(
        tmp.path(),
        "Gemma 4 12B QAT Q4_0",
        [[517.88, 71.66, 515.76], [52.378, 3.4149, 49.667]],
    );
    let md = report(&args);
    assert_eq!(
        table_line(&md, "pp512")[2..],
        ["517.88", "71.66", "515.76", "7.20×", "99.59%"]
    );
    assert_eq!(
        table_line(&md, "tg128")[2..],
        ["52.38", "3.41", "49.67", "14.54×", "94.82%"]
    );
    insta::assert_snapshot!("published_gemma", md);
}

#[test]
fn json_has_the_documented_shape() {
    let tmp = tempfile::tempdir().unwrap();
    let mut args = published(
        tmp.path(),
        "TinyLlama 1.1B Q4_K_M",
        [[4871.99, 431.86, 4786.70], [286.71, 12.63, 206.60]],
    );
    args.push("--json".into());
    let v: serde_json::Value = serde_json::from_str(&report(&args)).unwrap();
    let row = &v["rows"][0];
    assert_eq!(row["test"], "pp512");
    assert_eq!(row["n_prompt"], 512);
    assert_eq!(row["n_gen"], 0);
    assert_eq!(row["n_depth"], 0);
    let stock = &row["arms"]["stock"];
    assert_eq!(stock["median_ts"], 431.86);
    assert_eq!(stock["samples"], 9);
    assert!(stock["speedup_vs_stock"].is_null());
    let pct = stock["percent_of_host"].as_f64().unwrap();
    assert!((pct - 100.0 * 431.86 / 4871.99).abs() < 1e-9);
    let unlocked = &row["arms"]["unlocked"];
    assert_eq!(unlocked["samples"], 10);
    let speedup = unlocked["speedup_vs_stock"].as_f64().unwrap();
    assert!((speedup - 4786.70 / 431.86).abs() < 1e-9, "{speedup}");
    assert!(unlocked["min_ts"].as_f64().unwrap() < 4786.70);
    assert!(unlocked["max_ts"].as_f64().unwrap() > 4786.70);
    assert!(row["arms"]["host"]["percent_of_host"].is_null());
    // One file per arm (stock: two): one paired round, no interval, and why.
    assert!(unlocked["speedup_ci95"].is_null(), "{unlocked}");
    assert!(unlocked["verdict"].is_null() && unlocked["speedup_precision"].is_null());
    let why = unlocked["speedup_no_interval"].as_str().unwrap();
    assert!(why.contains("the interval needs at least 6"), "{why}");
    assert_eq!(v["statistics"]["confidence_level"], 0.95);
    assert_eq!(v["statistics"]["noise_band"], 0.02);
}

/// Six files per arm, given in run order, are six paired rounds: an interval, a verdict and
/// the precision, in every format.
#[test]
fn paired_files_give_an_interval_and_a_verdict() {
    let tmp = tempfile::tempdir().unwrap();
    let mut stock = Vec::new();
    let mut unlocked = Vec::new();
    let mut again = Vec::new();
    for (i, wobble) in [1.0, 1.02, 0.97, 1.01, 0.99, 1.03].iter().enumerate() {
        let s = [431.0 * wobble, 433.0 * wobble, 429.0 * wobble];
        stock.push(write_json(
            tmp.path(),
            &format!("s{i}.json"),
            &[result("m", 512, 0, &s)],
        ));
        let u: Vec<f64> = s.iter().map(|v| v * 11.08).collect();
        unlocked.push(write_json(
            tmp.path(),
            &format!("u{i}.json"),
            &[result("m", 512, 0, &u)],
        ));
        let a: Vec<f64> = s
            .iter()
            .map(|v| v * [1.05, 1.08, 0.93, 0.96, 1.02, 0.98][i])
            .collect();
        again.push(write_json(
            tmp.path(),
            &format!("a{i}.json"),
            &[result("m", 512, 0, &a)],
        ));
    }
    let list = |files: &[std::path::PathBuf]| {
        files
            .iter()
            .map(|f| f.display().to_string())
            .collect::<Vec<_>>()
            .join(",")
    };
    let args = vec![
        format!("--arm=stock={}", list(&stock)),
        format!("--arm=unlocked={}", list(&unlocked)),
        format!("--arm=again={}", list(&again)),
    ];
    let md = report(&args);
    assert_eq!(
        table_line(&md, "pp512")[5..],
        [
            "11.08× [11.08 11.08] faster",
            // Six rounds: from the smallest to the largest round ratio; the centre is the
            // median of the 21 Walsh averages of their logs (computed by hand: 1.0022).
            "1.00× [0.93 1.08] inconclusive"
        ]
    );
    assert!(md.contains("| ±0.0% | within ±2%"), "{md}");
    // Half of ln(1.08 / 0.93) is ±7.8%; the rounds' log ratios spread by 0.0566, so
    // (1.96 × 0.0566 × √(π/3) / ln 1.02)² ≈ 32.1 rounds.
    assert!(md.contains("| ±7.8% | ~33 rounds for ±2%"), "{md}");
    // Files given with --arm carry no record of bench's random order: the report says capshim
    // cannot know, and what the interval then assumes, once per arm.
    assert_eq!(
        md.matches("capshim cannot know whether the rounds of")
            .count(),
        2,
        "{md}"
    );
    assert!(!md.contains("did not run side by side"), "{md}");
    assert_eq!(
        md.matches("side by side in one capshim bench's random order")
            .count(),
        2,
        "{md}"
    );
    let mut json_args = args.clone();
    json_args.push("--json".into());
    let v: serde_json::Value = serde_json::from_str(&report(&json_args)).unwrap();
    let a = &v["rows"][0]["arms"]["again"];
    assert_eq!(a["verdict"], "inconclusive");
    assert_eq!(a["speedup_precision"]["rounds"], 6);
    assert_eq!(a["speedup_precision"]["coverage"], 1.0 - 2.0 / 64.0);
    assert!((a["speedup_precision"]["center"].as_f64().unwrap() - 1.002_197_585).abs() < 1e-8);
    assert!(
        a["speedup_precision"]["rounds_for_noise_band"]
            .as_u64()
            .unwrap()
            > 6
    );
    assert!(a["speedup_ci95"]["low"].as_f64().unwrap() < 1.0);
    let mut csv_args = args;
    csv_args.push("--csv".into());
    let csv = report(&csv_args);
    let header = csv.lines().next().unwrap();
    assert!(
        header.ends_with(
            "speedup again,ci95_low again,ci95_high again,half_width again,verdict again,rounds_for_noise_band again"
        ),
        "{header}"
    );
    assert!(csv.contains(",faster,"), "{csv}");
    assert!(csv.contains(",inconclusive,"), "{csv}");
    assert!(csv.contains("\nm,pp512,rounds,count,6,6,6,"), "{csv}");
}

#[test]
fn missing_rows_are_shown_as_missing() {
    let tmp = tempfile::tempdir().unwrap();
    let stock = write_json(
        tmp.path(),
        "stock.json",
        &[
            result("m", 512, 0, &[10.0, 11.0, 12.0]),
            result("m", 0, 128, &[1.0, 2.0]),
        ],
    );
    let unlocked = write_json(tmp.path(), "u.json", &[result("m", 512, 0, &[30.0])]);
    let args = vec![
        format!("--arm=stock={}", stock.display()),
        format!("--arm=apple9-64k={}", unlocked.display()),
    ];
    let md = report(&args);
    assert_eq!(
        table_line(&md, "tg128"),
        ["m", "tg128", "1.50", "missing", "—"]
    );
    assert_eq!(
        table_line(&md, "pp512"),
        ["m", "pp512", "11.00", "30.00", "2.73×"]
    );
    let mut json_args = args.clone();
    json_args.push("--json".into());
    let v: serde_json::Value = serde_json::from_str(&report(&json_args)).unwrap();
    assert!(v["rows"][1]["arms"]["apple9-64k"].is_null());
    assert_eq!(v["rows"][1]["arms"]["stock"]["median_ts"], 1.5);

    let mut csv_args = args;
    csv_args.push("--csv".into());
    let csv = report(&csv_args);
    assert_eq!(
        csv.lines().next().unwrap(),
        "workload,test,metric,unit,stock,apple9-64k,speedup apple9-64k,ci95_low apple9-64k,\
         ci95_high apple9-64k,half_width apple9-64k,verdict apple9-64k,rounds_for_noise_band apple9-64k"
    );
    assert!(
        csv.contains("\nm,pp512,median_ts,tokens/s,11,30,2.727"),
        "{csv}"
    );
    assert!(
        csv.contains(",,,,no interval: 1 round with both arms;"),
        "{csv}"
    );
    assert!(
        csv.contains("\nm,tg128,median_ts,tokens/s,1.5,,,,,,,\n"),
        "{csv}"
    );
}

#[test]
fn roles_can_be_renamed() {
    let tmp = tempfile::tempdir().unwrap();
    let a = write_json(tmp.path(), "a.json", &[result("m", 64, 0, &[10.0])]);
    let b = write_json(tmp.path(), "b.json", &[result("m", 64, 0, &[25.0])]);
    let c = write_json(tmp.path(), "c.json", &[result("m", 64, 0, &[50.0])]);
    let md = report(&[
        format!("--arm=guest={}", a.display()),
        format!("--arm=shim={}", b.display()),
        format!("--arm=metal={}", c.display()),
        "--stock=guest".into(),
        "--host=metal".into(),
    ]);
    assert_eq!(
        table_line(&md, "pp64"),
        ["m", "pp64", "50.00", "10.00", "25.00", "2.50×", "50.00%"]
    );
    capshim()
        .args([
            "report",
            &format!("--arm=x={}", a.display()),
            "--stock=nope",
        ])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "--stock \"nope\" names no arm; the arms are: x",
        ));
    // One arm in both roles would leave no speedup column: refused.
    capshim()
        .args([
            "report",
            &format!("--arm=s={}", a.display()),
            &format!("--arm=u={}", a.display()),
            "--stock",
            "s",
            "--host",
            "s",
        ])
        .assert()
        .code(2)
        .stdout("")
        .stderr(predicate::str::contains(
            "--stock and --host both name arm \"s\"",
        ));
}

#[test]
fn bad_inputs_are_clear_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let md = tmp.path().join("table.md");
    std::fs::write(
        &md,
        "| model | size | params | backend | ngl | test | t/s |\n",
    )
    .unwrap();
    capshim()
        .args(["report", &format!("--arm=stock={}", md.display())])
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "table.md is not llama-bench JSON output",
        ))
        .stderr(predicate::str::contains("-o json"));

    let empty = write_json(tmp.path(), "nosamples.json", &[result("m", 512, 0, &[])]);
    capshim()
        .args(["report", &format!("--arm=stock={}", empty.display())])
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "nosamples.json: test pp512 (result 1) has no samples_ts values",
        ));

    let tiny = write_json(tmp.path(), "tiny.json", &[result("tiny", 512, 0, &[1.0])]);
    let gemma = write_json(tmp.path(), "gemma.json", &[result("gemma", 512, 0, &[1.0])]);
    capshim()
        .args([
            "report",
            &format!("--arm=stock={},{}", tiny.display(), gemma.display()),
        ])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("arm stock:"))
        .stderr(predicate::str::contains("tiny.json"))
        .stderr(predicate::str::contains("gemma.json"))
        .stderr(predicate::str::contains(
            "run `capshim report` once per model",
        ));

    capshim()
        .args(["report", "--arm=stock"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("NAME=FILE"));
    capshim()
        .args([
            "report",
            &format!("--arm=stock={}", tmp.path().join("nope.json").display()),
        ])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("nope.json"));
    capshim()
        .arg("report")
        .assert()
        .code(2)
        .stderr(predicate::str::contains("nothing to report"));
    capshim()
        .args(["report", "--json", "--csv", "--arm=a=b"])
        .assert()
        .code(2);
}

#[test]
fn help_documents_exit_codes_and_examples() {
    for cmd in ["report", "bench"] {
        capshim()
            .args([cmd, "--help"])
            .assert()
            .success()
            .stdout(predicate::str::contains("Exit codes:"))
            .stdout(predicate::str::contains("Examples:"));
    }
    capshim()
        .args(["report", "--help"])
        .assert()
        .stdout(predicate::str::contains("3  a bundle is not trustworthy"))
        .stdout(predicate::str::contains("unfinished"));
    capshim()
        .args(["bench", "--help"])
        .assert()
        .stdout(predicate::str::contains("130 by SIGINT, 143 by SIGTERM"))
        .stdout(predicate::str::contains("INCOMPLETE"));
}

/// docs/bench.md, the manual for bench and report, keeps the claims testers checked: what an
/// A/A bench shows, the defaults, default bundle names, the interrupt behaviour; and every
/// page that states llama.cpp's build time states the one measured.
#[test]
fn bench_docs_state_what_bench_does() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let read = |path: &str| std::fs::read_to_string(format!("{root}/{path}")).unwrap();
    let bench = read("docs/bench.md");
    for part in [
        "capshim-bench-YYYYMMDD-HHMMSS-2",
        "excludes 1.00 in at most 5% of benches",
        "(bundles.md)",
        "`--rounds 6`",
        "[--rounds 12]",
        "an `INCOMPLETE`",
        "130 stopped by SIGINT, 143 by SIGTERM",
        "`--cpu-brand STRING`",
    ] {
        assert!(bench.contains(part), "docs/bench.md lacks {part:?}");
    }
    for page in ["README.md", "docs/bench.md", "docs/development.md"] {
        let text = read(page);
        for (i, _) in text.match_indices(" minutes on 2") {
            assert!(
                text[..i].ends_with("about 7"),
                "{page}: a llama.cpp build time other than \"about 7 minutes on 2 …\" near byte {i}"
            );
        }
    }
}
