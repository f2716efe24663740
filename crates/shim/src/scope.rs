//! Which processes the shim acts in: `CAPSHIM_SCOPE=process`, `CAPSHIM_ONLY_PROCESS`, and the
//! owner mark that makes a same-pid re-exec count as the same process.
//!
//! A framework Python (python.org, Homebrew) starts as a launcher, `bin/python3.x`, that
//! replaces itself in the same pid, with the same environment, by
//! `Python.app/Contents/MacOS/Python`. So the shim records the process it first activated in
//! (`CAPSHIM_OWNER_PID=PID:START`, the pid and the process's start time, which an exec keeps
//! and a new process with a reused pid does not) when it is limited to one process, and a
//! later image in that process is the same process. Every other process that loads the
//! library with a copy of that environment, however the copy reached it (a child started
//! before the shim left the environment, or by a runtime that copied the environment at its
//! start, such as CPython's `os.environ` or a `posix_spawn` with a saved `envp`), sees another
//! owner, stays stock and silent, and takes the shim out of its own environment before
//! anything else runs. Under `CAPSHIM_SCOPE=process` the shim leaves the environment alone
//! until it has hooked a device, then takes itself out of it (swapping in a new `environ`
//! array, so that a thread reading the old one is never disturbed): children started from
//! the live environment after that do not load the library; those given an older copy load it
//! and do nothing.

use std::ffi::{CStr, CString, OsStr, OsString, c_char, c_void};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicPtr, Ordering};

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
    /// The owner itself: an image this process replaced itself with (`execve`), so the same
    /// process (same pid, same start time).
    SameProcess,
    /// Another process with a copy of the owner's environment: one it started (pid inside), or
    /// a later process that was given the owner's pid after it ended.
    Child(u32),
}

/// The owner mark's value for the process `pid` started at `start` (see [`start_time`]).
pub fn owner_mark(pid: u32, start: u64) -> String {
    format!("{pid}:{start}")
}

/// Reads the owner mark (`CAPSHIM_OWNER_PID`'s value, `PID:START`) against this process's
/// pid. `start` gives this process's start time; it is asked only when the mark names this
/// pid, and when it cannot tell (`None`) the process is not taken for the owner. A mark that
/// is not two decimal numbers counts as absent.
pub fn lineage(mark: Option<&[u8]>, pid: u32, start: impl FnOnce() -> Option<u64>) -> Lineage {
    let owner = mark
        .and_then(|m| std::str::from_utf8(m).ok())
        .and_then(|m| m.split_once(':'))
        .and_then(|(p, s)| Some((decimal::<u32>(p)?, decimal::<u64>(s)?)));
    match owner {
        None => Lineage::First,
        Some((owner, owner_start)) if owner == pid => {
            if start() == Some(owner_start) {
                Lineage::SameProcess
            } else {
                // The pid was reused: an unrelated process holding an old copy of the mark.
                Lineage::Child(owner)
            }
        }
        Some((owner, _)) => Lineage::Child(owner),
    }
}

/// Digits only (no sign, no spaces), as the shim writes them.
fn decimal<T: std::str::FromStr>(text: &str) -> Option<T> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// This process's [`Lineage`], from its environment.
pub fn current_lineage() -> Lineage {
    let mark = std::env::var_os(OWNER_PID);
    lineage(
        mark.as_deref().map(OsStr::as_bytes),
        std::process::id(),
        start_time,
    )
}

