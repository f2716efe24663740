//! The exec guard, compiled into the guard library (`libcapshim_guard`, package
//! `capshim-guard`) for Macs whose System Integrity Protection is off.
//!
//! With SIP off, `DYLD_INSERT_LIBRARIES` reaches Apple's own programs, which are arm64e (no
//! arm64 slice), and dyld terminates any process whose inserted library it cannot load:
//! capshim's libraries are arm64 only (an arm64e slice is no answer: docs/apple-runtime.md,
//! "The exec guard"). The guard library interposes `execve`, `posix_spawn` and
//! `posix_spawnp` ([`interpose`], compiled only with `--cfg capshim_guard`): when the program
//! about to run cannot load the library ([`slice`], [`file`]), it passes that program an
//! environment without capshim's injection entry and variables ([`envp`]), and changes
//! nothing else. On any doubt (unreadable file, odd format, an environment too large for its
//! fixed buffers) the call goes through unchanged; the guard never makes an exec fail.
//!
//! `execve` is called in the child of a `fork()` of a multithreaded process (Go's `os/exec`,
//! CPython's `_posixsubprocess`), where only async-signal-safe functions may run: this path
//! allocates nothing and takes no lock (reads with `open`/`pread` into stack buffers, the
//! edited list in fixed stack arrays; crates/shim/tests/guard_fork.rs holds it to that).
//!
//! libcapshim (package `capshim`) compiles these modules too but has no interposers: its
//! exports and sections stay as they were (checked by `cargo xtask dist` and
//! crates/guard/tests/exec_guard.rs).

pub mod envp;
pub mod file;
#[cfg(capshim_guard)]
mod interpose;
pub mod slice;

use std::ffi::{CStr, c_char};

use slice::Verdict;

/// The program a guarded call is about to run.
#[derive(Clone, Copy, Debug)]
pub enum Program<'a> {
    /// A path (`execve`, `posix_spawn`).
    Path(&'a CStr),
    /// A file name searched along `PATH` (`posix_spawnp`), with the caller's `PATH`.
    Searched(&'a CStr, Option<&'a CStr>),
}

impl Program<'_> {
    /// Whether this program can load capshim's library.
    pub fn verdict(self) -> Verdict {
        match self {
            Program::Path(path) => file::judge(path),
            Program::Searched(name, search) => file::judge_searched(name, search),
        }
    }
}

/// Calls `run` with the environment `program` should get: `envp` itself, unless it holds
/// capshim's entries and the program cannot load the library, then the edited copy
/// ([`envp::with_edited`]). `own` is this library's path as the loader reported it, if known.
/// Allocates nothing and takes no lock.
///
/// # Safety
/// `envp` is NULL or a NULL-terminated array of NUL-terminated strings, unchanged during
/// the call.
pub unsafe fn with_guarded_env<R>(
    program: Program<'_>,
    envp: *const *const c_char,
    own: Option<&[u8]>,
    mut run: impl FnMut(*const *const c_char) -> R,
) -> R {
    // Most calls have nothing to remove: decide that before reading any file.
    // SAFETY: passed on from the caller.
    if envp.is_null() || !unsafe { envp::needs_edit(envp, own) } {
        return run(envp);
    }
    if program.verdict() != Verdict::CannotLoad {
        return run(envp);
    }
    // `run` is called once: by with_edited, or below when the edit did not fit (then
    // with_edited did not call it).
    // SAFETY: passed on from the caller.
    match unsafe { envp::with_edited(envp, own, &mut run) } {
        Some(result) => result,
        None => run(envp),
    }
}

#[cfg(test)]
mod tests;
