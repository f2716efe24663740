//! Tests of [`parse`](super::parse) and [`vars_for`](super::vars_for).

use super::*;

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
fn a_name_given_twice_is_read_from_its_first_entry_as_getenv_does() {
    let c = config(&[
        ("CAPSHIM_APPLE_FAMILY_MAX", "1007"),
        ("CAPSHIM_APPLE_FAMILY_MAX", "1009"),
    ])
    .unwrap();
    assert_eq!(c.profile.apple_family_max, 1007);
    // An empty first entry is what getenv returns: the setting is absent.
    assert_eq!(
        config(&[
            ("CAPSHIM_APPLE_FAMILY_MAX", ""),
            ("CAPSHIM_APPLE_FAMILY_MAX", "1009"),
        ]),
        Err(ConfigError::NotConfigured)
    );
    let log = parse([("CAPSHIM_LOG", "off"), ("CAPSHIM_LOG", "queries")]);
    assert_eq!(log.outputs.log, LogMode::Off);
    let verbose = parse([("CAPSHIM_LOG", "verbose")]);
    assert_eq!(verbose.outputs.log, LogMode::Verbose);
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
            set: "CAPSHIM_MAX_THREADGROUP_MEMORY",
            family: "CAPSHIM_APPLE_FAMILY_MAX"
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
        ("CAPSHIM_LOG", "loud"),
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
    assert!(is_capshim_var(b"TART_METAL_MAX_THREADGROUP_MEMORY"));
    assert!(is_capshim_var(b"VEERTU_ANKA_GPU_WORKING_SET_MIN"));
    assert!(!is_capshim_var(b"TART_HOME"));
    assert!(!is_capshim_var(b"VEERTU_ANKA_LICENSE"));
    assert!(!is_capshim_var(b"LD_PRELOAD"));
    assert!(!is_capshim_var(b"CAPSHIMX"));
}

#[test]
fn every_published_shims_family_alone_activates_with_that_shims_defaults() {
    for name in [
        "LUME_METAL_APPLE_FAMILY_MAX",
        "TART_METAL_APPLE_FAMILY_MAX",
        "VEERTU_ANKA_GPU_APPLE_FAMILY_MAX",
    ] {
        let c = config(&[(name, "1009")]).unwrap();
        assert_eq!(
            c.profile,
            Profile::new(1009, 65536, None).unwrap(),
            "{name}"
        );
        assert_eq!(c.sources.apple_family_max, name);
        assert_eq!(c.sources.max_threadgroup_memory, None);
    }
    let c = config(&[
        ("VEERTU_ANKA_GPU_APPLE_FAMILY_MAX", "1008"),
        ("VEERTU_ANKA_GPU_THREADGROUP_MEMORY_MIN", "32768"),
        ("VEERTU_ANKA_GPU_WORKING_SET_MIN", "0x400000000"),
    ])
    .unwrap();
    assert_eq!(c.profile, Profile::new(1008, 32768, Some(1 << 34)).unwrap());
    assert_eq!(
        c.sources.name_of(crate::limits::Field::WorkingSet),
        Some("VEERTU_ANKA_GPU_WORKING_SET_MIN")
    );
    let c = config(&[
        ("TART_METAL_APPLE_FAMILY_MAX", "1009"),
        ("TART_METAL_MAX_THREADGROUP_MEMORY", "65536"),
        ("TART_METAL_RECOMMENDED_WORKING_SET_SIZE", "17179869184"),
    ])
    .unwrap();
    assert_eq!(c.profile.recommended_working_set_size, Some(1 << 34));
}

#[test]
fn a_zero_family_means_what_each_shim_documents() {
    // Lume and Tart document 0 as stock: stay stock quietly, whatever else is set (Tart's
    // guest agent also sets its threadgroup memory).
    for (vars, shim) in [
        (
            &[
                ("TART_METAL_APPLE_FAMILY_MAX", "0"),
                ("TART_METAL_MAX_THREADGROUP_MEMORY", "65536"),
            ][..],
            "Tart",
        ),
        (&[("LUME_METAL_APPLE_FAMILY_MAX", "0x0")][..], "Lume"),
    ] {
        let err = config(vars).unwrap_err();
        assert!(err.is_quiet(), "{err}");
        assert!(
            matches!(err, ConfigError::Disabled { shim: s, .. } if s == shim),
            "{err:?}"
        );
        assert!(err.to_string().contains("documents 0 as stock"), "{err}");
    }
    // Anka and capshim call 0 invalid: stock, and said.
    for name in [
        "VEERTU_ANKA_GPU_APPLE_FAMILY_MAX",
        "CAPSHIM_APPLE_FAMILY_MAX",
    ] {
        let err = config(&[(name, "0")]).unwrap_err();
        assert!(matches!(err, ConfigError::OutOfRange { var, .. } if var == name));
        assert!(!err.is_quiet());
    }
    // 0 is a value like any other: it disagrees with an unlocking one.
    let err = config(&[
        ("CAPSHIM_APPLE_FAMILY_MAX", "1009"),
        ("TART_METAL_APPLE_FAMILY_MAX", "0"),
    ])
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "CAPSHIM_APPLE_FAMILY_MAX=\"1009\" and TART_METAL_APPLE_FAMILY_MAX=\"0\" disagree; unset one of them"
    );
    assert!(config(&[]).unwrap_err().is_quiet());
}

