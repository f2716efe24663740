//! One arm as written on the command line: `[LABEL=]ITEM[,ITEM...]`, parsed into a [`Spec`]
//! before any profile is looked up.
//!
//! An item is a named profile (`apple9-64k`), a profile file (`file=m1.toml`), a profile
//! value (`family-max=1007`, `threadgroup-memory=32768`, `working-set=BYTES`, as `capshim
//! run` takes them), or an environment variable for llama.cpp in this arm only
//! (`GGML_METAL_BF16_DISABLE=1`: a name in capitals, digits and `_`), or tool arguments for
//! this arm only, per tool they are written for: `bench-args=` (llama-bench), `common-args=`
//! (llama.cpp's common tools: verify's llama-perplexity and llama-completion) and
//! `command-args=` (appended to `capshim bench --command`'s command), e.g.
//! `fa1=native,bench-args=-fa 1 -ub 256,common-args=-fa on -ub 256`. An arguments item's value
//! is split into words as [`crate::profile::settings`] describes (a shell's quoting, no
//! expansions); a comma inside quotes does not end it. A value without `=` is a profile name
//! that labels its own arm (`--profile apple9-64k`).

use std::path::PathBuf;

use capshim_profile::named;
use capshim_profile::number::parse_u64;

use super::ArmError;
use crate::profile::settings::{self, ToolArgs, is_env_name};

/// The item keys that set the profile, as `capshim run` names its options.
pub const PROFILE_KEYS: [&str; 4] = ["file", "family-max", "threadgroup-memory", "working-set"];

/// The item keys that give tool arguments, with the [`ToolArgs`] slot each fills.
pub const ARGS_KEYS: [(&str, &str); 3] = [
    ("bench-args", "bench"),
    ("common-args", "common"),
    ("command-args", "command"),
];

/// One arm as given, before its profile is resolved.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Spec {
    /// The text as given, for messages.
    pub text: String,
    /// The arm's label (the profile name when the text is only a name).
    pub label: String,
    /// A named profile.
    pub name: Option<String>,
    /// A profile file.
    pub file: Option<PathBuf>,
    /// `family-max`: the highest Apple MTLGPUFamily answered true.
    pub family_max: Option<u64>,
    /// `threadgroup-memory`: the floor for maxThreadgroupMemoryLength, in bytes.
    pub threadgroup_memory: Option<u64>,
    /// `working-set`: the floor for recommendedMaxWorkingSetSize, in bytes.
    pub working_set: Option<u64>,
    /// Environment variables for this arm's llama.cpp processes, in the order given.
    pub env: Vec<(String, String)>,
    /// Tool arguments for this arm's processes, per tool.
    pub args: ToolArgs,
}

/// Splits the items at commas; an arguments item ([`ARGS_KEYS`]) ends only at a comma outside
/// quotes, so that its words may hold commas.
fn split_items(items: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = items;
    loop {
        let quoted = ARGS_KEYS
            .iter()
            .any(|(k, _)| rest.strip_prefix(k).is_some_and(|r| r.starts_with('=')));
        let end = if quoted {
            let (mut quote, mut escaped) = (None, false);
            rest.char_indices()
                .find(|&(_, c)| {
                    if escaped {
                        escaped = false;
                        return false;
                    }
                    match (quote, c) {
                        (Some('"'), '\\') | (None, '\\') => escaped = true,
                        (Some(q), c) if c == q => quote = None,
                        (None, '\'' | '"') => quote = Some(c),
                        (None, ',') => return true,
                        _ => {}
                    }
                    false
                })
                .map(|(i, _)| i)
        } else {
            rest.find(',')
        };
        match end {
            Some(i) => {
                out.push(&rest[..i]);
                rest = &rest[i + 1..];
            }
            None => {
                out.push(rest);
                return out;
            }
        }
    }
}

/// Whether `label` can name an arm (it names raw files): 1 to 64 ASCII letters, digits, `.`,
/// `_` or `-`, not starting with `.` or `-`.
pub fn valid_label(label: &str) -> bool {
    (1..=64).contains(&label.len())
        && !label.starts_with(['.', '-'])
        && label
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
}

