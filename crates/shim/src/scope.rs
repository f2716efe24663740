//! Which processes the shim acts in: `CAPSHIM_SCOPE=process`, `CAPSHIM_ONLY_PROCESS`, and the
//! owner mark that makes a same-pid re-exec count as the same process.
//!
//! A framework Python (python.org, Homebrew) starts as a launcher, `bin/python3.x`, that
//! replaces itself in the same pid, with the same environment, by
//! `Python.app/Contents/MacOS/Python`. So the shim records the pid it first activated in
//! (`CAPSHIM_OWNER_PID`) when it is limited to one process, and a later image in that pid is
//! the same process. Under `CAPSHIM_SCOPE=process` the shim leaves the environment alone until
//! it has hooked a device, then takes itself out of it, so children started after that are not
//! injected at all; a child started earlier still inherits it, sees another pid in the mark,
//! stays stock, and takes the shim out of its own environment before anything else runs.

use std::ffi::{OsStr, OsString, c_void};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

use capshim_profile::env::{OWNER_PID, is_capshim_var};

/// The variable through which the dynamic loader injects libraries at launch.
#[cfg(target_vendor = "apple")]
pub const INJECTION_VAR: &str = "DYLD_INSERT_LIBRARIES";
/// The variable through which the dynamic loader injects libraries at launch.
#[cfg(not(target_vendor = "apple"))]
pub const INJECTION_VAR: &str = "LD_PRELOAD";

/// How this process relates to the one the shim first activated in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lineage {
    /// No owner recorded: this is the first process.
    First,
    /// The owner's own pid: an image this process replaced itself with (`execve`), so the
    /// same process.
    SameProcess,
    /// A process the owner (pid inside) started.
    Child(u32),
}

/// Reads the owner mark (`CAPSHIM_OWNER_PID`'s value) against this process's pid. A mark
/// that is not a decimal pid counts as absent.
pub fn lineage(mark: Option<&[u8]>, pid: u32) -> Lineage {
    let owner = mark
        .and_then(|m| std::str::from_utf8(m).ok())
        .and_then(|m| m.parse::<u32>().ok());
    match owner {
        None => Lineage::First,
        Some(owner) if owner == pid => Lineage::SameProcess,
        Some(owner) => Lineage::Child(owner),
    }
}

/// This process's [`Lineage`], from its environment.
pub fn current_lineage() -> Lineage {
    let mark = std::env::var_os(OWNER_PID);
    lineage(mark.as_deref().map(OsStr::as_bytes), std::process::id())
}

/// The path this library was loaded from, as the dynamic loader reports it.
pub fn own_path() -> Option<PathBuf> {
    let mut info = std::mem::MaybeUninit::<libc::Dl_info>::zeroed();
    let address = own_path as *const () as *const c_void;
    // SAFETY: dladdr only reads loader tables; `address` is a function in this image and
    // `info` is writable storage of the right type.
    let found = unsafe { libc::dladdr(address, info.as_mut_ptr()) };
    if found == 0 {
        return None;
    }
    // SAFETY: dladdr succeeded, so it initialised `info`.
    let info = unsafe { info.assume_init() };
    if info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: dli_fname is a NUL-terminated path owned by the loader for the image's life.
    let name = unsafe { std::ffi::CStr::from_ptr(info.dli_fname) };
    Some(PathBuf::from(OsStr::from_bytes(name.to_bytes())))
}

/// The injection variable's value without the entries naming `own`, or `None` when nothing
/// else is left. Entries are separated by ':' (and also by spaces for `LD_PRELOAD`, as the
/// GNU loader accepts); the others are kept in order, joined by ':'.
pub fn without_self(value: &[u8], own: &Path) -> Option<OsString> {
    let own_canonical = own.canonicalize().ok();
    let separators: &[u8] = if cfg!(target_vendor = "apple") {
        b":"
    } else {
        b": "
    };
    let is_own = |entry: &[u8]| {
        let path = Path::new(OsStr::from_bytes(entry));
        if path == own {
            return true;
        }
        if !entry.contains(&b'/') {
            // A bare name, searched on the library path by the GNU loader.
            return own.file_name() == Some(OsStr::from_bytes(entry));
        }
        own_canonical.is_some() && path.canonicalize().ok() == own_canonical
    };
    let kept: Vec<&[u8]> = value
        .split(|b| separators.contains(b))
        .filter(|entry| !entry.is_empty() && !is_own(entry))
        .collect();
    (!kept.is_empty()).then(|| OsString::from_vec(kept.join(&b':')))
}

/// Whether other threads may already be running (then changing the environment from the
/// initializer would race with them). When it cannot tell, it says yes.
fn has_other_threads() -> bool {
    #[cfg(target_os = "linux")]
    {
        std::fs::read_dir("/proc/self/task").map_or(true, |tasks| tasks.count() > 1)
    }
    #[cfg(target_os = "macos")]
    {
        let mut info = std::mem::MaybeUninit::<libc::proc_taskinfo>::zeroed();
        let size = std::mem::size_of::<libc::proc_taskinfo>() as libc::c_int;
        // SAFETY: proc_pidinfo(PROC_PIDTASKINFO) writes at most `size` bytes of a
        // proc_taskinfo (xnu bsd/sys/proc_info.h) into `info` and returns how many it wrote.
        let written = unsafe {
            libc::proc_pidinfo(
                libc::getpid(),
                libc::PROC_PIDTASKINFO,
                0,
                info.as_mut_ptr().cast(),
                size,
            )
        };
        if written != size {
            return true;
        }
        // SAFETY: proc_pidinfo filled all `size` bytes.
        unsafe { info.assume_init() }.pti_threadnum > 1
    }
    #[cfg(not(any(target_os = "linux", target_os = "macos")))]
    {
        true
    }
}

