//! Finding the program as a shell would.

use std::ffi::OsStr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use super::PreflightError;
use crate::platform::facts::Real;

fn is_executable_file(path: &Path) -> bool {
    path.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The refusal of a file that cannot be executed: that it is no program at all when it is a
/// data format capshim recognises (a model file is no program, and `chmod +x` would not make
/// it one), else that it lacks the permission.
fn cannot_execute(path: PathBuf) -> PreflightError {
    super::not_a_program(&Real::default(), &path).unwrap_or(PreflightError::NotExecutable(path))
}

/// Finds the program as a shell would: a command with a `/` is a path, otherwise the first
/// executable file of that name in `path_var`'s folders.
///
/// # Errors
/// [`PreflightError::NotFound`], [`PreflightError::NotExecutable`], or
/// [`PreflightError::NotAProgram`] for a file that is not executable and is a data format.
pub fn resolve_program(
    command: &OsStr,
    path_var: Option<&OsStr>,
) -> Result<PathBuf, PreflightError> {
    let shown = command.to_string_lossy().into_owned();
    if command.as_encoded_bytes().contains(&b'/') {
        let path = PathBuf::from(command);
        if !path.exists() {
            return Err(PreflightError::NotFound {
                command: shown,
                searched: None,
            });
        }
        if !is_executable_file(&path) {
            return Err(cannot_execute(path));
        }
        return Ok(path);
    }
    let mut not_executable = None;
    for dir in std::env::split_paths(path_var.unwrap_or_default()) {
        let dir = if dir.as_os_str().is_empty() {
            PathBuf::from(".")
        } else {
            dir
        };
        let candidate = dir.join(command);
        if is_executable_file(&candidate) {
            return Ok(candidate);
        }
        if candidate.is_file() && not_executable.is_none() {
            not_executable = Some(candidate);
        }
    }
    match not_executable {
        Some(path) => Err(cannot_execute(path)),
        None => Err(PreflightError::NotFound {
            command: shown,
            searched: Some(path_var.unwrap_or_default().to_string_lossy().into_owned()),
        }),
    }
}
