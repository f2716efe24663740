//! The part of Apple's text-based stub format (TAPI `.tbd`, version 4, a YAML subset) that
//! the SDK excerpts in `xtask/sdk/` and the crates' link stubs use, read for one target.
//!
//! A file holds one or more documents (`--- !tapi-tbd` ... ), one per library. Read here, at
//! the top level of a document: `install-name`; `exports` and `reexports`, lists of groups
//! (`- targets: [ ... ]`) with `symbols`, `weak-symbols`, `thread-local-symbols`,
//! `objc-classes`, `objc-eh-types` and `objc-ivars`; `reexported-libraries` (groups with
//! `libraries`); `parent-umbrella` (groups with `umbrella`). Only groups whose `targets` list
//! the target count. Comments (`#` lines) and every other key are skipped.

use std::collections::BTreeSet;

/// The target the artifacts are built for, as TAPI names it.
pub const TARGET: &str = "arm64-macos";

/// One library of a stub, as seen from [`TARGET`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Library {
    /// `install-name`: the path dyld loads, e.g. `/usr/lib/libSystem.B.dylib`.
    pub install_name: String,
    /// The umbrella library that re-exports this one (`parent-umbrella`), by its short name:
    /// `System` for libSystem.
    pub umbrella: Option<String>,
    /// The install names of the libraries this one re-exports (`reexported-libraries`).
    pub reexported_libraries: Vec<String>,
    /// The symbols it exports or re-exports, with Mach-O's leading `_`; an Objective-C class
    /// `X` as `_OBJC_CLASS_$_X` and `_OBJC_METACLASS_$_X`.
    pub symbols: BTreeSet<String>,
}

/// Reads every document of a stub file.
///
/// # Errors
/// A document without `install-name`, or a value list (`[ ... ]`) that is not closed, named
/// with the document's number (1 for the first).
pub fn parse(text: &str) -> Result<Vec<Library>, String> {
    let mut documents = vec![String::new()];
    for line in text.lines() {
        if line.starts_with("---") {
            documents.push(String::new());
        } else if line.trim() != "..." && !line.trim_start().starts_with('#') {
            let current = documents.last_mut().expect("never empty");
            current.push_str(line);
            current.push('\n');
        }
    }
    documents
        .iter()
        .filter(|d| !d.trim().is_empty())
        .enumerate()
        .map(|(index, document)| {
            parse_document(document).map_err(|why| format!("document {}: {why}", index + 1))
        })
        .collect()
}

/// A document's top-level keys, each with its inline value and the indented lines below it.
fn sections(document: &str) -> Vec<(&str, &str, String)> {
    let mut sections: Vec<(&str, &str, String)> = Vec::new();
    for line in document.lines() {
        let top = !line.starts_with([' ', '-']) && !line.trim().is_empty();
        match (top, line.split_once(':'), sections.last_mut()) {
            (true, Some((key, value)), _) => {
                sections.push((key.trim(), value.trim(), String::new()))
            }
            (false, _, Some((_, _, body))) => {
                body.push_str(line);
                body.push('\n');
            }
            _ => {}
        }
    }
    sections
}

fn parse_document(document: &str) -> Result<Library, String> {
    let mut library = Library::default();
    let mut install_name = None;
    for (key, value, body) in sections(document) {
        if key == "install-name" {
            install_name = Some(unquote(value).to_owned());
            continue;
        }
        if !matches!(
            key,
            "exports" | "reexports" | "reexported-libraries" | "parent-umbrella"
        ) {
            continue;
        }
        for group in groups(&body) {
            let fields = fields(&group)?;
            let field = |name: &'static str| {
                fields
                    .iter()
                    .filter(move |(key, _)| *key == name)
                    .flat_map(|(_, values)| values.iter().cloned())
            };
            if !field("targets").any(|t| t == TARGET) {
                continue;
            }
            match key {
                "reexported-libraries" => library.reexported_libraries.extend(field("libraries")),
                "parent-umbrella" => library.umbrella = field("umbrella").next(),
                _ => {
                    for name in ["symbols", "weak-symbols", "thread-local-symbols"] {
                        library.symbols.extend(field(name));
                    }
                    for class in field("objc-classes") {
                        library.symbols.insert(format!("_OBJC_CLASS_$_{class}"));
                        library.symbols.insert(format!("_OBJC_METACLASS_$_{class}"));
                    }
                    for class in field("objc-eh-types") {
                        library.symbols.insert(format!("_OBJC_EHTYPE_$_{class}"));
                    }
                    for ivar in field("objc-ivars") {
                        library.symbols.insert(format!("_OBJC_IVAR_$_{ivar}"));
                    }
                }
            }
        }
    }
    library.install_name = install_name.ok_or("no install-name")?;
    Ok(library)
}

