//! The commands capshim's GitHub workflows and action run, found in their `run:` blocks and in
//! the scripts they call (`scripts/ci`, `scripts/action`), so that tests can check each one
//! exists. Shared by `xtask/tests/workflows.rs` (`cargo xtask ...`) and
//! `crates/cli/tests/workflow_commands.rs` (`capshim ...`).
//!
//! The scan is textual: a line (with `\` continuations joined) is split into words, shell
//! operators apart; a program counts where a command can start (the line's start, after
//! `|`, `&&`, `;`, `(`, a backquote, `--`, `if`, `exec`, ...), so prose such as "capshim is on
//! PATH" is not a command while "`capshim run -- ...`" is (so is "(capshim is ...)": after a
//! `(` prose reads as a subshell; write it otherwise). Its options are the words up to the
//! first `--`, operator or redirection.
#![allow(dead_code)]

use std::path::PathBuf;

/// The repository's root: the first folder above this crate with `.ci/run`.
pub fn repo() -> PathBuf {
    let mut p = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    while !p.join(".ci/run").is_file() {
        assert!(p.pop(), "no .ci/run above {}", env!("CARGO_MANIFEST_DIR"));
    }
    p
}

/// One invocation: where it was found, the subcommand, and the options given before `--`.
#[derive(Debug)]
pub struct Invocation {
    pub file: String,
    pub line: String,
    pub subcommand: String,
    pub options: Vec<String>,
}

/// The workflow files and the action, as (repository-relative name, text).
pub fn workflow_files() -> Vec<(String, String)> {
    let root = repo();
    let mut files = vec!["action.yml".to_string()];
    let mut workflows: Vec<String> = std::fs::read_dir(root.join(".github/workflows"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".yml") || n.ends_with(".yaml"))
        .map(|n| format!(".github/workflows/{n}"))
        .collect();
    workflows.sort();
    files.extend(workflows);
    files
        .into_iter()
        .map(|f| {
            let text = std::fs::read_to_string(root.join(&f)).unwrap();
            (f, text)
        })
        .collect()
}

/// Every `run:` value in a YAML document.
pub fn run_blocks(text: &str) -> Vec<String> {
    fn walk(y: &yaml_rust2::Yaml, out: &mut Vec<String>) {
        match y {
            yaml_rust2::Yaml::Hash(h) => {
                for (k, v) in h {
                    if k.as_str() == Some("run") {
                        if let Some(s) = v.as_str() {
                            out.push(s.to_string());
                        }
                    }
                    walk(v, out);
                }
            }
            yaml_rust2::Yaml::Array(a) => a.iter().for_each(|v| walk(v, out)),
            _ => {}
        }
    }
    let docs = yaml_rust2::YamlLoader::load_from_str(text).unwrap();
    let mut out = Vec::new();
    docs.iter().for_each(|d| walk(d, &mut out));
    out
}

/// The scripts the workflows and the action call, with their text.
pub fn scripts() -> Vec<(String, String)> {
    let root = repo();
    let mut out = Vec::new();
    for dir in ["scripts/ci", "scripts/action"] {
        let mut names: Vec<String> = std::fs::read_dir(root.join(dir))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".sh"))
            .collect();
        names.sort();
        for n in names {
            let f = format!("{dir}/{n}");
            let text = std::fs::read_to_string(root.join(&f)).unwrap();
            out.push((f, text));
        }
    }
    out
}

/// Every shell text to scan: the `run:` blocks of the workflows and the action, and the
/// scripts, as (where, text).
pub fn shell_texts() -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (file, text) in workflow_files() {
        for block in run_blocks(&text) {
            out.push((file.clone(), block));
        }
    }
    out.extend(scripts());
    out
}

/// Words after which a command may start.
const COMMAND_START: &[&str] = &[
    "|", "||", "&&", ";", "(", "`", "!", "if", "then", "do", "else", "elif", "exec", "time",
    "while", "until", "--",
];

/// Splits a line into words, with `;`, `|`, `&&`, `(`, `)` and backquotes as words of their
/// own (a redirection such as `2>&1` becomes several words, which is harmless: a word with
/// `>` or `<` ends the options anyway).
fn words(line: &str) -> Vec<String> {
    let mut spaced = String::new();
    for c in line.chars() {
        match c {
            ';' | '(' | ')' | '`' => {
                spaced.push(' ');
                spaced.push(c);
                spaced.push(' ');
            }
            _ => spaced.push(c),
        }
    }
    spaced
        .split_whitespace()
        .map(|w| w.trim_matches('"').trim_matches('\'').to_string())
        // `${only:+--only-process "$only"}`: the option inside counts.
        .map(|w| match w.split_once(":+") {
            Some((head, tail)) if head.starts_with("${") => tail.to_string(),
            _ => w,
        })
        .collect()
}

/// Whether a word ends a command's options.
fn ends_options(w: &str) -> bool {
    w == "--"
        || w.contains('>')
        || w.contains('<')
        || [")", "|", "||", "&&", ";", "`"].contains(&w)
        || w.starts_with("2>")
}

/// The invocations of `program` (its words, e.g. `["cargo", "xtask"]`; any of `aliases`
/// stands for the first) in `text`, comment lines skipped.
pub fn invocations(
    where_: &str,
    text: &str,
    program: &[&str],
    aliases: &[&str],
) -> Vec<Invocation> {
    let joined = text.replace("\\\n", " ");
    let mut out = Vec::new();
    for line in joined.lines() {
        if line.trim_start().starts_with('#') {
            continue;
        }
        let w = words(line);
        for i in 0..w.len() {
            let at_start = i == 0 || COMMAND_START.contains(&w[i - 1].as_str());
            let first = &w[i];
            let is_program = first == program[0] || aliases.contains(&first.as_str());
            if !at_start || !is_program || w.len() < i + program.len() + 1 {
                continue;
            }
            if w[i + 1..i + program.len()] != program[1..] {
                continue;
            }
            let sub = &w[i + program.len()];
            if !sub.chars().next().is_some_and(|c| c.is_ascii_lowercase())
                || !sub
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            {
                continue;
            }
            let options = w[i + program.len() + 1..]
                .iter()
                .take_while(|o| !ends_options(o))
                .filter(|o| o.starts_with('-'))
                .map(|o| o.split('=').next().unwrap().to_string())
                .collect();
            out.push(Invocation {
                file: where_.to_string(),
                line: line.trim().to_string(),
                subcommand: sub.clone(),
                options,
            });
        }
    }
    out
}

/// Every invocation of `program` in the workflows, the action and their scripts.
pub fn all_invocations(program: &[&str], aliases: &[&str]) -> Vec<Invocation> {
    shell_texts()
        .iter()
        .flat_map(|(f, t)| invocations(f, t, program, aliases))
        .collect()
}

/// Whether `help` (a `--help` text) lists `option` (`--long` or `-s`).
pub fn help_lists(help: &str, option: &str) -> bool {
    help.split(|c: char| c.is_whitespace() || c == ',' || c == '[' || c == ']' || c == '=')
        .any(|w| w == option || w.split('<').next() == Some(option))
}
