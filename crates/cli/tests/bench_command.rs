//! `capshim bench --command`: any workload per arm, end to end with small shell commands: a
//! planted slowdown found by the wall time, printed values read exactly by `--metric`, warm-up
//! and prepare runs, per-arm arguments, the shim handed past the shell, failures with and
//! without `--keep-going`, refused combinations, and `capshim report` on every bundle written.
#![cfg(unix)]

mod common;

use std::path::Path;

use common::{assert_report_reproduces, capshim, inert_shim, read};
use predicates::prelude::*;
use serde_json::Value;

/// `capshim bench --command CMD -o OUT --rounds ROUNDS`, in `dir`.
fn bench(dir: &Path, command: &str, out: &Path, rounds: u32) -> assert_cmd::Command {
    let mut cmd = capshim();
    cmd.current_dir(dir)
        .arg("bench")
        .arg("--command")
        .arg(command)
        .arg("--rounds")
        .arg(rounds.to_string())
        .arg("-o")
        .arg(out);
    cmd
}

fn json(path: &Path) -> Value {
    serde_json::from_str(&read(path)).unwrap()
}

/// The cell of `arm` in the summary's only row.
fn cell<'a>(summary: &'a Value, arm: &str) -> &'a Value {
    let rows = summary["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{summary}");
    &rows[0]["arms"][arm]
}

#[test]
fn a_planted_2x_slowdown_of_one_arm_is_found_by_the_wall_time() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("b");
    // The arm `slow` sets SLOW=1, and the command then sleeps twice as long.
    let command = r#"if [ -n "$SLOW" ]; then sleep 0.12; else sleep 0.06; fi"#;
    let assert = bench(tmp.path(), command, &out, 8)
        .args(["--arm", "slow=stock,SLOW=1"])
        .assert()
        .success();
    let stdout = String::from_utf8_lossy(&assert.get_output().stdout).into_owned();
    let summary = json(&out.join("summary.json"));
    let row = &summary["rows"][0];
    assert_eq!(row["test"], "wall");
    assert_eq!(row["unit"], "seconds");
    let slow = cell(&summary, "slow");
    let ci = &slow["speedup_ci95"];
    let (low, high) = (ci["low"].as_f64().unwrap(), ci["high"].as_f64().unwrap());
    eprintln!(
        "planted 2x: speedup {} [{low} {high}]",
        slow["speedup_vs_stock"]
    );
    assert!(high < 0.75 && low > 0.3, "interval [{low} {high}]");
    assert_eq!(slow["verdict"], "slower");
    // The wall times are the processes' own, in seconds: at least the sleep.
    assert!(cell(&summary, "stock")["median_ts"].as_f64().unwrap() >= 0.06);
    assert!(slow["median_ts"].as_f64().unwrap() >= 0.12);
    assert!(stdout.contains("| command | wall |"), "{stdout}");
    assert!(stdout.contains("Lower is better here"), "{stdout}");
    // Every ratio the report names is stock / arm, as that sentence says.
    assert!(
        stdout.contains("estimate of each round's stock median / arm median")
            && !stdout.contains("arm median / stock median"),
        "{stdout}"
    );
    // So does the rounds plot's title.
    let rounds = std::fs::read_to_string(out.join("rounds.svg")).unwrap();
    assert!(
        rounds.contains("stock median / arm median (lower is better)")
            && !rounds.contains("arm median / stock median"),
        "{rounds}"
    );
    // The bundle says what it measured, and report derives it again.
    let env = json(&out.join("environment.json"));
    assert_eq!(env["kind"], "bench");
    assert_eq!(env["schema_version"], 6);
    assert_eq!(env["bundle"]["workload"]["measure"], "wall");
    assert_eq!(env["bundle"]["workload"]["command"], command);
    assert_eq!(env["runs"].as_array().unwrap().len(), 16);
    assert_eq!(env["runs"][0]["argv"][0], "/bin/sh");
    assert!(out.join("raw/slow-r8.stdout").is_file() && out.join("raw/stock-r1.stderr").is_file());
    assert!(read(&out.join("results.csv")).contains("command,wall,median_ts,seconds,"));
    assert_report_reproduces(&out, &read(&out.join("report.md")));
    // The matrix and --llama-json compare llama-bench's tokens/s across machines: a command's
    // seconds are refused there (exit 2), not shown as tokens/s.
    for option in ["--matrix", "--llama-json"] {
        capshim()
            .args(["report", option])
            .arg(&out)
            .assert()
            .code(2)
            .stdout("")
            .stderr(predicate::str::contains(
                "is a `capshim bench --command` bundle: its figures are the command's",
            ));
    }
}

