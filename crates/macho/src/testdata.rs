//! Mach-O files for tests, here and in crates that use this one (feature `testdata`):
//!
//! - small hand-made ones: little-endian 64-bit headers, big-endian signature blobs and fat
//!   headers, as on disk;
//! - [`LINKED_DYLIB`] and [`LINKED_EXECUTABLE`]: real linker output, shaped like the two
//!   artifacts of `cargo xtask dist` as cargo leaves them (`fixtures/README.md`).

/// A dylib linked by zig and stripped by llvm-objcopy the way libcapshim.dylib is before
/// `cargo xtask dist` copies it (`fixtures/libcapshim.dylib`, from `fixtures/shim.c` by
/// `fixtures/make.sh`): arm64, install name `@rpath/libcapshim.dylib`, an initializer,
/// linker-signed ad hoc with identifier `libcapshim.dylib`, LC_BUILD_VERSION minimum macOS
/// 11.0 and zig's SDK 27.0, imports `_objc_lookUpClass` (libobjc) and `_getpid`,
/// `dyld_stub_binder` (libSystem).
pub const LINKED_DYLIB: &[u8] = include_bytes!("../fixtures/libcapshim.dylib");

/// An executable made like [`LINKED_DYLIB`], the way the `capshim` CLI is before dist copies
/// it (`fixtures/capshim`, from `fixtures/cli.c`): linked as `capshim-0123456789abcdef`, so
/// signed with that identifier; loads CoreGraphics, Metal, libSystem and libobjc; imports
/// `_MTLCreateSystemDefaultDevice` (Metal), `_objc_msgSend`, `_sel_getName`,
/// `_sel_registerName` (libobjc) and `_strlen`, `_write`, `dyld_stub_binder` (libSystem).
pub const LINKED_EXECUTABLE: &[u8] = include_bytes!("../fixtures/capshim");

/// An XML entitlements plist with each key set to true.
pub fn entitlements(keys: &[&str]) -> String {
    let mut xml =
        String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<plist version=\"1.0\"><dict>");
    for key in keys {
        xml.push_str(&format!("<key>{key}</key><true/>"));
    }
    xml.push_str("</dict></plist>");
    xml
}

/// A code signature for [`macho_with`]: CodeDirectory flags, an entitlements plist, and a
/// team identifier (which makes the CodeDirectory version 0x20200).
#[derive(Clone, Copy, Debug, Default)]
pub struct SignatureSpec<'a> {
    /// CodeDirectory flags, e.g. `CS_RUNTIME`.
    pub flags: u32,
    /// An XML entitlements plist ([`entitlements`]).
    pub entitlements: Option<&'a str>,
    /// The team identifier.
    pub team_id: Option<&'a str>,
}

/// One DER element: `tag`, its length (short or long form), `contents`.
pub fn der(tag: u8, contents: &[u8]) -> Vec<u8> {
    let mut out = vec![tag];
    let length = contents.len();
    if length < 0x80 {
        out.push(length as u8);
    } else {
        let digits = (length as u32).to_be_bytes();
        let skip = digits.iter().take_while(|d| **d == 0).count();
        out.push(0x80 | (4 - skip) as u8);
        out.extend(&digits[skip..]);
    }
    out.extend(contents);
    out
}

/// The payload of a DER entitlements blob as `codesign` writes it (CoreEntitlements:
/// `[APPLICATION 16] { INTEGER 1, [CONTEXT 16] { SEQUENCE { UTF8String key, value } ... } }`,
/// keys sorted), each key with a boolean value.
pub fn der_entitlements(entries: &[(&str, bool)]) -> Vec<u8> {
    let mut sorted = entries.to_vec();
    sorted.sort();
    let dictionary: Vec<u8> = sorted
        .iter()
        .flat_map(|(key, value)| {
            let value = der(0x01, &[if *value { 0xff } else { 0 }]);
            der(0x30, &[der(0x0c, key.as_bytes()), value].concat())
        })
        .collect();
    der(0x70, &[der(0x02, &[1]), der(0xb0, &dictionary)].concat())
}

/// A thin 64-bit arm64 executable signed with CodeDirectory `flags` and, as its only
/// entitlements, the DER blob (magic 0xfade7172, slot 7) holding `der_payload`
/// ([`der_entitlements`]).
pub fn macho_der_signed(flags: u32, der_payload: &[u8]) -> Vec<u8> {
    let mut blob = Vec::new();
    blob.extend(0xfade_7172u32.to_be_bytes());
    blob.extend((8 + der_payload.len() as u32).to_be_bytes());
    blob.extend(der_payload);
    let spec = SignatureSpec {
        flags,
        ..SignatureSpec::default()
    };
    let signature = superblob_with(spec, vec![(7, blob)]);
    macho_raw(0x0100_000c, 0, 2, Vec::new(), Some(signature))
}

