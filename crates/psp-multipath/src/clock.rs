//! The one conversion between the OS clock and the protocol core's: [`Clock::now`] gives
//! `psp_core::time::Instant`s (µs since the clock's origin), [`Clock::deadline`] turns one back
//! into a tokio deadline.

use psp_core::time::Instant;

/// A clock whose origin is its creation.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Clock {
    origin: std::time::Instant,
}

impl Clock {
    pub(crate) fn new() -> Self {
        Self {
            origin: std::time::Instant::now(),
        }
    }

    /// Now, for the protocol core.
    pub(crate) fn now(&self) -> Instant {
        Instant::from_std(self.origin, std::time::Instant::now())
    }

    /// The tokio instant of a core instant.
    pub(crate) fn deadline(&self, t: Instant) -> tokio::time::Instant {
        tokio::time::Instant::from_std(
            self.origin + core::time::Duration::from_micros(t.total_micros()),
        )
    }
}
