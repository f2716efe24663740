//! dyld's interposing tuples in a thin 64-bit Mach-O library: the `__DATA,__interpose`
//! section holds (replacement, replacee) pointer pairs, the replacement a rebase to the
//! library's own function and the replacee a bind to the function it stands in for
//! (docs/apple-runtime.md, "The exec guard"). `cargo xtask dist` checks that the guard library
//! names exactly `execve`, `posix_spawn` and `posix_spawnp` there, and libcapshim nothing.
//!
//! The binds are read from the `LC_DYLD_INFO(_ONLY)` bind opcodes (what zig writes for a
//! macOS 11 minimum); a file with chained fixups instead is reported as not read, so the
//! check fails rather than guess.

use object::Endianness;
use object::macho::{self, MachHeader64};
use object::read::macho::{LoadCommandVariant, MachHeader, Section, Segment};

/// One tuple of the section, in its order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tuple {
    /// The symbol bound in the replacee slot (e.g. `_execve`), if that slot is a bind.
    pub replacee: Option<String>,
    /// Whether the replacement slot is bound to a symbol rather than pointing into the
    /// library (a rebase): it should not be.
    pub replacement_bound: bool,
}

/// The interposing tuples of a thin 64-bit Mach-O: `Ok(None)` when it has no
/// `__interpose` section.
///
/// # Errors
/// A reason, when the file does not parse, the section's size is not a whole number of
/// tuples, or the binds cannot be read (chained fixups, a malformed opcode stream).
pub fn interpose_tuples(data: &[u8]) -> Result<Option<Vec<Tuple>>, String> {
    let header = MachHeader64::<Endianness>::parse(data, 0).map_err(|e| e.to_string())?;
    let endian = header.endian().map_err(|e| e.to_string())?;
    let mut commands = header
        .load_commands(endian, data, 0)
        .map_err(|e| e.to_string())?;
    let mut segments = Vec::new();
    let mut section = None;
    let mut binds = None;
    while let Some(command) = commands.next().map_err(|e| e.to_string())? {
        match command.variant().map_err(|e| e.to_string())? {
            LoadCommandVariant::Segment64(segment, section_data) => {
                segments.push(segment.vmaddr(endian));
                for s in segment
                    .sections(endian, section_data)
                    .map_err(|e| e.to_string())?
                {
                    if s.name() == b"__interpose" {
                        section = Some((s.addr(endian), s.size(endian)));
                    }
                }
            }
            LoadCommandVariant::DyldInfo(info) => {
                let (off, size) = (info.bind_off.get(endian), info.bind_size.get(endian));
                binds = Some(
                    data.get(off as usize..off as usize + size as usize)
                        .ok_or("the bind opcodes lie outside the file")?,
                );
            }
            _ if command.cmd() == macho::LC_DYLD_CHAINED_FIXUPS => {
                return Err("chained fixups: the binds are not read".into());
            }
            _ => {}
        }
    }
    let Some((addr, size)) = section else {
        return Ok(None);
    };
    if size % 16 != 0 {
        return Err(format!(
            "__interpose is {size} bytes, not whole 16-byte tuples"
        ));
    }
    let bound = read_binds(binds.unwrap_or_default(), &segments)?;
    let slot = |at: u64| bound.iter().find(|(a, _)| *a == at).map(|(_, n)| n.clone());
    Ok(Some(
        (0..size / 16)
            .map(|i| Tuple {
                replacee: slot(addr + i * 16 + 8),
                replacement_bound: slot(addr + i * 16).is_some(),
            })
            .collect(),
    ))
}

