//! Small hand-made Mach-O files for tests, here and in crates that use this one (feature
//! `testdata`): little-endian 64-bit headers, big-endian signature blobs and fat headers, as
//! on disk.

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

fn superblob(cd_flags: u32, entitlements: Option<&str>) -> Vec<u8> {
    let mut cd = Vec::new();
    for word in [0xfade_0c02u32, 44, 0x0002_0400, cd_flags] {
        cd.extend(word.to_be_bytes());
    }
    cd.resize(44, 0);
    let mut blobs: Vec<(u32, Vec<u8>)> = vec![(0, cd)];
    if let Some(xml) = entitlements {
        let mut blob = Vec::new();
        blob.extend(0xfade_7171u32.to_be_bytes());
        blob.extend((8 + xml.len() as u32).to_be_bytes());
        blob.extend(xml.as_bytes());
        blobs.push((5, blob));
    }
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

/// A thin 64-bit Mach-O with only a header and, when `signature` is given as
/// (CodeDirectory flags, entitlements XML), an `LC_CODE_SIGNATURE`.
pub fn macho(
    cputype: u32,
    cpusubtype: u32,
    filetype: u32,
    signature: Option<(u32, Option<&str>)>,
) -> Vec<u8> {
    let (ncmds, sizeofcmds) = if signature.is_some() {
        (1u32, 16u32)
    } else {
        (0, 0)
    };
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
    if let Some((flags, xml)) = signature {
        let blob = superblob(flags, xml);
        let dataoff = 48u32;
        for word in [0x1du32, 16, dataoff, blob.len() as u32] {
            out.extend(word.to_le_bytes());
        }
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
