//! A candidate's arm: the reference's settings with exactly the candidate's knobs changed.
//!
//! The reference (`--reference`, bench's arm grammar) may carry a profile, variables and tool
//! arguments of its own; a candidate keeps all of them but what its knobs set: a variable
//! replaces the reference's value of that variable, a tool option (`-fa 1`) replaces the
//! reference's value of that option (under any of its spellings, `-fa` or `--flash-attn`) in
//! that tool's arguments, and the profile knob replaces only the profile (a profile file's
//! `[env]` and `[args]` are then kept as items of the arm).

use crate::arms::Arm;
use crate::arms::spec;
use crate::profile::settings::{self, ToolArgs};

/// Spellings of one option, for the tool options the catalogue's knobs set (llama-bench and
/// llama.cpp's common tools spell these alike).
const ALIASES: &[&[&str]] = &[
    &["-fa", "--flash-attn"],
    &["-ub", "--ubatch-size"],
    &["-b", "--batch-size"],
    &["-t", "--threads"],
];

/// The tools an arm's arguments are written for: the item key and the [`ToolArgs`] slot.
const TOOLS: [(&str, &str); 3] = spec::ARGS_KEYS;

/// The reference's settings, split by kind: what every candidate starts from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Base {
    /// The items that choose the profile, as written (`native`, `file=slow.toml`,
    /// `family-max=1009`); empty for an arm that gives none.
    pub profile: Vec<String>,
    /// The reference's own variables (its items), in order.
    pub env: Vec<(String, String)>,
    /// The reference's own tool arguments (its items).
    pub args: ToolArgs,
    /// A profile file's path, with its `[env]` and `[args]` as the reference resolved them.
    pub file: Option<FileSettings>,
}

/// A reference's profile file and its own settings.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FileSettings {
    /// The path as the reference gave it.
    pub path: String,
    /// Its `[env]` (those the reference's items do not set again).
    pub env: Vec<(String, String)>,
    /// Its `[args]`.
    pub args: ToolArgs,
}

impl Base {
    /// The reference of items `items` (its `--arm` text without the label), resolved as `arm`
    /// (whose profile file's `[env]` and `[args]` come before its items' own); `arm` may be
    /// `None` where no profile file is given.
    ///
    /// # Errors
    /// The arms grammar's message for items that do not parse.
    pub fn new(items: &str, arm: Option<&Arm>) -> Result<Base, String> {
        let parsed = spec::parse(&format!("reference={items}")).map_err(|e| e.to_string())?;
        let mut base = Base {
            env: parsed.env.clone(),
            args: parsed.args.clone(),
            ..Base::default()
        };
        base.profile.extend(parsed.name.clone());
        if let Some(file) = &parsed.file {
            base.profile.push(format!("file={}", file.display()));
        }
        for (key, value) in [
            ("family-max", parsed.family_max),
            ("threadgroup-memory", parsed.threadgroup_memory),
            ("working-set", parsed.working_set),
        ] {
            base.profile.extend(value.map(|v| format!("{key}={v}")));
        }
        if let (Some(file), Some(arm)) = (&parsed.file, arm) {
            let env: Vec<(String, String)> = arm
                .env
                .iter()
                .filter(|(n, _)| !parsed.env.iter().any(|(m, _)| m == n))
                .cloned()
                .collect();
            let mut args = arm.args.clone();
            let mut own = parsed.args.clone();
            for (_, tool) in TOOLS {
                let (all, mine) = (
                    args.slot(tool).expect("a tool"),
                    own.slot(tool).expect("a tool"),
                );
                all.truncate(all.len().saturating_sub(mine.len()));
            }
            base.file = Some(FileSettings {
                path: file.display().to_string(),
                env,
                args,
            });
        }
        Ok(base)
    }

