//! Every command's help, and `profiles`, `explain` and `probe` as a user runs them.

mod common;

use common::capshim;
use predicates::prelude::*;

#[test]
fn every_command_documents_examples_and_exit_codes() {
    for command in [
        "profiles", "explain", "run", "probe", "agent", "host", "doctor", "selftest", "tune",
    ] {
        capshim()
            .args([command, "--help"])
            .assert()
            .success()
            .stdout(
                predicate::str::contains("Examples:\n")
                    .and(predicate::str::contains("Exit codes:\n"))
                    .and(predicate::str::contains(format!("capshim {command}"))),
            );
    }
}

#[test]
fn run_and_agent_word_their_shared_shim_options_for_what_they_launch() {
    for (command, texts) in [
        (
            "run",
            [
                "The shim library to inject (default: searched, see below)",
                "Whether the command's children inherit the shim",
                "(default: the command's own name)",
                "What the shim logs on stderr (default: activation)",
            ],
        ),
        (
            "agent",
            [
                "Path of libcapshim.dylib, made absolute if relative (default: searched like `capshim run` does)",
                "Whether the program's children inherit the shim",
                "(default: the program's own name)",
                "What the shim logs on stderr (default: activation)",
            ],
        ),
    ] {
        let out = capshim()
            .env("COLUMNS", "200")
            .args([command, "--help"])
            .assert()
            .success();
        let help = String::from_utf8(out.get_output().stdout.clone()).unwrap();
        for text in texts {
            assert!(
                help.contains(text),
                "{text:?} not in `{command} --help`:\n{help}"
            );
        }
    }
}

#[test]
fn profiles_json_lists_every_profile_with_provenance() {
    let out = capshim()
        .args([
            "profiles",
            "--json",
            "--cpu-brand",
            "Apple M4 Pro (Virtual)",
        ])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    let names: Vec<&str> = v["profiles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["stock", "native", "apple9-64k"]);
    assert_eq!(v["profiles"][1]["apple_family_max"], 1009);
    assert_eq!(v["profiles"][1]["max_threadgroup_memory"], 32768);
    assert!(
        v["profiles"][1]["provenance"]
            .as_str()
            .unwrap()
            .contains("M4")
    );
    assert_eq!(v["default"], "native");
    assert_eq!(v["aliases"]["host"], "native");
    assert_eq!(v["chips"].as_array().unwrap().len(), 5);
    assert!(
        v["chips_source"]
            .as_str()
            .unwrap()
            .contains("feature set tables")
    );
    // What apple9-64k claims beyond an M4: threadgroup memory, not families.
    let m4 = &v["profiles"][2]["on_chips"][3];
    assert_eq!(m4["chip"], "M4");
    assert_eq!(m4["differences"].as_array().unwrap().len(), 1);
}

#[test]
fn explain_json_has_the_documented_keys() {
    let out = capshim()
        .args([
            "explain",
            "--json",
            "--cpu-brand",
            "Apple M1 Ultra (Virtual)",
        ])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(v["profile"]["name"], "native");
    assert_eq!(v["profile"]["max_threadgroup_memory"], 32768);
    assert_eq!(v["profile"]["host_chip"]["name"], "M1");
    assert_eq!(v["profile"]["apple_family_max"], 1007);
    assert_eq!(v["before"]["families"]["1007"], false);
    assert_eq!(v["after"]["families"]["1007"], true);
    assert_eq!(v["after"]["families"]["1008"], false);
    assert_eq!(v["consumers"]["llama.cpp"]["simdgroup_mm"], true);
    assert_eq!(v["consumers"]["mlx"]["residency_sets"], false);
    // The chip's own family: its own tuning rows, bf16 emulated as on an M1.
    assert_eq!(v["consumers"]["llama.cpp"]["tuning_family"], 7);
    assert_eq!(v["consumers"]["metal"]["bf16_emulation"], true);
    assert_eq!(v["consumers"]["whisper.cpp"]["metal"], true);
    assert_eq!(v["consumers"]["pytorch"]["mps_device"], false);
    assert_eq!(v["warnings"], serde_json::json!([]));
}

#[test]
fn explain_apple9_64k_on_an_m1_warns_about_tuning_and_bf16() {
    let out = capshim()
        .args([
            "explain",
            "--json",
            "--profile",
            "apple9-64k",
            "--cpu-brand",
            "Apple M1 Ultra (Virtual)",
        ])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(v["consumers"]["llama.cpp"]["tuning_family"], 9);
    assert_eq!(v["consumers"]["metal"]["bf16_emulation"], false);
    let warnings: Vec<&str> = v["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_str().unwrap())
        .collect();
    assert_eq!(warnings.len(), 2, "{warnings:?}");
    assert!(
        warnings[0]
            .contains("on the M1 it picks flash-attention vector tuning for the Apple9 rows")
    );
    assert!(warnings[1].contains("the M1 GPU (Apple7) has no native bfloat16"));
    // The text says the same.
    capshim()
        .args([
            "explain",
            "--profile",
            "apple9-64k",
            "--cpu-brand",
            "Apple M1 Ultra (Virtual)",
        ])
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "GPU family (FA-vec tuning)       Apple5 -> Apple9",
        ))
        .stdout(predicate::str::contains(
            "bf16 emulation                   true -> false",
        ));
}