/// A command printing `tokens/s: BASE+n` on its `n`-th run (each arm counting its own runs
/// in `dir`), on stdout, or on stderr where `TO_STDERR` is set.
fn counting_command(dir: &Path) -> String {
    format!(
        r#"f="{}/count-${{BASE}}"; n=$(cat "$f" 2>/dev/null || echo 0); n=$((n+1)); echo $n > "$f"; if [ -n "$TO_STDERR" ]; then echo "noise; tokens/s: $((BASE+n)).25" >&2; else echo "tokens/s: $((BASE+n)).25"; fi"#,
        dir.display()
    )
}

#[test]
fn metric_reads_the_printed_values_exactly_from_stdout_then_stderr() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("b");
    bench(tmp.path(), &counting_command(tmp.path()), &out, 6)
        .env("BASE", "100")
        .args(["--arm", "fast=stock,BASE=200,TO_STDERR=1"])
        .args(["--metric", r"tokens/s: ([0-9.]+)", "--unit", "tokens/s"])
        .assert()
        .success();
    let summary = json(&out.join("summary.json"));
    assert_eq!(summary["rows"][0]["test"], "metric");
    assert_eq!(summary["rows"][0]["unit"], "tokens/s");
    // Runs 1..6 print BASE+1.25 .. BASE+6.25: the median is BASE+3.75, exactly.
    let stock = cell(&summary, "stock");
    let fast = cell(&summary, "fast");
    assert_eq!(stock["median_ts"], 103.75);
    assert_eq!(fast["median_ts"], 203.75);
    assert_eq!(stock["min_ts"], 101.25);
    assert_eq!(fast["max_ts"], 206.25);
    let samples: Vec<f64> = fast["samples_ts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    let mut sorted = samples.clone();
    sorted.sort_by(f64::total_cmp);
    assert_eq!(sorted, [201.25, 202.25, 203.25, 204.25, 205.25, 206.25]);
    // Higher is better: about twice the throughput is faster.
    assert_eq!(fast["verdict"], "faster");
    assert!(fast["speedup_vs_stock"].as_f64().unwrap() > 1.9);
    assert_report_reproduces(&out, &read(&out.join("report.md")));
    // The values come from the raw outputs: one changed (and the checksums written again) no
    // longer gives the derived files.
    let copy = tmp.path().join("changed");
    std::fs::create_dir(&copy).unwrap();
    let status = std::process::Command::new("cp")
        .arg("-R")
        .arg(out.join("."))
        .arg(&copy)
        .status()
        .unwrap();
    assert!(status.success());
    std::fs::write(copy.join("raw/stock-r1.stdout"), "tokens/s: 999\n").unwrap();
    common::reseal(&copy);
    common::assert_report_refuses(&copy, "summary.json");

    // --lower-is-better flips it: the same values make the arm slower.
    for f in ["count-100", "count-200"] {
        std::fs::remove_file(tmp.path().join(f)).unwrap();
    }
    let out = tmp.path().join("lower");
    bench(tmp.path(), &counting_command(tmp.path()), &out, 6)
        .env("BASE", "100")
        .args(["--arm", "fast=stock,BASE=200"])
        .args(["--metric", r"tokens/s: ([0-9.]+)", "--lower-is-better"])
        .assert()
        .success();
    let summary = json(&out.join("summary.json"));
    assert_eq!(summary["rows"][0]["unit"], "value");
    let fast = cell(&summary, "fast");
    assert_eq!(fast["median_ts"], 203.75);
    assert_eq!(fast["verdict"], "slower");
    assert!(fast["speedup_vs_stock"].as_f64().unwrap() < 0.55);
    assert_report_reproduces(&out, &read(&out.join("report.md")));
}

