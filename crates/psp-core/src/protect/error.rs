//! Why sealing failed ([`SealError`]) and why a received frame was dropped ([`DropReason`],
//! carried by [`OpenError`]).

use core::fmt;

use crate::crypto::CryptoError;
use crate::replay::ReplayError;
use crate::wire;

/// Why sealing failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SealError {
    /// The next sequence number would pass `u32::MAX`: install a new key.
    RekeyRequired,
    /// The next sequence number is at or above the limit the caller set
    /// ([`Sealer::set_seq_limit`](super::Sealer::set_seq_limit)): persist a new reservation.
    Unreserved,
    /// `out` is too short for the sealed frame.
    BufferTooSmall,
    /// The input is not an Ethernet II frame (shorter than 14 bytes).
    BadInput,
    /// The inner frame's type field is an IEEE 802.3 length (< 0x0600), which PSP cannot carry,
    /// or `seal_sub` was given a non-sub-protocol.
    BadProtocol,
    /// The cipher suite failed.
    Crypto(CryptoError),
}

impl fmt::Display for SealError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::RekeyRequired => f.write_str("sequence numbers exhausted: rekey required"),
            Self::Unreserved => f.write_str("sequence number beyond the persisted reservation"),
            Self::BufferTooSmall => f.write_str("output buffer too small"),
            Self::BadInput => f.write_str("input is not an Ethernet II frame"),
            Self::BadProtocol => f.write_str("protocol type cannot be carried"),
            Self::Crypto(e) => write!(f, "crypto: {e}"),
        }
    }
}

impl core::error::Error for SealError {}

/// The local reason a frame was dropped (for counters and logs; the peer learns nothing).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DropReason {
    /// Shorter than its header, section sub-header and ICV.
    Truncated,
    /// Not a PSP frame (wrong EtherType) or otherwise malformed.
    Malformed,
    /// Unknown PSP version.
    BadVersion,
    /// The reserved flag is set.
    ReservedFlag,
    /// Longer than the configured maximum.
    Oversized,
    /// The encryption flag does not match the session's suite, or the section length does not
    /// fit the suite's block length.
    WrongSuite,
    /// A feature this opener is not set up for (a signed frame without a verifier).
    Unsupported,
    /// The ICV did not verify.
    BadIcv,
    /// The signature is missing or did not verify.
    BadSignature,
    /// The sequence number was already received.
    Replay,
    /// The sequence number is below the replay window.
    TooOld,
    /// The security number is missing, unexpected or wrong.
    SecurityNumber,
    /// The timestamp is missing (when required) or too far from the opener's clock.
    Timestamp,
    /// The decrypted padding size is larger than 64 or than the section.
    BadPadding,
}

impl DropReason {
    /// A short static name (for counters).
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Truncated => "truncated",
            Self::Malformed => "malformed",
            Self::BadVersion => "bad-version",
            Self::ReservedFlag => "reserved-flag",
            Self::Oversized => "oversized",
            Self::WrongSuite => "wrong-suite",
            Self::Unsupported => "unsupported",
            Self::BadIcv => "bad-icv",
            Self::BadSignature => "bad-signature",
            Self::Replay => "replay",
            Self::TooOld => "too-old",
            Self::SecurityNumber => "security-number",
            Self::Timestamp => "timestamp",
            Self::BadPadding => "bad-padding",
        }
    }
}

impl fmt::Display for DropReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A frame could not be opened. Never tell the peer why; [`reason`](Self::reason) is for local
/// counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct OpenError(pub(super) DropReason);

impl OpenError {
    /// The local reason.
    pub const fn reason(self) -> DropReason {
        self.0
    }
}

impl From<DropReason> for OpenError {
    fn from(r: DropReason) -> Self {
        Self(r)
    }
}

impl From<wire::Error> for OpenError {
    fn from(e: wire::Error) -> Self {
        Self(match e {
            wire::Error::Truncated => DropReason::Truncated,
            wire::Error::BadVersion => DropReason::BadVersion,
            wire::Error::ReservedFlag => DropReason::ReservedFlag,
            wire::Error::BadPadding => DropReason::BadPadding,
            _ => DropReason::Malformed,
        })
    }
}

impl From<ReplayError> for OpenError {
    fn from(e: ReplayError) -> Self {
        Self(match e {
            ReplayError::TooOld => DropReason::TooOld,
            _ => DropReason::Replay,
        })
    }
}

impl fmt::Display for OpenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PSP frame dropped ({})", self.0)
    }
}

impl core::error::Error for OpenError {}
