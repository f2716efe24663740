//! Link settings for the macOS build of the capshim CLI (nothing on other targets):
//!
//! - `-dead_strip_dylibs`: only libraries something refers to are loaded, so std's libc
//!   crate's request for libiconv (and its libcharset) does not reach the executable.
//! - CoreGraphics is linked as a *needed* framework, kept although none of its symbols is
//!   named: `MTLCreateSystemDefaultDevice` returns no device in a command-line program that
//!   does not link CoreGraphics (objc2-metal's documentation, "NOTE"). Foundation, whose
//!   classes objc2 finds by name at run time, is dropped from the load commands like any
//!   library nothing names, and loaded at launch as a dependency of Metal.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("macos") {
        println!("cargo:rustc-link-arg-bins=-Wl,-dead_strip_dylibs");
        println!("cargo:rustc-link-arg-bins=-Wl,-needed_framework,CoreGraphics");
    }
}
