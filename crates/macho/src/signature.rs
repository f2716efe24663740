//! Embedded code signatures, read one way for both their readers:
//!
//! - [`Signature`]: what decides whether DYLD variables reach a program (the hardened runtime
//!   and two entitlements), for the CLI's pre-flight checks;
//! - [`CodeDirectory`]: how the file was signed and whether its page hashes still match, for
//!   `cargo xtask dist`.
//!
//! Layout from Apple's open-source `cs_blobs.h` (xnu): `LC_CODE_SIGNATURE` points at a
//! big-endian SuperBlob (magic 0xfade0cc0) whose index lists (slot type, offset) pairs; the
//! CodeDirectory (magic 0xfade0c02, slot 0) has `flags` at byte 12 (`CS_RUNTIME` = 0x10000
//! is the hardened runtime), the XML entitlements blob has magic 0xfade7171 (slot 5), and
//! the DER entitlements blob magic 0xfade7172 (slot 7). `codesign` writes both today; a
//! signature may carry the DER form only, so both are read ([`der_entitlement_true`]).

use object::read::macho::MachHeader;
use object::{ReadRef, macho};
use sha2::{Digest, Sha256};

use crate::bytes::{be32, slice, trim_nul};

/// The SuperBlob that `LC_CODE_SIGNATURE` points at.
pub const CSMAGIC_EMBEDDED_SIGNATURE: u32 = 0xfade_0cc0;
/// A CodeDirectory blob.
pub const CSMAGIC_CODEDIRECTORY: u32 = 0xfade_0c02;
/// An XML entitlements blob.
pub const CSMAGIC_EMBEDDED_ENTITLEMENTS: u32 = 0xfade_7171;
/// A DER entitlements blob (`CSMAGIC_EMBEDDED_DER_ENTITLEMENTS`, xnu `cs_blobs.h`).
pub const CSMAGIC_EMBEDDED_DER_ENTITLEMENTS: u32 = 0xfade_7172;
/// The index slot of the (first) CodeDirectory.
pub const CSSLOT_CODEDIRECTORY: u32 = 0;
/// CodeDirectory flag: signed without a certificate.
pub const CS_ADHOC: u32 = 0x2;
/// CodeDirectory flag: signed by the linker.
pub const CS_LINKER_SIGNED: u32 = 0x2_0000;
/// CodeDirectory flag: the hardened runtime.
pub const CS_RUNTIME: u32 = 0x0001_0000;
/// CodeDirectory flag (`codesign -o restrict`): "tell dyld to treat restricted" (xnu
/// `cs_blobs.h`): dyld ignores `DYLD_*` variables for the program while SIP is on.
pub const CS_RESTRICT: u32 = 0x0000_0800;
/// CodeDirectory flag (`codesign -o library`): "require library validation" (xnu
/// `cs_blobs.h`): the program loads only libraries signed by Apple or by its own team.
pub const CS_REQUIRE_LV: u32 = 0x0000_2000;
/// The first CodeDirectory version with a team identifier (`teamOffset` at byte 48).
pub const CS_SUPPORTSTEAMID: u32 = 0x0002_0200;
/// CodeDirectory hash type: SHA-256.
pub const CS_HASHTYPE_SHA256: u8 = 2;

/// Entitlement that lets `DYLD_INSERT_LIBRARIES` reach a hardened-runtime program.
pub const ALLOW_DYLD_ENV: &str = "com.apple.security.cs.allow-dyld-environment-variables";
/// Entitlement that lets a hardened-runtime program load libraries signed by someone else
/// (an ad-hoc signed libcapshim.dylib).
pub const DISABLE_LIBRARY_VALIDATION: &str = "com.apple.security.cs.disable-library-validation";