#[test]
fn a_run_whose_output_has_no_match_fails_naming_the_regex() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("b");
    bench(tmp.path(), "echo nothing here", &out, 6)
        .args(["--metric", r"tokens/s: ([0-9.]+)"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            r#"no match of --metric "tokens/s: ([0-9.]+)" in its stdout or stderr"#,
        ))
        .stderr(predicate::str::contains("nothing here"));
    assert!(out.join("INCOMPLETE").is_file());
}

#[test]
fn a_failing_command_stops_the_bench_naming_its_exit_status_and_output() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("b");
    bench(
        tmp.path(),
        "echo last words on stdout; echo trouble on stderr >&2; exit 7",
        &out,
        6,
    )
    .assert()
    .code(1)
    .stderr(
        predicate::str::is_match(r"the command failed in arm \S+ round 1 \(exit status: 7\)")
            .unwrap(),
    )
    .stderr(predicate::str::contains("trouble on stderr"))
    .stderr(predicate::str::contains("last words on stdout"));
    assert!(out.join("INCOMPLETE").is_file() && !out.join("SHA256SUMS").exists());
    // report --partial cannot show it (the values are recorded at the seal), and says so.
    capshim()
        .args(["report", "--partial"])
        .arg(&out)
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "an unfinished `capshim bench --command` bundle",
        ));
}

#[test]
fn keep_going_records_failed_runs_and_the_bundle_is_sealed() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("b");
    // The arm `flaky` fails on its second run; `broken` on every run.
    let command = format!(
        r#"f="{}/n-$ARM"; n=$(cat "$f" 2>/dev/null || echo 0); n=$((n+1)); echo $n > "$f"; [ "$ARM" = broken ] && exit 3; [ "$ARM" = flaky ] && [ $n = 2 ] && exit 4; exit 0"#,
        tmp.path().display()
    );
    bench(tmp.path(), &command, &out, 6)
        .env("ARM", "stock")
        .args([
            "--arm",
            "flaky=stock,ARM=flaky",
            "--arm",
            "broken=stock,ARM=broken",
        ])
        .arg("--keep-going")
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "no result for arm broken: every run of it failed",
        ));
    let env = json(&out.join("environment.json"));
    let arms = env["bundle"]["arms"].as_array().unwrap();
    let flaky = arms.iter().find(|a| a["name"] == "flaky").unwrap();
    let failed: Vec<&Value> = flaky["runs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r.get("failed").is_some())
        .collect();
    assert_eq!(failed.len(), 1, "{flaky}");
    assert_eq!(failed[0]["failed"], "exit status: 4");
    let summary = json(&out.join("summary.json"));
    assert_eq!(cell(&summary, "flaky")["samples"], 5);
    let warnings = summary["warnings"].to_string();
    assert!(
        warnings.contains("arm flaky: 1 of 6 runs failed"),
        "{warnings}"
    );
    assert!(
        warnings.contains("arm broken failed in every round"),
        "{warnings}"
    );
    assert_report_reproduces(&out, &read(&out.join("report.md")));
}

