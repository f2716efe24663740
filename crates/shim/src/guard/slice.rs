//! Whether the program a file holds can load capshim's library, from the file's first bytes
//! alone: which slice of a Mach-O file runs on an Apple Silicon Mac, and the interpreter of a
//! `#!` script. The rules, with their sources in dyld, are in docs/apple-runtime.md
//! ("The exec guard"):
//!
//! - A Mac launches the best slice by `{arm64e, arm64, x86_64}` (dyld's
//!   `GradedArchitectures::launch_macAppleSilicon`); an arm64e process loads only arm64e
//!   libraries (`load_arm64e`), an x86_64 one (Rosetta) only x86_64 ones (`load_mac`), and
//!   dyld terminates a process whose inserted library it cannot load. capshim's libraries are
//!   arm64 only.
//! - So a file with an arm64 slice and no arm64e slice [`Verdict::Loads`]; a file with an
//!   arm64e slice and no arm64 slice (Apple's programs: x86_64 + arm64e) or only x86_64
//!   [`Verdict::CannotLoad`]; a file with both arm64 and arm64e slices, or anything else,
//!   is [`Verdict::Unsure`], and the guard changes nothing.
//!
//! Nothing here allocates: it runs in a forked child (see [`super`]).

/// The most bytes of a file the decision reads: the Mach-O or fat header and its slice
/// table, or a script's `#!` line. A fat table longer than this is [`Verdict::Unsure`].
pub const HEADER_BYTES: usize = 1024;

/// A test-only marker for Linux, where no file is an arm64e Mach-O: a file whose first
/// [`HEADER_BYTES`] bytes contain it counts as [`Verdict::CannotLoad`], so the guard's
/// interposition can be tested end to end. Not compiled into the macOS build.
#[cfg(not(target_vendor = "apple"))]
pub const TEST_CANNOT_LOAD_MARKER: &[u8] = b"capshim-guard-test: cannot load";

/// What the first bytes of a file say about the program.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The slice that runs is arm64: capshim's library loads.
    Loads,
    /// The slice that runs cannot load capshim's arm64 library: arm64e (no arm64 slice) or
    /// x86_64 only.
    CannotLoad,
    /// A `#!` script: the interpreter's path is `header[start..end]`, to be judged in turn.
    Script {
        /// First byte of the interpreter's path.
        start: usize,
        /// One past its last byte.
        end: usize,
    },
    /// Anything else (too short, another format, an unknown slice, a table too long, a fat
    /// file with both arm64 and arm64e): the guard passes the call through unchanged.
    Unsure,
}

const CPU_TYPE_ARM64: u32 = 0x0100_000c;
const CPU_TYPE_X86_64: u32 = 0x0100_0007;
/// The capability bits of `cpusubtype` (`CPU_SUBTYPE_MASK`), among them arm64e's pointer
/// authentication ABI version.
const CPU_SUBTYPE_MASK: u32 = 0xff00_0000;
const CPU_SUBTYPE_ARM64_ALL: u32 = 0;
const CPU_SUBTYPE_ARM64_V8: u32 = 1;
const CPU_SUBTYPE_ARM64E: u32 = 2;

/// The slices a file holds, by the architectures that matter here.
#[derive(Clone, Copy, Default)]
struct Slices {
    arm64: bool,
    arm64e: bool,
    x86_64: bool,
    other: bool,
}

impl Slices {
    fn add(&mut self, cputype: u32, cpusubtype: u32) {
        match (cputype, cpusubtype & !CPU_SUBTYPE_MASK) {
            (CPU_TYPE_ARM64, CPU_SUBTYPE_ARM64_ALL | CPU_SUBTYPE_ARM64_V8) => self.arm64 = true,
            (CPU_TYPE_ARM64, CPU_SUBTYPE_ARM64E) => self.arm64e = true,
            (CPU_TYPE_X86_64, _) => self.x86_64 = true,
            _ => self.other = true,
        }
    }

    fn verdict(self) -> Verdict {
        match (self.arm64, self.arm64e, self.x86_64) {
            (true, false, _) => Verdict::Loads,
            (false, true, _) => Verdict::CannotLoad,
            (false, false, true) => Verdict::CannotLoad,
            _ => Verdict::Unsure,
        }
    }
}

fn be32(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
}

fn le32(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
}

/// Judges a program from its file's first bytes (`header`, at most [`HEADER_BYTES`] of them).
pub fn verdict(header: &[u8]) -> Verdict {
    #[cfg(not(target_vendor = "apple"))]
    if header
        .windows(TEST_CANNOT_LOAD_MARKER.len())
        .any(|w| w == TEST_CANNOT_LOAD_MARKER)
    {
        return Verdict::CannotLoad;
    }
    if let Some(rest) = header.strip_prefix(b"#!") {
        return script(header, rest);
    }
    match (be32(header, 0), le32(header, 0)) {
        // A thin 64-bit Mach-O, little-endian on disk (arm64 and x86_64 both are).
        (_, Some(0xfeed_facf)) => {
            let mut slices = Slices::default();
            match (le32(header, 4), le32(header, 8)) {
                (Some(cputype), Some(cpusubtype)) => slices.add(cputype, cpusubtype),
                _ => return Verdict::Unsure,
            }
            slices.verdict()
        }
        // A universal file: a big-endian table of slices, 32- or 64-bit entries.
        (Some(magic @ (0xcafe_babe | 0xcafe_babf)), _) => {
            let entry = if magic == 0xcafe_babe { 20 } else { 32 };
            let Some(count) = be32(header, 4) else {
                return Verdict::Unsure;
            };
            let count = count as usize;
            // Java class files share 0xcafebabe; their "count" (a version) is 45 or more,
            // and a table that does not fit in what was read cannot be judged.
            if count == 0 || 8 + count * entry > header.len() {
                return Verdict::Unsure;
            }
            let mut slices = Slices::default();
            for i in 0..count {
                let at = 8 + i * entry;
                match (be32(header, at), be32(header, at + 4)) {
                    (Some(cputype), Some(cpusubtype)) => slices.add(cputype, cpusubtype),
                    _ => return Verdict::Unsure,
                }
            }
            slices.verdict()
        }
        _ => Verdict::Unsure,
    }
}

/// The interpreter of a `#!` line: after optional blanks, the path runs to the next blank or
/// the end of the line, which must be within `header` (as the kernel reads a bounded line).
fn script(header: &[u8], rest: &[u8]) -> Verdict {
    let Some(line_end) = rest.iter().position(|&b| b == b'\n') else {
        return Verdict::Unsure;
    };
    let line = &rest[..line_end];
    let Some(start) = line.iter().position(|&b| b != b' ' && b != b'\t') else {
        return Verdict::Unsure;
    };
    let len = line[start..]
        .iter()
        .position(|&b| b == b' ' || b == b'\t' || b == b'\r')
        .unwrap_or(line.len() - start);
    let start = start + 2;
    if header[start] != b'/' {
        // A relative interpreter resolves against the caller's folder: not judged.
        return Verdict::Unsure;
    }
    Verdict::Script {
        start,
        end: start + len,
    }
}
