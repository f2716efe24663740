//! Reads a Mach-O file and checks what `cargo xtask dist` promises about it.
//!
//! [`inspect`] gathers the facts (pure parsing, nothing else); [`check_shim`] and
//! [`check_executable`] turn facts into pass/fail [`Check`]s, so every rule can be tested with
//! hand-made facts as well as with a real build.

use std::fmt;

use object::macho;
use object::macho::MachHeader64;
use object::read::macho::{LoadCommandVariant, MachHeader, Section, Segment};
use object::{Endianness, FileKind};
use sha2::{Digest, Sha256};

/// The install name libcapshim must carry.
pub const SHIM_INSTALL_NAME: &str = "@rpath/libcapshim.dylib";

/// The only symbols libcapshim may export, and why each is there. rustc asks for no exports
/// at all (the library works through its initializer); zig's linker adds these two
/// linker-synthesized symbols to every dylib it writes.
pub const SHIM_EXPORT_ALLOW_LIST: &[(&str, &str)] = &[
    ("__mh_dylib_header", "synthesized by zig's linker"),
    ("___dso_handle", "synthesized by zig's linker"),
];

/// The oldest macOS the artifacts must load on (`MACOSX_DEPLOYMENT_TARGET` of the build, and
/// rustc's own minimum for aarch64-apple-darwin), as `(major, minor)`.
pub const MINIMUM_MACOS: (u32, u32) = (11, 0);

/// Where the libraries a macOS artifact loads may live: the system's own.
pub const SYSTEM_LIBRARY_PREFIXES: &[&str] = &["/usr/lib/", "/System/Library/"];

/// Why a file could not be inspected at all.
#[derive(Debug, thiserror::Error)]
pub enum InspectError {
    /// Not a Mach-O file: what it is instead.
    #[error("not a Mach-O file ({0}); expected a thin 64-bit arm64 Mach-O")]
    NotMachO(String),
    /// A universal (fat) file; dist writes thin files.
    #[error("a universal (fat) Mach-O; expected a thin 64-bit arm64 Mach-O")]
    Universal,
    /// A Mach-O that does not parse.
    #[error("malformed Mach-O: {0}")]
    Malformed(String),
}

impl From<object::Error> for InspectError {
    fn from(error: object::Error) -> Self {
        InspectError::Malformed(error.to_string())
    }
}

/// One library the file loads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dependency {
    /// The load command: `LC_LOAD_DYLIB`, `LC_LOAD_WEAK_DYLIB`, `LC_REEXPORT_DYLIB`...
    pub command: &'static str,
    /// The install name of the library.
    pub path: String,
}

/// One section.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SectionFact {
    /// Segment name, e.g. `__DATA_CONST`.
    pub segment: String,
    /// Section name, e.g. `__mod_init_func`.
    pub name: String,
    /// Size in bytes.
    pub size: u64,
    /// `flags & SECTION_TYPE`, e.g. `S_MOD_INIT_FUNC_POINTERS`.
    pub section_type: u32,
}

/// The embedded code signature.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Signature {
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

/// What [`inspect`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Facts {
    /// `cputype` from the header.
    pub cpu_type: u32,
    /// `cpusubtype` from the header, without the capability bits.
    pub cpu_subtype: u32,
    /// `filetype` from the header.
    pub file_type: u32,
    /// `LC_ID_DYLIB`, when present.
    pub install_name: Option<String>,
    /// Every library load command, in order.
    pub dependencies: Vec<Dependency>,
    /// `LC_RPATH` entries.
    pub rpaths: Vec<String>,
    /// Every section of every segment.
    pub sections: Vec<SectionFact>,
    /// `LC_ROUTINES_64` (an old-style initializer) is present.
    pub has_routines: bool,
    /// The signature, or why there is none usable.
    pub signature: Result<Signature, String>,
    /// Names in the export trie (what dyld lets other images bind to).
    pub exports: Vec<String>,
    /// `LC_BUILD_VERSION` (or `LC_VERSION_MIN_MACOSX`): platform number (1 = macOS), minimum
    /// OS and SDK versions, encoded `xxxx.yy.zz` as dyld does.
    pub build_version: Option<(u32, u32, u32)>,
}

