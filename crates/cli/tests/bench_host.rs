//! `capshim bench --baseline` with several host processes (docs/bench.md, Percent of host):
//! repeated files and a host bench bundle accepted, checked and recorded; bad ones refused
//! before the first run, naming the file and the fix; one host process marked as such.
#![cfg(unix)]

mod common;

use std::path::{Path, PathBuf};

use common::{
    assert_report_reproduces, bench, capshim, fake_llama_bench, fake_model, read, reseal, result,
    write_json,
};
use predicates::prelude::*;

struct Setup {
    tmp: tempfile::TempDir,
    llama: PathBuf,
    model: PathBuf,
}

fn setup() -> Setup {
    let tmp = tempfile::tempdir().unwrap();
    let llama = fake_llama_bench(tmp.path());
    let model = fake_model(tmp.path());
    Setup { tmp, llama, model }
}

impl Setup {
    /// An A/A bench (stock and a second stock arm, no shim) of `rounds` rounds into `out`,
    /// `-r 3 -p 64 -n 16`.
    fn bench(&self, out: &Path, rounds: u32) -> assert_cmd::Command {
        let mut cmd = bench(&self.llama, &self.model);
        cmd.current_dir(self.tmp.path())
            .env("FAKE_STAMP", "1")
            .args([
                "--profile",
                "again=stock",
                "-r",
                "3",
                "-p",
                "64",
                "-n",
                "16",
            ])
            .arg("--rounds")
            .arg(rounds.to_string())
            .arg("-o")
            .arg(out);
        cmd
    }

    /// A host file: pp64 around `pp` and tg16 around `tg` tokens/s.
    fn host_file(&self, name: &str, pp: f64, tg: f64) -> PathBuf {
        write_json(
            self.tmp.path(),
            name,
            &[
                result("fake", 64, 0, &[pp, pp * 1.01, pp * 0.99]),
                result("fake", 0, 16, &[tg, tg * 1.01, tg * 0.99]),
            ],
        )
    }
}

fn summary(dir: &Path) -> serde_json::Value {
    serde_json::from_str(&read(&dir.join("summary.json"))).unwrap()
}

fn environment(dir: &Path) -> serde_json::Value {
    serde_json::from_str(&read(&dir.join("environment.json"))).unwrap()
}

#[test]
fn repeated_baselines_give_percent_of_host_an_interval() {
    let s = setup();
    let hosts: Vec<PathBuf> = (0..3)
        .map(|i| {
            s.host_file(
                &format!("host{i}.json"),
                2000.0 + 10.0 * i as f64,
                200.0 + i as f64,
            )
        })
        .collect();
    let out = s.tmp.path().join("guest");
    let mut cmd = s.bench(&out, 8);
    for h in &hosts {
        cmd.arg("--baseline").arg(h);
    }
    cmd.assert().success();
    // Each host process a file of its own, every one hashed in environment.json.
    for i in 1..=3 {
        assert!(out.join(format!("raw/host-{i}.json")).is_file());
    }
    assert!(!out.join("raw/host.json").exists());
    let env = environment(&out);
    let recorded = env["files"]["baselines"].as_array().unwrap();
    assert_eq!(recorded.len(), 3, "{env}");
    assert!(
        recorded
            .iter()
            .all(|f| f["sha256"].as_str().unwrap().len() == 64)
    );
    assert!(env["files"]["baseline"].is_null(), "{env}");
    let summary = summary(&out);
    for row in summary["rows"].as_array().unwrap() {
        let again = &row["arms"]["again"];
        assert_eq!(again["percent_of_host_basis"]["host_processes"], 3, "{row}");
        assert_eq!(
            again["percent_of_host_basis"]["guest_processes"], 8,
            "{row}"
        );
        let ci = &again["percent_of_host_ci95"];
        let p = again["percent_of_host"].as_f64().unwrap();
        assert!(
            ci["low"].as_f64().unwrap() <= p && p <= ci["high"].as_f64().unwrap(),
            "{row}"
        );
        assert!(again["percent_of_host_basis"]["coverage"].as_f64().unwrap() >= 0.95);
    }
    // The fake's pp64 is 1000 tokens/s, the host's 2000–2020: about 50%, with its interval.
    let md = read(&out.join("report.md"));
    assert!(md.contains("% [49."), "{md}");
    assert!(md.contains("Mann-Whitney interval"), "{md}");
    assert!(md.contains("not a drift between the two sessions"), "{md}");
    // The host's processes pair with no round of the bench: its speedup is descriptive.
    let host = &summary["rows"][0]["arms"]["host"];
    assert!(host["speedup_ci95"].is_null(), "{host}");
    assert!(host["speedup_spread"].is_array(), "{host}");
    assert!(
        host["speedup_no_interval"]
            .as_str()
            .unwrap()
            .contains("did not run in the same capshim bench's random order"),
        "{host}"
    );
    let csv = read(&out.join("results.csv"));
    assert!(
        csv.lines()
            .next()
            .unwrap()
            .contains("percent_of_host_ci95_low again"),
        "{csv}"
    );
    // Derived again by report, byte for byte.
    assert_report_reproduces(&out, &md);
}

