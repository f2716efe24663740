//! `capshim bench` end to end against a stand-in llama-bench (a shell script): ordering,
//! environment, activation checks, bundle contents, checksums and report round trips, fast and
//! deterministic. `llama_e2e.rs` runs the same command against the real llama-bench.
#![cfg(unix)]

mod common;

use std::path::Path;

use common::{
    assert_report_refuses, assert_report_reproduces, bench, capshim, fake_llama_bench, fake_model,
    inert_shim, read, result, write_json,
};
use predicates::prelude::*;

struct Setup {
    tmp: tempfile::TempDir,
    llama: std::path::PathBuf,
    model: std::path::PathBuf,
    shim: std::path::PathBuf,
}

fn setup() -> Setup {
    let tmp = tempfile::tempdir().unwrap();
    let llama = fake_llama_bench(tmp.path());
    let model = fake_model(tmp.path());
    let shim = inert_shim(tmp.path());
    Setup {
        tmp,
        llama,
        model,
        shim,
    }
}

impl Setup {
    /// `capshim bench` with the fake llama-bench, the model, the shim and `-r 3 -p 64 -n 16
    /// --rounds 2`.
    fn bench(&self, out: &Path) -> assert_cmd::Command {
        self.bench_with(out, &self.shim)
    }

    /// As [`Setup::bench`], with another shim library path.
    fn bench_with(&self, out: &Path, shim: &Path) -> assert_cmd::Command {
        self.bench_rounds(out, shim, 2)
    }

    /// As [`Setup::bench_with`], with `rounds` rounds.
    fn bench_rounds(&self, out: &Path, shim: &Path, rounds: u32) -> assert_cmd::Command {
        let mut cmd = bench(&self.llama, &self.model);
        cmd.current_dir(self.tmp.path())
            .env_remove("FAKE_HOOK")
            .arg("--dylib")
            .arg(shim)
            .args(["-r", "3", "-p", "64", "-n", "16", "--rounds"])
            .arg(rounds.to_string())
            .arg("-o")
            .arg(out);
        cmd
    }
}

#[test]
fn writes_a_sealed_bundle_in_schedule_order() {
    let s = setup();
    let out = s.tmp.path().join("bundle");
    let log = s.tmp.path().join("runs.log");
    let assert = s
        .bench(&out)
        .env("FAKE_HOOK", "1")
        .env("FAKE_LOG", &log)
        .env("CAPSHIM_LOG", "queries") // inherited shim settings must not leak into arms
        .args(["-d", "0", "--cooldown", "0.05"])
        .assert()
        .success()
        .stderr(predicate::str::contains("evidence bundle:"));
    let stdout = String::from_utf8(assert.get_output().stdout.clone()).unwrap();

    // Each round runs both arms, in its own random order, which environment.json records in
    // the order the runs ran; the injection variable only in the unlocked arm.
    let shim = s.shim.display().to_string();
    let runs: Vec<String> = read(&log).lines().map(str::to_string).collect();
    let (stock, unlocked) = (
        "stock inject=none".to_string(),
        format!("unlocked inject={shim}"),
    );
    assert_eq!(runs.len(), 4, "{runs:?}");
    for round in runs.chunks(2) {
        assert!(
            round == [stock.clone(), unlocked.clone()]
                || round == [unlocked.clone(), stock.clone()],
            "{runs:?}"
        );
    }
    let env: serde_json::Value =
        serde_json::from_str(&read(&out.join("environment.json"))).unwrap();
    let recorded: Vec<(String, u64)> = env["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["arm"].as_str().unwrap().to_string(),
                r["round"].as_u64().unwrap(),
            )
        })
        .collect();
    let ran: Vec<(String, u64)> = runs
        .iter()
        .enumerate()
        .map(|(i, line)| {
            let arm = if line.starts_with("stock") {
                "stock"
            } else {
                "apple9-64k"
            };
            (arm.to_string(), i as u64 / 2 + 1)
        })
        .collect();
    assert_eq!(recorded, ran);
    // -d beside -p and -n goes to llama-bench before -o json; the cooldown is recorded.
    let args: Vec<&str> = env["llama_bench_args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(
        args[2..],
        ["-r", "3", "-p", "64", "-n", "16", "-d", "0", "-o", "json"]
    );
    assert_eq!(env["cooldown_seconds"], 0.05);

    let mut files: Vec<String> = Vec::new();
    for dir in [out.clone(), out.join("raw")] {
        for e in std::fs::read_dir(&dir).unwrap() {
            let e = e.unwrap();
            if e.path().is_file() {
                let rel = e.path().strip_prefix(&out).unwrap().display().to_string();
                files.push(rel);
            }
        }
    }
    files.sort();
    assert_eq!(
        files,
        [
            "SHA256SUMS",
            "chart.svg",
            "environment.json",
            "raw/apple9-64k-r1.json",
            "raw/apple9-64k-r1.status.jsonl",
            "raw/apple9-64k-r1.stderr",
            "raw/apple9-64k-r2.json",
            "raw/apple9-64k-r2.status.jsonl",
            "raw/apple9-64k-r2.stderr",
            "raw/stock-r1.json",
            "raw/stock-r1.stderr",
            "raw/stock-r2.json",
            "raw/stock-r2.stderr",
            "report.md",
            "results.csv",
            "rounds.svg",
            "summary.json",
        ]
    );
    // SHA256SUMS is what `sha256sum -c` reads.
    let sums = read(&out.join("SHA256SUMS"));
    assert_eq!(sums.lines().count(), files.len() - 1);
    if let Ok(o) = std::process::Command::new("sha256sum")
        .arg("-c")
        .arg("--quiet")
        .arg("SHA256SUMS")
        .current_dir(&out)
        .output()
    {
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stdout));
    }

    // Results on stdout are the report, and `capshim report BUNDLE` re-renders it exactly.
    let report_md = read(&out.join("report.md"));
    assert_eq!(stdout, report_md);
    assert_report_reproduces(&out, &report_md);
    assert!(
        report_md.contains("| fake  | pp64 | 1000.00 |   10000.00 |  10.00× |"),
        "{report_md}"
    );
    assert!(report_md.contains("- stock: GPU MTL0 (Apple Paravirtual device), MTLGPUFamilyApple5 (1005), simdgroup reduction false"), "{report_md}");
    assert!(report_md.contains("- apple9-64k: GPU MTL0 (Apple Paravirtual device), MTLGPUFamilyApple9 (1009), simdgroup reduction true"), "{report_md}");
    assert!(
        report_md.contains("- apple9-64k: shim active, hooked AppleParavirtDevice"),
        "{report_md}"
    );
    assert!(report_md.contains("- stock: no shim"), "{report_md}");
    assert!(!report_md.contains("Warnings:"), "{report_md}");

    let summary: serde_json::Value =
        serde_json::from_str(&read(&out.join("summary.json"))).unwrap();
    let pp = &summary["rows"][0];
    assert_eq!(pp["test"], "pp64");
    let u = &pp["arms"]["apple9-64k"];
    // Schema 6: the paired estimate (from the rounds' log ratios), 10 up to rounding.
    assert!(
        (u["speedup_vs_stock"].as_f64().unwrap() - 10.0).abs() < 1e-9,
        "{u}"
    );
    assert_eq!(u["samples"], 6);
    assert_eq!(u["rounds"].as_array().unwrap().len(), 2);
    // Two rounds are below the interval's minimum: none, and the report says why.
    assert!(u["speedup_ci95"].is_null() && u["verdict"].is_null(), "{u}");
    let why = u["speedup_no_interval"].as_str().unwrap();
    assert!(
        why.contains("2 rounds with both arms") && why.contains("--rounds 6"),
        "{why}"
    );
    assert!(report_md.contains(why), "{report_md}");
    assert_eq!(summary["activation"]["apple9-64k"]["activated"], true);
    assert_eq!(
        summary["bundle"]["arms"][1]["runs"][0]["status"],
        "raw/apple9-64k-r1.status.jsonl"
    );

    let env: serde_json::Value =
        serde_json::from_str(&read(&out.join("environment.json"))).unwrap();
    assert_eq!(env["llama_cpp"]["build_number"], 1);
    assert_eq!(env["llama_cpp"]["build_commit"], "fake123");
    assert_eq!(env["files"]["model"]["bytes"], 15);
    assert_eq!(env["files"]["model"]["sha256"].as_str().unwrap().len(), 64);
    assert_eq!(env["files"]["dylib"]["path"], shim);
    assert!(env["files"]["llama_bench"]["sha256"].is_string());
    assert!(env["machine"]["kernel"].is_string());
    let runs = env["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 4);
    // Runs in the order they ran, which is random within each round: find each arm's.
    let of = |arm: &str| runs.iter().find(|r| r["arm"] == arm).unwrap();
    let (stock_run, unlocked_run) = (of("stock"), of("apple9-64k"));
    assert!(
        stock_run["env"]["removed"]
            .as_array()
            .unwrap()
            .iter()
            .any(|v| v == "CAPSHIM_LOG")
    );
    let set: Vec<String> = unlocked_run["env"]["set"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap()))
        .collect();
    assert!(
        set.contains(&"CAPSHIM_APPLE_FAMILY_MAX=1009".to_string()),
        "{set:?}"
    );
    assert!(
        set.contains(&"CAPSHIM_MAX_THREADGROUP_MEMORY=65536".to_string()),
        "{set:?}"
    );
    let cmdline = unlocked_run["command_line"].as_str().unwrap();
    assert!(
        cmdline.contains(" -r 3 -p 64 -n 16 -d 0 -o json"),
        "{cmdline}"
    );
    let svg = read(&out.join("chart.svg"));
    assert!(svg.starts_with("<svg") && svg.contains("pp64") && svg.contains("apple9-64k"));
    let csv = read(&out.join("results.csv"));
    assert!(
        csv.starts_with(
            "workload,test,metric,unit,stock,apple9-64k,speedup apple9-64k,ci95_low apple9-64k,"
        ),
        "{csv}"
    );

    // Never overwritten.
    s.bench(&out)
        .env("FAKE_HOOK", "1")
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "already exists: a bundle is never overwritten",
        ));
    assert_eq!(read(&out.join("report.md")), report_md);

    // Tampering: a changed raw file, then an added file, exit code 3.
    let raw = out.join("raw/stock-r1.json");
    let original = read(&raw);
    std::fs::write(&raw, original.replace("1000", "1")).unwrap();
    assert_report_refuses(&out, "raw/stock-r1.json does not match its checksum")
        .stderr(predicate::str::contains("do not trust its figures"));
    std::fs::write(&raw, original).unwrap();
    assert_report_reproduces(&out, &report_md);
    std::fs::write(out.join("raw/extra.json"), "[]").unwrap();
    assert_report_refuses(&out, "raw/extra.json is not listed in SHA256SUMS");
}

