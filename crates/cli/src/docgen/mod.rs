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

/// Writes `pages` into `dir` (created if missing). An existing page is refused unless `force`.
///
/// # Errors
/// [`ManError::Exists`] before anything is written, or [`ManError::Io`].
pub fn write_pages(
    pages: &[(String, Vec<u8>)],
    dir: &Path,
    force: bool,
) -> Result<Vec<PathBuf>, ManError> {
    let paths: Vec<PathBuf> = pages.iter().map(|(name, _)| dir.join(name)).collect();
    if !force && let Some(existing) = paths.iter().find(|p| p.exists()) {
        return Err(ManError::Exists(existing.clone()));
    }
    std::fs::create_dir_all(dir).map_err(|source| ManError::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    for (path, (_, text)) in paths.iter().zip(pages) {
        let mut file = std::fs::File::create(path)
            .and_then(|mut f| f.write_all(text).map(|()| f))
            .map_err(|source| ManError::Io {
                path: path.clone(),
                source,
            })?;
        file.flush().map_err(|source| ManError::Io {
            path: path.clone(),
            source,
        })?;
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
}