#[test]
fn a_host_bench_bundle_is_checked_and_gives_its_stock_processes() {
    let s = setup();
    let host = s.tmp.path().join("host-bundle");
    s.bench(&host, 4).assert().success();
    let out = s.tmp.path().join("guest");
    s.bench(&out, 8)
        .arg("--baseline")
        .arg(&host)
        .assert()
        .success();
    for round in 1..=4 {
        assert_eq!(
            read(&out.join(format!("raw/host-{round}.json"))),
            read(&host.join(format!("raw/stock-r{round}.json")))
        );
    }
    let env = environment(&out);
    assert_eq!(env["files"]["baselines"].as_array().unwrap().len(), 4);
    let sums = &env["files"]["baseline_bundles"][0];
    assert!(
        sums["path"]
            .as_str()
            .unwrap()
            .ends_with("host-bundle/SHA256SUMS"),
        "{env}"
    );
    let summary = summary(&out);
    let again = &summary["rows"][0]["arms"]["again"];
    assert_eq!(
        again["percent_of_host_basis"]["host_processes"], 4,
        "{again}"
    );
    // Both sides ran the same fake: 100% of host.
    assert_eq!(again["percent_of_host"], 100.0, "{again}");

    // A host bundle whose machine record says it ran in a virtual machine is used, with a
    // warning: percent of host is then of that guest.
    let env_path = host.join("environment.json");
    let mut env: serde_json::Value = serde_json::from_str(&read(&env_path)).unwrap();
    env["machine"]["hw_model"] = "VirtualMac2,1".into();
    std::fs::write(&env_path, serde_json::to_string_pretty(&env).unwrap()).unwrap();
    reseal(&host);
    s.bench(&s.tmp.path().join("guest-2"), 8)
        .arg("--baseline")
        .arg(&host)
        .assert()
        .success()
        .stderr(predicate::str::contains(
            "its machine record says it ran in a virtual machine (hw.model \"VirtualMac2,1\"",
        ));

    // A host bundle changed after it was sealed is refused before the first run, naming it.
    let raw = host.join("raw/stock-r2.json");
    let text = read(&raw).replacen("1000", "1500", 1);
    std::fs::write(&raw, text).unwrap();
    let never = s.tmp.path().join("never");
    s.bench(&never, 8)
        .arg("--baseline")
        .arg(&host)
        .assert()
        .code(1)
        .stderr(predicate::str::contains(format!(
            "--baseline {}: ",
            host.display()
        )))
        .stderr(predicate::str::contains(
            "give a bench bundle made on the host that `capshim report",
        ));
    assert!(!never.exists());
}

