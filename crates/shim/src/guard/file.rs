//! Reading a program's first bytes and finding the file `posix_spawnp` will run, with only
//! async-signal-safe calls (`open`, `fstat`, `pread`, `close`, `access`) into buffers on the
//! stack: no allocation, no lock.

use std::ffi::{CStr, c_char};

use super::slice::{HEADER_BYTES, Verdict, verdict};

/// The longest path handled, NUL included (`PATH_MAX`); a longer one is not judged.
pub const PATH_BYTES: usize = libc::PATH_MAX as usize;

/// Reads up to [`HEADER_BYTES`] from the start of the regular file at `path` into `buf`;
/// returns how many. `None` when it cannot be opened, is not a regular file, or the read
/// fails. Opening does not block (`O_NONBLOCK`: a FIFO is refused by the `fstat` check, not
/// waited on) and the descriptor is closed before returning.
fn read_header(path: &CStr, buf: &mut [u8; HEADER_BYTES]) -> Option<usize> {
    // SAFETY: open(2) with a NUL-terminated path; async-signal-safe (POSIX.1 list of
    // async-signal-safe functions).
    let fd = unsafe {
        libc::open(
            path.as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC | libc::O_NONBLOCK | libc::O_NOCTTY,
        )
    };
    if fd < 0 {
        return None;
    }
    let mut stat = std::mem::MaybeUninit::<libc::stat>::zeroed();
    // SAFETY: fstat(2) writes one `struct stat` into the zeroed storage; async-signal-safe.
    let regular = unsafe { libc::fstat(fd, stat.as_mut_ptr()) } == 0
        // SAFETY: fstat succeeded, so it filled `stat` (and it was zeroed before).
        && unsafe { stat.assume_init() }.st_mode & libc::S_IFMT == libc::S_IFREG;
    let read = if regular {
        // SAFETY: pread(2) writes at most `buf.len()` bytes into `buf`; async-signal-safe
        // (POSIX.1-2008 added it to the list).
        unsafe { libc::pread(fd, buf.as_mut_ptr().cast(), buf.len(), 0) }
    } else {
        -1
    };
    // SAFETY: closes the descriptor opened above, which nothing else has seen.
    unsafe { libc::close(fd) };
    usize::try_from(read).ok()
}

/// Whether the program at `path` can load capshim's library. A `#!` script is judged by its
/// interpreter (one level: an interpreter that is a script itself is [`Verdict::Unsure`], as
/// macOS refuses to run it). Never [`Verdict::Script`].
pub fn judge(path: &CStr) -> Verdict {
    let mut header = [0u8; HEADER_BYTES];
    let Some(len) = read_header(path, &mut header) else {
        return Verdict::Unsure;
    };
    match verdict(&header[..len]) {
        Verdict::Script { start, end } => {
            let mut interpreter = [0u8; PATH_BYTES];
            let Some(path) = nul_terminated(&header[start..end], &mut interpreter) else {
                return Verdict::Unsure;
            };
            let mut inner = [0u8; HEADER_BYTES];
            match read_header(path, &mut inner).map(|len| verdict(&inner[..len])) {
                Some(v @ (Verdict::Loads | Verdict::CannotLoad)) => v,
                _ => Verdict::Unsure,
            }
        }
        other => other,
    }
}

/// `bytes` copied into `buf` with a NUL after them, if they fit and hold no NUL.
pub fn nul_terminated<'a>(bytes: &[u8], buf: &'a mut [u8]) -> Option<&'a CStr> {
    if bytes.len() >= buf.len() || bytes.contains(&0) {
        return None;
    }
    buf[..bytes.len()].copy_from_slice(bytes);
    buf[bytes.len()] = 0;
    CStr::from_bytes_with_nul(&buf[..=bytes.len()]).ok()
}

/// The default search path of `posix_spawnp` when `PATH` is unset: `_PATH_DEFPATH` on
/// macOS (Libc `include/paths.h`), glibc's `confstr(_CS_PATH)` elsewhere.
const DEFAULT_PATH: &[u8] = if cfg!(target_vendor = "apple") {
    b"/usr/bin:/bin"
} else {
    b"/bin:/usr/bin"
};

/// Judges the program `posix_spawnp(file)` runs: `file` itself when it names a folder (has a
/// '/'), else the first executable `dir/file` along `search_path` (the caller's `PATH`, not
/// the child's; an empty entry is the current folder).
pub fn judge_searched(file: &CStr, search_path: Option<&CStr>) -> Verdict {
    let name = file.to_bytes();
    if name.is_empty() {
        return Verdict::Unsure;
    }
    if name.contains(&b'/') {
        return judge(file);
    }
    let search = search_path.map_or(DEFAULT_PATH, CStr::to_bytes);
    for dir in search.split(|&b| b == b':') {
        let dir: &[u8] = if dir.is_empty() { b"." } else { dir };
        let mut buf = [0u8; PATH_BYTES];
        let total = dir.len() + 1 + name.len();
        if total >= buf.len() {
            continue;
        }
        buf[..dir.len()].copy_from_slice(dir);
        buf[dir.len()] = b'/';
        buf[dir.len() + 1..total].copy_from_slice(name);
        let Ok(candidate) = CStr::from_bytes_with_nul(&buf[..=total]) else {
            continue;
        };
        // SAFETY: access(2) with a NUL-terminated path; async-signal-safe.
        if unsafe { libc::access(candidate.as_ptr(), libc::X_OK) } == 0 {
            return judge(candidate);
        }
    }
    Verdict::Unsure
}

/// The program a C string names, for callers holding a raw pointer: `None` for NULL.
///
/// # Safety
/// `ptr` is NULL or a NUL-terminated string that outlives `'a`.
pub unsafe fn c_str<'a>(ptr: *const c_char) -> Option<&'a CStr> {
    // SAFETY: the caller promises a valid NUL-terminated string when not NULL.
    (!ptr.is_null()).then(|| unsafe { CStr::from_ptr(ptr) })
}
