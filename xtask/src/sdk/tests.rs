//! The SDK excerpts as committed, and the checks made with them, each shown to pass and to
//! fail.
use super::*;
use capshim_macho::Import;
use capshim_macho::testdata::{LINKED_DYLIB, LINKED_EXECUTABLE};

const LIBSYSTEM: &str = "/usr/lib/libSystem.B.dylib";
const LIBOBJC: &str = "/usr/lib/libobjc.A.dylib";
const METAL: &str = "/System/Library/Frameworks/Metal.framework/Versions/A/Metal";

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn sdks() -> Vec<Sdk> {
    read_sdks(&root()).unwrap()
}

fn import(name: &str, library: Option<&str>) -> Import {
    Import {
        name: name.into(),
        library: library.map(str::to_string),
    }
}

/// An SDK made of one library exporting `symbols`.
fn one_library(version: (u32, u32), install: &str, symbols: &[&str]) -> Sdk {
    let library = Library {
        install_name: install.into(),
        symbols: symbols.iter().map(|s| s.to_string()).collect(),
        ..Library::default()
    };
    Sdk {
        version,
        libraries: [(install.to_owned(), library)].into(),
    }
}

#[test]
fn both_sdks_resolve_libsystem_through_the_libraries_it_reexports() {
    let sdks = sdks();
    assert_eq!(
        sdks.iter().map(|s| s.version).collect::<Vec<_>>(),
        [(11, 0), (11, 3)]
    );
    for sdk in &sdks {
        let system = sdk.exports(LIBSYSTEM).unwrap();
        // libsystem_kernel, libsystem_pthread, libdyld, libcompiler_rt, and a re-export of
        // libsystem_c.
        for symbol in [
            "_proc_pidinfo",
            "_pthread_atfork",
            "dyld_stub_binder",
            "___udivti3",
            "_memcpy",
            "_realpath$DARWIN_EXTSN",
        ] {
            assert!(system.contains(symbol), "{symbol} in {}", sdk.name());
        }
        // The x86_64 names of the same functions are not arm64-macos's.
        assert!(!system.contains("_stat$INODE64") && system.contains("_stat"));
        let objc = sdk.exports(LIBOBJC).unwrap();
        for symbol in ["_class_copyMethodList", "_method_getName", "_sel_isEqual"] {
            assert!(objc.contains(symbol), "{symbol} in {}", sdk.name());
        }
        assert!(
            sdk.exports(METAL)
                .unwrap()
                .contains("_MTLCreateSystemDefaultDevice")
        );
        assert_eq!(sdk.exports("/usr/lib/libiconv.2.dylib"), None);
    }
    // 11.0 lists libSystem's re-exported libraries; 11.3's excerpts are the libraries' own
    // stubs, which name libSystem ("System") as their umbrella.
    assert!(!sdks[0].libraries[LIBSYSTEM].reexported_libraries.is_empty());
    assert!(!sdks[1].libraries.contains_key(LIBSYSTEM));
}

#[test]
fn the_excerpts_name_their_source_commit_and_path() {
    for version in CHECKED {
        let dir = excerpt_dir(&root(), version);
        let stubs = read_stubs(&dir);
        assert!(stubs.len() >= 3, "{}", dir.display());
        for (path, parsed) in stubs {
            parsed.unwrap();
            let text = std::fs::read_to_string(&path).unwrap();
            let sdk = dir.file_name().unwrap().to_string_lossy().into_owned();
            let relative = path.strip_prefix(&dir).unwrap().display().to_string();
            let header: String = text
                .lines()
                .filter_map(|l| l.strip_prefix("# "))
                .collect::<Vec<_>>()
                .join(" ");
            assert!(header.contains("phracker/MacOSX-SDKs"), "{relative}");
            let commit = header.split("at commit ").nth(1).unwrap_or_default();
            let hex: String = commit.chars().take_while(char::is_ascii_hexdigit).collect();
            assert_eq!(hex.len(), 40, "{relative}: {header}");
            // The path in the SDK is the excerpt's own, possibly wrapped after a `/`.
            let unwrapped = header.replace("/ ", "/");
            assert!(
                unwrapped.contains(&format!("{sdk}/{relative}")),
                "{relative}: {header}"
            );
        }
    }
}

#[test]
fn the_crates_link_stubs_are_all_in_both_sdks() {
    let checks = check_stubs(&root(), &sdks());
    // crates/cli: libobjc and Metal; crates/shim: libobjc. Foundation's and CoreGraphics'
    // stubs list no symbol.
    assert_eq!(checks.len(), 3, "{checks:#?}");
    assert!(checks.iter().all(|c| c.ok), "{checks:#?}");
    assert!(
        checks
            .iter()
            .all(|c| c.detail.contains("macOS 11.0 and 11.3"))
    );
}