#[test]
fn bad_baselines_are_refused_before_the_first_run() {
    let s = setup();
    let good = s.host_file("good.json", 2000.0, 200.0);
    // A second host file without the bench's tests: named, with the -p/-n that would match.
    let other = write_json(
        s.tmp.path(),
        "other-tests.json",
        &[result("fake", 512, 0, &[2000.0])],
    );
    let never = s.tmp.path().join("never");
    s.bench(&never, 8)
        .arg("--baseline")
        .arg(&good)
        .arg("--baseline")
        .arg(&other)
        .assert()
        .code(2)
        .stderr(predicate::str::contains(format!(
            "--baseline {} has the tests pp512, but this bench runs pp64, tg16",
            other.display()
        )))
        .stderr(predicate::str::contains("here -p 512 -n 0"));
    // Host files of two models cannot be one host.
    let mixed = write_json(
        s.tmp.path(),
        "mixed.json",
        &[
            result("another", 64, 0, &[2000.0]),
            result("another", 0, 16, &[200.0]),
        ],
    );
    s.bench(&never, 8)
        .arg("--baseline")
        .arg(&good)
        .arg("--baseline")
        .arg(&mixed)
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "the host's processes cannot be one baseline",
        ))
        .stderr(predicate::str::contains("mixed.json"));
    // One file twice would count one process twice.
    s.bench(&never, 8)
        .arg("--baseline")
        .arg(&good)
        .arg("--baseline")
        .arg(s.tmp.path().join("./good.json"))
        .assert()
        .code(2)
        .stderr(predicate::str::contains("is given twice"));
    // A verify bundle, or any directory that is not a sealed bench bundle, is not a host.
    let verify = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/bundles/verify1-fake-equivalent");
    s.bench(&never, 8)
        .arg("--baseline")
        .arg(&verify)
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "it is a verify bundle, not a bench bundle; give a bench bundle of llama-bench made \
             on the host",
        ));
    let empty = s.tmp.path().join("not-a-bundle");
    std::fs::create_dir(&empty).unwrap();
    s.bench(&never, 8)
        .arg("--baseline")
        .arg(&empty)
        .assert()
        .code(1)
        .stderr(predicate::str::contains(format!(
            "--baseline {}: ",
            empty.display()
        )));
    assert!(!never.exists());
}

#[test]
fn one_host_process_is_marked_and_rounded() {
    let s = setup();
    let host = s.host_file("host.json", 2000.0, 200.0);
    let out = s.tmp.path().join("guest");
    s.bench(&out, 6)
        .arg("--baseline")
        .arg(&host)
        .assert()
        .success();
    // The layout of one file given alone is unchanged.
    assert!(out.join("raw/host.json").is_file());
    let env = environment(&out);
    assert!(env["files"]["baseline"]["sha256"].is_string(), "{env}");
    assert!(env["files"].get("baselines").is_none(), "{env}");
    let summary = summary(&out);
    let again = &summary["rows"][0]["arms"]["again"];
    let basis = &again["percent_of_host_basis"];
    assert_eq!(basis["host_processes"], 1, "{again}");
    assert!(basis["resolution"].is_number(), "{again}");
    assert!(
        basis["no_interval"]
            .as_str()
            .unwrap()
            .contains("a single host process")
    );
    assert!(again.get("percent_of_host_ci95").is_none(), "{again}");
    let md = read(&out.join("report.md"));
    assert!(md.contains("% (1 host process)"), "{md}");
    // The same in report's output.
    capshim()
        .arg("report")
        .arg(&out)
        .assert()
        .success()
        .stdout(predicate::str::contains("% (1 host process)"));
}

