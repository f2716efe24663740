//! What the shim changes, and what it never changes.

use capshim_simguest::{BROKEN, NESTED, PARAVIRTUAL, SECOND, SUB};

use crate::harness::*;

#[test]
fn stock_guest_answers_as_the_paravirtual_device_does() {
    for build in Build::ALL {
        let s = stock(build, &[]);
        for family in ALL_FAMILIES {
            let expected = (1001..=1005).contains(&family) || (3001..=3003).contains(&family);
            assert_eq!(
                s.family(PARAVIRTUAL, family),
                expected,
                "{build:?} family {family}"
            );
        }
        assert_eq!(s.get("AppleParavirtDevice.max_threadgroup_memory"), "32768");
        assert_eq!(
            s.get("AppleParavirtDevice.recommended_working_set_size"),
            "12009603072"
        );
        assert_eq!(s.get("AppleParavirtDevice.metal.bf16_emulation"), "true");
        for flag in ["simdgroup_reduction", "simdgroup_mm", "bfloat", "tensor"] {
            assert_eq!(
                s.get(&format!("AppleParavirtDevice.llama.{flag}")),
                "false",
                "{flag}"
            );
        }
        assert_eq!(s.capshim_lines(), Vec::<&str>::new());
    }
}

#[test]
fn unlocked_profile_turns_on_llama_cpp_gates_and_metal_s_own_bf16() {
    for build in Build::ALL {
        let u = probe(build, &[], UNLOCKED);
        for flag in ["simdgroup_reduction", "simdgroup_mm", "bfloat"] {
            assert_eq!(
                u.get(&format!("AppleParavirtDevice.llama.{flag}")),
                "true",
                "{build:?} {flag}"
            );
        }
        assert_eq!(u.get("AppleParavirtDevice.llama.tensor"), "false");
        assert_eq!(u.get("AppleParavirtDevice.max_threadgroup_memory"), "65536");
        assert!((1001..=1009).all(|f| u.family(PARAVIRTUAL, f)));
        assert!(!u.family(PARAVIRTUAL, 1010));
        // Metal itself asks [self supportsFamily:1009]: claiming Apple9 turns bf16 emulation off.
        assert_eq!(
            u.get("AppleParavirtDevice.metal.bf16_emulation"),
            "false",
            "{build:?}"
        );
        // The working set is left alone unless configured.
        assert_eq!(
            u.get("AppleParavirtDevice.recommended_working_set_size"),
            "12009603072"
        );
        // One line, when the device class is hooked, with the profile.
        let lines = u.capshim_lines();
        assert_eq!(lines.len(), 1, "{build:?}: {lines:?}");
        assert!(
            lines[0].starts_with("capshim: hooked AppleParavirtDevice in probe (pid "),
            "{}",
            lines[0]
        );
        assert!(lines[0].ends_with(
            "): apple_family_max=1009 (Apple9) max_threadgroup_memory=65536 recommended_working_set_size=unchanged scope=children"
        ), "{}", lines[0]);
        let apple8 = probe(build, &[], &[("CAPSHIM_APPLE_FAMILY_MAX", "1008")]);
        assert_eq!(
            apple8.get("AppleParavirtDevice.metal.bf16_emulation"),
            "true"
        );
    }
}

#[test]
fn families_outside_the_apple_range_never_change() {
    let classes = [
        "--class",
        PARAVIRTUAL,
        "--class",
        SECOND,
        "--class",
        SUB,
        "--class",
        NESTED,
    ];
    for build in Build::ALL {
        let s = stock(build, &classes);
        let u = probe(build, &classes, &[("CAPSHIM_APPLE_FAMILY_MAX", "1999")]);
        for class in [PARAVIRTUAL, SECOND, SUB, NESTED] {
            assert_same_families_outside_apple(&u, &s, class);
            assert!((1001..=1010).all(|f| u.family(class, f)), "{class}");
        }
        assert!(
            !u.family(PARAVIRTUAL, 5001),
            "Metal3 must stay false: MLX breaks on it"
        );
        assert!(
            u.family(SUB, 4001),
            "the subclass's own MacCatalyst1 answer is kept"
        );
    }
}

