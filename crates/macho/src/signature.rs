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
//! is the hardened runtime), and the XML entitlements blob has magic 0xfade7171.

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
