//! The files a run used, identified before its first process: path, size, modification time
//! and SHA-256 ([`FileId`], as `environment.json` records them), hashed with a progress bar
//! and stoppable by a signal; after the last process, [`Stamp::check`] finds a file that was
//! replaced or changed meanwhile from its identity: device and inode (another file moved into
//! its place), size, modification time and status-change time (ctime), to the nanosecond. The
//! ctime is what catches a file written in place and its modification time set back (`touch
//! -r`): the kernel sets it on every write and metadata change, and no user can set it back.
//! Checking the identity costs one `stat`, where hashing a model again would cost as long as
//! the first hash.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use indicatif::{ProgressBar, ProgressStyle};
use serde::{Deserialize, Serialize};

use super::sums::sha256_reader;
use super::time;

/// Files from this size on get a progress bar (or, without a terminal, a line) while hashed.
const SHOW_PROGRESS_FROM: u64 = 256 << 20;

/// A file's path, size, modification time and SHA-256, for `environment.json`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct FileId {
    /// Absolute path.
    pub path: String,
    /// Size, in bytes.
    pub bytes: u64,
    /// SHA-256, lowercase hex.
    pub sha256: String,
    /// Modification time, UTC to the second, when the file system gives one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modified_utc: Option<String>,
}

/// A file's identity when it was hashed: where it is stored, its size and its times.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stamp {
    /// The file.
    pub path: PathBuf,
    /// Size, in bytes.
    pub bytes: u64,
    /// Modification time.
    pub modified: Option<SystemTime>,
    /// Device and inode: which file the path names.
    pub device_inode: (u64, u64),
    /// Status-change time (ctime), seconds and nanoseconds since the epoch.
    pub changed: (i64, i64),
}

/// Why a file could not be identified.
#[derive(Debug, thiserror::Error)]
pub enum IdentifyError {
    /// The file cannot be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A signal arrived while it was being hashed.
    #[error(
        "interrupted by {} while computing the SHA-256 of {path}",
        crate::launch::signals::name(*signal)
    )]
    Stopped {
        /// The file.
        path: PathBuf,
        /// The signal's number.
        signal: i32,
    },
    /// It changed since it was hashed.
    #[error(
        "{path} changed while capshim used it: {what}; the results may mix the file before and \
         after, and the recorded SHA-256 is not the file's: keep the file unchanged and run again"
    )]
    Changed {
        /// The file.
        path: PathBuf,
        /// What changed, e.g. `its size went from 15 to 17 bytes`.
        what: String,
    },
}

fn seconds(t: SystemTime) -> Option<u64> {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .ok()
        .map(|d| d.as_secs())
}