/// One rule and its outcome.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Check {
    /// Short name, e.g. `install name`.
    pub name: &'static str,
    /// Whether the rule holds.
    pub ok: bool,
    /// What was found (and, on failure, what was expected).
    pub detail: String,
}

impl Check {
    fn new(name: &'static str, ok: bool, detail: impl Into<String>) -> Self {
        Check {
            name,
            ok,
            detail: detail.into(),
        }
    }
}

impl fmt::Display for Check {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mark = if self.ok { "ok  " } else { "FAIL" };
        write!(f, "{mark}  {:<13} {}", self.name, self.detail)
    }
}

/// Parses `data` as a thin 64-bit Mach-O file.
pub fn inspect(data: &[u8]) -> Result<Facts, InspectError> {
    match FileKind::parse(data) {
        Ok(FileKind::MachO64) => {}
        Ok(FileKind::MachOFat32 | FileKind::MachOFat64) => return Err(InspectError::Universal),
        Ok(FileKind::MachO32) => {
            return Err(InspectError::Malformed(
                "a 32-bit Mach-O; expected 64-bit arm64".into(),
            ));
        }
        Ok(other) => return Err(InspectError::NotMachO(format!("{other:?}"))),
        Err(_) => return Err(InspectError::NotMachO("unrecognised format".into())),
    }
    let header = MachHeader64::<Endianness>::parse(data, 0)?;
    let endian = header.endian()?;
    let mut facts = Facts {
        cpu_type: header.cputype(endian),
        cpu_subtype: header.cpusubtype(endian) & !macho::CPU_SUBTYPE_MASK,
        file_type: header.filetype(endian),
        install_name: None,
        dependencies: Vec::new(),
        rpaths: Vec::new(),
        sections: Vec::new(),
        has_routines: false,
        signature: Err("no LC_CODE_SIGNATURE load command".into()),
        exports: Vec::new(),
        build_version: None,
    };
    let mut export_trie: Option<(u32, u32)> = None;
    let mut commands = header.load_commands(endian, data, 0)?;
    while let Some(command) = commands.next()? {
        let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
        match command.variant()? {
            LoadCommandVariant::IdDylib(dylib) => {
                facts.install_name = Some(text(command.string(endian, dylib.dylib.name)?));
            }
            LoadCommandVariant::Dylib(dylib) => facts.dependencies.push(Dependency {
                command: dylib_command_name(command.cmd()),
                path: text(command.string(endian, dylib.dylib.name)?),
            }),
            LoadCommandVariant::Rpath(rpath) => {
                facts.rpaths.push(text(command.string(endian, rpath.path)?));
            }
            LoadCommandVariant::Segment64(segment, section_data) => {
                for section in segment.sections(endian, section_data)? {
                    facts.sections.push(SectionFact {
                        segment: text(trim_nul(section.segment_name())),
                        name: text(trim_nul(section.name())),
                        size: section.size(endian),
                        section_type: section.flags(endian) & macho::SECTION_TYPE,
                    });
                }
            }
            LoadCommandVariant::Routines64(_) => facts.has_routines = true,
            LoadCommandVariant::BuildVersion(build) => {
                facts.build_version = Some((
                    build.platform.get(endian),
                    build.minos.get(endian),
                    build.sdk.get(endian),
                ));
            }
            LoadCommandVariant::VersionMin(version)
                if command.cmd() == macho::LC_VERSION_MIN_MACOSX =>
            {
                facts.build_version = Some((
                    macho::PLATFORM_MACOS,
                    version.version.get(endian),
                    version.sdk.get(endian),
                ));
            }
            LoadCommandVariant::DyldInfo(info) => {
                export_trie = Some((info.export_off.get(endian), info.export_size.get(endian)));
            }
            LoadCommandVariant::LinkeditData(linkedit) => {
                let (offset, size) = (linkedit.dataoff.get(endian), linkedit.datasize.get(endian));
                match command.cmd() {
                    macho::LC_DYLD_EXPORTS_TRIE => export_trie = Some((offset, size)),
                    macho::LC_CODE_SIGNATURE => {
                        facts.signature = read_signature(data, offset, size);
                    }
                    _ => {}
                }
            }
            _ => {}
        }
    }
    if let Some((offset, size)) = export_trie {
        let trie = slice(data, offset, size)
            .ok_or_else(|| InspectError::Malformed("export trie outside the file".into()))?;
        facts.exports = read_export_trie(trie).map_err(InspectError::Malformed)?;
        facts.exports.sort();
    }
    Ok(facts)
}

