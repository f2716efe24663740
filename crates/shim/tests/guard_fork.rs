//! The exec guard's `execve` path in the child of a `fork()`, as Go's `os/exec` and CPython's
//! `_posixsubprocess` call it: only async-signal-safe work may happen there, so the child
//! runs with an allocator that ends the child (exit 97) on any allocation, and another
//! thread of the parent holds a lock (the allocator's own) across the fork. The guard must
//! still pass the edited environment to the program and never allocate. Linux only: the
//! program is marked "cannot load" with the test-only marker (no file here is arm64e).
#![cfg(target_os = "linux")]

use std::alloc::{GlobalAlloc, Layout, System};
use std::ffi::{CString, c_char};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, mpsc};

use capshim::guard::{Program, with_guarded_env};

/// Set in the forked child: from then on any allocation ends it.
static FORBIDDEN: AtomicBool = AtomicBool::new(false);
/// Taken by every allocation in the parent, and held by another thread across the fork, as
/// malloc's arena lock may be: a child that allocated would wait on it forever, so the
/// allocator checks `FORBIDDEN` first.
static ALLOCATOR_LOCK: Mutex<()> = Mutex::new(());

struct Poisoned;

// SAFETY: every method forwards to the system allocator with the caller's arguments; the
// check before it only reads an atomic and, in the forked child, ends the process.
unsafe impl GlobalAlloc for Poisoned {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if FORBIDDEN.load(Ordering::Relaxed) {
            forbidden();
        }
        let _lock = ALLOCATOR_LOCK.try_lock();
        // SAFETY: forwarded.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if FORBIDDEN.load(Ordering::Relaxed) {
            forbidden();
        }
        // SAFETY: forwarded.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Poisoned = Poisoned;

fn forbidden() -> ! {
    let text = b"allocation in the forked child\n";
    // SAFETY: write(2) and _exit(2) are async-signal-safe.
    unsafe {
        libc::write(2, text.as_ptr().cast(), text.len());
        libc::_exit(97)
    }
}

#[test]
fn execve_after_fork_allocates_nothing_and_edits_the_environment() {
    let dir = std::env::temp_dir().join(format!("capshim-guard-fork-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let script = dir.join("marked");
    std::fs::write(
        &script,
        "#!/bin/sh\n# capshim-guard-test: cannot load\nexec env\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();

    let path = CString::new(script.to_str().unwrap()).unwrap();
    let argv_owned = [path.clone()];
    let mut argv: Vec<*const c_char> = argv_owned.iter().map(|a| a.as_ptr()).collect();
    argv.push(std::ptr::null());
    let env_owned: Vec<CString> = [
        "LD_PRELOAD=/opt/capshim/libcapshim_guard.so:/a/liba.so",
        "CAPSHIM_APPLE_FAMILY_MAX=1009",
        "LUME_METAL_APPLE_FAMILY_MAX=1009",
        "KEPT=yes",
    ]
    .iter()
    .map(|s| CString::new(*s).unwrap())
    .collect();
    let mut envp: Vec<*const c_char> = env_owned.iter().map(|e| e.as_ptr()).collect();
    envp.push(std::ptr::null());

    // Another thread holds the allocator's lock across the fork.
    let (held_tx, held_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let holder = std::thread::spawn(move || {
        let _guard = ALLOCATOR_LOCK.lock().unwrap();
        held_tx.send(()).unwrap();
        let _ = release_rx.recv();
    });
    held_rx.recv().unwrap();

    let mut fds = [0; 2];
    // SAFETY: pipe(2) writes two descriptors into `fds`.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    // SAFETY: the child only calls async-signal-safe functions (dup2, close, the guard's
    // path: open/fstat/pread/close, execve, _exit), which is what this test checks.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0);
    if pid == 0 {
        FORBIDDEN.store(true, Ordering::Relaxed);
        // SAFETY: in the child: descriptors of the pipe; the arrays built before the fork stay
        // valid in the child's copy of memory.
        unsafe {
            libc::dup2(fds[1], 1);
            libc::close(fds[0]);
            with_guarded_env(Program::Path(&path), envp.as_ptr(), None, |env| {
                libc::execve(path.as_ptr(), argv.as_ptr(), env)
            });
            libc::_exit(98);
        }
    }
    release_tx.send(()).unwrap();
    holder.join().unwrap();
    // SAFETY: the parent's end of the pipe.
    unsafe { libc::close(fds[1]) };
    use std::io::Read;
    use std::os::fd::FromRawFd;
    // SAFETY: fds[0] is the pipe's read end, owned here from now on.
    let mut reader = unsafe { std::fs::File::from_raw_fd(fds[0]) };
    let mut out = String::new();
    reader.read_to_string(&mut out).unwrap();
    let mut status = 0;
    // SAFETY: waits for the child forked above.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    let _ = std::fs::remove_dir_all(&dir);

    assert!(libc::WIFEXITED(status), "status {status:#x}");
    assert_eq!(libc::WEXITSTATUS(status), 0, "the child failed:\n{out}");
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines.contains(&"KEPT=yes"), "{out}");
    assert!(lines.contains(&"LD_PRELOAD=/a/liba.so"), "{out}");
    assert!(
        !lines
            .iter()
            .any(|l| l.starts_with("CAPSHIM_") || l.starts_with("LUME_METAL_")),
        "{out}"
    );
}
