//! Tests of [`ProfileArgs::resolve_with`] with injected machine facts.

use super::*;
use crate::platform::facts::Fake;

fn on_linux(args: ProfileArgs) -> Result<Resolved, ProfileArgsError> {
    args.resolve_with(&Fake::linux())
}

fn in_guest(brand: &str, args: ProfileArgs) -> Result<Resolved, ProfileArgsError> {
    args.resolve_with(&Fake::guest(brand, 16 << 30))
}

fn named(name: &str) -> ProfileArgs {
    ProfileArgs {
        profile: Some(name.into()),
        ..Default::default()
    }
}

#[test]
fn where_the_chip_is_unknown_the_default_is_apple9_64k_and_says_why() {
    let r = on_linux(ProfileArgs::default()).unwrap();
    assert_eq!(r.name, "apple9-64k");
    assert_eq!(r.profile, Some(named::apple9_64k()));
    assert_eq!(r.chip, None);
    assert_eq!(r.notes.len(), 1, "{:?}", r.notes);
    assert!(
        r.notes[0].contains("because the host chip is not known: this is linux, not macOS"),
        "{}",
        r.notes[0]
    );
    assert!(r.notes[0].contains("--cpu-brand"), "{}", r.notes[0]);
    // A Mac whose brand no row matches: the same default, saying which brand.
    let r = in_guest("Apple M9 Max (Virtual)", ProfileArgs::default()).unwrap();
    assert_eq!(r.name, "apple9-64k");
    assert!(
        r.notes[0].contains("\"Apple M9 Max (Virtual)\""),
        "{}",
        r.notes[0]
    );
    // Nothing to say when the options replace every value the default would give.
    let r = on_linux(ProfileArgs {
        family_max: Some(1007),
        threadgroup_memory: Some(32768),
        ..Default::default()
    })
    .unwrap();
    assert!(r.notes.is_empty(), "{:?}", r.notes);
}

#[test]
fn where_the_chip_is_known_the_default_is_native() {
    let r = in_guest("Apple M2 Max (Virtual)", ProfileArgs::default()).unwrap();
    assert_eq!(r.name, "native");
    assert_eq!(r.profile, Some(Profile::new(1008, 32768, None).unwrap()));
    assert!(r.notes.is_empty() && r.warnings.is_empty());
    assert!(
        r.provenance.contains("sysctl machdep.cpu.brand_string"),
        "{}",
        r.provenance
    );
    let r = on_linux(ProfileArgs {
        cpu_brand: Some("Apple M1 Ultra (Virtual)".into()),
        ..Default::default()
    })
    .unwrap();
    assert_eq!(r.name, "native");
    assert_eq!(r.profile, Some(Profile::new(1007, 32768, None).unwrap()));
    assert_eq!(r.chip.unwrap().chip.name, "M1");
    let r = in_guest("Apple M5 (Virtual)\n", named("native")).unwrap();
    assert_eq!(r.profile.unwrap().apple_family_max, 1010);
}

#[test]
fn host_is_read_as_native_with_a_note() {
    let r = in_guest("Apple M3 Pro (Virtual)", named("host")).unwrap();
    assert_eq!(r.name, "native");
    assert_eq!(r.notes, [named::HOST_ALIAS_NOTE]);
    let err = on_linux(named("host")).unwrap_err();
    assert!(
        err.to_string().starts_with(
            "cannot use --profile host (now called native): the host chip is not known"
        ),
        "{err}"
    );
}

#[test]
fn native_where_the_chip_is_unknown_says_how_to_name_it() {
    let err = on_linux(named("native")).unwrap_err().to_string();
    assert!(
        err.contains("the host chip is not known: this is linux"),
        "{err}"
    );
    assert!(
        err.contains("--cpu-brand \"Apple M1 Ultra (Virtual)\""),
        "{err}"
    );
    let err = on_linux(ProfileArgs {
        cpu_brand: Some("Intel Xeon".into()),
        ..Default::default()
    })
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("\"Intel Xeon\" is not a known Apple Silicon chip"),
        "{err}"
    );
}

#[test]
fn cpu_brand_is_accepted_with_every_profile() {
    for name in ["apple9-64k", "stock", "native"] {
        let r = on_linux(ProfileArgs {
            cpu_brand: Some("Apple M1 Ultra (Virtual)".into()),
            ..named(name)
        })
        .unwrap();
        assert_eq!(r.chip.as_ref().unwrap().chip.name, "M1", "{name}");
        assert!(r.notes.is_empty(), "{name}: {:?}", r.notes);
    }
    let r = on_linux(ProfileArgs {
        cpu_brand: Some("Apple M1 Ultra (Virtual)".into()),
        ..named("apple9-64k")
    })
    .unwrap();
    assert_eq!(r.profile, Some(named::apple9_64k()));
}

#[test]
fn stock_has_no_profile_and_refuses_overrides() {
    assert_eq!(on_linux(named("stock")).unwrap().profile, None);
    let err = on_linux(ProfileArgs {
        threadgroup_memory: Some(1),
        ..named("stock")
    })
    .unwrap_err();
    assert!(err.to_string().contains("--threadgroup-memory"), "{err}");
}

