//! `SHA256SUMS`: one `<hex>  <relative path>` line per file (the format `sha256sum -c` reads;
//! `sha256sum -b`'s `<hex> *<path>` is read too), sorted by path, covering every file of the
//! bundle but itself and its signature ([`SIG_FILE`]).
//!
//! A bundle holds only folders and regular files: a symbolic link (which could point out of
//! the bundle) or a special file (a FIFO would hang the reader) is refused, never followed.

use std::io::Read;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::{BundleError, SIG_FILE, SUMS_FILE};

/// SHA-256 of a file's contents, in lowercase hex.
///
/// # Errors
/// The I/O error when the file cannot be read.
pub fn sha256_file(path: &Path) -> std::io::Result<String> {
    sha256_reader(std::fs::File::open(path)?, &mut |_| true).map(|s| s.expect("never stopped"))
}

/// SHA-256 of everything `reader` gives, in lowercase hex; `keep_going` is called with the
/// bytes read so far after each block, and stops the hashing (`Ok(None)`) when it says false.
///
/// # Errors
/// The I/O error of a read.
pub fn sha256_reader(
    mut reader: impl Read,
    keep_going: &mut dyn FnMut(u64) -> bool,
) -> std::io::Result<Option<String>> {
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut total = 0u64;
    loop {
        let n = match reader.read(&mut buf) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        total += n as u64;
        if !keep_going(total) {
            return Ok(None);
        }
    }
    Ok(Some(hex(&hasher.finalize())))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// What a bundle's folder tree holds: its regular files as sorted `/`-separated relative
/// paths (but `SHA256SUMS` and its signature), and what it must not hold.
struct Tree {
    files: Vec<String>,
    refused: Vec<String>,
}

/// Walks `dir` without following symbolic links.
fn tree(dir: &Path) -> Result<Tree, BundleError> {
    fn walk(root: &Path, dir: &Path, tree: &mut Tree) -> Result<(), BundleError> {
        let entries = std::fs::read_dir(dir).map_err(BundleError::io("cannot list", dir))?;
        for entry in entries {
            let entry = entry.map_err(BundleError::io("cannot list", dir))?;
            let path = entry.path();
            let kind = entry
                .file_type()
                .map_err(BundleError::io("cannot read", &path))?;
            let rel = relative(root, &path);
            if kind.is_dir() {
                walk(root, &path, tree)?;
            } else if kind.is_file() {
                tree.files.push(rel);
            } else if kind.is_symlink() {
                tree.refused.push(format!(
                    "{rel} is a symbolic link: a bundle holds only regular files, and a link could \
                     point outside it"
                ));
            } else {
                tree.refused.push(format!(
                    "{rel} is not a regular file (a FIFO, socket or device)"
                ));
            }
        }
        Ok(())
    }
    let mut tree = Tree {
        files: Vec::new(),
        refused: Vec::new(),
    };
    walk(dir, dir, &mut tree)?;
    tree.files.retain(|f| f != SUMS_FILE && f != SIG_FILE);
    tree.files.sort();
    tree.refused.sort();
    Ok(tree)
}

fn relative(root: &Path, path: &Path) -> String {
    let rel = path.strip_prefix(root).expect("under root");
    let parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    parts.join("/")
}

/// Writes `dir/SHA256SUMS` over every other file in `dir` (but a signature).
///
/// # Errors
/// [`BundleError::Io`] when a file cannot be read or the sums cannot be written.
pub fn write_sums(dir: &Path) -> Result<(), BundleError> {
    let mut text = String::new();
    for rel in tree(dir)?.files {
        let path = dir.join(&rel);
        let sum = sha256_file(&path).map_err(BundleError::io("cannot read", &path))?;
        text.push_str(&format!("{sum}  {rel}\n"));
    }
    let sums = dir.join(SUMS_FILE);
    std::fs::write(&sums, text).map_err(BundleError::io("cannot write", &sums))
}

/// One line of `SHA256SUMS`: the checksum and the path, in text (`HASH  path`) or binary
/// (`HASH *path`) mode; `None` when it is neither.
fn parse_line(line: &str) -> Option<(&str, &str)> {
    let (sum, rest) = line.split_once(' ')?;
    let rel = rest.strip_prefix(' ').or_else(|| rest.strip_prefix('*'))?;
    let hex = sum.len() == 64 && sum.bytes().all(|b| b.is_ascii_hexdigit());
    hex.then_some((sum, rel))
}

/// Reads `dir/SHA256SUMS`.
fn read_sums(dir: &Path) -> Result<String, BundleError> {
    let sums_path = dir.join(SUMS_FILE);
    let tampered = |problem: String| BundleError::Tampered {
        path: dir.to_path_buf(),
        problems: vec![problem],
    };
    match std::fs::symlink_metadata(&sums_path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(BundleError::Unfinished {
                path: dir.to_path_buf(),
                has_note: dir.join(super::INCOMPLETE_FILE).is_file(),
            });
        }
        Err(e) => return Err(BundleError::io("cannot read", &sums_path)(e)),
        Ok(m) if m.is_dir() => {
            return Err(tampered(format!(
                "{SUMS_FILE} is a folder, not the checksum file"
            )));
        }
        Ok(m) if !m.is_file() => {
            return Err(tampered(format!(
                "{SUMS_FILE} is not a regular file (a symbolic link or special file)"
            )));
        }
        Ok(_) => {}
    }
    let bytes = std::fs::read(&sums_path).map_err(BundleError::io("cannot read", &sums_path))?;
    String::from_utf8(bytes).map_err(|_| tampered(format!("{SUMS_FILE} is not text")))
}

