//! Which processes the shim acts in: `CAPSHIM_SCOPE=process`, `CAPSHIM_ONLY_PROCESS`, and a
//! framework Python's launcher, which replaces itself with the interpreter in the same pid.

use capshim_simguest::PARAVIRTUAL;

use crate::harness::*;

const UNLOCKED_PROCESS: &[(&str, &str)] = &[
    ("CAPSHIM_APPLE_FAMILY_MAX", "1009"),
    ("CAPSHIM_SCOPE", "process"),
];

/// The `LD_PRELOAD` a child was started with, as the probe printed it: "(unset)" or the list.
fn preload_of(process: &std::collections::BTreeMap<String, String>) -> &str {
    &process["env.LD_PRELOAD"]
}

#[test]
fn scope_process_leaves_children_stock_and_keeps_other_preloads() {
    for build in Build::ALL {
        let child = format!("{} --class {PARAVIRTUAL}", g().probe.display());
        // Another library preloaded after the shim must survive for the children.
        let mut preload = build.preload();
        preload.push(" ");
        preload.push(&g().metal);
        let preload = preload.into_string().unwrap();
        let mut env = UNLOCKED_PROCESS.to_vec();
        env.push(("LD_PRELOAD", &preload));
        let r = run(
            build,
            &g().probe,
            &["--then", &child],
            &env,
            Inject::AsGiven,
        );
        let runs = r.processes();
        assert_eq!(runs.len(), 2);
        assert_eq!(
            runs[0]["AppleParavirtDevice.llama.simdgroup_mm"], "true",
            "the process itself"
        );
        assert_eq!(
            runs[1]["AppleParavirtDevice.llama.simdgroup_mm"], "false",
            "{build:?}: its child"
        );
        let mut expected = build
            .stock_preload()
            .map(|p| p.into_string().unwrap() + ":")
            .unwrap_or_default();
        expected.push_str(g().metal.to_str().unwrap());
        assert_eq!(
            preload_of(&runs[1]),
            expected,
            "{build:?}: only the shim left"
        );
        assert_eq!(runs[1]["env.CAPSHIM_APPLE_FAMILY_MAX"], "(unset)");

        let env: Vec<_> = env
            .into_iter()
            .filter(|(k, _)| *k != "CAPSHIM_SCOPE")
            .collect();
        let r = run(
            build,
            &g().probe,
            &["--then", &child],
            &env,
            Inject::AsGiven,
        );
        let runs = r.processes();
        assert_eq!(
            runs[1]["AppleParavirtDevice.llama.simdgroup_mm"], "true",
            "by default children inherit"
        );
    }
}

#[test]
fn under_scope_process_a_child_started_before_the_hook_stays_stock_and_quiet() {
    for build in Build::ALL {
        let dir = tempdir();
        let status = dir.join("status.jsonl");
        let child = format!("{} --class {PARAVIRTUAL}", g().probe.display());
        let mut env = UNLOCKED_PROCESS.to_vec();
        env.push(("CAPSHIM_STATUS_FILE", status.to_str().unwrap()));
        // The dlopen probe runs the child before it loads Metal, then creates its own device.
        let r = run(
            build,
            &g().probe_dlopen,
            &["--before", &child],
            &env,
            Inject::Shim,
        );
        let runs = r.processes();
        // The dlopen probe's header, the child's block, then the probe's own answers.
        assert_eq!(runs.len(), 3, "{}", r.stdout);
        let (child_block, parent_block) = (&runs[1], &runs[2]);
        assert_eq!(
            child_block["AppleParavirtDevice.llama.simdgroup_mm"], "false",
            "{build:?}"
        );
        assert_eq!(
            parent_block["AppleParavirtDevice.llama.simdgroup_mm"], "true",
            "{build:?}: the process itself is unlocked\n{}",
            r.stderr
        );
        // The shell between them stayed stock and took the shim out of the child's environment.
        assert_eq!(
            preload_of(child_block),
            build
                .stock_preload()
                .map_or("(unset)".into(), |p| p.into_string().unwrap())
        );
        let stock_lines: Vec<_> = r
            .capshim_lines()
            .into_iter()
            .filter(|l| l.contains("staying stock"))
            .collect();
        assert!(
            stock_lines.is_empty(),
            "children stay stock quietly: {stock_lines:?}"
        );
        let events = events(&status);
        let sh = events
            .iter()
            .find(|e| e["event"] == "inactive")
            .expect("the shell's event");
        assert!(
            sh["reason"]
                .as_str()
                .unwrap()
                .contains("CAPSHIM_SCOPE=process: the shim belongs to pid"),
            "{sh}"
        );
    }
}

