//! The shape of the source tree, checked so that it stays readable:
//!
//! - no Rust file under `crates/*/src` or `xtask/src` is longer than [`MAX_LINES`] lines
//!   (in-file test modules count; files under `crates/*/tests` are exempt);
//! - within each crate, the top-level modules (`crate::X`) import each other without a cycle;
//! - sibling files of one module folder do not import each other both ways;
//! - imports run one way, commands -> features -> core: only the crate root imports
//!   `commands`, and a leaf module ([`LEAVES`]) imports no other module of its crate.
//!
//! The check is textual: comments and literals are blanked, then every `crate::…`,
//! `super::…` and `self::…` path (with `{…}` groups) is resolved against the file's module
//! path, following names a module brought in with `use` (`use apple as platform;`). Test
//! modules count like any other code; glob imports (`use super::*`) are not followed. Set
//! `CAPSHIM_LAYOUT_ROOT` to check another checkout (e.g. an older commit) instead of this one.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The most lines a source file may have.
const MAX_LINES: usize = 600;

/// Modules that must not import any other module of their crate: (crate folder, module).
const LEAVES: &[(&str, &str)] = &[("crates/cli", "format")];

/// Two-way imports tolerated for now: (crate folder, parent module (`""`: the crate's top
/// level), module, module). Empty: keep it so.
const KNOWN_TWO_WAY: &[(&str, &str, &str, &str)] = &[];

/// Whether `a` and `b` under `parent` in `krate` import each other by a known exception.
fn known_two_way(krate: &str, parent: &[String], a: &str, b: &str) -> bool {
    let parent = parent.join("/");
    KNOWN_TWO_WAY
        .iter()
        .any(|&(k, p, x, y)| k == krate && p == parent && ((x, y) == (a, b) || (x, y) == (b, a)))
}

/// One reference from a file to a module of its crate.
#[derive(Clone, Debug)]
struct Reference {
    /// The module the reference is in, including inline modules (`tests`).
    from: Vec<String>,
    /// The path it names, resolved from the crate root.
    to: Vec<String>,
    /// Source file, relative to the workspace root.
    file: String,
    /// 1-based line.
    line: usize,
}

/// A source file's text with comments removed and the contents of string and character
/// literals blanked, line breaks kept (so line numbers stay right and braces in strings do
/// not count).
fn code_only(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let keep_newlines = |out: &mut String, slice: &[char]| {
        for &c in slice {
            if c == '\n' {
                out.push('\n');
            }
        }
    };
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let start = i;
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            keep_newlines(&mut out, &chars[start..i.min(chars.len())]);
        } else if let Some(open) = raw_string_start(&chars, i) {
            // r"…", r#"…"#, br"…", cr"…": ends at a quote followed by as many hashes as it
            // opened with.
            let hashes = open - i - 1 - usize::from(chars[i] != 'r');
            let mut j = open + 1;
            loop {
                match chars.get(j) {
                    None => break,
                    Some('"') if (1..=hashes).all(|k| chars.get(j + k) == Some(&'#')) => {
                        j += 1 + hashes;
                        break;
                    }
                    _ => j += 1,
                }
            }
            out.push_str("\"\"");
            keep_newlines(&mut out, &chars[open..j.min(chars.len())]);
            i = j;
        } else if c == '"' {
            let start = i;
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' {
                    i += 1;
                }
                i += 1;
            }
            i += 1;
            out.push_str("\"\"");
            keep_newlines(&mut out, &chars[start..i.min(chars.len())]);
        } else if c == '\'' {
            // A character literal ('x', '\n', '\u{7b}', '{'), else a lifetime ('a).
            if next == Some('\\') {
                i += 3;
                while i < chars.len() && chars[i] != '\'' {
                    i += 1;
                }
                i += 1;
                out.push_str("' '");
            } else if chars.get(i + 2) == Some(&'\'') {
                i += 3;
                out.push_str("' '");
            } else {
                out.push(c);
                i += 1;
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// Where the opening quote of a raw string starting at `chars[i]` is, if one starts there.
fn raw_string_start(chars: &[char], i: usize) -> Option<usize> {
    if i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_') {
        return None; // inside an identifier
    }
    let mut j = i;
    if matches!(chars.get(j), Some('b' | 'c')) {
        j += 1;
    }
    if chars.get(j) != Some(&'r') {
        return None;
    }
    j += 1;
    while chars.get(j) == Some(&'#') {
        j += 1;
    }
    (chars.get(j) == Some(&'"')).then_some(j)
}

#[derive(Clone, Debug, PartialEq)]
enum Token {
    Ident(String),
    PathSep,
    Punct(char),
}

fn tokens(code: &str) -> Vec<(Token, usize)> {
    let chars: Vec<char> = code.chars().collect();
    let mut out = Vec::new();
    let mut line = 1;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '\n' {
            line += 1;
            i += 1;
        } else if c.is_whitespace() {
            i += 1;
        } else if c.is_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            out.push((
                Token::Ident(word.trim_start_matches("r#").to_string()),
                line,
            ));
        } else if c == ':' && chars.get(i + 1) == Some(&':') {
            out.push((Token::PathSep, line));
            i += 2;
        } else {
            out.push((Token::Punct(c), line));
            i += 1;
        }
    }
    out
}

