use std::path::Path;

use capshim_profile::named;

use super::*;
use crate::platform::facts::Fake;
use crate::profile::ProfileArgs;

fn resolved(args: ProfileArgs) -> Resolved {
    args.resolve_with(&Fake::linux()).unwrap()
}

fn named_profile(name: &str) -> Resolved {
    resolved(ProfileArgs {
        profile: Some(name.into()),
        ..Default::default()
    })
}

#[test]
fn stock_changes_nothing() {
    let e = explain(&named_profile("stock"), None);
    assert_eq!(e.before, e.after);
    insta::assert_snapshot!("stock", render(&e));
    insta::assert_json_snapshot!("stock_json", e);
}

#[test]
fn apple9_64k_turns_on_the_simdgroup_paths() {
    let e = explain(&named_profile("apple9-64k"), None);
    assert!(e.consumers.llama_cpp.decision.cpu_fallback_ops.is_empty());
    insta::assert_snapshot!("apple9_64k", render(&e));
    insta::assert_json_snapshot!("apple9_64k_json", e);
}

#[test]
fn native_profiles_follow_the_chip() {
    for (chip, brand, family) in [
        ("m1", "Apple M1 Ultra (Virtual)", 1007),
        ("m2", "Apple M2 Pro (Virtual)", 1008),
        ("m3", "Apple M3 Max (Virtual)", 1009),
        ("m4", "Apple M4 (Virtual)", 1009),
        ("m5", "Apple M5 (Virtual)", 1010),
    ] {
        let e = explain(
            &resolved(ProfileArgs {
                cpu_brand: Some(brand.into()),
                ..Default::default()
            }),
            None,
        );
        assert_eq!(e.profile.apple_family_max, Some(family));
        assert_eq!(e.after.max_threadgroup_memory, 32768);
        let llama = &e.consumers.llama_cpp.decision;
        assert!(llama.simdgroup_reduction && llama.simdgroup_mm && !llama.tensor);
        assert_eq!(e.profile.name, "native");
        assert!(e.profile.host_chip.as_ref().unwrap().differences.is_empty());
        assert_eq!(llama.tuning_family, Some(family - 1000));
        assert_eq!(e.consumers.metal.decision.bf16_emulation, family < 1009);
        assert!(e.consumers.whisper.decision.metal);
        assert!(e.warnings.is_empty(), "{chip}: {:?}", e.warnings);
        insta::assert_snapshot!(format!("native_{chip}"), render(&e));
    }
}

#[test]
fn custom_values_and_working_set() {
    let e = explain(
        &resolved(ProfileArgs {
            family_max: Some(1006),
            threadgroup_memory: Some(49152),
            working_set: Some(16 << 30),
            ..Default::default()
        }),
        None,
    );
    // Apple6 alone gives bfloat but not the simdgroup paths.
    let llama = &e.consumers.llama_cpp.decision;
    assert!(llama.bfloat && !llama.simdgroup_reduction);
    assert_eq!(e.after.recommended_working_set_size, Some(16 << 30));
    insta::assert_snapshot!("custom", render(&e));
}

#[test]
fn probe_file_with_metal3_warns_about_mlx_residency_sets() {
    let text = r#"{"name":"Apple Paravirtual device","families":{"1001":true,"1005":true,"1007":false,"5001":true,"5002":false},"max_threadgroup_memory":32768}"#;
    let report = DeviceReport::from_json(Path::new("probe.json"), text).unwrap();
    let e = explain(
        &Resolved {
            name: "apple9-64k".into(),
            profile: Some(named::apple9_64k()),
            provenance: "test".into(),
            chip: None,
            notes: Vec::new(),
            warnings: Vec::new(),
            env: Vec::new(),
            args: Default::default(),
        },
        Some(("probe.json", &report)),
    );
    assert!(e.consumers.mlx.decision.residency_sets);
    assert_eq!(e.consumers.mlx.decision.warnings.len(), 1);
    assert!(e.consumers.mlx.decision.fast_fence);
    // The policy never touches Metal3: the warning is the device's own doing.
    assert_eq!(e.before.families[&5001], e.after.families[&5001]);
    insta::assert_snapshot!("mlx_warning", render(&e));
}

