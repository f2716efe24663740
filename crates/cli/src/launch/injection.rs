//! The loader's injection variable (`DYLD_INSERT_LIBRARIES`, `LD_PRELOAD`) as capshim edits
//! it: where the shim goes among the libraries already listed, and which entries are capshim
//! libraries, to drop so that one shim hooks.

use std::ffi::{OsStr, OsString};
use std::path::Path;

use super::Os;
use super::dylib::Flavor;

/// The injection variable's value with `library` added where the loader of `os` runs its
/// initializer before those of the libraries already listed: first in `DYLD_INSERT_LIBRARIES`
/// (dyld loads the inserted libraries in list order and runs their initializers in that
/// order), last in `LD_PRELOAD` (glibc runs the preloaded libraries' constructors in reverse
/// order); docs/apple-runtime.md, "Processes", has the sources. Then a device another
/// inserted library creates from its initializer is already hooked. `existing` is returned
/// unchanged when it lists `library` already.
pub fn insert_library(existing: Option<&OsStr>, library: &OsStr, os: Os) -> OsString {
    let Some(value) = existing.filter(|v| !v.is_empty()) else {
        return library.to_os_string();
    };
    if value
        .as_encoded_bytes()
        .split(|&b| b == b':' || (os == Os::Linux && b == b' '))
        .any(|entry| entry == library.as_encoded_bytes())
    {
        return value.to_os_string();
    }
    let (first, second) = match os {
        Os::MacOs => (library, value),
        Os::Linux => (value, library),
    };
    let mut out = first.to_os_string();
    out.push(":");
    out.push(second);
    out
}

/// Whether an entry of the injection variable is a capshim library: it is `library` itself,
/// its file name is `libcapshim.dylib` or `libcapshim.so` or the guard library's
/// (`libcapshim_guard.dylib`, `libcapshim_guard.so`), or it is a path (it holds a `/`,
/// which both loaders read as a path, relative to the working folder or absolute) to a file
/// that carries capshim's version record (`__DATA,__capshim` in a Mach-O slice,
/// `.capshim_version` in ELF; [`capshim_macho::record`]), whatever its name: a renamed copy
/// would otherwise hook alongside the shim injected now. Only the file's headers and that
/// section are read; an unreadable file is not a capshim library.
fn is_capshim_library(entry: &[u8], library: &OsStr) -> bool {
    let name = entry.rsplit(|&b| b == b'/').next().unwrap_or(entry);
    if entry == library.as_encoded_bytes()
        || [Os::MacOs, Os::Linux].iter().any(|&os| {
            [Flavor::Plain, Flavor::Guard]
                .iter()
                .any(|flavor| name == flavor.file_name(os).as_bytes())
        })
    {
        return true;
    }
    if !entry.contains(&b'/') {
        return false;
    }
    let path = Path::new(<OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(entry));
    match capshim_macho::inspect_file(path) {
        Ok(capshim_macho::Binary::Native { slices, .. }) => {
            slices.iter().any(|s| s.version_record.is_some())
        }
        _ => false,
    }
}

/// The injection variable's `value` without its capshim libraries (see
/// [`is_capshim_library`]), entries split at `:` (and, for `LD_PRELOAD`, which glibc also
/// splits at spaces, at spaces); `None` when nothing else is left.
pub fn strip_capshim_libraries(value: &OsStr, library: &OsStr, os: Os) -> Option<OsString> {
    let bytes = value.as_encoded_bytes();
    let split = |b: &u8| *b == b':' || (os == Os::Linux && *b == b' ');
    let kept: Vec<&[u8]> = bytes
        .split(split)
        .filter(|e| !e.is_empty() && !is_capshim_library(e, library))
        .collect();
    if kept.is_empty() {
        return None;
    }
    Some(std::os::unix::ffi::OsStringExt::from_vec(kept.join(&b':')))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shim_goes_where_its_initializer_runs_first_without_duplicates() {
        let insert = |existing: Option<&str>, os| {
            insert_library(existing.map(OsStr::new), OsStr::new("/x/l.so"), os)
        };
        // glibc runs preloaded constructors in reverse list order: the shim goes last.
        assert_eq!(insert(Some("/a.so"), Os::Linux), "/a.so:/x/l.so");
        assert_eq!(insert(Some("/a.dylib"), Os::MacOs), "/x/l.so:/a.dylib");
        assert_eq!(insert(Some("/a:/x/l.so"), Os::MacOs), "/a:/x/l.so");
        assert_eq!(insert(Some("/a /x/l.so"), Os::Linux), "/a /x/l.so");
        assert_eq!(insert(Some(""), Os::MacOs), "/x/l.so");
        assert_eq!(insert(None, Os::Linux), "/x/l.so");
    }

    #[test]
    fn inherited_capshim_libraries_are_stripped_so_one_shim_hooks() {
        let lib = OsStr::new("/opt/capshim/libcapshim.so");
        let strip = |v: &str, os| {
            strip_capshim_libraries(OsStr::new(v), lib, os).map(|s| s.into_string().unwrap())
        };
        assert_eq!(
            strip("/a/libx.so:/old/libcapshim.so:/b/liby.so", Os::Linux).as_deref(),
            Some("/a/libx.so:/b/liby.so")
        );
        assert_eq!(
            strip("/old/libcapshim.so /a/libx.so", Os::Linux).as_deref(),
            Some("/a/libx.so")
        );
        assert_eq!(
            strip("libcapshim.dylib:/opt/capshim/libcapshim.so", Os::MacOs),
            None
        );
        assert_eq!(
            strip("/a/libcapshim.so.bak", Os::Linux).as_deref(),
            Some("/a/libcapshim.so.bak")
        );
        // The guard library is capshim's too: one shim hooks, whichever was inherited.
        assert_eq!(
            strip("/old/libcapshim_guard.dylib:/a/libx.dylib", Os::MacOs).as_deref(),
            Some("/a/libx.dylib")
        );
    }

    #[test]
    fn a_renamed_capshim_library_is_known_by_its_version_record() {
        use capshim_macho::testdata::{macho, with_version_record};
        use object::macho::CPU_TYPE_ARM64;
        let dir = tempfile::tempdir().unwrap();
        let renamed = dir.path().join("old-libcapshim.dylib");
        std::fs::write(
            &renamed,
            with_version_record(CPU_TYPE_ARM64, 0, "capshim-version 0.0.9"),
        )
        .unwrap();
        let other = dir.path().join("libother.dylib");
        std::fs::write(
            &other,
            macho(CPU_TYPE_ARM64, 0, object::macho::MH_DYLIB, None),
        )
        .unwrap();
        let value = format!(
            "{}:{}:/nonexistent/libx.dylib",
            other.display(),
            renamed.display()
        );
        let kept = strip_capshim_libraries(
            OsStr::new(&value),
            OsStr::new("/opt/capshim/libcapshim.dylib"),
            Os::MacOs,
        );
        assert_eq!(
            kept.unwrap(),
            OsString::from(format!("{}:/nonexistent/libx.dylib", other.display()))
        );
        // A bare name is searched for by the loader, not read here: only its name counts.
        assert!(!is_capshim_library(
            b"old-libcapshim.dylib",
            OsStr::new("/l")
        ));
    }
}
