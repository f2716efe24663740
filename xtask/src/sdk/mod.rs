//! The macOS SDK excerpts in `xtask/sdk/` (see its README.md) and the checks made with them:
//!
//! - `xtask/sdk/MacOSX11.0.sdk` and `xtask/sdk/MacOSX11.3.sdk` ([`CHECKED`]) hold excerpts of
//!   Apple's text stubs for the artifacts' minimum macOS and for the SDK version they record,
//!   each naming its source. The 11.3 folder is also what `SDKROOT` points at when
//!   cross-building ([`sdk_dir`]), so that rustc does not ask `xcrun` for an SDK there is
//!   none of.
//! - [`check_imports`]: every symbol an artifact imports is exported for arm64-macos, in each
//!   of those SDKs, by the library it binds to or one that library re-exports.
//! - [`check_stubs`]: every symbol of the crates' hand-written link stubs is exported for
//!   arm64-macos, in each of those SDKs, by the library the stub stands for.

mod tbd;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use capshim_macho::Facts;

use crate::checks::{Check, MINIMUM_MACOS, SDK_VERSION};
pub use tbd::{Library, TARGET, parse};

/// The SDKs whose excerpts every import and link stub is checked against, as `(major,
/// minor)`: the minimum macOS (a symbol its SDK exports exists on every macOS the artifacts
/// load on) and the SDK version the artifacts record.
pub const CHECKED: [(u32, u32); 2] = [MINIMUM_MACOS, SDK_VERSION];

/// The excerpt folder of one SDK version: `xtask/sdk/MacOSX<major>.<minor>.sdk`.
pub fn excerpt_dir(root: &Path, version: (u32, u32)) -> PathBuf {
    root.join(folder(version))
}

/// `xtask/sdk/MacOSX<major>.<minor>.sdk`, relative to the workspace.
fn folder((major, minor): (u32, u32)) -> String {
    format!("xtask/sdk/MacOSX{major}.{minor}.sdk")
}

/// The stub SDK `SDKROOT` names when cross-building: the excerpts of [`SDK_VERSION`].
pub fn sdk_dir(root: &Path) -> PathBuf {
    excerpt_dir(root, SDK_VERSION)
}

/// The excerpts of one SDK: its libraries by install name.
#[derive(Clone, Debug)]
pub struct Sdk {
    /// `(major, minor)`.
    pub version: (u32, u32),
    /// The libraries of every `.tbd` file in the folder, by install name.
    pub libraries: BTreeMap<String, Library>,
}

impl Sdk {
    /// Reads every `.tbd` file under the excerpt folder of `version`.
    ///
    /// # Errors
    /// A folder without stubs, a stub that cannot be read or parsed, or a library described
    /// twice, named with the file.
    pub fn read(root: &Path, version: (u32, u32)) -> Result<Sdk, String> {
        let dir = excerpt_dir(root, version);
        let mut libraries = BTreeMap::new();
        for (path, parsed) in read_stubs(&dir) {
            for library in parsed.map_err(|why| format!("{}: {why}", path.display()))? {
                let install = library.install_name.clone();
                if libraries.insert(install.clone(), library).is_some() {
                    return Err(format!("{}: {install} is described twice", path.display()));
                }
            }
        }
        if libraries.is_empty() {
            return Err(format!("no SDK stubs in {}", dir.display()));
        }
        Ok(Sdk { version, libraries })
    }

    /// `macOS 11.0`.
    pub fn name(&self) -> String {
        let (major, minor) = self.version;
        format!("macOS {major}.{minor}")
    }

    /// Every symbol a client of `install` can bind to for arm64-macos: the library's own
    /// exports and re-exports, and those of the libraries it re-exports, named in its
    /// `reexported-libraries` or naming it as their umbrella, recursively. `None` when the
    /// excerpts have nothing of that library.
    pub fn exports(&self, install: &str) -> Option<BTreeSet<String>> {
        let mut seen = BTreeSet::new();
        let mut symbols = BTreeSet::new();
        let mut pending = vec![install.to_owned()];
        while let Some(name) = pending.pop() {
            if !seen.insert(name.clone()) {
                continue;
            }
            if let Some(library) = self.libraries.get(&name) {
                symbols.extend(library.symbols.iter().cloned());
                pending.extend(library.reexported_libraries.iter().cloned());
            }
            let short = umbrella_name(&name);
            pending.extend(
                self.libraries
                    .values()
                    .filter(|l| l.umbrella.as_deref() == Some(short))
                    .map(|l| l.install_name.clone()),
            );
        }
        let known = seen.iter().any(|name| self.libraries.contains_key(name));
        known.then_some(symbols)
    }
}

/// The name other libraries give `install` as their umbrella: the file name without a
/// `lib` prefix and without extensions (`/usr/lib/libSystem.B.dylib` is `System`,
/// `.../Metal.framework/Versions/A/Metal` is `Metal`).
fn umbrella_name(install: &str) -> &str {
    let leaf = install.rsplit('/').next().unwrap_or(install);
    let leaf = leaf.strip_prefix("lib").unwrap_or(leaf);
    leaf.split('.').next().unwrap_or(leaf)
}

/// The excerpts of every SDK of [`CHECKED`].
///
/// # Errors
/// As [`Sdk::read`].
pub fn read_sdks(root: &Path) -> Result<Vec<Sdk>, String> {
    CHECKED.iter().map(|v| Sdk::read(root, *v)).collect()
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
}

