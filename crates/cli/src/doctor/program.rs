//! `capshim doctor -- PROGRAM`: the program found as a shell would, `capshim run`'s
//! pre-flight against it (architectures, hardened runtime, library validation, restricted
//! programs, SIP-protected paths), the interpreter a framework-Python launcher re-execs, and
//! what to do for known workloads ([`super::workloads`]).

use std::ffi::{OsStr, OsString};
use std::path::Path;

use super::gather::Gathered;
use super::library::Library;
use super::workloads;
use super::{Check, Status};
use crate::launch::environment::ScopeArg;
use crate::launch::preflight::{self, Launch, PreflightError, framework_interpreter};
use crate::platform::facts::SystemFacts;

/// `program.found`, `program.preflight`, and where they apply `program.python` and
/// `program.workload`.
pub fn checks(
    facts: &dyn SystemFacts,
    command: &[OsString],
    path_var: Option<&OsStr>,
    lib: &Library,
    g: &Gathered,
) -> Vec<Check> {
    let Some(first) = command.first() else {
        return Vec::new();
    };
    let program = match preflight::resolve_program(first, path_var)
        .and_then(|program| preflight::not_a_program(facts, &program).map_or(Ok(program), Err))
    {
        Ok(program) => program,
        Err(e) => {
            let summary = match &e {
                PreflightError::NotAProgram { path, what, .. } => {
                    format!("{}: not a program: {what}", path.display())
                }
                _ => format!("{}: cannot run it", first.to_string_lossy()),
            };
            return vec![Check::with(
                "program.found",
                Status::Fail,
                summary,
                e.to_string(),
                e.to_string(),
            )];
        }
    };
    let mut out = vec![Check::ok(
        "program.found",
        program.display().to_string(),
        "found as a shell would (a path, or the first match on PATH)",
    )];
    let (check, loads) = preflight_check(facts, &program, lib, g, "program.preflight");
    out.push(check);
    if let Some(interpreter) = framework_interpreter(&program) {
        out.push(python_check(facts, &program, &interpreter, lib, g));
    }
    out.extend(workloads::advice(&program, loads));
    out
}

/// `capshim run`'s pre-flight of `program`, and whether the shim loads into it (`None`: not
/// checked).
fn preflight_check(
    facts: &dyn SystemFacts,
    program: &Path,
    lib: &Library,
    g: &Gathered,
    id: &str,
) -> (Check, Option<bool>) {
    let arches = lib.arches();
    let Some(library) = lib.found().filter(|_| !arches.is_empty()) else {
        return (
            Check::with(
                id,
                Status::Skip,
                format!("{}: no shim library to check it against", program.display()),
                "see library.found and library.format",
                "see library.found",
            ),
            None,
        );
    };
    let launch = Launch {
        program,
        library,
        library_arches: &arches,
        scope: ScopeArg::Children,
        os: g.os,
        skip_program: false,
    };
    match preflight::check(facts, &launch) {
        Ok(warnings) if warnings.is_empty() => (
            Check::ok(
                id,
                format!("the shim can load into {}", program.display()),
                "the same checks as `capshim run` (architectures, code signature, restrictions, SIP)",
            ),
            Some(true),
        ),
        Ok(warnings) => {
            let joined = warnings.join(" / ");
            (
                Check::with(
                    id,
                    Status::Warn,
                    format!("`capshim run` starts {} with a warning", program.display()),
                    joined.clone(),
                    joined,
                ),
                Some(true),
            )
        }
        Err(e) => (
            Check::with(
                id,
                Status::Fail,
                format!(
                    "the shim will not load into {}: `capshim run` refuses it",
                    program.display()
                ),
                e.to_string(),
                e.to_string(),
            ),
            Some(false),
        ),
    }
}

fn python_check(
    facts: &dyn SystemFacts,
    launcher: &Path,
    interpreter: &Path,
    lib: &Library,
    g: &Gathered,
) -> Check {
    const ID: &str = "program.python";
    if facts.file_mode(interpreter).is_err() {
        return Check::with(
            ID,
            Status::Warn,
            format!(
                "{} looks like a framework Python launcher, but {} is missing",
                launcher.display(),
                interpreter.display()
            ),
            "a framework Python's launcher re-execs Python.app's interpreter, which is where Metal is used",
            "check the Python installation, or run the interpreter capshim should inject directly",
        );
    }
    let (check, loads) = preflight_check(facts, interpreter, lib, g, ID);
    let re_exec = format!(
        "{} is a framework Python launcher: it re-execs {} in the same process with the same environment; the shim follows it (--scope process and --only-process treat the re-exec as the same process, docs/shim.md)",
        launcher.display(),
        interpreter.display()
    );
    match loads {
        Some(true) if check.status == Status::Ok => Check::ok(ID, re_exec, check.summary),
        _ => Check {
            summary: format!("{re_exec}; for the interpreter: {}", check.summary),
            ..check
        },
    }
}
