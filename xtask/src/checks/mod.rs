//! What `cargo xtask dist` promises about each Mach-O artifact, as rules over the facts
//! [`capshim_macho::Facts::read`] gathers: [`check_shim`] and [`check_executable`] turn facts
//! into pass/fail [`Check`]s, so every rule can be tested with hand-made facts as well as with
//! a real build.

use std::fmt;

use capshim_macho::{Dependency, Facts, Tuple};
use object::macho;

/// The install name libcapshim must carry.
pub const SHIM_INSTALL_NAME: &str = "@rpath/libcapshim.dylib";

/// The install name of the guard library (libcapshim_guard.dylib): the same rule, its own file.
pub const GUARD_INSTALL_NAME: &str = "@rpath/libcapshim_guard.dylib";

/// The functions the guard library interposes, as its `__interpose` tuples name them, sorted:
/// exactly these (crates/shim/src/guard/interpose.rs).
pub const GUARD_INTERPOSED: &[&str] = &["_execve", "_posix_spawn", "_posix_spawnp"];

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

/// The macOS SDK version the artifacts record in `LC_BUILD_VERSION`, as `(major, minor)`:
/// the SDK whose text stubs every imported symbol is checked against (`xtask/sdk/`).
pub const SDK_VERSION: (u32, u32) = (11, 3);

/// The code-signing identifier of libcapshim.dylib: the file name it ships under, which is
/// also the leaf of its install name, the identifier Apple's ld64 gives a dylib it signs (lld
/// does the same "to mimic ld64", and zig too). dist writes it (`crate::dist`'s `finish`).
pub const SHIM_IDENTIFIER: &str = "libcapshim.dylib";
/// The code-signing identifier of libcapshim_guard.dylib, by the same rule.
pub const GUARD_IDENTIFIER: &str = "libcapshim_guard.dylib";
/// The code-signing identifier of the `capshim` executable: the file name it ships under, the
/// identifier ld64 gives an executable linked as `-o capshim` (not cargo's `capshim-<hash>`).
/// dist writes it (`crate::dist`'s `finish`).
pub const CLI_IDENTIFIER: &str = "capshim";

/// The libraries libcapshim.dylib loads, and no others.
pub const SHIM_DEPENDENCIES: &[&str] = &["/usr/lib/libSystem.B.dylib", "/usr/lib/libobjc.A.dylib"];
/// The libraries the `capshim` executable loads, and no others (no libiconv, libcharset).
pub const CLI_DEPENDENCIES: &[&str] = &[
    "/System/Library/Frameworks/CoreGraphics.framework/Versions/A/CoreGraphics",
    "/System/Library/Frameworks/Metal.framework/Versions/A/Metal",
    "/usr/lib/libSystem.B.dylib",
    "/usr/lib/libobjc.A.dylib",
];

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
        install_name_check(facts, SHIM_INSTALL_NAME),
        dependencies_check(facts, SHIM_DEPENDENCIES),
        initializer_check(facts),
        signature_check(facts, SHIM_IDENTIFIER),
        exports_check(facts),
        interpose_check(facts),
    ]
}

/// The rules for libcapshim_guard.dylib: libcapshim's, with its own install name and
/// identifier, and interposing tuples that name exactly [`GUARD_INTERPOSED`] (`tuples`, as
/// `capshim_macho::interpose_tuples` read them).
pub fn check_guard(facts: &Facts, tuples: &Result<Option<Vec<Tuple>>, String>) -> Vec<Check> {
    vec![
        format_check(facts, macho::MH_DYLIB),
        platform_check(facts),
        install_name_check(facts, GUARD_INSTALL_NAME),
        dependencies_check(facts, SHIM_DEPENDENCIES),
        initializer_check(facts),
        signature_check(facts, GUARD_IDENTIFIER),
        exports_check(facts),
        tuples_check(tuples),
    ]
}

/// The marker the guard's Linux tests use for "cannot load" (crates/shim/src/guard/slice.rs),
/// which the macOS build must not contain: there, a file holding it would be judged by it.
pub const GUARD_TEST_MARKER: &[u8] = b"capshim-guard-test: cannot load";