#[test]
fn warmup_runs_first_unmeasured_and_prepare_runs_before_each_measured_run() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("b");
    let log = tmp.path().join("log");
    let command = format!(r#"echo "run ${{TAG:-stock}}" >> "{}""#, log.display());
    bench(tmp.path(), &command, &out, 6)
        .args([
            "--arm",
            "a=stock,TAG=a",
            "--warmup",
            "2",
            "--cooldown",
            "0.01",
        ])
        .arg("--prepare")
        .arg(format!(
            r#"echo "prepare ${{TAG:-none}}" >> "{}""#,
            log.display()
        ))
        .assert()
        .success();
    let lines: Vec<String> = read(&log).lines().map(str::to_string).collect();
    // Warm-up: each arm twice, in turn, before any prepare; then prepare before every run,
    // without the arm's variables.
    assert_eq!(lines[..4], ["run stock", "run stock", "run a", "run a"]);
    assert_eq!(lines.len(), 4 + 2 * 12);
    for pair in lines[4..].chunks(2) {
        assert_eq!(pair[0], "prepare none");
        assert!(pair[1].starts_with("run "), "{pair:?}");
    }
    let env = json(&out.join("environment.json"));
    assert_eq!(env["warmup"], 2);
    assert_eq!(env["cooldown_seconds"], 0.01);
    assert_eq!(env["warmup_runs"].as_array().unwrap().len(), 4);
    assert_eq!(env["prepare_runs"].as_array().unwrap().len(), 12);
    assert_eq!(env["runs"].as_array().unwrap().len(), 12);
    assert!(out.join("raw/a-w2.stdout").is_file());
    assert!(out.join("raw/a-r6.prepare.stdout").is_file());
    assert_eq!(
        json(&out.join("summary.json"))["rows"][0]["arms"]["a"]["samples"],
        6
    );
    assert_report_reproduces(&out, &read(&out.join("report.md")));
}

#[test]
fn an_arms_command_args_are_appended_to_the_command_shell_quoted() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("b");
    bench(tmp.path(), "printf '<%s>'", &out, 6)
        .args(["--arm", r#"a=stock,command-args=--name "x, y" "it's""#])
        .assert()
        .success();
    assert_eq!(read(&out.join("raw/a-r1.stdout")), "<--name><x, y><it's>");
    assert_eq!(read(&out.join("raw/stock-r1.stdout")), "<>");
    let env = json(&out.join("environment.json"));
    let arms = env["bundle"]["arms"].as_array().unwrap();
    assert_eq!(
        arms[1]["args"],
        serde_json::json!(["--name", "x, y", "it's"])
    );
}

/// A command that hooks as the shim would, in a child of the shell: only where the shim
/// library reached that child in the injection variable, with the shim's status file.
const HOOK_IN_A_CHILD: &str = r#"sh -c 'case "$LD_PRELOAD$DYLD_INSERT_LIBRARIES" in *capshim*) [ -n "$CAPSHIM_STATUS_FILE" ] && echo "{\"pid\":$$,\"process\":\"w\",\"event\":\"hooked\",\"reason\":null,\"class\":\"AppleParavirtDevice\",\"profile\":null}" >> "$CAPSHIM_STATUS_FILE";; esac; [ -z "$CAPSHIM_BENCH_INJECT" ]'"#;

#[test]
fn the_shim_reaches_the_commands_children_and_an_inactive_arm_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let shim = inert_shim(tmp.path());
    let out = tmp.path().join("b");
    bench(tmp.path(), HOOK_IN_A_CHILD, &out, 6)
        .args(["--arm", "apple9-64k", "--dylib"])
        .arg(&shim)
        .assert()
        .success();
    let summary = json(&out.join("summary.json"));
    assert_eq!(
        summary["activation"]["apple9-64k"]["activated"], true,
        "{summary}"
    );
    // The shell is never given the injection variable (macOS prunes DYLD_* from /bin/sh at
    // launch): its value travels in CAPSHIM_BENCH_INJECT, set again by the script.
    let env = json(&out.join("environment.json"));
    for run in env["runs"].as_array().unwrap() {
        let set = &run["env"]["set"];
        assert!(set.get(common::INJECTION_VAR).is_none(), "{run}");
        if run["arm"] == "apple9-64k" {
            assert!(
                set["CAPSHIM_BENCH_INJECT"]
                    .as_str()
                    .unwrap()
                    .contains("capshim"),
                "{run}"
            );
            assert!(run["argv"][2].as_str().unwrap().contains("export"), "{run}");
        }
    }
    assert_report_reproduces(&out, &read(&out.join("report.md")));

    // A command where nothing hooks: the unlocked arm would be stock in disguise.
    let out = tmp.path().join("inactive");
    bench(tmp.path(), "true", &out, 6)
        .args(["--arm", "apple9-64k", "--dylib"])
        .arg(&shim)
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "the shim did not activate in arm apple9-64k",
        ))
        .stderr(predicate::str::contains("--allow-inactive"));
    let out = tmp.path().join("allowed");
    bench(tmp.path(), "true", &out, 6)
        .args(["--arm", "apple9-64k", "--allow-inactive", "--dylib"])
        .arg(&shim)
        .assert()
        .success();
}