#[test]
fn an_unlocked_arm_that_never_hooks_is_an_error_unless_allowed() {
    let s = setup();
    let out = s.tmp.path().join("inactive");
    s.bench(&out)
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "the shim did not activate in arm apple9-64k round 1",
        ))
        .stderr(predicate::str::contains("--allow-inactive"))
        .stderr(predicate::str::contains("raw files written so far are in"));
    // The run itself finished: the note says why it was not accepted, not that it is partial.
    let note = read(&out.join("INCOMPLETE"));
    assert!(
        note.contains("Run that ended but was not accepted (see why it stopped; its raw files are as it left them):\n  arm apple9-64k round 1"),
        "{note}"
    );
    assert!(!note.contains("partial"), "{note}");
    assert!(
        note.contains("the shim did not activate in arm apple9-64k round 1"),
        "{note}"
    );

    let out = s.tmp.path().join("allowed");
    let assert = s.bench(&out).arg("--allow-inactive").assert().success();
    let stdout = String::from_utf8(assert.get_output().stdout.clone()).unwrap();
    assert!(
        stdout.contains("- apple9-64k: shim did NOT activate"),
        "{stdout}"
    );
    assert!(
        stdout.contains("Warnings:\n\n- arm apple9-64k: shim did NOT activate"),
        "{stdout}"
    );
    assert!(
        stdout.contains("its figures are a stock guest's"),
        "{stdout}"
    );
    let summary: serde_json::Value =
        serde_json::from_str(&read(&out.join("summary.json"))).unwrap();
    assert_eq!(summary["activation"]["apple9-64k"]["activated"], false);
}

