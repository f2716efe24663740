//! `cargo xtask reproduce`: shows that `cargo xtask dist` is reproducible, by building it twice
//! from clean clones of the committed tree in two different folders and comparing the results
//! byte for byte (`dist/SHA256SUMS` and every file it lists).
//!
//! 1. Clone `HEAD` of this workspace twice (`git clone --no-local`), into
//!    `<dir>/a/capshim` and `<dir>/second-clone/src/capshim`: different folders, and paths of
//!    different lengths. Uncommitted changes are not part of the check (a warning says so).
//! 2. In each clone, `cargo xtask dist --out <clone>/dist` with the clone's own, empty
//!    target directory (`CARGO_TARGET_DIR` and `RUSTFLAGS` are removed from the environment);
//!    cargo's home, with its downloaded crates, is shared. The two builds run at the same
//!    time, each logging to `<clone>.log`.
//! 3. Compare the two `SHA256SUMS` files and the files they list. On a difference, name the
//!    files that differ and keep both clones for `cmp`/`diffoscope`; on success remove them
//!    unless `--keep`.
//!
//! It takes two full release builds (several minutes each), so it is its own command, not part
//! of the test suite; the release workflow runs it.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, bail};

use crate::dist;

/// Options of `cargo xtask reproduce`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Folder for the two clones; must not exist yet [default: a new folder in the system's
    /// temporary folder].
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// Keep the clones and their builds after a successful comparison.
    #[arg(long)]
    keep: bool,
}

/// Builds twice and compares; fails when the artifacts differ.
pub fn run(args: Args) -> anyhow::Result<()> {
    let started = Instant::now();
    let root = dist::workspace_root()?;
    let dir = match args.dir {
        Some(dir) => dir,
        None => std::env::temp_dir().join(format!("capshim-reproduce-{}", std::process::id())),
    };
    if dir.exists() {
        bail!(
            "{} already exists; name a new folder with --dir (reproduce never reuses or overwrites one)",
            dir.display()
        );
    }
    let head = git(&root, &["rev-parse", "HEAD"])?;
    if !git(&root, &["status", "--porcelain", "--untracked-files=no"])?.is_empty() {
        eprintln!(
            "reproduce: warning: the work tree has uncommitted changes; they are not built (the check builds commit {head})"
        );
    }
    let clones = [dir.join("a/capshim"), dir.join("second-clone/src/capshim")];
    for clone in &clones {
        std::fs::create_dir_all(clone.parent().context("a clone has a parent folder")?)
            .with_context(|| format!("cannot create {}", dir.display()))?;
        let status = Command::new("git")
            .args(["clone", "--quiet", "--no-local"])
            .arg(&root)
            .arg(clone)
            .status()
            .context("cannot run git")?;
        if !status.success() {
            bail!(
                "git clone of {} into {} failed ({status})",
                root.display(),
                clone.display()
            );
        }
        git(clone, &["checkout", "--quiet", "--detach", &head])?;
    }
    // Both builds at once: most of a build is one single-threaded LTO link, so two run in
    // about the time of one. Each one's output goes to a log beside its clone.
    let mut running = Vec::new();
    for clone in &clones {
        let log_path = clone.with_extension("log");
        let log = std::fs::File::create(&log_path)
            .with_context(|| format!("cannot create {}", log_path.display()))?;
        eprintln!(
            "reproduce: building commit {head} in {} (output in {})",
            clone.display(),
            log_path.display()
        );
        let child = Command::new("cargo")
            .current_dir(clone)
            .args(["xtask", "dist", "--out"])
            .arg(clone.join("dist"))
            .env_remove("CARGO_TARGET_DIR")
            .env_remove("CARGO_BUILD_TARGET_DIR")
            .env_remove("RUSTFLAGS")
            .env_remove("CARGO_ENCODED_RUSTFLAGS")
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .context("cannot run cargo")?;
        running.push((clone, log_path, child));
    }
    let mut sums = Vec::new();
    let mut failed = Vec::new();
    for (clone, log_path, mut child) in running {
        let status = child.wait().context("cannot wait for cargo")?;
        if !status.success() {
            failed.push(format!(
                "{} ({status}; see {})",
                clone.display(),
                log_path.display()
            ));
            continue;
        }
        let path = clone.join("dist").join(dist::SUMS);
        sums.push(
            std::fs::read_to_string(&path)
                .with_context(|| format!("cannot read {}", path.display()))?,
        );
    }
    if !failed.is_empty() {
        bail!(
            "`cargo xtask dist` failed in {}; the clones are kept in {}",
            failed.join(", "),
            dir.display()
        );
    }
    eprintln!(
        "reproduce: both built in {:.0}s",
        started.elapsed().as_secs_f64()
    );

    let differing = differing_files(&clones[0].join("dist"), &clones[1].join("dist"), &sums)?;
    println!("{}", sums[0].trim_end());
    let seconds = started.elapsed().as_secs_f64();
    if !differing.is_empty() {
        bail!(
            "the two builds differ: {} (SHA256SUMS {}); both clones are kept in {} to compare",
            differing.join(", "),
            if sums[0] == sums[1] {
                "equal"
            } else {
                "differ"
            },
            dir.display()
        );
    }
    println!(
        "reproduce: identical: both clean builds of {head} gave the SHA256SUMS above ({} files, {seconds:.0}s)",
        sums[0].lines().count()
    );
    if args.keep {
        eprintln!("reproduce: kept {}", dir.display());
    } else {
        std::fs::remove_dir_all(&dir)
            .with_context(|| format!("cannot remove {}", dir.display()))?;
    }
    Ok(())
}