/// What a code signature says about injection.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Signature {
    /// The hardened runtime is on (`CS_RUNTIME` in a CodeDirectory's flags).
    pub hardened_runtime: bool,
    /// `CS_RESTRICT` is in a CodeDirectory's flags (`codesign -o restrict`).
    pub restrict: bool,
    /// `CS_REQUIRE_LV` is in a CodeDirectory's flags (`codesign -o library`): library
    /// validation even without the hardened runtime.
    pub require_library_validation: bool,
    /// The team identifier of the signing certificate (CodeDirectory version 0x20200 and
    /// later); `None` for ad-hoc signatures, which have none.
    pub team_id: Option<String>,
    /// The `com.apple.security.cs.allow-dyld-environment-variables` entitlement is true.
    pub allow_dyld_environment_variables: bool,
    /// The `com.apple.security.cs.disable-library-validation` entitlement is true.
    pub disable_library_validation: bool,
}

/// The embedded signature's CodeDirectory, as `cargo xtask dist` checks it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CodeDirectory {
    /// `CS_ADHOC`: signed without a certificate.
    pub ad_hoc: bool,
    /// `CS_LINKER_SIGNED`: signed by the linker.
    pub linker_signed: bool,
    /// The code directory's identifier.
    pub identifier: String,
    /// Hash of the code pages, e.g. `SHA-256`.
    pub hash: &'static str,
    /// Number of code pages.
    pub pages: usize,
    /// Whether every page hash matched the file: `Ok(())`, or what did not.
    pub pages_verified: Result<(), String>,
}

/// Why bytes are not a usable SuperBlob.
enum SuperBlobError {
    /// The magic number is not [`CSMAGIC_EMBEDDED_SIGNATURE`].
    NotSuperBlob,
    /// The header ends before its blob count.
    Truncated,
}

/// A SuperBlob's header and index.
struct SuperBlob<'a> {
    bytes: &'a [u8],
    count: usize,
}

impl<'a> SuperBlob<'a> {
    fn parse(bytes: &'a [u8]) -> Result<SuperBlob<'a>, SuperBlobError> {
        if be32(bytes, 0) != Some(CSMAGIC_EMBEDDED_SIGNATURE) {
            return Err(SuperBlobError::NotSuperBlob);
        }
        let count = be32(bytes, 8).ok_or(SuperBlobError::Truncated)? as usize;
        Ok(SuperBlob { bytes, count })
    }

    /// The index entries as (slot type, offset of the blob in the SuperBlob), at most 64 of
    /// them whatever the count says; `None` for an entry cut off by the end of the bytes
    /// (and so for every entry after it).
    fn entries(&self) -> impl Iterator<Item = Option<(u32, usize)>> + '_ {
        (0..self.count.min(64)).map(|index| {
            let kind = be32(self.bytes, 12 + index * 8)?;
            let offset = be32(self.bytes, 12 + index * 8 + 4)? as usize;
            Some((kind, offset))
        })
    }
}

impl Signature {
    /// Parses the SuperBlob bytes `LC_CODE_SIGNATURE` points at: every CodeDirectory's
    /// flags and the entitlements. `None` when they are not a SuperBlob or its index is cut
    /// off; an unreadable entitlements blob is skipped.
    pub fn parse(blob: &[u8]) -> Option<Signature> {
        let superblob = SuperBlob::parse(blob).ok()?;
        let mut signature = Signature::default();
        for entry in superblob.entries() {
            let (_, offset) = entry?;
            match be32(blob, offset) {
                Some(CSMAGIC_CODEDIRECTORY) => {
                    let flags = be32(blob, offset + 12).unwrap_or(0);
                    signature.hardened_runtime |= flags & CS_RUNTIME != 0;
                    signature.restrict |= flags & CS_RESTRICT != 0;
                    signature.require_library_validation |= flags & CS_REQUIRE_LV != 0;
                    if signature.team_id.is_none() {
                        signature.team_id = team_id(&blob[offset..]);
                    }
                }
                Some(CSMAGIC_EMBEDDED_ENTITLEMENTS) => {
                    let length = be32(blob, offset + 4).unwrap_or(0) as usize;
                    let Some(xml) = blob.get(offset + 8..offset.saturating_add(length)) else {
                        continue;
                    };
                    let Ok(value) = plist::Value::from_reader_xml(xml) else {
                        continue;
                    };
                    let Some(dict) = value.as_dictionary() else {
                        continue;
                    };
                    let yes = |key: &str| dict.get(key).and_then(|v| v.as_boolean()) == Some(true);
                    signature.allow_dyld_environment_variables |= yes(ALLOW_DYLD_ENV);
                    signature.disable_library_validation |= yes(DISABLE_LIBRARY_VALIDATION);
                }
                Some(CSMAGIC_EMBEDDED_DER_ENTITLEMENTS) => {
                    let length = be32(blob, offset + 4).unwrap_or(0) as usize;
                    let Some(der) = blob.get(offset + 8..offset.saturating_add(length)) else {
                        continue;
                    };
                    let yes = |key: &str| der_entitlement_true(der, key) == Some(true);
                    signature.allow_dyld_environment_variables |= yes(ALLOW_DYLD_ENV);
                    signature.disable_library_validation |= yes(DISABLE_LIBRARY_VALIDATION);
                }
                _ => {}
            }
        }
        Some(signature)
    }

