//! Injected time: a monotonic [`Instant`] and a [`Duration`], both in microseconds.
//!
//! The core never reads a clock. Callers convert their clock into an [`Instant`] in one place
//! (with `std`, [`Instant::from_std`] measures against a caller-chosen origin). Where two hosts
//! must agree on time (the PSP timestamp field), they use microseconds since the Unix epoch as
//! their `Instant` origin; see docs/PROTOCOL.md.

use core::fmt;
use core::ops::{Add, AddAssign, Sub};

/// A point in time, in microseconds since a caller-chosen origin.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Instant {
    micros: u64,
}

/// A span of time in microseconds.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Duration {
    micros: u64,
}

impl Instant {
    /// The origin.
    pub const ZERO: Self = Self { micros: 0 };

    /// An instant `micros` microseconds after the origin.
    pub const fn from_micros(micros: u64) -> Self {
        Self { micros }
    }

    /// An instant `millis` milliseconds after the origin.
    pub const fn from_millis(millis: u64) -> Self {
        Self {
            micros: millis.saturating_mul(1000),
        }
    }

    /// An instant `secs` seconds after the origin.
    pub const fn from_secs(secs: u64) -> Self {
        Self {
            micros: secs.saturating_mul(1_000_000),
        }
    }

    /// Microseconds since the origin.
    pub const fn total_micros(self) -> u64 {
        self.micros
    }

    /// Milliseconds since the origin (truncated).
    pub const fn total_millis(self) -> u64 {
        self.micros / 1000
    }

    /// The time from `earlier` to `self`, or zero if `earlier` is later.
    pub const fn saturating_since(self, earlier: Self) -> Duration {
        Duration {
            micros: self.micros.saturating_sub(earlier.micros),
        }
    }

    /// Converts a `std` instant, measured from `origin`.
    #[cfg(feature = "std")]
    pub fn from_std(origin: std::time::Instant, t: std::time::Instant) -> Self {
        let micros = t.saturating_duration_since(origin).as_micros();
        Self {
            micros: u64::try_from(micros).unwrap_or(u64::MAX),
        }
    }
}

impl Duration {
    /// No time.
    pub const ZERO: Self = Self { micros: 0 };

    /// A duration of `micros` microseconds.
    pub const fn from_micros(micros: u64) -> Self {
        Self { micros }
    }

    /// A duration of `millis` milliseconds.
    pub const fn from_millis(millis: u64) -> Self {
        Self {
            micros: millis.saturating_mul(1000),
        }
    }

    /// A duration of `secs` seconds.
    pub const fn from_secs(secs: u64) -> Self {
        Self {
            micros: secs.saturating_mul(1_000_000),
        }
    }

    /// Whole microseconds.
    pub const fn total_micros(self) -> u64 {
        self.micros
    }

    /// Whole milliseconds (truncated).
    pub const fn total_millis(self) -> u64 {
        self.micros / 1000
    }
}

impl Add<Duration> for Instant {
    type Output = Self;
    fn add(self, d: Duration) -> Self {
        Self {
            micros: self.micros.saturating_add(d.micros),
        }
    }
}

impl AddAssign<Duration> for Instant {
    fn add_assign(&mut self, d: Duration) {
        *self = *self + d;
    }
}

impl Sub for Instant {
    type Output = Duration;
    fn sub(self, rhs: Self) -> Duration {
        self.saturating_since(rhs)
    }
}

impl Add for Duration {
    type Output = Self;
    fn add(self, d: Self) -> Self {
        Self {
            micros: self.micros.saturating_add(d.micros),
        }
    }
}

impl From<core::time::Duration> for Duration {
    fn from(d: core::time::Duration) -> Self {
        Self {
            micros: u64::try_from(d.as_micros()).unwrap_or(u64::MAX),
        }
    }
}

impl From<Duration> for core::time::Duration {
    fn from(d: Duration) -> Self {
        Self::from_micros(d.micros)
    }
}

impl fmt::Debug for Instant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}.{:06}s",
            self.micros / 1_000_000,
            self.micros % 1_000_000
        )
    }
}

impl fmt::Debug for Duration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}.{:06}s",
            self.micros / 1_000_000,
            self.micros % 1_000_000
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_saturates() {
        let a = Instant::from_millis(5);
        let b = a + Duration::from_micros(1500);
        assert_eq!(b.total_micros(), 6500);
        assert_eq!(b - a, Duration::from_micros(1500));
        assert_eq!(a - b, Duration::ZERO);
        assert_eq!(Instant::from_secs(u64::MAX).total_micros(), u64::MAX);
    }

    #[test]
    fn debug_is_seconds() {
        assert_eq!(
            format!("{:?}", Instant::from_micros(1_000_001)),
            "1.000001s"
        );
    }
}