/// One path of a path tree: its segments, its line, and the name it is imported as when
/// renamed (`as x`).
type TreePath = (Vec<String>, usize, Option<String>);

/// Reads a path (tree) starting at `tokens[at]`: `a::b::{c, d::e as f, self}` gives
/// `[a,b,c]`, `[a,b,d,e]` (as `f`), `[a,b]`.
fn path_tree(tokens: &[(Token, usize)], at: usize) -> Vec<TreePath> {
    fn walk(
        tokens: &[(Token, usize)],
        mut at: usize,
        prefix: Vec<String>,
        out: &mut Vec<TreePath>,
    ) -> usize {
        let mut path = prefix;
        let mut line = tokens.get(at).map_or(0, |t| t.1);
        loop {
            match tokens.get(at) {
                Some((Token::Ident(word), l)) => {
                    line = *l;
                    if word != "self" || path.is_empty() {
                        path.push(word.clone());
                    }
                    at += 1;
                }
                Some((Token::Punct('{'), _)) => {
                    at += 1;
                    loop {
                        match tokens.get(at) {
                            Some((Token::Punct('}'), _)) | None => return at + 1,
                            Some((Token::Punct(','), _)) => at += 1,
                            Some(_) => at = walk(tokens, at, path.clone(), out),
                        }
                    }
                }
                _ => {
                    out.push((path, line, None));
                    return at;
                }
            }
            if tokens.get(at).map(|t| &t.0) == Some(&Token::PathSep) {
                at += 1;
            } else {
                let alias = match (tokens.get(at), tokens.get(at + 1)) {
                    (Some((Token::Ident(word), _)), Some((Token::Ident(alias), _)))
                        if word == "as" =>
                    {
                        at += 2;
                        Some(alias.clone())
                    }
                    _ => None,
                };
                out.push((path, line, alias));
                return at;
            }
        }
    }
    let mut out = Vec::new();
    walk(tokens, at, Vec::new(), &mut out);
    out
}

/// A name a `use` declaration brings into a module: `use apple as platform;` in module
/// `runtime` makes `runtime::platform` another name for `runtime::apple`.
#[derive(Clone, Debug)]
struct Import {
    /// The module the `use` is in.
    module: Vec<String>,
    /// The name it brings in.
    name: String,
    /// What the name stands for, resolved from the crate root.
    target: Vec<String>,
}

/// `path` as written in module `here`, resolved from the crate root: `crate::` from the
/// root, `super::` from the parent, `self::` and anything else (a child module, or an
/// external crate, which then matches no module) from `here`.
fn resolve(here: &[String], path: &[String]) -> Vec<String> {
    let mut rest = path.iter().peekable();
    let mut resolved = here.to_vec();
    match rest.peek().map(|s| s.as_str()) {
        Some("crate") => {
            rest.next();
            resolved.clear();
        }
        Some("super") => {
            while rest.peek().map(|s| s.as_str()) == Some("super") {
                rest.next();
                resolved.pop();
            }
        }
        Some("self") => {
            rest.next();
        }
        _ => {}
    }
    resolved.extend(rest.cloned());
    resolved
}

