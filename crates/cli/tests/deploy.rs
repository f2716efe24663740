//! `capshim agent` and `capshim host` as a user runs them (with a temporary HOME).

mod common;

use common::capshim;
use predicates::prelude::*;

const DYLIB: &str = "/usr/local/lib/capshim/libcapshim.dylib";

#[test]
fn agent_prints_a_plist_that_parses_back() {
    let out = capshim()
        .args([
            "agent",
            "--label",
            "com.example.llama-server",
            "--cpu-brand",
            "Apple M1 Ultra (Virtual)",
            "--dylib",
            DYLIB,
            "--stderr",
            "/tmp/llama.err.log",
            "--only-process",
            "--",
            "/opt/llama/bin/llama-server",
            "-m",
            "/models/tiny llama.gguf",
        ])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let value = plist::Value::from_reader_xml(out.as_slice()).unwrap();
    let dict = value.as_dictionary().unwrap();
    assert_eq!(dict["Label"].as_string(), Some("com.example.llama-server"));
    let args: Vec<&str> = dict["ProgramArguments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_string().unwrap())
        .collect();
    assert_eq!(
        args,
        [
            "/opt/llama/bin/llama-server",
            "-m",
            "/models/tiny llama.gguf"
        ]
    );
    let env = dict["EnvironmentVariables"].as_dictionary().unwrap();
    let keys: Vec<&str> = env.keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "CAPSHIM_APPLE_FAMILY_MAX",
            "CAPSHIM_MAX_THREADGROUP_MEMORY",
            "CAPSHIM_ONLY_PROCESS",
            "DYLD_INSERT_LIBRARIES"
        ]
    );
    assert_eq!(env["CAPSHIM_APPLE_FAMILY_MAX"].as_string(), Some("1007"));
    assert_eq!(
        env["CAPSHIM_ONLY_PROCESS"].as_string(),
        Some("llama-server")
    );
    assert_eq!(env["DYLD_INSERT_LIBRARIES"].as_string(), Some(DYLIB));
    assert_eq!(
        dict["StandardErrorPath"].as_string(),
        Some("/tmp/llama.err.log")
    );
}

#[test]
fn agent_install_respects_home_and_never_overwrites() {
    let home = tempfile::tempdir().unwrap();
    let install = || {
        let mut cmd = capshim();
        cmd.env("HOME", home.path()).args([
            "agent",
            "--label",
            "com.example.job",
            "--dylib",
            DYLIB,
            "--install",
        ]);
        cmd
    };
    install()
        .args(["--", "/opt/tool"])
        .assert()
        .success()
        .stdout(
            predicate::str::contains("launchctl bootstrap gui/$(id -u) ")
                .and(predicate::str::contains(
                    "launchctl kickstart -k gui/$(id -u)/com.example.job",
                ))
                .and(predicate::str::contains(
                    "launchctl bootout gui/$(id -u)/com.example.job",
                )),
        );
    let path = home
        .path()
        .join("Library/LaunchAgents/com.example.job.plist");
    let first = std::fs::read_to_string(&path).unwrap();
    assert!(first.contains("/opt/tool"));

    install()
        .args(["--", "/opt/other"])
        .assert()
        .code(1)
        .stderr(
            predicate::str::contains("already exists").and(predicate::str::contains("--force")),
        );
    assert_eq!(std::fs::read_to_string(&path).unwrap(), first);

    install()
        .args(["--force", "--", "/opt/other"])
        .assert()
        .success();
    assert!(
        std::fs::read_to_string(&path)
            .unwrap()
            .contains("/opt/other")
    );
}

#[test]
fn only_process_with_a_path_is_refused_naming_the_file_name() {
    for cmd in ["agent", "run"] {
        let mut c = capshim();
        c.arg(cmd);
        if cmd == "agent" {
            c.args(["--label", "a.b", "--dylib", DYLIB]);
        }
        c.args([
            "--only-process",
            "/opt/llama/bin/llama-server",
            "--",
            "/opt/llama/bin/llama-server",
        ])
        .assert()
        .code(2)
        .stdout("")
        .stderr(predicate::str::contains(
            "\"/opt/llama/bin/llama-server\" is a path, and a path never matches",
        ))
        .stderr(predicate::str::contains("give --only-process llama-server"));
    }
}

#[test]
fn agent_refuses_relative_programs_and_stock() {
    capshim()
        .args([
            "agent",
            "--label",
            "a.b",
            "--dylib",
            DYLIB,
            "--",
            "llama-server",
        ])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("not an absolute path"));
    capshim()
        .args([
            "agent",
            "--label",
            "a.b",
            "--profile",
            "stock",
            "--",
            "/opt/x",
        ])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("stock"));
    capshim()
        .args(["agent", "--label", "a/b", "--", "/opt/x"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("--label"));
}