fn uleb(bytes: &[u8], at: &mut usize) -> Result<u64, String> {
    let mut value = 0u64;
    let mut shift = 0;
    loop {
        let byte = *bytes.get(*at).ok_or("a bind opcode runs past its end")?;
        *at += 1;
        if shift < 64 {
            value |= u64::from(byte & 0x7f) << shift;
        }
        shift += 7;
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
}

/// Every (address, symbol) the non-lazy bind opcodes bind (mach-o/loader.h `BIND_OPCODE_*`).
fn read_binds(ops: &[u8], segments: &[u64]) -> Result<Vec<(u64, String)>, String> {
    const POINTER: u64 = 8;
    let mut out = Vec::new();
    let mut at = 0;
    let mut symbol = String::new();
    let mut address: Option<u64> = None;
    let mut bind = |address: &mut Option<u64>, symbol: &str, step: u64| {
        let a = address.ok_or("a bind before its segment is set")?;
        out.push((a, symbol.to_owned()));
        *address = Some(a.wrapping_add(step));
        Ok::<(), String>(())
    };
    while at < ops.len() {
        let byte = ops[at];
        at += 1;
        let immediate = byte & macho::BIND_IMMEDIATE_MASK;
        match byte & macho::BIND_OPCODE_MASK {
            macho::BIND_OPCODE_DONE => {}
            macho::BIND_OPCODE_SET_DYLIB_ORDINAL_IMM
            | macho::BIND_OPCODE_SET_DYLIB_SPECIAL_IMM
            | macho::BIND_OPCODE_SET_TYPE_IMM => {}
            macho::BIND_OPCODE_SET_DYLIB_ORDINAL_ULEB | macho::BIND_OPCODE_SET_ADDEND_SLEB => {
                uleb(ops, &mut at)?;
            }
            macho::BIND_OPCODE_SET_SYMBOL_TRAILING_FLAGS_IMM => {
                let end = ops[at..]
                    .iter()
                    .position(|&b| b == 0)
                    .ok_or("a symbol name without its NUL")?;
                symbol = String::from_utf8_lossy(&ops[at..at + end]).into_owned();
                at += end + 1;
            }
            macho::BIND_OPCODE_SET_SEGMENT_AND_OFFSET_ULEB => {
                let base = segments
                    .get(usize::from(immediate))
                    .ok_or("a bind in a segment that does not exist")?;
                address = Some(base.wrapping_add(uleb(ops, &mut at)?));
            }
            macho::BIND_OPCODE_ADD_ADDR_ULEB => {
                let add = uleb(ops, &mut at)?;
                address = address.map(|a| a.wrapping_add(add));
            }
            macho::BIND_OPCODE_DO_BIND => bind(&mut address, &symbol, POINTER)?,
            macho::BIND_OPCODE_DO_BIND_ADD_ADDR_ULEB => {
                let add = uleb(ops, &mut at)?;
                bind(&mut address, &symbol, POINTER.wrapping_add(add))?;
            }
            macho::BIND_OPCODE_DO_BIND_ADD_ADDR_IMM_SCALED => {
                bind(
                    &mut address,
                    &symbol,
                    POINTER + u64::from(immediate) * POINTER,
                )?;
            }
            macho::BIND_OPCODE_DO_BIND_ULEB_TIMES_SKIPPING_ULEB => {
                let count = uleb(ops, &mut at)?;
                let skip = uleb(ops, &mut at)?;
                for _ in 0..count.min(1 << 16) {
                    bind(&mut address, &symbol, POINTER.wrapping_add(skip))?;
                }
            }
            other => return Err(format!("bind opcode {other:#x} is not read")),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A dylib whose segment 0 (`__DATA` at 0x4000) holds `__interpose` of `size` bytes at
    /// its start, with `ops` as its bind opcodes.
    fn library(size: u64, ops: &[u8]) -> Vec<u8> {
        let commands = 152 + 48;
        let mut out = Vec::new();
        for w in [
            0xfeed_facfu32,
            macho::CPU_TYPE_ARM64,
            0,
            macho::MH_DYLIB,
            2,
            commands,
            0,
            0,
        ] {
            out.extend(w.to_le_bytes());
        }
        let name = |n: &str| {
            let mut b = n.as_bytes().to_vec();
            b.resize(16, 0);
            b
        };
        out.extend(macho::LC_SEGMENT_64.to_le_bytes());
        out.extend(152u32.to_le_bytes());
        out.extend(name("__DATA"));
        for q in [0x4000u64, 0x4000, 0, 0] {
            out.extend(q.to_le_bytes());
        }
        out.extend([3u32, 3, 1, 0].iter().flat_map(|w| w.to_le_bytes()));
        out.extend(name("__interpose"));
        out.extend(name("__DATA"));
        out.extend(0x4000u64.to_le_bytes());
        out.extend(size.to_le_bytes());
        out.extend([0u8; 32]);
        let bind_off = 32 + commands;
        out.extend(macho::LC_DYLD_INFO_ONLY.to_le_bytes());
        out.extend(48u32.to_le_bytes());
        for w in [0, 0, bind_off, ops.len() as u32, 0, 0, 0, 0, 0, 0] {
            out.extend(w.to_le_bytes());
        }
        out.extend(ops);
        out
    }

    fn symbol(name: &str) -> Vec<u8> {
        let mut b = vec![macho::BIND_OPCODE_SET_SYMBOL_TRAILING_FLAGS_IMM];
        b.extend(name.as_bytes());
        b.push(0);
        b
    }

    #[test]
    fn each_tuple_names_the_symbol_bound_in_its_second_slot() {
        let mut ops = vec![macho::BIND_OPCODE_SET_DYLIB_ORDINAL_IMM | 1];
        ops.extend(symbol("_execve"));
        ops.extend([macho::BIND_OPCODE_SET_SEGMENT_AND_OFFSET_ULEB, 8]);
        ops.push(macho::BIND_OPCODE_DO_BIND);
        ops.extend(symbol("_posix_spawn"));
        ops.extend([macho::BIND_OPCODE_ADD_ADDR_ULEB, 8]);
        ops.push(macho::BIND_OPCODE_DO_BIND);
        ops.extend(symbol("_posix_spawnp"));
        // At 32 now: the third tuple's replacement slot, then its replacee (skip 0 + 8).
        ops.extend([macho::BIND_OPCODE_ADD_ADDR_ULEB, 8]);
        ops.push(macho::BIND_OPCODE_DO_BIND);
        ops.push(macho::BIND_OPCODE_DONE);
        let tuples = interpose_tuples(&library(48, &ops)).unwrap().unwrap();
        let names: Vec<_> = tuples.iter().map(|t| t.replacee.as_deref()).collect();
        assert_eq!(
            names,
            [Some("_execve"), Some("_posix_spawn"), Some("_posix_spawnp")]
        );
        assert!(tuples.iter().all(|t| !t.replacement_bound));

        // A bind in a replacement slot is seen; a slot with no bind is None.
        let mut ops = symbol("_execve");
        ops.extend([macho::BIND_OPCODE_SET_SEGMENT_AND_OFFSET_ULEB, 0]);
        ops.push(macho::BIND_OPCODE_DO_BIND);
        let tuples = interpose_tuples(&library(16, &ops)).unwrap().unwrap();
        assert_eq!(
            tuples,
            [Tuple {
                replacee: None,
                replacement_bound: true
            }]
        );
    }

    #[test]
    fn odd_sections_and_streams_are_errors() {
        assert!(interpose_tuples(&library(20, &[])).is_err());
        assert!(interpose_tuples(&library(16, &[macho::BIND_OPCODE_DO_BIND])).is_err());
        assert!(interpose_tuples(&library(16, &[macho::BIND_OPCODE_THREADED])).is_err());
        assert!(interpose_tuples(&library(16, &[macho::BIND_OPCODE_ADD_ADDR_ULEB, 0x80])).is_err());
    }

    #[test]
    fn a_library_without_the_section_has_no_tuples() {
        assert_eq!(
            interpose_tuples(crate::testdata::LINKED_DYLIB).unwrap(),
            None
        );
        assert!(interpose_tuples(b"\x7fELF").is_err());
    }
}