/// Every `.tbd` under `dir`, sorted by path, parsed.
pub fn read_stubs(dir: &Path) -> Vec<(PathBuf, Result<Vec<Library>, String>)> {
    let mut files = Vec::new();
    tbd_files(dir, &mut files);
    files.sort();
    files
        .into_iter()
        .map(|path| {
            let parsed = std::fs::read_to_string(&path)
                .map_err(|e| e.to_string())
                .and_then(|text| parse(&text));
            (path, parsed)
        })
        .collect()
}

/// "macOS 11.0 and 11.3".
fn versions(sdks: &[Sdk]) -> String {
    let all: Vec<String> = sdks
        .iter()
        .map(|s| format!("{}.{}", s.version.0, s.version.1))
        .collect();
    format!("macOS {}", all.join(" and "))
}

/// What each SDK of `sdks` lacks of `symbols` of `library`, one sentence per SDK: the
/// symbols it does not export for arm64-macos, or that it has no excerpt of the library.
/// Empty when nothing lacks.
fn lacking<'a>(
    library: &str,
    symbols: impl Iterator<Item = &'a str> + Clone,
    sdks: &[Sdk],
) -> Vec<String> {
    if sdks.is_empty() {
        return vec!["no SDK excerpts to check against".to_owned()];
    }
    let mut found = Vec::new();
    for sdk in sdks {
        match sdk.exports(library) {
            None => found.push(format!(
                "no stub for {library} in the {} SDK excerpts (add one to {}: see \
                 xtask/sdk/README.md)",
                sdk.name(),
                folder(sdk.version)
            )),
            Some(exports) => {
                let missing: Vec<&str> =
                    symbols.clone().filter(|s| !exports.contains(*s)).collect();
                if !missing.is_empty() {
                    found.push(format!(
                        "not exported for {TARGET} by {library} in the {} SDK: {}",
                        sdk.name(),
                        missing.join(", ")
                    ));
                }
            }
        }
    }
    found
}

/// Checks the crates' link stubs (`crates/*/stubs`) against `sdks`: one check per library a
/// stub describes with at least one symbol.
pub fn check_stubs(root: &Path, sdks: &[Sdk]) -> Vec<Check> {
    let Ok(crates) = std::fs::read_dir(root.join("crates")) else {
        return vec![Check {
            name: "link stubs",
            ok: false,
            detail: "cannot list crates/".into(),
        }];
    };
    let mut dirs: Vec<PathBuf> = crates.flatten().map(|e| e.path().join("stubs")).collect();
    dirs.sort();
    let mut checks = Vec::new();
    for (path, parsed) in dirs.iter().flat_map(|d| read_stubs(d)) {
        let shown = path
            .strip_prefix(root)
            .unwrap_or(&path)
            .display()
            .to_string();
        match parsed {
            Err(why) => checks.push(Check {
                name: "link stub",
                ok: false,
                detail: format!("{shown}: {why}"),
            }),
            Ok(libraries) => checks.extend(
                libraries
                    .iter()
                    .filter(|l| !l.symbols.is_empty())
                    .map(|library| check_stub(&shown, library, sdks)),
            ),
        }
    }
    checks
}

/// Checks one library of a link stub (`shown` is its file) against `sdks`.
pub fn check_stub(shown: &str, library: &Library, sdks: &[Sdk]) -> Check {
    let install = &library.install_name;
    let lacking = lacking(install, library.symbols.iter().map(String::as_str), sdks);
    Check {
        name: "link stub",
        ok: lacking.is_empty(),
        detail: if lacking.is_empty() {
            format!(
                "{shown}: all {} symbols exported for {TARGET} by {install} in the {} SDKs",
                library.symbols.len(),
                versions(sdks)
            )
        } else {
            format!("{shown}: {}", lacking.join("; "))
        },
    }
}

/// Checks an artifact's imports against `sdks`: each is bound to a library (two-level
/// namespace) and exported for arm64-macos by it in every SDK of `sdks`.
pub fn check_imports(facts: &Facts, sdks: &[Sdk]) -> Check {
    let mut unbound = Vec::new();
    let mut by_library: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for import in &facts.imports {
        match import.library.as_deref() {
            None => unbound.push(import.name.as_str()),
            Some(library) => by_library
                .entry(library)
                .or_default()
                .push(import.name.as_str()),
        }
    }
    let mut problems = Vec::new();
    if sdks.is_empty() {
        problems.push("no SDK excerpts to check against".to_owned());
    }
    if !unbound.is_empty() {
        problems.push(format!(
            "bound to no library (flat namespace): {}",
            unbound.join(", ")
        ));
    }
    for (library, names) in &by_library {
        problems.extend(lacking(library, names.iter().copied(), sdks));
    }
    let counts: Vec<String> = by_library
        .iter()
        .map(|(library, names)| format!("{} from {library}", names.len()))
        .collect();
    let detail = if problems.is_empty() {
        format!(
            "all {} exported for {TARGET} in the {} SDKs ({})",
            facts.imports.len(),
            versions(sdks),
            counts.join(", ")
        )
    } else {
        problems.join("; ")
    };
    Check {
        name: "imports",
        ok: problems.is_empty(),
        detail,
    }
}

#[cfg(test)]
mod tests;