#[test]
fn explain_reads_a_probe_file_and_explains_bad_ones() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("guest.json");
    std::fs::write(
        &good,
        r#"{"name":"Apple Paravirtual device","families":{"1005":true,"1007":false},"max_threadgroup_memory":32768,"has_unified_memory":true}"#,
    )
    .unwrap();
    capshim()
        .args(["explain", "--profile", "apple9-64k", "--stock"])
        .arg(&good)
        .assert()
        .success()
        .stdout(
            predicate::str::contains("as probed in").and(predicate::str::contains(
                "MTLGPUFamilyApple7 (1007)        no     yes    raised",
            )),
        );

    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, "not json").unwrap();
    capshim()
        .args(["explain", "--stock"])
        .arg(&bad)
        .assert()
        .code(1)
        .stderr(
            predicate::str::contains("bad.json")
                .and(predicate::str::contains("capshim probe --json")),
        );
    capshim()
        .args(["explain", "--stock"])
        .arg(dir.path().join("missing.json"))
        .assert()
        .code(1)
        .stderr(predicate::str::contains("missing.json"));
}

#[test]
fn explain_refuses_unknown_profiles_and_brands_with_the_fix() {
    capshim()
        .args(["explain", "--profile", "apple10"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("native, apple9-64k or stock"));
    capshim()
        .args(["explain", "--cpu-brand", "Intel(R) Xeon(R)"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("Apple M1*").and(predicate::str::contains("apple9-64k")));
}

#[test]
fn explain_reads_a_profile_file_without_touching_it() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("m1.toml");
    let text = "name = \"m1-64k\"\napple_family_max = 1007\nmax_threadgroup_memory = \"0x10000\"\n";
    std::fs::write(&file, text).unwrap();
    capshim()
        .args(["explain", "--json", "--profile-file"])
        .arg(&file)
        .assert()
        .success()
        .stdout(
            predicate::str::contains("\"name\": \"m1-64k\"").and(predicate::str::contains(
                "\"max_threadgroup_memory\": 65536",
            )),
        );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), text);
    std::fs::write(&file, "apple_family_max = 2002\n").unwrap();
    capshim()
        .args(["explain", "--profile-file"])
        .arg(&file)
        .assert()
        .code(1)
        .stderr(predicate::str::contains("1001"));
}

#[cfg(not(target_os = "macos"))]
#[test]
fn probe_needs_macos_with_metal() {
    for args in [
        &["probe"][..],
        &["probe", "--json"],
        &["probe", "--compare"],
    ] {
        capshim()
            .args(args)
            .assert()
            .code(2)
            .stdout("")
            .stderr(predicate::str::contains(
                "capshim probe needs macOS with Metal",
            ));
    }
}

