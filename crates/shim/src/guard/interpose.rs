//! The guard library's interposers of `execve`, `posix_spawn` and `posix_spawnp` (compiled
//! only with `--cfg capshim_guard`, which the build script sets for the `capshim-guard`
//! package: libcapshim never has them).
//!
//! - macOS: dyld's interposing tuples, `(replacement, replacee)` pointer pairs in the
//!   `__DATA,__interpose` section of a library loaded at launch. dyld rebinds every other
//!   image's uses of the replacee to the replacement, but not this image's own, so the
//!   replacements call Apple's functions by name (dyld `RuntimeState::appendInterposingTuples`
//!   and `Loader::interpose`; docs/apple-runtime.md, "The exec guard").
//! - Linux (the tests): symbol preemption through `LD_PRELOAD`; each replacement calls the
//!   next definition, found with `dlsym(RTLD_NEXT, ...)` in the initializer, before any
//!   `fork()` can leave the loader's lock held in a child.

use std::ffi::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};

use super::file::{PATH_BYTES, c_str};
use super::{Program, with_guarded_env};

type Execve =
    unsafe extern "C" fn(*const c_char, *const *const c_char, *const *const c_char) -> c_int;
type Spawn = unsafe extern "C" fn(
    *mut libc::pid_t,
    *const c_char,
    *const libc::posix_spawn_file_actions_t,
    *const libc::posix_spawnattr_t,
    *const *mut c_char,
    *const *mut c_char,
) -> c_int;

/// This library's path as the loader reported it (`dladdr`), set once by the initializer;
/// read byte by byte (atomics: no lock) into the caller's stack buffer.
static OWN: [AtomicU8; PATH_BYTES] = [const { AtomicU8::new(0) }; PATH_BYTES];
static OWN_LEN: AtomicUsize = AtomicUsize::new(0);

fn own(buf: &mut [u8; PATH_BYTES]) -> Option<&[u8]> {
    let len = OWN_LEN.load(Ordering::Acquire);
    if len == 0 || len > buf.len() {
        return None;
    }
    for (to, from) in buf.iter_mut().zip(&OWN).take(len) {
        *to = from.load(Ordering::Relaxed);
    }
    Some(&buf[..len])
}

fn record_own_path() {
    let mut info = std::mem::MaybeUninit::<libc::Dl_info>::zeroed();
    let address = record_own_path as *const () as *const c_void;
    // SAFETY: dladdr only reads the loader's tables; `address` is a function of this image
    // and `info` writable storage of the right type.
    if unsafe { libc::dladdr(address, info.as_mut_ptr()) } == 0 {
        return;
    }
    // SAFETY: dladdr succeeded, so it initialised `info`.
    let name = unsafe { info.assume_init() }.dli_fname;
    // SAFETY: dli_fname is NULL or a NUL-terminated path the loader keeps for the image's
    // life.
    let Some(name) = (unsafe { c_str(name) }) else {
        return;
    };
    let bytes = name.to_bytes();
    if bytes.is_empty() || bytes.len() > PATH_BYTES {
        return;
    }
    for (to, from) in OWN.iter().zip(bytes) {
        to.store(*from, Ordering::Relaxed);
    }
    OWN_LEN.store(bytes.len(), Ordering::Release);
}

// Registered in the platform's initializer section, beside the shim's own (init.rs).
#[used]
#[cfg_attr(
    target_vendor = "apple",
    unsafe(link_section = "__DATA,__mod_init_func")
)]
#[cfg_attr(not(target_vendor = "apple"), unsafe(link_section = ".init_array"))]
static GUARD_INITIALIZER: extern "C" fn() = prepare;

extern "C" fn prepare() {
    // Whatever happens, never unwind into the loader.
    let _ = std::panic::catch_unwind(|| {
        record_own_path();
        #[cfg(not(target_vendor = "apple"))]
        linux::resolve_next();
    });
}

/// `execve` through the guard: `next` runs `path` with the environment the guard chose.
///
/// # Safety
/// The arguments are `execve`'s.
unsafe fn guarded_execve(
    next: Execve,
    path: *const c_char,
    argv: *const *const c_char,
    envp: *const *const c_char,
) -> c_int {
    // SAFETY: `path` is execve's path argument: NULL or a NUL-terminated string.
    let Some(program) = (unsafe { c_str(path) }) else {
        // SAFETY: passed through unchanged.
        return unsafe { next(path, argv, envp) };
    };
    let mut buf = [0u8; PATH_BYTES];
    let own = own(&mut buf);
    // SAFETY: envp is execve's environment argument, which the caller keeps unchanged; `next`
    // receives it or the edited copy, valid during the call.
    unsafe {
        with_guarded_env(Program::Path(program), envp, own, |env| {
            next(path, argv, env)
        })
    }
}