/// Parses one `--arm` / `--profile` value.
///
/// # Errors
/// [`ArmError::Syntax`] naming the part at fault, or [`ArmError::BadLabel`].
pub fn parse(text: &str) -> Result<Spec, ArmError> {
    let syntax = |problem: String| ArmError::Syntax {
        spec: text.to_string(),
        problem,
    };
    let (label, items) = match text.split_once('=') {
        // `host` alone is the native profile (`host` now names only the bare-metal baseline),
        // in an arm of that name.
        None if text == named::HOST_ALIAS => (named::NATIVE, text),
        None => (text, text),
        Some((label, items)) => {
            if PROFILE_KEYS.contains(&label)
                || ARGS_KEYS.iter().any(|(k, _)| *k == label)
                || is_env_name(label)
            {
                return Err(syntax(format!(
                    "{label:?} is an item, not a label; put a label first, e.g. `arm1={text}`"
                )));
            }
            if label.contains(',') {
                let name = label.split(',').next().unwrap_or_default();
                return Err(syntax(format!(
                    "an arm with more than a profile name needs a label first, e.g. `{name}-x={text}`"
                )));
            }
            (label, items)
        }
    };
    if !valid_label(label) {
        return Err(ArmError::BadLabel {
            spec: text.to_string(),
            label: label.to_string(),
        });
    }
    let mut spec = Spec {
        text: text.to_string(),
        label: label.to_string(),
        ..Spec::default()
    };
    for item in split_items(items) {
        let Some((key, value)) = item.split_once('=') else {
            if item.is_empty() {
                return Err(syntax(
                    "an item is empty (two commas, or one at an end)".into(),
                ));
            }
            if let Some(first) = &spec.name {
                return Err(syntax(format!(
                    "it names two profiles, {first:?} and {item:?}; an arm has one"
                )));
            }
            spec.name = Some(item.to_string());
            continue;
        };
        let number = |what: &str| {
            parse_u64(value.as_bytes()).map_err(|e| {
                syntax(format!(
                    "{key}={value:?} is not a number ({e}); give {what} in decimal or 0x hex"
                ))
            })
        };
        let slot = match key {
            "file" => {
                if value.is_empty() {
                    return Err(syntax("file= needs the profile file's path".into()));
                }
                spec.file.replace(PathBuf::from(value)).map(|_| ())
            }
            "family-max" => spec
                .family_max
                .replace(number("an MTLGPUFamily")?)
                .map(|_| ()),
            "threadgroup-memory" => spec
                .threadgroup_memory
                .replace(number("bytes")?)
                .map(|_| ()),
            "working-set" => spec.working_set.replace(number("bytes")?).map(|_| ()),
            key if ARGS_KEYS.iter().any(|(k, _)| *k == key) => {
                let tool = ARGS_KEYS.iter().find(|(k, _)| *k == key).map(|(_, t)| *t);
                let words =
                    settings::split_words(value).map_err(|e| syntax(format!("{key}: {e}")))?;
                if words.is_empty() {
                    return Err(syntax(format!("{key}= needs the tool's arguments")));
                }
                let slot = spec.args.slot(tool.unwrap_or_default()).expect("a tool");
                if slot.is_empty() {
                    *slot = words;
                    None
                } else {
                    Some(())
                }
            }
            name if is_env_name(name) => {
                if settings::reserved_var(name).is_some() {
                    return Err(syntax(format!(
                        "{name} is set by capshim from the arm's profile; use the profile items \
                         ({}) instead",
                        PROFILE_KEYS.join(", ")
                    )));
                }
                if spec.env.iter().any(|(k, _)| k == name) {
                    Some(())
                } else {
                    spec.env.push((name.to_string(), value.to_string()));
                    None
                }
            }
            other => {
                return Err(syntax(format!(
                    "{other:?} is not an item: use a profile name, {}=..., {}=..., or an \
                     environment variable in capitals such as GGML_METAL_BF16_DISABLE=1",
                    PROFILE_KEYS.join("=..., "),
                    ARGS_KEYS.map(|(k, _)| k).join("=..., ")
                )));
            }
        };
        if slot.is_some() {
            return Err(syntax(format!("{key} is given twice")));
        }
    }
    if spec.name.is_some() && spec.file.is_some() {
        return Err(syntax(
            "it names a profile and a profile file; give one of them".into(),
        ));
    }
    Ok(spec)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> String {
        parse(text).unwrap_err().to_string()
    }

    #[test]
    fn a_bare_name_labels_its_own_arm() {
        let s = parse("apple9-64k").unwrap();
        assert_eq!(s.label, "apple9-64k");
        assert_eq!(s.name.as_deref(), Some("apple9-64k"));
        assert!(s.env.is_empty());
        let s = parse("again=stock").unwrap();
        assert_eq!(
            (s.label.as_str(), s.name.as_deref()),
            ("again", Some("stock"))
        );
    }

    #[test]
    fn items_set_the_profile_and_the_environment() {
        let s = parse("apple9-nobf16=apple9-64k,GGML_METAL_BF16_DISABLE=1").unwrap();
        assert_eq!(s.label, "apple9-nobf16");
        assert_eq!(s.name.as_deref(), Some("apple9-64k"));
        assert_eq!(
            s.env,
            vec![("GGML_METAL_BF16_DISABLE".to_string(), "1".to_string())]
        );
        let s =
            parse("a7=family-max=1007,threadgroup-memory=0x8000,working-set=17179869184").unwrap();
        assert_eq!(s.name, None);
        assert_eq!(s.family_max, Some(1007));
        assert_eq!(s.threadgroup_memory, Some(32768));
        assert_eq!(s.working_set, Some(1 << 34));
        let s = parse("m1=file=profiles/m1.toml,GGML_METAL_NO_RESIDENCY=1").unwrap();
        assert_eq!(s.file, Some(PathBuf::from("profiles/m1.toml")));
        // Only variables: the default profile, with them.
        let s = parse("x=GGML_METAL_NO_RESIDENCY=1").unwrap();
        assert_eq!((s.name, s.file, s.family_max), (None, None, None));
    }

    #[test]
    fn argument_items_go_to_their_tool_and_may_hold_quoted_commas() {
        let s = parse("fa1=native,bench-args=-fa 1 -ub 256,common-args=-fa on,GGML_X=1").unwrap();
        assert_eq!(s.name.as_deref(), Some("native"));
        assert_eq!(s.args.bench, ["-fa", "1", "-ub", "256"]);
        assert_eq!(s.args.common, ["-fa", "on"]);
        assert!(s.args.command.is_empty());
        assert_eq!(s.env, vec![("GGML_X".to_string(), "1".to_string())]);
        let s = parse("ot=apple9-64k,bench-args=-ot 'a=CPU,b=CPU' -t 2,GGML_Y=2").unwrap();
        assert_eq!(s.args.bench, ["-ot", "a=CPU,b=CPU", "-t", "2"]);
        assert_eq!(s.env, vec![("GGML_Y".to_string(), "2".to_string())]);
        let s = parse(r#"c=stock,command-args=--name "x, y""#).unwrap();
        assert_eq!(s.args.command, ["--name", "x, y"]);
        // Quotes in other items are kept as written, as before.
        let s = parse("q=stock,GGML_Z='a").unwrap();
        assert_eq!(s.env[0].1, "'a");
    }

    #[test]
    fn malformed_arms_say_what_to_write() {
        for (text, says) in [
            (
                "family-max=1007",
                "put a label first, e.g. `arm1=family-max=1007`",
            ),
            ("GGML_X=1", "is an item, not a label"),
            ("apple9-64k,GGML_X=1", "needs a label first"),
            ("a=apple9-64k,,GGML_X=1", "an item is empty"),
            ("a=apple9-64k,stock", "names two profiles"),
            ("a=apple9-64k,file=p.toml", "a profile and a profile file"),
            ("a=family-max=ten", "is not a number"),
            (
                "a=family-max=1007,family-max=1008",
                "family-max is given twice",
            ),
            ("a=GGML_X=1,GGML_X=2", "GGML_X is given twice"),
            ("a=CAPSHIM_LOG=queries", "set by capshim"),
            ("a=LD_PRELOAD=/x.so", "set by capshim"),
            ("a=Threads=2", "is not an item"),
            ("a=file=", "needs the profile file's path"),
            ("a=bench-args=", "needs the tool's arguments"),
            ("a=bench-args=-ot 'x", "left open"),
            (
                "a=bench-args=-t 1,bench-args=-t 2",
                "bench-args is given twice",
            ),
            ("bench-args=-t 1", "is an item, not a label"),
        ] {
            let e = err(text);
            assert!(e.contains(says), "{text}: {e}");
            assert!(e.contains(text), "{text}: the message names the arm: {e}");
        }
    }

    #[test]
    fn labels_name_files() {
        for bad in [
            "a/b=stock",
            "=stock",
            ".hidden=stock",
            "-x=stock",
            "sp ace=stock",
        ] {
            assert!(
                matches!(parse(bad), Err(ArmError::BadLabel { .. })),
                "{bad}"
            );
        }
        assert!(!valid_label(&"x".repeat(65)));
        assert!(valid_label("apple9_64k.v2-b"));
    }
}