    /// The `--arm` text of the candidate labelled `label` that changes `items` (in the arms
    /// grammar: a profile name, `NAME=VALUE`, `bench-args=...`, `common-args=...`,
    /// `command-args=...`) from this reference.
    ///
    /// # Errors
    /// Why the candidate cannot be written as an arm: an option the reference's profile file
    /// gives in its `[args]`, which an arm's items cannot replace.
    pub fn arm_spec<'a>(
        &self,
        label: &str,
        items: impl IntoIterator<Item = &'a String>,
    ) -> Result<String, String> {
        let (mut profile, mut env, mut args) = (None, Vec::new(), ToolArgs::default());
        for item in items {
            let tool = TOOLS.iter().find_map(|(key, tool)| {
                item.strip_prefix(key)
                    .and_then(|r| r.strip_prefix('='))
                    .map(|words| (*tool, words))
            });
            if let Some((tool, words)) = tool {
                let words = settings::split_words(words)?;
                args.slot(tool).expect("a tool").extend(words);
            } else if let Some((name, value)) = item.split_once('=') {
                env.push((name.to_string(), value.to_string()));
            } else {
                profile = Some(item.clone());
            }
        }
        let mut out_profile = self.profile.clone();
        let (mut out_env, mut out_args) = (Vec::new(), ToolArgs::default());
        match (&profile, &self.file) {
            // The profile replaced: a profile file's own settings become the arm's items.
            (Some(name), file) => {
                out_profile = vec![name.clone()];
                if let Some(file) = file {
                    out_env.extend(file.env.iter().cloned());
                    out_args.extend(&file.args);
                }
            }
            (
                None,
                Some(FileSettings {
                    path,
                    args: file_args,
                    ..
                }),
            ) => {
                for (key, tool) in TOOLS {
                    let mine = args.slot(tool).expect("a tool").clone();
                    let theirs = get(file_args, tool);
                    if let Some((flag, given)) = settings::repeated(&mine, theirs, ALIASES) {
                        return Err(format!(
                            "the reference's profile file {path} gives {given} in its [args], \
                             which an arm's {key} cannot replace; give that option in the \
                             reference's {key}= instead of the file to tune {flag}"
                        ));
                    }
                }
            }
            (None, None) => {}
        }
        for (name, value) in &self.env {
            if !env.iter().any(|(n, _)| n == name) {
                out_env.retain(|(n, _)| n != name);
                out_env.push((name.clone(), value.clone()));
            }
        }
        for (name, value) in env {
            out_env.retain(|(n, _)| *n != name);
            out_env.push((name, value));
        }
        for (_, tool) in TOOLS {
            let mine = args.slot(tool).expect("a tool").clone();
            let kept = without_options(get(&self.args, tool), &mine);
            let slot = out_args.slot(tool).expect("a tool");
            slot.extend(kept);
            slot.extend(mine);
        }
        let mut all: Vec<String> = out_profile;
        all.extend(out_env.iter().map(|(n, v)| format!("{n}={v}")));
        for (key, tool) in TOOLS {
            let words = out_args.slot(tool).expect("a tool");
            if !words.is_empty() {
                let quoted: Vec<String> = words.iter().map(|w| quote(w)).collect();
                all.push(format!("{key}={}", quoted.join(" ")));
            }
        }
        Ok(format!("{label}={}", all.join(",")))
    }
}

/// The arguments of `args` for the tool `tool` (a [`ToolArgs`] slot name).
fn get<'a>(args: &'a ToolArgs, tool: &str) -> &'a [String] {
    match tool {
        "bench" => &args.bench,
        "common" => &args.common,
        _ => &args.command,
    }
}

