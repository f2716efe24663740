//! The one number syntax every capshim setting accepts.

use std::fmt;

/// Why a byte string is not a capshim number.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NumberError {
    /// Nothing after an `0x` prefix.
    EmptyHex,
    /// A byte that is not an ASCII digit (or hex digit after `0x`).
    BadDigit,
    /// The value does not fit in 64 unsigned bits.
    Overflow,
}

impl fmt::Display for NumberError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            NumberError::EmptyHex => "0x must be followed by hex digits",
            NumberError::BadDigit => {
                "expected ASCII decimal digits or 0x followed by hex digits (no sign, spaces or suffix)"
            }
            NumberError::Overflow => "does not fit in 64 bits",
        })
    }
}

/// Parses ASCII decimal digits, or `0x`/`0X` followed by hex digits, into a `u64`.
///
/// Nothing else is accepted: no sign, no whitespace, no unit suffix, no `_`.
/// The empty string is [`NumberError::BadDigit`]; callers treat an empty
/// variable as absent before they get here.
///
/// # Errors
/// [`NumberError`] says which rule the input broke.
pub fn parse_u64(bytes: &[u8]) -> Result<u64, NumberError> {
    let (digits, radix) = match bytes {
        [b'0', b'x' | b'X', rest @ ..] => {
            if rest.is_empty() {
                return Err(NumberError::EmptyHex);
            }
            (rest, 16)
        }
        [] => return Err(NumberError::BadDigit),
        _ => (bytes, 10),
    };
    let mut value: u64 = 0;
    for &byte in digits {
        let digit = match (radix, byte) {
            (_, b'0'..=b'9') => byte - b'0',
            (16, b'a'..=b'f') => byte - b'a' + 10,
            (16, b'A'..=b'F') => byte - b'A' + 10,
            _ => return Err(NumberError::BadDigit),
        };
        value = value
            .checked_mul(radix)
            .and_then(|v| v.checked_add(u64::from(digit)))
            .ok_or(NumberError::Overflow)?;
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_decimal_and_hex_only() {
        assert_eq!(parse_u64(b"65536"), Ok(65536));
        assert_eq!(parse_u64(b"0x10000"), Ok(65536));
        assert_eq!(parse_u64(b"0XfFfF"), Ok(0xffff));
        assert_eq!(parse_u64(b"007"), Ok(7));
        assert_eq!(parse_u64(b"18446744073709551615"), Ok(u64::MAX));
        assert_eq!(
            parse_u64(b"18446744073709551616"),
            Err(NumberError::Overflow)
        );
        assert_eq!(
            parse_u64(b"0x1_0000_0000_0000_0000"),
            Err(NumberError::BadDigit)
        );
        assert_eq!(
            parse_u64(b"0x10000000000000000"),
            Err(NumberError::Overflow)
        );
        for bad in [
            &b""[..],
            b"+1",
            b"-1",
            b" 1",
            b"1 ",
            b"64k",
            b"1e3",
            b"0x",
            b"0xg",
            b"12a",
        ] {
            assert!(
                parse_u64(bad).is_err(),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        assert_eq!(parse_u64(b"0x"), Err(NumberError::EmptyHex));
    }
}
