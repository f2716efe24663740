//! `cargo xtask dist`: cross-build the macOS artifacts into `dist/` and verify them.
//!
//! 1. Preflight: cargo-zigbuild, zig and the Rust standard library for the target must be
//!    installed; each missing piece is named with the command that installs it.
//! 2. Each artifact is built with `cargo-zigbuild rustc --release --target
//!    aarch64-apple-darwin`, so that link arguments reach only its final link:
//!    - `-L native=<crate>/stubs` and `-L framework=<crate>/stubs/Frameworks` when those
//!      folders exist and the host is not a Mac: `.tbd` text stubs for the system libraries
//!      and frameworks zig has no stub for (libobjc, Metal, Foundation, CoreGraphics).
//!      See `crates/cli/stubs/README`.
//!    - `-C linker=<this executable>`: in linker mode (`crate::link`) it applies rustc's
//!      export list, which zig's linker ignores, and has zig record the minimum macOS
//!      ([`checks::MINIMUM_MACOS`], also set as `MACOSX_DEPLOYMENT_TARGET`).
//!    - libcapshim.dylib is built as a cdylib on its own (`--crate-type cdylib`), so that
//!      release LTO applies; so is libcapshim_guard.dylib (package `capshim-guard`: the
//!      same sources with the exec guard, crates/guard). Their build script sets the
//!      install name and `-dead_strip_dylibs`; the CLI's sets `-dead_strip_dylibs` and
//!      links CoreGraphics and Foundation as needed frameworks (no libiconv or libcharset).
//!    - `SDKROOT` points at the stub SDK in `xtask/sdk/` (`crate::sdk`), not Xcode's.
//!    - Reproducible: `CARGO_ENCODED_RUSTFLAGS` remaps the build machine's folders (the
//!      workspace, the target directory and cargo's home, where the crates' sources are) to
//!      fixed names ([`remap_flags`]), so that no path of this machine reaches the files
//!      (panic locations name source files). Two clean builds in different folders give the
//!      same bytes: `cargo xtask reproduce` checks it.
//! 3. Each built file is copied into `dist/<target>/` through [`finish`]: its signature gets
//!    the identifier it ships under and `LC_BUILD_VERSION` the SDK version its imports are
//!    checked against, page hashes recomputed. (Not at link time: rustc re-signs the file
//!    after the link; see [`finish`].)
//! 4. If the `capshim` CLI fails to build, the libraries are still copied, summed and
//!    verified, and then `dist` fails naming the CLI (`--no-cli` builds the libraries alone).
//! 5. `dist/SHA256SUMS` ([`sums`]), then the checks of `crate::checks` on every artifact, its
//!    imports and the crates' link stubs against the SDK excerpts (`crate::sdk`), and the
//!    sums. `--verify-only` runs just these.

mod finish;
mod sums;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, bail};

use capshim_macho::Facts;

use crate::{checks, link, sdk};
pub(crate) use sums::SUMS;
use sums::{check_sums, write_sums};

/// The macOS target the artifacts are built for.
pub const TARGET: &str = "aarch64-apple-darwin";
const DYLIB: &str = "libcapshim.dylib";
const GUARD: &str = "libcapshim_guard.dylib";
const CLI: &str = "capshim";

/// Options of `cargo xtask dist`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Do not build: verify the artifacts already in the output directory and their sums.
    #[arg(long)]
    verify_only: bool,
    /// Build and verify libcapshim.dylib and libcapshim_guard.dylib only, not the capshim CLI.
    #[arg(long)]
    no_cli: bool,
    /// Output directory [default: dist/ in the workspace].
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
}