#[test]
fn inputs_are_checked_before_anything_runs() {
    let s = setup();
    let out = s.tmp.path().join("never");
    s.bench_with(&out, &s.tmp.path().join("missing/libcapshim.so"))
        .assert()
        .code(1)
        .stderr(predicate::str::contains("shim library"))
        .stderr(predicate::str::contains(
            "missing/libcapshim.so does not exist",
        ))
        .stderr(predicate::str::contains("--dylib PATH"));
    s.bench(&out)
        .args(["--", "-d", "512"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("use capshim's -d"));
    s.bench(&out)
        .args(["--", "-t", "2", "-o", "csv"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("\"-o\" after `--` is refused"));
    // No run, no repetition: usage errors, as documented.
    for (flag, value) in [("-r", "0"), ("--rounds", "0"), ("--rounds", "-1")] {
        bench(&s.llama, &s.model)
            .arg("-o")
            .arg(&out)
            .args([flag, value])
            .assert()
            .code(2)
            .stderr(predicate::str::contains(format!("'{value}'")));
    }
    // --cooldown takes zero or more seconds; anything else is a usage error naming it.
    for (value, says) in [
        ("-1", "is not a pause; give zero or more seconds"),
        ("abc", "not a number of seconds"),
        ("inf", "is not a pause"),
    ] {
        s.bench(&out)
            .args(["--cooldown", value])
            .assert()
            .code(2)
            .stderr(predicate::str::contains("--cooldown"))
            .stderr(predicate::str::contains(says));
    }
    assert!(!out.exists(), "nothing ran");
    s.bench(&out)
        .args(["--profile", "apple10-max"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "\"apple10-max\" is not a known profile",
        ))
        .stderr(predicate::str::contains("apple9-64k"));
    // Bad, duplicate and reserved labels are usage errors.
    s.bench(&out)
        .args(["--profile", "stock"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--profile stock-2=stock"));
    for (arm, says) in [
        ("a/b=stock", "the label \"a/b\" must be"),
        ("host=apple9-64k", "the label \"host\" is reserved"),
        ("x=apple9-64k,BOGUS", "names two profiles"),
    ] {
        s.bench(&out)
            .args(["--arm", arm])
            .assert()
            .code(2)
            .stderr(predicate::str::contains(says));
    }
    s.bench(&out)
        .args(["--profile", "a=stock", "--arm", "a=apple9-64k"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "an arm named \"a\" already exists",
        ));
    bench(&s.llama, &s.tmp.path().join("nope.gguf"))
        .assert()
        .code(1)
        .stderr(predicate::str::contains("model"))
        .stderr(predicate::str::contains("nope.gguf does not exist"));
    // The attached form of -o is refused like the separate one.
    for attached in ["-ocsv", "-ojson", "-oejsonl"] {
        s.bench(&out)
            .args(["--", "-t", "2", attached])
            .assert()
            .code(2)
            .stderr(predicate::str::contains(format!(
                "{attached:?} after `--` is refused"
            )));
    }
    // A sweep of a setting would pool several settings into one median.
    s.bench(&out)
        .args(["--", "-t", "1,2"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "-t 1,2 after `--` sweeps a setting",
        ))
        .stderr(predicate::str::contains("one value per option"));
    // An unknown brand names only options bench has, whatever the profile.
    for profile in ["native", "apple9-64k"] {
        s.bench(&out)
            .args(["--profile", profile, "--cpu-brand", "Intel(R) Core(TM) i9"])
            .assert()
            .code(1)
            .stderr(predicate::str::contains(
                "CPU brand \"Intel(R) Core(TM) i9\" is not a known Apple Silicon chip",
            ))
            .stderr(predicate::str::contains(
                "--cpu-brand \"Apple M1 Ultra (Virtual)\"",
            ))
            .stderr(predicate::str::contains("--family-max").not());
    }
    // Off a Mac, native needs the chip named.
    s.bench(&out)
        .args(["--profile", "native"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("the host chip is not known"))
        .stderr(predicate::str::contains(
            "--cpu-brand \"Apple M1 Ultra (Virtual)\"",
        ));
    // The arm name host is the bare-metal baseline's.
    s.bench(&out)
        .args(["--profile", "host=native", "--cpu-brand", "Apple M1"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "the label \"host\" is reserved (it names the bare-metal baseline)",
        ));
    assert!(!out.exists(), "no bundle is created for refused input");
}

#[test]
fn native_is_the_default_arm_where_the_chip_is_given_and_host_is_read_as_native() {
    let s = setup();
    let arms = |out: &Path| -> serde_json::Value {
        let env: serde_json::Value =
            serde_json::from_str(&read(&out.join("environment.json"))).unwrap();
        env["arms"].clone()
    };
    let out = s.tmp.path().join("default");
    s.bench(&out)
        .env("FAKE_HOOK", "1")
        .args(["--cpu-brand", "Apple M1 Ultra (Virtual)"])
        .assert()
        .success()
        .stderr(predicate::str::contains("capshim: note:").not());
    let arm = &arms(&out)[1];
    assert_eq!(arm["name"], "native", "{arm}");
    assert_eq!(arm["profile_name"], "native", "{arm}");
    assert_eq!(arm["profile"]["apple_family_max"], 1007, "{arm}");
    assert_eq!(arm["profile"]["max_threadgroup_memory"], 32768, "{arm}");

    let out = s.tmp.path().join("alias");
    s.bench(&out)
        .env("FAKE_HOOK", "1")
        .args(["--profile", "host", "--cpu-brand", "Apple M2 Pro (Virtual)"])
        .assert()
        .success()
        .stderr(predicate::str::contains(
            "capshim: note: --profile host is now called native",
        ));
    let arm = &arms(&out)[1];
    assert_eq!(
        (arm["name"].as_str(), arm["profile_name"].as_str()),
        (Some("native"), Some("native"))
    );
    assert_eq!(arm["profile"]["apple_family_max"], 1008, "{arm}");

    // Off a Mac without a brand, the default arm is apple9-64k, and the note says why.
    let out = s.tmp.path().join("fallback");
    s.bench(&out)
        .env("FAKE_HOOK", "1")
        .assert()
        .success()
        .stderr(predicate::str::contains(
            "capshim: note: using apple9-64k, the first published experiment's profile",
        ))
        .stderr(predicate::str::contains(
            "because the host chip is not known",
        ));
    assert_eq!(arms(&out)[1]["name"], "apple9-64k");
}

#[test]
fn a_failing_llama_bench_is_reported_with_its_stderr() {
    let s = setup();
    let out = s.tmp.path().join("fail");
    s.bench(&out)
        .env("FAKE_FAIL", "1")
        .assert()
        .code(1)
        .stderr(
            predicate::str::is_match("llama-bench failed in arm (stock|apple9-64k) round 1")
                .unwrap(),
        )
        .stderr(predicate::str::contains("failed to load model 'x.gguf'"));
}

#[test]
fn aa_check_baseline_and_side_by_side_bundles() {
    let s = setup();
    let host = write_json(
        s.tmp.path(),
        "host.json",
        &[
            result("fake", 64, 0, &[20000.0, 20100.0, 19900.0]),
            result("fake", 0, 16, &[200.0]),
        ],
    );
    // A/A: a second stock arm; its speedup interval contains 1, inside the noise band. Two
    // tests make two intervals: the verdicts are read at 97.5%, which 8 rounds can reach and
    // 6 cannot (its highest level is 1 − 2/2^6 = 96.9%).
    let aa = s.tmp.path().join("aa");
    s.bench_rounds(&aa, &s.shim, 8)
        .args(["--profile", "again=stock", "--baseline"])
        .arg(&host)
        .assert()
        .success();
    let summary: serde_json::Value = serde_json::from_str(&read(&aa.join("summary.json"))).unwrap();
    for row in summary["rows"].as_array().unwrap() {
        let again = &row["arms"]["again"];
        assert_eq!(again["speedup_vs_stock"], 1.0);
        let ci = &again["speedup_ci95"];
        assert!(ci["low"].as_f64().unwrap() <= 1.0 && 1.0 <= ci["high"].as_f64().unwrap());
        assert_eq!(again["verdict"], "no_measurable_difference");
        assert_eq!(again["speedup_precision"]["rounds"], 8);
        assert!(row["arms"]["stock"]["percent_of_host"].is_number());
    }
    assert_eq!(summary["host"], "host");
    // Schema 6's statistics, from environment.json's runs in the order run: each arm's median
    // process duration, the carry-over per test, the family-wise level of the verdicts.
    assert_eq!(summary["schema_version"], 6);
    assert!(summary["process_seconds"]["stock"].is_number(), "{summary}");
    assert!(summary["process_seconds"]["again"].is_number(), "{summary}");
    assert!(summary["statistics"]["verdicts"].is_object(), "{summary}");
    // The carry-over is fitted unless the random order failed to separate it (8 of the 256
    // orders of 8 rounds, by the rule docs/bench.md states and `analysis::design`'s tests pin).
    let env: serde_json::Value = serde_json::from_str(&read(&aa.join("environment.json"))).unwrap();
    let stock_first: Vec<bool> = env["runs"]
        .as_array()
        .unwrap()
        .chunks(2)
        .map(|round| round[0]["arm"] == "stock")
        .collect();
    assert_eq!(stock_first.len(), 8, "{env}");
    let same = |o: &[bool]| o.windows(2).all(|w| w[0] == w[1]);
    let separates = !(same(&stock_first[1..])
        || same(&stock_first[..7])
        || stock_first.windows(2).all(|w| w[0] != w[1]));
    for row in summary["rows"].as_array().unwrap() {
        assert!(row["arms"]["again"]["round_ratios"].is_array(), "{row}");
        let fitted = row["arms"]["again"].get("carryover").is_some();
        assert_eq!(fitted, separates, "{stock_first:?} {row}");
    }
    // rounds.svg is derived again and printed by --rounds-svg, byte for byte.
    let rounds = read(&aa.join("rounds.svg"));
    assert!(rounds.starts_with("<svg"), "{rounds}");
    capshim()
        .args(["report", "--rounds-svg"])
        .arg(&aa)
        .assert()
        .success()
        .stdout(rounds);
    assert!(aa.join("raw/host.json").is_file());
    assert!(
        !aa.join("raw/again-r1.status.jsonl").exists(),
        "no shim, no status file"
    );

    let unlocked = s.tmp.path().join("unlocked");
    s.bench(&unlocked).env("FAKE_HOOK", "1").assert().success();
    let out = capshim()
        .arg("report")
        .arg(&aa)
        .arg(&unlocked)
        .assert()
        .success();
    let md = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    assert!(
        md.contains("| model | test |  aa/host | aa/stock | unlocked/stock | aa/again | unlocked/apple9-64k |"),
        "{md}"
    );
    assert!(md.contains("speedup unlocked/apple9-64k"), "{md}");
    // The unlocked bundle has no host arm: no percent of host from aa's.
    let json = |extra: &[&str]| -> serde_json::Value {
        let out = capshim()
            .arg("report")
            .arg(&aa)
            .arg(&unlocked)
            .arg("--json")
            .args(extra)
            .assert()
            .success();
        serde_json::from_slice(&out.get_output().stdout).unwrap()
    };
    let plain = json(&[]);
    for row in plain["rows"].as_array().unwrap() {
        assert!(row["arms"]["aa/stock"]["percent_of_host"].is_number());
        assert!(
            row["arms"]["unlocked/apple9-64k"]["percent_of_host"].is_null(),
            "{row}"
        );
        assert!(
            row["arms"]["unlocked/stock"]["percent_of_host"].is_null(),
            "{row}"
        );
    }
    // Unless --host names it for everyone.
    let explicit = json(&["--host", "aa/host"]);
    for row in explicit["rows"].as_array().unwrap() {
        assert!(
            row["arms"]["unlocked/apple9-64k"]["percent_of_host"].is_number(),
            "{row}"
        );
    }
}

#[test]
fn without_output_a_new_dated_bundle_is_created() {
    let s = setup();
    let run = || {
        bench(&s.llama, &s.model)
            .current_dir(s.tmp.path())
            .args(["--profile", "again=stock", "-r", "1"])
            .assert()
            .success();
    };
    run();
    run();
    let mut dirs: Vec<String> = std::fs::read_dir(s.tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("capshim-bench-"))
        .collect();
    dirs.sort();
    assert_eq!(dirs.len(), 2, "{dirs:?}");
    let stamp = &dirs[0]["capshim-bench-".len()..];
    assert_eq!(stamp.len(), "YYYYMMDD-HHMMSS".len(), "{stamp}");
    assert!(stamp.chars().all(|c| c.is_ascii_digit() || c == '-'));
}

#[test]
fn bench_refuses_a_dylib_path_the_loader_would_split() {
    let s = setup();
    let out = s.tmp.path().join("never");
    let folder = s.tmp.path().join(if cfg!(target_os = "macos") {
        "a:b"
    } else {
        "sp ace"
    });
    std::fs::create_dir(&folder).unwrap();
    let library = folder.join(common::SHIM_NAME);
    std::fs::copy(&s.shim, &library).unwrap();
    s.bench_with(&out, &library).assert().code(1).stderr(
        predicate::str::contains(common::INJECTION_VAR)
            .and(predicate::str::contains("move or copy")),
    );
    assert!(!out.exists(), "bench wrote a bundle");
}

#[test]
fn a_signal_stops_llama_bench_and_leaves_an_unsealed_bundle_with_a_note() {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;
    use std::time::{Duration, Instant};

    use std::os::unix::process::CommandExt;

    // (signal, exit code, sent to the whole process group as a terminal's Ctrl-C is)
    for (signal, code, group) in [
        (Signal::SIGTERM, 143, false),
        (Signal::SIGINT, 130, false),
        (Signal::SIGINT, 130, true),
    ] {
        let s = setup();
        let out = s.tmp.path().join("bundle");
        let hang = s.tmp.path().join("hang");
        let mut cmd = std::process::Command::new(assert_cmd::cargo::cargo_bin("capshim"));
        for (name, _) in std::env::vars_os() {
            let name = name.to_string_lossy().into_owned();
            if name.starts_with("CAPSHIM_")
                || name.starts_with("LUME_METAL_")
                || name == "LD_PRELOAD"
                || name == "DYLD_INSERT_LIBRARIES"
            {
                cmd.env_remove(name);
            }
        }
        cmd.current_dir(s.tmp.path())
            .arg("bench")
            .arg("-m")
            .arg(&s.model)
            .arg("--llama-bench")
            .arg(&s.llama)
            .arg("--dylib")
            .arg(&s.shim)
            .arg("--allow-inactive")
            .args(["-r", "3", "-p", "64", "-n", "16", "--rounds", "2", "-o"])
            .arg(&out);
        let mut child = cmd
            .process_group(0)
            .env("FAKE_HANG", &hang)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let pid_file = hang.with_extension("pid");
        let deadline = Instant::now() + Duration::from_secs(30);
        while !pid_file.exists() {
            assert!(Instant::now() < deadline, "the second run never started");
            std::thread::sleep(Duration::from_millis(20));
        }
        let llama: i32 = read(&pid_file).trim().parse().unwrap();
        let pid = child.id() as i32;
        kill(Pid::from_raw(if group { -pid } else { pid }), signal).unwrap();
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if Instant::now() > deadline {
                let _ = kill(Pid::from_raw(llama), Signal::SIGKILL);
                child.kill().unwrap();
                panic!("capshim bench did not stop on {signal}");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let output = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(status.code(), Some(code), "{signal}: {stderr}");
        assert!(
            stderr.contains(&format!("interrupted by {signal}")) && stderr.contains("INCOMPLETE"),
            "{stderr}"
        );
        // llama-bench was stopped, not orphaned.
        assert!(
            kill(Pid::from_raw(llama), None).is_err(),
            "{signal}: llama-bench (pid {llama}) still runs"
        );
        assert!(!out.join("SHA256SUMS").exists());
        let note = read(&out.join("INCOMPLETE"));
        // Round 1 ran in either order: one arm finished, the other was cut short.
        let cut = |arm: &str| {
            format!(
                "Run cut short (its raw files are partial):\n  arm {arm} round 1 (raw/{arm}-r1.json)"
            )
        };
        let (finished, cut) = if note.contains(&cut("apple9-64k")) {
            ("arm stock round 1 (raw/stock-r1.json)", cut("apple9-64k"))
        } else {
            (
                "arm apple9-64k round 1 (raw/apple9-64k-r1.json)",
                cut("stock"),
            )
        };
        for part in [
            "Runs finished (1 of 4)",
            finished,
            &cut,
            &format!("interrupted by {signal}"),
            "Runs never started: 2",
        ] {
            assert!(note.contains(part), "{part:?} missing:\n{note}");
        }
        assert_report_refuses(&out, "did not finish")
            .stderr(predicate::str::contains("INCOMPLETE"))
            .stderr(predicate::str::contains("changed after").not());
    }
}

#[test]
fn a_resealed_bundle_whose_derived_files_no_longer_match_its_raw_data_is_refused() {
    let s = setup();
    let out = s.tmp.path().join("bundle");
    s.bench(&out).env("FAKE_HOOK", "1").assert().success();
    let sums = read(&out.join("SHA256SUMS"));
    let pristine: Vec<(String, Vec<u8>)> = [
        "raw/stock-r1.json",
        "summary.json",
        "report.md",
        "results.csv",
        "chart.svg",
    ]
    .iter()
    .map(|f| (f.to_string(), std::fs::read(out.join(f)).unwrap()))
    .collect();

    // Edit one file, then regenerate SHA256SUMS the way `sha256sum` would: every edit is
    // found, naming the derived file that no longer matches.
    for (file, edit, says) in [
        (
            "raw/stock-r1.json",
            ("990", "500"),
            "summary.json does not match the raw data",
        ),
        (
            "summary.json",
            ("10000", "20000"),
            "summary.json does not match the raw data",
        ),
        (
            "report.md",
            ("10.00×", "20.00×"),
            "report.md does not match the raw data",
        ),
        (
            "results.csv",
            ("10000", "20000"),
            "results.csv does not match the raw data",
        ),
        (
            "chart.svg",
            ("pp64", "pp65"),
            "chart.svg does not match the raw data",
        ),
    ] {
        let path = out.join(file);
        let text = read(&path);
        assert!(text.contains(edit.0), "{file} lacks {:?}", edit.0);
        std::fs::write(&path, text.replace(edit.0, edit.1)).unwrap();
        common::reseal(&out);
        assert_report_refuses(&out, says)
            .stderr(predicate::str::contains("SHA256SUMS was regenerated"));
        for (f, bytes) in &pristine {
            std::fs::write(out.join(f), bytes).unwrap();
        }
        std::fs::write(out.join("SHA256SUMS"), &sums).unwrap();
    }
    // The manifest the derived files come from is a primary file: it is what SHA256SUMS and a
    // signature protect, so a changed manifest under resealed sums shows in the derived files.
    let env_path = out.join("environment.json");
    let env = read(&env_path);
    std::fs::write(
        &env_path,
        env.replace("raw/stock-r1.json", "raw/stock-r2.json"),
    )
    .unwrap();
    common::reseal(&out);
    assert_report_refuses(&out, "does not match the raw data");
    std::fs::write(&env_path, &env).unwrap();
    std::fs::write(out.join("SHA256SUMS"), &sums).unwrap();
    capshim().arg("report").arg(&out).assert().success();

    // SHA256SUMS naming files outside the bundle.
    std::fs::write(out.join("SHA256SUMS"), format!("{sums}0000  ../outside\n")).unwrap();
    assert_report_refuses(&out, "is not `HASH  PATH` (or `HASH *PATH`)");
    let zeros = "0".repeat(64);
    std::fs::write(
        out.join("SHA256SUMS"),
        format!("{sums}{zeros}  ../outside\n"),
    )
    .unwrap();
    assert_report_refuses(&out, "\"../outside\", a path outside the bundle");
    std::fs::write(
        out.join("SHA256SUMS"),
        format!("{sums}{zeros}  /etc/passwd\n"),
    )
    .unwrap();
    assert_report_refuses(&out, "\"/etc/passwd\", a path outside the bundle");
}

#[test]
fn llama_dir_finds_llama_bench_and_names_a_missing_one() {
    let s = setup();
    let bench_in = |dir: &Path, out: &Path| {
        let mut cmd = capshim();
        cmd.arg("bench")
            .arg("-m")
            .arg(&s.model)
            .arg("--llama-dir")
            .arg(dir)
            .args([
                "--profile",
                "again=stock",
                "-r",
                "1",
                "-p",
                "8",
                "-n",
                "4",
                "-o",
            ])
            .arg(out);
        cmd
    };
    let out = s.tmp.path().join("from-dir");
    bench_in(s.tmp.path(), &out)
        .args(["--arm", "vars=stock,GGML_METAL_BF16_DISABLE=1"])
        .assert()
        .success();
    let env: serde_json::Value =
        serde_json::from_str(&read(&out.join("environment.json"))).unwrap();
    // An arm's own variables are recorded with the arm and set in its processes only.
    assert_eq!(env["arms"][2]["env"]["GGML_METAL_BF16_DISABLE"], "1");
    let runs = env["runs"].as_array().unwrap();
    for run in runs {
        let set = &run["env"]["set"]["GGML_METAL_BF16_DISABLE"];
        assert_eq!(set.is_string(), run["arm"] == "vars", "{run}");
    }
    assert_eq!(
        env["files"]["llama_bench"]["path"],
        s.llama.canonicalize().unwrap().display().to_string()
    );
    let empty = s.tmp.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    bench_in(&empty, &s.tmp.path().join("never"))
        .assert()
        .code(1)
        .stderr(predicate::str::contains(format!(
            "llama-bench is not in --llama-dir {}",
            empty.display()
        )));
    assert!(!s.tmp.path().join("never").exists());
    bench(&s.llama, &s.model)
        .arg("--llama-dir")
        .arg(s.tmp.path())
        .assert()
        .code(2)
        .stderr(predicate::str::contains("cannot be used with"));
}

/// A bundle of another layout (here one written before environment.json had a
/// `schema_version`: its summary.json says 2) is not derived again, so it is refused (exit 3)
/// unless asked for with --as-written: then its checksums are checked, and its own files are
/// shown as written after an UNVERIFIED line, exit 4.
#[test]
fn a_bundle_of_another_schema_is_refused_or_shown_as_written_unverified() {
    let s = setup();
    let out = s.tmp.path().join("old");
    s.bench(&out).env("FAKE_HOOK", "1").assert().success();
    let mut env: serde_json::Value =
        serde_json::from_str(&read(&out.join("environment.json"))).unwrap();
    for key in ["schema_version", "kind", "bundle"] {
        env.as_object_mut().unwrap().remove(key);
    }
    std::fs::write(out.join("environment.json"), env.to_string()).unwrap();
    let summary = read(&out.join("summary.json"));
    std::fs::write(
        out.join("summary.json"),
        summary.replace("\"schema_version\": 6,", "\"schema_version\": 2,"),
    )
    .unwrap();
    // Its own report, whatever this version would render.
    let own = "| pp64 | apple9-64k | ... | 10.00× | 10.00–10.00 |\n";
    std::fs::write(out.join("report.md"), own).unwrap();
    common::reseal(&out);
    capshim()
        .arg("report")
        .arg(&out)
        .assert()
        .code(3)
        .stdout("")
        .stderr(predicate::str::contains(
            "summary.json: schema_version 2: bench layouts 2 and 3",
        ))
        .stderr(predicate::str::contains("written, it says, by capshim"))
        .stderr(predicate::str::contains(
            "it derives bench bundles of schema_version 5, 6",
        ));
    let shown = capshim()
        .args(["report", "--as-written"])
        .arg(&out)
        .assert()
        .code(4)
        .stderr(predicate::str::contains("NOT derived again"));
    let stdout = String::from_utf8_lossy(&shown.get_output().stdout).into_owned();
    assert!(stdout.starts_with("UNVERIFIED: "), "{stdout}");
    assert!(stdout.ends_with(&format!("\n{own}")), "{stdout}");
    let json = capshim()
        .args(["report", "--as-written", "--json"])
        .arg(&out)
        .assert()
        .code(4);
    assert!(String::from_utf8_lossy(&json.get_output().stdout).contains("\"schema_version\": 2"));
    // Its checksums still count.
    std::fs::write(out.join("results.csv"), "edited\n").unwrap();
    assert_report_refuses(&out, "results.csv does not match its checksum");
    common::reseal(&out);
    // It is shown on its own, not pooled with a bundle it was not derived like.
    let current = s.tmp.path().join("current");
    s.bench(&current).env("FAKE_HOOK", "1").assert().success();
    capshim()
        .args(["report", "--as-written"])
        .arg(&current)
        .arg(&out)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("it is reported on its own"));
}

/// Spawns `capshim bench` with the fake llama-bench (no shim: an A/A bench) and `args`,
/// without the shim settings of the test's environment.
fn spawn_bench(
    s: &Setup,
    model: &Path,
    args: &[&str],
    env: &[(&str, &Path)],
) -> std::process::Child {
    let mut cmd = std::process::Command::new(assert_cmd::cargo::cargo_bin("capshim"));
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy().into_owned();
        if name.starts_with("CAPSHIM_") || name.starts_with("LUME_METAL_") {
            cmd.env_remove(name);
        }
    }
    cmd.current_dir(s.tmp.path())
        .arg("bench")
        .arg("-m")
        .arg(model)
        .arg("--llama-bench")
        .arg(&s.llama)
        .args(["--profile", "again=stock", "-r", "1", "-p", "8", "-n", "4"])
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.spawn().unwrap()
}

/// Waits for `child` to exit, at most 30 s; returns its exit code and stderr.
fn finish(mut child: std::process::Child) -> (Option<i32>, String) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            child.kill().unwrap();
            panic!("capshim bench did not stop");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn sigint(child: &std::process::Child) {
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
}

/// The model is hashed before the first run, and Ctrl-C stops the hashing: exit 130, no run
/// started, the bundle left unsealed with a note saying so. The model is a sparse 64 GiB file:
/// hashing it takes far longer than the test waits, and it takes no disk.
#[test]
fn the_model_is_hashed_before_the_first_run_and_ctrl_c_stops_it() {
    let s = setup();
    let model = s.tmp.path().join("big.gguf");
    std::fs::File::create(&model)
        .unwrap()
        .set_len(64 << 30)
        .unwrap();
    let out = s.tmp.path().join("hashing");
    let log = s.tmp.path().join("runs.log");
    let child = spawn_bench(
        &s,
        &model,
        &["-o", out.to_str().unwrap()],
        &[("FAKE_LOG", &log)],
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !out.join("raw").exists() {
        assert!(std::time::Instant::now() < deadline, "no bundle directory");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    std::thread::sleep(std::time::Duration::from_millis(300));
    sigint(&child);
    let (code, stderr) = finish(child);
    assert_eq!(code, Some(130), "{stderr}");
    assert!(
        stderr.contains("computing the SHA-256 of the model")
            && stderr.contains("big.gguf (68.7 GB) before the first run"),
        "no progress shown: {stderr}"
    );
    assert!(
        stderr.contains("interrupted by SIGINT while computing the SHA-256 of"),
        "{stderr}"
    );
    assert!(!log.exists(), "a run started: {}", read(&log));
    assert!(!out.join("SHA256SUMS").exists());
    let note = read(&out.join("INCOMPLETE"));
    for part in [
        "Why it stopped: interrupted by SIGINT while computing the SHA-256 of",
        "before the first run; no run was started",
        "Runs finished (0 of 24):\n  none",
        "Runs never started: 24",
        "It has no SHA256SUMS, and no summary.json, report.md, results.csv, chart.svg or rounds.svg;",
    ] {
        assert!(note.contains(part), "{part:?} missing:\n{note}");
    }
    assert!(!note.contains("partial"), "{note}");
    assert_report_refuses(&out, "did not finish");
}

/// After the last run the files must be as hashed: a model that changed is named, and the
/// note says every run finished, none partial.
#[test]
fn a_model_changed_during_the_runs_is_named_and_the_bundle_left_unsealed() {
    let s = setup();
    let out = s.tmp.path().join("changed");
    let child = spawn_bench(
        &s,
        &s.model,
        &["--rounds", "2", "-o", out.to_str().unwrap()],
        &[("FAKE_TOUCH", &s.model)],
    );
    let (code, stderr) = finish(child);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "{} changed while capshim used it: its size went from 15 to",
            s.model.canonicalize().unwrap().display()
        )),
        "{stderr}"
    );
    let note = read(&out.join("INCOMPLETE"));
    assert!(note.contains("Runs finished (4 of 4)"), "{note}");
    assert!(note.contains("Runs never started: 0"), "{note}");
    assert!(
        !note.contains("partial") && !note.contains("cut short"),
        "{note}"
    );
    assert!(!out.join("SHA256SUMS").exists());

    // Unsealed: report refuses it (exit 3); --partial shows its completed rounds' table,
    // marked partial on stdout's first line, exit 4.
    capshim().arg("report").arg(&out).assert().code(3);
    let shown = capshim()
        .args(["report", "--partial"])
        .arg(&out)
        .assert()
        .code(4)
        .stderr(predicate::str::contains("PARTIAL:"));
    let stdout = String::from_utf8(shown.get_output().stdout.clone()).unwrap();
    let first = stdout.lines().next().unwrap();
    assert!(
        first.starts_with("PARTIAL: ") && first.contains("its 2 completed rounds"),
        "{stdout}"
    );
    assert!(
        stdout.contains("| pp8  |") && stdout.contains("| tg4  |"),
        "{stdout}"
    );
    assert!(
        stdout.contains("partial: the 2 completed rounds"),
        "{stdout}"
    );
    let json = capshim()
        .args(["report", "--partial", "--json"])
        .arg(&out)
        .assert()
        .code(4);
    let text = String::from_utf8(json.get_output().stdout.clone()).unwrap();
    let (mark, body) = text.split_once('\n').unwrap();
    assert!(mark.starts_with("PARTIAL: "), "{mark}");
    let v: serde_json::Value = serde_json::from_str(body).unwrap();
    let u = &v["rows"][0]["arms"]["again"];
    assert_eq!(u["rounds"].as_array().unwrap().len(), 2, "{u}");
    assert_eq!(v["stock"], "stock");
    // Not on a sealed bundle, nor on a directory without a note.
    let sealed = s.tmp.path().join("sealed");
    s.bench(&sealed).env("FAKE_HOOK", "1").assert().success();
    capshim()
        .args(["report", "--partial"])
        .arg(&sealed)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("is sealed"));
    let empty = s.tmp.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    capshim()
        .args(["report", "--partial"])
        .arg(&empty)
        .assert()
        .code(1)
        .stderr(predicate::str::contains("has no INCOMPLETE note"));
}

/// A model swapped during the runs for another file of the same size and modification time
/// is found by its identity (device and inode), not only its size and time (issue 15 item 7).
#[test]
fn a_model_swapped_with_the_same_size_and_time_is_named_and_the_bundle_left_unsealed() {
    let s = setup();
    let out = s.tmp.path().join("swapped");
    let child = spawn_bench(
        &s,
        &s.model,
        &["--rounds", "2", "-o", out.to_str().unwrap()],
        &[("FAKE_SWAP", &s.model)],
    );
    let (code, stderr) = finish(child);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "{} changed while capshim used it: it is another file now",
            s.model.canonicalize().unwrap().display()
        )),
        "{stderr}"
    );
    assert!(out.join("INCOMPLETE").is_file() && !out.join("SHA256SUMS").exists());
}