/// The arguments of a `posix_spawn` or `posix_spawnp` call.
struct SpawnCall {
    pid: *mut libc::pid_t,
    file: *const c_char,
    actions: *const libc::posix_spawn_file_actions_t,
    attr: *const libc::posix_spawnattr_t,
    argv: *const *mut c_char,
    envp: *const *mut c_char,
}

/// `posix_spawn` or `posix_spawnp` (`searched`) through the guard.
///
/// # Safety
/// The arguments are `posix_spawn`'s.
unsafe fn guarded_spawn(next: Spawn, searched: bool, call: SpawnCall) -> c_int {
    let SpawnCall {
        pid,
        file,
        actions,
        attr,
        argv,
        envp,
    } = call;
    // SAFETY: `file` is the spawn's path or file argument: NULL or a NUL-terminated string.
    let name = unsafe { c_str(file) };
    // A relative path with file actions may be resolved after a `chdir` action: not judged.
    let relative = name.is_some_and(|n| n.to_bytes().first() != Some(&b'/'));
    let Some(name) = name.filter(|_| !(relative && !actions.is_null() && !searched)) else {
        // SAFETY: passed through unchanged.
        return unsafe { next(pid, file, actions, attr, argv, envp) };
    };
    let search_path;
    let program = if searched {
        // SAFETY: getenv with a NUL-terminated name; posix_spawnp searches the caller's PATH.
        search_path = unsafe { c_str(libc::getenv(c"PATH".as_ptr())) };
        Program::Searched(name, search_path)
    } else {
        Program::Path(name)
    };
    let mut buf = [0u8; PATH_BYTES];
    let own = own(&mut buf);
    // SAFETY: envp is the spawn's environment argument; `next` receives it or the edited
    // copy, valid during the call.
    unsafe {
        with_guarded_env(program, envp.cast(), own, |env| {
            next(pid, file, actions, attr, argv, env.cast())
        })
    }
}

#[cfg(target_vendor = "apple")]
mod apple {
    use super::*;

    /// One interposing tuple as dyld reads it: two pointers, the replacement first.
    #[repr(C)]
    struct Tuple<F> {
        replacement: F,
        replacee: F,
    }

    #[repr(C)]
    struct Tuples {
        execve: Tuple<Execve>,
        posix_spawn: Tuple<Spawn>,
        posix_spawnp: Tuple<Spawn>,
    }

    // SAFETY: `__DATA,__interpose` is read by dyld at launch as (replacement, replacee)
    // pointer pairs (dyld `RuntimeState::buildInterposingTables`): each pair here is a function
    // of this library and the libSystem function of the same signature it stands in for, so
    // every other image's calls reach a function with the signature they were compiled for.
    #[used]
    #[unsafe(link_section = "__DATA,__interpose")]
    static INTERPOSE: Tuples = Tuples {
        execve: Tuple {
            replacement: execve,
            replacee: libc::execve,
        },
        posix_spawn: Tuple {
            replacement: posix_spawn,
            replacee: libc::posix_spawn,
        },
        posix_spawnp: Tuple {
            replacement: posix_spawnp,
            replacee: libc::posix_spawnp,
        },
    };

    unsafe extern "C" fn execve(
        path: *const c_char,
        argv: *const *const c_char,
        envp: *const *const c_char,
    ) -> c_int {
        // SAFETY: our caller's arguments; this image's own call to libc::execve is not
        // interposed (dyld's image-specific tuple), so it reaches Apple's execve.
        unsafe { guarded_execve(libc::execve, path, argv, envp) }
    }

    unsafe extern "C" fn posix_spawn(
        pid: *mut libc::pid_t,
        path: *const c_char,
        actions: *const libc::posix_spawn_file_actions_t,
        attr: *const libc::posix_spawnattr_t,
        argv: *const *mut c_char,
        envp: *const *mut c_char,
    ) -> c_int {
        // SAFETY: as in `execve`.
        unsafe {
            guarded_spawn(
                libc::posix_spawn,
                false,
                SpawnCall {
                    pid,
                    file: path,
                    actions,
                    attr,
                    argv,
                    envp,
                },
            )
        }
    }