/// Cross-builds and verifies the macOS artifacts.
pub fn run(args: Args) -> anyhow::Result<()> {
    let started = Instant::now();
    let root = workspace_root()?;
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| shown(&root.join("dist")));
    let mut cli_failure = None;

    if !args.verify_only {
        let tools = preflight()?;
        eprintln!("dist: building for {TARGET} with {tools}");
        let target_dir = target_dir(&root);
        let built = target_dir.join(TARGET).join("release");
        let arch_dir = out.join(TARGET);
        std::fs::create_dir_all(&arch_dir)
            .with_context(|| format!("cannot create {}", arch_dir.display()))?;

        build(&root, &SHIM)?;
        install(
            &built.join(DYLIB),
            &arch_dir.join(DYLIB),
            checks::SHIM_IDENTIFIER,
        )?;
        build(&root, &GUARD_LIBRARY)?;
        install(
            &built.join(GUARD),
            &arch_dir.join(GUARD),
            checks::GUARD_IDENTIFIER,
        )?;

        let cli_dest = arch_dir.join(CLI);
        if args.no_cli {
            remove_stale(&cli_dest, "--no-cli")?;
        } else {
            match build(&root, &CAPSHIM_CLI) {
                Ok(()) => install(&built.join(CLI), &cli_dest, checks::CLI_IDENTIFIER)?,
                Err(error) => {
                    remove_stale(&cli_dest, "its build failed")?;
                    cli_failure = Some(error);
                }
            }
        }
        write_sums(&out)?;
    }

    let failures = verify(&out)?;
    let outcome = match (failures, &cli_failure) {
        (0, None) => "done",
        (0, Some(_)) => "libraries done, CLI FAILED",
        _ => "FAILED",
    };
    eprintln!("dist: {outcome} in {:.1}s", started.elapsed().as_secs_f64());
    if failures > 0 {
        bail!(
            "{failures} check(s) failed for the artifacts in {} (details above)",
            out.display()
        );
    }
    if let Some(error) = cli_failure {
        return Err(error.context(format!(
            "the capshim CLI did not cross-build for {TARGET} (cargo's output is above); \
             {DYLIB} and {GUARD} were built, summed and verified in {}. Fix the CLI build, \
             or pass --no-cli to build the libraries alone",
            out.display()
        )));
    }
    Ok(())
}

pub(crate) fn workspace_root() -> anyhow::Result<PathBuf> {
    let xtask = Path::new(env!("CARGO_MANIFEST_DIR"));
    let root = xtask.parent().context("xtask has no parent directory")?;
    Ok(root.to_path_buf())
}

/// `path` relative to the current directory when it lies under it (`dist`, not
/// `/home/me/capshim/dist`), so that what dist prints names no build machine's folders.
fn shown(path: &Path) -> PathBuf {
    std::env::current_dir()
        .ok()
        .and_then(|cwd| path.strip_prefix(cwd).ok().map(Path::to_path_buf))
        .filter(|relative| !relative.as_os_str().is_empty())
        .unwrap_or_else(|| path.to_path_buf())
}

fn target_dir(root: &Path) -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .or_else(|| std::env::var_os("CARGO_BUILD_TARGET_DIR"))
        .map(|dir| root.join(dir))
        .unwrap_or_else(|| root.join("target"))
}

/// Checks that every tool is there; returns their versions for the log.
fn preflight() -> anyhow::Result<String> {
    let zigbuild = version_of(Command::new("cargo-zigbuild").arg("--version")).context(
        "cargo-zigbuild is not installed (or not on PATH). Install it with \
         `pip install cargo-zigbuild` (this also installs zig, as the `ziglang` package)",
    )?;

    // cargo-zigbuild uses $CARGO_ZIGBUILD_ZIG_PATH, else `zig` on PATH, else
    // `python3 -m ziglang`; look in the same places.
    let zig = match std::env::var_os("CARGO_ZIGBUILD_ZIG_PATH") {
        Some(path) => version_of(Command::new(path).arg("version")),
        None => version_of(Command::new("zig").arg("version"))
            .or_else(|_| version_of(Command::new("python3").args(["-m", "ziglang", "version"]))),
    }
    .context(
        "zig is not installed: neither `zig` nor `python3 -m ziglang` runs. Install it with \
         `pip install ziglang` (`pip install cargo-zigbuild` brings it too)",
    )?;

    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let sysroot = version_of(Command::new(&rustc).args(["--print", "sysroot"]))
        .context("cannot run rustc to find its sysroot")?;
    let std_dir = Path::new(&sysroot)
        .join("lib/rustlib")
        .join(TARGET)
        .join("lib");
    if !std_dir.is_dir() {
        bail!(
            "the Rust standard library for {TARGET} is not installed ({} is missing). \
             Install it with `rustup target add {TARGET}`",
            std_dir.display()
        );
    }
    Ok(format!("{zigbuild}, zig {zig}"))
}

/// Runs a command that prints a version (or path) and returns its first line.
fn version_of(command: &mut Command) -> anyhow::Result<String> {
    let output = command
        .output()
        .with_context(|| format!("cannot run {:?}", command.get_program()))?;
    if !output.status.success() {
        bail!("{:?} exited with {}", command.get_program(), output.status);
    }
    let text = String::from_utf8_lossy(&output.stdout);
    Ok(text.lines().next().unwrap_or_default().trim().to_owned())
}

