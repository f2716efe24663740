//! A per-user LaunchAgent (launchd property list) that runs one workload with the shim.
//!
//! Keys from Apple's `launchd.plist(5)`: `Label`, `ProgramArguments`,
//! `EnvironmentVariables`, `StandardOutPath`, `StandardErrorPath`, `RunAtLoad`, `KeepAlive`.

use std::io::Write;
use std::path::{Path, PathBuf};

use plist::{Dictionary, Value};
use thiserror::Error;

use super::shell_quote;

/// Everything a LaunchAgent for one workload holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Agent {
    /// launchd label, also the file name (`LABEL.plist`).
    pub label: String,
    /// The program (absolute path) and its arguments, one entry each.
    pub program_arguments: Vec<String>,
    /// The workload's environment: the shim's variables and `DYLD_INSERT_LIBRARIES` only.
    pub environment: Vec<(String, String)>,
    /// `StandardOutPath`, absolute.
    pub stdout: Option<PathBuf>,
    /// `StandardErrorPath`, absolute (the shim's activation line goes here).
    pub stderr: Option<PathBuf>,
    /// `KeepAlive`: restart the workload whenever it exits.
    pub keep_alive: bool,
}

/// Why the agent cannot be written.
#[derive(Debug, Error)]
pub enum AgentError {
    /// The label is not usable as a launchd label and file name.
    #[error(
        "--label {0:?} is not a usable label: use letters, digits, '.', '-' and '_' only, e.g. com.example.llama-server"
    )]
    BadLabel(String),
    /// A path that must be absolute is not.
    #[error(
        "{what} {path:?} is not an absolute path; launchd starts agents from /, so give the full path (e.g. $(command -v {path}) or $PWD/{path})"
    )]
    Relative {
        /// Which input.
        what: &'static str,
        /// The path given.
        path: String,
    },
    /// A value is not UTF-8, which a property list cannot hold.
    #[error("{what} is not valid UTF-8, which a property list cannot hold; rename it")]
    NotUtf8 {
        /// Which input.
        what: &'static str,
    },
    /// A value holds a character XML 1.0 cannot carry.
    #[error(
        "{what} {value:?} contains the control character U+{code:04X}, which a property list (XML 1.0) cannot hold; only tab, line feed and carriage return are allowed. Remove it, or start the program from a wrapper script that adds it"
    )]
    NotXml {
        /// Which input, e.g. "program argument 2".
        what: String,
        /// The value, escaped when shown.
        value: String,
        /// The offending character.
        code: u32,
    },
    /// The agent file exists and `--force` was not given.
    #[error(
        "{0} already exists; nothing was changed. Pass --force to replace it, or choose another --label"
    )]
    Exists(PathBuf),
    /// `HOME` is not set.
    #[error("HOME is not set, so ~/Library/LaunchAgents cannot be found; set HOME and retry")]
    NoHome,
    /// Writing failed.
    #[error("cannot write {path}: {source}; check the folder's permissions")]
    Write {
        /// The file or folder.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// Checks a launchd label: non-empty, letters, digits, `.`, `-`, `_`.
pub fn check_label(label: &str) -> Result<(), AgentError> {
    let ok = !label.is_empty()
        && !label.starts_with('.')
        && label
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c));
    if ok {
        Ok(())
    } else {
        Err(AgentError::BadLabel(label.to_string()))
    }
}

/// Checks that `text` holds only characters XML 1.0 can carry (`Char`: tab, LF, CR and
/// everything from U+0020 but U+FFFE and U+FFFF), naming `what` otherwise.
///
/// # Errors
/// [`AgentError::NotXml`].
pub fn check_xml_text(what: impl FnOnce() -> String, text: &str) -> Result<(), AgentError> {
    let bad = text.chars().find(|&c| {
        (c < ' ' && !matches!(c, '\t' | '\n' | '\r')) || matches!(c, '\u{fffe}' | '\u{ffff}')
    });
    match bad {
        None => Ok(()),
        Some(c) => Err(AgentError::NotXml {
            what: what(),
            value: text.to_string(),
            code: u32::from(c),
        }),
    }
}

