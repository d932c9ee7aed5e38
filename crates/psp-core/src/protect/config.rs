//! The options of a [`Sealer`](super::Sealer) and an [`Opener`](super::Opener): typed builders
//! whose values are checked once, when the sealer or opener is built ([`ConfigError`]).

use crate::replay::DEFAULT_WINDOW;
use crate::time::Duration;
use crate::wire::SecurityNumber;

/// Options of a [`Sealer`](super::Sealer) that do not depend on the suite.
///
/// ```
/// use psp_core::{SealerConfig, SecurityNumber};
///
/// let cfg = SealerConfig::new()
///     .with_security_number(SecurityNumber::new(7).ok())
///     .with_timestamps(true)
///     .with_pad_to(16);
/// assert_eq!(cfg.pad_to(), 16);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct SealerConfig {
    security_number: Option<SecurityNumber>,
    timestamps: bool,
    pad_to: u8,
    allow_none: bool,
}

impl SealerConfig {
    /// No security number, no timestamps, no padding beyond the block length, `none` refused.
    pub const fn new() -> Self {
        Self {
            security_number: None,
            timestamps: false,
            pad_to: 0,
            allow_none: false,
        }
    }

    /// Sends this security number (flag 0x10) in every frame, or none.
    #[must_use]
    pub const fn with_security_number(mut self, value: Option<SecurityNumber>) -> Self {
        self.security_number = value;
        self
    }

    /// Sends a timestamp (flag 0x08): the caller's `now` in milliseconds modulo 2^32.
    #[must_use]
    pub const fn with_timestamps(mut self, on: bool) -> Self {
        self.timestamps = on;
        self
    }

    /// Pads the section to a multiple of `granule` bytes to hide exact lengths (0 = only what
    /// the block cipher needs). Combined with the suite's block length the granule must be at
    /// most 64 ([`ConfigError::PaddingGranule`] otherwise). Where the granule and the 60-byte
    /// frame minimum cannot both hold within 64 bytes of padding (only `none` without a
    /// signature, tiny frames), the minimum wins and the section is only block-aligned
    /// (docs/PROTOCOL.md §1.2).
    #[must_use]
    pub const fn with_pad_to(mut self, granule: u8) -> Self {
        self.pad_to = granule;
        self
    }

    /// Accepts [`SuiteId::None`](crate::SuiteId::None) (no encryption, no ICV; measurement
    /// mode only).
    #[must_use]
    pub const fn with_allow_none(mut self, allow: bool) -> Self {
        self.allow_none = allow;
        self
    }

    /// The security number sent, if any.
    pub const fn security_number(&self) -> Option<SecurityNumber> {
        self.security_number
    }

    /// Whether frames carry a timestamp.
    pub const fn timestamps(&self) -> bool {
        self.timestamps
    }

    /// The padding granule (0 = none beyond the block length).
    pub const fn pad_to(&self) -> u8 {
        self.pad_to
    }

    /// Whether the `none` suite is accepted.
    pub const fn allow_none(&self) -> bool {
        self.allow_none
    }
}

/// Options of an [`Opener`](super::Opener).
///
/// ```
/// use psp_core::OpenerConfig;
/// use psp_core::time::Duration;
///
/// let cfg = OpenerConfig::new()
///     .with_replay_window(4096)
///     .with_require_timestamp(true)
///     .with_max_skew(Duration::from_millis(500));
/// assert_eq!(cfg.replay_window(), 4096);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpenerConfig {
    replay_window: u32,
    security_number: Option<SecurityNumber>,
    security_number_grace: Duration,
    require_timestamp: bool,
    max_skew: Duration,
    allow_none: bool,
    max_frame_len: usize,
}

impl Default for OpenerConfig {
    fn default() -> Self {
        Self::new()
    }
}

impl OpenerConfig {
    /// A [`DEFAULT_WINDOW`]-frame replay window, no security number (5 s grace on rotation),
    /// timestamps checked within ±2 s when present but not required, `none` refused, frames up
    /// to 65,535 bytes.
    pub const fn new() -> Self {
        Self {
            replay_window: DEFAULT_WINDOW,
            security_number: None,
            security_number_grace: Duration::from_secs(5),
            require_timestamp: false,
            max_skew: Duration::from_secs(2),
            allow_none: false,
            max_frame_len: 65_535,
        }
    }

    /// The replay window in sequence numbers (1..=[`MAX_WINDOW`](crate::replay::MAX_WINDOW);
    /// [`ConfigError::ReplayWindow`] otherwise).
    #[must_use]
    pub const fn with_replay_window(mut self, size: u32) -> Self {
        self.replay_window = size;
        self
    }

