//! The settings a profile carries beyond the shim's values: environment variables for the
//! workload and tool arguments per tool, as a profile file's `[env]` and `[args]` tables and an
//! arm's variable and `*-args=` items give them (a tuning result is one profile file holding
//! all three).
//!
//! Tools spell some options differently (llama-bench takes `-fa 1`, llama.cpp's common tools
//! `-fa on`), so arguments are kept per tool and go only to the tool they are written for:
//! [`ToolArgs::bench`] to llama-bench, [`ToolArgs::common`] to the tools built on llama.cpp's
//! common argument parser (llama-perplexity, llama-completion, llama-cli, llama-server...),
//! [`ToolArgs::command`] to the command of `capshim bench --command`.
//!
//! Arguments are written as one string split into words as a shell splits them, without
//! expansions: spaces separate words; `'...'` keeps everything inside as written; `"..."` keeps
//! everything but `\"` and `\\`, which stand for `"` and `\`; a `\` outside quotes keeps the
//! next character as written.

use capshim_profile::env;
use serde::Serialize;

/// The variables the loader injects libraries from; capshim sets them from the profile.
pub const INJECTION_VARS: [&str; 2] = ["DYLD_INSERT_LIBRARIES", "LD_PRELOAD"];

/// Tool arguments, per tool they are written for.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ToolArgs {
    /// For llama-bench (`bench`), e.g. `-fa 1 -ub 256`.
    pub bench: Vec<String>,
    /// For llama.cpp's common tools (`verify`'s llama-perplexity and llama-completion), e.g.
    /// `-fa on -ub 256`.
    pub common: Vec<String>,
    /// Appended to the command of `capshim bench --command`.
    pub command: Vec<String>,
}

/// The tools arguments can be written for: the item or key name, and the tools, in words.
pub const TOOLS: [(&str, &str); 3] = [
    ("bench", "llama-bench"),
    (
        "common",
        "llama.cpp's common tools (llama-perplexity, llama-completion)",
    ),
    ("command", "the command of `capshim bench --command`"),
];

impl ToolArgs {
    /// The list for the tool named `key` in [`TOOLS`].
    pub fn slot(&mut self, key: &str) -> Option<&mut Vec<String>> {
        match key {
            "bench" => Some(&mut self.bench),
            "common" => Some(&mut self.common),
            "command" => Some(&mut self.command),
            _ => None,
        }
    }

    /// Whether there are none for any tool.
    pub fn is_empty(&self) -> bool {
        self.bench.is_empty() && self.common.is_empty() && self.command.is_empty()
    }

    /// `other`'s arguments after these, tool by tool.
    pub fn extend(&mut self, other: &ToolArgs) {
        self.bench.extend(other.bench.iter().cloned());
        self.common.extend(other.common.iter().cloned());
        self.command.extend(other.command.iter().cloned());
    }
}

/// Whether `name` is written like an environment variable: capitals, digits and `_`, not
/// starting with a digit.
pub fn is_env_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
}

/// Why a variable may not be set by a profile's settings: capshim's own and the injection
/// variables are set from the profile's values. `None` when it may.
pub fn reserved_var(name: &str) -> Option<String> {
    (env::is_capshim_var(name.as_bytes()) || INJECTION_VARS.contains(&name)).then(|| {
        format!("{name} is set by capshim from the profile's values, not as a variable of its own")
    })
}

/// Splits `text` into words as described in the module's documentation.
///
/// # Errors
/// A quote left open, or a `\` at the end.
pub fn split_words(text: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut word: Option<String> = None;
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => words.extend(word.take()),
            '\'' => {
                let w = word.get_or_insert_with(String::new);
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => w.push(c),
                        None => return Err(format!("a ' is left open in {text:?}")),
                    }
                }
            }
            '"' => {
                let w = word.get_or_insert_with(String::new);
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(c @ ('"' | '\\')) => w.push(c),
                            Some(c) => {
                                w.push('\\');
                                w.push(c);
                            }
                            None => return Err(format!("a \" is left open in {text:?}")),
                        },
                        Some(c) => w.push(c),
                        None => return Err(format!("a \" is left open in {text:?}")),
                    }
                }
            }
            '\\' => match chars.next() {
                Some(c) => word.get_or_insert_with(String::new).push(c),
                None => return Err(format!("{text:?} ends with a lone \\")),
            },
            c => word.get_or_insert_with(String::new).push(c),
        }
    }
    words.extend(word);
    Ok(words)
}

