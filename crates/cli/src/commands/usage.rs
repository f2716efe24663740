//! Command-line mistakes clap finds, said right for capshim: which option a value that is not
//! UTF-8 was given to (clap only says "invalid UTF-8 was detected"), how to give a value that
//! starts with `-` (clap's tip would put it after `--`, where the program or llama.cpp gets
//! it), and that the program goes after `--`.
//!
//! The arguments are read as the operating system gave them (`args_os`): file paths, and a
//! program and its arguments after `--`, reach `run` and `doctor` byte for byte, whatever their
//! encoding; every other value is text.

use std::any::TypeId;
use std::ffi::{OsStr, OsString};
use std::path::PathBuf;

use clap::builder::StyledStr;
use clap::error::{ContextKind, ContextValue, ErrorKind};
use clap::{Arg, Command, CommandFactory as _};

use super::Cli;
use crate::arms::spec::PROFILE_KEYS;

/// The subcommands whose arguments after `--` are a program to run.
const PROGRAM_AFTER_SEPARATOR: [&str; 3] = ["run", "agent", "doctor"];

/// clap's `error` for `args` (the arguments after `capshim`), made right for capshim:
/// - a value that is not UTF-8 becomes an "invalid value" error naming the option (or the
///   arguments after `--`) it was given to, with the value shown lossily;
/// - clap's tip "to pass 'X' as a value, use '-- X'" is replaced where it is wrong: for a
///   value starting with `-` after an option (`--family-max -1`) by the `--opt=X` form; for
///   `run`'s profile options given to `bench` or `verify`, by the arm that carries them; for
///   llama.cpp's options by where they go; for `run`, `agent` and `doctor` it is dropped,
///   since after `--` comes the program.
///
/// Anything else is returned as it is.
pub fn clarify(error: clap::Error, args: &[OsString]) -> clap::Error {
    let mut root = Cli::command();
    root.build();
    match error.kind() {
        ErrorKind::InvalidUtf8 => {
            let cmd = args
                .first()
                .and_then(|a| a.to_str())
                .and_then(|name| root.find_subcommand(name))
                .unwrap_or(&root);
            not_utf8(&root, args)
                .map(|found| not_utf8_error(&error, cmd, found))
                .unwrap_or(error)
        }
        ErrorKind::UnknownArgument => fix_separator_tip(error, &root, args),
        _ => error,
    }
}

/// For `capshim run ls -l` (the command not after `--`): the line that says how to write it.
/// `args` are the arguments after `capshim`; `error` is what clap stopped on, whose unexpected
/// argument is where the program starts.
pub fn missing_separator_tip(args: &[OsString], error: &clap::Error) -> Option<String> {
    let command = args.first()?;
    if !PROGRAM_AFTER_SEPARATOR.iter().any(|c| command == *c)
        || error.kind() != ErrorKind::UnknownArgument
        || args.iter().any(|a| a == "--")
    {
        return None;
    }
    let Some(ContextValue::String(unexpected)) = error.get(ContextKind::InvalidArg) else {
        return None;
    };
    // An option capshim does not know (`--bogus`) is a typo, not a program.
    if unexpected.starts_with('-') {
        return None;
    }
    let at = args.iter().skip(1).position(|a| a == unexpected.as_str())? + 1;
    let (before, after) = args.split_at(at);
    let words = |part: &[OsString]| {
        part.iter()
            .map(|a| a.to_string_lossy())
            .collect::<Vec<_>>()
            .join(" ")
    };
    Some(format!(
        "the program and its arguments go after `--`: capshim {} -- {}",
        words(before),
        words(after)
    ))
}

/// A value that is not UTF-8, and what it was given to.
#[derive(Debug, PartialEq, Eq)]
struct NotUtf8 {
    /// The option as written (`--arm`, `--profile`, `-m`), or the positional's value name
    /// (`<LLAMA_BENCH_ARGS>`).
    given_to: String,
    /// The value, invalid bytes shown as U+FFFD.
    shown: String,
    /// Whether it came after `--`.
    after_separator: bool,
}