/// `args` without the options that `replacing` gives (under any spelling), each with its value.
fn without_options(args: &[String], replacing: &[String]) -> Vec<String> {
    let flags: Vec<&str> = settings::options(replacing).collect();
    let same = |flag: &str| {
        flags.iter().any(|f| {
            *f == flag
                || ALIASES
                    .iter()
                    .any(|group| group.contains(f) && group.contains(&flag))
        })
    };
    let mut out = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let word = &args[i];
        let flag = word.split_once('=').map_or(word.as_str(), |(f, _)| f);
        let is_option = settings::options(std::slice::from_ref(word))
            .next()
            .is_some();
        if is_option && same(flag) {
            let attached = word.contains('=');
            let next_is_value = args
                .get(i + 1)
                .is_some_and(|n| settings::options(std::slice::from_ref(n)).next().is_none());
            i += if !attached && next_is_value { 2 } else { 1 };
            continue;
        }
        out.push(word.clone());
        i += 1;
    }
    out
}

/// A word as the arms grammar reads it back: plain when it holds nothing special, else in
/// double quotes with `"` and `\` escaped.
fn quote(word: &str) -> String {
    if !word.is_empty()
        && !word
            .chars()
            .any(|c| c.is_whitespace() || "'\",\\".contains(c))
    {
        return word.to_string();
    }
    let escaped = word.replace('\\', "\\\\").replace('"', "\\\"");
    format!("\"{escaped}\"")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn items(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_knob_replaces_only_its_own_value_and_keeps_the_reference_s_other_settings() {
        let base = Base::new("stock,GGML_X=1,bench-args=-fa 0 -ngl 99", None).unwrap();
        assert_eq!(
            base.arm_spec("fa-on", &items(&["bench-args=-fa 1", "common-args=-fa on"])),
            Ok("fa-on=stock,GGML_X=1,bench-args=-ngl 99 -fa 1,common-args=-fa on".into())
        );
        // Another spelling of the option is replaced too; an attached value goes with it.
        let base = Base::new("native,bench-args=--flash-attn=0 -ub 64", None).unwrap();
        assert_eq!(
            base.arm_spec("fa-on", &items(&["bench-args=-fa 1"])),
            Ok("fa-on=native,bench-args=-ub 64 -fa 1".into())
        );
        // A profile knob replaces the profile only.
        let base = Base::new("stock,GGML_X=1,bench-args=-fa 0", None).unwrap();
        assert_eq!(
            base.arm_spec("apple9-64k", &items(&["apple9-64k"])),
            Ok("apple9-64k=apple9-64k,GGML_X=1,bench-args=-fa 0".into())
        );
        // A variable replaces the reference's value of it.
        let base = Base::new("native,GGML_X=1,GGML_Y=2", None).unwrap();
        assert_eq!(
            base.arm_spec("y", &items(&["GGML_Y=3"])),
            Ok("y=native,GGML_X=1,GGML_Y=3".into())
        );
        // Words that need quotes keep them.
        let base = Base::new("native,bench-args='a b' -fa 0", None).unwrap();
        assert_eq!(
            base.arm_spec("fa-on", &items(&["bench-args=-fa 1"])),
            Ok("fa-on=native,bench-args=\"a b\" -fa 1".into())
        );
    }

    #[test]
    fn a_profile_file_s_arguments_are_kept_or_named_as_the_reason() {
        let mut base = Base::new("file=slow.toml", None).unwrap();
        base.file = Some(FileSettings {
            path: "slow.toml".into(),
            env: vec![("GGML_F".into(), "1".into())],
            args: ToolArgs {
                bench: items(&["-fa", "0"]),
                ..ToolArgs::default()
            },
        });
        let err = base
            .arm_spec("fa-on", &items(&["bench-args=-fa 1"]))
            .unwrap_err();
        assert!(err.contains("slow.toml gives -fa in its [args]"), "{err}");
        assert_eq!(
            base.arm_spec("ub", &items(&["bench-args=-ub 256"])),
            Ok("ub=file=slow.toml,bench-args=-ub 256".into())
        );
        assert_eq!(
            base.arm_spec("apple9-64k", &items(&["apple9-64k"])),
            Ok("apple9-64k=apple9-64k,GGML_F=1,bench-args=-fa 0".into())
        );
    }
}