#[test]
fn report_takes_host_processes_as_bench_does() {
    let s = setup();
    let host = s.tmp.path().join("host-bundle");
    s.bench(&host, 3).assert().success();
    // A guest bundle with a host of its own, 6 processes: as many as the rounds an interval
    // needs, yet never paired with the guest's rounds.
    let guest = s.tmp.path().join("guest");
    let mut cmd = s.bench(&guest, 8);
    for i in 0..6 {
        let own = s.host_file(&format!("own{i}.json"), 2000.0 + i as f64, 200.0);
        cmd.arg("--baseline").arg(own);
    }
    cmd.assert().success();
    let own = &summary(&guest)["rows"][0]["arms"]["host"];
    assert!(
        own["speedup_ci95"].is_null() && own["speedup_spread"].is_array(),
        "{own}"
    );
    // A second host session, of the same model (the fake's).
    let more = s.tmp.path().join("host-more");
    s.bench(&more, 1).assert().success();
    let json = capshim()
        .args(["report", "--json"])
        .arg(&guest)
        .arg("--baseline")
        .arg(&host)
        .arg("--baseline")
        .arg(&more)
        .assert()
        .success()
        .stderr(predicate::str::contains(
            "the arm \"host\", a host of the reported input, is shown as an ordinary arm",
        ));
    let summary: serde_json::Value = serde_json::from_slice(&json.get_output().stdout).unwrap();
    assert_eq!(summary["host"], "baseline", "{summary}");
    assert_eq!(summary["schema_version"], 6);
    let again = &summary["rows"][0]["arms"]["again"];
    assert_eq!(
        again["percent_of_host_basis"]["host_processes"], 4,
        "{again}"
    );
    assert!(again["percent_of_host_ci95"]["low"].is_number(), "{again}");
    // The guest's own host is now an ordinary arm, still not paired with the rounds.
    let own = &summary["rows"][0]["arms"]["host"];
    assert!(
        own["speedup_ci95"].is_null() && own["verdict"].is_null(),
        "{own}"
    );
    // A host of another model is refused (exit 1), as bench refuses it, naming both models.
    let other_model = write_json(
        s.tmp.path(),
        "other-model.json",
        &[
            result("another", 64, 0, &[2000.0]),
            result("another", 0, 16, &[200.0]),
        ],
    );
    capshim()
        .arg("report")
        .arg(&guest)
        .arg("--baseline")
        .arg(&other_model)
        .assert()
        .code(1)
        .stdout("")
        .stderr(predicate::str::contains(format!(
            "--baseline {}: the host measured another (another type",
            other_model.display()
        )))
        .stderr(predicate::str::contains(
            "percent of host across models is meaningless",
        ));
    // A host bundle that fails its check is refused, naming it.
    std::fs::write(host.join("report.md"), "edited\n").unwrap();
    capshim()
        .arg("report")
        .arg(&guest)
        .arg("--baseline")
        .arg(&host)
        .assert()
        .code(1)
        .stdout("")
        .stderr(predicate::str::contains(format!(
            "--baseline {}: ",
            host.display()
        )));
}

/// A bundle reported on its own (here a selftest bundle) takes no host: refused, not ignored.
#[test]
fn a_bundle_shown_alone_refuses_a_baseline() {
    let s = setup();
    let file = s.host_file("host.json", 1000.0, 100.0);
    let fixture =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/selftest/selftest1-simguest");
    capshim()
        .arg("report")
        .arg(&fixture)
        .arg("--baseline")
        .arg(&file)
        .assert()
        .code(2)
        .stdout("")
        .stderr(predicate::str::contains(
            "it is reported on its own, without other bundles, --arm, --stock, --host or --baseline",
        ));
}

/// A copy of a host file or bundle (another path, the same content) is the same host
/// process: refused in bench and in report, naming both paths, as `report --arm` does.
#[test]
fn copies_of_host_processes_are_refused() {
    let s = setup();
    let good = s.host_file("good.json", 2000.0, 200.0);
    let copy = s.tmp.path().join("good-copy.json");
    std::fs::copy(&good, &copy).unwrap();
    let never = s.tmp.path().join("never");
    let same = format!(
        "{} holds the same results as {}",
        copy.display(),
        good.display()
    );
    s.bench(&never, 8)
        .arg("--baseline")
        .arg(&good)
        .arg("--baseline")
        .arg(&copy)
        .assert()
        .code(2)
        .stderr(predicate::str::contains(same.clone()));
    assert!(!never.exists());
    // A host bundle and its `cp -r`.
    let host = s.tmp.path().join("host1");
    s.bench(&host, 2).assert().success();
    let twin = s.tmp.path().join("host1b");
    let copied = std::process::Command::new("cp")
        .arg("-r")
        .arg(&host)
        .arg(&twin)
        .status()
        .unwrap();
    assert!(copied.success());
    let twin_file = format!(
        "{} holds the same results as {}",
        twin.join("raw/stock-r1.json").display(),
        host.join("raw/stock-r1.json").display()
    );
    s.bench(&never, 8)
        .arg("--baseline")
        .arg(&host)
        .arg("--baseline")
        .arg(&twin)
        .assert()
        .code(2)
        .stderr(predicate::str::contains(twin_file.clone()));
    assert!(!never.exists());
    // report --baseline: the same refusals.
    let guest = s.tmp.path().join("guest");
    s.bench(&guest, 2).assert().success();
    for (a, b, says) in [(&good, &copy, &same), (&host, &twin, &twin_file)] {
        capshim()
            .arg("report")
            .arg(&guest)
            .arg("--baseline")
            .arg(a)
            .arg("--baseline")
            .arg(b)
            .assert()
            .code(2)
            .stdout("")
            .stderr(predicate::str::contains(says.as_str()));
    }
}

