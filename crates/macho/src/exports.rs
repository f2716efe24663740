//! The names in a dyld export trie: what other images may bind to.

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
}
