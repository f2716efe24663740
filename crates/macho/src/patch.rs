//! Changing a linked, ad-hoc signed thin 64-bit Mach-O in place, for `cargo xtask dist`:
//! [`set_sdk_version`] writes the SDK version of `LC_BUILD_VERSION` (zig records its own
//! bundled SDK's, 27.0) and then [`rehash_pages`] brings the code signature's page hashes up
//! to date. An ad-hoc signature has no certificate and nothing else refers to its
//! CodeDirectory, so updated page hashes make it valid again.

use object::macho;
use sha2::{Digest, Sha256};

use crate::bytes::be32;
use crate::signature::{
    CS_ADHOC, CS_HASHTYPE_SHA256, CSMAGIC_CODEDIRECTORY, CSMAGIC_EMBEDDED_SIGNATURE,
    CSSLOT_CODEDIRECTORY,
};

/// Where `LC_BUILD_VERSION`'s `sdk` field and `LC_CODE_SIGNATURE`'s data are.
struct Layout {
    sdk_at: Option<usize>,
    signature: Option<(usize, usize)>,
}

fn le32(data: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(
        data.get(at..at.checked_add(4)?)?.try_into().ok()?,
    ))
}

fn layout(data: &[u8]) -> Result<Layout, String> {
    if le32(data, 0) != Some(macho::MH_MAGIC_64) {
        return Err("not a little-endian thin 64-bit Mach-O".into());
    }
    let ncmds = le32(data, 16).ok_or("truncated header")?;
    let mut found = Layout {
        sdk_at: None,
        signature: None,
    };
    let mut at = 32usize;
    for _ in 0..ncmds {
        let cmd = le32(data, at).ok_or("truncated load commands")?;
        let size = le32(data, at + 4).ok_or("truncated load commands")? as usize;
        if size < 8 {
            return Err(format!("a load command of {size} bytes"));
        }
        match cmd {
            // platform (8), minos (12), sdk (16) from the command's start.
            macho::LC_BUILD_VERSION => found.sdk_at = Some(at + 16),
            macho::LC_CODE_SIGNATURE => {
                let dataoff = le32(data, at + 8).ok_or("truncated LC_CODE_SIGNATURE")?;
                let datasize = le32(data, at + 12).ok_or("truncated LC_CODE_SIGNATURE")?;
                found.signature = Some((dataoff as usize, datasize as usize));
            }
            _ => {}
        }
        at += size;
    }
    if found.sdk_at.is_some_and(|sdk| sdk + 4 > data.len()) {
        return Err("LC_BUILD_VERSION outside the file".into());
    }
    Ok(found)
}

/// Sets `LC_BUILD_VERSION`'s SDK version (encoded `xxxx.yy.zz` as `0xXXXXYYZZ`) and
/// re-hashes the code signature's pages.
///
/// # Errors
/// When the file is not a little-endian thin 64-bit Mach-O, has no `LC_BUILD_VERSION`, or
/// its signature cannot be re-hashed ([`rehash_pages`]).
pub fn set_sdk_version(data: &mut [u8], sdk: u32) -> Result<(), String> {
    let at = layout(data)?
        .sdk_at
        .ok_or("no LC_BUILD_VERSION load command")?;
    data[at..at + 4].copy_from_slice(&sdk.to_le_bytes());
    rehash_pages(data)
}

/// Replaces the CodeDirectory's identifier with `identifier`, which may not be longer than
/// the one there (the rest is filled with NULs, so nothing moves). The identifier is not
/// part of the hashed pages.
///
/// # Errors
/// When there is no ad-hoc CodeDirectory or the new identifier is longer.
pub fn set_identifier(data: &mut [u8], identifier: &str) -> Result<(), String> {
    let directory = code_directory(data)?;
    let ident_at =
        directory + be32(data, directory + 20).ok_or("truncated code directory")? as usize;
    let old_len = data
        .get(ident_at..)
        .and_then(|rest| rest.iter().position(|&b| b == 0))
        .ok_or("the identifier is not terminated")?;
    if identifier.len() > old_len || identifier.as_bytes().contains(&0) {
        return Err(format!(
            "identifier {identifier:?} does not fit in the {old_len} bytes of the linker's"
        ));
    }
    let field = &mut data[ident_at..ident_at + old_len];
    field.fill(0);
    field[..identifier.len()].copy_from_slice(identifier.as_bytes());
    Ok(())
}