/// Whether clap takes `arg`'s value as text: everything but paths and `OsString`s.
fn needs_utf8(arg: &Arg) -> bool {
    let id = arg.get_value_parser().type_id();
    !(id == TypeId::of::<OsString>() || id == TypeId::of::<PathBuf>())
}

/// Whether `arg` takes a value at all (not a flag).
fn takes_value(arg: &Arg) -> bool {
    arg.get_action().takes_values() && arg.get_num_args().is_none_or(|n| n.takes_values())
}

/// Whether `arg` may go without its value (`--only-process` alone).
fn value_optional(arg: &Arg) -> bool {
    arg.get_num_args().is_some_and(|n| n.min_values() == 0)
}

/// The positional's name as the usage line writes it.
fn positional_name(arg: &Arg) -> String {
    let name = arg
        .get_value_names()
        .and_then(|n| n.first())
        .map_or_else(|| arg.get_id().as_str().to_string(), ToString::to_string);
    format!("<{name}>")
}

/// The first value in `args` that clap needs as text and is not UTF-8, walking `root`'s
/// definition as clap does: subcommands, long options (`--opt VALUE`, `--opt=VALUE`), short
/// options (`-m VALUE`, `-mVALUE`), positionals, and what follows `--`.
fn not_utf8(root: &Command, args: &[OsString]) -> Option<NotUtf8> {
    let mut cmd = root;
    let mut positionals = 0usize;
    let check = |arg: &Arg, given_to: String, value: &OsStr, after_separator: bool| {
        (value.to_str().is_none() && needs_utf8(arg)).then(|| NotUtf8 {
            given_to,
            shown: value.to_string_lossy().into_owned(),
            after_separator,
        })
    };
    let mut i = 0;
    while i < args.len() {
        let word = &args[i];
        let bytes = word.as_encoded_bytes();
        i += 1;
        if bytes == b"--" {
            let last = cmd.get_positionals().find(|a| a.is_last_set())?;
            return args[i..]
                .iter()
                .find_map(|v| check(last, positional_name(last), v, true));
        }
        if let Some(long) = bytes.strip_prefix(b"--") {
            let (name, attached) = match long.iter().position(|&b| b == b'=') {
                Some(at) => (&long[..at], Some(&long[at + 1..])),
                None => (long, None),
            };
            let Some(arg) = cmd.get_arguments().find(|a| {
                a.get_long().is_some_and(|l| l.as_bytes() == name)
                    || a.get_all_aliases()
                        .is_some_and(|all| all.iter().any(|l| l.as_bytes() == name))
            }) else {
                continue;
            };
            if !takes_value(arg) {
                continue;
            }
            let given_to = format!("--{}", String::from_utf8_lossy(name));
            let value = match attached {
                Some(v) => Some(os_str(v)),
                None => next_value(args, &mut i, arg),
            };
            if let Some(found) = value.and_then(|v| check(arg, given_to, &v, false)) {
                return Some(found);
            }
        } else if bytes.len() > 1 && bytes[0] == b'-' {
            let mut at = 1;
            while at < bytes.len() {
                let short = char::from(bytes[at]);
                at += 1;
                let Some(arg) = cmd.get_arguments().find(|a| {
                    a.get_short() == Some(short)
                        || a.get_all_short_aliases()
                            .is_some_and(|all| all.contains(&short))
                }) else {
                    break;
                };
                if !takes_value(arg) {
                    continue;
                }
                let rest = bytes[at..].strip_prefix(b"=").unwrap_or(&bytes[at..]);
                let value = if rest.is_empty() {
                    next_value(args, &mut i, arg)
                } else {
                    Some(os_str(rest))
                };
                if let Some(found) = value.and_then(|v| check(arg, format!("-{short}"), &v, false))
                {
                    return Some(found);
                }
                break;
            }
        } else if let Some(sub) = word.to_str().and_then(|w| cmd.find_subcommand(w)) {
            cmd = sub;
            positionals = 0;
        } else {
            let list: Vec<&Arg> = cmd.get_positionals().filter(|a| !a.is_last_set()).collect();
            let Some(arg) = list.get(positionals.min(list.len().saturating_sub(1))) else {
                continue;
            };
            positionals += 1;
            if let Some(found) = check(arg, positional_name(arg), word, false) {
                return Some(found);
            }
        }
    }
    None
}

