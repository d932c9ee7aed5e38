//! [`RequestLimiter`]: per-source token buckets for handshake requests, in a fixed table.
//!
//! WireGuard's numbers by default: 20 requests per second per source, bursts of 5. The table
//! holds `N` sources; a new source evicts the entry idle the longest, so memory is bounded. A
//! source new to the table starts with one token, not a burst: cycling through more sources than
//! the table holds buys one request per source, never a fresh burst each time. A genuine source
//! evicted by such a flood loses its bucket's history and starts again with one token. The driver checks the limiter before
//! [`Handshake::respond`](super::Handshake::respond) and bounds the number of half-open
//! responder handshakes it keeps; neither touches the data path.

use super::FailReason;
use crate::time::{Duration, Instant};

#[derive(Clone, Copy, Debug, Default)]
struct Bucket {
    source: [u8; 6],
    /// Tokens in millionths, so refill is exact integer arithmetic.
    tokens_micro: u64,
    last: Instant,
    used: bool,
}

/// Token buckets for up to `N` sources.
#[derive(Clone, Debug)]
pub struct RequestLimiter<const N: usize> {
    buckets: [Bucket; N],
    per_second: u64,
    burst: u64,
}

impl<const N: usize> RequestLimiter<N> {
    /// WireGuard's defaults: 20 per second, burst 5.
    pub fn new() -> Self {
        Self::with_rate(20, 5)
    }

    /// `per_second` requests per second per source, bursts of `burst`.
    pub fn with_rate(per_second: u32, burst: u32) -> Self {
        Self {
            buckets: [Bucket::default(); N],
            per_second: u64::from(per_second),
            burst: u64::from(burst.max(1)),
        }
    }

    /// Takes one token for `source`.
    ///
    /// # Errors
    /// [`FailReason::RateLimited`] if its bucket is empty (or `N` is 0).
    pub fn check(&mut self, now: Instant, source: [u8; 6]) -> Result<(), FailReason> {
        let full = self.burst * 1_000_000;
        let i = match self
            .buckets
            .iter()
            .position(|b| b.used && b.source == source)
        {
            Some(i) => i,
            None => {
                // Evict the entry idle the longest (unused entries first).
                let i = (0..N)
                    .min_by_key(|&i| (self.buckets[i].used, self.buckets[i].last))
                    .ok_or(FailReason::RateLimited)?;
                self.buckets[i] = Bucket {
                    source,
                    tokens_micro: 1_000_000,
                    last: now,
                    used: true,
                };
                i
            }
        };
        let b = &mut self.buckets[i];
        let elapsed = now.saturating_since(b.last).total_micros();
        b.tokens_micro = b
            .tokens_micro
            .saturating_add(elapsed.saturating_mul(self.per_second))
            .min(full);
        b.last = now;
        if b.tokens_micro < 1_000_000 {
            return Err(FailReason::RateLimited);
        }
        b.tokens_micro -= 1_000_000;
        Ok(())
    }

    /// How long until `source` may send again at the earliest (zero if now).
    pub fn retry_after(&self, now: Instant, source: [u8; 6]) -> Duration {
        let Some(b) = self.buckets.iter().find(|b| b.used && b.source == source) else {
            return Duration::ZERO;
        };
        let elapsed = now.saturating_since(b.last).total_micros();
        let have = b.tokens_micro + elapsed.saturating_mul(self.per_second);
        if have >= 1_000_000 || self.per_second == 0 {
            return Duration::ZERO;
        }
        Duration::from_micros((1_000_000 - have).div_ceil(self.per_second))
    }
}

impl<const N: usize> Default for RequestLimiter<N> {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn burst_then_rate() {
        let mut l = RequestLimiter::<4>::new();
        let a = [2, 0, 0, 0, 0, 1];
        let t = Instant::from_secs(1);
        // A new source has one token; after a quiet quarter second, a burst of 5.
        assert_eq!(l.check(t, a), Ok(()));
        assert_eq!(l.check(t, a), Err(FailReason::RateLimited));
        let t0 = t + Duration::from_millis(250);
        for _ in 0..5 {
            assert_eq!(l.check(t0, a), Ok(()));
        }
        assert_eq!(l.check(t0, a), Err(FailReason::RateLimited));
        assert_eq!(l.retry_after(t0, a), Duration::from_millis(50));
        // 20/s: one token every 50 ms.
        assert_eq!(
            l.check(t0 + Duration::from_millis(49), a),
            Err(FailReason::RateLimited)
        );
        assert_eq!(l.check(t0 + Duration::from_millis(50), a), Ok(()));
        // Over 10 s a flooding source gets about 20/s.
        let mut ok = 0;
        for ms in 0..10_000u64 {
            if l.check(t0 + Duration::from_millis(100 + ms), a).is_ok() {
                ok += 1;
            }
        }
        assert!((200..=206).contains(&ok), "{ok}");
    }

    #[test]
    fn table_is_bounded_and_other_sources_unaffected() {
        let mut l = RequestLimiter::<2>::new();
        let good = [2, 0, 0, 0, 0, 9];
        let t = Instant::from_secs(5);
        assert_eq!(l.check(t, good), Ok(()));
        for i in 0..1000u32 {
            let b = i.to_be_bytes();
            let _ = l.check(t, [6, 6, b[0], b[1], b[2], b[3]]);
        }
        // The flood of forged sources evicted `good`; it comes back with one token.
        assert_eq!(l.check(t, good), Ok(()));
        assert_eq!(l.check(t, good), Err(FailReason::RateLimited));
    }

    #[test]
    fn cycling_sources_buys_one_request_each_not_a_burst() {
        let mut l = RequestLimiter::<4>::new();
        let t = Instant::from_secs(5);
        let mut ok = 0;
        for round in 0..3u8 {
            for i in 0..8u8 {
                for _ in 0..5 {
                    if l.check(t, [6, 6, 6, 6, round, i]).is_ok() {
                        ok += 1;
                    }
                }
            }
        }
        assert_eq!(ok, 3 * 8, "one per new source, never a burst of five");
    }

    /// `retry_after` answers for the source asked about, not for another one that is waiting.
    #[test]
    fn retry_after_is_per_source() {
        let mut l = RequestLimiter::<4>::new();
        let (a, b) = ([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]);
        let t = Instant::from_secs(1);
        assert_eq!(l.check(t, a), Ok(()));
        assert_eq!(l.check(t, a), Err(FailReason::RateLimited));
        assert!(l.retry_after(t, a) > Duration::ZERO);
        assert_eq!(l.retry_after(t, b), Duration::ZERO, "b never sent");
    }
}