/// When this process started, in the kernel's own unit, which an `execve` keeps: on Linux,
/// clock ticks after boot (`/proc/self/stat`, field 22, `starttime`); on macOS, microseconds
/// after the epoch from `proc_pidinfo(PROC_PIDTBSDINFO)`'s `pbi_start_tvsec` and
/// `pbi_start_tvusec`, which xnu copies from `p_start` (`bsd/kern/proc_info.c`) and keeps
/// across exec (`bsd/kern/kern_fork.c`, `forkproc`: "Keep the original start time for
/// exec'ed proc"). `None` when it cannot be read.
pub fn start_time() -> Option<u64> {
    #[cfg(target_os = "linux")]
    {
        let stat = std::fs::read("/proc/self/stat").ok()?;
        // `pid (comm) state ppid …`: comm may hold spaces and parentheses, so count from the
        // last ')'; field 3 (state) is the first after it, field 22 the twentieth.
        let close = stat.iter().rposition(|&b| b == b')')?;
        let field = stat[close + 1..]
            .split(|&b| b == b' ')
            .filter(|f| !f.is_empty())
            .nth(19)?;
        decimal(std::str::from_utf8(field).ok()?)
    }
    #[cfg(target_os = "macos")]
    {
        let mut info = std::mem::MaybeUninit::<libc::proc_bsdinfo>::zeroed();
        let size = std::mem::size_of::<libc::proc_bsdinfo>() as libc::c_int;
        // SAFETY: proc_pidinfo(PROC_PIDTBSDINFO) writes at most `size` bytes of a proc_bsdinfo
        // (xnu bsd/sys/proc_info.h) into `info` and returns how many it wrote.
        let written = unsafe {
            libc::proc_pidinfo(
                libc::getpid(),
                libc::PROC_PIDTBSDINFO,
                0,
                info.as_mut_ptr().cast(),
                size,
            )
        };
        if written != size {
            return None;
        }
        // SAFETY: proc_pidinfo filled all `size` bytes.
        let info = unsafe { info.assume_init() };
        info.pbi_start_tvsec
            .checked_mul(1_000_000)?
            .checked_add(info.pbi_start_tvusec)
    }
    #[cfg(not(any(target_os = "linux", target_os = "macos")))]
    {
        None
    }
}

/// The executable's real file name (symlinks resolved), e.g. `llama-bench` or `python3.11`.
pub fn process_name() -> String {
    std::env::current_exe()
        .ok()
        .map(|path| path.canonicalize().unwrap_or(path))
        .and_then(|path| {
            path.file_name()
                .map(|name| name.to_string_lossy().into_owned())
        })
        .or_else(invoked_name)
        .unwrap_or_else(|| String::from("?"))
}

/// The file name the program was started as (`argv[0]`'s last component, e.g. `python3` for
/// a `python3` symlink to `python3.11`).
pub fn invoked_name() -> Option<String> {
    let arg0 = std::env::args_os().next().map(|arg| arg.into_vec());
    // In an initializer std may not have seen argv yet on Linux; the kernel keeps it too.
    #[cfg(target_os = "linux")]
    let arg0 = arg0.or_else(|| {
        let cmdline = std::fs::read("/proc/self/cmdline").ok()?;
        cmdline.split(|&b| b == 0).next().map(<[u8]>::to_vec)
    });
    let arg0 = arg0.filter(|arg| !arg.is_empty())?;
    let name = arg0.rsplit(|&b| b == b'/').next().unwrap_or(&arg0);
    Some(String::from_utf8_lossy(name).into_owned())
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

/// Records this process as the owner (`CAPSHIM_OWNER_PID=PID:START`), from the initializer.
///
/// # Errors
/// A reason, when other threads run or the start time cannot be read, and the environment was
/// left as it was.
pub fn mark_owner() -> Result<(), &'static str> {
    if has_other_threads() {
        return Err(
            "other threads are running, so the owner mark was not set (a same-pid re-exec \
             will not be recognised, and children given a copy of the environment may act; \
             inject at launch)",
        );
    }
    let start = start_time().ok_or(
        "this process's start time could not be read, so the owner mark was not set (a \
         same-pid re-exec will not be recognised, and children given a copy of the \
         environment may act)",
    )?;
    // SAFETY: set_var races with other threads reading the environment; this runs in the
    // initializer of a library injected at launch, before the program's main, and we just
    // checked that no other thread exists.
    unsafe { std::env::set_var(OWNER_PID, owner_mark(std::process::id(), start)) };
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
    remove_shim(own_path().ok_or("could not find the shim's own path")?)
}

/// As [`detach`], once a device is hooked, from whichever thread hooked it, while other
/// threads run: the environment is replaced by a new array (see [`crate::environ`]), so a
/// thread reading the old one (`posix_spawn(…, environ)`) reads it whole and unchanged.
///
/// # Errors
/// A reason, when the shim's own path is unknown (nothing was changed).
pub fn release() -> Result<(), &'static str> {
    remove_shim(own_path().ok_or("could not find the shim's own path")?)
}