/// The rule that the guard library carries no test-only marker (`data`: the whole file).
pub fn test_marker_check(data: &[u8]) -> Check {
    let found = data
        .windows(GUARD_TEST_MARKER.len())
        .any(|w| w == GUARD_TEST_MARKER);
    Check::new(
        "test marker",
        !found,
        if found {
            "the Linux-only test marker is compiled in: files holding it would count as unable to load the library"
        } else {
            "no Linux test marker"
        },
    )
}

fn tuples_check(tuples: &Result<Option<Vec<Tuple>>, String>) -> Check {
    let wanted = GUARD_INTERPOSED.join(", ");
    let tuples = match tuples {
        Err(why) => return Check::new("interpose", false, format!("{why}; expected {wanted}")),
        Ok(None) => {
            return Check::new(
                "interpose",
                false,
                format!("no __interpose section; expected tuples for {wanted}"),
            );
        }
        Ok(Some(tuples)) => tuples,
    };
    let mut names: Vec<&str> = tuples
        .iter()
        .filter_map(|t| t.replacee.as_deref())
        .collect();
    names.sort_unstable();
    let unbound = tuples.iter().filter(|t| t.replacee.is_none()).count();
    let bound_replacements = tuples.iter().filter(|t| t.replacement_bound).count();
    let ok = names == GUARD_INTERPOSED && unbound == 0 && bound_replacements == 0;
    let mut detail = format!("{} tuple(s) replacing {}", tuples.len(), names.join(", "));
    if !ok {
        if unbound > 0 {
            detail += &format!("; {unbound} with no bound replacee");
        }
        if bound_replacements > 0 {
            detail += &format!("; {bound_replacements} whose replacement is not in the library");
        }
        detail += &format!("; expected exactly {wanted}");
    }
    Check::new("interpose", ok, detail)
}

/// The rules for the `capshim` executable.
pub fn check_executable(facts: &Facts) -> Vec<Check> {
    vec![
        format_check(facts, macho::MH_EXECUTE),
        platform_check(facts),
        dependencies_check(facts, CLI_DEPENDENCIES),
        signature_check(facts, CLI_IDENTIFIER),
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
    let (sdk_major, sdk_minor) = SDK_VERSION;
    let wanted = format!("macOS, minimum {major}.{minor} or older, SDK {sdk_major}.{sdk_minor}");
    match facts.build_version {
        None => Check::new(
            "platform",
            false,
            format!("no LC_BUILD_VERSION; expected {wanted}"),
        ),
        Some((platform, minos, sdk)) => {
            let ok = platform == macho::PLATFORM_MACOS
                && minos <= (major << 16 | minor << 8)
                && sdk == (sdk_major << 16 | sdk_minor << 8);
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

fn install_name_check(facts: &Facts, expected: &str) -> Check {
    match &facts.install_name {
        Some(name) if name == expected => Check::new("install name", true, name.clone()),
        Some(name) => Check::new(
            "install name",
            false,
            format!("{name}; expected {expected} (LC_ID_DYLIB)"),
        ),
        None => Check::new(
            "install name",
            false,
            format!("no LC_ID_DYLIB; expected {expected}"),
        ),
    }
}

fn dependencies_check(facts: &Facts, expected: &[&str]) -> Check {
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
    let unexpected: Vec<&Dependency> = facts
        .dependencies
        .iter()
        .filter(|d| !expected.contains(&d.path.as_str()))
        .collect();
    let missing: Vec<&str> = expected
        .iter()
        .copied()
        .filter(|e| !facts.dependencies.iter().any(|d| d.path == *e))
        .collect();
    if outside.is_empty() && unexpected.is_empty() && missing.is_empty() {
        Check::new("dependencies", true, list(&mut facts.dependencies.iter()))
    } else if outside.is_empty() {
        let mut why = Vec::new();
        if !unexpected.is_empty() {
            why.push(format!("unexpected: {}", list(&mut unexpected.into_iter())));
        }
        if !missing.is_empty() {
            why.push(format!("missing: {}", missing.join(", ")));
        }
        Check::new(
            "dependencies",
            false,
            format!(
                "{}; expected exactly {}",
                why.join("; "),
                expected.join(", ")
            ),
        )
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

fn signature_check(facts: &Facts, identifier: &str) -> Check {
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
            let named = sig.identifier == identifier;
            let mut detail = format!("{kind}, identifier {:?}, {pages}", sig.identifier);
            if !named {
                detail += &format!("; expected identifier {identifier:?}");
            }
            Check::new("signature", sig.pages_verified.is_ok() && named, detail)
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
mod tests;