/// Whether `words` holds `part` as consecutive words (an empty `part` always): how an arm's or
/// a profile's arguments appear in the argument vector a tool ran with.
pub fn holds_words(words: &[String], part: &[String]) -> bool {
    part.is_empty() || words.windows(part.len()).any(|w| w == part)
}

/// The option names in `args`: each word starting with `-` and a letter (so `-1` is a value),
/// up to any `=`.
pub fn options(args: &[String]) -> impl Iterator<Item = &str> {
    args.iter().filter_map(|a| {
        let rest = a.strip_prefix('-')?;
        rest.trim_start_matches('-')
            .starts_with(|c: char| c.is_ascii_alphabetic())
            .then(|| a.split_once('=').map_or(a.as_str(), |(f, _)| f))
    })
}

/// The first option of `args` also in `given` (or its alias by `aliases`, groups of names of
/// one option), with the form found in `given`.
pub fn repeated<'a>(
    args: &'a [String],
    given: &'a [String],
    aliases: &[&[&str]],
) -> Option<(&'a str, &'a str)> {
    let group = |flag: &str| {
        aliases.iter().find(|g| g.contains(&flag)).map_or_else(
            || vec![flag.to_string()],
            |g| g.iter().map(|s| s.to_string()).collect(),
        )
    };
    options(args).find_map(|flag| {
        let names = group(flag);
        options(given)
            .find(|g| names.iter().any(|n| n == g))
            .map(|g| (flag, g))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(text: &str) -> Vec<String> {
        split_words(text).unwrap()
    }

    #[test]
    fn words_split_as_a_shell_splits_them_without_expansions() {
        assert_eq!(words(" -fa 1  -ub 256 "), ["-fa", "1", "-ub", "256"]);
        assert_eq!(
            words("-ot 'exps=CPU, x' $HOME"),
            ["-ot", "exps=CPU, x", "$HOME"]
        );
        assert_eq!(words(r#"--p "a \"b\" \\ \n""#), ["--p", r#"a "b" \ \n"#]);
        assert_eq!(words(r"a\ b ''"), ["a b", ""]);
        assert!(words("").is_empty());
        for bad in ["'open", "\"open", "end\\"] {
            assert!(split_words(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn options_and_repeats_are_found_through_aliases() {
        let v = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let args = v(&["-fa", "1", "--ubatch-size=256", "-1"]);
        assert_eq!(options(&args).collect::<Vec<_>>(), ["-fa", "--ubatch-size"]);
        let aliases: &[&[&str]] = &[&["-ub", "--ubatch-size"]];
        assert_eq!(
            repeated(&args, &v(&["-t", "2", "-ub", "512"]), aliases),
            Some(("--ubatch-size", "-ub"))
        );
        assert_eq!(repeated(&args, &v(&["-t", "2"]), aliases), None);
        assert_eq!(
            repeated(&args, &v(&["-fa", "0"]), &[]),
            Some(("-fa", "-fa"))
        );
    }

    #[test]
    fn capshim_and_injection_variables_are_reserved() {
        assert!(reserved_var("CAPSHIM_LOG").is_some());
        assert!(reserved_var("LD_PRELOAD").is_some());
        assert!(reserved_var("GGML_METAL_NO_RESIDENCY").is_none());
        assert!(is_env_name("GGML_X1") && !is_env_name("1X") && !is_env_name("ggml"));
    }
}