/// A thin 64-bit arm64 executable with an `LC_ENCRYPTION_INFO_64` whose `cryptid` is
/// given (the App Store sets 1; a just-built app has 0), and a signature when given.
pub fn encrypted(cryptid: u32, signature: Option<SignatureSpec<'_>>) -> Vec<u8> {
    let mut command = Vec::new();
    // cmd, cmdsize, cryptoff, cryptsize, cryptid, pad
    for word in [0x2cu32, 24, 0x4000, 0x4000, cryptid, 0] {
        command.extend(word.to_le_bytes());
    }
    macho_raw(0x0100_000c, 0, 2, vec![command], signature.map(superblob))
}

fn superblob(spec: SignatureSpec<'_>) -> Vec<u8> {
    superblob_with(spec, Vec::new())
}

/// A SuperBlob with the CodeDirectory and XML entitlements of `spec`, then `extra` blobs as
/// (slot, blob).
fn superblob_with(spec: SignatureSpec<'_>, extra: Vec<(u32, Vec<u8>)>) -> Vec<u8> {
    let mut cd = Vec::new();
    let version: u32 = if spec.team_id.is_some() {
        0x0002_0200
    } else {
        0x0002_0100
    };
    for word in [0xfade_0c02u32, 0, version, spec.flags] {
        cd.extend(word.to_be_bytes());
    }
    cd.resize(52, 0);
    if let Some(team) = spec.team_id {
        let at = cd.len() as u32;
        cd[48..52].copy_from_slice(&at.to_be_bytes());
        cd.extend(team.as_bytes());
        cd.push(0);
    }
    let cd_len = cd.len() as u32;
    cd[4..8].copy_from_slice(&cd_len.to_be_bytes());
    let mut blobs: Vec<(u32, Vec<u8>)> = vec![(0, cd)];
    if let Some(xml) = spec.entitlements {
        let mut blob = Vec::new();
        blob.extend(0xfade_7171u32.to_be_bytes());
        blob.extend((8 + xml.len() as u32).to_be_bytes());
        blob.extend(xml.as_bytes());
        blobs.push((5, blob));
    }
    blobs.extend(extra);
    let header_len = 12 + 8 * blobs.len();
    let mut out = Vec::new();
    out.extend(0xfade_0cc0u32.to_be_bytes());
    out.extend(0u32.to_be_bytes()); // length, patched below
    out.extend((blobs.len() as u32).to_be_bytes());
    let mut offset = header_len;
    for (kind, blob) in &blobs {
        out.extend(kind.to_be_bytes());
        out.extend((offset as u32).to_be_bytes());
        offset += blob.len();
    }
    for (_, blob) in blobs {
        out.extend(blob);
    }
    let len = out.len() as u32;
    out[4..8].copy_from_slice(&len.to_be_bytes());
    out
}

/// A fixed-size name field of a load command.
fn name16(name: &str) -> [u8; 16] {
    let mut field = [0u8; 16];
    field[..name.len()].copy_from_slice(name.as_bytes());
    field
}

/// An `LC_SEGMENT_64` named `segment` with one empty section `section`.
fn segment(segment: &str, section: &str) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend(0x19u32.to_le_bytes()); // LC_SEGMENT_64
    out.extend(152u32.to_le_bytes()); // 72 + one 80-byte section
    out.extend(name16(segment));
    out.extend([0u8; 32]); // vmaddr, vmsize, fileoff, filesize
    out.extend([0u32, 0, 1, 0].iter().flat_map(|w| w.to_le_bytes())); // prot, nsects, flags
    out.extend(name16(section));
    out.extend(name16(segment));
    out.extend([0u8; 48]); // addr .. reserved3
    out
}

/// A thin 64-bit Mach-O with only a header and, when `signature` is given as
/// (CodeDirectory flags, entitlements XML), an `LC_CODE_SIGNATURE`.
pub fn macho(
    cputype: u32,
    cpusubtype: u32,
    filetype: u32,
    signature: Option<(u32, Option<&str>)>,
) -> Vec<u8> {
    let signature = signature.map(|(flags, entitlements)| SignatureSpec {
        flags,
        entitlements,
        team_id: None,
    });
    macho_with(cputype, cpusubtype, filetype, &[], signature)
}

/// A thin 64-bit Mach-O with a header, one `LC_SEGMENT_64` holding one empty section per
/// (segment, section) name pair in `sections`, and an `LC_CODE_SIGNATURE` when `signature`
/// is given.
pub fn macho_with(
    cputype: u32,
    cpusubtype: u32,
    filetype: u32,
    sections: &[(&str, &str)],
    signature: Option<SignatureSpec<'_>>,
) -> Vec<u8> {
    let commands = sections
        .iter()
        .map(|(seg, sect)| segment(seg, sect))
        .collect();
    macho_raw(
        cputype,
        cpusubtype,
        filetype,
        commands,
        signature.map(superblob),
    )
}