/// One artifact to cross-build.
struct Artifact {
    /// What the log calls it.
    what: &'static str,
    /// Cargo package.
    package: &'static str,
    /// The package's directory, relative to the workspace (its `stubs/` lives there).
    dir: &'static str,
    /// Which target of the package, for `cargo rustc`.
    select: &'static [&'static str],
}

const SHIM: Artifact = Artifact {
    what: DYLIB,
    package: "capshim",
    dir: "crates/shim",
    // A cdylib on its own: with the rlib too, cargo would not apply the release LTO, and
    // every std symbol would stay external.
    select: &["--lib", "--crate-type", "cdylib"],
};

const GUARD_LIBRARY: Artifact = Artifact {
    what: GUARD,
    package: "capshim-guard",
    // The shim's sources, so the shim's link stubs.
    dir: "crates/shim",
    select: &["--lib", "--crate-type", "cdylib"],
};

const CAPSHIM_CLI: Artifact = Artifact {
    what: "the capshim CLI",
    package: "capshim-cli",
    dir: "crates/cli",
    select: &["--bin", CLI],
};

/// The linker arguments that make a crate's `.tbd` stubs visible: `-L native=<dir>/stubs`
/// for libraries (`lib<name>.tbd`) and `-L framework=<dir>/stubs/Frameworks` for frameworks
/// (`<Name>.framework/<Name>.tbd`). Only when cross-building from a system without the
/// macOS SDK; on a Mac the SDK's own stubs are used.
fn stub_search_args(root: &Path, dir: &str) -> Vec<String> {
    if std::env::consts::OS == "macos" {
        return Vec::new();
    }
    let stubs = root.join(dir).join("stubs");
    let frameworks = stubs.join("Frameworks");
    let mut args = Vec::new();
    if stubs.is_dir() {
        args.extend(["-L".to_owned(), format!("native={}", stubs.display())]);
    }
    if frameworks.is_dir() {
        args.extend([
            "-L".to_owned(),
            format!("framework={}", frameworks.display()),
        ]);
    }
    args
}

/// `cargo-zigbuild rustc --release --target <TARGET> -p <package> <select> -- <link args>`.
fn build(root: &Path, artifact: &Artifact) -> anyhow::Result<()> {
    eprintln!("dist: building {}", artifact.what);
    let mut command = Command::new("cargo-zigbuild");
    command
        .current_dir(root)
        .args([
            "rustc",
            "--release",
            "--target",
            TARGET,
            "-p",
            artifact.package,
        ])
        .args(artifact.select)
        .arg("--")
        .args(stub_search_args(root, artifact.dir));
    let this = std::env::current_exe().context("cannot find the xtask executable")?;
    let mut linker = std::ffi::OsString::from("linker=");
    linker.push(&this);
    if std::env::consts::OS != "macos" {
        // rustc asks `xcrun` for the SDK unless SDKROOT names one: name the stub SDK.
        command.env("SDKROOT", sdk::sdk_dir(root));
    }
    command
        .arg("-C")
        .arg(linker)
        .arg("-C")
        .arg(format!("link-arg={}", link::link_arg(TARGET)?))
        .env(link::ENV_TARGET, TARGET);
    // Replaces any RUSTFLAGS of the caller: a dist build is the same on every machine.
    command
        .env_remove("RUSTFLAGS")
        .env("CARGO_ENCODED_RUSTFLAGS", remap_flags(root)?.join("\x1f"));
    let status = command.status().context("cannot run cargo-zigbuild")?;
    if !status.success() {
        bail!(
            "cargo-zigbuild could not build {} for {TARGET} ({status}; its output is above)",
            artifact.what
        );
    }
    Ok(())
}

/// What the folders of this build are called inside the artifacts.
const REMAPPED_WORKSPACE: &str = "/capshim";
const REMAPPED_TARGET: &str = "/capshim-target";
const REMAPPED_CARGO_HOME: &str = "/cargo";