/// The files that differ between the two dist folders: those whose lines in the two sums
/// differ, those listed in one only, and any listed file whose bytes differ (the sums file
/// itself could lie).
fn differing_files(a: &Path, b: &Path, sums: &[String]) -> anyhow::Result<Vec<String>> {
    let names = |text: &str| -> Vec<String> {
        text.lines()
            .filter_map(|l| l.split_once("  ").map(|(_, name)| name.to_owned()))
            .collect()
    };
    let mut all = names(&sums[0]);
    all.extend(names(&sums[1]));
    all.sort();
    all.dedup();
    let mut differing = Vec::new();
    if sums[0] != sums[1] {
        differing.push(dist::SUMS.to_owned());
    }
    for name in all {
        let same = match (std::fs::read(a.join(&name)), std::fs::read(b.join(&name))) {
            (Ok(x), Ok(y)) => x == y,
            _ => false,
        };
        if !same {
            differing.push(name);
        }
    }
    Ok(differing)
}

/// Runs git in `dir`; returns its trimmed output.
fn git(dir: &Path, args: &[&str]) -> anyhow::Result<String> {
    let output = Command::new("git")
        .current_dir(dir)
        .args(args)
        .output()
        .context("cannot run git")?;
    if !output.status.success() {
        bail!(
            "git {} failed in {}: {}",
            args.join(" "),
            dir.display(),
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn differing_files_names_each_difference() {
        let base =
            std::env::temp_dir().join(format!("capshim-reproduce-test-{}", std::process::id()));
        let (a, b) = (base.join("a"), base.join("b"));
        for d in [&a, &b] {
            std::fs::create_dir_all(d).unwrap();
            std::fs::write(d.join("same"), b"x").unwrap();
        }
        std::fs::write(a.join("lib"), b"1").unwrap();
        std::fs::write(b.join("lib"), b"2").unwrap();
        let sums = "00  same\n11  lib\n".to_owned();
        // Equal sums files, but one listed file's bytes differ: it is named.
        assert_eq!(
            differing_files(&a, &b, &[sums.clone(), sums.clone()]).unwrap(),
            ["lib"]
        );
        std::fs::write(b.join("lib"), b"1").unwrap();
        assert!(
            differing_files(&a, &b, &[sums.clone(), sums.clone()])
                .unwrap()
                .is_empty()
        );
        let other = "00  same\n22  lib\n".to_owned();
        assert_eq!(
            differing_files(&a, &b, &[sums, other]).unwrap(),
            ["SHA256SUMS"]
        );
        std::fs::remove_dir_all(&base).unwrap();
    }
}
