//! What `cargo xtask dist` promises about each Mach-O artifact, as rules over the facts
//! [`capshim_macho::Facts::read`] gathers: [`check_shim`] and [`check_executable`] turn facts
//! into pass/fail [`Check`]s, so every rule can be tested with hand-made facts as well as with
//! a real build.

use std::fmt;

use capshim_macho::{Dependency, Facts};
use object::macho;

/// The install name libcapshim must carry.
pub const SHIM_INSTALL_NAME: &str = "@rpath/libcapshim.dylib";

/// The only symbols libcapshim may export, and why each is there. rustc asks for no exports
/// at all (the library works through its initializer); zig's linker adds these two
/// linker-synthesized symbols to every dylib it writes.
pub const SHIM_EXPORT_ALLOW_LIST: &[(&str, &str)] = &[
    ("__mh_dylib_header", "synthesized by zig's linker"),
    ("___dso_handle", "synthesized by zig's linker"),
];

/// The oldest macOS the artifacts must load on (`MACOSX_DEPLOYMENT_TARGET` of the build, and
/// rustc's own minimum for aarch64-apple-darwin), as `(major, minor)`.
pub const MINIMUM_MACOS: (u32, u32) = (11, 0);

/// Where the libraries a macOS artifact loads may live: the system's own.
pub const SYSTEM_LIBRARY_PREFIXES: &[&str] = &["/usr/lib/", "/System/Library/"];

/// One rule and its outcome.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Check {
    /// Short name, e.g. `install name`.
    pub name: &'static str,
    /// Whether the rule holds.
    pub ok: bool,
    /// What was found (and, on failure, what was expected).
    pub detail: String,
}

impl Check {
    fn new(name: &'static str, ok: bool, detail: impl Into<String>) -> Self {
        Check {
            name,
            ok,
            detail: detail.into(),
        }
    }
}

impl fmt::Display for Check {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mark = if self.ok { "ok  " } else { "FAIL" };
        write!(f, "{mark}  {:<13} {}", self.name, self.detail)
    }
}

/// The rules for libcapshim.dylib.
pub fn check_shim(facts: &Facts) -> Vec<Check> {
    vec![
        format_check(facts, macho::MH_DYLIB),
        platform_check(facts),
        install_name_check(facts),
        dependencies_check(facts),
        initializer_check(facts),
        signature_check(facts),
        exports_check(facts),
        interpose_check(facts),
    ]
}

/// The rules for the `capshim` executable.
pub fn check_executable(facts: &Facts) -> Vec<Check> {
    vec![
        format_check(facts, macho::MH_EXECUTE),
        platform_check(facts),
        dependencies_check(facts),
        signature_check(facts),
        interpose_check(facts),
    ]
}

fn format_check(facts: &Facts, file_type: u32) -> Check {
    let arch = match (facts.cpu_type, facts.cpu_subtype) {
        (macho::CPU_TYPE_ARM64, macho::CPU_SUBTYPE_ARM64E) => "arm64e".to_owned(),
        (macho::CPU_TYPE_ARM64, _) => "arm64".to_owned(),
        (macho::CPU_TYPE_X86_64, _) => "x86_64".to_owned(),
        (other, _) => format!("cputype {other:#x}"),
    };
    let ok = facts.cpu_type == macho::CPU_TYPE_ARM64
        && facts.cpu_subtype == macho::CPU_SUBTYPE_ARM64_ALL
        && facts.file_type == file_type;
    let mut detail = format!("Mach-O 64-bit {arch} {}", file_type_name(facts.file_type));
    if !ok {
        detail += &format!("; expected arm64 {}", file_type_name(file_type));
    }
    Check::new("format", ok, detail)
}

fn version(encoded: u32) -> String {
    format!("{}.{}", encoded >> 16, (encoded >> 8) & 0xff)
}

fn platform_check(facts: &Facts) -> Check {
    let (major, minor) = MINIMUM_MACOS;
    let wanted = format!("macOS, minimum {major}.{minor} or older");
    match facts.build_version {
        None => Check::new(
            "platform",
            false,
            format!("no LC_BUILD_VERSION; expected {wanted}"),
        ),
        Some((platform, minos, sdk)) => {
            let ok = platform == macho::PLATFORM_MACOS && minos <= (major << 16 | minor << 8);
            let name = if platform == macho::PLATFORM_MACOS {
                "macOS".to_owned()
            } else {
                format!("platform {platform}")
            };
            let mut detail = format!("{name}, minimum {} (SDK {})", version(minos), version(sdk));
            if !ok {
                detail += &format!("; expected {wanted}");
            }
            Check::new("platform", ok, detail)
        }
    }
}