    /// Reads the code signature of one thin Mach-O, if it has one.
    /// `offset` is where the thin Mach-O starts in `data` (a slice of a universal file).
    pub(crate) fn read<'data, Mach: MachHeader, R: ReadRef<'data>>(
        header: &Mach,
        endian: Mach::Endian,
        data: R,
        offset: u64,
    ) -> Option<Signature> {
        let mut commands = header.load_commands(endian, data, offset).ok()?;
        while let Ok(Some(command)) = commands.next() {
            if command.cmd() != macho::LC_CODE_SIGNATURE {
                continue;
            }
            let link = command
                .data::<macho::LinkeditDataCommand<Mach::Endian>>()
                .ok()?;
            let start = offset.checked_add(u64::from(link.dataoff.get(endian)))?;
            let size = u64::from(link.datasize.get(endian));
            let blob = data.read_bytes_at(start, size).ok()?;
            return Signature::parse(blob);
        }
        None
    }
}

/// DER tag of the whole entitlements value: `CCDER_ENTITLEMENTS`, i.e. APPLICATION,
/// constructed, number 16 (xnu `EXTERNAL_HEADERS/CoreEntitlements/CoreEntitlementsPriv.h`).
const DER_ENTITLEMENTS: u8 = 0x70;
/// DER tag of a dictionary in entitlements: CONTEXT-SPECIFIC, constructed, number 16
/// (`CCDER_ENTITLEMENTS_DICT`, the "second element" CoreEntitlements requires).
const DER_DICTIONARY: u8 = 0xb0;
/// DER universal tags used by the format.
const DER_INTEGER: u8 = 0x02;
const DER_BOOLEAN: u8 = 0x01;
const DER_SEQUENCE: u8 = 0x30;
const DER_UTF8_STRING: u8 = 0x0c;

/// One DER element at the start of `bytes`: (tag, contents, the bytes after it). `None`
/// for what DER does not allow or the format never uses: a multi-byte tag, an indefinite
/// length, a length longer than 4 bytes or than what is left.
fn der_element(bytes: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = bytes.split_first()?;
    if tag & 0x1f == 0x1f {
        return None;
    }
    let (&first, rest) = rest.split_first()?;
    let (length, rest) = if first < 0x80 {
        (usize::from(first), rest)
    } else {
        let count = usize::from(first & 0x7f);
        if count == 0 || count > 4 {
            return None;
        }
        let (digits, rest) = rest.split_at_checked(count)?;
        let length = digits
            .iter()
            .fold(0usize, |acc, &digit| (acc << 8) | usize::from(digit));
        (length, rest)
    };
    let (contents, rest) = rest.split_at_checked(length)?;
    Some((tag, contents, rest))
}