/// The rules for libcapshim.dylib.
pub fn check_shim(facts: &Facts) -> Vec<Check> {
    vec![
        format_check(facts, macho::MH_DYLIB),
        platform_check(facts),
        install_name_check(facts),
        dependencies_check(facts),
        initializer_check(facts),
        signature_check(facts),
        exports_check(facts),
        interpose_check(facts),
    ]
}

/// The rules for the `capshim` executable.
pub fn check_executable(facts: &Facts) -> Vec<Check> {
    vec![
        format_check(facts, macho::MH_EXECUTE),
        platform_check(facts),
        dependencies_check(facts),
        signature_check(facts),
        interpose_check(facts),
    ]
}

fn format_check(facts: &Facts, file_type: u32) -> Check {
    let arch = match (facts.cpu_type, facts.cpu_subtype) {
        (macho::CPU_TYPE_ARM64, macho::CPU_SUBTYPE_ARM64E) => "arm64e".to_owned(),
        (macho::CPU_TYPE_ARM64, _) => "arm64".to_owned(),
        (macho::CPU_TYPE_X86_64, _) => "x86_64".to_owned(),
        (other, _) => format!("cputype {other:#x}"),
    };
    let ok = facts.cpu_type == macho::CPU_TYPE_ARM64
        && facts.cpu_subtype == macho::CPU_SUBTYPE_ARM64_ALL
        && facts.file_type == file_type;
    let mut detail = format!("Mach-O 64-bit {arch} {}", file_type_name(facts.file_type));
    if !ok {
        detail += &format!("; expected arm64 {}", file_type_name(file_type));
    }
    Check::new("format", ok, detail)
}

fn version(encoded: u32) -> String {
    format!("{}.{}", encoded >> 16, (encoded >> 8) & 0xff)
}

fn platform_check(facts: &Facts) -> Check {
    let (major, minor) = MINIMUM_MACOS;
    let wanted = format!("macOS, minimum {major}.{minor} or older");
    match facts.build_version {
        None => Check::new(
            "platform",
            false,
            format!("no LC_BUILD_VERSION; expected {wanted}"),
        ),
        Some((platform, minos, sdk)) => {
            let ok = platform == macho::PLATFORM_MACOS && minos <= (major << 16 | minor << 8);
            let name = if platform == macho::PLATFORM_MACOS {
                "macOS".to_owned()
            } else {
                format!("platform {platform}")
            };
            let mut detail = format!("{name}, minimum {} (SDK {})", version(minos), version(sdk));
            if !ok {
                detail += &format!("; expected {wanted}");
            }
            Check::new("platform", ok, detail)
        }
    }
}

fn install_name_check(facts: &Facts) -> Check {
    match &facts.install_name {
        Some(name) if name == SHIM_INSTALL_NAME => Check::new("install name", true, name.clone()),
        Some(name) => Check::new(
            "install name",
            false,
            format!("{name}; expected {SHIM_INSTALL_NAME} (LC_ID_DYLIB)"),
        ),
        None => Check::new(
            "install name",
            false,
            format!("no LC_ID_DYLIB; expected {SHIM_INSTALL_NAME}"),
        ),
    }
}

