//! Quiet by default, and scope by behaviour: a process the shim does not belong to loads it and
//! does nothing, whatever copy of the environment reached it, and says nothing; a process that
//! never creates a device says nothing; a hooked process says one line.

use capshim_simguest::PARAVIRTUAL;

use crate::harness::*;

const SCOPE_PROCESS: &[(&str, &str)] = &[
    ("CAPSHIM_APPLE_FAMILY_MAX", "1009"),
    ("CAPSHIM_SCOPE", "process"),
];

#[test]
fn with_a_profile_set_a_process_that_never_creates_a_device_says_nothing() {
    for build in Build::ALL {
        for extra in [
            &[][..],
            &[("CAPSHIM_SCOPE", "process")][..],
            &[("CAPSHIM_ONLY_PROCESS", "probe-dlopen")][..],
        ] {
            let mut env = UNLOCKED.to_vec();
            env.extend_from_slice(extra);
            let r = run(
                build,
                &g().probe_dlopen,
                &["--no-metal"],
                &env,
                Inject::Shim,
            );
            assert_eq!(r.stderr, "", "{build:?} {extra:?}");
        }
        // CAPSHIM_LOG=verbose says the load-time line.
        let mut env = UNLOCKED.to_vec();
        env.push(("CAPSHIM_LOG", "verbose"));
        let r = run(
            build,
            &g().probe_dlopen,
            &["--no-metal"],
            &env,
            Inject::Shim,
        );
        let lines = r.capshim_lines();
        assert_eq!(lines.len(), 1, "{build:?}: {lines:?}");
        assert!(
            lines[0].starts_with("capshim: active in probe-dlopen (pid "),
            "{}",
            lines[0]
        );
    }
}

#[test]
fn a_process_only_process_does_not_name_says_nothing_and_its_status_event_stays() {
    for build in Build::ALL {
        let dir = tempdir();
        let status = dir.join("status.jsonl");
        let mut env = UNLOCKED.to_vec();
        env.push(("CAPSHIM_ONLY_PROCESS", "llama-bench"));
        env.push(("CAPSHIM_STATUS_FILE", status.to_str().unwrap()));
        let r = probe(build, &[], &env);
        assert!(!r.family(PARAVIRTUAL, 1009));
        assert_eq!(r.stderr, "", "{build:?}");
        let events = events(&status);
        assert_eq!(events.len(), 1, "{build:?}: {events:?}");
        assert_eq!(events[0]["event"], "inactive");
    }
}

#[test]
fn log_off_is_silent_even_for_a_malformed_configuration() {
    for build in Build::ALL {
        for env in [
            &[("CAPSHIM_APPLE_FAMILY_MAX", "1009"), ("CAPSHIM_LOG", "off")][..],
            &[("CAPSHIM_APPLE_FAMILY_MAX", "x"), ("CAPSHIM_LOG", "off")][..],
        ] {
            let r = probe(build, &[], env);
            assert_eq!(r.stderr, "", "{build:?} {env:?}");
        }
    }
}

#[test]
fn a_child_given_a_copy_of_the_environment_from_before_the_hook_loads_the_shim_and_does_nothing() {
    for build in Build::ALL {
        let dir = tempdir();
        let status = dir.join("status.jsonl");
        let mut env = SCOPE_PROCESS.to_vec();
        env.push(("CAPSHIM_STATUS_FILE", status.to_str().unwrap()));
        // The parent copies its environment when main starts (as CPython's os.environ does),
        // hooks its device (the shim then leaves the live environment), and starts the child
        // with the copy (posix_spawn with a saved envp): the child still loads the shim.
        let child = g().probe.to_str().unwrap();
        let r = probe(build, &["--snapshot-then", child], &env);
        let runs = r.processes();
        assert_eq!(runs.len(), 2, "{build:?}: {}", r.stdout);
        assert_eq!(runs[0]["AppleParavirtDevice.llama.simdgroup_mm"], "true");
        assert_eq!(
            runs[1]["AppleParavirtDevice.llama.simdgroup_mm"], "false",
            "{build:?}: the child stays stock\n{}",
            r.stderr
        );
        // It loaded the shim (its status event, below), which took itself out of the child's
        // environment before main.
        assert_eq!(
            runs[1]["env.LD_PRELOAD"],
            build
                .stock_preload()
                .map_or("(unset)".into(), |p| p.into_string().unwrap())
        );
        // One line: the parent's hook. The child says nothing.
        let lines = r.capshim_lines();
        assert_eq!(lines.len(), 1, "{build:?}: {lines:?}");
        assert!(lines[0].contains(&format!("(pid {})", runs[0]["pid"])));
        let child_events: Vec<_> = events(&status)
            .into_iter()
            .filter(|e| e["pid"] == runs[1]["pid"].parse::<u64>().unwrap())
            .collect();
        assert_eq!(child_events.len(), 1, "{build:?}: {child_events:?}");
        assert_eq!(child_events[0]["event"], "inactive");

        // Under CAPSHIM_ONLY_PROCESS, a child of another name given the copy stays stock too.
        let mut env = UNLOCKED.to_vec();
        env.push(("CAPSHIM_ONLY_PROCESS", "probe"));
        let child = g().probe_dlopen.to_str().unwrap();
        let r = probe(build, &["--snapshot-then", child], &env);
        let runs = r.processes();
        assert_eq!(runs[0]["AppleParavirtDevice.llama.simdgroup_mm"], "true");
        assert_eq!(
            runs.last().unwrap()["AppleParavirtDevice.llama.simdgroup_mm"],
            "false",
            "{build:?}"
        );
        assert_eq!(r.capshim_lines().len(), 1, "{build:?}: {}", r.stderr);
    }
}

#[test]
fn a_process_that_got_the_owner_s_pid_with_an_old_mark_is_not_the_owner() {
    for build in Build::ALL {
        // A shell that replaces itself (exec, same pid) with the probe, after putting its own
        // pid in the mark with a start time that is not its own: what a process given a pid
        // the owner used to have, with a copy of the owner's environment, looks like.
        let script = format!(
            "exec env CAPSHIM_OWNER_PID=$$:1 {}",
            g().probe.to_str().unwrap()
        );
        let r = run(
            build,
            "/bin/sh".as_ref(),
            &["-c", &script],
            SCOPE_PROCESS,
            Inject::Shim,
        );
        assert!(!r.family(PARAVIRTUAL, 1009), "{build:?}: {}", r.stderr);
        assert_eq!(r.capshim_lines(), Vec::<&str>::new(), "{build:?}");
        // Its real mark (the shell's own, kept across the exec) is the same process.
        let script = format!("exec {}", g().probe.to_str().unwrap());
        let r = run(
            build,
            "/bin/sh".as_ref(),
            &["-c", &script],
            SCOPE_PROCESS,
            Inject::Shim,
        );
        assert!(r.family(PARAVIRTUAL, 1009), "{build:?}: {}", r.stderr);
    }
}