/// `--remap-path-prefix` flags for the workspace, the target directory (when it lies
/// elsewhere) and cargo's home (`$CARGO_HOME`, else `~/.cargo`): rustc writes the remapped
/// names wherever it would write a source path. The last matching flag wins, so the
/// workspace comes after cargo's home (a cargo home inside the workspace stays `/cargo`).
///
/// # Errors
/// When the home folder cannot be found (no `CARGO_HOME` and no `HOME`).
fn remap_flags(root: &Path) -> anyhow::Result<Vec<String>> {
    let cargo_home = match std::env::var_os("CARGO_HOME") {
        Some(home) => PathBuf::from(home),
        None => {
            PathBuf::from(std::env::var_os("HOME").context("neither CARGO_HOME nor HOME is set")?)
                .join(".cargo")
        }
    };
    let remap = |from: &Path, to: &str| format!("--remap-path-prefix={}={to}", from.display());
    let mut flags = vec![remap(&cargo_home, REMAPPED_CARGO_HOME)];
    let target = target_dir(root);
    if !target.starts_with(root) {
        flags.push(remap(&target, REMAPPED_TARGET));
    }
    flags.push(remap(root, REMAPPED_WORKSPACE));
    Ok(flags)
}

/// Copies a build output into dist through [`finish`] and a temporary file, with the build
/// output's permissions, saying what changed.
fn install(from: &Path, to: &Path, identifier: &str) -> anyhow::Result<()> {
    let mut data = std::fs::read(from)
        .with_context(|| format!("cannot read build output {}", from.display()))?;
    finish::finish(&mut data, identifier)
        .with_context(|| format!("cannot finish build output {}", from.display()))?;
    let permissions = std::fs::metadata(from)?.permissions();
    let previous = std::fs::read(to).ok();
    let partial = to.with_extension("partial");
    std::fs::write(&partial, &data)
        .and_then(|()| std::fs::set_permissions(&partial, permissions))
        .with_context(|| format!("cannot write {}", partial.display()))?;
    std::fs::rename(&partial, to).with_context(|| format!("cannot write {}", to.display()))?;
    let what = match previous {
        None => "new",
        Some(old) if old == data => "unchanged",
        Some(_) => "replaced a different previous build",
    };
    let (major, minor) = checks::SDK_VERSION;
    eprintln!(
        "dist: wrote {} ({} bytes, {what}; signed as {identifier:?}, SDK {major}.{minor})",
        to.display(),
        data.len()
    );
    Ok(())
}

fn remove_stale(path: &Path, why: &str) -> anyhow::Result<()> {
    if path.exists() {
        std::fs::remove_file(path)
            .with_context(|| format!("cannot remove stale {}", path.display()))?;
        eprintln!("dist: removed the previous {} ({why})", path.display());
    }
    Ok(())
}

fn check(name: &'static str, ok: bool, detail: String) -> checks::Check {
    checks::Check { name, ok, detail }
}

/// Which rules a library is held to.
#[derive(Clone, Copy)]
enum Rules {
    Plain,
    Guard,
}