#[test]
fn only_process_matches_the_executable_name() {
    for build in Build::ALL {
        let mut env = UNLOCKED.to_vec();
        env.push(("CAPSHIM_ONLY_PROCESS", "probe"));
        assert!(probe(build, &[], &env).family(PARAVIRTUAL, 1009));
        let mut env = UNLOCKED.to_vec();
        env.push(("CAPSHIM_ONLY_PROCESS", "llama-bench"));
        let r = probe(build, &[], &env);
        assert!(!r.family(PARAVIRTUAL, 1009));
        assert_eq!(r.capshim_lines(), Vec::<&str>::new(), "{build:?}: silent");
        env.push(("CAPSHIM_LOG", "verbose"));
        let r = probe(build, &[], &env);
        assert!(
            r.stderr.contains(
                "CAPSHIM_ONLY_PROCESS=\"llama-bench\" does not match this process (probe)"
            ),
            "{}",
            r.stderr
        );
    }
}

#[test]
fn only_process_also_matches_the_name_a_symlink_started_it_as() {
    for build in Build::ALL {
        let dir = tempdir();
        let link = dir.join("probe-link");
        std::os::unix::fs::symlink(&g().probe, &link).unwrap();
        for name in ["probe-link", "probe"] {
            let mut env = UNLOCKED.to_vec();
            env.push(("CAPSHIM_ONLY_PROCESS", name));
            let r = run(build, &link, &[], &env, Inject::Shim);
            assert!(r.family(PARAVIRTUAL, 1009), "{name}: {}", r.stderr);
        }
        // A value that would break the one-line message is shown escaped.
        let mut env = UNLOCKED.to_vec();
        env.push(("CAPSHIM_ONLY_PROCESS", "probe\ncapshim: hooked X"));
        env.push(("CAPSHIM_LOG", "verbose"));
        let r = probe(build, &[], &env);
        assert!(!r.family(PARAVIRTUAL, 1009));
        assert_eq!(r.capshim_lines().len(), 1, "{}", r.stderr);
        assert!(
            r.stderr
                .contains("CAPSHIM_ONLY_PROCESS=\"probe\\ncapshim: hooked X\""),
            "{}",
            r.stderr
        );
    }
}

#[test]
fn a_framework_python_is_one_process_across_its_launcher_s_re_exec() {
    for build in Build::ALL {
        // Named by the launcher, as a user would: the interpreter it becomes is "Python".
        let mut only = UNLOCKED.to_vec();
        only.push(("CAPSHIM_ONLY_PROCESS", "python3.12"));
        let r = run(build, &g().python_launcher, &[], &only, Inject::Shim);
        assert_eq!(r.get("metal"), "dlopened");
        assert!(r.family(PARAVIRTUAL, 1009), "{build:?}: {}", r.stderr);
        assert!(
            r.stderr.contains("hooked AppleParavirtDevice in Python"),
            "{}",
            r.stderr
        );

        // scope=process: the launcher keeps the shim for its re-exec; the interpreter's
        // children after the hook are not injected at all.
        let child = format!("{} --class {PARAVIRTUAL}", g().probe.display());
        let r = run(
            build,
            &g().python_launcher,
            &["--then", &child],
            UNLOCKED_PROCESS,
            Inject::Shim,
        );
        let runs = r.processes();
        assert_eq!(runs.len(), 2, "{}", r.stdout);
        assert_eq!(
            runs[0]["AppleParavirtDevice.llama.simdgroup_mm"], "true",
            "{build:?}: {}",
            r.stderr
        );
        assert_eq!(runs[1]["AppleParavirtDevice.llama.simdgroup_mm"], "false");
        let expected = build
            .stock_preload()
            .map_or("(unset)".into(), |p| p.into_string().unwrap());
        assert_eq!(
            preload_of(&runs[1]),
            expected,
            "{build:?}: not injected at all"
        );
        assert_eq!(runs[1]["env.CAPSHIM_APPLE_FAMILY_MAX"], "(unset)");

        // Both at once, and the interpreter named directly, work too.
        let mut both = UNLOCKED_PROCESS.to_vec();
        both.push(("CAPSHIM_ONLY_PROCESS", "Python"));
        let r = run(build, &g().python_launcher, &[], &both, Inject::Shim);
        assert!(r.family(PARAVIRTUAL, 1009), "{build:?}: {}", r.stderr);
    }
}

