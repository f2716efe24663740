//! When Metal loads: linked at launch, dlopen()ed later, never, or without the hook point;
//! and many threads creating devices at once.

use capshim_simguest::{BROKEN, PARAVIRTUAL, SECOND, SUB};

use crate::harness::*;

#[test]
fn metal_linked_at_launch_is_hooked_from_the_initializer() {
    for build in Build::ALL {
        let dir = tempdir();
        let status = dir.join("status.jsonl");
        let r = probe(
            build,
            &[],
            &[
                ("CAPSHIM_APPLE_FAMILY_MAX", "1009"),
                ("CAPSHIM_STATUS_FILE", status.to_str().unwrap()),
            ],
        );
        assert_eq!(r.get("metal"), "linked");
        assert_eq!(
            r.get("AppleParavirtDevice.llama.simdgroup_mm"),
            "true",
            "{build:?}"
        );
        let kinds: Vec<_> = events(&status)
            .iter()
            .map(|e| e["event"].to_string())
            .collect();
        assert_eq!(kinds, ["\"active\"", "\"hooked\""], "{build:?}");
    }
}

#[test]
fn metal_loaded_late_with_dlopen_is_hooked() {
    for build in Build::ALL {
        let r = run(build, &g().probe_dlopen, &[], UNLOCKED, Inject::Shim);
        assert_eq!(r.get("metal"), "dlopened");
        assert_eq!(
            r.get("AppleParavirtDevice.llama.simdgroup_mm"),
            "true",
            "{build:?}\n{}",
            r.stderr
        );
        assert_eq!(r.get("AppleParavirtDevice.max_threadgroup_memory"), "65536");
        assert!(
            r.stderr
                .contains("capshim: hooked AppleParavirtDevice in probe-dlopen"),
            "{build:?}: {}",
            r.stderr
        );
    }
}

#[test]
fn a_metal_without_the_private_hook_point_stays_stock_and_says_so() {
    for build in Build::ALL {
        let dir = tempdir();
        let status = dir.join("status.jsonl");
        let metal = g().metal_without_hook_point.to_str().unwrap();
        let stock = run(
            build,
            &g().probe_dlopen,
            &[],
            &[("SIMGUEST_METAL", metal)],
            Inject::Stock,
        );
        let r = run(
            build,
            &g().probe_dlopen,
            &[],
            &[
                ("SIMGUEST_METAL", metal),
                ("CAPSHIM_APPLE_FAMILY_MAX", "1009"),
                ("CAPSHIM_STATUS_FILE", status.to_str().unwrap()),
            ],
            Inject::Shim,
        );
        assert_same_answers(&r, &stock, PARAVIRTUAL);
        assert!(!r.family(PARAVIRTUAL, 1007));
        let lines = r.capshim_lines();
        assert_eq!(lines.len(), 1, "{build:?}: {lines:?}");
        assert!(
            lines[0].starts_with("capshim: hook failed on _MTLDevice in probe-dlopen (pid ")
                && lines[0].ends_with("): no method -initGPUFamilySupport; staying stock"),
            "{}",
            lines[0]
        );
        let events = events(&status);
        assert_eq!(events[1]["event"], "failed");
        assert_eq!(events[1]["class"], "_MTLDevice");
    }
}

#[test]
fn a_linked_metal_without_the_hook_point_stays_stock_without_running_metal_code_early() {
    // Looking up a missing method makes Apple's runtime send +resolveInstanceMethod: to the
    // class, which initializes it: from the shim's initializer that would run Metal code
    // before main, before Metal's own initializers. The shim checks method lists instead.
    for build in Build::ALL {
        let dir = g()
            .metal_without_hook_point
            .parent()
            .unwrap()
            .to_str()
            .unwrap();
        let env = [
            ("LD_LIBRARY_PATH", dir),
            ("CAPSHIM_APPLE_FAMILY_MAX", "1009"),
        ];
        let r = probe(build, &[], &env);
        let s = run(
            build,
            &g().probe,
            &[],
            &[("LD_LIBRARY_PATH", dir)],
            Inject::Stock,
        );
        assert_same_answers(&r, &s, PARAVIRTUAL);
        assert_eq!(
            r.get("metal.messaged_before_main"),
            "false",
            "{build:?}: {}",
            r.stderr
        );
        let failed: Vec<_> = r
            .capshim_lines()
            .into_iter()
            .filter(|l| l.contains("hook failed"))
            .collect();
        assert_eq!(failed.len(), 1, "{failed:?}");
        assert!(
            failed[0].ends_with("no method -initGPUFamilySupport; staying stock"),
            "{}",
            failed[0]
        );
    }
}

