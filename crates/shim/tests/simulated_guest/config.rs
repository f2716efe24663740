//! Fail-closed configuration, the status file, and query logging.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use capshim_simguest::{PARAVIRTUAL, SECOND, parse};

use crate::harness::*;

#[test]
fn malformed_configuration_leaves_everything_stock_and_says_why() {
    const FAMILY: &str = "CAPSHIM_APPLE_FAMILY_MAX";
    let cases: &[(&[(&str, &str)], &str)] = &[
        (
            &[(FAMILY, "+1009")],
            "CAPSHIM_APPLE_FAMILY_MAX=\"+1009\" is malformed",
        ),
        (
            &[(FAMILY, "1009 ")],
            "CAPSHIM_APPLE_FAMILY_MAX=\"1009 \" is malformed",
        ),
        (&[(FAMILY, "1009k")], "is malformed"),
        (&[(FAMILY, "0x")], "0x must be followed by hex digits"),
        (
            &[(FAMILY, "99999999999999999999")],
            "does not fit in 64 bits",
        ),
        (&[(FAMILY, "5001")], "outside 1001 (Apple1) to 1999"),
        (&[(FAMILY, "1000")], "outside 1001 (Apple1) to 1999"),
        (
            &[(FAMILY, "1009"), ("CAPSHIM_MAX_THREADGROUP_MEMORY", "-1")],
            "CAPSHIM_MAX_THREADGROUP_MEMORY",
        ),
        (
            &[
                (FAMILY, "1009"),
                ("CAPSHIM_RECOMMENDED_WORKING_SET_SIZE", "16G"),
            ],
            "CAPSHIM_RECOMMENDED_WORKING_SET_SIZE",
        ),
        (
            &[(FAMILY, "1009"), ("CAPSHIM_SCOPE", "everything")],
            "CAPSHIM_SCOPE",
        ),
        (&[(FAMILY, "1009"), ("CAPSHIM_LOG", "loud")], "CAPSHIM_LOG"),
        (
            &[("CAPSHIM_MAX_THREADGROUP_MEMORY", "65536")],
            "CAPSHIM_APPLE_FAMILY_MAX is not",
        ),
        (
            &[(FAMILY, "1009"), ("LUME_METAL_APPLE_FAMILY_MAX", "1007")],
            "disagree",
        ),
    ];
    for build in Build::ALL {
        let s = stock(build, &[]);
        for (env, why) in cases {
            let r = probe(build, &[], env);
            assert_same_answers(&r, &s, PARAVIRTUAL);
            let lines = r.capshim_lines();
            assert_eq!(lines.len(), 1, "{build:?} {env:?}: {lines:?}");
            assert!(
                lines[0].starts_with("capshim: staying stock in probe (pid "),
                "{env:?}: {}",
                lines[0]
            );
            assert!(lines[0].contains(why), "{env:?}: {} lacks {why}", lines[0]);
        }
    }
}

#[test]
fn an_unconfigured_shim_is_silent_and_stock() {
    for build in Build::ALL {
        let r = probe(build, &[], &[]);
        assert_same_answers(&r, &stock(build, &[]), PARAVIRTUAL);
        assert_eq!(r.capshim_lines(), Vec::<&str>::new());
    }
}

#[test]
fn reference_shim_aliases_activate() {
    for build in Build::ALL {
        let r = probe(
            build,
            &[],
            &[
                ("LUME_METAL_APPLE_FAMILY_MAX", "1007"),
                ("LUME_METAL_MAX_THREADGROUP_MEMORY", "0x10000"),
            ],
        );
        assert!(r.family(PARAVIRTUAL, 1007) && !r.family(PARAVIRTUAL, 1008));
        assert_eq!(r.get("AppleParavirtDevice.max_threadgroup_memory"), "65536");
        let both = probe(
            build,
            &[],
            &[
                ("CAPSHIM_APPLE_FAMILY_MAX", "1007"),
                ("LUME_METAL_APPLE_FAMILY_MAX", "1007"),
            ],
        );
        assert!(both.family(PARAVIRTUAL, 1007));
    }
}

