//! A full file system, told apart from a tool that printed nothing: when a run's output is cut
//! short, a test write next to it says whether the file system holding it is full.
//!
//! A tool writing to a full disk usually cannot say so: its buffered standard output is lost
//! when it exits, with exit status 0, and its output file is empty or cut short. Judged by that
//! output alone, the run "printed no results"; the test write finds the real cause.

use std::io::Write;
use std::path::Path;

/// Bytes the test write writes: enough to need new blocks on any file system.
const PROBE_BYTES: usize = 64 * 1024;

/// Whether the file system holding `dir` is full (or the user's quota on it spent): a test
/// file of [`PROBE_BYTES`] written there and removed. `None` when it could be written (or
/// failed for another reason), else the operating system's error.
pub fn full(dir: &Path) -> Option<std::io::Error> {
    let attempt = tempfile::Builder::new()
        .prefix(".capshim-space-check-")
        .tempfile_in(dir)
        .and_then(|mut file| {
            file.write_all(&[0u8; PROBE_BYTES])?;
            file.as_file().sync_all()
        });
    match attempt {
        Err(e) if is_full(&e) => Some(e),
        _ => None,
    }
}

/// Whether `e` says a file system is full or a quota spent (`ENOSPC`, `EDQUOT`).
pub fn is_full(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded
    )
}

/// The reason of a run whose output `output` was cut short by a full file system, if the one
/// holding it is full now; `None` otherwise.
pub fn cut_short_by_full_disk(output: &Path) -> Option<String> {
    let dir = output.parent().unwrap_or(Path::new("."));
    full(dir).map(|e| {
        format!(
            "no space left on device: {} may be cut short, since a test write to {} failed ({}); \
             free space on that file system and run again",
            output.display(),
            dir.display(),
            e.kind()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_with_room_is_not_full_and_keeps_no_test_file() {
        let tmp = tempfile::tempdir().unwrap();
        assert!(full(tmp.path()).is_none());
        assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0);
        assert!(cut_short_by_full_disk(&tmp.path().join("x.json")).is_none());
    }

    #[test]
    fn enospc_and_edquot_are_full_and_other_errors_are_not() {
        let os = std::io::Error::from_raw_os_error;
        assert!(is_full(&os(28))); // ENOSPC, on Linux and macOS
        assert!(!is_full(&os(13))); // EACCES
        // Linux's /dev/full refuses every write with ENOSPC (macOS has none).
        if !cfg!(target_os = "linux") {
            return;
        }
        let err = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .and_then(|mut f| f.write_all(b"x"))
            .unwrap_err();
        assert!(is_full(&err), "{err}");
    }
}