/// Checks that `path` is absolute, naming `what` otherwise.
pub fn check_absolute(what: &'static str, path: &Path) -> Result<(), AgentError> {
    if path.is_absolute() {
        Ok(())
    } else {
        Err(AgentError::Relative {
            what,
            path: path.display().to_string(),
        })
    }
}

impl Agent {
    /// Checks that every value can be written into the property list.
    ///
    /// # Errors
    /// [`AgentError::NotXml`] naming the program argument, variable or path.
    pub fn check_xml(&self) -> Result<(), AgentError> {
        for (i, arg) in self.program_arguments.iter().enumerate() {
            check_xml_text(
                || {
                    if i == 0 {
                        "the program path".to_string()
                    } else {
                        format!("program argument {i}")
                    }
                },
                arg,
            )?;
        }
        for (name, value) in &self.environment {
            check_xml_text(|| format!("environment variable {name}"), value)?;
        }
        for (what, path) in [("--stdout", &self.stdout), ("--stderr", &self.stderr)] {
            if let Some(path) = path {
                check_xml_text(|| what.to_string(), &path.display().to_string())?;
            }
        }
        Ok(())
    }

    /// The property list as a launchd dictionary.
    pub fn to_value(&self) -> Value {
        let mut dict = Dictionary::new();
        dict.insert("Label".into(), Value::String(self.label.clone()));
        dict.insert(
            "ProgramArguments".into(),
            Value::Array(
                self.program_arguments
                    .iter()
                    .map(|a| Value::String(a.clone()))
                    .collect(),
            ),
        );
        let mut env = Dictionary::new();
        for (k, v) in &self.environment {
            env.insert(k.clone(), Value::String(v.clone()));
        }
        dict.insert("EnvironmentVariables".into(), Value::Dictionary(env));
        if let Some(path) = &self.stdout {
            dict.insert(
                "StandardOutPath".into(),
                Value::String(path.display().to_string()),
            );
        }
        if let Some(path) = &self.stderr {
            dict.insert(
                "StandardErrorPath".into(),
                Value::String(path.display().to_string()),
            );
        }
        dict.insert("RunAtLoad".into(), Value::Boolean(true));
        if self.keep_alive {
            dict.insert("KeepAlive".into(), Value::Boolean(true));
        }
        Value::Dictionary(dict)
    }

    /// The property list as XML text.
    pub fn to_xml(&self) -> String {
        let mut out = Vec::new();
        self.to_value()
            .to_writer_xml(&mut out)
            .expect("writing a plist to memory cannot fail");
        out.push(b'\n');
        String::from_utf8(out).expect("plist XML is UTF-8")
    }

    /// `~/Library/LaunchAgents/LABEL.plist` under `home`.
    pub fn install_path(&self, home: &Path) -> PathBuf {
        home.join("Library/LaunchAgents")
            .join(format!("{}.plist", self.label))
    }

    /// Writes the property list to [`Agent::install_path`], atomically; never replaces an
    /// existing file unless `force`.
    ///
    /// # Errors
    /// [`AgentError::Exists`] when the file exists without `force`; [`AgentError::Write`].
    pub fn install(&self, home: &Path, force: bool) -> Result<PathBuf, AgentError> {
        let path = self.install_path(home);
        let dir = path.parent().expect("install path has a folder");
        let write_error = |p: &Path| {
            let p = p.to_path_buf();
            move |source| AgentError::Write { path: p, source }
        };
        if path.exists() && !force {
            return Err(AgentError::Exists(path));
        }
        std::fs::create_dir_all(dir).map_err(write_error(dir))?;
        let mut temp = tempfile::Builder::new()
            .prefix(".capshim-agent-")
            .tempfile_in(dir)
            .map_err(write_error(dir))?;
        temp.write_all(self.to_xml().as_bytes())
            .map_err(write_error(temp.path()))?;
        if force {
            temp.persist(&path)
                .map_err(|e| write_error(&path)(e.error))?;
        } else {
            temp.persist_noclobber(&path).map_err(|e| {
                if e.error.kind() == std::io::ErrorKind::AlreadyExists {
                    AgentError::Exists(path.clone())
                } else {
                    write_error(&path)(e.error)
                }
            })?;
        }
        Ok(path)
    }

