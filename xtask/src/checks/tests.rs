//! The rules of `checks`, each shown to pass and to fail.
use super::*;
use capshim_macho::{CodeDirectory, SectionFact, Tuple};
use object::Endianness;

fn good_facts() -> Facts {
    Facts {
        cpu_type: macho::CPU_TYPE_ARM64,
        cpu_subtype: macho::CPU_SUBTYPE_ARM64_ALL,
        file_type: macho::MH_DYLIB,
        install_name: Some(SHIM_INSTALL_NAME.into()),
        dependencies: vec![
            Dependency {
                command: "LC_LOAD_DYLIB",
                path: "/usr/lib/libSystem.B.dylib".into(),
            },
            Dependency {
                command: "LC_LOAD_DYLIB",
                path: "/usr/lib/libobjc.A.dylib".into(),
            },
        ],
        rpaths: vec![],
        sections: vec![SectionFact {
            segment: "__DATA_CONST".into(),
            name: "__mod_init_func".into(),
            size: 8,
            section_type: macho::S_MOD_INIT_FUNC_POINTERS,
        }],
        has_routines: false,
        signature: Ok(CodeDirectory {
            ad_hoc: true,
            linker_signed: true,
            identifier: SHIM_IDENTIFIER.into(),
            hash: "SHA-256",
            pages: 3,
            pages_verified: Ok(()),
        }),
        exports: vec!["___dso_handle".into(), "__mh_dylib_header".into()],
        build_version: Some((macho::PLATFORM_MACOS, 0x000b_0000, 0x000b_0300)),
        imports: vec![],
    }
}

fn failing(facts: &Facts) -> Vec<&'static str> {
    check_shim(facts)
        .into_iter()
        .filter(|c| !c.ok)
        .map(|c| c.name)
        .collect()
}

#[test]
fn good_facts_pass_every_check() {
    let checks = check_shim(&good_facts());
    assert!(checks.iter().all(|c| c.ok), "{checks:#?}");
    assert_eq!(checks.len(), 8);
}