#[test]
fn a_status_file_nobody_reads_from_never_blocks_the_process() {
    for build in Build::ALL {
        let dir = tempdir();
        let fifo = dir.join("fifo");
        assert!(
            Command::new("mkfifo")
                .arg(&fifo)
                .status()
                .unwrap()
                .success()
        );
        let mut child = Command::new(&g().probe)
            .env_clear()
            .env("LD_PRELOAD", build.preload())
            .env("CAPSHIM_APPLE_FAMILY_MAX", "1009")
            .env("CAPSHIM_STATUS_FILE", &fifo)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Bounded wait: a blocked open would keep the probe alive.
        let deadline = Instant::now() + Duration::from_secs(20);
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if Instant::now() > deadline {
                child.kill().unwrap();
                panic!("{build:?}: the probe blocked on a FIFO status file");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        assert!(status.success());
        let out = child.wait_with_output().unwrap();
        let stdout = String::from_utf8(out.stdout).unwrap();
        assert_eq!(parse(&stdout)["AppleParavirtDevice.family.1009"], "true");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("cannot append to CAPSHIM_STATUS_FILE")
        );
    }
}

#[test]
fn the_status_file_records_activation_from_every_process() {
    for build in Build::ALL {
        let dir = tempdir();
        let status = dir.join("status.jsonl");
        let child = format!("{} --class {SECOND}", g().probe.display());
        let env = [
            ("CAPSHIM_APPLE_FAMILY_MAX", "1009"),
            ("CAPSHIM_STATUS_FILE", status.to_str().unwrap()),
        ];
        let r = probe(build, &["--then", &child], &env);
        assert_eq!(r.processes().len(), 2);
        let all = events(&status);
        // system() runs the child through /bin/sh, which inherits the shim too but never
        // creates a device: it is configured ("active") and never hooked.
        let (events, shell): (Vec<_>, Vec<_>) =
            all.into_iter().partition(|e| e["process"] == "probe");
        assert!(
            !shell.is_empty() && shell.iter().all(|e| e["event"] == "active"),
            "{shell:?}"
        );
        let kinds: Vec<(&str, &str)> = events
            .iter()
            .map(|e| {
                (
                    e["event"].as_str().unwrap(),
                    e["class"].as_str().unwrap_or("-"),
                )
            })
            .collect();
        assert_eq!(
            kinds,
            [
                ("active", "-"),
                ("hooked", PARAVIRTUAL),
                ("active", "-"),
                ("hooked", SECOND)
            ],
            "{build:?}"
        );
        assert_ne!(events[0]["pid"], events[2]["pid"]);
        assert_eq!(events[1]["profile"]["apple_family_max"], 1009);
        assert_eq!(events[1]["profile"]["max_threadgroup_memory"], 65536);
        assert!(events[1]["profile"]["recommended_working_set_size"].is_null());
    }
}

#[test]
fn a_refused_configuration_is_recorded_in_the_status_file() {
    for build in Build::ALL {
        let dir = tempdir();
        let status = dir.join("status.jsonl");
        probe(
            build,
            &[],
            &[
                ("CAPSHIM_APPLE_FAMILY_MAX", "Apple9"),
                ("CAPSHIM_STATUS_FILE", status.to_str().unwrap()),
            ],
        );
        let events = events(&status);
        assert_eq!(events.len(), 1);
        assert_eq!(events[0]["event"], "inactive");
        assert!(
            events[0]["reason"]
                .as_str()
                .unwrap()
                .contains("CAPSHIM_APPLE_FAMILY_MAX=\"Apple9\"")
        );
    }
}

#[test]
fn an_unwritable_status_file_does_not_hurt_the_process() {
    for build in Build::ALL {
        let r = probe(
            build,
            &[],
            &[
                ("CAPSHIM_APPLE_FAMILY_MAX", "1009"),
                ("CAPSHIM_STATUS_FILE", "/nonexistent/dir/status.jsonl"),
            ],
        );
        assert!(r.family(PARAVIRTUAL, 1009));
        let said = r
            .stderr
            .matches("cannot append to CAPSHIM_STATUS_FILE")
            .count();
        assert_eq!(said, 1, "{}", r.stderr);
    }
}

