//! The xtask binary as rustc's linker for the macOS artifacts: applies rustc's export list,
//! then links with zig for the right minimum macOS.
//!
//! - rustc tells the macOS linker which symbols a cdylib exports with
//!   `-exported_symbols_list <file>` (for libcapshim: none). zig's Mach-O linker ignores it,
//!   so every external symbol of the Rust objects would be exported. zig does honour
//!   private-external symbols (`N_PEXT`, what hidden visibility compiles to), so this wrapper
//!   does what ld64 does with the list, before the link: every symbol defined in the objects
//!   rustc passes and not on the list becomes private external.
//! - cargo-zigbuild's own linker script passes `-target aarch64-macos-none`, for which zig
//!   records its default minimum macOS (15.0) and ignores `-mmacosx-version-min`. The
//!   wrapper runs the same `cargo-zigbuild zig cc` with `-target
//!   aarch64-macos.<minimum>-none` instead ([`crate::checks::MINIMUM_MACOS`]).
//!
//! - What zig cannot be told, the signature's identifier (zig, like ld64, names it after the
//!   output file, cargo's `capshim-<hash>`) and the SDK version (zig records its own, 27.0),
//!   is not fixed here: rustc re-signs the linked file after this wrapper returns (its
//!   debug-info strip), so dist sets both on the copy it writes (`crate::dist`'s `finish`).
//!
//! `cargo xtask dist` points rustc at this executable with `-C linker=` and sets
//! [`ENV_TARGET`] to the Rust target triple.

use std::collections::HashSet;
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use anyhow::{Context, bail};
use capshim_macho::hide_unlisted;

/// Set (to the target triple) when the xtask executable is started as a linker.
pub const ENV_TARGET: &str = "CAPSHIM_XTASK_LINK_TARGET";

/// Prefix of the link argument that carries the zig target (`-C link-arg=<prefix><target>`),
/// removed before zig sees the arguments. Passing it on rustc's command line puts it in
/// cargo's fingerprint: a new minimum macOS or a new wrapper version (the `v5`) relinks.
pub const ARG_PREFIX: &str = "--xtask-link-v5=";

/// The `-C link-arg=` value that selects `zig_target` (see [`ARG_PREFIX`]).
pub fn link_arg(rust_target: &str) -> anyhow::Result<String> {
    Ok(format!("{ARG_PREFIX}{}", zig_target(rust_target)?))
}

/// Entry point in linker mode: `args` are the linker arguments (without the program name).
pub fn main(target: &str, args: Vec<OsString>) -> ExitCode {
    match run(target, args) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("xtask (linker wrapper for {target}): error: {error:#}");
            ExitCode::from(1)
        }
    }
}

fn run(target: &str, mut args: Vec<OsString>) -> anyhow::Result<ExitCode> {
    let mut zig_target = None;
    args.retain(
        |arg| match arg.to_str().and_then(|a| a.strip_prefix(ARG_PREFIX)) {
            Some(value) => {
                zig_target = Some(value.to_owned());
                false
            }
            None => true,
        },
    );
    let zig_target = zig_target.with_context(|| {
        format!(
            "no {ARG_PREFIX}<zig target> argument for {target}: the wrapper is started by \
             `cargo xtask dist`, which passes it"
        )
    })?;
    let mut written = Vec::new();
    if let Some(list) = exported_symbols_list(&args) {
        let text = std::fs::read_to_string(&list)
            .with_context(|| format!("cannot read rustc's export list {}", list.display()))?;
        let keep: HashSet<&str> = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect();
        for arg in &mut args {
            let path = Path::new(arg.as_os_str());
            if path.extension() != Some(OsStr::new("o")) || !path.is_file() {
                continue;
            }
            let mut data = std::fs::read(path)
                .with_context(|| format!("cannot read object file {}", path.display()))?;
            let hidden = hide_unlisted(&mut data, &keep)
                .with_context(|| format!("cannot apply the export list to {}", path.display()))?;
            if hidden > 0 {
                // Leave rustc's file as it was; link a patched copy next to it.
                let mut patched = path.as_os_str().to_owned();
                patched.push(".exports-applied.o");
                let patched = PathBuf::from(patched);
                std::fs::write(&patched, &data)
                    .with_context(|| format!("cannot write {}", patched.display()))?;
                *arg = patched.clone().into_os_string();
                written.push(patched);
            }
        }
    }

    // The arguments cargo-zigbuild's wrapper script gives `zig cc`, with a versioned target.
    let status = Command::new("cargo-zigbuild")
        .args([
            "zig",
            "cc",
            "--",
            "-g",
            "-fno-sanitize=all",
            "-target",
            &zig_target,
        ])
        .args(&args)
        .status()
        .context("cannot start `cargo-zigbuild zig cc` (is cargo-zigbuild on PATH?)");
    // rustc deletes its own objects after the link; do the same with the patched copies.
    for path in written {
        let _ = std::fs::remove_file(path);
    }
    let status = status?;
    Ok(match status.code() {
        Some(code) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
        None => ExitCode::from(1),
    })
}

/// zig's name for a Rust Apple target, with the minimum macOS: `aarch64-macos.11.0-none`.
fn zig_target(rust_target: &str) -> anyhow::Result<String> {
    let Some(arch) = rust_target.strip_suffix("-apple-darwin") else {
        bail!("the linker wrapper only links macOS targets, not {rust_target}");
    };
    let (major, minor) = crate::checks::MINIMUM_MACOS;
    Ok(format!("{arch}-macos.{major}.{minor}-none"))
}

/// The file after `-Wl,-exported_symbols_list` (as `-Wl,<file>`, or joined with a comma).
fn exported_symbols_list(args: &[OsString]) -> Option<PathBuf> {
    let mut iter = args.iter().map(|a| a.to_string_lossy());
    while let Some(arg) = iter.next() {
        if arg == "-Wl,-exported_symbols_list" {
            let next = iter.next()?;
            return Some(PathBuf::from(next.strip_prefix("-Wl,").unwrap_or(&next)));
        }
        if let Some(file) = arg.strip_prefix("-Wl,-exported_symbols_list,") {
            return Some(PathBuf::from(file));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zig_targets() {
        assert_eq!(
            zig_target("aarch64-apple-darwin").unwrap(),
            "aarch64-macos.11.0-none"
        );
        assert!(zig_target("x86_64-unknown-linux-gnu").is_err());
    }

    #[test]
    fn finds_the_list_in_both_spellings() {
        let split: Vec<OsString> = ["a.o", "-Wl,-exported_symbols_list", "-Wl,/tmp/list", "-lc"]
            .map(OsString::from)
            .to_vec();
        assert_eq!(
            exported_symbols_list(&split),
            Some(PathBuf::from("/tmp/list"))
        );
        let joined: Vec<OsString> = ["-Wl,-exported_symbols_list,/x/list"]
            .map(OsString::from)
            .to_vec();
        assert_eq!(
            exported_symbols_list(&joined),
            Some(PathBuf::from("/x/list"))
        );
        assert_eq!(exported_symbols_list(&[OsString::from("-lc")]), None);
    }
}