/// `report --baseline` refuses what bench refuses: a host that shares no test with the arms
/// (a `bench --command` bundle's), and one file as both an arm's and the host's.
#[test]
fn report_refuses_a_host_that_is_no_host_of_the_arms() {
    let s = setup();
    let host = s.tmp.path().join("host1");
    s.bench(&host, 2).assert().success();
    let cmd = s.tmp.path().join("cmd");
    capshim()
        .current_dir(s.tmp.path())
        .args([
            "bench",
            "--command",
            "true",
            "--profile",
            "again=stock",
            "--rounds",
            "2",
            "-o",
        ])
        .arg(&cmd)
        .assert()
        .success();
    capshim()
        .arg("report")
        .arg(&host)
        .arg(&cmd)
        .arg("--baseline")
        .arg(&host)
        .assert()
        .code(2);
    capshim()
        .arg("report")
        .arg(&cmd)
        .arg("--baseline")
        .arg(&host)
        .assert()
        .code(2)
        .stdout("")
        .stderr(predicate::str::contains(format!(
            "--baseline {} has the tests pp64, tg16, but the arms reported have",
            host.display()
        )));
    let file = s.host_file("hj1.json", 2000.0, 200.0);
    capshim()
        .arg("report")
        .arg(format!("--arm=stock={}", file.display()))
        .arg("--baseline")
        .arg(&file)
        .assert()
        .code(2)
        .stdout("")
        .stderr(predicate::str::contains(format!(
            "--baseline {} holds the same results as {} of arm \"stock\"",
            file.display(),
            file.display()
        )));
}

/// A GGUF file (version 3) without key-values whose tensors have `shapes`: a model whose
/// parameter count capshim reads before the first run.
fn gguf(path: &Path, shapes: &[&[u64]]) -> PathBuf {
    let mut b: Vec<u8> = b"GGUF".to_vec();
    b.extend(3u32.to_le_bytes());
    b.extend((shapes.len() as u64).to_le_bytes());
    b.extend(0u64.to_le_bytes());
    for (i, shape) in shapes.iter().enumerate() {
        let name = format!("t{i}");
        b.extend((name.len() as u64).to_le_bytes());
        b.extend(name.as_bytes());
        b.extend((shape.len() as u32).to_le_bytes());
        for d in *shape {
            b.extend(d.to_le_bytes());
        }
        b.extend(0u32.to_le_bytes());
        b.extend(0u64.to_le_bytes());
    }
    std::fs::write(path, b).unwrap();
    path.to_path_buf()
}