/// The value of the top-level boolean entitlement `key` in a DER entitlements blob's
/// payload (after its 8-byte header): `Some(true)` or `Some(false)` for a boolean,
/// `None` when the key is absent, not a boolean, or the payload is not the format.
///
/// The format (CoreEntitlements, as `codesign` writes it): `[APPLICATION 16] { INTEGER
/// version, [CONTEXT 16] { SEQUENCE { UTF8String key, value } ... } }`; a boolean value is
/// DER's `BOOLEAN`, true being 0xff. Only a lookup of two known top-level keys is needed,
/// so this walks the elements rather than decode every type a property list can hold
/// (which would need a general DER library for no gain).
pub fn der_entitlement_true(payload: &[u8], key: &str) -> Option<bool> {
    let (tag, body, _) = der_element(payload)?;
    if tag != DER_ENTITLEMENTS {
        return None;
    }
    let (tag, _version, rest) = der_element(body)?;
    if tag != DER_INTEGER {
        return None;
    }
    let (tag, mut entries, _) = der_element(rest)?;
    if tag != DER_DICTIONARY {
        return None;
    }
    while !entries.is_empty() {
        let (tag, entry, rest) = der_element(entries)?;
        entries = rest;
        if tag != DER_SEQUENCE {
            return None;
        }
        let (tag, name, value) = der_element(entry)?;
        if tag != DER_UTF8_STRING || name != key.as_bytes() {
            continue;
        }
        let (tag, contents, _) = der_element(value)?;
        return (tag == DER_BOOLEAN && contents.len() == 1).then(|| contents[0] == 0xff);
    }
    None
}

/// The team identifier of the CodeDirectory at the start of `cd`, when its version has one
/// and it is not empty.
fn team_id(cd: &[u8]) -> Option<String> {
    if be32(cd, 8)? < CS_SUPPORTSTEAMID {
        return None;
    }
    let at = be32(cd, 48)? as usize;
    if at == 0 {
        return None;
    }
    let name = trim_nul(cd.get(at..)?);
    (!name.is_empty()).then(|| String::from_utf8_lossy(name).into_owned())
}

impl CodeDirectory {
    /// Reads the CodeDirectory of the signature at `offset` (`size` bytes, from
    /// `LC_CODE_SIGNATURE`) in the thin Mach-O `data`, and checks its page hashes against
    /// `data`.
    ///
    /// # Errors
    /// What makes the signature unusable, in words.
    pub fn read(data: &[u8], offset: u32, size: u32) -> Result<CodeDirectory, String> {
        let blob = slice(data, offset, size)
            .ok_or("LC_CODE_SIGNATURE points outside the file (truncated?)")?;
        let superblob = SuperBlob::parse(blob).map_err(|e| match e {
            SuperBlobError::NotSuperBlob => {
                "LC_CODE_SIGNATURE data is not an embedded signature superblob"
            }
            SuperBlobError::Truncated => "signature superblob truncated",
        })?;
        let directory = superblob
            .entries()
            .flatten()
            .find(|(kind, _)| *kind == CSSLOT_CODEDIRECTORY)
            .map(|(_, at)| at)
            .ok_or("signature has no code directory")?;
        let cd = blob
            .get(directory..)
            .ok_or("code directory outside the signature")?;
        if be32(cd, 0) != Some(CSMAGIC_CODEDIRECTORY) {
            return Err("code directory has a bad magic number".into());
        }
        let field = |at: usize| be32(cd, at).ok_or("code directory truncated");
        let flags = field(12)?;
        let hash_offset = field(16)? as usize;
        let ident_offset = field(20)? as usize;
        let code_slots = field(28)? as usize;
        let code_limit = field(32)? as usize;
        let [hash_size, hash_type, _platform, page_log2] = field(36)?.to_be_bytes();
        let identifier = cd
            .get(ident_offset..)
            .map(|rest| String::from_utf8_lossy(trim_nul(rest)).into_owned())
            .unwrap_or_default();
        let hash = if hash_type == CS_HASHTYPE_SHA256 {
            "SHA-256"
        } else {
            "non-SHA-256"
        };
        let pages_verified = verify_pages(
            data,
            cd,
            offset as usize,
            (hash_offset, code_slots, code_limit),
            (hash_size, hash_type, page_log2),
        );
        Ok(CodeDirectory {
            ad_hoc: flags & CS_ADHOC != 0,
            linker_signed: flags & CS_LINKER_SIGNED != 0,
            identifier,
            hash,
            pages: code_slots,
            pages_verified,
        })
    }
}