/// The schedule is made run by run: the largest --rounds starts at once (the first version
/// allocated every slot first and aborted), and stops cleanly.
#[test]
fn the_largest_round_count_starts_without_allocating_its_schedule() {
    let s = setup();
    let out = s.tmp.path().join("endless");
    let hang = s.tmp.path().join("hang");
    let child = spawn_bench(
        &s,
        &s.model,
        &["--rounds", "4294967295", "-o", out.to_str().unwrap()],
        &[("FAKE_HANG", &hang)],
    );
    let pid_file = hang.with_extension("pid");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !pid_file.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the second run never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    sigint(&child);
    let (code, stderr) = finish(child);
    assert_eq!(code, Some(130), "{stderr}");
    let note = read(&out.join("INCOMPLETE"));
    assert!(note.contains("Runs finished (1 of 8589934590)"), "{note}");
    assert!(note.contains("Runs never started: 8589934588"), "{note}");
}

#[test]
fn a_baseline_without_the_benched_tests_is_refused_before_the_first_run() {
    let s = setup();
    let host = write_json(
        s.tmp.path(),
        "host.json",
        &[
            result("fake", 512, 0, &[2000.0]),
            result("fake", 0, 128, &[20.0]),
        ],
    );
    let out = s.tmp.path().join("never");
    let log = s.tmp.path().join("runs.log");
    s.bench(&out)
        .env("FAKE_LOG", &log)
        .arg("--baseline")
        .arg(&host)
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "host.json has the tests pp512, tg128, but this bench runs pp64, tg16",
        ))
        .stderr(predicate::str::contains("here -p 512 -n 128"));
    assert!(!out.exists() && !log.exists(), "refused after running");
    // One test in common: measured, and the missing one named first.
    let out = s.tmp.path().join("half");
    bench(&s.llama, &s.model)
        .current_dir(s.tmp.path())
        .args(["--profile", "again=stock", "-r", "1", "--rounds", "1"])
        .args(["-p", "512", "-n", "16", "--baseline"])
        .arg(&host)
        .arg("-o")
        .arg(&out)
        .assert()
        .success()
        .stderr(predicate::str::contains(
            "host.json has no tg16: its percent of host will come from the other host processes, or be `—`",
        ));
}

