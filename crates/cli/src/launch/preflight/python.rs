//! A framework Python's launcher and the interpreter it becomes: python.org's and
//! Homebrew's `bin/python3.x` re-execs `Python.app/Contents/MacOS/Python` in the same
//! process with the same environment (docs/apple-runtime.md, rule 9), so the shim must load
//! into that interpreter too, and it is checked as the program is.

use std::path::{Path, PathBuf};

use super::PreflightError;
use super::target::{self, Subject};
use crate::platform::facts::SystemFacts;
use crate::platform::sip::Sip;

/// The interpreter a framework Python's launcher re-execs in the same process: for
/// `…/Python.framework/Versions/V/bin/python3.x` (python.org and Homebrew Pythons, and venvs
/// whose `python` links there), `…/Python.framework/Versions/V/Resources/Python.app/Contents/MacOS/Python`.
/// `None` for any other program. Symbolic links are followed on the real file system.
pub fn framework_interpreter(program: &Path) -> Option<PathBuf> {
    let real = program
        .canonicalize()
        .unwrap_or_else(|_| program.to_path_buf());
    let named = |path: &Path, name: &str| path.file_name().is_some_and(|n| n == name);
    if !real.file_name()?.to_str()?.starts_with("python") {
        return None;
    }
    let bin = real.parent()?;
    let version = bin.parent()?;
    let versions = version.parent()?;
    let framework = versions.parent()?;
    (named(bin, "bin") && named(versions, "Versions") && named(framework, "Python.framework"))
        .then(|| version.join("Resources/Python.app/Contents/MacOS/Python"))
}

/// Checks the interpreter `launcher` re-execs as the program itself is checked; a refusal
/// names both. A missing interpreter is a warning: the launcher then fails on its own.
pub(super) fn check(
    facts: &dyn SystemFacts,
    subject: &Subject<'_>,
    launcher: &Path,
    interpreter: &Path,
    sip: &dyn Fn() -> Sip,
) -> Result<Vec<String>, PreflightError> {
    if facts.file_mode(interpreter).is_err() {
        return Ok(vec![format!(
            "{} is a framework Python launcher, but the interpreter it re-execs, {}, is missing; check the Python installation",
            launcher.display(),
            interpreter.display()
        )]);
    }
    target::check(facts, subject, interpreter, sip).map_err(|error| match error {
        PreflightError::WillNotLoad {
            subject,
            restriction,
        } => PreflightError::WillNotLoad {
            subject: format!(
                "{subject}, the interpreter that {} re-execs in the same process (a framework Python's launcher)",
                launcher.display()
            ),
            restriction,
        },
        other => other,
    })
}