#[test]
fn a_device_asking_itself_inside_its_own_answer_keeps_its_stock_logic() {
    // MTLSimNestedDevice answers Common3 as [self supportsFamily:1004] and Mac2 as
    // [self supportsFamily:1008]: messages to self from inside the original. They reach the
    // shim's replacement again, nested, and must get the device's own answers: otherwise a
    // raised Apple8 would turn Mac2 (a non-Apple family) on.
    for build in Build::ALL {
        let args = ["--class", NESTED];
        let s = stock(build, &args);
        assert!(s.family(NESTED, 3003) && !s.family(NESTED, 2002));
        let r = probe(
            build,
            &args,
            &[
                ("CAPSHIM_APPLE_FAMILY_MAX", "1009"),
                ("CAPSHIM_LOG", "queries"),
            ],
        );
        assert_same_families_outside_apple(&r, &s, NESTED);
        assert!(
            (1001..=1009).all(|f| r.family(NESTED, f)),
            "{build:?}: {}",
            r.stderr
        );
        assert!(!r.family(NESTED, 1010));
        assert!(!r.stderr.contains("no original"), "{}", r.stderr);
        // The query log shows the outer answers only, with the device's own originals.
        assert!(
            r.stderr.contains(
                "query MTLSimNestedDevice supportsFamily:2002 original=false returned=false"
            ),
            "{}",
            r.stderr
        );
        // Messages from other methods (Metal's own requiresBFloat16Emulation) are not nested.
        assert_eq!(r.get("MTLSimNestedDevice.metal.bf16_emulation"), "false");
    }
}

/// Every family outside the Apple range answers as stock.
fn assert_same_families_outside_apple(a: &Run, b: &Run, class: &str) {
    for family in ALL_FAMILIES.iter().filter(|f| !(1001..=1999).contains(*f)) {
        assert_eq!(
            a.family(class, *family),
            b.family(class, *family),
            "{:?}: {class} {family}",
            a.build
        );
    }
}

#[test]
fn each_class_keeps_its_own_originals() {
    // A threadgroup floor below the paravirtual device's own 32768 but above the second's 16384.
    let env = [
        ("CAPSHIM_APPLE_FAMILY_MAX", "1001"),
        ("CAPSHIM_MAX_THREADGROUP_MEMORY", "20000"),
    ];
    for build in Build::ALL {
        for order in [[PARAVIRTUAL, SECOND, SUB], [SUB, SECOND, PARAVIRTUAL]] {
            let args = [
                "--class", order[0], "--class", order[1], "--class", order[2],
            ];
            let r = probe(build, &args, &env);
            let s = stock(build, &args);
            assert_eq!(
                r.get("AppleParavirtDevice.max_threadgroup_memory"),
                "32768",
                "{order:?}"
            );
            assert_eq!(
                r.get("MTLSimSubDevice.max_threadgroup_memory"),
                "32768",
                "{order:?}"
            );
            assert_eq!(
                r.get("MTLSimSecondDevice.max_threadgroup_memory"),
                "20000",
                "{order:?}"
            );
            for class in order {
                assert_same_families(&r, &s, class);
            }
            let hooked = r
                .capshim_lines()
                .iter()
                .filter(|l| l.contains("hooked"))
                .count();
            assert_eq!(hooked, 3, "{build:?} {order:?}");
        }
    }
}

#[test]
fn a_method_of_another_signature_leaves_its_class_stock_and_others_still_hook() {
    for build in Build::ALL {
        let dir = tempdir();
        let status = dir.join("status.jsonl");
        let args = ["--class", BROKEN, "--class", PARAVIRTUAL];
        let env = [
            ("CAPSHIM_APPLE_FAMILY_MAX", "1009"),
            ("CAPSHIM_RECOMMENDED_WORKING_SET_SIZE", "17179869184"),
            ("CAPSHIM_STATUS_FILE", status.to_str().unwrap()),
        ];
        let r = probe(build, &args, &env);
        assert_same_answers(&r, &stock(build, &args), BROKEN);
        assert_eq!(
            r.get("AppleParavirtDevice.recommended_working_set_size"),
            "17179869184"
        );
        assert!(r.family(PARAVIRTUAL, 1009));
        let events = events(&status);
        let failed = events
            .iter()
            .find(|e| e["event"] == "failed")
            .expect("a failed event");
        assert_eq!(failed["class"], BROKEN);
        assert_eq!(
            failed["reason"],
            "-maxThreadgroupMemoryLength has type encoding \"I16@0:8\", expected an 8-byte integer and no argument"
        );
        assert!(
            r.stderr
                .contains("capshim: hook failed on MTLSimBrokenDevice"),
            "{}",
            r.stderr
        );
    }
}