#[test]
fn llama_bench_options_and_options_without_their_partner_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("never");
    for (args, says) in [
        (&["--command", "true", "-m", "x.gguf"][..], "--model"),
        (&["--command", "true", "-p", "64"][..], "--n-prompt"),
        (
            &["--command", "true", "--llama-dir", "/x"][..],
            "--llama-dir",
        ),
        (
            &["--command", "true", "--", "-t", "8"][..],
            "LLAMA_BENCH_ARGS",
        ),
        (&["-m", "x.gguf", "--metric", "(x)"][..], "--command"),
        (&["--command", "true", "--lower-is-better"][..], "--metric"),
        (&["--warmup", "2"][..], "--command"),
        // Next to -m, clap's `requires` lets these through: the plan refuses them.
        (
            &["-m", "x.gguf", "--warmup", "2"][..],
            "--warmup applies to --command only",
        ),
        (
            &["-m", "x.gguf", "--prepare", "true"][..],
            "--prepare applies to --command only",
        ),
        (&["-m", "x.gguf", "--unit", "x"][..], "--command"),
        (&["--prepare", "true"][..], "--command"),
        (&["--command", "true", "--unit", "tokens/s"][..], "--metric"),
        (
            &["--command", "true", "--metric", "tokens/s"][..],
            "no capture group",
        ),
        (&["--command", "  "][..], "--command is empty"),
        (&[][..], "--model"),
    ] {
        capshim()
            .current_dir(tmp.path())
            .arg("bench")
            .args(args)
            .arg("-o")
            .arg(&out)
            .assert()
            .code(2)
            .stderr(predicate::str::contains(says));
        assert!(!out.exists(), "{args:?}");
    }
}

/// `capshim bench --command COMMAND` with `args` (the output directory among them), started
/// in `dir` with stdout discarded and stderr to `stderr` (discarded without one), returned once
/// the command has written a process id into `pid_file`, with that id.
fn started(
    dir: &Path,
    command: &str,
    args: &[&std::ffi::OsStr],
    pid_file: &Path,
    stderr: Option<&Path>,
) -> (std::process::Child, String) {
    let child = std::process::Command::new(assert_cmd::cargo::cargo_bin("capshim"))
        .current_dir(dir)
        .args(["bench", "--command", command])
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(stderr.map_or_else(std::process::Stdio::null, |path| {
            std::fs::File::create(path).unwrap().into()
        }))
        .spawn()
        .unwrap();
    let mut waited = 0;
    while !pid_file.is_file() || read(pid_file).trim().is_empty() {
        std::thread::sleep(std::time::Duration::from_millis(20));
        waited += 1;
        assert!(waited < 500, "the command never started");
    }
    (child, read(pid_file).trim().to_string())
}

#[test]
fn a_signal_reaches_every_process_of_the_command_and_stops_the_bench() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("b");
    let pid_file = tmp.path().join("sleeper.pid");
    // The shell starts a child that outlives it unless the whole group gets the signal.
    let command = format!(r#"sleep 30 & echo $! > "{}"; wait"#, pid_file.display());
    let args = ["--rounds", "6", "--arm", "x=stock", "-o"].map(std::ffi::OsStr::new);
    let (mut child, sleeper) = started(
        tmp.path(),
        &command,
        &[&args[..], &[out.as_os_str()]].concat(),
        &pid_file,
        None,
    );
    let kill = |args: &[&str]| {
        std::process::Command::new("kill")
            .args(args)
            .status()
            .unwrap()
    };
    assert!(kill(&["-TERM", &child.id().to_string()]).success());
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(143));
    assert!(out.join("INCOMPLETE").is_file());
    // The sleeper got SIGTERM too: it is gone (or a zombie being reaped), not sleeping on.
    let mut gone = false;
    for _ in 0..100 {
        let alive = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("ps -o stat= -p {sleeper} | grep -qv Z"))
            .status()
            .unwrap()
            .success();
        if !alive {
            gone = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    if !gone {
        kill(&["-KILL", &sleeper]);
    }
    assert!(gone, "the command's child {sleeper} outlived the bench");
}