/// llama-bench garbles a non-ASCII model file name in its JSON; the report shows the name
/// capshim gave it.
#[test]
fn a_non_ascii_model_name_is_shown_as_given_not_as_llama_bench_garbles_it() {
    let s = setup();
    let model = s.tmp.path().join("modèle.gguf");
    std::fs::copy(&s.model, &model).unwrap();
    let out = s.tmp.path().join("accents");
    let assert = bench(&s.llama, &model)
        .current_dir(s.tmp.path())
        .env("FAKE_GARBLE", "1")
        .args(["--profile", "again=stock", "-r", "1", "--rounds", "1", "-o"])
        .arg(&out)
        .assert()
        .success();
    let stdout = String::from_utf8_lossy(&assert.get_output().stdout).into_owned();
    assert!(stdout.contains("| modèle | pp512 |"), "{stdout}");
    assert!(!stdout.contains('\u{ffff}'), "{stdout}");
    // The raw file keeps what llama-bench wrote.
    assert!(read(&out.join("raw/stock-r1.json")).contains("mod\\ufffff"));
    assert_report_reproduces(&out, &stdout);
}

#[test]
fn every_arm_keeps_the_users_other_preloads_and_drops_a_renamed_shim() {
    let s = setup();
    let out = s.tmp.path().join("bundle");
    let log = s.tmp.path().join("runs.log");
    // A real library that is not the shim, and an older shim under another name (known by
    // its version record).
    let other = [
        "/lib/x86_64-linux-gnu/libm.so.6",
        "/lib/aarch64-linux-gnu/libm.so.6",
        "/lib64/libm.so.6",
    ]
    .into_iter()
    .map(Path::new)
    .find(|p| p.is_file())
    .expect("libm is needed as a library to preload");
    let old = s.tmp.path().join("old-libcapshim.so");
    std::fs::copy(common::real_shim(), &old).unwrap();
    s.bench_with(&out, &common::real_shim())
        .env(
            common::INJECTION_VAR,
            format!("{}:{}", other.display(), old.display()),
        )
        .env("FAKE_LOG", &log)
        .arg("--allow-inactive")
        .assert()
        .success();
    let shim = common::real_shim();
    let mut seen: Vec<String> = read(&log).lines().map(str::to_string).collect();
    seen.sort();
    seen.dedup();
    assert_eq!(
        seen,
        [
            format!("stock inject={}", other.display()),
            format!("unlocked inject={}:{}", other.display(), shim.display()),
        ]
    );
}