    unsafe extern "C" fn posix_spawnp(
        pid: *mut libc::pid_t,
        file: *const c_char,
        actions: *const libc::posix_spawn_file_actions_t,
        attr: *const libc::posix_spawnattr_t,
        argv: *const *mut c_char,
        envp: *const *mut c_char,
    ) -> c_int {
        // SAFETY: as in `execve`.
        unsafe {
            guarded_spawn(
                libc::posix_spawnp,
                true,
                SpawnCall {
                    pid,
                    file,
                    actions,
                    attr,
                    argv,
                    envp,
                },
            )
        }
    }
}

#[cfg(not(target_vendor = "apple"))]
mod linux {
    use std::ffi::CStr;

    use super::*;

    static NEXT_EXECVE: AtomicUsize = AtomicUsize::new(0);
    static NEXT_SPAWN: AtomicUsize = AtomicUsize::new(0);
    static NEXT_SPAWNP: AtomicUsize = AtomicUsize::new(0);

    /// The next definition of `name` after this library, looked up once.
    fn next(slot: &AtomicUsize, name: &CStr) -> usize {
        let found = slot.load(Ordering::Acquire);
        if found != 0 {
            return found;
        }
        // SAFETY: dlsym with RTLD_NEXT and a NUL-terminated name; called from the initializer
        // (or, if a call comes first, from that call, before any fork of ours).
        let found = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) } as usize;
        slot.store(found, Ordering::Release);
        found
    }

    pub(super) fn resolve_next() {
        next(&NEXT_EXECVE, c"execve");
        next(&NEXT_SPAWN, c"posix_spawn");
        next(&NEXT_SPAWNP, c"posix_spawnp");
    }

    /// # Safety
    /// execve(2)'s contract.
    #[unsafe(no_mangle)]
    pub unsafe extern "C" fn execve(
        path: *const c_char,
        argv: *const *const c_char,
        envp: *const *const c_char,
    ) -> c_int {
        let found = next(&NEXT_EXECVE, c"execve");
        if found == 0 {
            // SAFETY: the execve system call with the caller's own arguments.
            return unsafe { libc::syscall(libc::SYS_execve, path, argv, envp) } as c_int;
        }
        // SAFETY: dlsym found libc's `execve`, whose signature is `Execve`.
        let next: Execve = unsafe { std::mem::transmute::<usize, Execve>(found) };
        // SAFETY: our caller's arguments.
        unsafe { guarded_execve(next, path, argv, envp) }
    }

    fn spawn(slot: &AtomicUsize, name: &CStr) -> Option<Spawn> {
        let found = next(slot, name);
        // SAFETY: dlsym found libc's `posix_spawn`/`posix_spawnp`, whose signature is `Spawn`.
        (found != 0).then(|| unsafe { std::mem::transmute::<usize, Spawn>(found) })
    }

    /// # Safety
    /// posix_spawn(3)'s contract.
    #[unsafe(no_mangle)]
    pub unsafe extern "C" fn posix_spawn(
        pid: *mut libc::pid_t,
        path: *const c_char,
        actions: *const libc::posix_spawn_file_actions_t,
        attr: *const libc::posix_spawnattr_t,
        argv: *const *mut c_char,
        envp: *const *mut c_char,
    ) -> c_int {
        let Some(next) = spawn(&NEXT_SPAWN, c"posix_spawn") else {
            return libc::ENOSYS;
        };
        // SAFETY: our caller's arguments.
        unsafe {
            guarded_spawn(
                next,
                false,
                SpawnCall {
                    pid,
                    file: path,
                    actions,
                    attr,
                    argv,
                    envp,
                },
            )
        }
    }

    /// # Safety
    /// posix_spawnp(3)'s contract.
    #[unsafe(no_mangle)]
    pub unsafe extern "C" fn posix_spawnp(
        pid: *mut libc::pid_t,
        file: *const c_char,
        actions: *const libc::posix_spawn_file_actions_t,
        attr: *const libc::posix_spawnattr_t,
        argv: *const *mut c_char,
        envp: *const *mut c_char,
    ) -> c_int {
        let Some(next) = spawn(&NEXT_SPAWNP, c"posix_spawnp") else {
            return libc::ENOSYS;
        };
        // SAFETY: our caller's arguments.
        unsafe {
            guarded_spawn(
                next,
                true,
                SpawnCall {
                    pid,
                    file,
                    actions,
                    attr,
                    argv,
                    envp,
                },
            )
        }
    }
}
