//! `SHA256SUMS`: one `<hex>  <relative path>` line per file (the format `sha256sum -c` reads),
//! sorted by path, covering every file of the bundle but itself.

use std::io::Read;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::{BundleError, SUMS_FILE};

/// SHA-256 of a file's contents, in lowercase hex.
///
/// # Errors
/// The I/O error when the file cannot be read.
pub fn sha256_file(path: &Path) -> std::io::Result<String> {
    let mut file = std::fs::File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hex(&hasher.finalize()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Every file under `dir` but `SHA256SUMS`, as sorted `/`-separated relative paths.
fn files(dir: &Path) -> Result<Vec<String>, BundleError> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) -> Result<(), BundleError> {
        let entries = std::fs::read_dir(dir).map_err(BundleError::io("cannot list", dir))?;
        for entry in entries {
            let entry = entry.map_err(BundleError::io("cannot list", dir))?;
            let path = entry.path();
            if path.is_dir() {
                walk(root, &path, out)?;
            } else {
                let rel = path.strip_prefix(root).expect("under root");
                let rel: Vec<String> = rel
                    .components()
                    .map(|c| c.as_os_str().to_string_lossy().into_owned())
                    .collect();
                out.push(rel.join("/"));
            }
        }
        Ok(())
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out)?;
    out.retain(|f| f != SUMS_FILE);
    out.sort();
    Ok(out)
}

/// Writes `dir/SHA256SUMS` over every other file in `dir`.
///
/// # Errors
/// [`BundleError::Io`] when a file cannot be read or the sums cannot be written.
pub fn write_sums(dir: &Path) -> Result<(), BundleError> {
    let mut text = String::new();
    for rel in files(dir)? {
        let path = dir.join(&rel);
        let sum = sha256_file(&path).map_err(BundleError::io("cannot read", &path))?;
        text.push_str(&format!("{sum}  {rel}\n"));
    }
    let sums = dir.join(SUMS_FILE);
    std::fs::write(&sums, text).map_err(BundleError::io("cannot write", &sums))
}

/// Checks every file of `dir` against its `SHA256SUMS`: none changed, none missing, none added.
///
/// # Errors
/// [`BundleError::NotABundle`] without `SHA256SUMS`; [`BundleError::Tampered`] listing every
/// difference.
pub fn verify(dir: &Path) -> Result<(), BundleError> {
    let sums_path = dir.join(SUMS_FILE);
    if !dir.is_dir() {
        return Err(BundleError::NotABundle {
            path: dir.to_path_buf(),
            why: "no such directory".into(),
        });
    }
    let text = match std::fs::read_to_string(&sums_path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(BundleError::Unfinished {
                path: dir.to_path_buf(),
                has_note: dir.join(super::INCOMPLETE_FILE).is_file(),
            });
        }
        Err(e) => return Err(BundleError::io("cannot read", &sums_path)(e)),
    };
    let mut problems = Vec::new();
    let mut listed: Vec<String> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let Some((sum, rel)) = line.split_once("  ") else {
            problems.push(format!("{SUMS_FILE} line {} is malformed", i + 1));
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
        match sha256_file(&path) {
            Ok(actual) if actual == sum => {}
            Ok(_) => problems.push(format!("{rel} does not match its checksum")),
            Err(_) => problems.push(format!("{rel} is missing")),
        }
    }
    for rel in files(dir)? {
        if !listed.contains(&rel) {
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
mod tests {
    use super::*;

    #[test]
    fn sums_catch_changed_missing_and_added_files() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path();
        std::fs::create_dir(d.join("raw")).unwrap();
        std::fs::write(d.join("a.txt"), "abc").unwrap();
        std::fs::write(d.join("raw/b.json"), "[]").unwrap();
        write_sums(d).unwrap();
        let sums = std::fs::read_to_string(d.join(SUMS_FILE)).unwrap();
        assert_eq!(
            sums.lines().next().unwrap(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad  a.txt"
        );
        assert!(sums.contains("  raw/b.json\n"));
        verify(d).unwrap();

        std::fs::write(d.join("a.txt"), "abd").unwrap();
        std::fs::write(d.join("raw/new"), "x").unwrap();
        std::fs::remove_file(d.join("raw/b.json")).unwrap();
        let err = verify(d).unwrap_err();
        let BundleError::Tampered { problems, .. } = &err else {
            panic!("{err}")
        };
        assert_eq!(
            problems,
            &vec![
                "a.txt does not match its checksum".to_string(),
                "raw/b.json is missing".to_string(),
                "raw/new is not listed in SHA256SUMS".to_string(),
            ]
        );
        // No SHA256SUMS: the bench run never sealed it, which is not a change after sealing.
        std::fs::remove_file(d.join(SUMS_FILE)).unwrap();
        let err = verify(d).unwrap_err();
        assert!(
            matches!(
                err,
                BundleError::Unfinished {
                    has_note: false,
                    ..
                }
            ),
            "{err}"
        );
        assert!(err.to_string().contains("did not finish"), "{err}");
        assert!(!err.to_string().contains("changed after"), "{err}");
        std::fs::write(d.join(crate::bundle::INCOMPLETE_FILE), "x").unwrap();
        assert!(
            verify(d)
                .unwrap_err()
                .to_string()
                .contains("INCOMPLETE note")
        );
    }

    #[test]
    fn sums_naming_paths_outside_the_bundle_are_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path().join("b");
        std::fs::create_dir(&d).unwrap();
        std::fs::write(tmp.path().join("x"), "abc").unwrap();
        std::fs::write(d.join("a.txt"), "abc").unwrap();
        let sum = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
        let outside = tmp.path().join("x");
        for rel in ["../x", outside.to_str().unwrap(), "./a.txt", ""] {
            std::fs::write(d.join(SUMS_FILE), format!("{sum}  a.txt\n{sum}  {rel}\n")).unwrap();
            let err = verify(&d).unwrap_err();
            assert!(matches!(err, BundleError::Tampered { .. }), "{rel}: {err}");
            assert!(
                err.to_string().contains("a path outside the bundle"),
                "{rel}: {err}"
            );
        }
    }
}