/// Checks every SHA-256 page hash of the CodeDirectory `cd` against the code of `data`, which
/// must end where the signature starts.
fn verify_pages(
    data: &[u8],
    cd: &[u8],
    signature_offset: usize,
    (hash_offset, code_slots, code_limit): (usize, usize, usize),
    (hash_size, hash_type, page_log2): (u8, u8, u8),
) -> Result<(), String> {
    if hash_type != CS_HASHTYPE_SHA256 || hash_size != 32 {
        return Err(format!(
            "page hashes not checked: hash type {hash_type} size {hash_size}, expected SHA-256"
        ));
    }
    if code_limit != signature_offset {
        return Err(format!(
            "code limit {code_limit} does not reach the signature at {signature_offset}"
        ));
    }
    if !(12..=16).contains(&page_log2) {
        return Err(format!("unexpected page size 2^{page_log2}"));
    }
    let page = 1usize << page_log2;
    let code = data.get(..code_limit).ok_or("code limit beyond the file")?;
    if code_slots != code.len().div_ceil(page) {
        return Err(format!(
            "{code_slots} page hashes for {} pages of code",
            code.len().div_ceil(page)
        ));
    }
    for (index, chunk) in code.chunks(page).enumerate() {
        let at = hash_offset + index * 32;
        let expected = cd.get(at..at + 32).ok_or("page hash table truncated")?;
        if Sha256::digest(chunk).as_slice() != expected {
            return Err(format!(
                "page {index} (bytes {}..{}) does not match its hash: the file changed after \
                 signing, macOS would refuse to load it",
                index * page,
                index * page + chunk.len()
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testdata::der;

    #[test]
    fn the_der_walk_skips_other_values_and_refuses_what_is_not_the_format() {
        // A string and an array before the key; a dictionary long enough for a long-form
        // length.
        let entry =
            |key: &str, value: Vec<u8>| der(0x30, &[der(0x0c, key.as_bytes()), value].concat());
        let dictionary = [
            entry("com.apple.application-identifier", der(0x0c, b"TEAM.app")),
            entry(
                "com.apple.security.application-groups",
                der(0x30, &der(0x0c, b"group.example")),
            ),
            entry(ALLOW_DYLD_ENV, der(0x01, &[0xff])),
        ]
        .concat();
        assert!(dictionary.len() > 127);
        let payload = der(0x70, &[der(0x02, &[1]), der(0xb0, &dictionary)].concat());
        assert_eq!(der_entitlement_true(&payload, ALLOW_DYLD_ENV), Some(true));
        assert_eq!(
            der_entitlement_true(&payload, DISABLE_LIBRARY_VALIDATION),
            None
        );
        assert_eq!(
            der_entitlement_true(&payload, "com.apple.application-identifier"),
            None,
            "a string is not a boolean"
        );
        // Not the format: another outer tag, a missing version, a cut-off length, XML.
        let wrong_outer = der(0x30, &[der(0x02, &[1]), der(0xb0, &dictionary)].concat());
        assert_eq!(der_entitlement_true(&wrong_outer, ALLOW_DYLD_ENV), None);
        let no_version = der(0x70, &der(0xb0, &dictionary));
        assert_eq!(der_entitlement_true(&no_version, ALLOW_DYLD_ENV), None);
        assert_eq!(
            der_entitlement_true(&payload[..payload.len() - 1], ALLOW_DYLD_ENV),
            None
        );
        assert_eq!(der_entitlement_true(b"<?xml", ALLOW_DYLD_ENV), None);
        assert_eq!(
            der_entitlement_true(&[0x70, 0x80], ALLOW_DYLD_ENV),
            None,
            "indefinite length"
        );
    }
}
