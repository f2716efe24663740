//! The parameter count of a GGUF model file, read from its tensor table: what llama-bench
//! reports as `model_n_params` (llama.cpp's model loader sums every tensor's element count),
//! known before any run. Layout: llama.cpp's `gguf` format, version 2 and 3 (magic `GGUF`, a
//! u32 version, u64 tensor and key-value counts, the key-values, then per tensor its name, a u32
//! dimension count, u64 dimensions, a u32 type and a u64 offset; little-endian).

use std::io::{BufReader, Read, Seek};
use std::path::Path;

/// Limits beyond which a header is taken as not a model (a damaged or foreign file), so that a
/// wrong count never makes the reader loop or allocate for long.
const MAX_COUNT: u64 = 1 << 24;
const MAX_STRING: u64 = 1 << 24;

fn u32_of(r: &mut impl Read) -> Option<u32> {
    let mut b = [0u8; 4];
    r.read_exact(&mut b).ok()?;
    Some(u32::from_le_bytes(b))
}

fn u64_of(r: &mut impl Read) -> Option<u64> {
    let mut b = [0u8; 8];
    r.read_exact(&mut b).ok()?;
    Some(u64::from_le_bytes(b))
}

fn skip(r: &mut (impl Read + Seek), bytes: u64) -> Option<()> {
    r.seek_relative(i64::try_from(bytes).ok()?).ok()
}

fn skip_string(r: &mut (impl Read + Seek)) -> Option<()> {
    let len = u64_of(r)?;
    (len <= MAX_STRING).then_some(())?;
    skip(r, len)
}

/// Skips one key-value's value of GGUF type `kind`.
fn skip_value(r: &mut (impl Read + Seek), kind: u32) -> Option<()> {
    let fixed = |kind: u32| match kind {
        0 | 1 | 7 => Some(1),
        2 | 3 => Some(2),
        4..=6 => Some(4),
        10..=12 => Some(8),
        _ => None,
    };
    match kind {
        8 => skip_string(r),
        9 => {
            let item = u32_of(r)?;
            let n = u64_of(r)?;
            (n <= MAX_COUNT).then_some(())?;
            match fixed(item) {
                Some(size) => skip(r, n * size),
                None => (0..n).try_for_each(|_| skip_value(r, item)),
            }
        }
        _ => skip(r, fixed(kind)?),
    }
}

/// The model's parameter count (the sum of its tensors' element counts), or `None` when `path`
/// is not a readable GGUF file of version 2 or 3.
pub fn n_params(path: &Path) -> Option<u64> {
    let mut r = BufReader::new(std::fs::File::open(path).ok()?);
    let mut magic = [0u8; 4];
    r.read_exact(&mut magic).ok()?;
    let version = u32_of(&mut r)?;
    (magic == *b"GGUF" && (2..=3).contains(&version)).then_some(())?;
    let tensors = u64_of(&mut r)?;
    let pairs = u64_of(&mut r)?;
    (tensors <= MAX_COUNT && pairs <= MAX_COUNT).then_some(())?;
    for _ in 0..pairs {
        skip_string(&mut r)?;
        let kind = u32_of(&mut r)?;
        skip_value(&mut r, kind)?;
    }
    let mut total: u64 = 0;
    for _ in 0..tensors {
        skip_string(&mut r)?;
        let dims = u32_of(&mut r)?;
        (dims <= 8).then_some(())?;
        let mut elements: u64 = 1;
        for _ in 0..dims {
            elements = elements.checked_mul(u64_of(&mut r)?)?;
        }
        u32_of(&mut r)?;
        u64_of(&mut r)?;
        total = total.checked_add(elements)?;
    }
    Some(total)
}

/// A GGUF file of version 3 holding one key-value (a string) and tensors of `shapes`, for tests.
#[cfg(test)]
pub fn write_test_model(path: &Path, shapes: &[&[u64]]) {
    let mut b: Vec<u8> = b"GGUF".to_vec();
    b.extend(3u32.to_le_bytes());
    b.extend((shapes.len() as u64).to_le_bytes());
    b.extend(1u64.to_le_bytes());
    let string = |b: &mut Vec<u8>, s: &str| {
        b.extend((s.len() as u64).to_le_bytes());
        b.extend(s.as_bytes());
    };
    string(&mut b, "general.architecture");
    b.extend(8u32.to_le_bytes());
    string(&mut b, "llama");
    for (i, shape) in shapes.iter().enumerate() {
        string(&mut b, &format!("t{i}"));
        b.extend((shape.len() as u32).to_le_bytes());
        for d in *shape {
            b.extend(d.to_le_bytes());
        }
        b.extend(0u32.to_le_bytes());
        b.extend(0u64.to_le_bytes());
    }
    std::fs::write(path, b).unwrap();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_parameter_count_is_the_sum_of_the_tensors_elements() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.gguf");
        write_test_model(&path, &[&[10, 20], &[5], &[2, 3, 4]]);
        assert_eq!(n_params(&path), Some(200 + 5 + 24));
    }

    #[test]
    fn a_file_that_is_not_gguf_has_no_count() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.gguf");
        std::fs::write(&path, b"GGUF fake model").unwrap();
        assert_eq!(n_params(&path), None);
        std::fs::write(&path, b"not a model at all").unwrap();
        assert_eq!(n_params(&path), None);
        assert_eq!(n_params(&dir.path().join("missing.gguf")), None);
    }
}
