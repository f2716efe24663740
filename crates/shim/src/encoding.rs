//! Objective-C method type encodings, read far enough to check that a method has the C
//! signature a replacement implements before the shim installs it.
//!
//! An encoding is the return type followed by each argument's type (`self` and `_cmd`
//! included), each type optionally preceded by qualifiers and followed by a frame offset, e.g.
//! `B24@0:8q16` (Apple, `-(BOOL)supportsFamily:(MTLGPUFamily)`) or `C24@0:8q16` (GCC).

/// A method's return type and argument types, each as its leading type code (`B`, `Q`, `@`,
/// `{`…), qualifiers and offsets dropped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Signature {
    /// The return type's code.
    pub returns: u8,
    /// Each argument's type code, `self` (`@`) and `_cmd` (`:`) first.
    pub arguments: Vec<u8>,
}

/// Reads `encoding`; `None` when it is empty or malformed (unbalanced brackets).
pub fn parse(encoding: &[u8]) -> Option<Signature> {
    let mut rest = encoding;
    let mut codes = Vec::new();
    while !rest.is_empty() {
        let (code, after) = one_type(rest)?;
        codes.push(code);
        rest = skip_offset(after);
    }
    let (&returns, arguments) = codes.split_first()?;
    Some(Signature {
        returns,
        arguments: arguments.to_vec(),
    })
}

/// Type qualifiers (const, in, inout, out, bycopy, byref, oneway, atomic) that may precede a type.
const QUALIFIERS: &[u8] = b"rnNoORVA";

/// The leading code of the first type in `s` and what follows it.
fn one_type(s: &[u8]) -> Option<(u8, &[u8])> {
    let start = s.iter().position(|b| !QUALIFIERS.contains(b))?;
    let s = &s[start..];
    let code = *s.first()?;
    let after = match code {
        b'{' => skip_nested(s, b'{', b'}')?,
        b'(' => skip_nested(s, b'(', b')')?,
        b'[' => skip_nested(s, b'[', b']')?,
        b'^' => one_type(&s[1..])?.1,
        b'@' => skip_object(&s[1..]),
        b'b' => skip_digits(&s[1..]),
        _ => &s[1..],
    };
    Some((code, after))
}

/// After `@`: an optional `?` (a block) or `"ClassName"`.
fn skip_object(s: &[u8]) -> &[u8] {
    match s.first() {
        Some(b'?') => &s[1..],
        Some(b'"') => match s[1..].iter().position(|&b| b == b'"') {
            Some(end) => &s[end + 2..],
            None => &[],
        },
        _ => s,
    }
}

/// Skips a bracketed type starting at `s[0] == open`; `None` when it never closes.
fn skip_nested(s: &[u8], open: u8, close: u8) -> Option<&[u8]> {
    let mut depth = 0usize;
    for (i, &b) in s.iter().enumerate() {
        if b == open {
            depth += 1;
        } else if b == close {
            depth -= 1;
            if depth == 0 {
                return Some(&s[i + 1..]);
            }
        }
    }
    None
}

fn skip_digits(s: &[u8]) -> &[u8] {
    let end = s
        .iter()
        .position(|b| !b.is_ascii_digit())
        .unwrap_or(s.len());
    &s[end..]
}

/// A frame offset after a type: digits, optionally signed (GCC writes `+` for register
/// arguments on some targets, `-` for negative offsets).
fn skip_offset(s: &[u8]) -> &[u8] {
    match s.first() {
        Some(b'+' | b'-') => skip_digits(&s[1..]),
        _ => skip_digits(s),
    }
}

/// Type codes of integers that fit in one byte: `char`, `unsigned char`, C99 `bool` (Apple's
/// `BOOL` on arm64 is `B`, on x86_64 and in GCC's runtime `c`/`C`).
pub const ONE_BYTE_INTEGERS: &[u8] = b"cCB";
/// Type codes of 64-bit integers on LP64 targets: `long`, `unsigned long` (GCC), `long long`,
/// `unsigned long long` (Apple encodes `NSUInteger` and `uint64_t` as `Q`).
pub const EIGHT_BYTE_INTEGERS: &[u8] = b"lLqQ";
/// Return codes a pointer-sized integer register can carry: void, integers, objects,
/// classes, selectors and pointers (not structs, unions, arrays or floating point).
pub const SCALAR_RETURNS: &[u8] = b"vcCBsSiIlLqQ@#:^*";

#[cfg(test)]
mod tests {
    use super::*;

    fn sig(returns: u8, arguments: &[u8]) -> Option<Signature> {
        Some(Signature {
            returns,
            arguments: arguments.to_vec(),
        })
    }

    #[test]
    fn reads_apple_and_gcc_encodings() {
        assert_eq!(parse(b"B24@0:8q16"), sig(b'B', b"@:q"));
        assert_eq!(parse(b"C24@0:8q16"), sig(b'C', b"@:q"));
        assert_eq!(parse(b"Q16@0:8"), sig(b'Q', b"@:"));
        assert_eq!(parse(b"v16@0:8"), sig(b'v', b"@:"));
        assert_eq!(parse(b"Vv16@0:8"), sig(b'v', b"@:"));
        assert_eq!(parse(b"r*16@0:8"), sig(b'*', b"@:"));
        assert_eq!(parse(b"C24@0:8l+16"), sig(b'C', b"@:l"));
    }

    #[test]
    fn skips_compound_types_whole() {
        assert_eq!(
            parse(b"{CGSize=dd}16@0:8"),
            sig(b'{', b"@:"),
            "a struct return is one type"
        );
        assert_eq!(
            parse(b"v40@0:8{A={B=ii}[4c]}16^{C=i}32"),
            sig(b'v', b"@:{^")
        );
        assert_eq!(parse(b"@\"NSString\"16@0:8"), sig(b'@', b"@:"));
        assert_eq!(parse(b"v24@0:8@?16"), sig(b'v', b"@:@"));
        assert_eq!(parse(b"v20@0:8b4"), sig(b'v', b"@:b"));
    }

    #[test]
    fn refuses_what_it_cannot_read() {
        assert_eq!(parse(b""), None);
        assert_eq!(parse(b"{unclosed16@0:8"), None);
        assert_eq!(parse(b"rn"), None);
    }

    proptest::proptest! {
        #[test]
        fn never_panics(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..64)) {
            let _ = parse(&bytes);
        }
    }
}
