//! The shim with other threads: the environment others read while the shim leaves it, and a
//! `fork()` while another thread holds the install lock.

use capshim_simguest::{PARAVIRTUAL, SECOND};

use crate::harness::*;

#[test]
fn leaving_the_environment_never_changes_the_array_another_thread_may_be_reading() {
    for build in Build::ALL {
        // Under scope=process the shim takes itself out of the environment when it hooks the
        // device; the array and strings the program saw before must be untouched (a thread in
        // posix_spawn(…, environ) reads them), while the live environment no longer has it.
        let env = [
            ("CAPSHIM_APPLE_FAMILY_MAX", "1009"),
            ("CAPSHIM_SCOPE", "process"),
        ];
        let child = format!("{} --no-device", g().probe.display());
        let r = probe(build, &["--watch-environ", "--then", &child], &env);
        let runs = r.processes();
        assert_eq!(runs[0]["AppleParavirtDevice.llama.simdgroup_mm"], "true");
        assert_eq!(
            r.get("environ.old_array_intact"),
            "true",
            "{build:?}: {}",
            r.stdout
        );
        assert_eq!(
            runs[1]["env.CAPSHIM_APPLE_FAMILY_MAX"], "(unset)",
            "{build:?}: the live environment lost the shim"
        );
    }
}

#[test]
fn a_child_forked_while_another_thread_holds_the_install_lock_can_still_hook() {
    for build in Build::ALL {
        for scope in ["children", "process"] {
            let mut preload = g().hold_install.clone().into_os_string();
            preload.push(" ");
            preload.push(build.preload());
            let preload = preload.into_string().unwrap();
            let env = [
                ("LD_PRELOAD", preload.as_str()),
                ("SIMGUEST_HOLD_CLASS", SECOND),
                ("CAPSHIM_APPLE_FAMILY_MAX", "1009"),
                ("CAPSHIM_SCOPE", scope),
            ];
            let r = run(
                build,
                &g().probe,
                &["--fork-while-installing", "--class", PARAVIRTUAL],
                &env,
                Inject::AsGiven,
            );
            assert_eq!(
                r.get("fork_child.status"),
                "exited 0",
                "{build:?} scope={scope}: the child must not wait for a lock no thread will \
                 release\n{}\n{}",
                r.stdout,
                r.stderr
            );
            let child = &r.processes()[1];
            assert_eq!(child["forked"], "true");
            // Under scope=children the child is the workload too and hooks its new class;
            // under scope=process it is another process and answers stock.
            assert_eq!(
                child["AppleParavirtDevice.llama.simdgroup_mm"],
                if scope == "children" { "true" } else { "false" },
                "{build:?} scope={scope}"
            );
        }
    }
}