fn dependencies_check(facts: &Facts) -> Check {
    if facts.dependencies.is_empty() {
        return Check::new(
            "dependencies",
            false,
            "none: expected at least /usr/lib/libSystem.B.dylib",
        );
    }
    let mut seen = std::collections::HashSet::new();
    let duplicates: Vec<&str> = facts
        .dependencies
        .iter()
        .filter(|d| !seen.insert(d.path.as_str()))
        .map(|d| d.path.as_str())
        .collect();
    if !duplicates.is_empty() {
        return Check::new(
            "dependencies",
            false,
            format!(
                "loaded twice: {} (recent dyld refuses duplicate load commands)",
                duplicates.join(", ")
            ),
        );
    }
    let outside: Vec<&Dependency> = facts
        .dependencies
        .iter()
        .filter(|d| {
            !SYSTEM_LIBRARY_PREFIXES
                .iter()
                .any(|p| d.path.starts_with(p))
        })
        .collect();
    let list = |deps: &mut dyn Iterator<Item = &Dependency>| {
        deps.map(|d| match d.command {
            "LC_LOAD_DYLIB" => d.path.clone(),
            other => format!("{} ({other})", d.path),
        })
        .collect::<Vec<_>>()
        .join(", ")
    };
    if outside.is_empty() {
        Check::new("dependencies", true, list(&mut facts.dependencies.iter()))
    } else {
        Check::new(
            "dependencies",
            false,
            format!(
                "not system libraries: {}; only {} may be loaded",
                list(&mut outside.into_iter()),
                SYSTEM_LIBRARY_PREFIXES.join(" or ")
            ),
        )
    }
}

fn initializer_check(facts: &Facts) -> Check {
    let found: Vec<String> = facts
        .sections
        .iter()
        .filter(|s| s.size > 0)
        .filter_map(|s| match s.section_type {
            macho::S_MOD_INIT_FUNC_POINTERS => Some(format!(
                "{},{}: {} pointer(s)",
                s.segment,
                s.name,
                s.size / 8
            )),
            macho::S_INIT_FUNC_OFFSETS => Some(format!(
                "{},{}: {} offset(s)",
                s.segment,
                s.name,
                s.size / 4
            )),
            _ => None,
        })
        .chain(facts.has_routines.then(|| "LC_ROUTINES_64".to_owned()))
        .collect();
    if found.is_empty() {
        Check::new(
            "initializer",
            false,
            "none: no non-empty __mod_init_func/__init_offsets section and no LC_ROUTINES_64",
        )
    } else {
        Check::new("initializer", true, found.join(", "))
    }
}

fn signature_check(facts: &Facts) -> Check {
    match &facts.signature {
        Err(why) => Check::new("signature", false, why.clone()),
        Ok(sig) => {
            let kind = match (sig.ad_hoc, sig.linker_signed) {
                (true, true) => "ad hoc (linker-signed)",
                (true, false) => "ad hoc",
                (false, _) => "with a certificate",
            };
            let pages = match &sig.pages_verified {
                Ok(()) => format!("{} {} page hashes match", sig.pages, sig.hash),
                Err(why) => why.clone(),
            };
            Check::new(
                "signature",
                sig.pages_verified.is_ok(),
                format!("{kind}, identifier {:?}, {pages}", sig.identifier),
            )
        }
    }
}

fn exports_check(facts: &Facts) -> Check {
    let allowed = |name: &str| SHIM_EXPORT_ALLOW_LIST.iter().any(|(n, _)| *n == name);
    let mangled: Vec<&str> = facts
        .exports
        .iter()
        .map(String::as_str)
        .filter(|n| is_mangled(n))
        .collect();
    let unexpected: Vec<&str> = facts
        .exports
        .iter()
        .map(String::as_str)
        .filter(|n| !allowed(n) && !is_mangled(n))
        .collect();
    let all = if facts.exports.is_empty() {
        "none".to_owned()
    } else {
        format!("{}: {}", facts.exports.len(), facts.exports.join(", "))
    };
    if mangled.is_empty() && unexpected.is_empty() {
        return Check::new("exports", true, format!("{all} (allow-listed)"));
    }
    let mut why = Vec::new();
    if !mangled.is_empty() {
        why.push(format!(
            "{} Rust/C++-mangled (the export list was not applied at link time)",
            mangled.len()
        ));
    }
    if !unexpected.is_empty() {
        why.push(format!("not allow-listed: {}", unexpected.join(", ")));
    }
    let shown: Vec<&str> = facts.exports.iter().take(8).map(String::as_str).collect();
    Check::new(
        "exports",
        false,
        format!(
            "{} exported ({}{}); {}",
            facts.exports.len(),
            shown.join(", "),
            if facts.exports.len() > shown.len() {
                ", ..."
            } else {
                ""
            },
            why.join("; ")
        ),
    )
}