/// A host of another model than the bench's is refused before the first run, naming both: a
/// host file by its parameter count against the model's GGUF tensors, a host bundle by the
/// model's SHA-256 it records.
#[test]
fn a_host_of_another_model_is_refused_before_the_first_run() {
    let s = setup();
    // The host files' model (common::result) has 1100048384 parameters.
    let file = s.host_file("host.json", 2000.0, 200.0);
    let never = s.tmp.path().join("never");
    let small = gguf(&s.tmp.path().join("small.gguf"), &[&[2000]]);
    bench(&s.llama, &small)
        .current_dir(s.tmp.path())
        .args([
            "--rounds",
            "2",
            "-p",
            "64",
            "-n",
            "16",
            "--profile",
            "again=stock",
        ])
        .arg("--baseline")
        .arg(&file)
        .arg("-o")
        .arg(&never)
        .assert()
        .code(1)
        .stderr(predicate::str::contains(format!(
            "--baseline {}: the host measured fake (fake type, ",
            file.display()
        )))
        .stderr(predicate::str::contains(format!(
            "but this bench's model {} is of 2000 parameters (its GGUF tensors), the host's \
             1100048384: percent of host across models is meaningless",
            small.display()
        )));
    assert!(!never.exists());
    // The same parameter count: accepted.
    let same = gguf(&s.tmp.path().join("same.gguf"), &[&[1100048384]]);
    bench(&s.llama, &same)
        .current_dir(s.tmp.path())
        .args([
            "--rounds",
            "2",
            "-p",
            "64",
            "-n",
            "16",
            "--profile",
            "again=stock",
        ])
        .arg("--baseline")
        .arg(&file)
        .arg("-o")
        .arg(s.tmp.path().join("same-model"))
        .assert()
        .success();
    // A host bundle of fake.gguf against another file of its size.
    let host = s.tmp.path().join("host1");
    s.bench(&host, 2).assert().success();
    let other = s.tmp.path().join("other.gguf");
    std::fs::write(&other, b"GGUF fake modeX").unwrap();
    bench(&s.llama, &other)
        .current_dir(s.tmp.path())
        .args([
            "--rounds",
            "2",
            "-p",
            "64",
            "-n",
            "16",
            "--profile",
            "again=stock",
        ])
        .arg("--baseline")
        .arg(&host)
        .arg("-o")
        .arg(&never)
        .assert()
        .code(1)
        .stderr(predicate::str::contains(format!(
            "but this bench's model {} is SHA-256 ",
            other.display()
        )))
        .stderr(predicate::str::contains(
            "percent of host across models is meaningless",
        ));
    assert!(!never.exists());
}

/// A directory that is no bundle, or a `bench --command` bundle, is named for what it is; a
/// host's drifting processes are called host processes, not rounds.
#[test]
fn what_is_no_host_is_named_and_host_processes_are_not_rounds() {
    let s = setup();
    let host = s.tmp.path().join("host1");
    s.bench(&host, 2).assert().success();
    let cmd = s.tmp.path().join("cmd");
    capshim()
        .current_dir(s.tmp.path())
        .args([
            "bench",
            "--command",
            "true",
            "--profile",
            "again=stock",
            "--rounds",
            "2",
            "-o",
        ])
        .arg(&cmd)
        .assert()
        .success();
    let never = s.tmp.path().join("never");
    for (dir, says) in [
        (
            s.tmp.path().to_path_buf(),
            "it is not an evidence bundle (no environment.json",
        ),
        (
            host.join("raw"),
            "it is not an evidence bundle (no environment.json",
        ),
        (
            cmd.clone(),
            "it is a `capshim bench --command` bundle: it has no llama-bench results",
        ),
    ] {
        s.bench(&never, 8)
            .arg("--baseline")
            .arg(&dir)
            .assert()
            .code(1)
            .stderr(predicate::str::contains(format!(
                "--baseline {}: {says}",
                dir.display()
            )))
            .stderr(predicate::str::contains("did not finish").not())
            .stderr(predicate::str::contains("accepts").not());
    }
    assert!(!never.exists());
    // Two host processes 20% apart: a drift of the host's processes.
    let a = s.host_file("a.json", 2000.0, 200.0);
    let b = s.host_file("b.json", 2400.0, 200.0);
    s.bench(&s.tmp.path().join("guest"), 2)
        .arg("--baseline")
        .arg(&a)
        .arg("--baseline")
        .arg(&b)
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "host process medians drift apart by 18.2% (process 1: 2000.00, process 2: 2400.00 tokens/s)",
        ));
}