#[test]
fn under_scope_process_a_forked_child_answers_stock_and_says_so_under_its_own_pid() {
    for build in Build::ALL {
        for when in ["--fork-before", "--fork-after"] {
            let dir = tempdir();
            let status = dir.join("status.jsonl");
            let mut env = UNLOCKED_PROCESS.to_vec();
            env.push(("CAPSHIM_STATUS_FILE", status.to_str().unwrap()));
            let r = probe(build, &[when], &env);
            let blocks = r.processes();
            let child = blocks
                .iter()
                .find(|b| b.contains_key("forked"))
                .expect("the child's block");
            let parent = blocks
                .iter()
                .rev()
                .find(|b| {
                    !b.contains_key("forked") && b.contains_key("AppleParavirtDevice.family.1009")
                })
                .unwrap();
            assert_eq!(
                parent["AppleParavirtDevice.family.1009"], "true",
                "{build:?} {when}"
            );
            assert_eq!(
                child["AppleParavirtDevice.family.1009"], "false",
                "{build:?} {when}: {}",
                r.stderr
            );
            assert_eq!(child["AppleParavirtDevice.max_threadgroup_memory"], "32768");
            let events = events(&status);
            let child_pid: u64 = child["pid"].parse().unwrap();
            if when == "--fork-before" {
                let said = events
                    .iter()
                    .find(|e| e["pid"] == child_pid)
                    .expect("the child's own event");
                assert_eq!(said["event"], "inactive", "{said}");
            }
            assert!(
                events
                    .iter()
                    .filter(|e| e["event"] == "hooked")
                    .all(|e| e["pid"] != child_pid),
                "{events:?}"
            );
        }
        // By default a forked child is unlocked like its parent.
        let r = probe(build, &["--fork-before"], UNLOCKED);
        let child = r
            .processes()
            .into_iter()
            .find(|b| b.contains_key("forked"))
            .unwrap();
        assert_eq!(
            child["AppleParavirtDevice.family.1009"], "true",
            "{build:?}"
        );
    }
}

#[test]
fn children_that_only_process_does_not_name_stay_stock_quietly() {
    for build in Build::ALL {
        let dir = tempdir();
        let status = dir.join("status.jsonl");
        let child = format!("{} --class {PARAVIRTUAL}", g().probe_dlopen.display());
        let mut env = UNLOCKED.to_vec();
        env.push(("CAPSHIM_ONLY_PROCESS", "probe"));
        env.push(("CAPSHIM_STATUS_FILE", status.to_str().unwrap()));
        let r = probe(build, &["--then", &child], &env);
        let runs = r.processes();
        assert_eq!(runs[0]["AppleParavirtDevice.family.1009"], "true");
        assert_eq!(
            runs[1]["AppleParavirtDevice.family.1009"], "false",
            "{build:?}"
        );
        assert!(
            !r.stderr.contains("staying stock"),
            "{build:?}: {}",
            r.stderr
        );
        let quiet = events(&status)
            .into_iter()
            .filter(|e| e["event"] == "inactive")
            .count();
        assert!(quiet >= 2, "the shell and the child are in the status file");
    }
}
