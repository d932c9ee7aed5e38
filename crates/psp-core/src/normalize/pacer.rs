//! The pacer: when the next fixed-size outer frame leaves, for a given rate.
//!
//! Departures follow an ideal schedule `t_0, t_0 + I, t_0 + 2I, …` with `I = frame bits / rate`,
//! kept in nanoseconds so that rounding never drifts. A frame never leaves before its slot.
//!
//! **Catch-up bound.** When the caller wakes up late (at `now` past several slots), the pacer
//! lets at most `max_catch_up` overdue slots go out back to back after the current one, and
//! skips older ones (counted in [`Pacer::skipped`]). Hence at one instant at most
//! `1 + max_catch_up` frames depart, and in any time window of length `T` at most
//! `T / I + 1 + max_catch_up` frames depart. Late wake-ups therefore cannot raise the rate above
//! S_current by more than that burst, and a long stall does not turn into a long burst.
//!
//! A rate change takes effect from the next slot: it is rescheduled one new interval after the
//! previous slot (or stays at the start time before the first departure).

use super::Rate;
use crate::time::Instant;

/// Departure schedule for fixed-size frames at a variable rate.
#[derive(Clone, Debug)]
pub struct Pacer {
    frame_bits: u64,
    rate: Rate,
    interval_ns: u64,
    // The interval's fractional nanoseconds, in units of 1/kbps ns (exact: no drift).
    interval_frac: u64,
    prev_slot_ns: Option<u64>,
    next_ns: u64,
    next_frac: u64,
    max_catch_up: u32,
    skipped: u64,
}

impl Pacer {
    /// A pacer whose first departure is at `start`, for frames of `frame_bytes` bytes.
    pub fn new(start: Instant, frame_bytes: usize, rate: Rate, max_catch_up: u32) -> Self {
        let frame_bits = (frame_bytes as u64).saturating_mul(8);
        Self {
            frame_bits,
            rate,
            interval_ns: rate.frame_time_ns(frame_bits),
            interval_frac: frac(rate, frame_bits),
            prev_slot_ns: None,
            next_ns: to_ns(start),
            next_frac: 0,
            max_catch_up,
            skipped: 0,
        }
    }

    /// The rate.
    pub fn rate(&self) -> Rate {
        self.rate
    }

    /// The interval between departures in nanoseconds.
    pub fn interval_ns(&self) -> u64 {
        self.interval_ns
    }

    /// Slots skipped because the caller woke up later than the catch-up bound allows.
    pub fn skipped(&self) -> u64 {
        self.skipped
    }

    /// Changes the rate from the next slot on.
    pub fn set_rate(&mut self, rate: Rate) {
        if rate == self.rate {
            return;
        }
        self.rate = rate;
        self.interval_ns = rate.frame_time_ns(self.frame_bits);
        self.interval_frac = frac(rate, self.frame_bits);
        if let Some(prev) = self.prev_slot_ns {
            self.next_ns = prev.saturating_add(self.interval_ns);
            self.next_frac = self.interval_frac;
        } else {
            self.next_frac = 0;
        }
    }

    /// The scheduled time of the slot most recently consumed (rounded down to the microsecond).
    pub fn last_slot(&self) -> Option<Instant> {
        self.prev_slot_ns.map(|ns| Instant::from_micros(ns / 1000))
    }

    /// The instant of the next departure (rounded up to the microsecond).
    pub fn next_departure(&self) -> Instant {
        Instant::from_micros(self.next_ns.div_ceil(1000))
    }

    /// Consumes one slot if one is due at `now`; returns whether a frame should leave now.
    ///
    /// Call it repeatedly at the same `now` to send every due frame (at most
    /// `1 + max_catch_up`).
    pub fn poll_departure(&mut self, now: Instant) -> bool {
        let now_ns = to_ns(now);
        if now_ns < self.next_ns {
            return false;
        }
        // Whole intervals this slot is late; beyond the catch-up bound, skip slots (keeping the
        // schedule's phase) so that exactly 1 + max_catch_up remain due at `now`.
        let late = (now_ns - self.next_ns) / self.interval_ns.max(1);
        if late > u64::from(self.max_catch_up) {
            let k = late - u64::from(self.max_catch_up);
            self.skipped = self.skipped.saturating_add(k);
            self.advance(k);
        }
        self.prev_slot_ns = Some(self.next_ns);
        self.advance(1);
        true
    }