/// `cargo test` does not rebuild the cdylib: a library older than its sources is refused.
#[test]
#[should_panic(expected = "rebuild it with cargo build -p capshim")]
fn a_stale_shim_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let so = dir.path().join(common::SHIM_NAME);
    let file = std::fs::File::create(&so).unwrap();
    file.set_modified(std::time::UNIX_EPOCH + std::time::Duration::from_secs(1))
        .unwrap();
    common::assert_fresh(&so);
}

/// A probe file that leaves out known families: they count as not supported, are shown, and
/// a warning names them; before, Apple6-9 were silently skipped and llama.cpp's decisions
/// were wrong.
#[test]
fn explain_stock_file_missing_families_counts_them_false_and_warns() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("partial.json");
    std::fs::write(
        &file,
        r#"{"families":{"1001":true},"max_threadgroup_memory":32768}"#,
    )
    .unwrap();
    let out = capshim()
        .args(["explain", "--profile", "apple9-64k", "--json", "--stock"])
        .arg(&file)
        .assert()
        .success()
        .stderr(
            predicate::str::contains(file.display().to_string())
                .and(predicate::str::contains("MTLGPUFamilyApple6 (1006)"))
                .and(predicate::str::contains("MTLGPUFamilyApple9 (1009)"))
                .and(predicate::str::contains("capshim probe --json")),
        )
        .get_output()
        .stdout
        .clone();
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    for family in ["1006", "1007", "1009"] {
        assert_eq!(v["before"]["families"][family], false, "{family}");
        assert_eq!(v["after"]["families"][family], true, "{family}");
    }
    assert_eq!(v["consumers"]["llama.cpp"]["simdgroup_reduction"], true);
    assert_eq!(v["consumers"]["llama.cpp"]["simdgroup_mm"], true);

    capshim()
        .args(["explain", "--stock"])
        .arg(&file)
        .assert()
        .success()
        .stdout(predicate::str::contains("MTLGPUFamilyApple7"));
}

#[test]
fn explain_stock_file_with_bad_family_keys_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bad.json");
    for (key, says) in [
        ("Apple7", "is not an integer"),
        ("-1001", "is negative"),
        ("18446744073709551616", "is out of range"),
    ] {
        std::fs::write(
            &file,
            format!(r#"{{"families":{{"{key}":true}},"max_threadgroup_memory":32768}}"#),
        )
        .unwrap();
        capshim()
            .args(["explain", "--stock"])
            .arg(&file)
            .assert()
            .code(1)
            .stderr(
                predicate::str::contains(file.display().to_string())
                    .and(predicate::str::contains(says))
                    .and(predicate::str::contains(key)),
            );
    }
}

/// An OS error is printed once, not again as the error's cause.
#[test]
fn an_os_error_is_printed_once() {
    let out = capshim()
        .args(["explain", "--stock", "/nonexistent/capshim-probe.json"])
        .assert()
        .code(1)
        .get_output()
        .stderr
        .clone();
    let err = String::from_utf8(out).unwrap();
    assert!(err.contains("/nonexistent/capshim-probe.json"), "{err}");
    assert_eq!(err.matches("(os error 2)").count(), 1, "{err}");
}

#[test]
fn profiles_with_an_unknown_brand_says_so_and_lists_chips() {
    capshim()
        .args(["profiles", "--cpu-brand", "Intel"])
        .assert()
        .success()
        .stdout(
            predicate::str::contains("\"Intel\" (--cpu-brand) is unknown")
                .and(predicate::str::contains("Apple M1, Apple M2"))
                .and(predicate::str::contains("or pass --cpu-brand").not()),
        );
}

#[test]
fn a_float_in_a_profile_file_is_explained() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("p.toml");
    std::fs::write(&file, "apple_family_max = 1007.0\n").unwrap();
    capshim()
        .args(["explain", "--profile-file"])
        .arg(&file)
        .assert()
        .code(1)
        .stderr(
            predicate::str::contains("must be an integer")
                .and(predicate::str::contains("untagged").not()),
        );
}