/// A command whose every process ignores SIGTERM (an ignored signal stays ignored across
/// exec): the bench passes SIGTERM on, then SIGKILL after 10 s or at a second signal, and
/// stops with its INCOMPLETE note, nothing of the command left running.
#[test]
fn a_command_that_ignores_sigterm_is_killed_after_a_grace_or_a_second_signal() {
    for twice in [false, true] {
        let tmp = tempfile::tempdir().unwrap();
        let (out, pid_file, log) = (
            tmp.path().join("b"),
            tmp.path().join("sleeper.pid"),
            tmp.path().join("stderr"),
        );
        let command = format!(
            r#"trap '' TERM; sleep 60 & echo $! > "{}"; wait"#,
            pid_file.display()
        );
        let args = ["--rounds", "6", "-o"].map(std::ffi::OsStr::new);
        let (mut child, sleeper) = started(
            tmp.path(),
            &command,
            &[&args[..], &[out.as_os_str()]].concat(),
            &pid_file,
            Some(&log),
        );
        let term = || {
            std::process::Command::new("kill")
                .args(["-TERM", &child.id().to_string()])
                .status()
                .unwrap()
        };
        assert!(term().success());
        if twice {
            std::thread::sleep(std::time::Duration::from_millis(500));
            assert!(running(&sleeper), "SIGTERM is ignored: the sleeper runs on");
            assert!(term().success());
        }
        let status = child.wait().unwrap();
        let stderr = read(&log);
        assert_eq!(status.code(), Some(143), "{stderr}");
        assert!(out.join("INCOMPLETE").is_file());
        let (again, grace) = (
            stderr.contains("SIGTERM again: sending SIGKILL"),
            stderr.contains("still runs 10 s after SIGTERM: sending SIGKILL"),
        );
        assert_eq!((again, grace), (twice, !twice), "{stderr}");
        assert!(
            !running(&sleeper),
            "the command's child {sleeper} outlived the bench"
        );
    }
}

/// Whether the process `pid` still runs (a zombie being reaped does not).
fn running(pid: &str) -> bool {
    std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("ps -o stat= -p {pid} | grep -qv Z"))
        .status()
        .unwrap()
        .success()
}

#[test]
fn processes_a_command_leaves_running_are_ended_with_a_warning_before_the_seal() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("b");
    let pids = tmp.path().join("pids");
    // Each run leaves a sleeper that would write into its stdout file after the seal.
    let command = format!(
        r#"(sleep 30; echo late) & echo $! >> "{}"; echo "v: 1""#,
        pids.display()
    );
    bench(tmp.path(), &command, &out, 2)
        .args(["--metric", "v: ([0-9.]+)", "--arm", "again=stock"])
        .assert()
        .success()
        .stderr(
            predicate::str::is_match(
                "the command left [12] process(es)? running when it exited in arm again round 1",
            )
            .unwrap(),
        )
        .stderr(predicate::str::contains(
            "SIGTERM to its process group, then SIGKILL",
        ));
    let pids = read(&pids);
    assert_eq!(pids.lines().count(), 4, "{pids}");
    for pid in pids.lines() {
        assert!(!running(pid), "process {pid} outlived its run");
    }
    assert_report_reproduces(&out, &read(&out.join("report.md")));
}