/// Where libc keeps the environment pointer (`environ`). A library reaches it on macOS through
/// `_NSGetEnviron()` (Libc `stdlib/FreeBSD/setenv.c` itself does), on Linux through the
/// `environ` symbol.
fn environ_slot() -> *mut *mut *mut c_char {
    #[cfg(target_vendor = "apple")]
    {
        // SAFETY: _NSGetEnviron takes no argument and returns the address of the process's
        // `environ` variable, valid for the life of the process.
        unsafe { libc::_NSGetEnviron() }
    }
    #[cfg(not(target_vendor = "apple"))]
    {
        unsafe extern "C" {
            static mut environ: *mut *mut c_char;
        }
        &raw mut environ
    }
}

/// Apple's environment lock (`environ_lock_np`, Libc `stdlib/FreeBSD/getenv.c`, exported from
/// macOS 12.3), held while the value lives: `getenv`, `setenv` and `unsetenv` take it. Looked
/// up when first needed; without it (older macOS, and glibc, whose lock is private) the swap is
/// one pointer store.
struct EnvironmentLock {
    unlock: Option<unsafe extern "C" fn()>,
}

impl EnvironmentLock {
    fn take() -> EnvironmentLock {
        #[cfg(target_vendor = "apple")]
        {
            // SAFETY: dlsym with RTLD_DEFAULT and NUL-terminated names only searches loaded
            // images.
            let (lock, unlock) = unsafe {
                (
                    libc::dlsym(libc::RTLD_DEFAULT, c"environ_lock_np".as_ptr()),
                    libc::dlsym(libc::RTLD_DEFAULT, c"environ_unlock_np".as_ptr()),
                )
            };
            if !lock.is_null() && !unlock.is_null() {
                // SAFETY: both are Libc's `void (void)` functions (darwin/libc_private.h); a
                // function's address may be transmuted to its own function-pointer type.
                let (lock, unlock) = unsafe {
                    (
                        std::mem::transmute::<*mut c_void, unsafe extern "C" fn()>(lock),
                        std::mem::transmute::<*mut c_void, unsafe extern "C" fn()>(unlock),
                    )
                };
                // SAFETY: the caller allocates nothing until the lock is dropped (Apple's
                // malloc may call getenv, which takes this non-recursive lock).
                unsafe { lock() };
                return EnvironmentLock {
                    unlock: Some(unlock),
                };
            }
        }
        EnvironmentLock { unlock: None }
    }
}

impl Drop for EnvironmentLock {
    fn drop(&mut self) {
        if let Some(unlock) = self.unlock {
            // SAFETY: taken by `take` on this thread.
            unsafe { unlock() };
        }
    }
}

/// The number of entries in a NULL-terminated `environ` array.
///
/// # Safety
/// `array` is null or a NULL-terminated array of pointers.
unsafe fn entries(array: *const *mut c_char) -> usize {
    let mut n = 0;
    // SAFETY: forwarded from the caller: every index up to the NULL is in the array.
    while !array.is_null() && !unsafe { *array.add(n) }.is_null() {
        n += 1;
    }
    n
}

/// What to do with the injection variable's entry.
enum Injection {
    /// Not set: nothing to do.
    Absent,
    /// Only our library in it (this value): drop the entry.
    Drop(Vec<u8>),
    /// Other libraries too: this value becomes the entry (a leaked `NAME=VALUE` string).
    Replace(Vec<u8>, CString),
}