fn interpose_check(facts: &Facts) -> Check {
    match facts.sections.iter().find(|s| s.name == "__interpose") {
        Some(s) => Check::new(
            "no interpose",
            false,
            format!(
                "{},{} present ({} bytes): dyld would interpose symbols process-wide",
                s.segment, s.name, s.size
            ),
        ),
        None => Check::new("no interpose", true, "no __interpose section"),
    }
}

/// Rust v0 (`_R`), legacy Rust and C++ (`_ZN`, `_Z`) manglings, with Mach-O's leading `_`.
fn is_mangled(name: &str) -> bool {
    let Some(rest) = name.strip_prefix('_') else {
        return false;
    };
    let second = rest.as_bytes().get(1).copied().unwrap_or(0);
    (rest.starts_with("_R") && (second.is_ascii_uppercase() || second.is_ascii_digit()))
        || rest.starts_with("_Z")
}

fn dylib_command_name(cmd: u32) -> &'static str {
    match cmd {
        macho::LC_LOAD_DYLIB => "LC_LOAD_DYLIB",
        macho::LC_LOAD_WEAK_DYLIB => "LC_LOAD_WEAK_DYLIB",
        macho::LC_REEXPORT_DYLIB => "LC_REEXPORT_DYLIB",
        macho::LC_LAZY_LOAD_DYLIB => "LC_LAZY_LOAD_DYLIB",
        macho::LC_LOAD_UPWARD_DYLIB => "LC_LOAD_UPWARD_DYLIB",
        _ => "dylib command",
    }
}

fn file_type_name(file_type: u32) -> String {
    match file_type {
        macho::MH_OBJECT => "MH_OBJECT".into(),
        macho::MH_EXECUTE => "MH_EXECUTE".into(),
        macho::MH_DYLIB => "MH_DYLIB".into(),
        macho::MH_BUNDLE => "MH_BUNDLE".into(),
        other => format!("filetype {other}"),
    }
}

fn trim_nul(bytes: &[u8]) -> &[u8] {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    &bytes[..end]
}

fn slice(data: &[u8], offset: u32, size: u32) -> Option<&[u8]> {
    let start = usize::try_from(offset).ok()?;
    let end = start.checked_add(usize::try_from(size).ok()?)?;
    data.get(start..end)
}

fn be32(data: &[u8], at: usize) -> Option<u32> {
    let bytes = data.get(at..at.checked_add(4)?)?;
    Some(u32::from_be_bytes(bytes.try_into().ok()?))
}

const CSMAGIC_EMBEDDED_SIGNATURE: u32 = 0xfade_0cc0;
const CSMAGIC_CODEDIRECTORY: u32 = 0xfade_0c02;
const CSSLOT_CODEDIRECTORY: u32 = 0;
const CS_ADHOC: u32 = 0x2;
const CS_LINKER_SIGNED: u32 = 0x2_0000;
const CS_HASHTYPE_SHA256: u8 = 2;

