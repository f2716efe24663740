//! One tool process of an experiment (llama-bench, llama-perplexity...): started with an arm's
//! environment change, its output to files in the bundle, signals passed on; and, when it
//! failed, the [`Failure`] the experiment's one rule ([`super::Context::failed`]) decides on.

use std::path::{Path, PathBuf};

use super::Context;
use super::error::{ExperimentError, ToolFailed, io};
use crate::launch::child::{self, ChildError, Finished};
use crate::launch::environment::EnvChange;
use crate::llama::Activation;

/// One process to run.
pub struct ToolRun<'a> {
    /// The tool's name, for messages: `llama-bench`.
    pub tool: &'static str,
    /// The executable.
    pub program: &'a Path,
    /// Its arguments.
    pub args: &'a [String],
    /// The arm's environment change.
    pub env: &'a EnvChange,
    /// Where its stdout goes.
    pub stdout: &'a Path,
    /// Where its stderr goes.
    pub stderr: &'a Path,
}

impl ToolRun<'_> {
    /// Program and arguments, as run.
    pub fn argv(&self) -> Vec<String> {
        let mut argv = vec![self.program.display().to_string()];
        argv.extend(self.args.iter().cloned());
        argv
    }
}

impl Context<'_> {
    /// Runs one process to its end; the progress is told when it ended, before its result is
    /// checked.
    ///
    /// # Errors
    /// When it cannot start or be waited for, an output file cannot be created, or a signal
    /// stopped it ([`ExperimentError::Interrupted`]).
    pub fn run_tool(&mut self, run: &ToolRun) -> Result<Finished, ExperimentError> {
        self.run_process(run, false)
    }

    /// As [`Context::run_tool`], the process leading a process group of its own, to which
    /// signals are passed on ([`child::run_as`]): a shell command and every process it starts.
    /// What is left of the group when the process exits is ended, with a warning.
    ///
    /// # Errors
    /// As [`Context::run_tool`].
    pub fn run_tool_in_group(&mut self, run: &ToolRun) -> Result<Finished, ExperimentError> {
        self.run_process(run, true)
    }

    fn run_process(&mut self, run: &ToolRun, group: bool) -> Result<Finished, ExperimentError> {
        let finished = child::run_as(
            run.program,
            run.args,
            run.env,
            (run.stdout, run.stderr),
            self.signals,
            group,
        )
        .map_err(|e| match e {
            ChildError::Create { path, source } => io("cannot create", &path)(source),
            ChildError::Spawn { program, source } => ExperimentError::Spawn {
                tool: run.tool,
                path: program,
                source,
                option: self.words.tool_option,
            },
            ChildError::Wait { program, source } => io("cannot wait for", &program)(source),
            // Whatever the tool did with the signal, the run was cut short.
            ChildError::Interrupted(number) => ExperimentError::interrupted(&self.words, number),
        })?;
        self.progress.ended();
        if finished.left > 0 {
            let at = self
                .progress
                .current
                .as_ref()
                .map(|c| format!(" in {}", c.label))
                .unwrap_or_default();
            crate::term::warning(format!(
                "{} left {} process{} running when it exited{at}; capshim ended {} (SIGTERM to \
                 its process group, then SIGKILL): a command should wait for what it starts",
                run.tool,
                finished.left,
                if finished.left == 1 { "" } else { "es" },
                if finished.left == 1 { "it" } else { "them" },
            ));
        }
        Ok(finished)
    }
}

/// A run that failed: which, and why.
#[derive(Debug)]
pub struct Failure {
    /// The tool.
    pub tool: &'static str,
    /// The arm.
    pub arm: String,
    /// Which run: `arm NAME round N`, `arm NAME`.
    pub what: String,
    /// How it exited (`exit status: 1`, `signal: 11 (SIGSEGV)`), or what its output lacks.
    pub reason: String,
    /// Its stderr file.
    pub stderr: PathBuf,
    /// Its stdout file, when it holds output a reader needs to see the failure (a
    /// `bench --command` workload's); `None` for tools whose stdout is their results.
    pub stdout: Option<PathBuf>,
}

impl Failure {
    /// The error that stops the experiment on this failure; `fix` says what to check.
    pub fn into_error(self, fix: &'static str) -> ExperimentError {
        ExperimentError::ToolFailed(Box::new(ToolFailed {
            tail: stderr_tail(&self.stderr),
            stdout_tail: self
                .stdout
                .as_deref()
                .map(|p| (p.to_path_buf(), stderr_tail(p)))
                .filter(|(_, tail)| !tail.is_empty()),
            tool: self.tool,
            what: self.what,
            reason: self.reason,
            stderr: self.stderr,
            fix,
        }))
    }
}

/// The last 8 lines of the output file `path` (stderr, or a command's stdout) that hold something, indented; empty when it
/// holds nothing but white space (or cannot be read).
pub fn stderr_tail(path: &Path) -> String {
    let stderr = std::fs::read(path)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default();
    let tail: Vec<&str> = stderr
        .lines()
        .rev()
        .filter(|l| !l.trim().is_empty())
        .take(8)
        .collect();
    let tail: Vec<&str> = tail.into_iter().rev().collect();
    tail.join("\n  ")
}

/// What to check when the shim did not activate in a run that injected `dylib`
/// ([`Activation::what_to_check`], for this platform's injection variable).
pub fn what_to_check(activation: &Activation, dylib: Option<&Path>) -> String {
    activation.what_to_check(
        crate::launch::Os::current().injection_var(),
        &dylib.map(|d| d.display().to_string()).unwrap_or_default(),
    )
}