/// The value after an option written without one, advancing `i` past it: the next word,
/// unless the option may go without a value and the next word is another option.
fn next_value(args: &[OsString], i: &mut usize, arg: &Arg) -> Option<OsString> {
    let next = args.get(*i)?;
    if value_optional(arg) && next.as_encoded_bytes().starts_with(b"-") {
        return None;
    }
    *i += 1;
    Some(next.clone())
}

/// Bytes cut from an argument at ASCII boundaries, as an `OsString` (on Unix every byte
/// string is one).
fn os_str(bytes: &[u8]) -> OsString {
    <OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(bytes).to_os_string()
}

/// clap's "invalid value" error for `found` in `cmd`, with `original`'s usage line.
fn not_utf8_error(original: &clap::Error, cmd: &Command, found: NotUtf8) -> clap::Error {
    let mut error = clap::Error::new(ErrorKind::InvalidValue).with_cmd(cmd);
    error.insert(
        ContextKind::InvalidArg,
        ContextValue::String(found.given_to),
    );
    error.insert(ContextKind::InvalidValue, ContextValue::String(found.shown));
    let tip = if found.after_separator {
        "it is not UTF-8: llama.cpp's arguments are recorded in the evidence bundle as text; give \
         them in UTF-8"
    } else {
        "it is not UTF-8: capshim reads this value as text; give it in UTF-8 (file paths, and \
         the program and its arguments after `--` of run and doctor, may be in any encoding)"
    };
    error.insert(
        ContextKind::Suggested,
        ContextValue::StyledStrs(vec![StyledStr::from(tip)]),
    );
    if let Some(usage) = original.get(ContextKind::Usage) {
        error.insert(ContextKind::Usage, usage.clone());
    }
    error
}

/// `error` (an unexpected argument) with clap's "use '-- X'" tip replaced or dropped where it
/// is wrong for capshim (see [`clarify`]).
fn fix_separator_tip(mut error: clap::Error, root: &Command, args: &[OsString]) -> clap::Error {
    let Some(ContextValue::String(unexpected)) = error.get(ContextKind::InvalidArg).cloned() else {
        return error;
    };
    let trailing_tip = format!("as a value, use '-- {unexpected}'");
    let Some(ContextValue::StyledStrs(tips)) = error.get(ContextKind::Suggested).cloned() else {
        return error;
    };
    let (wrong, mut kept): (Vec<StyledStr>, Vec<StyledStr>) = tips
        .into_iter()
        .partition(|t| t.to_string().ends_with(&trailing_tip));
    if wrong.is_empty() {
        return error;
    }
    let subcommand = args
        .first()
        .and_then(|a| a.to_str())
        .and_then(|name| root.find_subcommand(name));
    if let Some(tip) = subcommand.and_then(|cmd| right_tip(cmd, args, &unexpected)) {
        kept.push(StyledStr::from(tip));
    }
    error.remove(ContextKind::Suggested);
    if !kept.is_empty() {
        error.insert(ContextKind::Suggested, ContextValue::StyledStrs(kept));
    }
    error
}

