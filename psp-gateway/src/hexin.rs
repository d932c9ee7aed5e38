//! Lenient hex input: digits with optional spaces, colons, dashes, newlines and a `0x` prefix.

use core::fmt;

/// Why a hex string was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum HexError {
    /// A character that is neither a hex digit nor a separator, at this byte offset.
    BadChar(usize),
    /// An odd number of hex digits.
    OddLength,
    /// No digits at all.
    Empty,
}

impl fmt::Display for HexError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::BadChar(at) => write!(f, "not a hex digit at offset {at}"),
            Self::OddLength => f.write_str("odd number of hex digits"),
            Self::Empty => f.write_str("no hex digits"),
        }
    }
}

impl core::error::Error for HexError {}

/// Decodes `s`, ignoring separators (whitespace, `:`, `-`) and a leading `0x`.
///
/// # Errors
/// [`HexError`] on a bad character, an odd digit count or no digits.
pub fn decode(s: &str) -> Result<Vec<u8>, HexError> {
    let t = s.trim();
    let (t, skipped) = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(rest) => (rest, s.len() - rest.len()),
        None => (t, s.len() - s.trim_start().len()),
    };
    let mut out = Vec::with_capacity(t.len() / 2);
    let mut high: Option<u8> = None;
    for (i, c) in t.bytes().enumerate() {
        let v = match c {
            b'0'..=b'9' => c - b'0',
            b'a'..=b'f' => c - b'a' + 10,
            b'A'..=b'F' => c - b'A' + 10,
            b' ' | b'\t' | b'\r' | b'\n' | b':' | b'-' => continue,
            _ => return Err(HexError::BadChar(i + skipped)),
        };
        match high.take() {
            Some(h) => out.push(h << 4 | v),
            None => high = Some(v),
        }
    }
    if high.is_some() {
        return Err(HexError::OddLength);
    }
    if out.is_empty() {
        return Err(HexError::Empty);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_with_separators() {
        assert_eq!(decode("0x01:02 0a-FF\n").unwrap(), vec![1, 2, 10, 255]);
        assert_eq!(decode("  abcd").unwrap(), vec![0xab, 0xcd]);
    }

    #[test]
    fn rejects_bad_input() {
        assert_eq!(decode("abc"), Err(HexError::OddLength));
        assert_eq!(decode("   "), Err(HexError::Empty));
        assert_eq!(decode("zz"), Err(HexError::BadChar(0)));
        assert_eq!(decode("  0g"), Err(HexError::BadChar(3)));
    }
}