/// `--keep-going`: an arm whose llama-bench fails in every round is recorded as failed, the
/// bundle is sealed and reported (the arm named as failed, no speedup), and bench exits 1
/// because an arm has no result; without `--keep-going` the first failure stops the bench.
#[test]
fn keep_going_records_an_arm_that_fails_in_every_round() {
    let s = setup();
    let out = s.tmp.path().join("kept");
    let run = s
        .bench_rounds(&out, &s.shim, 3)
        .env("FAKE_HOOK", "1")
        .env("FAKE_FAIL_ARM", "unlocked")
        .arg("--keep-going")
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "recorded as failed, going on (--keep-going)",
        ))
        .stderr(predicate::str::contains("no result for arm apple9-64k"));
    let stdout = String::from_utf8_lossy(&run.get_output().stdout).into_owned();
    assert!(out.join("SHA256SUMS").is_file() && !out.join("INCOMPLETE").exists());
    let report = read(&out.join("report.md"));
    assert_eq!(stdout, report);
    assert!(
        report.contains("arm apple9-64k failed in every round (round 1: exit status: 1"),
        "{report}"
    );
    assert!(
        report.contains("it has no figures and no speedup"),
        "{report}"
    );
    let env: serde_json::Value =
        serde_json::from_str(&read(&out.join("environment.json"))).unwrap();
    assert_eq!(env["schema_version"], 6);
    let runs = env["bundle"]["arms"][1]["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 3);
    assert!(
        runs.iter().all(|r| r["failed"] == "exit status: 1"),
        "{runs:?}"
    );
    assert!(env["bundle"]["arms"][0]["runs"][0].get("failed").is_none());
    let failed: Vec<_> = env["runs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["failed"].is_string())
        .collect();
    assert_eq!(failed.len(), 3);
    // The sealed bundle passes report, derived again.
    capshim()
        .arg("report")
        .arg(&out)
        .assert()
        .success()
        .stdout(report.clone());
    // Without --keep-going the first failure stops it, as before.
    let stopped = s.tmp.path().join("stopped");
    s.bench_rounds(&stopped, &s.shim, 3)
        .env("FAKE_HOOK", "1")
        .env("FAKE_FAIL_ARM", "unlocked")
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "llama-bench failed in arm apple9-64k round",
        ));
    assert!(stopped.join("INCOMPLETE").is_file() && !stopped.join("SHA256SUMS").exists());
}

