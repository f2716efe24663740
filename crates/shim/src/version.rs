//! The version record: which capshim built this library, in a section of its own
//! (`__DATA,__capshim` in the Mach-O build, `.capshim_version` in the ELF one), so that the
//! `capshim` CLI can read it from the file without loading the library (`capshim doctor`
//! compares it with its own version). Nothing reads it at run time.
//!
//! The record is the bytes of [`RECORD_PREFIX`] followed by the crate version, a NUL, and the
//! toolchain that compiled the library (the first line of `rustc --version`, found by the build
//! script), e.g. `capshim-version 0.1.0\0rustc 1.95.0 (59807616e 2026-04-14)`, with no
//! terminator. `capshim_macho::parse_record` reads the version up to the first NUL, so a
//! reader of the first form (`capshim-version 0.1.0` alone) reads both. The guard library
//! (`capshim-guard`) carries the same record. Nothing in it depends on the build machine's
//! folders, so a rebuild gives the same bytes (`cargo xtask reproduce`).

/// What the record starts with; the version follows.
pub const RECORD_PREFIX: &str = "capshim-version ";

/// The toolchain that compiled the library, after the NUL.
pub const TOOLCHAIN: &str = env!("SHIM_BUILD_TOOLCHAIN");

/// The record's text.
const TEXT: &str = concat!(
    "capshim-version ",
    env!("CARGO_PKG_VERSION"),
    "\0",
    env!("SHIM_BUILD_TOOLCHAIN")
);

/// `TEXT` as an array, so the section holds the bytes themselves (not a pointer to them).
const fn record<const N: usize>() -> [u8; N] {
    let bytes = TEXT.as_bytes();
    let mut out = [0u8; N];
    let mut i = 0;
    while i < N {
        out[i] = bytes[i];
        i += 1;
    }
    out
}

// `#[used]` keeps the record through dead stripping and LTO (rustc marks it
// no_dead_strip / retained); placing a static in a named section is an unsafe attribute
// because the linker treats that section's contents as it pleases.
#[used]
// SAFETY: a plain, read-only byte array in a section of our own name: no loader, runtime or
// linker behaviour is attached to `__DATA,__capshim` or `.capshim_version` (unlike
// `__mod_init_func`), so placing it there only adds bytes to the file.
#[cfg_attr(target_vendor = "apple", unsafe(link_section = "__DATA,__capshim"))]
#[cfg_attr(
    not(target_vendor = "apple"),
    unsafe(link_section = ".capshim_version")
)]
static VERSION_RECORD: [u8; TEXT.len()] = record();

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_record_is_the_prefix_and_the_crate_version() {
        assert_eq!(
            std::str::from_utf8(&VERSION_RECORD).unwrap(),
            format!("{RECORD_PREFIX}{}\0{TOOLCHAIN}", env!("CARGO_PKG_VERSION"))
        );
        assert!(TOOLCHAIN.starts_with("rustc "), "{TOOLCHAIN}");
        assert!(!TOOLCHAIN.contains('\0'));
    }
}