#[test]
fn a_process_that_never_loads_metal_is_configured_but_never_hooked() {
    for build in Build::ALL {
        let dir = tempdir();
        let status = dir.join("status.jsonl");
        let r = run(
            build,
            &g().probe_dlopen,
            &["--no-metal"],
            &[
                ("CAPSHIM_APPLE_FAMILY_MAX", "1009"),
                ("CAPSHIM_STATUS_FILE", status.to_str().unwrap()),
            ],
            Inject::Shim,
        );
        assert_eq!(
            r.get("metal"),
            "not loaded",
            "the shim must not pull Metal in"
        );
        let kinds: Vec<_> = events(&status)
            .iter()
            .map(|e| e["event"].to_string())
            .collect();
        assert_eq!(kinds, ["\"active\""], "{build:?}");
        assert_eq!(
            r.capshim_lines(),
            Vec::<&str>::new(),
            "{build:?}: a process that never creates a device says nothing"
        );
    }
}

#[test]
fn eight_threads_creating_two_kinds_of_device_all_get_the_right_answers() {
    for build in Build::ALL {
        for program in [&g().probe, &g().probe_dlopen] {
            for _ in 0..3 {
                let args = ["--threads", "8", "--class", PARAVIRTUAL, "--class", SECOND];
                let r = run(build, program, &args, UNLOCKED, Inject::Shim);
                for i in 0..8 {
                    let (class, expected) = if i % 2 == 0 {
                        (
                            PARAVIRTUAL,
                            "1001,1002,1003,1004,1005,1006,1007,1008,1009,3001,3002,3003, tg=65536",
                        )
                    } else {
                        (
                            SECOND,
                            "1001,1002,1003,1004,1005,1006,1007,1008,1009,3001,3002, tg=65536",
                        )
                    };
                    assert_eq!(r.get(&format!("thread.{i}.{class}")), expected, "{build:?}");
                }
                let hooked: Vec<_> = r
                    .capshim_lines()
                    .into_iter()
                    .filter(|l| l.contains("hooked"))
                    .collect();
                assert_eq!(
                    hooked.len(),
                    2,
                    "each class is hooked exactly once: {hooked:?}"
                );
            }
        }
    }
}

#[test]
fn first_use_of_related_classes_on_many_threads_never_lowers_an_answer() {
    // A subclass's original calls [super supportsFamily:] while another thread may be hooking
    // that superclass: the superclass's original must already be known then. The broken class
    // stays stock (its threadgroup method has another signature) but still answers.
    let expected = [
        (
            SUB,
            "1001,1002,1003,1004,1005,1006,1007,1008,1009,3001,3002,3003,4001, tg=65536",
        ),
        (
            PARAVIRTUAL,
            "1001,1002,1003,1004,1005,1006,1007,1008,1009,3001,3002,3003, tg=65536",
        ),
        (
            SECOND,
            "1001,1002,1003,1004,1005,1006,1007,1008,1009,3001,3002, tg=65536",
        ),
        (BROKEN, "1001, tg=4096"),
    ];
    let args = [
        "--threads",
        "64",
        "--class",
        SUB,
        "--class",
        PARAVIRTUAL,
        "--class",
        SECOND,
        "--class",
        BROKEN,
    ];
    for build in Build::ALL {
        for _ in 0..15 {
            let r = probe(build, &args, UNLOCKED);
            for i in 0..64 {
                let (class, answers) = expected[i % 4];
                assert_eq!(
                    r.get(&format!("thread.{i}.{class}")),
                    answers,
                    "{build:?} thread {i}\n{}",
                    r.stderr
                );
            }
            assert!(!r.stderr.contains("no original"), "{}", r.stderr);
        }
    }
}

#[test]
fn a_process_without_objective_c_never_loads_the_runtime_because_of_the_shim() {
    // Left on for a whole machine, the library loads into every process: one with no
    // Objective-C must not pay for loading GCC's libobjc (the GNU build looks the runtime up
    // when first needed). The apple-model build links the model, which needs GCC's runtime.
    let build = Build::Gnu;
    for env in [&[][..], UNLOCKED] {
        let r = output(
            build,
            "/bin/cat".as_ref(),
            &["/proc/self/maps"],
            env,
            Inject::Shim,
        );
        let maps = String::from_utf8_lossy(&r.stdout);
        assert!(maps.contains("libcapshim"), "the shim is loaded: {maps}");
        assert!(!maps.contains("libobjc"), "{env:?}: {maps}");
        assert!(
            r.stderr.is_empty(),
            "{}",
            String::from_utf8_lossy(&r.stderr)
        );
    }
}