fn install_name_check(facts: &Facts) -> Check {
    match &facts.install_name {
        Some(name) if name == SHIM_INSTALL_NAME => Check::new("install name", true, name.clone()),
        Some(name) => Check::new(
            "install name",
            false,
            format!("{name}; expected {SHIM_INSTALL_NAME} (LC_ID_DYLIB)"),
        ),
        None => Check::new(
            "install name",
            false,
            format!("no LC_ID_DYLIB; expected {SHIM_INSTALL_NAME}"),
        ),
    }
}

fn dependencies_check(facts: &Facts) -> Check {
    if facts.dependencies.is_empty() {
        return Check::new(
            "dependencies",
            false,
            "none: expected at least /usr/lib/libSystem.B.dylib",
        );
    }
    let mut seen = std::collections::HashSet::new();
    let duplicates: Vec<&str> = facts
        .dependencies
        .iter()
        .filter(|d| !seen.insert(d.path.as_str()))
        .map(|d| d.path.as_str())
        .collect();
    if !duplicates.is_empty() {
        return Check::new(
            "dependencies",
            false,
            format!(
                "loaded twice: {} (recent dyld refuses duplicate load commands)",
                duplicates.join(", ")
            ),
        );
    }
    let outside: Vec<&Dependency> = facts
        .dependencies
        .iter()
        .filter(|d| {
            !SYSTEM_LIBRARY_PREFIXES
                .iter()
                .any(|p| d.path.starts_with(p))
        })
        .collect();
    let list = |deps: &mut dyn Iterator<Item = &Dependency>| {
        deps.map(|d| match d.command {
            "LC_LOAD_DYLIB" => d.path.clone(),
            other => format!("{} ({other})", d.path),
        })
        .collect::<Vec<_>>()
        .join(", ")
    };
    if outside.is_empty() {
        Check::new("dependencies", true, list(&mut facts.dependencies.iter()))
    } else {
        Check::new(
            "dependencies",
            false,
            format!(
                "not system libraries: {}; only {} may be loaded",
                list(&mut outside.into_iter()),
                SYSTEM_LIBRARY_PREFIXES.join(" or ")
            ),
        )
    }
}

fn initializer_check(facts: &Facts) -> Check {
    let found: Vec<String> = facts
        .sections
        .iter()
        .filter(|s| s.size > 0)
        .filter_map(|s| match s.section_type {
            macho::S_MOD_INIT_FUNC_POINTERS => Some(format!(
                "{},{}: {} pointer(s)",
                s.segment,
                s.name,
                s.size / 8
            )),
            macho::S_INIT_FUNC_OFFSETS => Some(format!(
                "{},{}: {} offset(s)",
                s.segment,
                s.name,
                s.size / 4
            )),
            _ => None,
        })
        .chain(facts.has_routines.then(|| "LC_ROUTINES_64".to_owned()))
        .collect();
    if found.is_empty() {
        Check::new(
            "initializer",
            false,
            "none: no non-empty __mod_init_func/__init_offsets section and no LC_ROUTINES_64",
        )
    } else {
        Check::new("initializer", true, found.join(", "))
    }
}

fn signature_check(facts: &Facts) -> Check {
    match &facts.signature {
        Err(why) => Check::new("signature", false, why.clone()),
        Ok(sig) => {
            let kind = match (sig.ad_hoc, sig.linker_signed) {
                (true, true) => "ad hoc (linker-signed)",
                (true, false) => "ad hoc",
                (false, _) => "with a certificate",
            };
            let pages = match &sig.pages_verified {
                Ok(()) => format!("{} {} page hashes match", sig.pages, sig.hash),
                Err(why) => why.clone(),
            };
            Check::new(
                "signature",
                sig.pages_verified.is_ok(),
                format!("{kind}, identifier {:?}, {pages}", sig.identifier),
            )
        }
    }
}

