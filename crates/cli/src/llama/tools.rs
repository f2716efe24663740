//! Finding llama.cpp's executables (llama-bench, llama-perplexity, llama-completion,
//! test-backend-ops), the same way for `bench` and `verify`: in `--llama-dir DIR` when given
//! (and only there), else on `PATH`, else in the cache `scripts/llama/build.sh` builds into.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// The llama.cpp version the setup script builds, which names its cache folder.
pub const SETUP_CACHE_NAME: &str = "llama.cpp-py0.3.36";

/// A tool that cannot be found.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    /// Not in the folder given with `--llama-dir`.
    #[error(
        "{tool} is not in --llama-dir {dir} (no executable file {dir}/{tool}); give the folder that \
         holds llama.cpp's built tools (a llama.cpp build's build/bin), or build {tool} there: {how}"
    )]
    NotInDir {
        /// The tool's file name.
        tool: String,
        /// The folder.
        dir: PathBuf,
        /// How to get the tool.
        how: &'static str,
    },
    /// Neither on `PATH` nor in the setup cache.
    #[error(
        "{tool} was not found on PATH{}; give the folder of llama.cpp's tools with --llama-dir DIR: {how}",
        match cache { Some(c) => format!(" nor in {}", c.display()), None => String::new() }
    )]
    NotFound {
        /// The tool's file name.
        tool: String,
        /// The setup cache's bin folder that was searched, when known.
        cache: Option<PathBuf>,
        /// How to get the tool.
        how: &'static str,
    },
}

/// How to get llama.cpp's tools on this platform.
pub fn how_to_get(tool: &str) -> &'static str {
    let from_source = "build llama.cpp (`cmake -B build -DLLAMA_BUILD_TESTS=ON && cmake --build \
                       build --config Release`) and pass --llama-dir build/bin";
    if cfg!(target_os = "macos") {
        if tool == "test-backend-ops" {
            // Packaged llama.cpp builds ship the tools, not the tests.
            return "test-backend-ops is a llama.cpp test, not installed by packages: build \
                    llama.cpp (`cmake -B build -DLLAMA_BUILD_TESTS=ON && cmake --build build \
                    --config Release`) and pass --llama-dir build/bin";
        }
        return from_source;
    }
    "on Linux, scripts/llama/build.sh builds the CPU tools into its cache, where capshim finds \
     them; or build llama.cpp (`cmake -B build -DLLAMA_BUILD_TESTS=ON && cmake --build build`) \
     and pass --llama-dir build/bin"
}

/// The setup cache's `bin` folder: `$CAPSHIM_LLAMA_CACHE/bin`, else
/// `${XDG_CACHE_HOME:-$HOME/.cache}/capshim/llama.cpp-py0.3.36/bin`, as scripts/llama/build.sh
/// chooses it.
pub fn setup_cache_bin(var: impl Fn(&str) -> Option<OsString>) -> Option<PathBuf> {
    let cache = match var("CAPSHIM_LLAMA_CACHE").filter(|v| !v.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => var("XDG_CACHE_HOME")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .or_else(|| var("HOME").map(|h| PathBuf::from(h).join(".cache")))?
            .join("capshim")
            .join(SETUP_CACHE_NAME),
    };
    Some(cache.join("bin"))
}

