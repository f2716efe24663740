//! The macOS SDK excerpts in `xtask/sdk/` and the checks made with them:
//!
//! - `xtask/sdk/MacOSX11.3.sdk` is what `SDKROOT` points at when cross-building, so that
//!   rustc does not ask `xcrun` for an SDK there is none of; it holds `SDKSettings.json`
//!   and excerpts of Apple's text stubs (`.tbd`) with their source.
//! - [`check_stubs`]: every symbol of the crates' hand-written link stubs that stand for a
//!   library with an excerpt is exported by Apple's stub for arm64-macos.
//! - [`check_imports`]: every symbol an artifact imports from such a library is exported
//!   by it; imports from other libraries are counted, not checked.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use capshim_macho::Facts;

use crate::checks::{Check, SDK_VERSION};

/// The stub SDK folder, relative to the workspace root.
pub fn sdk_dir(root: &Path) -> PathBuf {
    let (major, minor) = SDK_VERSION;
    root.join(format!("xtask/sdk/MacOSX{major}.{minor}.sdk"))
}

/// Symbols a `.tbd` file exports for arm64-macos, by install name. Reads the subset of
/// TAPI's YAML these files use: `install-name:`, and `symbols: [ ... ]` lists under export
/// groups whose `targets:` include `arm64-macos`.
pub fn parse_tbd(text: &str) -> Option<(String, BTreeSet<String>)> {
    let install = text.lines().find_map(|l| {
        let value = l.trim().strip_prefix("install-name:")?;
        Some(value.trim().trim_matches('\'').to_string())
    })?;
    let mut symbols = BTreeSet::new();
    let exports = &text[text.find("exports:")?..];
    for group in exports.split("- targets:").skip(1) {
        let targets = &group[..group.find(']').unwrap_or(0)];
        if !targets.contains("arm64-macos") {
            continue;
        }
        let Some(at) = group.find("symbols:") else {
            continue;
        };
        let list = &group[at..];
        let (Some(open), Some(close)) = (list.find('['), list.find(']')) else {
            continue;
        };
        symbols.extend(
            list[open + 1..close]
                .split([',', ' ', '\n'])
                .map(|s| s.trim().trim_matches('\''))
                .filter(|s| !s.is_empty())
                .map(str::to_string),
        );
    }
    Some((install, symbols))
}

fn tbd_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for path in entries.flatten().map(|e| e.path()) {
        if path.is_dir() {
            tbd_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "tbd") {
            out.push(path);
        }
    }
    out.sort();
}

/// Every `.tbd` under `dir`, parsed: (file, install name, symbols).
pub fn read_stubs(dir: &Path) -> Vec<(PathBuf, String, BTreeSet<String>)> {
    let mut files = Vec::new();
    tbd_files(dir, &mut files);
    files
        .into_iter()
        .filter_map(|path| {
            let text = std::fs::read_to_string(&path).ok()?;
            let (install, symbols) = parse_tbd(&text)?;
            Some((path, install, symbols))
        })
        .collect()
}

/// Apple's exports, by install name, from the excerpts in the stub SDK.
pub fn sdk_exports(root: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut exports: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (_, install, symbols) in read_stubs(&sdk_dir(root)) {
        exports.entry(install).or_default().extend(symbols);
    }
    exports
}

/// Checks the crates' link stubs (`crates/*/stubs`) against the SDK excerpts.
pub fn check_stubs(root: &Path) -> Vec<Check> {
    let sdk = sdk_exports(root);
    let (major, minor) = SDK_VERSION;
    let mut checks = Vec::new();
    let Ok(crates) = std::fs::read_dir(root.join("crates")) else {
        return vec![Check {
            name: "link stubs",
            ok: false,
            detail: "cannot list crates/".into(),
        }];
    };
    let mut dirs: Vec<PathBuf> = crates.flatten().map(|e| e.path().join("stubs")).collect();
    dirs.sort();
    for (path, install, symbols) in dirs.iter().flat_map(|d| read_stubs(d)) {
        let Some(apple) = sdk.get(&install) else {
            continue;
        };
        let shown = path.strip_prefix(root).unwrap_or(&path).display();
        let missing: Vec<&str> = symbols
            .iter()
            .filter(|s| !apple.contains(*s))
            .map(String::as_str)
            .collect();
        checks.push(Check {
            name: "link stub",
            ok: missing.is_empty(),
            detail: if missing.is_empty() {
                format!(
                    "{shown}: all {} symbols exported by {install} in the macOS {major}.{minor} SDK",
                    symbols.len()
                )
            } else {
                format!(
                    "{shown}: not exported by {install} in the macOS {major}.{minor} SDK: {}",
                    missing.join(", ")
                )
            },
        });
    }
    checks
}