/// `--keep-going` with a reference (stock) arm that fails in every round: no speedup is
/// computed, the report says so and names the arms that ran, and bench exits 0 (every other
/// arm has results).
#[test]
fn keep_going_with_a_failed_reference_reports_no_speedup() {
    let s = setup();
    let out = s.tmp.path().join("no-reference");
    let run = s
        .bench_rounds(&out, &s.shim, 3)
        .env("FAKE_HOOK", "1")
        .env("FAKE_FAIL_ARM", "stock")
        .arg("--keep-going")
        .assert()
        .code(0);
    let stdout = String::from_utf8_lossy(&run.get_output().stdout).into_owned();
    assert!(
        stdout.contains("the reference arm stock failed in every round (round 1: exit status: 1"),
        "{stdout}"
    );
    assert!(
        stdout.contains("no speedup is computed; the arms that ran: apple9-64k"),
        "{stdout}"
    );
    let summary: serde_json::Value =
        serde_json::from_str(&read(&out.join("summary.json"))).unwrap();
    for row in summary["rows"].as_array().unwrap() {
        for (_, arm) in row["arms"].as_object().unwrap() {
            assert!(arm["speedup"].is_null(), "{arm}");
        }
    }
    capshim()
        .arg("report")
        .arg(&out)
        .assert()
        .success()
        .stdout(stdout);
}