#[test]
fn any_two_names_that_disagree_leave_it_stock_naming_both() {
    for (a, b) in [
        (
            "TART_METAL_APPLE_FAMILY_MAX",
            "VEERTU_ANKA_GPU_APPLE_FAMILY_MAX",
        ),
        ("LUME_METAL_APPLE_FAMILY_MAX", "TART_METAL_APPLE_FAMILY_MAX"),
    ] {
        let err = config(&[(b, "1007"), (a, "1009")]).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("{a}=\"1009\" and {b}=\"1007\" disagree; unset one of them")
        );
    }
    let err = config(&[
        ("TART_METAL_APPLE_FAMILY_MAX", "1009"),
        ("TART_METAL_MAX_THREADGROUP_MEMORY", "65536"),
        ("VEERTU_ANKA_GPU_THREADGROUP_MEMORY_MIN", "32768"),
    ])
    .unwrap_err();
    assert!(
        matches!(
            err,
            ConfigError::Conflict {
                first: "TART_METAL_MAX_THREADGROUP_MEMORY",
                second: "VEERTU_ANKA_GPU_THREADGROUP_MEMORY_MIN",
                ..
            }
        ),
        "{err:?}"
    );
    // Agreeing names, in any spelling, are one setting.
    let c = config(&[
        ("CAPSHIM_APPLE_FAMILY_MAX", "1007"),
        ("LUME_METAL_APPLE_FAMILY_MAX", "0x3ef"),
        ("TART_METAL_APPLE_FAMILY_MAX", "1007"),
        ("VEERTU_ANKA_GPU_APPLE_FAMILY_MAX", "0X3EF"),
    ])
    .unwrap();
    assert_eq!(c.sources.apple_family_max, "CAPSHIM_APPLE_FAMILY_MAX");
}

#[test]
fn a_leading_zero_is_refused_where_the_published_shim_reads_octal() {
    // strtoull(…, 0) reads "01751" as octal 1001; capshim would read 1751. Refuse, do not guess.
    let err = config(&[("TART_METAL_APPLE_FAMILY_MAX", "01751")]).unwrap_err();
    assert!(
        matches!(&err, ConfigError::Malformed { var: "TART_METAL_APPLE_FAMILY_MAX", why, .. } if why.contains("octal to Tart's shim")),
        "{err:?}"
    );
    assert!(config(&[("LUME_METAL_APPLE_FAMILY_MAX", "01009")]).is_err());
    // capshim's own names are decimal, as documented; a lone 0 and 0x are unambiguous.
    assert!(config(&[("CAPSHIM_APPLE_FAMILY_MAX", "01009")]).is_ok());
    assert!(config(&[("TART_METAL_APPLE_FAMILY_MAX", "0x03f1")]).is_ok());
}

#[test]
fn a_setting_without_a_family_names_the_same_shims_family_variable() {
    assert_eq!(
        config(&[("VEERTU_ANKA_GPU_THREADGROUP_MEMORY_MIN", "65536")])
            .unwrap_err()
            .to_string(),
        "VEERTU_ANKA_GPU_THREADGROUP_MEMORY_MIN is set but VEERTU_ANKA_GPU_APPLE_FAMILY_MAX is not; set it (e.g. 1009) to activate, or unset VEERTU_ANKA_GPU_THREADGROUP_MEMORY_MIN"
    );
}

#[test]
fn the_names_table_is_complete_and_sourced() {
    for var in [FAMILY_MAX, THREADGROUP_MEMORY, WORKING_SET] {
        let shims: Vec<&str> = var.names().map(|a| a.shim.name).collect();
        assert_eq!(shims, ["capshim", "Lume", "Tart", "Anka"]);
        for alias in var.names() {
            assert!(alias.name.starts_with(alias.shim.prefix), "{alias:?}");
            assert!(is_capshim_var(alias.name.as_bytes()));
        }
    }
    for shim in SHIMS {
        assert!(!shim.source.is_empty());
        assert_eq!(shim.default_threadgroup_memory, 65536, "{}", shim.name);
    }
}
