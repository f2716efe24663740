//! The shell scripts' arguments, checked without building anything: `scripts/llama/build.sh`
//! (the CPU and `--metal` builds' cmake flags, at one pinned llama.cpp version, and its usage
//! errors) and `scripts/llama/progress.sh` (the compile's progress, relayed at most once per
//! interval, with the whole output kept in the log).
#![cfg(unix)]

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Runs `scripts/llama/build.sh ARGS` with its cache in a temporary folder (so that nothing
/// the machine has cached counts), `stdin` closed.
fn build_sh(args: &[&str]) -> (Output, tempfile::TempDir) {
    let cache = tempfile::tempdir().unwrap();
    let out = Command::new("bash")
        .arg(repo().join("scripts/llama/build.sh"))
        .args(args)
        .env("XDG_CACHE_HOME", cache.path())
        .env_remove("CAPSHIM_LLAMA_CACHE")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (out, cache)
}

/// `--dry-run`'s KEY=VALUE lines.
fn plan(args: &[&str]) -> (BTreeMap<String, String>, PathBuf) {
    let (out, cache) = build_sh(args);
    assert!(out.status.success(), "{args:?}: {out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    let map = text
        .lines()
        .map(|l| {
            let (k, v) = l
                .split_once('=')
                .unwrap_or_else(|| panic!("not KEY=VALUE: {l}"));
            (k.to_string(), v.to_string())
        })
        .collect();
    (map, cache.path().to_path_buf())
}

fn flags(plan: &BTreeMap<String, String>) -> Vec<&str> {
    plan["CMAKE_FLAGS"].split(' ').collect()
}

#[test]
fn metal_dry_run_turns_the_metal_back_end_on_at_the_same_version() {
    let (cpu, cpu_cache) = plan(&["--dry-run"]);
    let (metal, metal_cache) = plan(&["--metal", "--dry-run"]);
    assert_eq!(cpu["LLAMA_VARIANT"], "cpu");
    assert_eq!(metal["LLAMA_VARIANT"], "metal");
    // One llama.cpp for both: the version and the sdist's hash are shared.
    assert_eq!(cpu["LLAMA_PY_VERSION"], metal["LLAMA_PY_VERSION"]);
    assert_eq!(cpu["LLAMA_PY_SHA256"], metal["LLAMA_PY_SHA256"]);
    assert_eq!(cpu["TARGETS"], metal["TARGETS"]);
    for t in [
        "llama-bench",
        "llama-perplexity",
        "llama-completion",
        "test-backend-ops",
    ] {
        assert!(metal["TARGETS"].split(' ').any(|x| x == t), "{t}");
    }

    let f = flags(&metal);
    for want in [
        "-DGGML_METAL=ON",
        "-DGGML_METAL_EMBED_LIBRARY=ON",
        "-DBUILD_SHARED_LIBS=OFF",
    ] {
        assert!(f.contains(&want), "--metal lacks {want}: {f:?}");
    }
    assert!(!f.contains(&"-DGGML_METAL=OFF"), "{f:?}");
    let f = flags(&cpu);
    assert!(f.contains(&"-DGGML_METAL=OFF"), "{f:?}");
    assert!(f.contains(&"-DGGML_NATIVE=OFF"), "{f:?}");
    assert!(!f.iter().any(|x| x.starts_with("-DGGML_METAL_")), "{f:?}");

    // Each variant has its own cache, so a Metal build never passes for the CPU one.
    let version = &cpu["LLAMA_PY_VERSION"];
    assert_eq!(
        Path::new(&cpu["LLAMA_CACHE"]),
        cpu_cache.join(format!("capshim/llama.cpp-py{version}"))
    );
    assert_eq!(
        Path::new(&metal["LLAMA_CACHE"]),
        metal_cache.join(format!("capshim/llama.cpp-py{version}-metal"))
    );
}

#[test]
fn dry_run_builds_nothing() {
    let (out, cache) = build_sh(&["--metal", "--dry-run"]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(std::fs::read_dir(cache.path()).unwrap().count(), 0);
}

#[test]
fn usage_errors_exit_2() {
    for (args, says) in [
        (&["--bogus"][..], "unknown argument: --bogus"),
        (&["--dry-run", "--force"][..], "--dry-run builds nothing"),
    ] {
        let (out, _cache) = build_sh(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
}

#[cfg(not(target_os = "macos"))]
#[test]
fn metal_is_refused_off_macos_with_the_dry_run_as_the_alternative() {
    let (out, cache) = build_sh(&["--metal"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("needs macOS"), "{stderr}");
    assert!(stderr.contains("--metal --dry-run"), "{stderr}");
    assert_eq!(std::fs::read_dir(cache.path()).unwrap().count(), 0);
}

#[test]
fn help_lists_every_option() {
    let (out, _cache) = build_sh(&["--help"]);
    assert!(out.status.success());
    let help = String::from_utf8(out.stdout).unwrap();
    for option in ["--metal", "--force", "--check", "--dry-run"] {
        assert!(help.contains(option), "{option} missing from:\n{help}");
    }
}

/// Feeds `input` to `progress.sh LOG INTERVAL`; returns its stderr and the log.
fn progress(input: &str, interval: &str) -> (String, String) {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("build.log");
    let mut child = Command::new("bash")
        .arg(repo().join("scripts/llama/progress.sh"))
        .arg(&log)
        .arg(interval)
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{out:?}");
    (
        String::from_utf8(out.stderr).unwrap(),
        std::fs::read_to_string(log).unwrap(),
    )
}

const BUILD_OUTPUT: &str = "-- configuring\n[  1%] Building C object ggml.c.o\n\
    [  1%] Building C object ggml-alloc.c.o\nwarning: something\n[ 47%] Linking CXX\n\
    [100%] Built target llama-bench";

fn percentages(stderr: &str) -> Vec<&str> {
    stderr
        .lines()
        .map(|l| l.rsplit_once("building: ").expect(l).1)
        .collect()
}

#[test]
fn progress_relays_each_new_percentage_and_keeps_the_whole_log() {
    let (stderr, log) = progress(BUILD_OUTPUT, "0");
    assert_eq!(percentages(&stderr), ["1%", "47%", "100%"]);
    // The last line has no newline: it is still logged.
    assert_eq!(log, format!("{BUILD_OUTPUT}\n"));
}

#[test]
fn progress_shows_the_first_percentage_then_waits_for_the_interval() {
    // No test lasts an hour: within one, only the first percentage may be shown.
    let (stderr, log) = progress(BUILD_OUTPUT, "3600");
    assert_eq!(percentages(&stderr), ["1%"]);
    assert_eq!(log.lines().count(), 6);
    let (stderr, _) = progress("no percentages here\n", "0");
    assert_eq!(stderr, "");
}

/// `scripts/action/export.sh --decide OS SIP SHELL ARCHS SCOPE ONLY GUARD`.
fn decide(facts: [&str; 7]) -> String {
    let out = Command::new("bash")
        .arg(repo().join("scripts/action/export.sh"))
        .arg("--decide")
        .args(facts)
        .output()
        .unwrap();
    assert!(out.status.success(), "{facts:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

#[test]
fn the_action_exports_only_where_sip_and_the_step_shell_make_it_safe_and_effective() {
    let brew = "/opt/homebrew/bin/bash";
    let apple = "/bin/bash";
    let apple_archs = "x86_64 arm64e";
    // Homebrew's bash (arm64) loads the library: the plain one with SIP on, the guard with
    // SIP off, and nothing when the guard library is missing.
    assert_eq!(
        decide(["Darwin", "on", brew, "arm64", "children", "", "no"]),
        "export plain"
    );
    assert_eq!(
        decide(["Darwin", "off", brew, "arm64", "children", "", "yes"]),
        "export guard"
    );
    let no_guard = decide(["Darwin", "off", brew, "arm64", "children", "", "no"]);
    assert!(
        no_guard.starts_with("refuse: ") && no_guard.contains("no guard library"),
        "{no_guard}"
    );
    // Apple's shell: SIP on strips the variable, SIP off makes dyld terminate it, guard or not.
    let stripped = decide(["Darwin", "on", apple, apple_archs, "children", "", "yes"]);
    assert!(
        stripped.contains("removes DYLD_INSERT_LIBRARIES"),
        "{stripped}"
    );
    let killed = decide(["Darwin", "off", apple, apple_archs, "children", "", "yes"]);
    assert!(
        killed.contains("terminate") && killed.contains("guard cannot help"),
        "{killed}"
    );
    // `shell: sh` is Apple's /bin/sh; a program outside Apple's folders without an arm64 slice
    // cannot load the library either.
    let sh = decide([
        "Darwin",
        "on",
        "/bin/sh",
        apple_archs,
        "children",
        "",
        "yes",
    ]);
    assert!(
        sh.starts_with("refuse: /bin/sh is one of Apple's programs"),
        "{sh}"
    );
    let x86 = decide([
        "Darwin",
        "on",
        "/usr/local/bin/bash",
        "x86_64",
        "children",
        "",
        "yes",
    ]);
    assert!(x86.starts_with("refuse: "), "{x86}");
    // Unknown SIP, another system, scope=process without only-process, a non-POSIX shell.
    for (facts, says) in [
        (
            ["Darwin", "unknown", brew, "arm64", "children", "", "yes"],
            "unknown",
        ),
        (
            [
                "Linux",
                "unknown",
                "/usr/bin/bash",
                "x86_64",
                "children",
                "",
                "no",
            ],
            "not macOS",
        ),
        (
            ["Darwin", "on", brew, "arm64", "process", "", "yes"],
            "give only-process",
        ),
        (
            [
                "Darwin",
                "on",
                "/opt/homebrew/bin/pwsh",
                "arm64",
                "children",
                "",
                "yes",
            ],
            "not a POSIX shell",
        ),
        (["Darwin", "on", "", "", "children", "", "yes"], "not found"),
    ] {
        let got = decide(facts);
        assert!(
            got.starts_with("refuse: ") && got.contains(says),
            "{facts:?}: {got}"
        );
    }
    assert_eq!(
        decide([
            "Darwin",
            "on",
            brew,
            "arm64",
            "process",
            "llama-bench",
            "no"
        ]),
        "export plain"
    );
}