/// Every `crate::`, `super::` and `self::` path of one file, resolved from the crate root,
/// and every name its `use` declarations bring in.
fn references(file: &str, module: &[String], text: &str) -> (Vec<Reference>, Vec<Import>) {
    let toks = tokens(&code_only(text));
    let mut refs = Vec::new();
    let mut imports = Vec::new();
    // Inline modules open in this file: (name, brace depth inside it).
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut depth = 0usize;
    let mut i = 0;
    while i < toks.len() {
        match &toks[i].0 {
            Token::Punct('{') => depth += 1,
            Token::Punct('}') => {
                if inline.last().is_some_and(|(_, d)| *d == depth) {
                    inline.pop();
                }
                depth = depth.saturating_sub(1);
            }
            Token::Ident(word) if word == "mod" => {
                if let (Some((Token::Ident(name), _)), Some((Token::Punct('{'), _))) =
                    (toks.get(i + 1), toks.get(i + 2))
                {
                    inline.push((name.clone(), depth + 1));
                }
            }
            Token::Ident(word) if word == "use" => {
                let mut here: Vec<String> = module.to_vec();
                here.extend(inline.iter().map(|(n, _)| n.clone()));
                for (path, _, alias) in path_tree(&toks, i + 1) {
                    let name = alias.or_else(|| path.last().cloned());
                    if let Some(name) = name.filter(|n| n != "self" && n != "*") {
                        imports.push(Import {
                            module: here.clone(),
                            name,
                            target: resolve(&here, &path),
                        });
                    }
                }
            }
            Token::Ident(word)
                if matches!(word.as_str(), "crate" | "super" | "self")
                    && toks.get(i + 1).map(|t| &t.0) == Some(&Token::PathSep)
                    && (i == 0 || toks[i - 1].0 != Token::PathSep) =>
            {
                let mut here: Vec<String> = module.to_vec();
                here.extend(inline.iter().map(|(n, _)| n.clone()));
                for (path, line, _) in path_tree(&toks, i) {
                    refs.push(Reference {
                        from: here.clone(),
                        to: resolve(&here, &path),
                        file: file.to_string(),
                        line,
                    });
                }
                // Skip to the end of the path so that its `{` and `}` are not counted twice.
                while i + 1 < toks.len()
                    && matches!(toks[i + 1].0, Token::Ident(_) | Token::PathSep)
                {
                    i += 1;
                }
            }
            _ => {}
        }
        i += 1;
    }
    (refs, imports)
}

/// A crate's sources: each file's module path and text.
struct Crate {
    /// Its folder relative to the workspace root, e.g. `crates/cli`.
    name: String,
    /// (module path, file relative to the workspace root, text).
    files: Vec<(Vec<String>, String, String)>,
}

impl Crate {
    fn modules(&self) -> BTreeSet<Vec<String>> {
        self.files.iter().map(|(m, _, _)| m.clone()).collect()
    }
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn crates(root: &Path) -> Vec<Crate> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(root.join("crates"))
        .expect("crates/ folder")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("src").is_dir())
        .collect();
    dirs.sort();
    dirs.push(root.join("xtask"));
    dirs.into_iter()
        .map(|dir| {
            let src = dir.join("src");
            let mut paths = Vec::new();
            rust_files(&src, &mut paths);
            let files = paths
                .into_iter()
                .map(|path| {
                    let rel = path.strip_prefix(&src).unwrap();
                    let mut module: Vec<String> = rel
                        .with_extension("")
                        .components()
                        .map(|c| c.as_os_str().to_string_lossy().into_owned())
                        .collect();
                    if module.last().is_some_and(|m| m == "mod")
                        || module == ["lib"]
                        || module == ["main"]
                    {
                        module.pop();
                    }
                    let text = std::fs::read_to_string(&path).unwrap();
                    let shown = path.strip_prefix(root).unwrap().display().to_string();
                    (module, shown, text)
                })
                .collect();
            Crate {
                name: dir.strip_prefix(root).unwrap().display().to_string(),
                files,
            }
        })
        .collect()
}

