//! `--profile-file FILE.toml`: the fields `apple_family_max`, `max_threadgroup_memory` and
//! `recommended_working_set_size` (each a TOML integer or a string in the shim's number
//! syntax), an optional `name`, and the optional settings tables ([`super::settings`]):
//! `[env]`, variables for the workload (`GGML_METAL_NO_RESIDENCY = "1"`; a string, integer or
//! boolean, set as written), and `[args]`, tool arguments with one key per tool (`bench`,
//! `common`, `command`), each a string split into words as a shell splits them or an array of
//! words. Files of the four fields alone read as before; any other field is refused.

use std::path::Path;

use capshim_profile::number::parse_u64;
use serde::Deserialize;

use super::settings::{self, ToolArgs};
use super::{Fields, ProfileArgsError};

/// The fields of a `--profile-file` TOML file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ProfileFile {
    name: Option<String>,
    apple_family_max: Option<FileNumber>,
    max_threadgroup_memory: Option<FileNumber>,
    recommended_working_set_size: Option<FileNumber>,
    #[serde(default)]
    env: toml::Table,
    #[serde(default)]
    args: toml::Table,
}

/// What a profile file holds.
#[derive(Debug, Default)]
pub(super) struct Parsed {
    /// `name`.
    pub name: Option<String>,
    /// The shim's values.
    pub fields: Fields,
    /// `[env]`, in the file's order.
    pub env: Vec<(String, String)>,
    /// `[args]`.
    pub args: ToolArgs,
}

/// A number in a profile file: a TOML integer, or a string in the shim's number syntax.
/// Read as any TOML value so that a float or other type is refused naming the field.
#[derive(Debug, Deserialize)]
#[serde(transparent)]
struct FileNumber(toml::Value);

impl FileNumber {
    fn value(&self, field: &str) -> Result<u64, String> {
        match &self.0 {
            toml::Value::Integer(n) => {
                u64::try_from(*n).map_err(|_| format!("{field} = {n} is negative"))
            }
            toml::Value::String(text) => parse_u64(text.as_bytes())
                .map_err(|e| format!("{field} = {text:?} is not a number: {e}")),
            other => Err(format!(
                "{field} = {} is a {}; it must be an integer (e.g. {field} = 1007) or a number string (e.g. {field} = \"0x3ef\")",
                match other {
                    toml::Value::Float(f) => format!("{f:?}"),
                    toml::Value::Boolean(b) => b.to_string(),
                    toml::Value::Datetime(d) => d.to_string(),
                    toml::Value::Array(_) => "[…]".to_string(),
                    _ => "{…}".to_string(),
                },
                other.type_str()
            )),
        }
    }
}

/// Parses the text of a `--profile-file`. `path` is only used in messages.
pub(super) fn parse(path: &Path, text: &str) -> Result<Parsed, ProfileArgsError> {
    let bad = |message: String| ProfileArgsError::BadFile {
        path: path.to_path_buf(),
        message,
    };
    let file: ProfileFile = toml::from_str(text).map_err(|e| {
        let message = e.message();
        bad(match e.span().and_then(|span| line_at(text, span.start)) {
            Some(line) => format!("{line}: {message}"),
            None => message.to_string(),
        })
    })?;
    let number = |field: &str, value: &Option<FileNumber>| {
        value
            .as_ref()
            .map(|v| v.value(field))
            .transpose()
            .map_err(bad)
    };
    let fields = Fields {
        family_max: number("apple_family_max", &file.apple_family_max)?,
        threadgroup_memory: number("max_threadgroup_memory", &file.max_threadgroup_memory)?,
        working_set: number(
            "recommended_working_set_size",
            &file.recommended_working_set_size,
        )?,
    };
    if fields.family_max.is_none() {
        return Err(bad("apple_family_max is missing".to_string()));
    }
    Ok(Parsed {
        name: match file.name {
            // The name is printed (explain, run, bench, the reports): a control character
            // there could move the cursor or recolour a terminal.
            Some(name) if name.chars().any(char::is_control) => {
                return Err(bad(format!(
                    "name = {name:?} holds a control character; give a name of printable \
                     characters"
                )));
            }
            name => name,
        },
        fields,
        env: read_env(&file.env).map_err(bad)?,
        args: read_args(&file.args).map_err(bad)?,
    })
}