#[test]
fn overrides_make_a_custom_profile_checked_by_the_shim_rules() {
    let r = on_linux(ProfileArgs {
        family_max: Some(1007),
        working_set: Some(1 << 34),
        ..Default::default()
    })
    .unwrap();
    assert_eq!(r.name, "custom");
    assert_eq!(
        r.profile,
        Some(Profile::new(1007, 65536, Some(1 << 34)).unwrap())
    );
    assert!(
        r.provenance.contains("--family-max 1007"),
        "{}",
        r.provenance
    );

    let err = on_linux(ProfileArgs {
        family_max: Some(5001),
        ..Default::default()
    })
    .unwrap_err();
    assert!(err.to_string().contains("1001"), "{err}");
    assert!(matches!(
        on_linux(named("apple10")),
        Err(ProfileArgsError::UnknownName(_))
    ));
}

#[test]
fn values_beyond_hardware_are_refused_unless_allowed() {
    let args = ProfileArgs {
        threadgroup_memory: Some(u64::MAX),
        ..Default::default()
    };
    let err = on_linux(args.clone()).unwrap_err().to_string();
    assert!(
        err.starts_with(
            "--threadgroup-memory 18446744073709551615: 18446744073709551615 bytes is above 65536"
        ),
        "{err}"
    );
    assert!(
        err.ends_with("pass --allow-beyond-hardware to use it anyway"),
        "{err}"
    );
    let r = on_linux(ProfileArgs {
        allow_beyond_hardware: true,
        ..args
    })
    .unwrap();
    assert_eq!(r.profile.unwrap().max_threadgroup_memory, u64::MAX);
    assert!(
        r.warnings[0].ends_with("used anyway (--allow-beyond-hardware)"),
        "{:?}",
        r.warnings
    );

    let err = on_linux(ProfileArgs {
        family_max: Some(1011),
        threadgroup_memory: Some(65537),
        ..Default::default()
    })
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("--family-max 1011: 1011 is above MTLGPUFamilyApple10 (1010)"),
        "{err}"
    );
    assert!(err.contains("; --threadgroup-memory 65537:"), "{err}");
    assert!(err.ends_with("to use them anyway"), "{err}");
    // The edge of what hardware has is accepted.
    assert!(
        on_linux(ProfileArgs {
            family_max: Some(1010),
            threadgroup_memory: Some(65536),
            ..Default::default()
        })
        .unwrap()
        .warnings
        .is_empty()
    );
}

#[test]
fn a_working_set_is_checked_against_the_guests_memory_where_known() {
    let args = ProfileArgs {
        working_set: Some(17 << 30),
        ..named("apple9-64k")
    };
    let err = in_guest("Apple M1 (Virtual)", args.clone())
        .unwrap_err()
        .to_string();
    assert!(err.starts_with("--working-set 18253611008: 18253611008 bytes (17.00 GiB) is above this machine's physical memory, 17179869184 bytes (16.00 GiB)"), "{err}");
    // Where the memory is not known (not macOS) it cannot be judged.
    assert!(on_linux(args).unwrap().warnings.is_empty());
}

#[test]
fn values_that_change_nothing_are_warned_about() {
    let r = on_linux(ProfileArgs {
        threadgroup_memory: Some(0),
        working_set: Some(64),
        cpu_brand: Some("Apple M1".into()),
        ..Default::default()
    })
    .unwrap();
    assert_eq!(r.warnings.len(), 2, "{:?}", r.warnings);
    assert!(
        r.warnings[0].starts_with("--threadgroup-memory 0: 0 bytes is below the 32768 bytes"),
        "{}",
        r.warnings[0]
    );
    assert!(
        r.warnings[1].starts_with("--working-set 64: 64 bytes is below 1 GiB"),
        "{}",
        r.warnings[1]
    );
}

#[test]
fn a_profile_files_value_beyond_hardware_names_the_file_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("wide.toml");
    std::fs::write(&path, "apple_family_max = 1999\n").unwrap();
    let err = on_linux(ProfileArgs {
        profile_file: Some(path.clone()),
        ..Default::default()
    })
    .unwrap_err()
    .to_string();
    assert!(
        err.starts_with(&format!(
            "apple_family_max in {}: 1999 is above",
            path.display()
        )),
        "{err}"
    );
}

#[test]
fn a_profile_file_that_cannot_be_read_gets_its_advice_once() {
    let dir = tempfile::tempdir().unwrap();
    let error = |path: &std::path::Path| {
        on_linux(ProfileArgs {
            profile_file: Some(path.to_path_buf()),
            ..Default::default()
        })
        .unwrap_err()
        .to_string()
    };
    let huge = dir.path().join("huge.toml");
    std::fs::write(&huge, vec![b'#'; (PROFILE_FILE_MAX + 1) as usize]).unwrap();
    let missing = dir.path().join("missing.toml");
    for path in [&huge, &missing] {
        let err = error(path);
        assert_eq!(err.matches("check the path").count(), 1, "{err}");
        assert!(
            err.ends_with("check the path given to --profile-file"),
            "{err}"
        );
    }
    // A device says what to do instead, and only that.
    let err = error(std::path::Path::new("/dev/null"));
    assert!(!err.contains("check the path"), "{err}");
    assert!(
        err.ends_with("save the data to a file and give that"),
        "{err}"
    );
}