#[test]
fn completions_and_man_pages_come_from_the_clap_definitions() {
    let out = capshim().args(["completions", "bash"]).output().unwrap();
    assert!(out.status.success());
    let script = String::from_utf8(out.stdout).unwrap();
    assert!(
        script.contains("_capshim()") && script.contains("bench"),
        "{script}"
    );
    let bad = capshim().args(["completions", "tcsh"]).output().unwrap();
    assert_eq!(bad.status.code(), Some(2));

    let dir = tempfile::tempdir().unwrap();
    let out = capshim()
        .arg("man")
        .arg("--out-dir")
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for page in [
        "capshim.1",
        "capshim-run.1",
        "capshim-bench.1",
        "capshim-host-enable.1",
    ] {
        let text = std::fs::read_to_string(dir.path().join(page)).unwrap();
        assert!(text.contains(".TH"), "{page}");
    }
    let again = capshim()
        .arg("man")
        .arg("--out-dir")
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(
        again.status.code(),
        Some(1),
        "existing pages are not replaced without --force"
    );
}

#[test]
fn explain_refuses_values_beyond_any_known_apple_gpu_unless_allowed() {
    capshim()
        .args(["explain", "--threadgroup-memory", "0xFFFFFFFFFFFFFFFF"])
        .assert()
        .code(1)
        .stdout("")
        .stderr(
            predicate::str::contains(
                "--threadgroup-memory 18446744073709551615: 18446744073709551615 bytes is above 65536",
            )
            .and(predicate::str::contains("pass --allow-beyond-hardware to use it anyway")),
        );
    capshim()
        .args([
            "explain",
            "--json",
            "--threadgroup-memory",
            "0xFFFFFFFFFFFFFFFF",
            "--allow-beyond-hardware",
        ])
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "\"max_threadgroup_memory\": 18446744073709551615",
        ))
        .stderr(predicate::str::contains(
            "capshim: warning: --threadgroup-memory 18446744073709551615",
        ));
    // Zero and absurd values are said, not silently applied.
    capshim()
        .args([
            "explain",
            "--threadgroup-memory",
            "0",
            "--working-set",
            "64",
        ])
        .assert()
        .success()
        .stderr(
            predicate::str::contains("capshim: warning: --threadgroup-memory 0: 0 bytes is below")
                .and(predicate::str::contains(
                    "capshim: warning: --working-set 64: 64 bytes is below 1 GiB",
                )),
        );
}

/// Off a Mac the chip is not known: the default stays apple9-64k, and one line says why.
#[cfg(not(target_os = "macos"))]
#[test]
fn where_the_chip_is_unknown_the_default_says_so() {
    let out = capshim()
        .args(["explain", "--json"])
        .assert()
        .success()
        .get_output()
        .clone();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(v["profile"]["name"], "apple9-64k");
    assert!(
        stderr.starts_with(
            "capshim: note: using apple9-64k, the first published experiment's profile"
        ) && stderr.contains("--cpu-brand")
            && stderr.lines().count() == 1,
        "{stderr}"
    );
}

#[test]
fn host_is_read_as_native_and_cpu_brand_goes_with_any_profile() {
    capshim()
        .args([
            "explain",
            "--profile",
            "host",
            "--cpu-brand",
            "Apple M3 Max (Virtual)",
            "--json",
        ])
        .assert()
        .success()
        .stdout(predicate::str::contains("\"name\": \"native\""))
        .stderr(predicate::str::contains(
            "capshim: note: --profile host is now called native",
        ));
    capshim()
        .args([
            "explain",
            "--profile",
            "apple9-64k",
            "--cpu-brand",
            "Apple M1 Ultra (Virtual)",
        ])
        .assert()
        .success()
        .stderr("")
        .stdout(predicate::str::contains(
            "against the M1: claims Apple8 (1008) to Apple9 (1009), which the M1 GPU does not have",
        ));
}

