//! The last step before an artifact enters `dist/`: its code signature gets the identifier
//! it ships under ([`checks::SHIM_IDENTIFIER`], [`checks::CLI_IDENTIFIER`]), its
//! `LC_BUILD_VERSION` the SDK version its imports are checked against
//! ([`checks::SDK_VERSION`]; zig records its own, 27.0), its `LC_UUID` a digest of its own
//! bytes (zig's depends on the build folder), and the page hashes are recomputed
//! (`capshim_macho::patch`).
//!
//! This happens to the copy dist writes, not at link time, because the linker's output is
//! not the last version of the file. After the link, rustc strips the debug information of a
//! release build (cargo's default `strip = "debuginfo"` when no debug information is asked
//! for) by running `rust-objcopy --strip-debug` on the output in `deps/`, and llvm-objcopy
//! signs a linker-signed file again with the file's name as identifier: `capshim-<hash>` for
//! the CLI, whatever the link wrapper had written there. Cargo then hard-links that file to
//! `release/capshim`, which dist reads. (An identifier patch in the link wrapper passed its
//! unit test and never reached dist for this reason.) The fixtures of `capshim_macho`
//! (`crates/macho/fixtures`) go through the same zig and llvm-objcopy steps, so the tests
//! below run on what dist is given.

use capshim_macho::patch::{set_content_uuid, set_identifier, set_sdk_version};

use crate::checks;

/// Sets the identifier and the SDK version of a linked, ad-hoc signed file in place and
/// re-hashes its pages.
///
/// # Errors
/// When the file is not a thin 64-bit Mach-O with `LC_BUILD_VERSION` and an ad-hoc
/// SHA-256 signature, or `identifier` does not fit in the room its signer left.
pub fn finish(data: &mut [u8], identifier: &str) -> anyhow::Result<()> {
    let (major, minor) = checks::SDK_VERSION;
    set_sdk_version(data, major << 16 | minor << 8).map_err(anyhow::Error::msg)?;
    // zig's LC_UUID differs between links of the same code in different folders: make it
    // the content's, so that dist is reproducible (`cargo xtask reproduce`).
    set_content_uuid(data).map_err(anyhow::Error::msg)?;
    set_identifier(data, identifier).map_err(anyhow::Error::msg)
}

#[cfg(test)]
mod tests {
    use super::*;
    use capshim_macho::Facts;
    use capshim_macho::testdata::{LINKED_DYLIB, LINKED_EXECUTABLE};

    fn failing(checks: &[checks::Check]) -> Vec<&'static str> {
        checks.iter().filter(|c| !c.ok).map(|c| c.name).collect()
    }

    fn finished(linked: &[u8], identifier: &str) -> Vec<u8> {
        let mut data = linked.to_vec();
        finish(&mut data, identifier).unwrap();
        data
    }

    /// The CLI as cargo leaves it fails dist's rules on exactly what dist must still fix,
    /// and passes every rule once finished.
    #[test]
    fn a_linked_executable_passes_once_finished() {
        let linked = checks::check_executable(&Facts::read(LINKED_EXECUTABLE).unwrap());
        assert_eq!(failing(&linked), ["platform", "signature"], "{linked:#?}");
        let signature = linked.iter().find(|c| c.name == "signature").unwrap();
        assert!(signature.detail.contains("\"capshim-0123456789abcdef\""));

        let data = finished(LINKED_EXECUTABLE, checks::CLI_IDENTIFIER);
        let checks = checks::check_executable(&Facts::read(&data).unwrap());
        assert!(checks.iter().all(|c| c.ok), "{checks:#?}");
    }

    /// The dylib: finished, every rule passes; then one flipped byte of code, or a truncated
    /// signature, fails the signature rule.
    #[test]
    fn a_linked_dylib_passes_once_finished_and_tampering_fails() {
        let linked = checks::check_shim(&Facts::read(LINKED_DYLIB).unwrap());
        assert_eq!(failing(&linked), ["platform"], "{linked:#?}");

        let data = finished(LINKED_DYLIB, checks::SHIM_IDENTIFIER);
        let checks = checks::check_shim(&Facts::read(&data).unwrap());
        assert!(checks.iter().all(|c| c.ok), "{checks:#?}");
        assert_eq!(checks.len(), 8);

        let mut tampered = data.clone();
        tampered[0x4000] ^= 0xff;
        let facts = Facts::read(&tampered).unwrap();
        assert_eq!(failing(&checks::check_shim(&facts)), ["signature"]);

        let truncated = &data[..data.len() - 64];
        let failed = Facts::read(truncated).map(|facts| checks::check_shim(&facts));
        assert!(failed.is_err() || failing(&failed.unwrap()).contains(&"signature"));
    }

    #[test]
    fn finishing_twice_gives_the_same_file() {
        let once = finished(LINKED_EXECUTABLE, checks::CLI_IDENTIFIER);
        assert_eq!(finished(&once, checks::CLI_IDENTIFIER), once);
    }

    #[test]
    fn files_that_cannot_be_finished_are_refused() {
        let bare = capshim_macho::testdata::macho(
            object::macho::CPU_TYPE_ARM64,
            0,
            object::macho::MH_DYLIB,
            None,
        );
        let error = finish(&mut bare.clone(), "x").unwrap_err().to_string();
        assert!(error.contains("LC_BUILD_VERSION"), "{error}");
        let long = "x".repeat(100);
        assert!(finish(&mut LINKED_DYLIB.to_vec(), &long).is_err());
    }
}