/// The `[env]` table: variable names as [`settings::is_env_name`] has them, none of capshim's.
fn read_env(table: &toml::Table) -> Result<Vec<(String, String)>, String> {
    let mut env = Vec::new();
    for (name, value) in table {
        if !settings::is_env_name(name) {
            return Err(format!(
                "[env] {name:?} is not a variable name: capitals, digits and _, e.g. \
                 GGML_METAL_NO_RESIDENCY = \"1\""
            ));
        }
        if let Some(why) = settings::reserved_var(name) {
            return Err(format!("[env] {why}; remove it from [env]"));
        }
        let value = match value {
            toml::Value::String(s) => s.clone(),
            toml::Value::Integer(n) => n.to_string(),
            toml::Value::Boolean(b) => b.to_string(),
            other => {
                return Err(format!(
                    "[env] {name} is a {}; give a string, e.g. {name} = \"1\"",
                    other.type_str()
                ));
            }
        };
        // A process's environment is C strings: a NUL could not be passed on.
        if value.contains('\0') {
            return Err(format!(
                "[env] {name} holds a NUL character, which no environment variable can; remove it"
            ));
        }
        env.push((name.clone(), value));
    }
    Ok(env)
}

/// The `[args]` table: one key per tool of [`settings::TOOLS`].
fn read_args(table: &toml::Table) -> Result<ToolArgs, String> {
    let mut args = ToolArgs::default();
    let keys = || {
        settings::TOOLS
            .iter()
            .map(|(k, tool)| format!("{k} ({tool})"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    for (key, value) in table {
        let Some(slot) = args.slot(key) else {
            return Err(format!(
                "[args] {key:?} names no tool; use {}, e.g. bench = \"-fa 1\"",
                keys()
            ));
        };
        *slot = match value {
            toml::Value::String(s) => {
                settings::split_words(s).map_err(|e| format!("[args] {key}: {e}"))?
            }
            toml::Value::Array(words) => words
                .iter()
                .map(|w| w.as_str().map(str::to_string))
                .collect::<Option<_>>()
                .ok_or_else(|| format!("[args] {key}: every word of the array must be a string"))?,
            other => {
                return Err(format!(
                    "[args] {key} is a {}; give a string (\"-fa 1 -ub 256\") or an array of \
                     strings ([\"-fa\", \"1\"])",
                    other.type_str()
                ));
            }
        };
    }
    Ok(args)
}

/// Where an error at byte `at` of `text` is, for a reader: `line N` and, on a `key = value`
/// line, the line itself (TOML's message for a value, such as an integer too large for
/// TOML's 64 bits, does not name its key).
fn line_at(text: &str, at: usize) -> Option<String> {
    let before = text.get(..at)?;
    let number = before.matches('\n').count() + 1;
    let start = before.rfind('\n').map_or(0, |i| i + 1);
    let line = text[start..].lines().next().unwrap_or("").trim();
    let keyed = line.split_once('=').is_some_and(|(key, _)| {
        let key = key.trim();
        !key.is_empty()
            && key
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    });
    Some(if keyed && line.len() <= 120 {
        format!("line {number}, `{line}`")
    } else {
        format!("line {number}")
    })
}

#[cfg(test)]
mod tests {
    use super::super::validate;
    use super::*;
    use capshim_profile::Profile;

    #[test]
    fn profile_files_accept_integers_and_shim_number_strings() {
        let path = Path::new("p.toml");
        let Parsed {
            name, fields: f, ..
        } = parse(
            path,
            "name = \"m1-64k\"\napple_family_max = 1007\nmax_threadgroup_memory = \"0x10000\"\n",
        )
        .unwrap();
        assert_eq!(name.as_deref(), Some("m1-64k"));
        assert_eq!(
            validate(f).unwrap(),
            Profile::new(1007, 65536, None).unwrap()
        );

        for (text, needle) in [
            ("apple_family_max = -1", "negative"),
            ("apple_family_max = \"64k\"", "not a number"),
            (
                "max_threadgroup_memory = 65536",
                "apple_family_max is missing",
            ),
            ("apple_family_max = 1009\nthreadgroup = 1", "unknown field"),
            ("apple_family_max = ", "p.toml"),
        ] {
            let err = parse(path, text).unwrap_err().to_string();
            assert!(err.contains(needle), "{text}: {err}");
            assert!(err.contains("p.toml"), "{err}");
        }
        let f = parse(path, "apple_family_max = 2002").unwrap().fields;
        assert!(matches!(validate(f), Err(ProfileArgsError::Refused(_))));
    }

    #[test]
    fn a_number_too_large_for_toml_names_its_field() {
        let path = Path::new("p.toml");
        let text = "apple_family_max = 1007\nmax_threadgroup_memory = 99999999999999999999999\n";
        let err = parse(path, text).unwrap_err().to_string();
        assert!(
            err.contains("line 2, `max_threadgroup_memory = 99999999999999999999999`: "),
            "{err}"
        );
        let err = parse(path, "apple_family_max = 18446744073709551616").unwrap_err();
        assert!(
            err.to_string().contains("line 1, `apple_family_max = "),
            "{err}"
        );
    }

    #[test]
    fn a_float_in_a_profile_file_says_what_is_accepted() {
        let path = Path::new("p.toml");
        for (text, says) in [
            (
                "apple_family_max = 1007.0",
                "apple_family_max = 1007.0 is a float",
            ),
            (
                "apple_family_max = true",
                "apple_family_max = true is a boolean",
            ),
        ] {
            let err = parse(path, text).unwrap_err().to_string();
            assert!(err.contains(says), "{err}");
            assert!(
                err.contains("must be an integer") && err.contains("or a number string"),
                "{err}"
            );
            assert!(err.contains("p.toml") && !err.contains("untagged"), "{err}");
        }
    }

    #[test]
    fn env_and_args_tables_are_read_and_old_files_stay_valid() {
        let path = Path::new("p.toml");
        let old = parse(path, "apple_family_max = 1007").unwrap();
        assert!(old.env.is_empty() && old.args.is_empty());
        let p = parse(
            path,
            "apple_family_max = 1007\n[env]\nGGML_METAL_NO_RESIDENCY = \"1\"\nLLAMA_ARG_THREADS = 4\n\
             [args]\nbench = \"-fa 1 -ub 256\"\ncommon = [\"-fa\", \"on\"]\n",
        )
        .unwrap();
        assert_eq!(
            p.env,
            [
                ("GGML_METAL_NO_RESIDENCY".to_string(), "1".to_string()),
                ("LLAMA_ARG_THREADS".to_string(), "4".to_string())
            ]
        );
        assert_eq!(p.args.bench, ["-fa", "1", "-ub", "256"]);
        assert_eq!(p.args.common, ["-fa", "on"]);
        assert!(p.args.command.is_empty());
        for (text, says) in [
            ("[env]\nCAPSHIM_LOG = \"x\"", "set by capshim"),
            ("[env]\nggml = \"1\"", "not a variable name"),
            ("[env]\nX = 1.5", "X is a float"),
            (
                "[args]\nllama = \"-fa 1\"",
                "names no tool; use bench (llama-bench)",
            ),
            ("[args]\nbench = \"-ot 'x\"", "left open"),
            ("[args]\nbench = [1]", "must be a string"),
            ("[flags]\nx = 1", "unknown field"),
            ("[env]\nA = \"x\\u0000y\"", "A holds a NUL character"),
            ("name = \"a\\nb\"", "holds a control character"),
            ("name = \"\\u001b[31mRED\"", "holds a control character"),
        ] {
            let err = parse(path, &format!("apple_family_max = 1007\n{text}"))
                .unwrap_err()
                .to_string();
            assert!(err.contains(says), "{text}: {err}");
        }
    }
}
