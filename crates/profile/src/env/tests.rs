//! Tests of [`parse`](super::parse) and [`vars_for`](super::vars_for).

use super::*;
use proptest::prelude::*;

fn config(vars: &[(&str, &str)]) -> Result<Config, ConfigError> {
    parse(vars.iter().map(|(k, v)| (k.as_bytes(), v.as_bytes()))).config
}

#[test]
fn vars_for_names_every_value() {
    let p = Profile::new(1009, 65536, Some(1 << 34)).unwrap();
    assert_eq!(
        vars_for(&p),
        vec![
            ("CAPSHIM_APPLE_FAMILY_MAX", "1009".to_string()),
            ("CAPSHIM_MAX_THREADGROUP_MEMORY", "65536".to_string()),
            (
                "CAPSHIM_RECOMMENDED_WORKING_SET_SIZE",
                "17179869184".to_string()
            ),
        ]
    );
    assert_eq!(vars_for(&Profile::new(1007, 32768, None).unwrap()).len(), 2);
}

#[test]
fn family_alone_activates_with_defaults() {
    let c = config(&[("CAPSHIM_APPLE_FAMILY_MAX", "1009")]).unwrap();
    assert_eq!(c.profile, Profile::new(1009, 65536, None).unwrap());
    assert_eq!(c.scope, Scope::Children);
    assert_eq!(c.only_process, None);
}

#[test]
fn every_setting_is_read() {
    let parsed = parse([
        ("CAPSHIM_APPLE_FAMILY_MAX", "0x3EF"),
        ("CAPSHIM_MAX_THREADGROUP_MEMORY", "32768"),
        ("CAPSHIM_RECOMMENDED_WORKING_SET_SIZE", "17179869184"),
        ("CAPSHIM_SCOPE", "process"),
        ("CAPSHIM_ONLY_PROCESS", "llama-bench"),
        ("CAPSHIM_LOG", "queries"),
        ("CAPSHIM_STATUS_FILE", "/tmp/s.jsonl"),
        ("PATH", "/usr/bin"),
    ]);
    assert_eq!(parsed.outputs.log, LogMode::Queries);
    assert_eq!(
        parsed.outputs.status_file.as_deref(),
        Some(&b"/tmp/s.jsonl"[..])
    );
    let c = parsed.config.unwrap();
    assert_eq!(
        c.profile,
        Profile::new(1007, 32768, Some(17179869184)).unwrap()
    );
    assert_eq!(c.scope, Scope::Process);
    assert_eq!(c.only_process.as_deref(), Some(&b"llama-bench"[..]));
}

#[test]
fn absent_and_empty_mean_not_configured() {
    assert_eq!(config(&[]), Err(ConfigError::NotConfigured));
    assert_eq!(
        config(&[("CAPSHIM_APPLE_FAMILY_MAX", "")]),
        Err(ConfigError::NotConfigured)
    );
    assert_eq!(
        config(&[("CAPSHIM_MAX_THREADGROUP_MEMORY", "65536")]),
        Err(ConfigError::MissingFamily {
            set: "CAPSHIM_MAX_THREADGROUP_MEMORY"
        })
    );
}

#[test]
fn malformed_values_fail_closed_naming_the_variable() {
    for (var, value) in [
        ("CAPSHIM_APPLE_FAMILY_MAX", "+1009"),
        ("CAPSHIM_APPLE_FAMILY_MAX", "1009 "),
        ("CAPSHIM_APPLE_FAMILY_MAX", "Apple9"),
        ("CAPSHIM_MAX_THREADGROUP_MEMORY", "64k"),
        ("CAPSHIM_MAX_THREADGROUP_MEMORY", "0x"),
        (
            "CAPSHIM_RECOMMENDED_WORKING_SET_SIZE",
            "99999999999999999999",
        ),
        ("LUME_METAL_MAX_THREADGROUP_MEMORY", "-1"),
        ("CAPSHIM_SCOPE", "Process"),
        ("CAPSHIM_LOG", "verbose"),
    ] {
        let mut vars = vec![(var, value)];
        if var != "CAPSHIM_APPLE_FAMILY_MAX" {
            vars.push(("CAPSHIM_APPLE_FAMILY_MAX", "1009"));
        }
        match config(&vars) {
            Err(ConfigError::Malformed {
                var: named,
                value: shown,
                ..
            }) => {
                assert_eq!((named, shown.as_str()), (var, value));
            }
            other => panic!("{var}={value}: {other:?}"),
        }
    }
}