/// A closed or full stderr does not stop a bench (issue 15, item 3): progress and notes are
/// auxiliary, so the run goes on, seals its bundle (which report accepts) and exits 0.
#[test]
fn a_closed_or_full_stderr_does_not_stop_the_bench() {
    let s = setup();
    for (name, stderr) in [
        (
            "full",
            std::process::Stdio::from(
                std::fs::OpenOptions::new()
                    .write(true)
                    .open("/dev/full")
                    .unwrap(),
            ),
        ),
        ("closed", {
            let (reader, writer) = std::io::pipe().unwrap();
            drop(reader);
            std::process::Stdio::from(writer)
        }),
    ] {
        let out = s.tmp.path().join(name);
        let mut cmd = std::process::Command::new(assert_cmd::cargo::cargo_bin("capshim"));
        for (var, _) in std::env::vars_os() {
            let var = var.to_string_lossy().into_owned();
            if var.starts_with("CAPSHIM_") || var.starts_with("LUME_METAL_") {
                cmd.env_remove(var);
            }
        }
        let status = cmd
            .current_dir(s.tmp.path())
            .arg("bench")
            .arg("-m")
            .arg(&s.model)
            .arg("--llama-bench")
            .arg(&s.llama)
            .args(["--profile", "again=stock", "-r", "1", "--rounds", "2", "-o"])
            .arg(&out)
            .stdout(std::process::Stdio::null())
            .stderr(stderr)
            .status()
            .unwrap();
        assert_eq!(status.code(), Some(0), "{name}");
        assert!(out.join("SHA256SUMS").is_file(), "{name}");
        capshim().arg("report").arg(&out).assert().success();
    }
}

/// A llama-bench run that exits 0 with its JSON cut short is a failed run with that reason
/// (issue 15, item 6): it stops the bench, or with --keep-going is recorded as failed.
#[test]
fn truncated_llama_bench_output_is_a_failed_run() {
    let s = setup();
    let out = s.tmp.path().join("cut");
    s.bench(&out)
        .env("FAKE_HOOK", "1")
        .env("FAKE_TRUNCATE", "1")
        .assert()
        .code(1)
        .stderr(
            predicate::str::is_match(
                "llama-bench failed in arm (stock|apple9-64k) round 1 \\(its output lacks llama-bench's closing `]`",
            )
            .unwrap(),
        );
    assert!(out.join("INCOMPLETE").is_file() && !out.join("SHA256SUMS").exists());
}

/// bench --help and report --help say what the level rests on: exact for a constant factor
/// without carry-over, approximate otherwise, with the simulated figures; not "whatever the
/// machine's noise" alone.
#[test]
fn the_help_says_what_is_exact_and_what_approximate() {
    let help = |command: &str| {
        let out = capshim().args([command, "--help"]).assert().success();
        String::from_utf8(out.get_output().stdout.clone())
            .unwrap()
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    };
    let bench = help("bench");
    for part in [
        "is exact, by each round's random order and whatever the machine's noise, when the arm \
         changes speed by a constant factor and nothing an arm does carries over",
        "gave 0.88, 0.67, 0.36 coverage at 12 rounds",
        "0.72-0.92 at a 7x speedup",
        "pseudo-median of the rounds' ratios",
        "--cooldown SECONDS pauses between one process and the next",
        "-d, --n-depth <TOKENS>",
    ] {
        assert!(bench.contains(part), "{part:?} missing:\n{bench}");
    }
    assert!(!bench.contains("noise looks like"), "{bench}");
    let report = help("report");
    for part in [
        "approximate under carry-over",
        "For --arm files capshim cannot know the order they ran in",
        "--partial",
        "--rounds-svg",
    ] {
        assert!(report.contains(part), "{part:?} missing:\n{report}");
    }
}

/// A disk that fills during a run: "no space left on device" with the output's path, not
/// "llama-bench printed no results"; the INCOMPLETE note that cannot be written is said to be
/// missing on stderr. The disk is a small tmpfs really filled (ENOSPC), which needs root to
/// mount; elsewhere the test says it did not run.
#[test]
fn a_full_disk_is_named_and_a_note_that_cannot_be_written_is_said_so() {
    let s = setup();
    let Some(small) = common::SmallFs::mount(s.tmp.path(), 1024) else {
        return;
    };
    let out = small.path.join("bundle");
    let child = spawn_bench(
        &s,
        &s.model,
        &["--rounds", "1", "-o", out.to_str().unwrap()],
        &[("FAKE_FILL", &small.path)],
    );
    let (code, stderr) = finish(child);
    assert_eq!(code, Some(1), "{stderr}");
    let raw = format!("{}/raw/", out.display());
    assert!(
        stderr.contains("no space left on device: ") && stderr.contains(&raw),
        "{stderr}"
    );
    assert!(!stderr.contains("printed no results"), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "cannot write the note {}/INCOMPLETE (No space left on device",
            out.display()
        )),
        "{stderr}"
    );
    assert!(!stderr.contains("with an INCOMPLETE note"), "{stderr}");
}

#[test]
fn an_arms_bench_args_and_profile_file_settings_reach_its_llama_bench_only() {
    let s = setup();
    let file = s.tmp.path().join("fa.toml");
    std::fs::write(
        &file,
        "name = \"fa-file\"\napple_family_max = 1009\n[env]\nGGML_METAL_NO_RESIDENCY = \"1\"\n\
         [args]\nbench = \"-ub 256\"\ncommon = \"-fa on\"\n",
    )
    .unwrap();
    let out = s.tmp.path().join("args");
    s.bench(&out)
        .args([
            "--allow-inactive",
            "--arm",
            "fa1=stock,bench-args=-fa 1 -ot 'a=CPU,b=CPU'",
        ])
        .arg("--arm")
        .arg(format!("pf=file={},bench-args=-fa 0", file.display()))
        .args(["--", "-t", "2"])
        .assert()
        .success();
    let env: serde_json::Value =
        serde_json::from_str(&read(&out.join("environment.json"))).unwrap();
    assert_eq!(
        env["arms"][1]["args"]["bench"],
        serde_json::json!(["-fa", "1", "-ot", "a=CPU,b=CPU"])
    );
    assert_eq!(
        env["arms"][2]["args"]["bench"],
        serde_json::json!(["-ub", "256", "-fa", "0"])
    );
    assert_eq!(
        env["arms"][2]["args"]["common"],
        serde_json::json!(["-fa", "on"])
    );
    assert_eq!(env["arms"][2]["env"]["GGML_METAL_NO_RESIDENCY"], "1");
    // The manifest keeps each arm's bench-args, so that report words a setting they change.
    assert_eq!(
        env["bundle"]["arms"][1]["args"],
        serde_json::json!(["-fa", "1", "-ot", "a=CPU,b=CPU"])
    );
    assert!(env["bundle"]["arms"][0].get("args").is_none());
    let runs = env["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 6);
    for run in runs {
        let argv: Vec<&str> = run["argv"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect();
        let tail: &[&str] = match run["arm"].as_str().unwrap() {
            "stock" => &["-t", "2"],
            "fa1" => &["-t", "2", "-fa", "1", "-ot", "a=CPU,b=CPU"],
            _ => &["-t", "2", "-ub", "256", "-fa", "0"],
        };
        assert!(argv.ends_with(tail), "{argv:?}");
        let residency = &run["env"]["set"]["GGML_METAL_NO_RESIDENCY"];
        assert_eq!(residency.is_string(), run["arm"] == "pf", "{run}");
    }
    assert_report_reproduces(&out, &read(&out.join("report.md")));
    // An arm may not repeat what every arm gets, nor change what is measured.
    for (arm, says) in [
        (
            "x=stock,bench-args=--threads 4",
            "option --threads repeats -t",
        ),
        ("x=stock,bench-args=-p 8", "\"-p\" is refused"),
        ("x=stock,bench-args=-hf user/model", "\"-hf\" is refused"),
        ("x=stock,bench-args=-d 512", "-d is refused"),
    ] {
        s.bench(&s.tmp.path().join("never"))
            .args(["--arm", arm, "--", "-t", "2"])
            .assert()
            .code(2)
            .stderr(predicate::str::contains("capshim: error: arm \"x\": "))
            .stderr(predicate::str::contains(says));
    }
    assert!(!s.tmp.path().join("never").exists());
}