impl Stamp {
    fn of(path: &Path) -> Result<Stamp, IdentifyError> {
        let meta = std::fs::metadata(path).map_err(|source| IdentifyError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        use std::os::unix::fs::MetadataExt;
        Ok(Stamp {
            path: path.to_path_buf(),
            bytes: meta.len(),
            modified: meta.modified().ok(),
            device_inode: (meta.dev(), meta.ino()),
            changed: (meta.ctime(), meta.ctime_nsec()),
        })
    }

    /// Checks that the path still names the same file (device and inode), with the size,
    /// modification time and status-change time it had when hashed.
    ///
    /// # Errors
    /// [`IdentifyError::Changed`] saying what changed; [`IdentifyError::Io`] when it is gone
    /// or unreadable.
    pub fn check(&self) -> Result<(), IdentifyError> {
        let now = Stamp::of(&self.path)?;
        let what = if now.device_inode != self.device_inode {
            format!(
                "it is another file now (device {} inode {}, was device {} inode {}): one was \
                 moved or copied into its place",
                now.device_inode.0, now.device_inode.1, self.device_inode.0, self.device_inode.1
            )
        } else if now.bytes != self.bytes {
            format!("its size went from {} to {} bytes", self.bytes, now.bytes)
        } else if now.modified != self.modified {
            let show = |t: Option<SystemTime>| {
                t.and_then(seconds)
                    .map_or_else(|| "unknown".to_string(), time::iso)
            };
            format!(
                "its modification time went from {} to {}",
                show(self.modified),
                show(now.modified)
            )
        } else if now.changed != self.changed {
            let show = |(s, ns): (i64, i64)| {
                u64::try_from(s)
                    .map_or_else(|_| format!("{s}s"), |s| format!("{}+{ns}ns", time::iso(s)))
            };
            format!(
                "its status-change time (ctime) went from {} to {}, with its size and \
                 modification time unchanged: it was written in place (or its permissions or \
                 owner changed) and its modification time set back",
                show(self.changed),
                show(now.changed)
            )
        } else {
            return Ok(());
        };
        Err(IdentifyError::Changed {
            path: self.path.clone(),
            what,
        })
    }
}

/// Hashes `path`, showing progress on stderr for a large file (`what` names it, e.g.
/// `model`), and stops between blocks when `stop` returns a signal's number.
///
/// # Errors
/// [`IdentifyError::Io`], or [`IdentifyError::Stopped`] when `stop` returned a signal.
pub fn identify(
    path: &Path,
    what: &str,
    stop: &dyn Fn() -> Option<i32>,
) -> Result<(FileId, Stamp), IdentifyError> {
    let io = |source| IdentifyError::Io {
        path: path.to_path_buf(),
        source,
    };
    let stamp = Stamp::of(path)?;
    let file = std::fs::File::open(path).map_err(io)?;
    let bar = if stamp.bytes >= SHOW_PROGRESS_FROM {
        let bar = ProgressBar::new(stamp.bytes);
        bar.set_style(
            ProgressStyle::with_template(
                "{spinner} SHA-256 of the {msg} {bar:30} {bytes}/{total_bytes} ({bytes_per_sec}, ETA {eta}); Ctrl-C stops",
            )
            .expect("valid template"),
        );
        bar.set_message(what.to_string());
        if bar.is_hidden() {
            crate::term::line(format!(
                "capshim: computing the SHA-256 of the {what} {} ({:.1} GB) before the first run",
                path.display(),
                stamp.bytes as f64 / 1e9
            ));
        }
        Some(bar)
    } else {
        None
    };
    let mut signal = None;
    let sum = sha256_reader(file, &mut |done| {
        if let Some(bar) = &bar {
            bar.set_position(done);
        }
        signal = stop();
        signal.is_none()
    })
    .map_err(io);
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    let Some(sha256) = sum? else {
        return Err(IdentifyError::Stopped {
            path: path.to_path_buf(),
            signal: signal.unwrap_or(0),
        });
    };
    let id = FileId {
        path: path.display().to_string(),
        bytes: stamp.bytes,
        sha256,
        modified_utc: stamp.modified.and_then(seconds).map(time::iso),
    };
    Ok((id, stamp))
}

/// As [`identify`], for a small file: no progress, never stopped.
///
/// # Errors
/// [`IdentifyError::Io`].
pub fn file_id(path: &Path) -> Result<FileId, IdentifyError> {
    identify(path, "file", &|| None).map(|(id, _)| id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_is_identified_and_its_changes_found() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("m.gguf");
        std::fs::write(&path, "abc").unwrap();
        let (id, stamp) = identify(&path, "model", &|| None).unwrap();
        assert_eq!(
            id.sha256,
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(id.bytes, 3);
        assert!(id.modified_utc.as_deref().is_some_and(|t| t.ends_with('Z')));
        stamp.check().unwrap();

        let err = identify(&path, "model", &|| Some(2)).unwrap_err();
        assert!(
            matches!(err, IdentifyError::Stopped { signal: 2, .. }),
            "{err}"
        );

        std::fs::write(&path, "abcd").unwrap();
        let err = stamp.check().unwrap_err().to_string();
        assert!(
            err.contains("m.gguf changed while capshim used it"),
            "{err}"
        );
        assert!(err.contains("its size went from 3 to 4 bytes"), "{err}");

        // Same size, another time.
        let (_, stamp) = identify(&path, "model", &|| None).unwrap();
        let file = std::fs::File::options().write(true).open(&path).unwrap();
        file.set_modified(SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(86_400))
            .unwrap();
        let err = stamp.check().unwrap_err().to_string();
        assert!(
            err.contains("its modification time went from")
                && err.contains("to 1970-01-02T00:00:00Z"),
            "{err}"
        );
        std::fs::remove_file(&path).unwrap();
        assert!(matches!(stamp.check(), Err(IdentifyError::Io { .. })));
    }

    /// Sets `path`'s access and modification times to `other`'s, to the nanosecond, as
    /// `touch -r` does.
    fn same_times(path: &Path, other: &std::fs::Metadata) {
        let times = std::fs::FileTimes::new()
            .set_accessed(other.accessed().unwrap())
            .set_modified(other.modified().unwrap());
        std::fs::File::options()
            .write(true)
            .open(path)
            .unwrap()
            .set_times(times)
            .unwrap();
    }

    #[test]
    fn a_file_swapped_with_the_same_size_and_modification_time_is_found() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("m.gguf");
        std::fs::write(&path, "abc").unwrap();
        let (_, stamp) = identify(&path, "model", &|| None).unwrap();
        // Another file of the same size and times moved into its place.
        let other = tmp.path().join("other.gguf");
        std::fs::write(&other, "xyz").unwrap();
        same_times(&other, &std::fs::metadata(&path).unwrap());
        std::fs::rename(&other, &path).unwrap();
        let now = std::fs::metadata(&path).unwrap();
        assert_eq!(
            (now.len(), now.modified().ok()),
            (stamp.bytes, stamp.modified)
        );
        let err = stamp.check().unwrap_err().to_string();
        assert!(
            err.contains("m.gguf changed while capshim used it: it is another file now"),
            "{err}"
        );

        // The same file written in place, its modification time set back.
        let (_, stamp) = identify(&path, "model", &|| None).unwrap();
        let before = std::fs::metadata(&path).unwrap();
        // The kernel's ctime clock ticks coarsely: wait until a file written now gets another.
        use std::os::unix::fs::MetadataExt;
        let ctime = |m: &std::fs::Metadata| (m.ctime(), m.ctime_nsec());
        let probe = tmp.path().join("probe");
        loop {
            std::fs::write(&probe, "").unwrap();
            if ctime(&std::fs::metadata(&probe).unwrap()) != ctime(&before) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        std::fs::write(&path, "xyw").unwrap();
        same_times(&path, &before);
        let err = stamp.check().unwrap_err().to_string();
        assert!(
            err.contains("its status-change time (ctime) went from")
                && err.contains("written in place"),
            "{err}"
        );
    }
}