#[test]
fn out_of_range_family_fails_closed() {
    let err = config(&[("CAPSHIM_APPLE_FAMILY_MAX", "18446744073709551615")]).unwrap_err();
    assert!(
        err.to_string()
            .contains("maximum 18446744073709551615 is outside"),
        "{err}"
    );
    for value in [
        "1000",
        "2000",
        "5001",
        "0",
        "18446744073709551615",
        "9223372036854775808",
    ] {
        assert!(
            matches!(
                config(&[("CAPSHIM_APPLE_FAMILY_MAX", value)]),
                Err(ConfigError::OutOfRange { .. })
            ),
            "{value}"
        );
    }
}

#[test]
fn aliases_work_and_conflicts_fail_closed() {
    let c = config(&[
        ("LUME_METAL_APPLE_FAMILY_MAX", "1009"),
        ("LUME_METAL_MAX_THREADGROUP_MEMORY", "65536"),
    ])
    .unwrap();
    assert_eq!(c.profile.apple_family_max, 1009);
    // The same number in two spellings is no conflict.
    assert!(
        config(&[
            ("CAPSHIM_APPLE_FAMILY_MAX", "1009"),
            ("LUME_METAL_APPLE_FAMILY_MAX", "0x3f1")
        ])
        .is_ok()
    );
    let err = config(&[
        ("CAPSHIM_APPLE_FAMILY_MAX", "1009"),
        ("LUME_METAL_APPLE_FAMILY_MAX", "1007"),
    ])
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "CAPSHIM_APPLE_FAMILY_MAX=\"1009\" and LUME_METAL_APPLE_FAMILY_MAX=\"1007\" disagree; unset one of them"
    );
    let err = config(&[("LUME_METAL_APPLE_FAMILY_MAX", "2002")]).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("LUME_METAL_APPLE_FAMILY_MAX: Apple family maximum 2002"),
        "{err}"
    );
}

#[test]
fn huge_values_are_clipped_in_messages() {
    let huge = "9".repeat(100_000);
    let err = config(&[("CAPSHIM_APPLE_FAMILY_MAX", &huge)]).unwrap_err();
    let shown = err.to_string();
    assert!(shown.len() < 200, "{} bytes", shown.len());
    assert!(
        shown.contains(&format!("\"{}…\"", "9".repeat(64))),
        "{shown}"
    );
}

#[test]
fn a_malformed_log_mode_still_logs_the_refusal() {
    let parsed = parse([
        ("CAPSHIM_APPLE_FAMILY_MAX", "1009"),
        ("CAPSHIM_LOG", "loud"),
    ]);
    assert_eq!(parsed.outputs.log, LogMode::Activation);
    assert!(parsed.config.is_err());
}

#[test]
fn capshim_variables_are_recognised_by_prefix() {
    assert!(is_capshim_var(b"CAPSHIM_LOG"));
    assert!(is_capshim_var(b"LUME_METAL_APPLE_FAMILY_MAX"));
    assert!(!is_capshim_var(b"LD_PRELOAD"));
    assert!(!is_capshim_var(b"CAPSHIMX"));
}

proptest! {
    #[test]
    fn never_panics_on_arbitrary_bytes(vars in proptest::collection::vec(
        (prop_oneof![
            Just(b"CAPSHIM_APPLE_FAMILY_MAX".to_vec()),
            Just(b"LUME_METAL_APPLE_FAMILY_MAX".to_vec()),
            Just(b"CAPSHIM_MAX_THREADGROUP_MEMORY".to_vec()),
            Just(b"CAPSHIM_RECOMMENDED_WORKING_SET_SIZE".to_vec()),
            Just(b"CAPSHIM_SCOPE".to_vec()),
            Just(b"CAPSHIM_LOG".to_vec()),
            Just(b"CAPSHIM_STATUS_FILE".to_vec()),
            proptest::collection::vec(any::<u8>(), 0..40),
        ], proptest::collection::vec(any::<u8>(), 0..40)),
        0..8,
    )) {
        let parsed = parse(vars);
        if let Ok(c) = parsed.config {
            prop_assert!((1001..=1999).contains(&c.profile.apple_family_max));
        }
    }

    #[test]
    fn any_valid_family_round_trips(family in 1001i64..=1999, tg in any::<u64>()) {
        let p = Profile::new(family, tg, None).unwrap();
        let c = parse(vars_for(&p)).config.unwrap();
        prop_assert_eq!(c.profile, p);
    }
}