    /// The security number frames must carry, or `None` for frames without one.
    #[must_use]
    pub const fn with_security_number(mut self, value: Option<SecurityNumber>) -> Self {
        self.security_number = value;
        self
    }

    /// How long the previous security number stays valid after
    /// [`Opener::set_security_number`](super::Opener::set_security_number).
    #[must_use]
    pub const fn with_security_number_grace(mut self, grace: Duration) -> Self {
        self.security_number_grace = grace;
        self
    }

    /// Drops frames without a timestamp.
    #[must_use]
    pub const fn with_require_timestamp(mut self, on: bool) -> Self {
        self.require_timestamp = on;
        self
    }

    /// The largest accepted difference between a frame's timestamp and the opener's `now`.
    #[must_use]
    pub const fn with_max_skew(mut self, skew: Duration) -> Self {
        self.max_skew = skew;
        self
    }

    /// Accepts [`SuiteId::None`](crate::SuiteId::None).
    #[must_use]
    pub const fn with_allow_none(mut self, allow: bool) -> Self {
        self.allow_none = allow;
        self
    }

    /// Drops frames longer than this (bytes, whole layer-2 frame).
    #[must_use]
    pub const fn with_max_frame_len(mut self, len: usize) -> Self {
        self.max_frame_len = len;
        self
    }

    /// The replay window size.
    pub const fn replay_window(&self) -> u32 {
        self.replay_window
    }

    /// The security number frames must carry.
    pub const fn security_number(&self) -> Option<SecurityNumber> {
        self.security_number
    }

    /// The grace period of a rotated-out security number.
    pub const fn security_number_grace(&self) -> Duration {
        self.security_number_grace
    }

    /// Whether frames without a timestamp are dropped.
    pub const fn require_timestamp(&self) -> bool {
        self.require_timestamp
    }

    /// The largest accepted timestamp skew.
    pub const fn max_skew(&self) -> Duration {
        self.max_skew
    }

    /// Whether the `none` suite is accepted.
    pub const fn allow_none(&self) -> bool {
        self.allow_none
    }

    /// The longest accepted frame.
    pub const fn max_frame_len(&self) -> usize {
        self.max_frame_len
    }
}

/// A [`Sealer`](super::Sealer) or [`Opener`](super::Opener) could not be built from its key and
/// configuration.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConfigError {
    /// The key's suite is `none` and the configuration does not allow it.
    NoneRefused,
    /// The padding granule (lcm of `pad_to` and the suite's block length) exceeds 64 bytes.
    PaddingGranule {
        /// The granule that resulted.
        granule: usize,
    },
    /// The replay window is 0 or larger than [`MAX_WINDOW`](crate::replay::MAX_WINDOW).
    ReplayWindow {
        /// The size that was asked for.
        size: u32,
    },
}

impl core::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::NoneRefused => f.write_str("suite \"none\" refused by configuration"),
            Self::PaddingGranule { granule } => {
                write!(f, "padding granule {granule} exceeds 64 bytes")
            }
            Self::ReplayWindow { size } => write!(
                f,
                "replay window {size} outside 1..={}",
                crate::replay::MAX_WINDOW
            ),
        }
    }
}

impl core::error::Error for ConfigError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builders_set_and_getters_read() {
        let sn = SecurityNumber::new(0x00ab_cdef).ok();
        let s = SealerConfig::new()
            .with_security_number(sn)
            .with_timestamps(true)
            .with_pad_to(32)
            .with_allow_none(true);
        assert_eq!(
            (
                s.security_number(),
                s.timestamps(),
                s.pad_to(),
                s.allow_none()
            ),
            (sn, true, 32, true)
        );
        assert_eq!(SealerConfig::new(), SealerConfig::default());
        let o = OpenerConfig::new()
            .with_replay_window(64)
            .with_security_number(sn)
            .with_security_number_grace(Duration::from_secs(1))
            .with_require_timestamp(true)
            .with_max_skew(Duration::from_millis(10))
            .with_allow_none(true)
            .with_max_frame_len(1514);
        assert_eq!(o.replay_window(), 64);
        assert_eq!(o.security_number(), sn);
        assert_eq!(o.security_number_grace(), Duration::from_secs(1));
        assert!(o.require_timestamp() && o.allow_none());
        assert_eq!(o.max_skew(), Duration::from_millis(10));
        assert_eq!(o.max_frame_len(), 1514);
        assert_eq!(OpenerConfig::new(), OpenerConfig::default());
    }
}
