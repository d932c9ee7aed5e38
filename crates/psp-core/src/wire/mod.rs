//! The PSP layer-2 wire format: zero-copy views over byte buffers and value types.
//!
//! This module only knows byte layouts. It does not encrypt, verify ICVs, keep sequence state or
//! check replay: that is [`crate::protect`]. See docs/PROTOCOL.md for the byte diagrams.
//!
//! Every header has two faces, in the style of smoltcp:
//!
//! * a **view** (`Frame<T: AsRef<[u8]>>`, `Section<T>`) that reads and writes fields in place at
//!   fixed offsets kept in a private `field` module, and
//! * a **value type** (`Repr`, `SectionRepr`) with `parse`, `buffer_len` and `emit`, which cannot
//!   hold an illegal version, reserved flag, 24-bit overflow or padding length.
//!
//! # Panic contract
//!
//! * `new_unchecked` never panics; accessors on a view made with it may panic if the buffer is
//!   too short.
//! * After `check_len` (or `new_checked`) succeeded, **no accessor panics**, whatever the bytes.
//!   Untrusted input must go through `new_checked`. (Changing the flags byte with a setter after
//!   the check changes the layout; re-check before reading then.)
//! * `emit` panics only when the buffer is shorter than `buffer_len()`.
//! * `parse` never panics.
//!
//! The whole module is fuzzed (`fuzz/fuzz_targets/frame_parse.rs`); any panic on any input in a
//! checked path is a bug.

use core::fmt;

/// Declares a `Copy` enum over an integer type with an `Unknown(value)` variant and lossless
/// `From` conversions in both directions (smoltcp's `enum_with_unknown!`).
macro_rules! enum_with_unknown {
    (
        $( #[$enum_attr:meta] )*
        pub enum $name:ident($ty:ty) {
            $(
              $( #[$variant_attr:meta] )*
              $variant:ident = $value:expr
            ),+ $(,)?
        }
    ) => {
        #[derive(Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Clone, Copy)]
        $( #[$enum_attr] )*
        pub enum $name {
            $(
              $( #[$variant_attr] )*
              $variant
            ),*,
            /// A value this implementation does not know.
            Unknown($ty),
        }

        impl ::core::convert::From<$ty> for $name {
            fn from(value: $ty) -> Self {
                match value {
                    $( value if value == $value => $name::$variant ),*,
                    other => $name::Unknown(other),
                }
            }
        }

        impl ::core::convert::From<$name> for $ty {
            fn from(value: $name) -> Self {
                match value {
                    $( $name::$variant => $value ),*,
                    $name::Unknown(other) => other,
                }
            }
        }
    };
}
pub(crate) use enum_with_unknown;

pub mod psp;

pub use psp::{
    ETHERNET_HEADER_LEN, ETHERTYPE_PSP, Flags, Frame, HEADER_LEN, MAX_HEADER_LEN, MAX_PADDING,
    MIN_FRAME_LEN, Protocol, Repr, SECTION_HEADER_LEN, SIGNATURE_LEN, Section, SectionRepr,
    SecurityNumber, Seq, Version,
};

/// A wire-format error: the bytes are not a well-formed PSP frame or section.
///
/// Local detail only; the peer never learns which one (see [`crate::protect::OpenError`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Error {
    /// The buffer is shorter than the fields it must hold.
    Truncated,
    /// The EtherType is not 0x1982 (PSP).
    NotPsp,
    /// The version field is not 0.
    BadVersion,
    /// The reserved flag (0x04) is set.
    ReservedFlag,
    /// The padding size exceeds 64 bytes or the section.
    BadPadding,
    /// A value does not fit its field (e.g. a security number wider than 24 bits).
    BadValue,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Truncated => "truncated PSP frame",
            Self::NotPsp => "not a PSP frame (EtherType is not 0x1982)",
            Self::BadVersion => "unsupported PSP version",
            Self::ReservedFlag => "reserved PSP flag set",
            Self::BadPadding => "bad PSP padding size",
            Self::BadValue => "value does not fit its PSP field",
        })
    }
}

impl core::error::Error for Error {}

/// Result alias for wire parsing.
pub type Result<T> = core::result::Result<T, Error>;
