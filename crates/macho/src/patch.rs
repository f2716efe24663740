//! Changing a linked, ad-hoc signed thin 64-bit Mach-O in place, for `cargo xtask dist`:
//!
//! - [`set_sdk_version`] writes the SDK version of `LC_BUILD_VERSION` (zig records its own
//!   bundled SDK's, 27.0) and then [`rehash_pages`] brings the code signature's page hashes up
//!   to date;
//! - [`set_identifier`] replaces the signature's identifier (linkers name it after the output
//!   file, e.g. cargo's `capshim-<hash>`), which no page hash covers;
//! - [`set_content_uuid`] makes `LC_UUID` a digest of the file's own bytes (zig's differs
//!   between builds of the same code in different folders), then re-hashes the pages.
//!
//! An ad-hoc signature has no certificate and nothing else refers to its CodeDirectory, so a
//! CodeDirectory whose page hashes match the file is a valid signature again.

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
    uuid_at: Option<usize>,
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
        uuid_at: None,
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
            // uuid[16] after cmd and cmdsize.
            macho::LC_UUID if size >= 24 => found.uuid_at = Some(at + 8),
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
    if found.uuid_at.is_some_and(|uuid| uuid + 16 > data.len()) {
        return Err("LC_UUID outside the file".into());
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

/// Sets `LC_UUID` to a digest of the file's bytes up to its code signature, with the UUID
/// itself taken as zeros: the first 16 bytes of their SHA-256, marked as an RFC 9562 version 8
/// (custom) UUID. The same code gives the same UUID wherever it was built; different code a
/// different one, as dyld and debuggers expect. Then re-hashes the pages.
///
/// # Errors
/// When the file is not a little-endian thin 64-bit Mach-O, has no `LC_UUID` or no
/// `LC_CODE_SIGNATURE`, or its signature cannot be re-hashed ([`rehash_pages`]).
pub fn set_content_uuid(data: &mut [u8]) -> Result<(), String> {
    let found = layout(data)?;
    let at = found.uuid_at.ok_or("no LC_UUID load command")?;
    let (signature, _) = found.signature.ok_or("no LC_CODE_SIGNATURE load command")?;
    let end = signature.min(data.len());
    if at + 16 > end {
        return Err("LC_UUID lies in the code signature".into());
    }
    let mut hasher = Sha256::new();
    hasher.update(&data[..at]);
    hasher.update([0u8; 16]);
    hasher.update(&data[at + 16..end]);
    let digest = hasher.finalize();
    let mut uuid = [0u8; 16];
    uuid.copy_from_slice(&digest[..16]);
    uuid[6] = (uuid[6] & 0x0f) | 0x80;
    uuid[8] = (uuid[8] & 0x3f) | 0x80;
    data[at..at + 16].copy_from_slice(&uuid);
    rehash_pages(data)
}

/// Replaces the CodeDirectory's identifier with `identifier`, in the room the signer left
/// for it: from the identifier's offset to the next thing the CodeDirectory holds there (the
/// hashes, or a team identifier), less the terminating NUL. The rest of that room is filled
/// with NULs, so nothing moves. The identifier is not part of the hashed pages: the page
/// hashes stay valid.
///
/// # Errors
/// When there is no ad-hoc CodeDirectory, or `identifier` is empty, holds a NUL or does not
/// fit (the file is then left as it was).
pub fn set_identifier(data: &mut [u8], identifier: &str) -> Result<(), String> {
    let directory = code_directory(data)?;
    let field = |at: usize| {
        be32(data, directory + at)
            .map(|value| value as usize)
            .ok_or("truncated code directory")
    };
    let version = field(8)?;
    let hash_offset = field(16)?;
    let ident_offset = field(20)?;
    let special_slots = field(24)?;
    let hash_size = usize::from(*data.get(directory + 36).ok_or("truncated code directory")?);
    let mut end = hash_offset
        .checked_sub(special_slots * hash_size)
        .ok_or("the code directory's hashes start before its header ends")?;
    // scatterOffset (version 0x20100 on) and teamOffset (0x20200 on) may follow the identifier.
    for (since, at) in [(0x2_0100, 44), (0x2_0200, 48)] {
        if version >= since {
            let offset = field(at)?;
            if offset > ident_offset {
                end = end.min(offset);
            }
        }
    }
    let room = end.saturating_sub(ident_offset);
    if identifier.is_empty() || identifier.as_bytes().contains(&0) {
        return Err(format!("{identifier:?} is not a signing identifier"));
    }
    if identifier.len() >= room {
        return Err(format!(
            "identifier {identifier:?} ({} bytes) does not fit in the {} bytes the signer left",
            identifier.len(),
            room.saturating_sub(1)
        ));
    }
    let field = data
        .get_mut(directory + ident_offset..directory + end)
        .ok_or("the identifier lies outside the file")?;
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
    use crate::testdata::{LINKED_DYLIB, LINKED_EXECUTABLE};

    fn signature(data: &[u8]) -> crate::CodeDirectory {
        Facts::read(data).unwrap().signature.unwrap()
    }

    fn uuid(data: &[u8]) -> [u8; 16] {
        let at = layout(data).unwrap().uuid_at.unwrap();
        data[at..at + 16].try_into().unwrap()
    }

    /// Two links of the same code that differ only in their UUID (as zig's do in different
    /// folders) become the same file; a change of code gives another UUID; the signature
    /// stays valid.
    #[test]
    fn the_uuid_comes_from_the_content() {
        let mut first = LINKED_DYLIB.to_vec();
        let mut second = first.clone();
        let at = layout(&second).unwrap().uuid_at.unwrap();
        second[at] ^= 0x5a;
        assert_ne!(first, second);
        set_content_uuid(&mut first).unwrap();
        set_content_uuid(&mut second).unwrap();
        assert_eq!(first, second);
        assert_ne!(uuid(&first), uuid(LINKED_DYLIB));
        assert_eq!(uuid(&first)[6] >> 4, 8);
        assert!(signature(&first).pages_verified.is_ok());
        // Idempotent.
        let mut again = first.clone();
        set_content_uuid(&mut again).unwrap();
        assert_eq!(again, first);
        // Other code, other UUID.
        let mut other = LINKED_DYLIB.to_vec();
        other[0x4000] ^= 1;
        set_content_uuid(&mut other).unwrap();
        assert_ne!(uuid(&other), uuid(&first));
    }

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
        assert!(
            set_identifier(&mut data, "x")
                .unwrap_err()
                .contains("LC_CODE_SIGNATURE")
        );
        assert_eq!(data, bare, "nothing changed");
        assert!(rehash_pages(&mut b"not a mach-o".to_vec()).is_err());
    }

    /// What dist does to the CLI, on linker output shaped like it: the SDK version and the
    /// identifier change, and every page hash matches again.
    #[test]
    fn a_linked_executable_stays_validly_signed() {
        let before = signature(LINKED_EXECUTABLE);
        assert_eq!(before.identifier, "capshim-0123456789abcdef");
        assert!(before.ad_hoc && before.linker_signed);
        assert_eq!(before.pages_verified, Ok(()));
        let facts = Facts::read(LINKED_EXECUTABLE).unwrap();
        assert_eq!(
            facts.build_version.unwrap().2,
            0x001b_0000,
            "zig's SDK 27.0"
        );

        let mut data = LINKED_EXECUTABLE.to_vec();
        set_sdk_version(&mut data, 0x000b_0300).unwrap();
        set_identifier(&mut data, "capshim").unwrap();
        assert_eq!(data.len(), LINKED_EXECUTABLE.len());
        let facts = Facts::read(&data).unwrap();
        assert_eq!(facts.build_version.unwrap().2, 0x000b_0300);
        let after = facts.signature.unwrap();
        assert_eq!(after.identifier, "capshim");
        assert_eq!(after.pages_verified, Ok(()));
        assert_eq!(after.pages, before.pages);
    }

    #[test]
    fn the_identifier_is_not_in_the_page_hashes() {
        let mut data = LINKED_DYLIB.to_vec();
        set_identifier(&mut data, "libx").unwrap();
        let after = signature(&data);
        assert_eq!(after.identifier, "libx");
        assert_eq!(after.pages_verified, Ok(()));
        // Back to a longer one: the room is the signer's, not the last identifier's.
        set_identifier(&mut data, "libcapshim.dylib").unwrap();
        assert_eq!(data, LINKED_DYLIB, "the same bytes as linked");
    }

    #[test]
    fn identifiers_that_do_not_fit_are_refused_and_change_nothing() {
        let mut data = LINKED_EXECUTABLE.to_vec();
        let long = "x".repeat(200);
        let error = set_identifier(&mut data, &long).unwrap_err();
        assert!(error.contains("does not fit"), "{error}");
        assert!(set_identifier(&mut data, "").is_err());
        assert!(set_identifier(&mut data, "a\0b").is_err());
        assert_eq!(data, LINKED_EXECUTABLE);
    }

    #[test]
    fn signatures_that_are_not_ad_hoc_are_refused() {
        let mut data = LINKED_DYLIB.to_vec();
        let (offset, _) = layout(&data).unwrap().signature.unwrap();
        let directory = code_directory(&data).unwrap();
        assert!(directory > offset);
        let flags = be32(&data, directory + 12).unwrap() & !CS_ADHOC;
        data[directory + 12..directory + 16].copy_from_slice(&flags.to_be_bytes());
        let error = set_identifier(&mut data, "x").unwrap_err();
        assert!(error.contains("not ad hoc"), "{error}");
        assert!(rehash_pages(&mut data).unwrap_err().contains("not ad hoc"));
    }

    /// The same SDK change without re-hashing is caught by the page hashes.
    #[test]
    fn an_sdk_change_without_rehashing_is_caught() {
        let at = layout(LINKED_DYLIB).unwrap().sdk_at.unwrap();
        let mut unsigned = LINKED_DYLIB.to_vec();
        unsigned[at..at + 4].copy_from_slice(&0x000b_0300u32.to_le_bytes());
        assert!(signature(&unsigned).pages_verified.is_err());
        rehash_pages(&mut unsigned).unwrap();
        assert_eq!(signature(&unsigned).pages_verified, Ok(()));
    }
}