/// Checks an artifact's imports against the SDK excerpts.
pub fn check_imports(facts: &Facts, sdk: &BTreeMap<String, BTreeSet<String>>) -> Check {
    let (major, minor) = SDK_VERSION;
    let mut checked = 0;
    let mut missing = Vec::new();
    let mut unbound = Vec::new();
    let mut unchecked: BTreeMap<&str, usize> = BTreeMap::new();
    for import in &facts.imports {
        match import.library.as_deref() {
            None => unbound.push(import.name.as_str()),
            Some(library) => match sdk.get(library) {
                Some(exports) => {
                    checked += 1;
                    if !exports.contains(&import.name) {
                        missing.push(format!("{} ({library})", import.name));
                    }
                }
                None => *unchecked.entry(library).or_default() += 1,
            },
        }
    }
    let others = unchecked
        .iter()
        .map(|(library, n)| format!("{n} from {library}"))
        .collect::<Vec<_>>()
        .join(", ");
    let mut detail = format!(
        "{checked} checked against the macOS {major}.{minor} SDK; not checked (no SDK excerpt): {}",
        if others.is_empty() {
            "none".into()
        } else {
            others
        }
    );
    if !missing.is_empty() {
        detail = format!(
            "not exported for arm64-macos: {}; {detail}",
            missing.join(", ")
        );
    }
    if !unbound.is_empty() {
        detail = format!(
            "bound to no library (flat namespace): {}; {detail}",
            unbound.join(", ")
        );
    }
    Check {
        name: "imports",
        ok: missing.is_empty() && unbound.is_empty(),
        detail,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use capshim_macho::Import;

    fn root() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .unwrap()
            .to_path_buf()
    }

    #[test]
    fn the_excerpt_is_read_for_arm64_macos_only() {
        let text = "--- !tapi-tbd\ninstall-name: '/usr/lib/libx.dylib'\nexports:\n  - targets: [ x86_64-macos ]\n    symbols: [ _intel ]\n  - targets: [ arm64e-macos, arm64-macos ]\n    symbols: [ _a, _b,\n                _c ]\n...\n";
        let (install, symbols) = parse_tbd(text).unwrap();
        assert_eq!(install, "/usr/lib/libx.dylib");
        assert_eq!(symbols.into_iter().collect::<Vec<_>>(), ["_a", "_b", "_c"]);
        let sdk = sdk_exports(&root());
        let objc = &sdk["/usr/lib/libobjc.A.dylib"];
        assert!(objc.contains("_objc_lookUpClass") && objc.contains("_class_replaceMethod"));
    }

    #[test]
    fn the_crates_link_stubs_are_all_in_the_sdk() {
        let checks = check_stubs(&root());
        assert_eq!(checks.len(), 2, "{checks:#?}");
        assert!(checks.iter().all(|c| c.ok), "{checks:#?}");
    }

    #[test]
    fn imports_missing_from_the_sdk_or_unbound_fail() {
        let sdk = sdk_exports(&root());
        let import = |name: &str, library: Option<&str>| Import {
            name: name.into(),
            library: library.map(str::to_string),
        };
        let mut facts = Facts::read(&capshim_macho::testdata::macho(
            object::macho::CPU_TYPE_ARM64,
            0,
            object::macho::MH_DYLIB,
            None,
        ))
        .unwrap();
        facts.imports = vec![
            import("_objc_lookUpClass", Some("/usr/lib/libobjc.A.dylib")),
            import("_malloc", Some("/usr/lib/libSystem.B.dylib")),
        ];
        let check = check_imports(&facts, &sdk);
        assert!(check.ok, "{check:?}");
        assert!(
            check.detail.contains("1 from /usr/lib/libSystem.B.dylib"),
            "{check:?}"
        );
        facts
            .imports
            .push(import("_objc_made_up", Some("/usr/lib/libobjc.A.dylib")));
        assert!(!check_imports(&facts, &sdk).ok);
        facts.imports.pop();
        facts.imports.push(import("_anything", None));
        assert!(!check_imports(&facts, &sdk).ok);
    }
}
