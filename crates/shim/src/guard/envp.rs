//! The environment a program that cannot load capshim gets: the caller's `envp` without
//! capshim's entries in the injection variable and without the variables capshim reads
//! (`CAPSHIM_*` and the published shims' prefixes, `capshim_profile::env::PREFIXES`), every
//! other entry as it was, in its order, by the same pointer.
//!
//! The edited list is built in fixed arrays on the stack (no allocation: this runs in a
//! forked child); when the environment does not fit them, the caller passes the call through
//! unchanged.

use std::ffi::c_char;

use capshim_profile::env::is_capshim_var;

use crate::scope::INJECTION_VAR;

/// The most environment entries an edited list holds; a longer environment is passed through
/// unchanged.
pub const MAX_ENTRIES: usize = 1024;
/// The longest edited injection variable (`NAME=value`, NUL included).
pub const MAX_INJECTION: usize = 4096;

/// The file names of capshim's libraries on this platform: an injection entry naming one of
/// them (in any folder) is capshim's.
#[cfg(target_vendor = "apple")]
pub const LIBRARY_NAMES: [&[u8]; 2] = [b"libcapshim.dylib", b"libcapshim_guard.dylib"];
/// The file names of capshim's libraries on this platform: an injection entry naming one of
/// them (in any folder) is capshim's.
#[cfg(not(target_vendor = "apple"))]
pub const LIBRARY_NAMES: [&[u8]; 2] = [b"libcapshim.so", b"libcapshim_guard.so"];

/// What separates the injection variable's entries: ':' for dyld, also blanks for glibc.
fn is_separator(b: u8) -> bool {
    b == b':' || (cfg!(not(target_vendor = "apple")) && b == b' ')
}

/// Whether an injection entry names capshim's library: this library's own path (`own`, as
/// the loader reported it) or a file called like one of [`LIBRARY_NAMES`].
pub fn is_capshim_library(entry: &[u8], own: Option<&[u8]>) -> bool {
    if own == Some(entry) {
        return true;
    }
    let leaf = entry.rsplit(|&b| b == b'/').next().unwrap_or(entry);
    let own_leaf = own.and_then(|o| o.rsplit(|&b| b == b'/').next());
    LIBRARY_NAMES.contains(&leaf) || (own_leaf.is_some() && own_leaf == Some(leaf))
}

/// The value of the injection variable without capshim's entries, written into `out`
/// (entries kept in order, joined by ':'); returns its length, `Some(0)` when nothing is
/// left, `None` when it does not fit.
pub fn injection_without_capshim(
    value: &[u8],
    own: Option<&[u8]>,
    out: &mut [u8],
) -> Option<usize> {
    let mut len = 0;
    for entry in value.split(|&b| is_separator(b)) {
        if entry.is_empty() || is_capshim_library(entry, own) {
            continue;
        }
        let sep = usize::from(len > 0);
        if len + sep + entry.len() > out.len() {
            return None;
        }
        if sep == 1 {
            out[len] = b':';
        }
        out[len + sep..len + sep + entry.len()].copy_from_slice(entry);
        len += sep + entry.len();
    }
    Some(len)
}

/// How one `NAME=value` entry fares.
#[derive(Debug, PartialEq, Eq)]
pub enum Entry {
    /// Kept as it is.
    Keep,
    /// Removed: a variable capshim reads, or an injection variable left empty.
    Drop,
    /// The injection variable, with capshim's entries taken out.
    Injection,
}

/// What happens to `entry` (`NAME=value`).
pub fn classify(entry: &[u8], own: Option<&[u8]>) -> Entry {
    let name = entry.split(|&b| b == b'=').next().unwrap_or(entry);
    if is_capshim_var(name) {
        return Entry::Drop;
    }
    if name != INJECTION_VAR.as_bytes() || name.len() == entry.len() {
        return Entry::Keep;
    }
    let value = &entry[name.len() + 1..];
    if value
        .split(|&b| is_separator(b))
        .any(|e| !e.is_empty() && is_capshim_library(e, own))
    {
        Entry::Injection
    } else {
        Entry::Keep
    }
}

/// The entries of a NULL-terminated `envp`, as byte strings.
///
/// # Safety
/// `envp` is NULL or a NULL-terminated array of NUL-terminated strings, all of which outlive
/// the iterator's use.
unsafe fn entries<'a>(
    envp: *const *const c_char,
) -> impl Iterator<Item = (*const c_char, &'a [u8])> {
    let mut i = 0;
    std::iter::from_fn(move || {
        if envp.is_null() {
            return None;
        }
        // SAFETY: the caller promises a NULL-terminated array; we stop at its NULL.
        let ptr = unsafe { *envp.add(i) };
        if ptr.is_null() {
            return None;
        }
        i += 1;
        // SAFETY: each non-NULL entry is a NUL-terminated string (the caller's promise).
        Some((ptr, unsafe { std::ffi::CStr::from_ptr(ptr) }.to_bytes()))
    })
}

/// Whether removing capshim would change `envp` at all.
///
/// # Safety
/// As [`with_edited`].
pub unsafe fn needs_edit(envp: *const *const c_char, own: Option<&[u8]>) -> bool {
    // SAFETY: passed on from the caller.
    unsafe { entries(envp) }.any(|(_, e)| classify(e, own) != Entry::Keep)
}

/// Calls `run` with `envp` edited as the module says (a NULL-terminated array on this stack
/// frame, valid during the call), or returns `None` without calling it when the edited list
/// does not fit [`MAX_ENTRIES`] and [`MAX_INJECTION`].
///
/// # Safety
/// `envp` is NULL or a NULL-terminated array of NUL-terminated strings, unchanged during
/// the call.
pub unsafe fn with_edited<R>(
    envp: *const *const c_char,
    own: Option<&[u8]>,
    run: impl FnOnce(*const *const c_char) -> R,
) -> Option<R> {
    let mut list: [*const c_char; MAX_ENTRIES + 1] = [std::ptr::null(); MAX_ENTRIES + 1];
    let mut injection = [0u8; MAX_INJECTION];
    let mut injection_used = false;
    let mut n = 0;
    // SAFETY: passed on from the caller.
    for (ptr, entry) in unsafe { entries(envp) } {
        let keep = match classify(entry, own) {
            Entry::Keep => ptr,
            Entry::Drop => continue,
            Entry::Injection => {
                if injection_used {
                    // A second injection entry: no room for two edits; not judged.
                    return None;
                }
                let prefix = INJECTION_VAR.len() + 1;
                let (name, out) = injection.split_at_mut(prefix);
                name.copy_from_slice(&entry[..prefix]);
                // Room for the NUL.
                let end = out.len() - 1;
                let len = injection_without_capshim(&entry[prefix..], own, &mut out[..end])?;
                if len == 0 {
                    continue;
                }
                out[len] = 0;
                injection_used = true;
                injection.as_ptr().cast()
            }
        };
        if n == MAX_ENTRIES {
            return None;
        }
        list[n] = keep;
        n += 1;
    }
    Some(run(list.as_ptr()))
}
