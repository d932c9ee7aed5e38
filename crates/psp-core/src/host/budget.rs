//! [`MessageBudget`]: the handshake messages one peer may hand the host's handshake logic per
//! path. Applied right after a frame opens, before the message is parsed: a flood costs one
//! ICV check and a counter per frame, never a handshake step.

use crate::time::Instant;

/// A token bucket: [`RATE`](Self::RATE) messages a second, bursts of [`BURST`](Self::BURST). A
/// handshake is about six messages plus retransmissions; the per-source request limit
/// ([`RequestLimiter`](crate::handshake::RequestLimiter), 20/s, burst 5) comes after it.
#[derive(Debug, Clone, Copy)]
pub struct MessageBudget {
    tokens: u64,
    at: Instant,
}

impl MessageBudget {
    /// Messages per second.
    pub const RATE: u64 = 50;
    /// Burst.
    pub const BURST: u64 = 20;
    /// Tokens are counted in millionths (one per µs at one message per second).
    const UNIT: u64 = 1_000_000;

    /// A full bucket.
    pub const fn new() -> Self {
        Self {
            tokens: Self::BURST * Self::UNIT,
            at: Instant::ZERO,
        }
    }

    /// Takes one token if there is one.
    pub fn take(&mut self, now: Instant) -> bool {
        let dt = now.saturating_since(self.at).total_micros();
        self.at = now;
        self.tokens = (self.tokens + dt.saturating_mul(Self::RATE)).min(Self::BURST * Self::UNIT);
        if self.tokens >= Self::UNIT {
            self.tokens -= Self::UNIT;
            true
        } else {
            false
        }
    }
}

impl Default for MessageBudget {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::Duration;

    #[test]
    fn burst_then_rate() {
        let mut b = MessageBudget::new();
        let t = Instant::from_secs(1);
        assert_eq!((0..100).filter(|_| b.take(t)).count(), 20);
        // 50/s: one token every 20 ms.
        assert!(!b.take(t + Duration::from_millis(19)));
        assert!(b.take(t + Duration::from_millis(40)));
    }
}