#[test]
fn a_link_stub_symbol_an_sdk_lacks_fails() {
    let sdks = sdks();
    let stub = |install: &str, symbols: &[&str]| Library {
        install_name: install.into(),
        symbols: symbols.iter().map(|s| s.to_string()).collect(),
        ..Library::default()
    };
    let check = check_stub("x.tbd", &stub(LIBOBJC, &["_objc_lookUpClass"]), &sdks);
    assert!(check.ok, "{check:?}");
    let check = check_stub("x.tbd", &stub(LIBOBJC, &["_objc_made_up"]), &sdks);
    assert!(!check.ok);
    assert!(
        check.detail.contains("macOS 11.0 SDK: _objc_made_up"),
        "{check:?}"
    );
    assert!(
        check.detail.contains("macOS 11.3 SDK: _objc_made_up"),
        "{check:?}"
    );
    let foundation = "/System/Library/Frameworks/Foundation.framework/Versions/C/Foundation";
    let check = check_stub("x.tbd", &stub(foundation, &["_NSLog"]), &sdks);
    assert!(
        !check.ok && check.detail.contains("no stub for"),
        "{check:?}"
    );
}

#[test]
fn the_imports_of_the_linked_fixtures_are_all_in_both_sdks() {
    let sdks = sdks();
    for linked in [LINKED_DYLIB, LINKED_EXECUTABLE] {
        let facts = Facts::read(linked).unwrap();
        assert!(facts.imports.len() >= 3);
        let check = check_imports(&facts, &sdks);
        assert!(check.ok, "{check:?}");
        assert!(
            check.detail.contains("from /usr/lib/libSystem.B.dylib"),
            "{check:?}"
        );
    }
}

#[test]
fn imports_missing_from_an_sdk_or_unbound_fail() {
    let sdks = sdks();
    let mut facts = Facts::read(LINKED_DYLIB).unwrap();
    assert!(check_imports(&facts, &sdks).ok);

    // An x86_64-only name.
    facts.imports.push(import("_stat$INODE64", Some(LIBSYSTEM)));
    let check = check_imports(&facts, &sdks);
    assert!(!check.ok);
    for sdk in ["11.0", "11.3"] {
        let expected = format!("by {LIBSYSTEM} in the macOS {sdk} SDK: _stat$INODE64");
        assert!(check.detail.contains(&expected), "{check:?}");
    }
    facts.imports.pop();

    facts.imports.push(import("_anything", None));
    let check = check_imports(&facts, &sdks);
    assert!(
        !check.ok && check.detail.contains("flat namespace"),
        "{check:?}"
    );
    facts.imports.pop();

    facts
        .imports
        .push(import("_iconv", Some("/usr/lib/libiconv.2.dylib")));
    let check = check_imports(&facts, &sdks);
    assert!(
        !check.ok && check.detail.contains("no stub for"),
        "{check:?}"
    );
    facts.imports.pop();

    assert!(!check_imports(&facts, &[]).ok);
}

/// A symbol the newer SDK has and the minimum's lacks (an API newer than macOS 11.0) fails,
/// naming the SDK that lacks it.
#[test]
fn a_symbol_newer_than_the_minimum_macos_fails() {
    let older = one_library((11, 0), LIBOBJC, &["_a"]);
    let newer = one_library((11, 3), LIBOBJC, &["_a", "_b"]);
    let mut facts = Facts::read(LINKED_DYLIB).unwrap();
    facts.imports = vec![import("_a", Some(LIBOBJC)), import("_b", Some(LIBOBJC))];
    let check = check_imports(&facts, &[older.clone(), newer.clone()]);
    assert!(!check.ok);
    assert_eq!(
        check.detail,
        format!("not exported for arm64-macos by {LIBOBJC} in the macOS 11.0 SDK: _b")
    );
    assert!(check_imports(&facts, &[newer]).ok);
}

#[test]
fn umbrella_names_are_the_short_library_names() {
    assert_eq!(umbrella_name(LIBSYSTEM), "System");
    assert_eq!(umbrella_name(LIBOBJC), "objc");
    assert_eq!(umbrella_name(METAL), "Metal");
}

/// The hand-written libobjc link stubs name, in their header, the SDK versions their symbols
/// were verified against: those of [`CHECKED`].
#[test]
fn the_libobjc_link_stubs_name_the_sdks_they_were_verified_against() {
    for stub in [
        "crates/shim/stubs/libobjc.tbd",
        "crates/cli/stubs/libobjc.tbd",
    ] {
        let text = std::fs::read_to_string(root().join(stub)).unwrap();
        let header: String = text
            .lines()
            .filter_map(|l| l.strip_prefix("# "))
            .collect::<Vec<_>>()
            .join(" ");
        let named = header
            .split("SDK versions verified against:")
            .nth(1)
            .unwrap_or_else(|| panic!("{stub}: no `SDK versions verified against:`"));
        for (major, minor) in CHECKED {
            assert!(named.contains(&format!("macOS {major}.{minor}")), "{stub}");
            assert!(
                named.contains(&format!("MacOSX{major}.{minor}.sdk")),
                "{stub}"
            );
        }
    }
}