#[test]
fn query_logging_is_bounded_per_distinct_query_and_off_is_silent() {
    for build in Build::ALL {
        let r = probe(
            build,
            &[],
            &[
                ("CAPSHIM_APPLE_FAMILY_MAX", "1009"),
                ("CAPSHIM_LOG", "queries"),
            ],
        );
        let queries: Vec<_> = r
            .capshim_lines()
            .into_iter()
            .filter(|l| l.starts_with("capshim: query "))
            .collect();
        // 19 families asked (Apple9 again by requiresBFloat16Emulation, Apple6, Apple7, Metal3
        // and Metal4 again by the llama.cpp gates), the working set and threadgroup memory
        // once each; the working set is not hooked unless configured.
        assert_eq!(queries.len(), 20, "{queries:#?}");
        assert!(queries.contains(
            &"capshim: query AppleParavirtDevice supportsFamily:1007 original=false returned=true"
        ));
        assert!(queries.contains(
            &"capshim: query AppleParavirtDevice supportsFamily:5001 original=false returned=false"
        ));
        assert!(queries.contains(
            &"capshim: query AppleParavirtDevice maxThreadgroupMemoryLength original=32768 returned=65536"
        ));
        let quiet = probe(
            build,
            &[],
            &[("CAPSHIM_APPLE_FAMILY_MAX", "1009"), ("CAPSHIM_LOG", "off")],
        );
        assert_eq!(quiet.stderr, "");
        assert!(quiet.family(PARAVIRTUAL, 1009));
    }
}

#[test]
fn a_published_shims_family_alone_unlocks_as_that_shim_does() {
    for build in Build::ALL {
        for (name, family) in [
            ("TART_METAL_APPLE_FAMILY_MAX", 1009),
            ("VEERTU_ANKA_GPU_APPLE_FAMILY_MAX", 1008),
        ] {
            let value = family.to_string();
            let r = probe(build, &[], &[(name, &value)]);
            assert!(
                r.family(PARAVIRTUAL, family) && !r.family(PARAVIRTUAL, family + 1),
                "{build:?} {name}: {}",
                r.stderr
            );
            // Tart's and Anka's own default threadgroup memory, as a drop-in must keep it.
            assert_eq!(r.get("AppleParavirtDevice.max_threadgroup_memory"), "65536");
            assert_eq!(r.get("AppleParavirtDevice.llama.simdgroup_mm"), "true");
            assert!(
                r.stderr.contains(&format!(
                    "apple_family_max={family} (Apple{}) max_threadgroup_memory=65536",
                    family - 1000
                )),
                "{}",
                r.stderr
            );
        }
    }
}

#[test]
fn a_disagreeing_published_name_leaves_it_stock_and_names_both() {
    for build in Build::ALL {
        let s = stock(build, &[]);
        let r = probe(
            build,
            &[],
            &[
                ("TART_METAL_APPLE_FAMILY_MAX", "1009"),
                ("VEERTU_ANKA_GPU_APPLE_FAMILY_MAX", "1007"),
            ],
        );
        assert_same_answers(&r, &s, PARAVIRTUAL);
        assert_eq!(
            r.capshim_lines(),
            [format!(
                "capshim: staying stock in probe (pid {}): TART_METAL_APPLE_FAMILY_MAX=\"1009\" and VEERTU_ANKA_GPU_APPLE_FAMILY_MAX=\"1007\" disagree; unset one of them",
                r.get("pid")
            )],
            "{build:?}"
        );
        // Agreeing names are one setting, whatever their spelling.
        let r = probe(
            build,
            &[],
            &[
                ("TART_METAL_APPLE_FAMILY_MAX", "1009"),
                ("VEERTU_ANKA_GPU_APPLE_FAMILY_MAX", "0x3f1"),
                ("LUME_METAL_APPLE_FAMILY_MAX", "1009"),
            ],
        );
        assert!(r.family(PARAVIRTUAL, 1009), "{build:?}: {}", r.stderr);
    }
}

#[test]
fn tarts_documented_zero_stays_stock_quietly() {
    for build in Build::ALL {
        let dir = tempdir();
        let status = dir.join("status.jsonl");
        // As a Tart guest agent's environment with the family overridden to 0 for one command.
        let r = probe(
            build,
            &[],
            &[
                ("TART_METAL_APPLE_FAMILY_MAX", "0"),
                ("TART_METAL_MAX_THREADGROUP_MEMORY", "65536"),
                ("CAPSHIM_STATUS_FILE", status.to_str().unwrap()),
            ],
        );
        assert_same_answers(&r, &stock(build, &[]), PARAVIRTUAL);
        assert_eq!(r.capshim_lines(), Vec::<&str>::new(), "{build:?}");
        let events = events(&status);
        assert_eq!(events.len(), 1);
        assert_eq!(events[0]["event"], "inactive");
        assert_eq!(
            events[0]["reason"],
            "TART_METAL_APPLE_FAMILY_MAX=0: Tart documents 0 as stock capabilities, so this process stays stock"
        );
        // Anka documents no such meaning: its 0 is out of range, and said.
        let r = probe(build, &[], &[("VEERTU_ANKA_GPU_APPLE_FAMILY_MAX", "0")]);
        let lines = r.capshim_lines();
        assert!(
            lines.len() == 1
                && lines[0].contains(
                    "VEERTU_ANKA_GPU_APPLE_FAMILY_MAX: Apple family maximum 0 is outside"
                ),
            "{build:?}: {lines:?}"
        );
    }
}