#[test]
fn a_metric_of_zero_or_below_is_a_failed_run_naming_the_value_and_the_regex() {
    let tmp = tempfile::tempdir().unwrap();
    for (value, name) in [("0", "zero"), ("-3.5", "negative")] {
        let out = tmp.path().join(name);
        bench(tmp.path(), &format!(r#"echo "v: {value}""#), &out, 2)
            .args(["--metric", "v: (-?[0-9.]+)", "--arm", "again=stock"])
            .assert()
            .code(1)
            .stderr(predicate::str::contains(format!(
                r#"--metric "v: (-?[0-9.]+)" matched "{value}" in its stdout, which is not a positive number"#
            )));
        assert!(out.join("INCOMPLETE").is_file(), "{name}");
    }
    // With --keep-going, an arm whose every value is 0 has failed runs, and the bundle is
    // sealed (no plot of a zero-width range panics).
    let out = tmp.path().join("one-arm");
    let command = r#"if [ -n "$Z" ]; then echo "v: 0"; else echo "v: 2"; fi"#;
    bench(tmp.path(), command, &out, 3)
        .args([
            "--metric",
            "v: ([0-9.]+)",
            "--arm",
            "z=stock,Z=1",
            "--keep-going",
        ])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("no result for arm z"));
    assert!(out.join("SHA256SUMS").is_file());
    assert_report_reproduces(&out, &read(&out.join("report.md")));
}

#[test]
fn output_that_is_not_utf8_is_fine_and_a_metric_is_found_in_the_text_around_it() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("metric");
    let command = r#"printf "\377\376 v: 4.5\n"; printf "\377 binary\n" >&2"#;
    bench(tmp.path(), command, &out, 2)
        .args(["--metric", "v: ([0-9.]+)", "--arm", "again=stock"])
        .assert()
        .success();
    let summary = json(&out.join("summary.json"));
    assert_eq!(cell(&summary, "again")["median_ts"], 4.5, "{summary}");
    assert_report_reproduces(&out, &read(&out.join("report.md")));
    let out = tmp.path().join("wall");
    bench(
        tmp.path(),
        r#"printf "\377\376\000\n"; printf "\377\n" >&2"#,
        &out,
        2,
    )
    .args(["--arm", "again=stock"])
    .assert()
    .success();
    assert_report_reproduces(&out, &read(&out.join("report.md")));
}

#[test]
fn a_command_that_stops_fails_naming_the_signal_and_the_terminal() {
    let tmp = tempfile::tempdir().unwrap();
    // SIGTTIN is what a read of the terminal from a background process group gets.
    let out = tmp.path().join("ttin");
    bench(
        tmp.path(),
        "echo asking; kill -TTIN 0; echo answered",
        &out,
        2,
    )
    .args(["--arm", "again=stock"])
    .timeout(std::time::Duration::from_secs(60))
    .assert()
    .code(1)
    .stderr(predicate::str::contains(
        "stopped by SIGTTIN: it read the terminal, which a measured command is not given",
    ));
    assert!(out.join("INCOMPLETE").is_file());
    let out = tmp.path().join("stop");
    bench(tmp.path(), "kill -STOP $$", &out, 2)
        .args(["--arm", "again=stock", "--keep-going"])
        .timeout(std::time::Duration::from_secs(60))
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "stopped by SIGSTOP; nothing would continue it, so capshim ended it",
        ));
    assert!(out.join("SHA256SUMS").is_file());
}

