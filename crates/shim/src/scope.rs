//! `CAPSHIM_SCOPE=process`: take the shim out of the environment children inherit.

use std::ffi::{OsStr, OsString, c_void};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

use capshim_profile::env::is_capshim_var;

/// The variable through which the dynamic loader injects libraries at launch.
#[cfg(target_vendor = "apple")]
pub const INJECTION_VAR: &str = "DYLD_INSERT_LIBRARIES";
/// The variable through which the dynamic loader injects libraries at launch.
#[cfg(not(target_vendor = "apple"))]
pub const INJECTION_VAR: &str = "LD_PRELOAD";

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

/// Whether other threads may already be running (then changing the environment is unsafe).
fn has_other_threads() -> bool {
    #[cfg(target_os = "linux")]
    {
        std::fs::read_dir("/proc/self/task").map_or(true, |tasks| tasks.count() > 1)
    }
    #[cfg(not(target_os = "linux"))]
    {
        false
    }
}

/// Removes the shim's own entry from [`INJECTION_VAR`] and every `CAPSHIM_*`/`LUME_METAL_*`
/// variable, so child processes start stock.
///
/// # Errors
/// A reason, when the environment was left as it was.
pub fn detach() -> Result<(), &'static str> {
    if has_other_threads() {
        return Err(
            "other threads are running, so the environment was left unchanged (inject at launch)",
        );
    }
    let own = own_path().ok_or("could not find the shim's own path")?;
    let injected = std::env::var_os(INJECTION_VAR);
    let capshim_vars: Vec<OsString> = std::env::vars_os()
        .map(|(name, _)| name)
        .filter(|name| is_capshim_var(name.as_bytes()))
        .collect();
    // SAFETY: set_var/remove_var race with other threads reading the environment. This runs
    // in the initializer of a library injected at launch, before the program's main, and we
    // just checked (on Linux) that no other thread exists.
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
}
