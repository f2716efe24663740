//! Reading fields out of byte slices without panicking: a field that is not there is `None`.

/// The big-endian `u32` at `at` (code signature blobs are big-endian on every platform).
pub fn be32(data: &[u8], at: usize) -> Option<u32> {
    let bytes = data.get(at..at.checked_add(4)?)?;
    Some(u32::from_be_bytes(bytes.try_into().ok()?))
}

/// The `size` bytes at `offset` (as a load command gives them), if all are in `data`.
pub fn slice(data: &[u8], offset: u32, size: u32) -> Option<&[u8]> {
    let start = usize::try_from(offset).ok()?;
    let end = start.checked_add(usize::try_from(size).ok()?)?;
    data.get(start..end)
}

/// `bytes` up to its first NUL (a fixed-size C string field).
pub fn trim_nul(bytes: &[u8]) -> &[u8] {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    &bytes[..end]
}