#[test]
fn scope_process_removes_the_published_names_from_children() {
    for build in Build::ALL {
        let published = [
            ("LUME_METAL_APPLE_FAMILY_MAX", "1009"),
            ("TART_METAL_APPLE_FAMILY_MAX", "1009"),
            ("TART_METAL_MAX_THREADGROUP_MEMORY", "65536"),
            ("VEERTU_ANKA_GPU_APPLE_FAMILY_MAX", "1009"),
            ("VEERTU_ANKA_GPU_THREADGROUP_MEMORY_MIN", "65536"),
            ("VEERTU_ANKA_GPU_WORKING_SET_MIN", "4294967296"),
        ];
        let inherited = |r: &crate::harness::Run| -> Vec<String> {
            r.stdout
                .lines()
                .filter(|l| {
                    ["CAPSHIM_", "LUME_METAL_", "TART_METAL_", "VEERTU_ANKA_GPU_"]
                        .iter()
                        .any(|p| l.starts_with(p))
                })
                .map(str::to_string)
                .collect()
        };
        let mut env = published.to_vec();
        env.push(("CAPSHIM_SCOPE", "process"));
        // The child prints its whole environment.
        let r = probe(build, &["--then", "env"], &env);
        assert!(r.family(PARAVIRTUAL, 1009), "{build:?}: {}", r.stderr);
        assert_eq!(inherited(&r), Vec::<String>::new(), "{build:?}");
        // Without it, children inherit every name.
        let r = probe(build, &["--then", "env"], &published);
        assert_eq!(
            inherited(&r).len(),
            published.len(),
            "{build:?}: {:?}",
            inherited(&r)
        );
    }
}

#[test]
fn a_value_beyond_known_hardware_is_accepted_and_noted_on_the_hooked_line() {
    for build in Build::ALL {
        let beyond = [
            ("TART_METAL_APPLE_FAMILY_MAX", "1999"),
            ("CAPSHIM_MAX_THREADGROUP_MEMORY", "0"),
        ];
        let r = probe(build, &[], &beyond);
        // The published range still works: every Apple family through 1999 is answered.
        assert!(r.family(PARAVIRTUAL, 1010), "{build:?}: {}", r.stderr);
        assert_eq!(r.get("AppleParavirtDevice.max_threadgroup_memory"), "32768");
        // By default one line, when the class is hooked, with a note on each value.
        let lines = r.capshim_lines();
        assert_eq!(lines.len(), 1, "{build:?}: {}", r.stderr);
        let notes: Vec<&str> = lines[0].split("; note: ").skip(1).collect();
        assert_eq!(notes.len(), 2, "{}", lines[0]);
        assert!(
            notes[0].starts_with(
                "TART_METAL_APPLE_FAMILY_MAX: 1999 is above MTLGPUFamilyApple10 (1010)"
            ),
            "{}",
            notes[0]
        );
        assert!(
            notes[1]
                .starts_with("CAPSHIM_MAX_THREADGROUP_MEMORY: 0 bytes is below the 32768 bytes"),
            "{}",
            notes[1]
        );
        // With CAPSHIM_LOG=verbose the notes are also said at load, one line each.
        let mut verbose = beyond.to_vec();
        verbose.push(("CAPSHIM_LOG", "verbose"));
        let r = probe(build, &[], &verbose);
        let warnings: Vec<&str> = r
            .capshim_lines()
            .into_iter()
            .filter(|l| l.starts_with("capshim: warning in probe (pid "))
            .collect();
        assert_eq!(warnings.len(), 2, "{build:?}: {}", r.stderr);
        assert!(warnings[0].contains("TART_METAL_APPLE_FAMILY_MAX: 1999"));
        // Within known hardware, nothing is said beyond the usual line.
        let quiet = probe(build, &[], UNLOCKED);
        assert!(
            !quiet.stderr.contains("note") && !quiet.stderr.contains("warning"),
            "{build:?}: {}",
            quiet.stderr
        );
    }
}