/// An import between two sibling modules: (parent, from, to) -> where.
type Edges = BTreeMap<(Vec<String>, String, String), Vec<(String, usize)>>;

/// The imports between sibling modules (children of one parent, the crate root included)
/// that files of a crate make.
fn sibling_edges(krate: &Crate) -> Edges {
    let modules = krate.modules();
    let mut refs = Vec::new();
    let mut imports: BTreeMap<(Vec<String>, String), Vec<Vec<String>>> = BTreeMap::new();
    for (module, file, text) in &krate.files {
        let (r, i) = references(file, module, text);
        refs.extend(r);
        for import in i {
            imports
                .entry((import.module, import.name))
                .or_default()
                .push(import.target);
        }
    }
    let mut edges = Edges::new();
    for r in refs {
        for to in through_imports(&r.to, &modules, &imports, 0) {
            let common = r.from.iter().zip(&to).take_while(|(a, b)| a == b).count();
            if r.from.len() <= common || to.len() <= common {
                continue; // a module naming its own items, an ancestor's, or a descendant's
            }
            let parent = r.from[..common].to_vec();
            let (a, b) = (&r.from[common], &to[common]);
            let is_module = |name: &String| {
                let mut m = parent.clone();
                m.push(name.clone());
                modules.contains(&m)
            };
            if is_module(a) && is_module(b) {
                edges
                    .entry((parent, a.clone(), b.clone()))
                    .or_default()
                    .push((r.file.clone(), r.line));
            }
        }
    }
    edges
}

/// What `path` names once a name that a module imported (and that is not a module itself)
/// is replaced by what it stands for: `runtime::platform::f` after `use apple as platform;`
/// in `runtime` is `runtime::apple::f`. Several targets when `use`s differ by `cfg`.
fn through_imports(
    path: &[String],
    modules: &BTreeSet<Vec<String>>,
    imports: &BTreeMap<(Vec<String>, String), Vec<Vec<String>>>,
    depth: usize,
) -> Vec<Vec<String>> {
    for i in 0..path.len() {
        let (prefix, name) = (&path[..i], &path[i]);
        if !modules.contains(prefix) || modules.contains(&path[..=i]) {
            continue;
        }
        let Some(targets) = imports.get(&(prefix.to_vec(), name.clone())) else {
            continue;
        };
        if depth > 8 {
            break; // an import naming itself, through others
        }
        return targets
            .iter()
            .filter(|t| t.as_slice() != &path[..=i])
            .flat_map(|t| {
                let mut full = t.clone();
                full.extend_from_slice(&path[i + 1..]);
                through_imports(&full, modules, imports, depth + 1)
            })
            .collect();
    }
    vec![path.to_vec()]
}

/// `file:line` of the first few places, each once.
fn where_(places: &[(String, usize)]) -> String {
    let mut places: Vec<String> = places.iter().map(|(f, l)| format!("{f}:{l}")).collect();
    places.dedup();
    let more = places.len().saturating_sub(3);
    places.truncate(3);
    if more > 0 {
        places.push(format!("and {more} more"));
    }
    places.join(", ")
}