/// A thin 64-bit Mach-O with a header, these load commands, and an `LC_CODE_SIGNATURE`
/// pointing at `blob` (a SuperBlob) when given.
fn macho_raw(
    cputype: u32,
    cpusubtype: u32,
    filetype: u32,
    commands: Vec<Vec<u8>>,
    blob: Option<Vec<u8>>,
) -> Vec<u8> {
    let mut ncmds = commands.len() as u32;
    let mut commands: Vec<u8> = commands.concat();
    if blob.is_some() {
        ncmds += 1;
    }
    let sizeofcmds = commands.len() as u32 + if blob.is_some() { 16 } else { 0 };
    if let Some(blob) = &blob {
        let dataoff = 32 + sizeofcmds;
        for word in [0x1du32, 16, dataoff, blob.len() as u32] {
            commands.extend(word.to_le_bytes());
        }
    }
    let mut out = Vec::new();
    for word in [
        0xfeed_facfu32,
        cputype,
        cpusubtype,
        filetype,
        ncmds,
        sizeofcmds,
        0,
        0,
    ] {
        out.extend(word.to_le_bytes());
    }
    out.extend(commands);
    if let Some(blob) = blob {
        out.extend(blob);
    }
    out
}

/// A universal (fat, 32-bit table) binary holding `slices` as (cputype, cpusubtype, bytes).
pub fn universal(slices: &[(u32, u32, Vec<u8>)]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend(0xcafe_babeu32.to_be_bytes());
    out.extend((slices.len() as u32).to_be_bytes());
    let mut offset = (8 + 20 * slices.len()).next_multiple_of(16);
    for (cputype, cpusubtype, bytes) in slices {
        for word in [*cputype, *cpusubtype, offset as u32, bytes.len() as u32, 4] {
            out.extend(word.to_be_bytes());
        }
        offset = (offset + bytes.len()).next_multiple_of(16);
    }
    for (_, _, bytes) in slices {
        out.resize(out.len().next_multiple_of(16), 0);
        out.extend(bytes);
    }
    out
}

/// A thin 64-bit arm64/x86_64 Mach-O dylib whose `__DATA,__capshim` section holds `record`
/// (e.g. `capshim-version 0.1.0`), as libcapshim carries its version record.
pub fn with_version_record(cputype: u32, cpusubtype: u32, record: &str) -> Vec<u8> {
    dylib_with_record(cputype, cpusubtype, Some(record), None)
}

/// A thin 64-bit Mach-O dylib with, when given, a `__DATA,__capshim` section holding `record`
/// and a code signature.
pub fn dylib_with_record(
    cputype: u32,
    cpusubtype: u32,
    record: Option<&str>,
    signature: Option<SignatureSpec<'_>>,
) -> Vec<u8> {
    let blob = signature.map(superblob);
    let segment_size = if record.is_some() { 152u32 } else { 0 };
    let signature_size = if blob.is_some() { 16u32 } else { 0 };
    let sizeofcmds = segment_size + signature_size;
    let ncmds = u32::from(record.is_some()) + u32::from(blob.is_some());
    let data_at = 32 + sizeofcmds;
    let record = record.unwrap_or_default();
    let mut out = Vec::new();
    for word in [
        0xfeed_facfu32,
        cputype,
        cpusubtype,
        6,
        ncmds,
        sizeofcmds,
        0,
        0,
    ] {
        out.extend(word.to_le_bytes()); // MH_DYLIB
    }
    if segment_size > 0 {
        out.extend(0x19u32.to_le_bytes()); // LC_SEGMENT_64
        out.extend(segment_size.to_le_bytes());
        out.extend(name16("__DATA"));
        for word in [
            0u64,
            record.len() as u64,
            u64::from(data_at),
            record.len() as u64,
        ] {
            out.extend(word.to_le_bytes()); // vmaddr, vmsize, fileoff, filesize
        }
        out.extend([3u32, 3, 1, 0].iter().flat_map(|w| w.to_le_bytes())); // prot, nsects, flags
        out.extend(name16("__capshim"));
        out.extend(name16("__DATA"));
        out.extend(0u64.to_le_bytes()); // addr
        out.extend((record.len() as u64).to_le_bytes()); // size
        out.extend(data_at.to_le_bytes()); // offset
        out.extend([0u8; 28]); // align .. reserved3
    }
    if let Some(blob) = &blob {
        let dataoff = data_at + record.len() as u32;
        for word in [0x1du32, 16, dataoff, blob.len() as u32] {
            out.extend(word.to_le_bytes()); // LC_CODE_SIGNATURE
        }
    }
    out.extend(record.as_bytes());
    if let Some(blob) = blob {
        out.extend(blob);
    }
    out
}