/// Takes the shim out of the environment children inherit: its own entry in
/// [`INJECTION_VAR`] and every capshim variable. Never frees, shifts or writes an entry or the
/// array other threads may be reading: it builds a new array (with the other entries' own
/// strings) and swaps it into `environ` with one pointer store; the old array and the strings
/// taken out stay allocated for good. Everything is allocated before the environment lock is
/// taken.
fn remove_shim(own: PathBuf) -> Result<(), &'static str> {
    let injection = match std::env::var_os(INJECTION_VAR) {
        None => Injection::Absent,
        Some(value) => match without_self(value.as_bytes(), &own) {
            None => Injection::Drop(value.into_vec()),
            Some(rest) => {
                let mut entry = format!("{INJECTION_VAR}=").into_bytes();
                entry.extend_from_slice(rest.as_bytes());
                let entry = CString::new(entry).map_err(|_| "a NUL in the injection variable")?;
                Injection::Replace(value.into_vec(), entry)
            }
        },
    };
    let slot = environ_slot();
    // SAFETY: a racy count only sizes the first attempt; it is checked again under the lock.
    let mut capacity = unsafe { entries(*slot) } + 8;
    loop {
        let array: *mut *mut c_char =
            // SAFETY: malloc of a non-zero size; checked for NULL below.
            unsafe { libc::malloc((capacity + 1) * std::mem::size_of::<*mut c_char>()) }.cast();
        if array.is_null() {
            return Err("out of memory for a new environment");
        }
        let lock = EnvironmentLock::take();
        // SAFETY: `slot` is libc's `environ`; under the lock (where there is one) nobody
        // changes it, and its array is NULL-terminated.
        let old = unsafe { *slot };
        // SAFETY: as above.
        let n = unsafe { entries(old) };
        if n > capacity {
            drop(lock);
            // SAFETY: allocated above with malloc, never published.
            unsafe { libc::free(array.cast()) };
            capacity = n + 8;
            continue;
        }
        let mut kept = 0;
        let mut used_entry = false;
        for i in 0..n {
            // SAFETY: i < n, the array's length; each entry is a NUL-terminated string.
            let entry = unsafe { *old.add(i) };
            // SAFETY: as above.
            let bytes = unsafe { CStr::from_ptr(entry) }.to_bytes();
            let (name, value) = match bytes.iter().position(|&b| b == b'=') {
                Some(eq) => (&bytes[..eq], &bytes[eq + 1..]),
                None => (bytes, &b""[..]),
            };
            let keep = if is_capshim_var(name) {
                None
            } else if name == INJECTION_VAR.as_bytes() {
                match &injection {
                    Injection::Drop(was) if was == value => None,
                    Injection::Replace(was, new) if was == value => {
                        used_entry = true;
                        Some(new.as_ptr().cast_mut())
                    }
                    // Changed since we looked: not ours to rewrite.
                    _ => Some(entry),
                }
            } else {
                Some(entry)
            };
            if let Some(entry) = keep {
                // SAFETY: kept <= i < n <= capacity, inside the new array.
                unsafe { *array.add(kept) = entry };
                kept += 1;
            }
        }
        // SAFETY: kept <= capacity; the array has capacity + 1 slots.
        unsafe { *array.add(kept) = std::ptr::null_mut() };
        // SAFETY: `slot` is a valid, aligned pointer variable; readers load it as a whole, and
        // one aligned pointer store is atomic on every platform the shim builds for.
        unsafe { AtomicPtr::from_ptr(slot).store(array, Ordering::Release) };
        drop(lock);
        if used_entry && let Injection::Replace(_, entry) = injection {
            // The new array points at it for good.
            let _ = entry.into_raw();
        }
        return Ok(());
    }
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
    fn the_owner_mark_tells_a_re_exec_from_a_child_and_from_a_reused_pid() {
        let started = || Some(777);
        assert_eq!(lineage(None, 42, started), Lineage::First);
        assert_eq!(lineage(Some(b"42:777"), 42, started), Lineage::SameProcess);
        assert_eq!(lineage(Some(b"41:777"), 42, started), Lineage::Child(41));
        // The same pid, given to a later process: not the owner.
        assert_eq!(lineage(Some(b"42:700"), 42, started), Lineage::Child(42));
        assert_eq!(lineage(Some(b"42:777"), 42, || None), Lineage::Child(42));
        for junk in [
            &b""[..],
            b"x",
            b"42",
            b"-1:7",
            b"42 :777",
            b"42:+777",
            b"42:",
            b":777",
            b"99999999999:1",
        ] {
            assert_eq!(lineage(Some(junk), 42, started), Lineage::First, "{junk:?}");
        }
        assert_eq!(owner_mark(42, 777), "42:777");
    }

    #[test]
    fn this_process_has_a_start_time_and_a_mark_of_itself_is_the_same_process() {
        let start = start_time().expect("a start time");
        let me = std::process::id();
        let mark = owner_mark(me, start);
        assert_eq!(
            lineage(Some(mark.as_bytes()), me, start_time),
            Lineage::SameProcess
        );
        let other = owner_mark(me, start + 1);
        assert_eq!(
            lineage(Some(other.as_bytes()), me, start_time),
            Lineage::Child(me)
        );
    }
}
