//! Build settings shared by libcapshim (package `capshim`) and the guard library (package
//! `capshim-guard`, which compiles the same sources with `--cfg capshim_guard`; see
//! crates/guard/Cargo.toml):
//!
//! - the toolchain that compiles the library, for its version record (`src/version.rs`):
//!   the first line of `$RUSTC --version`, as `SHIM_BUILD_TOOLCHAIN`;
//! - for the guard package, `--cfg capshim_guard`, which compiles in the exec interposers
//!   (`src/guard/interpose.rs`); libcapshim never has them;
//! - on macOS, the install name `@rpath/<file name>` (rustc would otherwise record the
//!   absolute path of the build directory), and `-dead_strip_dylibs` so that only the
//!   libraries actually used are loaded (std's libc crate also asks for libiconv).
//!
//! Cross-built from Linux (`cargo xtask dist`), the linker finds libobjc through the `.tbd`
//! stub in `stubs/`, which xtask puts on the search path; on a Mac the SDK's is used.

use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=RUSTC");
    println!("cargo::rustc-check-cfg=cfg(capshim_guard)");

    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let toolchain = Command::new(rustc)
        .arg("--version")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|text| text.lines().next().map(str::trim).map(str::to_owned))
        .unwrap_or_else(|| "rustc (version unknown)".to_owned());
    println!("cargo:rustc-env=SHIM_BUILD_TOOLCHAIN={toolchain}");

    let guard = std::env::var("CARGO_PKG_NAME").as_deref() == Ok("capshim-guard");
    if guard {
        println!("cargo:rustc-cfg=capshim_guard");
    }
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("macos") {
        let file = if guard {
            "libcapshim_guard.dylib"
        } else {
            "libcapshim.dylib"
        };
        println!("cargo:rustc-cdylib-link-arg=-Wl,-install_name,@rpath/{file}");
        println!("cargo:rustc-cdylib-link-arg=-Wl,-dead_strip_dylibs");
    }
}