/// Strongly connected components of more than one module (Tarjan).
fn cycles(
    nodes: &BTreeSet<String>,
    edges: &BTreeMap<String, BTreeSet<String>>,
) -> Vec<Vec<String>> {
    struct State<'a> {
        edges: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<String, usize>,
        low: BTreeMap<String, usize>,
        stack: Vec<String>,
        on_stack: BTreeSet<String>,
        out: Vec<Vec<String>>,
    }
    fn visit(s: &mut State, v: &str) {
        let n = s.index.len();
        s.index.insert(v.to_string(), n);
        s.low.insert(v.to_string(), n);
        s.stack.push(v.to_string());
        s.on_stack.insert(v.to_string());
        let next: Vec<String> = s
            .edges
            .get(v)
            .map(|e| e.iter().cloned().collect())
            .unwrap_or_default();
        for w in next {
            if !s.index.contains_key(&w) {
                visit(s, &w);
                let low = s.low[v].min(s.low[&w]);
                s.low.insert(v.to_string(), low);
            } else if s.on_stack.contains(&w) {
                let low = s.low[v].min(s.index[&w]);
                s.low.insert(v.to_string(), low);
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(&w);
                let done = w == v;
                component.push(w);
                if done {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                s.out.push(component);
            }
        }
    }
    let mut state = State {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in nodes {
        if !state.index.contains_key(v) {
            visit(&mut state, v);
        }
    }
    state.out
}

/// Every broken rule of the tree at `root`, one paragraph each.
fn problems(root: &Path) -> Vec<String> {
    let mut problems = Vec::new();
    for krate in crates(root) {
        for (_, file, text) in &krate.files {
            let lines = text.lines().count();
            if lines > MAX_LINES {
                problems.push(format!(
                    "{file} has {lines} lines, more than {MAX_LINES}: split it by concept (a big \
                     test module can move to a tests.rs beside it)"
                ));
            }
        }
        let edges = sibling_edges(&krate);
        let mut top: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        let mut nodes = BTreeSet::new();
        for ((parent, a, b), places) in &edges {
            if parent.is_empty() {
                top.entry(a.clone()).or_default().insert(b.clone());
                nodes.insert(a.clone());
                nodes.insert(b.clone());
                if b == "commands" {
                    problems.push(format!(
                        "{}: module {a} imports commands ({}): commands import features, never \
                         the other way",
                        krate.name,
                        where_(places)
                    ));
                }
                if LEAVES.contains(&(krate.name.as_str(), a.as_str())) {
                    problems.push(format!(
                        "{}: the leaf module {a} imports {b} ({}): a leaf imports nothing of its \
                         crate",
                        krate.name,
                        where_(places)
                    ));
                }
            } else if a < b
                && let Some(back) = edges.get(&(parent.clone(), b.clone(), a.clone()))
                && !known_two_way(&krate.name, parent, a, b)
            {
                problems.push(format!(
                    "{}: sibling files {a} and {b} in {} import each other: {a} -> {b} at {}; \
                     {b} -> {a} at {}",
                    krate.name,
                    parent.join("/"),
                    where_(places),
                    where_(back)
                ));
            }
        }
        for component in cycles(&nodes, &top) {
            if component.len() == 2 && known_two_way(&krate.name, &[], &component[0], &component[1])
            {
                continue;
            }
            let mut text = format!(
                "{}: the top-level modules {} import each other in a cycle:",
                krate.name,
                component.join(", ")
            );
            for ((parent, a, b), places) in &edges {
                if parent.is_empty() && component.contains(a) && component.contains(b) {
                    let _ = write!(text, "\n    {a} -> {b} at {}", where_(places));
                }
            }
            problems.push(text);
        }
    }
    problems
}

#[test]
fn source_files_are_small_and_modules_import_one_way() {
    let root = match std::env::var_os("CAPSHIM_LAYOUT_ROOT") {
        Some(root) => PathBuf::from(root),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join(".."),
    };
    let root = root.canonicalize().unwrap_or(root);
    let problems = problems(&root);
    assert!(
        problems.is_empty(),
        "the source tree at {} breaks {} layout rule(s):\n\n{}\n",
        root.display(),
        problems.len(),
        problems.join("\n\n")
    );
}

#[test]
fn paths_are_read_through_groups_literals_and_inline_modules() {
    let text = r##"
use crate::{a, b::{self, C}, d as e};
use super::sibling::X;
// use crate::commented;
/* crate::block */
fn f() { let s = "crate::in_string {"; let c = '{'; let q = '\''; g::<'static>(); }
mod tests {
    use super::super::other::Y;
}
const R: &str = r#"crate::raw {"#;
"##;
    let module = vec!["m".to_string(), "n".to_string()];
    let (refs, _) = references("m/n.rs", &module, text);
    let found: Vec<(String, String, usize)> = refs
        .iter()
        .map(|r| (r.from.join("::"), r.to.join("::"), r.line))
        .collect();
    let expect = |from: &str, to: &str, line: usize| (from.to_string(), to.to_string(), line);
    assert_eq!(
        found,
        vec![
            expect("m::n", "a", 2),
            expect("m::n", "b", 2),
            expect("m::n", "b::C", 2),
            expect("m::n", "d", 2),
            expect("m::n", "m::sibling::X", 3),
            expect("m::n::tests", "m::other::Y", 8),
        ]
    );
}

#[test]
fn every_broken_rule_is_named_with_its_files_and_lines() {
    let dir = std::env::temp_dir().join(format!("capshim-layout-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let write = |path: &str, text: &str| {
        let path = dir.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    // A feature importing commands, and a leaf importing a feature.
    write(
        "crates/cli/src/main.rs",
        "mod commands;\nmod feature;\nmod format;\n",
    );
    write("crates/cli/src/commands.rs", "use crate::feature;\n");
    write("crates/cli/src/feature.rs", "\nuse crate::commands::X;\n");
    write("crates/cli/src/format.rs", "use crate::feature::Y;\n");
    // A cycle of top-level modules, and two sibling files importing each other.
    write("crates/k/src/lib.rs", "mod a;\nmod b;\nmod f;\n");
    write("crates/k/src/a.rs", "use crate::b::B;\n");
    write("crates/k/src/b.rs", "fn x() { crate::a::A; }\n");
    write("crates/k/src/f/mod.rs", "mod p;\nmod q;\nuse p as other;\n");
    write("crates/k/src/f/p.rs", "use super::q;\n");
    // Through the parent's import: q -> p.
    write("crates/k/src/f/q.rs", "fn g() { super::other::P; }\n");
    // A long file.
    write("xtask/src/main.rs", &"//\n".repeat(MAX_LINES + 1));
    let found = problems(&dir);
    let _ = std::fs::remove_dir_all(&dir);
    let expected = [
        "module feature imports commands (crates/cli/src/feature.rs:2)",
        "the leaf module format imports feature (crates/cli/src/format.rs:1)",
        "modules commands, feature import each other in a cycle",
        "p -> q at crates/k/src/f/p.rs:1; q -> p at crates/k/src/f/q.rs:1",
        "a -> b at crates/k/src/a.rs:1",
        "xtask/src/main.rs has 601 lines",
    ];
    assert_eq!(found.len(), expected.len(), "{found:#?}");
    for (problem, says) in found.iter().zip(expected) {
        assert!(problem.contains(says), "{says:?} not in {problem}");
    }
}

/// Every top-level module of every crate (a file or folder directly under `src/`, `lib.rs`
/// aside) and of xtask, as a path from the workspace root, e.g. `crates/cli/src/bench`.
fn top_level_modules(root: &Path) -> Vec<String> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(root.join("crates"))
        .unwrap()
        .map(|e| e.unwrap().path().join("src"))
        .collect();
    dirs.push(root.join("xtask/src"));
    let mut modules = Vec::new();
    for dir in dirs.iter().filter(|d| d.is_dir()) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            let module = path.is_dir() || name.ends_with(".rs");
            if module && name != "lib.rs" && name != "snapshots" {
                let relative = path.strip_prefix(root).unwrap();
                modules.push(relative.to_string_lossy().into_owned());
            }
        }
    }
    modules.sort();
    modules
}

#[test]
fn the_design_doc_names_every_top_level_module() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let design = std::fs::read_to_string(root.join("docs/design.md")).unwrap();
    let layout = &design[design
        .find("## Layout")
        .expect("docs/design.md has a Layout section")..];
    let missing: Vec<String> = top_level_modules(&root)
        .into_iter()
        .filter(|m| !layout.contains(&format!("`{m}`")))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/design.md's Layout section does not name: {missing:?}; describe each there"
    );
}