#[test]
fn each_rule_can_fail() {
    let mut f = good_facts();
    f.cpu_type = macho::CPU_TYPE_X86_64;
    assert_eq!(failing(&f), ["format"]);

    let mut f = good_facts();
    f.cpu_subtype = macho::CPU_SUBTYPE_ARM64E;
    assert_eq!(failing(&f), ["format"]);

    let mut f = good_facts();
    f.file_type = macho::MH_BUNDLE;
    assert_eq!(failing(&f), ["format"]);

    let mut f = good_facts();
    f.build_version = Some((macho::PLATFORM_MACOS, 0x000f_0000, 0x000b_0300));
    assert_eq!(failing(&f), ["platform"]);
    // zig's own SDK version, 27.0, is not a real SDK.
    f.build_version = Some((macho::PLATFORM_MACOS, 0x000b_0000, 0x001b_0000));
    assert_eq!(failing(&f), ["platform"]);
    f.build_version = Some((macho::PLATFORM_IOS, 0x000b_0000, 0x000b_0300));
    assert_eq!(failing(&f), ["platform"]);
    f.build_version = None;
    assert_eq!(failing(&f), ["platform"]);

    let mut f = good_facts();
    f.install_name = Some("/work/target/release/deps/libcapshim.dylib".into());
    assert_eq!(failing(&f), ["install name"]);
    f.install_name = None;
    assert_eq!(failing(&f), ["install name"]);

    let mut f = good_facts();
    f.dependencies.push(Dependency {
        command: "LC_LOAD_DYLIB",
        path: "/opt/homebrew/lib/libiconv.2.dylib".into(),
    });
    assert_eq!(failing(&f), ["dependencies"]);
    f.dependencies[2].path = "@rpath/libfoo.dylib".into();
    assert_eq!(failing(&f), ["dependencies"]);
    f.dependencies[2].path = "/usr/lib/libobjc.A.dylib".into();
    assert_eq!(failing(&f), ["dependencies"]);
    f.dependencies.pop();
    assert!(failing(&f).is_empty());
    f.dependencies.clear();
    assert_eq!(failing(&f), ["dependencies"]);

    let mut f = good_facts();
    f.sections[0].size = 0;
    assert_eq!(failing(&f), ["initializer"]);
    f.sections.clear();
    assert_eq!(failing(&f), ["initializer"]);

    let mut f = good_facts();
    if let Ok(sig) = &mut f.signature {
        sig.identifier = "libcapshim-0123456789abcdef".into();
    }
    assert_eq!(failing(&f), ["signature"]);

    // System libraries the artifact should not load (std's libc crate asks for these).
    let mut f = good_facts();
    f.dependencies.push(Dependency {
        command: "LC_LOAD_DYLIB",
        path: "/usr/lib/libiconv.2.dylib".into(),
    });
    assert_eq!(failing(&f), ["dependencies"]);
    let mut f = good_facts();
    f.dependencies.pop();
    assert_eq!(failing(&f), ["dependencies"]);

    let mut f = good_facts();
    f.signature = Err("no LC_CODE_SIGNATURE load command".into());
    assert_eq!(failing(&f), ["signature"]);
    let mut f = good_facts();
    if let Ok(sig) = &mut f.signature {
        sig.pages_verified = Err("page 1 does not match".into());
    }
    assert_eq!(failing(&f), ["signature"]);

    let mut f = good_facts();
    f.exports
        .push("__RNvNtCsg55jX0GwzBC_3std9panicking11EMPTY_PANIC".into());
    assert_eq!(failing(&f), ["exports"]);
    let mut f = good_facts();
    f.exports.push("_rust_eh_personality".into());
    assert_eq!(failing(&f), ["exports"]);
    let mut f = good_facts();
    f.exports
        .push("__ZN4core3fmt5write17h0123456789abcdefE".into());
    assert_eq!(failing(&f), ["exports"]);

    let mut f = good_facts();
    f.sections.push(SectionFact {
        segment: "__DATA".into(),
        name: "__interpose".into(),
        size: 16,
        section_type: macho::S_REGULAR,
    });
    assert_eq!(failing(&f), ["no interpose"]);
}

/// The executable's rules, and its identifier: `capshim`, never cargo's `capshim-<hash>`.
#[test]
fn executable_rules_and_its_identifier() {
    let mut f = good_facts();
    f.file_type = macho::MH_EXECUTE;
    f.install_name = None;
    f.dependencies = CLI_DEPENDENCIES
        .iter()
        .map(|path| Dependency {
            command: "LC_LOAD_DYLIB",
            path: (*path).into(),
        })
        .collect();
    let identify = |f: &mut Facts, name: &str| {
        if let Ok(sig) = &mut f.signature {
            sig.identifier = name.into();
        }
    };
    identify(&mut f, CLI_IDENTIFIER);
    let failing = |f: &Facts| -> Vec<&'static str> {
        check_executable(f)
            .into_iter()
            .filter(|c| !c.ok)
            .map(|c| c.name)
            .collect()
    };
    assert!(failing(&f).is_empty(), "{:#?}", check_executable(&f));
    for wrong in [
        "capshim-0123456789abcdef",
        "capshim-cli",
        "libcapshim.dylib",
        "",
    ] {
        identify(&mut f, wrong);
        assert_eq!(failing(&f), ["signature"], "{wrong:?}");
    }
}

#[test]
fn no_exports_is_fine_and_init_offsets_count() {
    let mut f = good_facts();
    f.exports.clear();
    f.sections[0] = SectionFact {
        segment: "__TEXT".into(),
        name: "__init_offsets".into(),
        size: 4,
        section_type: macho::S_INIT_FUNC_OFFSETS,
    };
    assert!(failing(&f).is_empty());
}

#[test]
fn mangling_detection() {
    assert!(is_mangled("__RNvCs1234_7capshim4init"));
    assert!(is_mangled(
        "__ZN7capshim4init10initialize17h48d04b73f4c308e2E"
    ));
    assert!(!is_mangled("___dso_handle"));
    assert!(!is_mangled("__mh_dylib_header"));
    assert!(!is_mangled("_rust_eh_personality"));
    assert!(!is_mangled("_Rfoo"));
}

