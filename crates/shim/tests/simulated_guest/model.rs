//! The Apple-runtime model refuses what Apple's runtime refuses, so it cannot silently go soft:
//! a test double more forgiving than the real thing would hide the bug that 606a069 shipped.

use std::os::unix::process::ExitStatusExt;

use capshim_simguest::PARAVIRTUAL;

use crate::harness::*;

const LIBPLATFORM: &str =
    "BUG IN CLIENT OF LIBPLATFORM: Trying to recursively lock an os_unfair_lock";

fn with_model_and(library: &std::path::Path) -> String {
    format!("{} {}", g().apple_model.display(), library.display())
}

#[test]
fn the_model_aborts_a_library_that_looks_up_a_class_under_the_runtime_lock() {
    // What 606a069 did: objc_lookUpClass from an objc_addLoadImageFunc callback. Apple's
    // runtime calls that back at once, lock held, for every image already loaded.
    let preload = with_model_and(&g().fault_load_image_lookup);
    for program in [&g().probe, &g().probe_dlopen] {
        let out = output(
            Build::AppleModel,
            program,
            &[],
            &[("LD_PRELOAD", &preload)],
            Inject::AsGiven,
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.signal(),
            Some(libc::SIGTRAP),
            "{}: {stderr}",
            program.display()
        );
        assert!(stderr.contains(LIBPLATFORM), "{stderr}");
        assert!(out.stdout.is_empty(), "it dies before main");
    }
    // GCC's runtime has no such callback and a recursive lock: the same library would pass there.
}

#[test]
fn dyld_add_image_callbacks_never_see_a_late_image_s_classes() {
    // The dyld fallback of 606a069: look _MTLDevice up when dyld reports an image. dyld calls
    // the callbacks for a dlopen()ed image before objc maps its classes.
    let preload = with_model_and(&g().fault_add_image_lookup);
    let r = run(
        Build::AppleModel,
        &g().probe_dlopen,
        &[],
        &[("LD_PRELOAD", &preload)],
        Inject::AsGiven,
    );
    assert_eq!(r.get("metal"), "dlopened");
    let seen: Vec<_> = r
        .stderr
        .lines()
        .filter(|l| l.starts_with("add-image:"))
        .collect();
    assert!(
        seen.len() > 5,
        "called for every image, at registration and for the new ones: {seen:?}"
    );
    assert!(
        seen.iter().all(|l| *l == "add-image: _MTLDevice absent"),
        "{seen:?}"
    );
    // Linked at launch, Metal's classes are mapped before any initializer runs.
    let r = run(
        Build::AppleModel,
        &g().probe,
        &[],
        &[("LD_PRELOAD", &preload)],
        Inject::AsGiven,
    );
    assert!(
        r.stderr.contains("add-image: _MTLDevice found"),
        "{}",
        r.stderr
    );
}

#[test]
fn the_apple_model_build_refuses_to_load_without_a_model() {
    // The Apple path leaves Apple's runtime functions undefined: without the model preloaded
    // first the loader stops the process rather than let GCC's runtime answer for Apple's.
    let shim = Build::AppleModel.shim();
    let out = output(
        Build::AppleModel,
        &g().probe,
        &[],
        &[
            ("LD_PRELOAD", shim.to_str().unwrap()),
            ("CAPSHIM_APPLE_FAMILY_MAX", "1009"),
        ],
        Inject::AsGiven,
    );
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("undefined symbol: object_getClass"),
        "{stderr}"
    );
}

#[test]
fn will_initialize_callbacks_reach_the_shim_for_a_late_metal_and_nothing_takes_the_lock_twice() {
    // Every case of the suite runs on the model; this one also checks the path taken: with
    // Metal dlopen()ed late, the base class is hooked from its willInitialize callback.
    let r = run(
        Build::AppleModel,
        &g().probe_dlopen,
        &["--threads", "8"],
        UNLOCKED,
        Inject::Shim,
    );
    assert!(!r.stderr.contains("LIBPLATFORM"), "{}", r.stderr);
    for i in 0..8 {
        assert!(
            r.get(&format!("thread.{i}.{PARAVIRTUAL}")).contains("1009"),
            "{}",
            r.stderr
        );
    }
}