/// Verifies everything in `out`; prints a report; returns the number of failed checks.
fn verify(out: &Path) -> anyhow::Result<usize> {
    let arch_dir = out.join(TARGET);
    let mut failures = 0;
    let mut section = |title: String, checks: Vec<checks::Check>| {
        println!("{title}");
        for c in &checks {
            println!("  {c}");
        }
        failures += checks.iter().filter(|c| !c.ok).count();
    };

    let root = workspace_root()?;
    let sdks = match sdk::read_sdks(&root) {
        Ok(sdks) => sdks,
        Err(why) => {
            section(
                "SDK excerpts (xtask/sdk)".into(),
                vec![check("sdk excerpts", false, why)],
            );
            Vec::new()
        }
    };
    for (name, rules) in [(DYLIB, Rules::Plain), (GUARD, Rules::Guard)] {
        let path = arch_dir.join(name);
        match std::fs::read(&path) {
            Ok(data) => {
                let checks = match Facts::read(&data) {
                    Ok(facts) => {
                        let mut checks = match rules {
                            Rules::Plain => checks::check_shim(&facts),
                            Rules::Guard => {
                                let mut checks = checks::check_guard(
                                    &facts,
                                    &capshim_macho::interpose_tuples(&data),
                                );
                                checks.push(checks::test_marker_check(&data));
                                checks
                            }
                        };
                        checks.push(sdk::check_imports(&facts, &sdks));
                        checks
                    }
                    Err(error) => vec![check("format", false, error.to_string())],
                };
                section(format!("{} ({} bytes)", path.display(), data.len()), checks);
            }
            Err(error) => section(
                format!("{}", path.display()),
                vec![check(
                    "present",
                    false,
                    format!("cannot read it: {error}; run `cargo xtask dist` first"),
                )],
            ),
        }
    }

    let cli = arch_dir.join(CLI);
    if let Ok(data) = std::fs::read(&cli) {
        let checks = match Facts::read(&data) {
            Ok(facts) => {
                let mut checks = checks::check_executable(&facts);
                checks.push(sdk::check_imports(&facts, &sdks));
                checks
            }
            Err(error) => vec![check("format", false, error.to_string())],
        };
        section(format!("{} ({} bytes)", cli.display(), data.len()), checks);
    } else {
        println!("{} (not built; skipped)", cli.display());
    }

    section(
        format!(
            "link stubs (crates/*/stubs) against the SDK excerpts in {}",
            shown(&root.join("xtask/sdk")).display()
        ),
        sdk::check_stubs(&root, &sdks),
    );
    section(format!("{}", out.join(SUMS).display()), check_sums(out)?);
    Ok(failures)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn build_folders_are_remapped_workspace_last() {
        let root = workspace_root().unwrap();
        let flags = remap_flags(&root).unwrap();
        assert!(flags[0].ends_with("=/cargo"), "{flags:?}");
        assert_eq!(
            flags.last().unwrap(),
            &format!("--remap-path-prefix={}=/capshim", root.display())
        );
        assert!(flags.iter().all(|f| !f.contains('\x1f')));
    }

    #[test]
    fn stub_folders_of_the_workspace() {
        let root = workspace_root().unwrap();
        let shim = stub_search_args(&root, SHIM.dir);
        let cli = stub_search_args(&root, CAPSHIM_CLI.dir);
        if std::env::consts::OS == "macos" {
            assert!(shim.is_empty() && cli.is_empty());
            return;
        }
        let native = |dir: &str| format!("native={}", root.join(dir).join("stubs").display());
        assert_eq!(shim, ["-L".to_owned(), native(SHIM.dir)]);
        assert_eq!(cli.len(), 4);
        assert_eq!(cli[1], native(CAPSHIM_CLI.dir));
        assert!(cli[3].starts_with("framework=") && cli[3].ends_with("stubs/Frameworks"));
        assert!(root.join("crates/shim/stubs/libobjc.tbd").is_file());
        for framework in ["Metal", "Foundation", "CoreGraphics"] {
            let tbd = root.join(format!(
                "crates/cli/stubs/Frameworks/{framework}.framework/{framework}.tbd"
            ));
            assert!(tbd.is_file(), "{} is missing", tbd.display());
        }
    }

    /// Names declared in the `#[link(name = "objc")]` extern blocks of `source`.
    fn objc_imports(source: &str) -> Vec<String> {
        let mut names = Vec::new();
        // `#[link(name = "objc")]`, or `#[cfg_attr(target_vendor = "apple", link(name = "objc"))]`.
        for block in source.split("link(name = \"objc\")").skip(1) {
            let body = &block[..block.find("\n}").unwrap_or(block.len())];
            for part in body.split("fn ").skip(1) {
                let name: String = part
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                names.push(name);
            }
        }
        names
    }

    #[test]
    fn libobjc_stub_lists_exactly_what_the_apple_runtime_imports() {
        let root = workspace_root().unwrap();
        let runtime = root.join("crates/shim/src/runtime");
        let mut imported = Vec::new();
        for entry in std::fs::read_dir(&runtime).unwrap() {
            let path = entry.unwrap().path();
            // gnu.rs is GCC's runtime (Linux only); the rest is compiled for macOS.
            if path.file_name().unwrap() != "gnu.rs" {
                imported.extend(objc_imports(&std::fs::read_to_string(&path).unwrap()));
            }
        }
        imported.sort();
        let tbd = std::fs::read_to_string(root.join("crates/shim/stubs/libobjc.tbd")).unwrap();
        let symbols = &tbd[tbd.find("symbols:").unwrap()..];
        let symbols = &symbols[symbols.find('[').unwrap() + 1..symbols.find(']').unwrap()];
        let mut listed: Vec<String> = symbols
            .split([',', ' ', '\n'])
            .filter(|s| !s.is_empty())
            .map(|s| s.strip_prefix('_').unwrap_or(s).to_owned())
            .collect();
        listed.sort();
        assert!(!imported.is_empty());
        assert_eq!(listed, imported, "update crates/shim/stubs/libobjc.tbd");
    }
}