/// Where the ad-hoc CodeDirectory starts in `data`.
fn code_directory(data: &[u8]) -> Result<usize, String> {
    let (offset, size) = layout(data)?
        .signature
        .ok_or("no LC_CODE_SIGNATURE load command")?;
    let blob = data
        .get(offset..offset + size)
        .ok_or("LC_CODE_SIGNATURE points outside the file")?;
    if be32(blob, 0) != Some(CSMAGIC_EMBEDDED_SIGNATURE) {
        return Err("the signature is not an embedded signature superblob".into());
    }
    let count = be32(blob, 8).ok_or("truncated superblob")? as usize;
    let directory = (0..count.min(64))
        .filter_map(|i| Some((be32(blob, 12 + i * 8)?, be32(blob, 16 + i * 8)? as usize)))
        .find(|(kind, _)| *kind == CSSLOT_CODEDIRECTORY)
        .map(|(_, at)| offset + at)
        .ok_or("the signature has no code directory")?;
    if be32(data, directory) != Some(CSMAGIC_CODEDIRECTORY) {
        return Err("the code directory has a bad magic number".into());
    }
    if be32(data, directory + 12).ok_or("truncated code directory")? & CS_ADHOC == 0 {
        return Err("the signature is not ad hoc: changing it would invalidate it".into());
    }
    Ok(directory)
}

/// Recomputes every SHA-256 page hash of the ad-hoc CodeDirectory from the bytes before the
/// signature.
///
/// # Errors
/// When there is no signature, it is not ad hoc, not SHA-256, or does not end the code
/// where the signature starts.
pub fn rehash_pages(data: &mut [u8]) -> Result<(), String> {
    let (offset, _) = layout(data)?
        .signature
        .ok_or("no LC_CODE_SIGNATURE load command")?;
    let directory = code_directory(data)?;
    let field = |at: usize| be32(data, directory + at).ok_or("truncated code directory");
    let hash_offset = field(16)? as usize;
    let code_slots = field(28)? as usize;
    let code_limit = field(32)? as usize;
    let [hash_size, hash_type, _platform, page_log2] = field(36)?.to_be_bytes();
    if hash_type != CS_HASHTYPE_SHA256 || hash_size != 32 {
        return Err(format!("hash type {hash_type}, expected SHA-256"));
    }
    if code_limit != offset || !(12..=16).contains(&page_log2) {
        return Err("the code directory does not cover the file up to its signature".into());
    }
    let page = 1usize << page_log2;
    if code_slots != code_limit.div_ceil(page) {
        return Err(format!("{code_slots} page hashes for {code_limit} bytes"));
    }
    for index in 0..code_slots {
        let start = index * page;
        let digest = Sha256::digest(&data[start..(start + page).min(code_limit)]);
        let at = directory + hash_offset + index * 32;
        data.get_mut(at..at + 32)
            .ok_or("page hash table outside the file")?
            .copy_from_slice(&digest);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Facts;

    #[test]
    fn files_without_what_is_patched_are_refused() {
        let bare = crate::testdata::macho(macho::CPU_TYPE_ARM64, 0, macho::MH_DYLIB, None);
        let mut data = bare.clone();
        assert!(
            set_sdk_version(&mut data, 0x000b_0300)
                .unwrap_err()
                .contains("LC_BUILD_VERSION")
        );
        assert!(
            rehash_pages(&mut data)
                .unwrap_err()
                .contains("LC_CODE_SIGNATURE")
        );
        assert_eq!(data, bare, "nothing changed");
        assert!(rehash_pages(&mut b"not a mach-o".to_vec()).is_err());
    }

    /// With the dylib of the last `cargo xtask dist` (skipped when there is none): the SDK
    /// version changes, and the page hashes match again only after re-hashing.
    #[test]
    fn a_real_linker_signed_dylib_stays_validly_signed() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../dist/aarch64-apple-darwin/libcapshim.dylib");
        let Ok(original) = std::fs::read(&path) else {
            eprintln!(
                "{} is absent (run `cargo xtask dist`); skipped",
                path.display()
            );
            return;
        };
        let mut data = original.clone();
        set_sdk_version(&mut data, 0x000b_0300).unwrap();
        set_identifier(&mut data, "libx").unwrap();
        let facts = Facts::read(&data).unwrap();
        assert_eq!(facts.build_version.unwrap().2, 0x000b_0300);
        let signature = facts.signature.unwrap();
        assert_eq!(signature.pages_verified, Ok(()));
        assert_eq!(signature.identifier, "libx");
        let long = "x".repeat(200);
        assert!(
            set_identifier(&mut data, &long)
                .unwrap_err()
                .contains("does not fit")
        );
        // The same change without re-hashing is caught.
        let at = layout(&original).unwrap().sdk_at.unwrap();
        let mut unsigned = original.clone();
        unsigned[at..at + 4].copy_from_slice(&0x000b_0400u32.to_le_bytes());
        assert!(
            Facts::read(&unsigned)
                .unwrap()
                .signature
                .unwrap()
                .pages_verified
                .is_err()
        );
    }
}
