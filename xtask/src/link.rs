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
//! - zig names the code signature's identifier after rustc's file (`capshim-<hash>`) or the
//!   install name (`libcapshim.dylib`), and records its bundled SDK's version (27.0) in
//!   `LC_BUILD_VERSION`. After the link the wrapper writes [`identifier`] (`capshim`,
//!   `libcapshim`, as `codesign -s -` names them) into the ad-hoc signature and the SDK
//!   whose stubs the artifacts were checked against ([`crate::checks::SDK_VERSION`]), and
//!   re-hashes the pages (`capshim_macho::patch`).
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
/// cargo's fingerprint: a new minimum macOS or a new wrapper version (the `v4`) relinks.
pub const ARG_PREFIX: &str = "--xtask-link-v4=";

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

    let output =
        output_path(&args).context("no `-o OUTPUT` among the linker arguments rustc passed")?;

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
    match status.code() {
        Some(0) => finish(&output).map(|()| ExitCode::SUCCESS),
        Some(code) => Ok(ExitCode::from(u8::try_from(code).unwrap_or(1))),
        None => Ok(ExitCode::from(1)),
    }
}

/// Writes the SDK version and the signature's identifier into the linked file and
/// re-hashes its pages.
fn finish(output: &Path) -> anyhow::Result<()> {
    let mut data =
        std::fs::read(output).with_context(|| format!("cannot read {}", output.display()))?;
    let (major, minor) = crate::checks::SDK_VERSION;
    let patched = capshim_macho::patch::set_sdk_version(&mut data, major << 16 | minor << 8)
        .and_then(|()| capshim_macho::patch::set_identifier(&mut data, &identifier(output)));
    patched.map_err(|why| anyhow::anyhow!("cannot finish {}: {why}", output.display()))?;
    std::fs::write(output, &data).with_context(|| format!("cannot write {}", output.display()))
}

/// The code-signing identifier for an output file: its name without `.dylib` and without
/// the `-<16 hex digits>` rustc appends in `deps/` (`capshim-0123456789abcdef` gives
/// `capshim`, `libcapshim.dylib` gives `libcapshim`).
pub fn identifier(output: &Path) -> String {
    let name = output
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let name = name.strip_suffix(".dylib").unwrap_or(&name);
    match name.rsplit_once('-') {
        Some((stem, hash))
            if hash.len() == 16
                && hash.bytes().all(|b| b.is_ascii_hexdigit())
                && !stem.is_empty() =>
        {
            stem.to_string()
        }
        _ => name.to_string(),
    }
}

fn output_index(args: &[OsString]) -> Option<usize> {
    args.iter()
        .position(|a| a == "-o")
        .map(|i| i + 1)
        .filter(|&i| i < args.len())
}

/// The path after `-o`.
fn output_path(args: &[OsString]) -> Option<PathBuf> {
    output_index(args).map(|i| PathBuf::from(&args[i]))
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
    fn identifiers_are_the_artifacts_names() {
        assert_eq!(
            identifier(Path::new("/t/deps/capshim-0123456789abcdef")),
            "capshim"
        );
        assert_eq!(
            identifier(Path::new("/t/deps/libcapshim.dylib")),
            "libcapshim"
        );
        assert_eq!(identifier(Path::new("/t/deps/capshim-cli")), "capshim-cli");
        assert_eq!(
            identifier(Path::new("/t/deps/x-0123456789abcdeg")),
            "x-0123456789abcdeg"
        );
        let args: Vec<OsString> = ["a.o", "-o", "/t/deps/capshim-0123456789abcdef", "-lc"]
            .map(OsString::from)
            .to_vec();
        assert_eq!(
            output_path(&args),
            Some(PathBuf::from("/t/deps/capshim-0123456789abcdef"))
        );
        assert_eq!(output_path(&[OsString::from("-o")]), None);
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
