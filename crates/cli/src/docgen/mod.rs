//! Shell completions and man pages, generated from the clap definitions by clap's own
//! generators (`clap_complete`, `clap_mangen`), so they never drift from `--help`.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::Command;

/// Why man pages could not be written.
#[derive(Debug, thiserror::Error)]
pub enum ManError {
    /// A page exists and `--force` was not given.
    #[error(
        "{0} exists; remove it, pick another --out-dir, or pass --force to replace generated pages"
    )]
    Exists(PathBuf),
    /// Writing failed.
    #[error("cannot write {path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
}

/// Every man page of `cmd` and its visible subcommands (recursively), as
/// (`capshim.1`, `capshim-run.1`, …) file names and their roff text.
pub fn man_pages(cmd: Command) -> Vec<(String, Vec<u8>)> {
    let mut cmd = cmd.disable_help_subcommand(true);
    cmd.build();
    let mut pages = Vec::new();
    collect(&cmd, &mut pages);
    pages
}

fn collect(cmd: &Command, pages: &mut Vec<(String, Vec<u8>)>) {
    let man = clap_mangen::Man::new(cmd.clone());
    let mut text = Vec::new();
    // Rendering into memory cannot fail.
    let _ = man.render(&mut text);
    pages.push((man.get_filename(), text));
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        collect(sub, pages);
    }
}

/// Writes `pages` into `dir` (created if missing). An existing page is refused unless `force`;
/// "existing" includes a symbolic link, even one pointing nowhere. Each page is written to a
/// new file in `dir` and then renamed over its name, so `force` replaces a link with the page
/// and never writes through it into the file it points to (as `agent --install --force`
/// replaces its file).
///
/// # Errors
/// [`ManError::Exists`] before anything is written (or, for a page that appears meanwhile,
/// when its turn comes), or [`ManError::Io`].
pub fn write_pages(
    pages: &[(String, Vec<u8>)],
    dir: &Path,
    force: bool,
) -> Result<Vec<PathBuf>, ManError> {
    let paths: Vec<PathBuf> = pages.iter().map(|(name, _)| dir.join(name)).collect();
    if !force && let Some(existing) = paths.iter().find(|p| p.symlink_metadata().is_ok()) {
        return Err(ManError::Exists(existing.clone()));
    }
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| ManError::Io { path, source }
    };
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    for (path, (_, text)) in paths.iter().zip(pages) {
        let mut temp = tempfile::Builder::new()
            .prefix(".capshim-man-")
            .tempfile_in(dir)
            .map_err(io(dir))?;
        temp.write_all(text)
            .and_then(|()| temp.flush())
            .map_err(io(temp.path()))?;
        if force {
            temp.persist(path).map_err(|e| io(path)(e.error))?;
        } else {
            temp.persist_noclobber(path).map_err(|e| {
                if e.error.kind() == std::io::ErrorKind::AlreadyExists {
                    ManError::Exists(path.clone())
                } else {
                    io(path)(e.error)
                }
            })?;
        }
    }
    Ok(paths)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cli() -> Command {
        Command::new("tool")
            .about("A tool")
            .subcommand(Command::new("run").about("Runs"))
            .subcommand(Command::new("hidden").hide(true))
    }

    #[test]
    fn one_page_per_visible_command() {
        let pages = man_pages(cli());
        let names: Vec<&str> = pages.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["tool.1", "tool-run.1"]);
        assert!(String::from_utf8_lossy(&pages[1].1).contains("Runs"));
    }

    #[test]
    fn existing_pages_are_kept_unless_forced() {
        let dir = tempfile::tempdir().unwrap();
        let pages = man_pages(cli());
        std::fs::write(dir.path().join("tool-run.1"), "mine").unwrap();
        let err = write_pages(&pages, dir.path(), false).unwrap_err();
        assert!(
            matches!(err, ManError::Exists(ref p) if p.ends_with("tool-run.1")),
            "{err}"
        );
        assert_eq!(
            std::fs::read_to_string(dir.path().join("tool-run.1")).unwrap(),
            "mine"
        );
        assert!(
            !dir.path().join("tool.1").exists(),
            "nothing written before the refusal"
        );
        write_pages(&pages, dir.path(), true).unwrap();
        assert_ne!(
            std::fs::read_to_string(dir.path().join("tool-run.1")).unwrap(),
            "mine"
        );
    }

    #[test]
    fn a_symlinked_page_is_replaced_never_written_through() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("man");
        std::fs::create_dir(&out).unwrap();
        let pages = man_pages(cli());
        // A link to someone's file: --force replaces the link, the file is untouched.
        let theirs = dir.path().join("theirs.txt");
        std::fs::write(&theirs, "keep me").unwrap();
        std::os::unix::fs::symlink(&theirs, out.join("tool.1")).unwrap();
        write_pages(&pages, &out, true).unwrap();
        assert_eq!(std::fs::read_to_string(&theirs).unwrap(), "keep me");
        let page = out.join("tool.1");
        assert!(page.symlink_metadata().unwrap().file_type().is_file());
        assert_eq!(std::fs::read(&page).unwrap(), pages[0].1);
        // A link pointing nowhere exists too: refused without --force, nothing created.
        let nowhere = dir.path().join("nowhere.txt");
        let fresh = dir.path().join("fresh");
        std::fs::create_dir(&fresh).unwrap();
        std::os::unix::fs::symlink(&nowhere, fresh.join("tool-run.1")).unwrap();
        let err = write_pages(&pages, &fresh, false).unwrap_err();
        assert!(
            matches!(err, ManError::Exists(ref p) if p.ends_with("tool-run.1")),
            "{err}"
        );
        assert!(!nowhere.exists());
        // No temporary file is left behind.
        let names: Vec<String> = std::fs::read_dir(&out)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(names.iter().all(|n| !n.starts_with('.')), "{names:?}");
    }
}