/// A `--dylib` path that names nothing is not found (a warning off macOS, where failures are
/// shown as warnings), never `ok`; its other checks are skipped.
#[test]
fn doctor_reports_a_missing_explicit_library_as_not_found() {
    let out = capshim()
        .args(["doctor", "--json", "--dylib", "/nonexistent/libcapshim.so"])
        .assert()
        .get_output()
        .stdout
        .clone();
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    let checks = v["checks"].as_array().unwrap();
    let found = checks.iter().find(|c| c["id"] == "library.found").unwrap();
    let expected = if cfg!(target_os = "macos") {
        "fail"
    } else {
        "warn"
    };
    assert_eq!(found["status"], expected, "{found}");
    // The line itself names the path and why, without --verbose.
    assert!(
        found["summary"]
            .as_str()
            .unwrap()
            .starts_with("libcapshim.so not found: /nonexistent/libcapshim.so: "),
        "{found}"
    );
    assert!(
        found["fix"]
            .as_str()
            .unwrap()
            .starts_with("check the path given with --dylib"),
        "{found}"
    );
    assert!(
        found["detail"]
            .as_str()
            .unwrap()
            .contains("/nonexistent/libcapshim.so"),
        "{found}"
    );
    let format = checks.iter().find(|c| c["id"] == "library.format").unwrap();
    assert_eq!(format["status"], "skip", "{format}");
}

/// Off macOS, doctor runs, skips what needs macOS, reads the real library's version record
/// without loading it, and exits 0.
#[cfg(target_os = "linux")]
#[test]
fn doctor_runs_off_macos_and_reads_the_librarys_version() {
    let shim = common::real_shim();
    let out = capshim()
        .args(["doctor", "--json", "--dylib"])
        .arg(&shim)
        .assert()
        .code(0)
        .get_output()
        .stdout
        .clone();
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(v["macos"], false);
    assert_eq!(v["exit_code"], 0);
    let check = |id: &str| {
        v["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["id"] == id)
            .unwrap_or_else(|| panic!("no {id}"))
            .clone()
    };
    assert_eq!(check("library.found")["status"], "ok");
    let version = check("library.version");
    assert_eq!(version["status"], "ok", "{version}");
    assert_eq!(
        version["summary"],
        format!(
            "capshim {}, the same as this CLI",
            env!("CARGO_PKG_VERSION")
        )
    );
    for id in [
        "machine.macos",
        "device.metal",
        "sip",
        "known.host-preference",
    ] {
        assert_eq!(check(id)["status"], "skip", "{id}");
    }
    capshim()
        .args(["doctor", "--dylib"])
        .arg(&shim)
        .assert()
        .code(0)
        .stdout(predicate::str::contains("this is linux, not macOS"))
        .stdout(predicate::str::contains("ok    library.version"));
}

/// A library without a version record, and a program that is not there: warnings off
/// macOS (failures there), never a failing exit code.
#[cfg(target_os = "linux")]
#[test]
fn doctor_off_macos_reports_what_would_fail_as_warnings() {
    let dir = tempfile::tempdir().unwrap();
    // The capshim executable is an ELF shared object (PIE), but not capshim's library.
    let not_shim = dir.path().join("libcapshim.so");
    std::fs::copy(assert_cmd::cargo::cargo_bin("capshim"), &not_shim).unwrap();
    let out = capshim()
        .args(["doctor", "--json", "--dylib"])
        .arg(&not_shim)
        .args(["--", "no-such-program-capshim"])
        .assert()
        .code(0)
        .get_output()
        .stdout
        .clone();
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    let status = |id: &str| {
        v["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["id"] == id)
            .map(|c| c["status"].as_str().unwrap().to_string())
    };
    assert_eq!(status("library.version").as_deref(), Some("warn"));
    assert_eq!(status("program.found").as_deref(), Some("warn"));
    assert_eq!(v["counts"]["fail"], 0);
}
