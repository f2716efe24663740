//! `dist/SHA256SUMS`: one `sha256sum -c` line for every artifact under the output directory,
//! paths relative to it; written after a build, checked by every `cargo xtask dist`.

use std::path::Path;

use anyhow::Context;
use sha2::{Digest, Sha256};

use super::{DYLIB, GUARD, TARGET};
use crate::checks::Check;

/// The sums file, in the output directory.
pub const SUMS: &str = "SHA256SUMS";

/// Every regular file under `dir` except `SHA256SUMS`, as sorted `/`-separated relative paths.
fn artifact_paths(dir: &Path) -> anyhow::Result<Vec<String>> {
    fn walk(base: &Path, dir: &Path, found: &mut Vec<String>) -> anyhow::Result<()> {
        for entry in
            std::fs::read_dir(dir).with_context(|| format!("cannot list {}", dir.display()))?
        {
            let path = entry?.path();
            if path.is_dir() {
                walk(base, &path, found)?;
            } else if path.is_file() {
                let relative = path.strip_prefix(base)?;
                let parts: Vec<String> = relative
                    .components()
                    .map(|c| c.as_os_str().to_string_lossy().into_owned())
                    .collect();
                let name = parts.join("/");
                if name != SUMS {
                    found.push(name);
                }
            }
        }
        Ok(())
    }
    let mut found = Vec::new();
    walk(dir, dir, &mut found)?;
    found.sort();
    Ok(found)
}

fn sha256_hex(data: &[u8]) -> String {
    Sha256::digest(data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Writes `SHA256SUMS` for every artifact under `out`, in `sha256sum -c` format.
pub fn write_sums(out: &Path) -> anyhow::Result<()> {
    let mut text = String::new();
    for name in artifact_paths(out)? {
        let data = std::fs::read(out.join(&name))?;
        text += &format!("{}  {name}\n", sha256_hex(&data));
    }
    let path = out.join(SUMS);
    std::fs::write(&path, &text).with_context(|| format!("cannot write {}", path.display()))?;
    eprintln!(
        "dist: wrote {} ({} file(s))",
        path.display(),
        text.lines().count()
    );
    Ok(())
}

/// Checks `SHA256SUMS` against the files: every line matches, every artifact is listed.
pub fn check_sums(out: &Path) -> anyhow::Result<Vec<Check>> {
    let path = out.join(SUMS);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(error) => {
            return Ok(vec![check(
                "sums",
                false,
                format!("cannot read {}: {error}", path.display()),
            )]);
        }
    };
    let mut checks = Vec::new();
    let mut listed = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let parsed = line
            .split_once("  ")
            .or_else(|| line.split_once(" *"))
            .filter(|(hex, _)| hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()));
        let Some((expected, name)) = parsed else {
            checks.push(check(
                "sums",
                false,
                format!("{SUMS} line {}: not `<sha256>  <path>`", number + 1),
            ));
            continue;
        };
        listed.push(name.to_owned());
        match std::fs::read(out.join(name)) {
            Ok(data) if sha256_hex(&data) == expected.to_ascii_lowercase() => {
                checks.push(check("sha256", true, format!("{name}: {expected}")));
            }
            Ok(_) => checks.push(check(
                "sha256",
                false,
                format!("{name}: content does not match {SUMS}"),
            )),
            Err(error) => checks.push(check("sha256", false, format!("{name}: {error}"))),
        }
    }
    for name in artifact_paths(out)? {
        if !listed.contains(&name) {
            checks.push(check(
                "sha256",
                false,
                format!("{name}: not listed in {SUMS}"),
            ));
        }
    }
    for library in [DYLIB, GUARD] {
        if !listed.iter().any(|n| n == &format!("{TARGET}/{library}")) {
            checks.push(check(
                "sha256",
                false,
                format!("{TARGET}/{library} is not listed in {SUMS}"),
            ));
        }
    }
    Ok(checks)
}

fn check(name: &'static str, ok: bool, detail: String) -> Check {
    Check { name, ok, detail }
}

#[cfg(test)]
mod tests {
    use super::super::CLI;
    use super::*;
    use std::path::PathBuf;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("xtask-sums-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join(TARGET)).unwrap();
        dir
    }

    #[test]
    fn sums_round_trip_and_catch_changes() {
        let dir = scratch("sums");
        std::fs::write(dir.join(TARGET).join(DYLIB), b"dylib bytes").unwrap();
        std::fs::write(dir.join(TARGET).join(CLI), b"cli bytes").unwrap();
        write_sums(&dir).unwrap();
        // Without the guard library, the sums are incomplete.
        assert!(check_sums(&dir).unwrap().iter().any(|c| !c.ok));
        std::fs::write(dir.join(TARGET).join(GUARD), b"guard bytes").unwrap();
        write_sums(&dir).unwrap();
        let text = std::fs::read_to_string(dir.join(SUMS)).unwrap();
        assert_eq!(
            text,
            format!(
                "{}  {TARGET}/{CLI}\n{}  {TARGET}/{DYLIB}\n{}  {TARGET}/{GUARD}\n",
                sha256_hex(b"cli bytes"),
                sha256_hex(b"dylib bytes"),
                sha256_hex(b"guard bytes")
            )
        );
        assert!(check_sums(&dir).unwrap().iter().all(|c| c.ok));

        // Changed content, an unlisted file, a missing file: each fails.
        std::fs::write(dir.join(TARGET).join(CLI), b"other").unwrap();
        assert!(check_sums(&dir).unwrap().iter().any(|c| !c.ok));
        write_sums(&dir).unwrap();
        std::fs::write(dir.join(TARGET).join("extra"), b"x").unwrap();
        assert!(check_sums(&dir).unwrap().iter().any(|c| !c.ok));
        std::fs::remove_file(dir.join(TARGET).join("extra")).unwrap();
        std::fs::remove_file(dir.join(TARGET).join(CLI)).unwrap();
        assert!(check_sums(&dir).unwrap().iter().any(|c| !c.ok));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn sha256_of_empty_input() {
        assert_eq!(
            sha256_hex(b""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }

    #[test]
    fn missing_sums_file_fails() {
        let dir = scratch("nosums");
        let checks = check_sums(&dir).unwrap();
        assert!(checks.iter().all(|c| !c.ok) && !checks.is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
