//! Link settings for the macOS build of libcapshim (nothing on other targets): install name
//! `@rpath/libcapshim.dylib` (rustc would otherwise record the absolute path of the build
//! directory), and `-dead_strip_dylibs` so that only the libraries actually used are loaded
//! (std's libc crate also asks for libiconv).
//!
//! Cross-built from Linux (`cargo xtask dist`), the linker finds libobjc through the `.tbd`
//! stub in `stubs/`, which xtask puts on the search path; on a Mac the SDK's is used.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("macos") {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-install_name,@rpath/libcapshim.dylib");
        println!("cargo:rustc-cdylib-link-arg=-Wl,-dead_strip_dylibs");
    }
}