/// Reads the embedded signature's code directory and checks its page hashes against `data`.
fn read_signature(data: &[u8], offset: u32, size: u32) -> Result<Signature, String> {
    let blob = slice(data, offset, size)
        .ok_or("LC_CODE_SIGNATURE points outside the file (truncated?)")?;
    if be32(blob, 0) != Some(CSMAGIC_EMBEDDED_SIGNATURE) {
        return Err("LC_CODE_SIGNATURE data is not an embedded signature superblob".into());
    }
    let count = be32(blob, 8).ok_or("signature superblob truncated")? as usize;
    let directory = (0..count.min(64))
        .filter_map(|i| {
            let kind = be32(blob, 12 + i * 8)?;
            let at = be32(blob, 16 + i * 8)? as usize;
            (kind == CSSLOT_CODEDIRECTORY).then_some(at)
        })
        .next()
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
    Ok(Signature {
        ad_hoc: flags & CS_ADHOC != 0,
        linker_signed: flags & CS_LINKER_SIGNED != 0,
        identifier,
        hash,
        pages: code_slots,
        pages_verified,
    })
}

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

fn uleb(data: &[u8], at: &mut usize) -> Result<u64, String> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *data.get(*at).ok_or("export trie: truncated number")?;
        *at += 1;
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err("export trie: number too long".into())
}