/// What to say instead of "use '-- X'" for the unexpected `unexpected` in subcommand `cmd`
/// (`args` are the arguments after `capshim`); `None` to say nothing.
fn right_tip(cmd: &Command, args: &[OsString], unexpected: &str) -> Option<String> {
    let at = args.iter().position(|a| a == unexpected)?;
    // `--family-max -1`: a value for the option before it.
    if let Some(before) = at.checked_sub(1).and_then(|b| args[b].to_str()) {
        let option = before.strip_prefix("--").and_then(|long| {
            cmd.get_arguments()
                .find(|a| a.get_long() == Some(long) && takes_value(a))
        });
        let option = option.or_else(|| {
            let short = before.strip_prefix('-')?;
            let mut chars = short.chars();
            let (c, None) = (chars.next()?, chars.next()) else {
                return None;
            };
            cmd.get_arguments()
                .find(|a| a.get_short() == Some(c) && takes_value(a))
        });
        if let Some(long) = option.and_then(Arg::get_long) {
            return Some(format!(
                "to give '{unexpected}' as the value of --{long}, write '--{long}={unexpected}'"
            ));
        }
    }
    let name = cmd.get_name();
    if PROGRAM_AFTER_SEPARATOR.contains(&name) {
        // After `--` comes the program: clap's tip would run `unexpected` as one.
        return None;
    }
    let tool = match name {
        "bench" => "llama-bench",
        "verify" => "llama-perplexity and llama-completion",
        _ => return None,
    };
    let key = unexpected.strip_prefix("--").map(|k| match k {
        "profile-file" => "file",
        k => k,
    });
    if let Some(key) = key.filter(|k| PROFILE_KEYS.contains(k)) {
        let value = args
            .get(at + 1)
            .and_then(|v| v.to_str())
            .filter(|v| !v.starts_with('-'))
            .unwrap_or(if key == "file" { "FILE.toml" } else { "N" });
        return Some(format!(
            "{name} takes profile values in an arm, with a label: --arm LABEL={key}={value}, e.g. \
             --arm a={key}={value}"
        ));
    }
    Some(format!(
        "to pass '{unexpected}' to {tool}, put it after '--' at the end: capshim {name} ... -- \
         {unexpected}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::ffi::OsStringExt as _;

    fn args(words: &[&[u8]]) -> Vec<OsString> {
        words
            .iter()
            .map(|w| OsString::from_vec(w.to_vec()))
            .collect()
    }

    fn found(words: &[&[u8]]) -> Option<(String, bool)> {
        let mut root = Cli::command();
        root.build();
        not_utf8(&root, &args(words)).map(|f| (f.given_to, f.after_separator))
    }

    const BAD: &[u8] = b"caf\xe9";

    #[test]
    fn a_value_not_in_utf8_is_traced_to_its_option() {
        let named = |words: &[&[u8]], option: &str| {
            assert_eq!(found(words), Some((option.to_string(), false)), "{words:?}");
        };
        named(&[b"bench", b"--arm", BAD], "--arm");
        named(&[b"bench", b"--profile", BAD], "--profile");
        named(
            &[b"run", b"--cpu-brand", BAD, b"--", b"true"],
            "--cpu-brand",
        );
        named(
            &[b"run", b"--only-process", BAD, b"--", b"x"],
            "--only-process",
        );
        named(
            &[b"run", b"--only-process=caf\xe9", b"--", b"x"],
            "--only-process",
        );
        named(&[b"explain", b"--family-max", BAD], "--family-max");
        // A path before it may be in any encoding: the culprit is the text option after it.
        named(
            &[b"bench", b"-m", b"/m/caf\xe9.gguf", b"--arm", BAD],
            "--arm",
        );
        named(&[b"bench", b"-mx.gguf", b"--cpu-brand=\xff"], "--cpu-brand");
        // After `--`: run's program passes through; bench records llama-bench's arguments.
        assert_eq!(found(&[b"run", b"--", b"printf", BAD]), None);
        assert_eq!(
            found(&[b"bench", b"-m", b"x", b"--", b"-p", BAD]),
            Some(("<LLAMA_BENCH_ARGS>".to_string(), true))
        );
    }

    #[test]
    fn the_separator_tip_is_dropped_before_a_program() {
        let argv = args(&[b"run", b"--require-active", b"-x", b"prog"]);
        let mut root = Cli::command();
        root.build();
        let run = root.find_subcommand("run").unwrap();
        assert_eq!(right_tip(run, &argv, "-x"), None);
        let bench = root.find_subcommand("bench").unwrap();
        let argv = args(&[b"bench", b"-ngl", b"99"]);
        assert_eq!(
            right_tip(bench, &argv, "-ngl").as_deref(),
            Some(
                "to pass '-ngl' to llama-bench, put it after '--' at the end: capshim bench ... -- -ngl"
            )
        );
    }
}