fn is_executable_file(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Finds `tool`: `llama_dir/tool` when `llama_dir` is given (nowhere else), else the first
/// executable `tool` on `PATH`, else in the setup cache. The path is made absolute.
///
/// # Errors
/// [`ToolError`] naming the tool, where it looked and how to get it.
pub fn find(tool: &str, llama_dir: Option<&Path>) -> Result<PathBuf, ToolError> {
    find_with(tool, llama_dir, |name| std::env::var_os(name))
}

/// As [`find`], with the environment given (for tests).
pub fn find_with(
    tool: &str,
    llama_dir: Option<&Path>,
    var: impl Fn(&str) -> Option<OsString>,
) -> Result<PathBuf, ToolError> {
    let absolute = |p: PathBuf| std::fs::canonicalize(&p).unwrap_or(p);
    if let Some(dir) = llama_dir {
        let path = dir.join(tool);
        if is_executable_file(&path) {
            return Ok(absolute(path));
        }
        return Err(ToolError::NotInDir {
            tool: tool.to_string(),
            dir: dir.to_path_buf(),
            how: how_to_get(tool),
        });
    }
    if let Some(path) = var("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .filter(|dir| !dir.as_os_str().is_empty())
            .map(|dir| dir.join(tool))
            .find(|p| is_executable_file(p))
    }) {
        return Ok(absolute(path));
    }
    let cache = setup_cache_bin(&var);
    if let Some(path) = cache.as_ref().map(|c| c.join(tool))
        && is_executable_file(&path)
    {
        return Ok(absolute(path));
    }
    Err(ToolError::NotFound {
        tool: tool.to_string(),
        cache,
        how: how_to_get(tool),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn tool(dir: &Path, name: &str, mode: u32) {
        let path = dir.join(name);
        std::fs::write(&path, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn llama_dir_then_path_then_the_setup_cache() {
        let tmp = tempfile::tempdir().unwrap();
        let (dir, on_path, home) = (
            tmp.path().join("dir"),
            tmp.path().join("path"),
            tmp.path().join("home"),
        );
        let cache = home
            .join(".cache/capshim")
            .join(SETUP_CACHE_NAME)
            .join("bin");
        for d in [&dir, &on_path, &cache] {
            std::fs::create_dir_all(d).unwrap();
        }
        tool(&dir, "llama-bench", 0o755);
        tool(&on_path, "llama-perplexity", 0o755);
        tool(&on_path, "llama-completion", 0o644); // not executable: skipped
        tool(&cache, "llama-completion", 0o755);
        let env = |name: &str| match name {
            "PATH" => Some(on_path.clone().into_os_string()),
            "HOME" => Some(home.clone().into_os_string()),
            _ => None,
        };
        let found = |t: &str, d: Option<&Path>| find_with(t, d, env);
        assert_eq!(
            found("llama-bench", Some(&dir)).unwrap(),
            dir.canonicalize().unwrap().join("llama-bench")
        );
        assert_eq!(
            found("llama-perplexity", None).unwrap(),
            on_path.canonicalize().unwrap().join("llama-perplexity")
        );
        assert_eq!(
            found("llama-completion", None).unwrap(),
            cache.canonicalize().unwrap().join("llama-completion")
        );
        // --llama-dir is the only place looked in when given.
        let e = found("llama-perplexity", Some(&dir))
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("llama-perplexity is not in --llama-dir"),
            "{e}"
        );
        let e = found("test-backend-ops", None).unwrap_err().to_string();
        assert!(
            e.contains("test-backend-ops was not found on PATH nor in"),
            "{e}"
        );
        assert!(e.contains(&cache.display().to_string()), "{e}");
        assert!(e.contains("--llama-dir DIR"), "{e}");
    }

    #[test]
    fn the_cache_follows_the_setup_script() {
        let cache = |vars: &[(&str, &str)]| {
            let vars: Vec<(String, String)> = vars
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            setup_cache_bin(move |name| {
                vars.iter()
                    .find(|(k, _)| k == name)
                    .map(|(_, v)| OsString::from(v))
            })
        };
        assert_eq!(
            cache(&[("HOME", "/h")]),
            Some(PathBuf::from("/h/.cache/capshim/llama.cpp-py0.3.36/bin"))
        );
        assert_eq!(
            cache(&[("HOME", "/h"), ("XDG_CACHE_HOME", "/x")]),
            Some(PathBuf::from("/x/capshim/llama.cpp-py0.3.36/bin"))
        );
        assert_eq!(
            cache(&[("HOME", "/h"), ("CAPSHIM_LLAMA_CACHE", "/c")]),
            Some(PathBuf::from("/c/bin"))
        );
        assert_eq!(cache(&[]), None);
    }
}