/// The names in a dyld export trie (`LC_DYLD_INFO.export_off` or `LC_DYLD_EXPORTS_TRIE`).
pub fn read_export_trie(trie: &[u8]) -> Result<Vec<String>, String> {
    let mut names = Vec::new();
    if trie.is_empty() {
        return Ok(names);
    }
    // (node offset, prefix so far); the visit budget guards against cycles in bad input.
    let mut stack = vec![(0usize, Vec::<u8>::new())];
    let mut budget = trie.len() + 1;
    while let Some((node, prefix)) = stack.pop() {
        budget = budget.checked_sub(1).ok_or("export trie: cycle")?;
        let mut at = node;
        let terminal = uleb(trie, &mut at)? as usize;
        if terminal > 0 {
            names.push(String::from_utf8_lossy(&prefix).into_owned());
        }
        at = at
            .checked_add(terminal)
            .filter(|&a| a < trie.len())
            .ok_or("export trie: node outside the trie")?;
        let children = trie[at];
        at += 1;
        for _ in 0..children {
            let label_len = trie
                .get(at..)
                .and_then(|rest| rest.iter().position(|&b| b == 0))
                .ok_or("export trie: unterminated edge label")?;
            let mut name = prefix.clone();
            name.extend_from_slice(&trie[at..at + label_len]);
            at += label_len + 1;
            let child = uleb(trie, &mut at)? as usize;
            if child >= trie.len() {
                return Err("export trie: child outside the trie".into());
            }
            stack.push((child, name));
        }
    }
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The libcapshim.dylib of the last `cargo xtask dist`, when there is one.
    fn built_dylib() -> Option<Vec<u8>> {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../dist/aarch64-apple-darwin/libcapshim.dylib");
        let found = std::fs::read(&path).ok();
        if found.is_none() {
            eprintln!(
                "{} is absent (run `cargo xtask dist`); real-file checks skipped",
                path.display()
            );
        }
        found
    }

    fn good_facts() -> Facts {
        Facts {
            cpu_type: macho::CPU_TYPE_ARM64,
            cpu_subtype: macho::CPU_SUBTYPE_ARM64_ALL,
            file_type: macho::MH_DYLIB,
            install_name: Some(SHIM_INSTALL_NAME.into()),
            dependencies: vec![
                Dependency {
                    command: "LC_LOAD_DYLIB",
                    path: "/usr/lib/libSystem.B.dylib".into(),
                },
                Dependency {
                    command: "LC_LOAD_DYLIB",
                    path: "/usr/lib/libobjc.A.dylib".into(),
                },
            ],
            rpaths: vec![],
            sections: vec![SectionFact {
                segment: "__DATA_CONST".into(),
                name: "__mod_init_func".into(),
                size: 8,
                section_type: macho::S_MOD_INIT_FUNC_POINTERS,
            }],
            has_routines: false,
            signature: Ok(Signature {
                ad_hoc: true,
                linker_signed: true,
                identifier: "libcapshim.dylib".into(),
                hash: "SHA-256",
                pages: 3,
                pages_verified: Ok(()),
            }),
            exports: vec!["___dso_handle".into(), "__mh_dylib_header".into()],
            build_version: Some((macho::PLATFORM_MACOS, 0x000b_0000, 0x001b_0000)),
        }
    }

    fn failing(facts: &Facts) -> Vec<&'static str> {
        check_shim(facts)
            .into_iter()
            .filter(|c| !c.ok)
            .map(|c| c.name)
            .collect()
    }

    #[test]
    fn good_facts_pass_every_check() {
        let checks = check_shim(&good_facts());
        assert!(checks.iter().all(|c| c.ok), "{checks:#?}");
        assert_eq!(checks.len(), 8);
    }

    #[test]
    fn each_rule_can_fail() {
        let mut f = good_facts();
        f.cpu_type = macho::CPU_TYPE_X86_64;
        assert_eq!(failing(&f), ["format"]);

        let mut f = good_facts();
        f.cpu_subtype = macho::CPU_SUBTYPE_ARM64E;
        assert_eq!(failing(&f), ["format"]);

        let mut f = good_facts();
        f.file_type = macho::MH_BUNDLE;
        assert_eq!(failing(&f), ["format"]);

        let mut f = good_facts();
        f.build_version = Some((macho::PLATFORM_MACOS, 0x000f_0000, 0x001b_0000));
        assert_eq!(failing(&f), ["platform"]);
        f.build_version = Some((macho::PLATFORM_IOS, 0x000b_0000, 0x001b_0000));
        assert_eq!(failing(&f), ["platform"]);
        f.build_version = None;
        assert_eq!(failing(&f), ["platform"]);

        let mut f = good_facts();
        f.install_name = Some("/work/target/release/deps/libcapshim.dylib".into());
        assert_eq!(failing(&f), ["install name"]);
        f.install_name = None;
        assert_eq!(failing(&f), ["install name"]);

        let mut f = good_facts();
        f.dependencies.push(Dependency {
            command: "LC_LOAD_DYLIB",
            path: "/opt/homebrew/lib/libiconv.2.dylib".into(),
        });
        assert_eq!(failing(&f), ["dependencies"]);
        f.dependencies[2].path = "@rpath/libfoo.dylib".into();
        assert_eq!(failing(&f), ["dependencies"]);
        f.dependencies[2].path = "/usr/lib/libobjc.A.dylib".into();
        assert_eq!(failing(&f), ["dependencies"]);
        f.dependencies.pop();
        assert!(failing(&f).is_empty());
        f.dependencies.clear();
        assert_eq!(failing(&f), ["dependencies"]);

        let mut f = good_facts();
        f.sections[0].size = 0;
        assert_eq!(failing(&f), ["initializer"]);
        f.sections.clear();
        assert_eq!(failing(&f), ["initializer"]);

        let mut f = good_facts();
        f.signature = Err("no LC_CODE_SIGNATURE load command".into());
        assert_eq!(failing(&f), ["signature"]);
        let mut f = good_facts();
        if let Ok(sig) = &mut f.signature {
            sig.pages_verified = Err("page 1 does not match".into());
        }
        assert_eq!(failing(&f), ["signature"]);

        let mut f = good_facts();
        f.exports
            .push("__RNvNtCsg55jX0GwzBC_3std9panicking11EMPTY_PANIC".into());
        assert_eq!(failing(&f), ["exports"]);
        let mut f = good_facts();
        f.exports.push("_rust_eh_personality".into());
        assert_eq!(failing(&f), ["exports"]);
        let mut f = good_facts();
        f.exports
            .push("__ZN4core3fmt5write17h0123456789abcdefE".into());
        assert_eq!(failing(&f), ["exports"]);

        let mut f = good_facts();
        f.sections.push(SectionFact {
            segment: "__DATA".into(),
            name: "__interpose".into(),
            size: 16,
            section_type: macho::S_REGULAR,
        });
        assert_eq!(failing(&f), ["no interpose"]);
    }

    #[test]
    fn no_exports_is_fine_and_init_offsets_count() {
        let mut f = good_facts();
        f.exports.clear();
        f.sections[0] = SectionFact {
            segment: "__TEXT".into(),
            name: "__init_offsets".into(),
            size: 4,
            section_type: macho::S_INIT_FUNC_OFFSETS,
        };
        assert!(failing(&f).is_empty());
    }

    #[test]
    fn mangling_detection() {
        assert!(is_mangled("__RNvCs1234_7capshim4init"));
        assert!(is_mangled(
            "__ZN7capshim4init10initialize17h48d04b73f4c308e2E"
        ));
        assert!(!is_mangled("___dso_handle"));
        assert!(!is_mangled("__mh_dylib_header"));
        assert!(!is_mangled("_rust_eh_personality"));
        assert!(!is_mangled("_Rfoo"));
    }

    #[test]
    fn linux_files_are_not_macho() {
        // This test binary is an ELF file on Linux (and a Mach-O executable on a Mac).
        let exe = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        if cfg!(target_os = "linux") {
            let error = inspect(&exe).unwrap_err();
            assert!(error.to_string().contains("not a Mach-O"), "{error}");
        }
        let so = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../target/release/libcapshim.so");
        if let Ok(so) = std::fs::read(so) {
            assert!(
                inspect(&so)
                    .unwrap_err()
                    .to_string()
                    .contains("not a Mach-O")
            );
        }
        assert!(matches!(
            inspect(b"plain text, not a binary"),
            Err(InspectError::NotMachO(_))
        ));
        assert!(inspect(&[]).is_err());
    }

    #[test]
    fn object_files_fail_the_shim_rules() {
        use object::write::Object;
        use object::{Architecture, BinaryFormat};
        let obj = Object::new(
            BinaryFormat::MachO,
            Architecture::X86_64,
            Endianness::Little,
        )
        .write()
        .unwrap();
        let facts = inspect(&obj).unwrap();
        let failed = failing(&facts);
        for rule in [
            "format",
            "install name",
            "dependencies",
            "initializer",
            "signature",
        ] {
            assert!(failed.contains(&rule), "{rule} should fail: {failed:?}");
        }
    }

    #[test]
    fn export_trie_parsing() {
        // root: not terminal, 2 children "_a" -> node A, "_b" -> node B; both terminal.
        let mut trie = vec![0u8, 2];
        trie.extend_from_slice(b"_a\0");
        let a_offset = trie.len();
        trie.push(0); // patched below
        trie.extend_from_slice(b"_b\0");
        trie.push(0);
        let node_a = trie.len();
        trie.extend_from_slice(&[2, 0, 0x10, 0]); // terminal: flags 0, addr 0x10; 0 children
        let node_b = trie.len();
        trie.extend_from_slice(&[2, 0, 0x20, 0]);
        trie[a_offset] = node_a as u8;
        trie[a_offset + 4] = node_b as u8;
        let mut names = read_export_trie(&trie).unwrap();
        names.sort();
        assert_eq!(names, ["_a", "_b"]);
        assert!(read_export_trie(&[]).unwrap().is_empty());
        // A child pointing at the root forms a cycle: rejected, not a hang.
        assert!(read_export_trie(&[0, 1, b'x', 0, 0]).is_err());
        assert!(read_export_trie(&[0, 1, b'x']).is_err());
    }

    #[test]
    fn real_dylib_passes_and_tampering_fails() {
        let Some(dylib) = built_dylib() else { return };
        let facts = inspect(&dylib).unwrap();
        let checks = check_shim(&facts);
        assert!(checks.iter().all(|c| c.ok), "{checks:#?}");

        // One flipped byte in the code is caught by the page hashes.
        let mut tampered = dylib.clone();
        tampered[0x2000] ^= 0xff;
        assert_eq!(failing(&inspect(&tampered).unwrap()), ["signature"]);

        // Truncating the signature away is caught too.
        let truncated = &dylib[..dylib.len() - 64];
        if let Ok(facts) = inspect(truncated) {
            assert!(failing(&facts).contains(&"signature"));
        }
    }
}