#[test]
fn a_signal_ends_a_run_whose_child_is_stopped_and_the_child_with_it() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("b");
    let pid_file = tmp.path().join("stopped.pid");
    // The shell waits for a child that stopped itself: only a SIGCONT lets it take a signal.
    let command = format!(
        r#"sh -c 'echo $$ > "{}"; kill -STOP $$'; echo done"#,
        pid_file.display()
    );
    let args = ["--rounds", "2", "-o"].map(std::ffi::OsStr::new);
    let (mut child, stopped) = started(
        tmp.path(),
        &command,
        &[&args[..], &[out.as_os_str()]].concat(),
        &pid_file,
        None,
    );
    let is_stopped = || {
        std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("ps -o stat= -p {stopped} | grep -q T"))
            .status()
            .unwrap()
            .success()
    };
    let mut waited = 0;
    while !is_stopped() {
        std::thread::sleep(std::time::Duration::from_millis(20));
        waited += 1;
        assert!(waited < 500, "the command's child never stopped");
    }
    let hup = std::process::Command::new("kill")
        .args(["-HUP", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(hup.success());
    let status = child.wait().unwrap();
    // 129 for the SIGHUP; 1 on a machine so slow that capshim's own look for a stopped child
    // (after 1.5 s) came first.
    assert!(matches!(status.code(), Some(129 | 1)), "{status}");
    assert!(out.join("INCOMPLETE").is_file());
    assert!(
        !running(&stopped),
        "the stopped child {stopped} outlived the bench"
    );
}

#[test]
fn a_signal_during_a_cooldown_pause_says_nothing_was_running() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("b");
    let marker = tmp.path().join("ran");
    let command = format!(r#"echo run >> "{}""#, marker.display());
    let child = std::process::Command::new(assert_cmd::cargo::cargo_bin("capshim"))
        .current_dir(tmp.path())
        .args(["bench", "--command", &command, "--rounds", "2"])
        .args(["--arm", "again=stock", "--cooldown", "60", "-o"])
        .arg(&out)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut waited = 0;
    while !marker.is_file() {
        std::thread::sleep(std::time::Duration::from_millis(20));
        waited += 1;
        assert!(waited < 500, "the command never ran");
    }
    // The run's shell exits right after writing: the pause has begun.
    std::thread::sleep(std::time::Duration::from_millis(300));
    let int = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(int.success());
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(130), "{stderr}");
    assert!(
        stderr.contains(
            "interrupted by SIGINT: it came during a --cooldown pause, when no run was running,"
        ),
        "{stderr}"
    );
    let note = read(&out.join("INCOMPLETE"));
    assert!(
        note.contains("during a --cooldown pause, when no run was running")
            && !note.contains("passed it on"),
        "{note}"
    );
}

#[test]
fn a_failed_prepare_names_what_to_fix_without_the_arms_settings() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("b");
    bench(tmp.path(), "true", &out, 2)
        .args([
            "--arm",
            "again=stock",
            "--prepare",
            "echo no cache >&2; exit 4",
        ])
        .assert()
        .code(1)
        .stderr(
            predicate::str::is_match(
                r"the --prepare command failed in arm (stock|again) round 1 \(exit status: 4\)",
            )
            .unwrap(),
        )
        .stderr(predicate::str::contains(
            "fix the cause above (the --prepare command (it runs without the shim and without \
             the arm's variables and command-args))",
        ))
        .stderr(predicate::str::contains("its arm's variables").not());
}

#[test]
fn the_top_level_help_says_bench_and_tune_measure_any_command() {
    let out = capshim().arg("--help").assert().success();
    let help = String::from_utf8_lossy(&out.get_output().stdout).replace(char::is_whitespace, " ");
    let help = help.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        help.contains(
            "bench Measure stock vs unlocked (vs host) with llama-bench or any command (--command)"
        ),
        "{help}"
    );
    assert!(
        help.contains("knob catalogue with llama-bench or any command"),
        "{help}"
    );
}

#[test]
fn a_child_the_shell_waits_for_that_stays_stopped_fails_the_run() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("b");
    // The shell's child stops as one that read the terminal would; the shell waits for it.
    bench(
        tmp.path(),
        r#"echo asking; sh -c 'kill -TTIN $$'; echo answered"#,
        &out,
        2,
    )
    .args(["--arm", "again=stock"])
    .timeout(std::time::Duration::from_secs(60))
    .assert()
    .code(1)
    .stderr(predicate::str::contains(
        "stopped and stayed stopped (SIGTTIN when it reads the terminal",
    ))
    .stderr(predicate::str::contains("capshim ended the group"));
    assert!(out.join("INCOMPLETE").is_file());
}