    /// Moves the next slot `k` intervals on, exactly (fractions carried).
    fn advance(&mut self, k: u64) {
        let kbps = u128::from(self.rate.kbps().max(1));
        let frac = u128::from(self.next_frac) + u128::from(k) * u128::from(self.interval_frac);
        let ns = u128::from(self.interval_ns) * u128::from(k) + frac / kbps;
        self.next_frac = (frac % kbps) as u64;
        self.next_ns = self
            .next_ns
            .saturating_add(u64::try_from(ns).unwrap_or(u64::MAX));
    }
}

/// The remainder of `frame_bits × 10^6 / kbps` (the interval's sub-nanosecond part).
fn frac(rate: Rate, frame_bits: u64) -> u64 {
    match rate.kbps() {
        0 => 0,
        k => ((u128::from(frame_bits) * 1_000_000) % u128::from(k)) as u64,
    }
}

fn to_ns(t: Instant) -> u64 {
    t.total_micros().saturating_mul(1000)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn us(u: u64) -> Instant {
        Instant::from_micros(u)
    }

    #[test]
    fn exact_schedule_without_drift() {
        // 1000-byte frames at 3000 kbit/s: 2666.67 µs apart.
        let mut p = Pacer::new(us(0), 1000, Rate::from_kbps(3000), 0);
        let mut times = [0u64; 4];
        for t in &mut times {
            let at = p.next_departure();
            if at > us(0) {
                assert!(!p.poll_departure(us(at.total_micros() - 1)));
            }
            assert!(p.poll_departure(at));
            *t = at.total_micros();
        }
        assert_eq!(times, [0, 2667, 5334, 8000]);
        // After 3000 frames the schedule is exactly 8 s later.
        for _ in 4..3000 {
            let at = p.next_departure();
            assert!(p.poll_departure(at));
        }
        assert_eq!(p.next_departure(), Instant::from_secs(8));
    }

    #[test]
    fn catch_up_is_bounded() {
        // 1 ms interval, wake up 100 ms late: 1 + 3 frames, the rest skipped.
        let mut p = Pacer::new(us(0), 1000, Rate::from_kbps(8000), 3);
        assert!(p.poll_departure(us(0)));
        let now = Instant::from_millis(100);
        let mut n = 0;
        while p.poll_departure(now) {
            n += 1;
        }
        assert_eq!(n, 4);
        assert_eq!(p.skipped(), 96);
        assert_eq!(p.next_departure(), Instant::from_millis(101));
        // Late by less than one interval: nothing is skipped, the phase is kept.
        let mut q = Pacer::new(us(0), 1000, Rate::from_kbps(8000), 0);
        assert!(q.poll_departure(us(0)));
        assert!(q.poll_departure(us(1999)));
        assert!(!q.poll_departure(us(1999)));
        assert_eq!(q.next_departure(), Instant::from_millis(2));
        assert_eq!(q.skipped(), 0);
    }

    #[test]
    fn rate_change_reschedules_from_previous_slot() {
        let mut p = Pacer::new(us(0), 1000, Rate::from_kbps(800), 0); // 10 ms
        assert!(p.poll_departure(us(0)));
        assert_eq!(p.next_departure(), Instant::from_millis(10));
        p.set_rate(Rate::from_kbps(8000)); // 1 ms
        assert_eq!(p.next_departure(), Instant::from_millis(1));
        // Before the first departure the start time stays.
        let mut q = Pacer::new(us(500), 1000, Rate::from_kbps(800), 0);
        q.set_rate(Rate::from_kbps(8000));
        assert_eq!(q.next_departure(), us(500));
    }

    #[test]
    fn zero_rate_never_departs_again() {
        let mut p = Pacer::new(us(0), 1000, Rate::ZERO, 2);
        assert!(p.poll_departure(us(0)));
        assert!(!p.poll_departure(Instant::from_secs(1_000_000)));
    }
}