/// Checks every file of `dir` against its `SHA256SUMS`: none changed, none missing, none added,
/// no symbolic link or special file anywhere.
///
/// # Errors
/// [`BundleError::NotABundle`] when `dir` is no folder; [`BundleError::Unfinished`] without
/// `SHA256SUMS`; [`BundleError::Tampered`] listing every difference; [`BundleError::Io`] with
/// the OS error when a file cannot be read (permissions): that is not a change.
pub fn verify(dir: &Path) -> Result<(), BundleError> {
    if !dir.is_dir() {
        return Err(BundleError::NotABundle {
            path: dir.to_path_buf(),
            why: "no such directory".into(),
        });
    }
    let text = read_sums(dir)?;
    let tree = tree(dir)?;
    let mut problems = Vec::new();
    let mut listed: Vec<String> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let Some((sum, rel)) = parse_line(line) else {
            problems.push(format!(
                "{SUMS_FILE} line {} is not `HASH  PATH` (or `HASH *PATH`)",
                i + 1
            ));
            continue;
        };
        let inside = !rel.is_empty()
            && Path::new(rel)
                .components()
                .all(|c| matches!(c, std::path::Component::Normal(_)));
        if !inside {
            problems.push(format!(
                "{SUMS_FILE} line {} names {rel:?}, a path outside the bundle",
                i + 1
            ));
            continue;
        }
        listed.push(rel.to_string());
        let path: PathBuf = dir.join(rel);
        if !tree.files.iter().any(|f| f == rel) {
            // A link or special file is reported from the walk.
            match std::fs::symlink_metadata(&path) {
                Err(_) => problems.push(format!("{rel} is missing")),
                Ok(m) if m.is_dir() => problems.push(format!("{rel} is a folder, not a file")),
                Ok(_) => {}
            }
            continue;
        }
        match sha256_file(&path) {
            Ok(actual) if actual.eq_ignore_ascii_case(sum) => {}
            Ok(_) => problems.push(format!("{rel} does not match its checksum")),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                problems.push(format!("{rel} is missing"))
            }
            Err(e) => return Err(BundleError::io("cannot read", &path)(e)),
        }
    }
    problems.extend(tree.refused);
    for rel in &tree.files {
        if !listed.contains(rel) {
            problems.push(format!("{rel} is not listed in {SUMS_FILE}"));
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(BundleError::Tampered {
            path: dir.to_path_buf(),
            problems,
        })
    }
}

#[cfg(test)]
mod tests;
