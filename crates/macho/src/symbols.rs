//! Symbol visibility in a Mach-O object file (`MH_OBJECT`), edited in place: what ld64's
//! `-exported_symbols_list` does, for a linker (zig's) that ignores the list.

use std::collections::HashSet;

use object::macho;
use object::macho::MachHeader64;
use object::read::macho::{LoadCommandVariant, MachHeader};

/// Why an object file's symbols cannot be changed.
#[derive(Debug, thiserror::Error)]
pub enum HideError {
    /// The data is not a 64-bit Mach-O file.
    #[error("not a 64-bit Mach-O file")]
    NotMachO64(#[source] object::Error),
    /// A Mach-O file, but not an object file.
    #[error("not a Mach-O object file (MH_OBJECT)")]
    NotObject,
    /// A symbol's name offset points outside the string table.
    #[error("symbol {0} has a bad name offset")]
    BadName(usize),
    /// The load commands or the symbol table do not parse.
    #[error(transparent)]
    Malformed(#[from] object::Error),
}

/// Marks every external symbol defined in the 64-bit Mach-O object `data` and not in `keep`
/// as private external (`N_PEXT`), in place. Returns how many symbols it changed.
///
/// # Errors
/// [`HideError`] when `data` is not a 64-bit Mach-O object file or its symbols do not parse;
/// `data` is then unchanged.
pub fn hide_unlisted(data: &mut [u8], keep: &HashSet<&str>) -> Result<usize, HideError> {
    let offsets = {
        let view: &[u8] = data;
        let header =
            MachHeader64::<object::Endianness>::parse(view, 0).map_err(HideError::NotMachO64)?;
        let endian = header.endian()?;
        if header.filetype(endian) != macho::MH_OBJECT {
            return Err(HideError::NotObject);
        }
        let mut commands = header.load_commands(endian, view, 0)?;
        let mut offsets = Vec::new();
        while let Some(command) = commands.next()? {
            let LoadCommandVariant::Symtab(symtab) = command.variant()? else {
                continue;
            };
            let table = symtab.symbols::<MachHeader64<object::Endianness>, _>(endian, view)?;
            let first = symtab.symoff.get(endian) as usize;
            for (index, symbol) in table.iter().enumerate() {
                let n_type = symbol.n_type;
                let defined_external = n_type & macho::N_STAB == 0
                    && n_type & macho::N_EXT != 0
                    && n_type & macho::N_PEXT == 0
                    && n_type & macho::N_TYPE == macho::N_SECT;
                if !defined_external {
                    continue;
                }
                let name = table
                    .strings()
                    .get(symbol.n_strx.get(endian))
                    .map_err(|()| HideError::BadName(index))?;
                if !keep.contains(String::from_utf8_lossy(name).as_ref()) {
                    // struct nlist_64 { u32 n_strx; u8 n_type; ... }: 16 bytes each.
                    offsets.push(first + index * 16 + 4);
                }
            }
        }
        offsets
    };
    for &offset in &offsets {
        data[offset] |= macho::N_PEXT;
    }
    Ok(offsets.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use object::write::{Object, Symbol, SymbolSection};
    use object::{Architecture, BinaryFormat, Endianness, SymbolFlags, SymbolKind, SymbolScope};

    fn object_with(symbols: &[&str]) -> Vec<u8> {
        let mut obj = Object::new(
            BinaryFormat::MachO,
            Architecture::Aarch64,
            Endianness::Little,
        );
        let text = obj.section_id(object::write::StandardSection::Text);
        let offset = obj.append_section_data(text, &[0xc0, 0x03, 0x5f, 0xd6], 4);
        for name in symbols {
            obj.add_symbol(Symbol {
                name: name.as_bytes().to_vec(),
                value: offset,
                size: 4,
                kind: SymbolKind::Text,
                scope: SymbolScope::Dynamic,
                weak: false,
                section: SymbolSection::Section(text),
                flags: SymbolFlags::None,
            });
        }
        obj.write().unwrap()
    }

    fn exported(data: &[u8]) -> Vec<String> {
        use object::{Object as _, ObjectSymbol};
        let file = object::File::parse(data).unwrap();
        let mut names: Vec<String> = file
            .symbols()
            .filter(|s| s.is_global() && !s.is_undefined() && s.scope() == SymbolScope::Dynamic)
            .map(|s| s.name().unwrap().to_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn hides_everything_not_listed() {
        let mut data = object_with(&["keep_me", "_ZN4core3fmt5write", "rust_eh_personality"]);
        assert_eq!(
            exported(&data),
            ["__ZN4core3fmt5write", "_keep_me", "_rust_eh_personality"]
        );
        // Mach-O names carry a leading underscore (the writer adds it), as in rustc's list.
        let keep = HashSet::from(["_keep_me"]);
        assert_eq!(hide_unlisted(&mut data, &keep).unwrap(), 2);
        assert_eq!(exported(&data), ["_keep_me"]);
        // Idempotent.
        assert_eq!(hide_unlisted(&mut data, &keep).unwrap(), 0);
    }

    #[test]
    fn empty_list_hides_all() {
        let mut data = object_with(&["a", "b"]);
        assert_eq!(hide_unlisted(&mut data, &HashSet::new()).unwrap(), 2);
        assert!(exported(&data).is_empty());
    }

    #[test]
    fn refuses_non_objects() {
        let mut elf = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        assert!(hide_unlisted(&mut elf, &HashSet::new()).is_err());
    }
}