    /// The `launchctl` commands to load, restart and unload the agent at `path`.
    pub fn launchctl_commands(&self, path: &Path) -> Vec<(&'static str, String)> {
        let domain = "gui/$(id -u)";
        let path = shell_quote(&path.display().to_string());
        let target = format!("{domain}/{}", self.label);
        vec![
            (
                "load and start",
                format!("launchctl bootstrap {domain} {path}"),
            ),
            ("restart", format!("launchctl kickstart -k {target}")),
            ("stop and unload", format!("launchctl bootout {target}")),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agent() -> Agent {
        Agent {
            label: "com.example.llama-server".into(),
            program_arguments: vec![
                "/opt/llama/bin/llama-server".into(),
                "-m".into(),
                "/Users/me/models/tiny llama.gguf".into(),
                "--port".into(),
                "8080".into(),
            ],
            environment: vec![
                ("CAPSHIM_APPLE_FAMILY_MAX".into(), "1007".into()),
                ("CAPSHIM_MAX_THREADGROUP_MEMORY".into(), "32768".into()),
                (
                    "DYLD_INSERT_LIBRARIES".into(),
                    "/usr/local/lib/capshim/libcapshim.dylib".into(),
                ),
            ],
            stdout: Some("/tmp/llama-server.out.log".into()),
            stderr: Some("/tmp/llama-server.err.log".into()),
            keep_alive: true,
        }
    }

    #[test]
    fn plist_has_one_entry_per_argument_and_parses_back() {
        let a = agent();
        let xml = a.to_xml();
        insta::assert_snapshot!("agent_plist", xml);
        let back = Value::from_reader_xml(xml.as_bytes()).unwrap();
        assert_eq!(back, a.to_value());
        let dict = back.as_dictionary().unwrap();
        let args = dict["ProgramArguments"].as_array().unwrap();
        assert_eq!(args.len(), 5);
        assert_eq!(
            args[2].as_string(),
            Some("/Users/me/models/tiny llama.gguf")
        );
        assert_eq!(
            dict["EnvironmentVariables"].as_dictionary().unwrap().len(),
            3
        );
    }

    #[test]
    fn labels_and_paths_are_checked() {
        check_label("com.example.llama-server").unwrap();
        for bad in ["", "a/b", "../x", "with space", ".hidden"] {
            assert!(check_label(bad).is_err(), "{bad:?}");
        }
        let err = check_absolute("program", Path::new("llama-server")).unwrap_err();
        assert!(err.to_string().contains("absolute"), "{err}");
    }

    #[test]
    fn install_never_overwrites_without_force() {
        let home = tempfile::tempdir().unwrap();
        let a = agent();
        let path = a.install(home.path(), false).unwrap();
        assert_eq!(
            path,
            home.path()
                .join("Library/LaunchAgents/com.example.llama-server.plist")
        );
        std::fs::write(&path, "user's own file").unwrap();
        let err = a.install(home.path(), false).unwrap_err();
        assert!(matches!(err, AgentError::Exists(_)), "{err}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "user's own file");
        a.install(home.path(), true).unwrap();
        assert!(
            std::fs::read_to_string(&path)
                .unwrap()
                .contains("<key>Label</key>")
        );
        let leftovers: Vec<_> = std::fs::read_dir(path.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(leftovers.len(), 1, "{leftovers:?}");
        let cmds = a.launchctl_commands(&path);
        assert!(
            cmds[0].1.starts_with("launchctl bootstrap gui/$(id -u) /"),
            "{cmds:?}"
        );
        assert_eq!(
            cmds[2].1,
            "launchctl bootout gui/$(id -u)/com.example.llama-server"
        );
    }
}
