//! Reading a small file named on the command line (a profile file, a probe report, llama-bench
//! JSON) without hanging or reading without end: a regular file, or the pipe a shell gives
//! for process substitution (`--stock <(capshim probe --json)` names `/dev/fd/63`); anything
//! else (a FIFO elsewhere, a device such as /dev/zero, a folder, a socket) is refused from
//! its metadata before it is opened, and no more than a stated number of bytes is read.
//!
//! A FIFO is accepted only under `/dev/fd/` (or `/proc/self/fd/`, `/dev/stdin`): there it is
//! a pipe the shell has already opened, with a writer; opening a named FIFO elsewhere would
//! wait for a writer that may never come.

use std::io::Read;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

/// Why an input file cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    /// It cannot be found, opened or read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// It is not a regular file or a process-substitution pipe.
    #[error(
        "{path} is {kind}, not a regular file: capshim reads only regular files here (or a \
         shell's <(...) pipe), never waiting on a FIFO or reading a device without end; save \
         the data to a file and give that"
    )]
    NotRegular {
        /// The file.
        path: PathBuf,
        /// What it is.
        kind: &'static str,
    },
    /// It is larger than anything of its kind should be.
    /// The caller's message says which path to check.
    #[error("{path} is larger than {max} bytes, too large for {what}")]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// The most bytes read.
        max: u64,
        /// What it should be, e.g. `a profile file`.
        what: &'static str,
    },
    /// It is not text.
    #[error("{path} is not UTF-8 text; give {what}")]
    NotText {
        /// The file.
        path: PathBuf,
        /// What it should be.
        what: &'static str,
    },
}

/// Whether `path` names a descriptor the shell opened (process substitution, stdin).
fn is_open_descriptor(path: &Path) -> bool {
    path.starts_with("/dev/fd")
        || path.starts_with("/proc/self/fd")
        || path == Path::new("/dev/stdin")
}

/// Checks, from its metadata and without opening it, that `path` can be read as an input:
/// a regular file, or a pipe under `/dev/fd/`.
///
/// # Errors
/// [`InputError::NotRegular`] naming what it is; [`InputError::Io`] when it cannot be found.
pub fn check(path: &Path) -> Result<(), InputError> {
    let meta = std::fs::metadata(path).map_err(|source| InputError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    if meta.is_file() || (meta.file_type().is_fifo() && is_open_descriptor(path)) {
        Ok(())
    } else {
        Err(InputError::NotRegular {
            path: path.to_path_buf(),
            kind: capshim_macho::file_kind(&meta),
        })
    }
}

/// Reads `path` as text after [`check`], at most `max` bytes; `what` names what it should
/// be in messages (`a profile file`).
///
/// # Errors
/// [`InputError`] naming the file.
pub fn read_text(path: &Path, max: u64, what: &'static str) -> Result<String, InputError> {
    check(path)?;
    let io = |source| InputError::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = std::fs::File::open(path).map_err(io)?;
    // Replaced between the check and the open: check what was opened.
    let meta = file.metadata().map_err(io)?;
    if !(meta.is_file() || meta.file_type().is_fifo()) {
        return Err(InputError::NotRegular {
            path: path.to_path_buf(),
            kind: capshim_macho::file_kind(&meta),
        });
    }
    let mut bytes = Vec::new();
    file.take(max + 1).read_to_end(&mut bytes).map_err(io)?;
    if bytes.len() as u64 > max {
        return Err(InputError::TooLarge {
            path: path.to_path_buf(),
            max,
            what,
        });
    }
    String::from_utf8(bytes).map_err(|_| InputError::NotText {
        path: path.to_path_buf(),
        what,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_regular_files_and_shell_pipes_are_read() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("a.toml");
        std::fs::write(&file, "abc").unwrap();
        assert_eq!(read_text(&file, 3, "a file").unwrap(), "abc");
        let err = read_text(&file, 2, "a profile file")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("larger than 2 bytes, too large for a profile file"),
            "{err}"
        );
        let err = read_text(Path::new("/dev/zero"), 10, "x")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("/dev/zero is a character device, not a regular file"),
            "{err}"
        );
        let err = read_text(tmp.path(), 10, "x").unwrap_err().to_string();
        assert!(err.contains("is a folder"), "{err}");
        // A named FIFO is refused without being opened (opening it would wait for a writer).
        let fifo = tmp.path().join("fifo");
        assert!(
            std::process::Command::new("mkfifo")
                .arg(&fifo)
                .status()
                .unwrap()
                .success()
        );
        let err = read_text(&fifo, 10, "x").unwrap_err().to_string();
        assert!(
            err.contains("is a FIFO (named pipe), not a regular file"),
            "{err}"
        );
        let err = read_text(&tmp.path().join("none"), 10, "x")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("cannot read") && err.contains("No such file"),
            "{err}"
        );
        std::fs::write(&file, [0xff, 0xfe]).unwrap();
        assert!(matches!(
            read_text(&file, 10, "x"),
            Err(InputError::NotText { .. })
        ));
    }

    #[test]
    fn a_process_substitution_pipe_is_read() {
        use std::os::fd::AsRawFd;
        let mut child = std::process::Command::new("printf")
            .arg("{\"a\":1}")
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let reader = child.stdout.take().unwrap();
        let path = PathBuf::from(format!("/dev/fd/{}", reader.as_raw_fd()));
        assert_eq!(read_text(&path, 100, "x").unwrap(), "{\"a\":1}");
        child.wait().unwrap();
    }
}