/// Runs `handler` in the child after every `fork()` (`pthread_atfork`). The handler runs in a
/// child that may hold no other thread, so it must only do what is async-signal-safe (set an
/// atomic).
pub fn on_fork_child(handler: extern "C" fn()) {
    // SAFETY: pthread_atfork only records the handlers; `handler` is a function of this
    // library, which an inserted library never unloads, and does only async-signal-safe work.
    let _ = unsafe { libc::pthread_atfork(None, None, Some(handler)) };
}

/// Records this process as the owner (`CAPSHIM_OWNER_PID`), from the initializer.
///
/// # Errors
/// A reason, when other threads run and the environment was left as it was.
pub fn mark_owner() -> Result<(), &'static str> {
    if has_other_threads() {
        return Err(
            "other threads are running, so the owner mark was not set (a same-pid re-exec \
             will not be recognised; inject at launch)",
        );
    }
    // SAFETY: set_var races with other threads reading the environment; this runs in the
    // initializer of a library injected at launch, before the program's main, and we just
    // checked that no other thread exists.
    unsafe { std::env::set_var(OWNER_PID, std::process::id().to_string()) };
    Ok(())
}

/// Removes the shim from the environment children inherit, from the initializer: its own
/// entry in [`INJECTION_VAR`] and every capshim variable (`CAPSHIM_*`, the aliases, the owner
/// mark), so children start stock without loading it.
///
/// # Errors
/// A reason, when other threads run and the environment was left as it was.
pub fn detach() -> Result<(), &'static str> {
    if has_other_threads() {
        return Err(
            "other threads are running, so the environment was left unchanged (inject at launch)",
        );
    }
    remove_shim_from_environment()
}

/// As [`detach`], once a device is hooked, from whichever thread hooked it.
///
/// Other threads run by then. Apple's Libc serializes `setenv`, `unsetenv` and `getenv` with
/// one lock (`environ_lock_np`, stdlib/FreeBSD/getenv.c and setenv.c); code that reads
/// `environ` directly may see the list before or after the change, never a freed string (the
/// values removed here were inherited, not allocated by `setenv`). glibc's `unsetenv` takes a
/// lock and never frees strings either.
///
/// # Errors
/// A reason, when the shim's own path is unknown (nothing was changed).
pub fn release() -> Result<(), &'static str> {
    remove_shim_from_environment()
}

fn remove_shim_from_environment() -> Result<(), &'static str> {
    let own = own_path().ok_or("could not find the shim's own path")?;
    let injected = std::env::var_os(INJECTION_VAR);
    let capshim_vars: Vec<OsString> = std::env::vars_os()
        .map(|(name, _)| name)
        .filter(|name| is_capshim_var(name.as_bytes()))
        .collect();
    // SAFETY: set_var/remove_var race with threads reading the environment; the callers
    // document why that is sound where they run (detach: no other thread; release: libc's
    // environment lock).
    unsafe {
        match injected.and_then(|value| without_self(value.as_bytes(), &own)) {
            Some(rest) => std::env::set_var(INJECTION_VAR, rest),
            None => std::env::remove_var(INJECTION_VAR),
        }
        for name in capshim_vars {
            std::env::remove_var(name);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn removes_only_our_own_entry() {
        let own = Path::new("/opt/capshim/libcapshim.so");
        assert_eq!(without_self(b"/opt/capshim/libcapshim.so", own), None);
        assert_eq!(
            without_self(b"/a/liba.so:/opt/capshim/libcapshim.so:/b/libb.so", own),
            Some(OsString::from("/a/liba.so:/b/libb.so"))
        );
        assert_eq!(
            without_self(b"::/a/liba.so:", own),
            Some(OsString::from("/a/liba.so"))
        );
        assert_eq!(
            without_self(b"/other/libcapshim.so", own),
            Some(OsString::from("/other/libcapshim.so"))
        );
        if cfg!(not(target_vendor = "apple")) {
            assert_eq!(
                without_self(b"libcapshim.so /a/liba.so", own),
                Some(OsString::from("/a/liba.so"))
            );
        }
    }

    #[test]
    fn the_owner_mark_tells_a_re_exec_from_a_child() {
        assert_eq!(lineage(None, 42), Lineage::First);
        assert_eq!(lineage(Some(b"42"), 42), Lineage::SameProcess);
        assert_eq!(lineage(Some(b"41"), 42), Lineage::Child(41));
        for junk in [&b""[..], b"x", b"-1", b"42 ", b"99999999999"] {
            assert_eq!(lineage(Some(junk), 42), Lineage::First, "{junk:?}");
        }
    }
}
