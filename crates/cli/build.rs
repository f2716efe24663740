//! Links CoreGraphics on macOS: `MTLCreateSystemDefaultDevice` returns no device in a
//! command-line program that does not link it (objc2-metal's documentation, "NOTE").

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("macos") {
        println!("cargo:rustc-link-lib=framework=CoreGraphics");
    }
}