/// The items of a list (`- key: value` and the lines below it, up to the next `- `).
fn groups(body: &str) -> Vec<String> {
    let mut groups: Vec<String> = Vec::new();
    for line in body.lines() {
        let trimmed = line.trim_start();
        if let Some(first) = trimmed.strip_prefix("- ") {
            groups.push(format!("{first}\n"));
        } else if let Some(group) = groups.last_mut() {
            group.push_str(trimmed);
            group.push('\n');
        }
    }
    groups
}

/// The `key: value` and `key: [ a, b, ... ]` pairs of one group, lists across lines.
fn fields(group: &str) -> Result<Vec<(&str, Vec<String>)>, String> {
    let mut fields = Vec::new();
    let mut rest = group.trim_start();
    while !rest.is_empty() {
        let Some((key, after)) = rest.split_once(':') else {
            return Err(format!(
                "expected `key: value`, found {:?}",
                first_line(rest)
            ));
        };
        let after = after.trim_start_matches([' ', '\t']);
        if let Some(list) = after.strip_prefix('[') {
            let close = list
                .find(']')
                .ok_or_else(|| format!("the list of `{}` is not closed", key.trim()))?;
            let values = list[..close]
                .split(',')
                .map(|value| unquote(value.trim()).to_owned())
                .filter(|value| !value.is_empty())
                .collect();
            fields.push((key.trim(), values));
            rest = list[close + 1..].trim_start();
        } else {
            let end = after.find('\n').unwrap_or(after.len());
            fields.push((key.trim(), vec![unquote(after[..end].trim()).to_owned()]));
            rest = after[end..].trim_start();
        }
    }
    Ok(fields)
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or_default()
}

/// A YAML scalar without its single or double quotes.
fn unquote(value: &str) -> &str {
    for quote in ['\'', '"'] {
        if let Some(inner) = value
            .strip_prefix(quote)
            .and_then(|v| v.strip_suffix(quote))
        {
            return inner;
        }
    }
    value
}

#[cfg(test)]
mod tests {
    use super::*;

    const TWO_LIBRARIES: &str = "--- !tapi-tbd
# a comment: with a colon
tbd-version:     4
targets:         [ x86_64-macos, arm64-macos ]
install-name:    '/usr/lib/libUmbrella.dylib'
current-version: 1
reexported-libraries:
  - targets:         [ x86_64-macos, arm64-macos ]
    libraries:       [ '/usr/lib/system/libpart.dylib' ]
exports:
  - targets:         [ x86_64-macos ]
    symbols:         [ '_stat$INODE64', _intel_only ]
  - targets:         [ arm64e-macos, arm64-macos ]
    symbols:         [ _a, _b,
                       '_c$DARWIN_EXTSN' ]
    objc-classes:    [ Thing ]
--- !tapi-tbd
tbd-version:     4
install-name:    \"/usr/lib/system/libpart.dylib\"
parent-umbrella:
  - targets:         [ arm64-macos ]
    umbrella:        Umbrella
exports:
  - targets:         [ arm64-macos ]
    weak-symbols:    [ _weak ]
reexports:
  - targets:         [ arm64-macos ]
    symbols:         [ _memcpy ]
...
";

    #[test]
    fn documents_groups_and_targets() {
        let libraries = parse(TWO_LIBRARIES).unwrap();
        assert_eq!(libraries.len(), 2);
        let (umbrella, part) = (&libraries[0], &libraries[1]);
        assert_eq!(umbrella.install_name, "/usr/lib/libUmbrella.dylib");
        assert_eq!(
            umbrella.reexported_libraries,
            ["/usr/lib/system/libpart.dylib"]
        );
        assert_eq!(umbrella.umbrella, None);
        assert_eq!(
            umbrella.symbols.iter().collect::<Vec<_>>(),
            [
                "_OBJC_CLASS_$_Thing",
                "_OBJC_METACLASS_$_Thing",
                "_a",
                "_b",
                "_c$DARWIN_EXTSN"
            ]
        );
        assert_eq!(part.install_name, "/usr/lib/system/libpart.dylib");
        assert_eq!(part.umbrella.as_deref(), Some("Umbrella"));
        assert_eq!(
            part.symbols.iter().collect::<Vec<_>>(),
            ["_memcpy", "_weak"]
        );
    }

    #[test]
    fn groups_for_other_targets_count_for_nothing() {
        let text = TWO_LIBRARIES.replace("arm64-macos", "arm64-maccatalyst");
        for library in parse(&text).unwrap() {
            assert!(library.symbols.is_empty(), "{library:?}");
            assert!(library.reexported_libraries.is_empty() && library.umbrella.is_none());
        }
    }

    #[test]
    fn broken_stubs_are_refused_with_the_document() {
        let error =
            parse("--- !tapi-tbd\nexports:\n  - targets: [ arm64-macos ]\n    symbols: [ _a\n")
                .unwrap_err();
        assert!(
            error.contains("document 1") && error.contains("not closed"),
            "{error}"
        );
        let error = parse("--- !tapi-tbd\ntbd-version: 4\n...\n--- !tapi-tbd\ntargets: [ x ]\n")
            .unwrap_err();
        assert!(error.contains("no install-name"), "{error}");
    }
}