#[test]
fn object_files_fail_the_shim_rules() {
    use object::write::Object;
    use object::{Architecture, BinaryFormat};
    let obj = Object::new(
        BinaryFormat::MachO,
        Architecture::X86_64,
        Endianness::Little,
    )
    .write()
    .unwrap();
    let facts = Facts::read(&obj).unwrap();
    let failed = failing(&facts);
    for rule in [
        "format",
        "install name",
        "dependencies",
        "initializer",
        "signature",
    ] {
        assert!(failed.contains(&rule), "{rule} should fail: {failed:?}");
    }
}

fn guard_facts() -> Facts {
    let mut facts = good_facts();
    facts.install_name = Some(GUARD_INSTALL_NAME.into());
    if let Ok(sig) = &mut facts.signature {
        sig.identifier = GUARD_IDENTIFIER.into();
    }
    facts
}

fn tuples(names: &[&str]) -> Result<Option<Vec<Tuple>>, String> {
    Ok(Some(
        names
            .iter()
            .map(|n| Tuple {
                replacee: Some((*n).to_owned()),
                replacement_bound: false,
            })
            .collect(),
    ))
}

fn guard_failing(facts: &Facts, t: &Result<Option<Vec<Tuple>>, String>) -> Vec<&'static str> {
    check_guard(facts, t)
        .into_iter()
        .filter(|c| !c.ok)
        .map(|c| c.name)
        .collect()
}

#[test]
fn the_guard_interposes_exactly_the_three_exec_functions() {
    let good = tuples(&["_posix_spawnp", "_execve", "_posix_spawn"]);
    let checks = check_guard(&guard_facts(), &good);
    assert!(checks.iter().all(|c| c.ok), "{checks:#?}");
    assert_eq!(checks.len(), 8);

    for bad in [
        tuples(&["_execve", "_posix_spawn"]),
        tuples(&["_execve", "_posix_spawn", "_posix_spawnp", "_open"]),
        tuples(&["_execve", "_execve", "_posix_spawnp"]),
        Ok(None),
        Err("chained fixups: the binds are not read".into()),
    ] {
        assert_eq!(
            guard_failing(&guard_facts(), &bad),
            ["interpose"],
            "{bad:?}"
        );
    }
    let mut unbound = tuples(&["_execve", "_posix_spawn", "_posix_spawnp"]);
    if let Ok(Some(t)) = &mut unbound {
        t.push(Tuple {
            replacee: None,
            replacement_bound: false,
        });
    }
    assert_eq!(guard_failing(&guard_facts(), &unbound), ["interpose"]);
    let mut foreign = tuples(&["_execve", "_posix_spawn", "_posix_spawnp"]);
    if let Ok(Some(t)) = &mut foreign {
        t[0].replacement_bound = true;
    }
    assert_eq!(guard_failing(&guard_facts(), &foreign), ["interpose"]);

    // The guard's own install name and identifier; the plain library's fail.
    assert_eq!(
        guard_failing(&good_facts(), &good),
        ["install name", "signature"]
    );
    // And the plain library's rules refuse the guard's interpose section.
    let mut plain = good_facts();
    plain.sections.push(SectionFact {
        segment: "__DATA".into(),
        name: "__interpose".into(),
        size: 48,
        section_type: 0,
    });
    assert_eq!(failing(&plain), ["no interpose"]);
}

#[test]
fn the_guard_test_marker_must_not_reach_the_macos_build() {
    assert!(test_marker_check(b"some code and data").ok);
    let mut data = b"prefix ".to_vec();
    data.extend(GUARD_TEST_MARKER);
    assert!(!test_marker_check(&data).ok);
    // The same marker the guard's Linux build reads.
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let slice = std::fs::read_to_string(root.join("crates/shim/src/guard/slice.rs")).unwrap();
    let literal = format!("b\"{}\"", std::str::from_utf8(GUARD_TEST_MARKER).unwrap());
    assert!(slice.contains(&literal), "{literal} not in slice.rs");
}