#[test]
fn json_keeps_the_documented_shape() {
    let e = explain(&named_profile("apple9-64k"), None);
    let v = serde_json::to_value(&e).unwrap();
    for key in [
        "/profile/name",
        "/profile/apple_family_max",
        "/profile/max_threadgroup_memory",
        "/profile/recommended_working_set_size",
        "/before/families/1001",
        "/before/max_threadgroup_memory",
        "/after/families/1009",
        "/after/max_threadgroup_memory",
        "/consumers/llama.cpp/simdgroup_reduction",
        "/consumers/llama.cpp/simdgroup_mm",
        "/consumers/llama.cpp/bfloat",
        "/consumers/llama.cpp/tensor",
        "/consumers/llama.cpp/cpu_fallback_ops",
        "/consumers/mlx/residency_sets",
        "/consumers/mlx/warnings",
        "/consumers/llama.cpp/tuning_family",
        "/consumers/metal/bf16_emulation",
        "/consumers/whisper.cpp/metal",
        "/consumers/pytorch/mps_device",
        "/consumers/mlx/fast_fence",
        "/consumers/mlx/kernel_generation",
        "/consumers/metal.jl/paravirtual",
        "/consumers/tinygrad/graph",
        "/consumers_before/llama.cpp/tuning_family",
    ] {
        assert!(v.pointer(key).is_some(), "missing {key}");
    }
    assert_eq!(v.pointer("/after/families/1009"), Some(&true.into()));
    assert_eq!(
        v.pointer("/consumers/llama.cpp/tuning_family"),
        Some(&9.into())
    );
    assert_eq!(
        v.pointer("/consumers_before/llama.cpp/tuning_family"),
        Some(&5.into())
    );
    assert_eq!(
        v.pointer("/consumers/metal/bf16_emulation"),
        Some(&false.into())
    );
    assert_eq!(
        v.pointer("/consumers/pytorch/mps_device"),
        Some(&false.into())
    );
    // Keys with a null value are there too: no Apple family answered gives null.
    let mut none = DeviceReport::from_json(
        Path::new("none.json"),
        r#"{"families":{"1001":false,"3001":true},"max_threadgroup_memory":32768}"#,
    )
    .unwrap();
    none.name = None;
    let e = explain(&named_profile("stock"), Some(("none.json", &none)));
    let v = serde_json::to_value(&e).unwrap();
    assert_eq!(
        v.pointer("/consumers/llama.cpp/tuning_family"),
        Some(&serde_json::Value::Null)
    );
    assert_eq!(
        v.pointer("/profile/recommended_working_set_size"),
        Some(&serde_json::Value::Null)
    );
}

#[test]
fn apple9_64k_on_a_known_chip_says_what_it_claims_beyond_it() {
    let e = explain(
        &resolved(ProfileArgs {
            profile: Some("apple9-64k".into()),
            cpu_brand: Some("Apple M1 Ultra (Virtual)".into()),
            ..Default::default()
        }),
        None,
    );
    let chip = e.profile.host_chip.as_ref().unwrap();
    assert_eq!((chip.name, chip.apple_family), ("M1", 1007));
    assert_eq!(chip.differences.len(), 2);
    assert_eq!(e.consumers.llama_cpp.decision.tuning_family, Some(9));
    assert!(!e.consumers.metal.decision.bf16_emulation);
    assert_eq!(e.consumers.llama_cpp.decision.warnings.len(), 1);
    assert_eq!(e.consumers.metal.decision.warnings.len(), 1);
    assert_eq!(e.warnings.len(), 2);
    assert!(
        e.warnings[1].starts_with("Metal: Apple9 is answered"),
        "{:?}",
        e.warnings
    );
    insta::assert_snapshot!("apple9_64k_on_m1", render(&e));
    let v = serde_json::to_value(&e).unwrap();
    assert_eq!(v.pointer("/profile/host_chip/name"), Some(&"M1".into()));
}

#[test]
fn a_probe_files_architecture_name_gives_mlx_its_kernel_routes() {
    let text = r#"{"name":"Apple Paravirtual device","architecture":"air64_v27","families":{"1005":true},"max_threadgroup_memory":32768}"#;
    let report = DeviceReport::from_json(Path::new("guest.json"), text).unwrap();
    assert_eq!(report.architecture.as_deref(), Some("air64_v27"));
    let e = explain(&named_profile("apple9-64k"), Some(("guest.json", &report)));
    let mlx = &e.consumers.mlx.decision;
    assert_eq!(mlx.kernel_generation, Some(2));
    assert!(
        mlx.warnings[0].contains("MLX_METAL_GPU_ARCH"),
        "{:?}",
        mlx.warnings
    );
    assert_eq!(e.architecture.as_deref(), Some("air64_v27"));
    assert!(render(&e).contains("\"air64_v27\": generation 2"));
}