fn exports_check(facts: &Facts) -> Check {
    let allowed = |name: &str| SHIM_EXPORT_ALLOW_LIST.iter().any(|(n, _)| *n == name);
    let mangled: Vec<&str> = facts
        .exports
        .iter()
        .map(String::as_str)
        .filter(|n| is_mangled(n))
        .collect();
    let unexpected: Vec<&str> = facts
        .exports
        .iter()
        .map(String::as_str)
        .filter(|n| !allowed(n) && !is_mangled(n))
        .collect();
    let all = if facts.exports.is_empty() {
        "none".to_owned()
    } else {
        format!("{}: {}", facts.exports.len(), facts.exports.join(", "))
    };
    if mangled.is_empty() && unexpected.is_empty() {
        return Check::new("exports", true, format!("{all} (allow-listed)"));
    }
    let mut why = Vec::new();
    if !mangled.is_empty() {
        why.push(format!(
            "{} Rust/C++-mangled (the export list was not applied at link time)",
            mangled.len()
        ));
    }
    if !unexpected.is_empty() {
        why.push(format!("not allow-listed: {}", unexpected.join(", ")));
    }
    let shown: Vec<&str> = facts.exports.iter().take(8).map(String::as_str).collect();
    Check::new(
        "exports",
        false,
        format!(
            "{} exported ({}{}); {}",
            facts.exports.len(),
            shown.join(", "),
            if facts.exports.len() > shown.len() {
                ", ..."
            } else {
                ""
            },
            why.join("; ")
        ),
    )
}

fn interpose_check(facts: &Facts) -> Check {
    match facts.sections.iter().find(|s| s.name == "__interpose") {
        Some(s) => Check::new(
            "no interpose",
            false,
            format!(
                "{},{} present ({} bytes): dyld would interpose symbols process-wide",
                s.segment, s.name, s.size
            ),
        ),
        None => Check::new("no interpose", true, "no __interpose section"),
    }
}

/// Rust v0 (`_R`), legacy Rust and C++ (`_ZN`, `_Z`) manglings, with Mach-O's leading `_`.
fn is_mangled(name: &str) -> bool {
    let Some(rest) = name.strip_prefix('_') else {
        return false;
    };
    let second = rest.as_bytes().get(1).copied().unwrap_or(0);
    (rest.starts_with("_R") && (second.is_ascii_uppercase() || second.is_ascii_digit()))
        || rest.starts_with("_Z")
}

fn file_type_name(file_type: u32) -> String {
    match file_type {
        macho::MH_OBJECT => "MH_OBJECT".into(),
        macho::MH_EXECUTE => "MH_EXECUTE".into(),
        macho::MH_DYLIB => "MH_DYLIB".into(),
        macho::MH_BUNDLE => "MH_BUNDLE".into(),
        other => format!("filetype {other}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use capshim_macho::{CodeDirectory, SectionFact};
    use object::Endianness;

    /// The libcapshim.dylib of the last `cargo xtask dist`, when there is one.
    fn built_dylib() -> Option<Vec<u8>> {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../dist/aarch64-apple-darwin/libcapshim.dylib");
        let found = std::fs::read(&path).ok();
        if found.is_none() {
            eprintln!(
                "{} is absent (run `cargo xtask dist`); real-file checks skipped",
                path.display()
            );
        }
        found
    }

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
                identifier: "libcapshim.dylib".into(),
                hash: "SHA-256",
                pages: 3,
                pages_verified: Ok(()),
            }),
            exports: vec!["___dso_handle".into(), "__mh_dylib_header".into()],
            build_version: Some((macho::PLATFORM_MACOS, 0x000b_0000, 0x001b_0000)),
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
        f.build_version = Some((macho::PLATFORM_MACOS, 0x000f_0000, 0x001b_0000));
        assert_eq!(failing(&f), ["platform"]);
        f.build_version = Some((macho::PLATFORM_IOS, 0x000b_0000, 0x001b_0000));
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

    #[test]
    fn real_dylib_passes_and_tampering_fails() {
        let Some(dylib) = built_dylib() else { return };
        let facts = Facts::read(&dylib).unwrap();
        let checks = check_shim(&facts);
        assert!(checks.iter().all(|c| c.ok), "{checks:#?}");

        // One flipped byte in the code is caught by the page hashes.
        let mut tampered = dylib.clone();
        tampered[0x2000] ^= 0xff;
        assert_eq!(failing(&Facts::read(&tampered).unwrap()), ["signature"]);

        // Truncating the signature away is caught too.
        let truncated = &dylib[..dylib.len() - 64];
        if let Ok(facts) = Facts::read(truncated) {
            assert!(failing(&facts).contains(&"signature"));
        }
    }
}