#[test]
fn host_dry_run_prints_the_commands_anywhere() {
    capshim()
        .args(["host", "enable", "--dry-run"])
        .assert()
        .success()
        .stdout(
            predicate::str::contains(
                "defaults write com.apple.gpusw.ParavirtualizedGraphics ForceUnrestrictedDeviceFeatureLevel -bool true",
            )
            .and(predicate::str::contains("sysctl -n kern.hv_vmm_present"))
            .and(predicate::str::contains("Stop and start each VM")),
        );
    capshim()
        .args(["host", "--dry-run", "disable"])
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "defaults delete com.apple.gpusw.ParavirtualizedGraphics ForceUnrestrictedDeviceFeatureLevel",
        ));
}

#[cfg(not(target_os = "macos"))]
#[test]
fn host_without_dry_run_needs_macos() {
    capshim()
        .args(["host", "status"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("needs the macOS host"));
}

#[test]
fn agent_refuses_characters_xml_cannot_carry() {
    capshim()
        .args(["agent", "--label", "com.example.x", "--dylib", DYLIB, "--"])
        .args(["/x", "fine", "a\u{1}"])
        .assert()
        .code(1)
        .stdout("")
        .stderr(
            predicate::str::contains("program argument 2")
                .and(predicate::str::contains("U+0001"))
                .and(predicate::str::contains("XML 1.0")),
        );
    capshim()
        .args(["agent", "--label", "com.example.x", "--dylib", DYLIB])
        .args(["--stderr", "/tmp/a\u{1b}b.log", "--", "/x", "tab\tok"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("--stderr"));
    capshim()
        .args(["agent", "--label", "com.example.x", "--dylib", DYLIB, "--"])
        .args(["/x", "tab\tnewline\nok"])
        .assert()
        .success();
}

#[test]
fn agent_refuses_a_dylib_path_dyld_would_split() {
    capshim()
        .args(["agent", "--label", "com.example.x", "--dylib"])
        .arg("/opt/a:b/libcapshim.dylib")
        .args(["--", "/x"])
        .assert()
        .code(1)
        .stdout("")
        .stderr(
            predicate::str::contains("/opt/a:b/libcapshim.dylib")
                .and(predicate::str::contains("DYLD_INSERT_LIBRARIES"))
                .and(predicate::str::contains("move or copy")),
        );
}

#[test]
fn agent_makes_a_relative_dylib_absolute_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let out = capshim()
        .current_dir(dir.path())
        .args([
            "agent",
            "--label",
            "com.example.x",
            "--dylib",
            "lib/libcapshim.dylib",
            "--",
            "/opt/x",
        ])
        .assert()
        .success()
        .stderr(predicate::str::contains(
            "note: --dylib lib/libcapshim.dylib is relative; the agent uses",
        ))
        .get_output()
        .stdout
        .clone();
    let value = plist::Value::from_reader_xml(out.as_slice()).unwrap();
    let env = value.as_dictionary().unwrap()["EnvironmentVariables"]
        .as_dictionary()
        .unwrap()
        .clone();
    let expected = dir.path().join("lib/libcapshim.dylib");
    assert_eq!(
        env["DYLD_INSERT_LIBRARIES"].as_string(),
        Some(expected.to_str().unwrap())
    );
}

#[cfg(not(target_os = "macos"))]
#[test]
fn agent_install_off_macos_says_nothing_will_start_it() {
    let home = tempfile::tempdir().unwrap();
    capshim()
        .env("HOME", home.path())
        .args([
            "agent",
            "--label",
            "com.example.job",
            "--dylib",
            DYLIB,
            "--install",
            "--",
            "/opt/tool",
        ])
        .assert()
        .success()
        .stderr(
            predicate::str::contains("warning: this is")
                .and(predicate::str::contains("not macOS"))
                .and(predicate::str::contains("nothing will start this agent")),
        );
    assert!(
        home.path()
            .join("Library/LaunchAgents/com.example.job.plist")
            .is_file()
    );
    // Printing the plist (to copy to a Mac) needs no warning.
    capshim()
        .args([
            "agent",
            "--label",
            "com.example.job",
            "--dylib",
            DYLIB,
            "--",
            "/opt/tool",
        ])
        .assert()
        .success()
        .stderr(predicate::str::contains("nothing will start this agent").not());
}

/// A profile file's `[env]` goes into the agent's environment, as `run` sets it.
#[test]
fn agent_sets_a_profile_files_env() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tuned.toml");
    std::fs::write(
        &file,
        "apple_family_max = 1009\n[env]\nGGML_METAL_NO_RESIDENCY = \"1\"\n",
    )
    .unwrap();
    let out = capshim()
        .args([
            "agent",
            "--label",
            "com.example.x",
            "--dylib",
            DYLIB,
            "--profile-file",
        ])
        .arg(&file)
        .args(["--", "/opt/llama/bin/llama-server"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let value = plist::Value::from_reader_xml(out.as_slice()).unwrap();
    let env = value.as_dictionary().unwrap()["EnvironmentVariables"]
        .as_dictionary()
        .unwrap()
        .clone();
    assert_eq!(env["GGML_METAL_NO_RESIDENCY"].as_string(), Some("1"));
    assert_eq!(env["CAPSHIM_APPLE_FAMILY_MAX"].as_string(), Some("1009"));
}
