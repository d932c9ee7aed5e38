//! Inner traffic sources: what the protected side offers an endpoint, and when.
//!
//! Every produced frame starts with an 8-byte big-endian counter (when long enough) so a test
//! can check what arrived.

use psp_core::time::{Duration, Instant};

use crate::rng::Rng;

/// A generator of inner frames.
pub trait InnerSource {
    /// When the next frame is offered, if ever.
    fn next_at(&self) -> Option<Instant>;
    /// Writes the frame due at `now` into `out` (cleared first) and schedules the next one.
    fn produce(&mut self, now: Instant, out: &mut Vec<u8>);
}

/// No inner traffic.
#[derive(Clone, Copy, Debug, Default)]
pub struct Silent;

impl InnerSource for Silent {
    fn next_at(&self) -> Option<Instant> {
        None
    }

    fn produce(&mut self, _now: Instant, out: &mut Vec<u8>) {
        out.clear();
    }
}

/// Frames of one size at a fixed interval.
#[derive(Clone, Debug)]
pub struct Periodic {
    next: Instant,
    every: Duration,
    size: usize,
    count: u64,
}

impl Periodic {
    /// `size`-byte frames every `every`, the first at `start`.
    pub fn new(start: Instant, every: Duration, size: usize) -> Self {
        Self {
            next: start,
            every,
            size,
            count: 0,
        }
    }
}

impl InnerSource for Periodic {
    fn next_at(&self) -> Option<Instant> {
        Some(self.next)
    }

    fn produce(&mut self, _now: Instant, out: &mut Vec<u8>) {
        fill(out, self.size, self.count);
        self.count += 1;
        self.next += self.every;
    }
}

/// Random bursts of random-size frames (exponential-ish gaps), from a seed.
#[derive(Clone, Debug)]
pub struct Bursts {
    rng: Rng,
    next: Instant,
    left_in_burst: u32,
    mean_gap: Duration,
    max_burst: u32,
    sizes: (usize, usize),
    count: u64,
}

impl Bursts {
    /// Bursts of 1..=`max_burst` frames of `sizes.0..=sizes.1` bytes, bursts `mean_gap` apart
    /// on average (uniform in 0..2×mean).
    pub fn new(seed: u64, mean_gap: Duration, max_burst: u32, sizes: (usize, usize)) -> Self {
        Self {
            rng: Rng::new(seed),
            next: Instant::ZERO,
            left_in_burst: 0,
            mean_gap,
            max_burst,
            sizes,
            count: 0,
        }
    }
}

impl InnerSource for Bursts {
    fn next_at(&self) -> Option<Instant> {
        Some(self.next)
    }

    fn produce(&mut self, _now: Instant, out: &mut Vec<u8>) {
        let size = self.rng.range(self.sizes.0 as u64, self.sizes.1 as u64) as usize;
        fill(out, size, self.count);
        self.count += 1;
        if self.left_in_burst == 0 {
            self.left_in_burst = self.rng.range(1, u64::from(self.max_burst.max(1))) as u32;
        }
        self.left_in_burst -= 1;
        if self.left_in_burst == 0 {
            let gap = self.rng.below(2 * self.mean_gap.total_micros() + 1);
            self.next += Duration::from_micros(gap.max(1));
        }
    }
}

/// An insider's on/off pattern: `size`-byte frames every `every` during "on" periods of the
/// `bits` pattern (one bit per `period`), nothing during "off".
#[derive(Clone, Debug)]
pub struct OnOff {
    bits: Vec<bool>,
    period: Duration,
    inner: Periodic,
}

impl OnOff {
    /// Sends `bits` (repeating), each for `period`.
    pub fn new(bits: Vec<bool>, period: Duration, every: Duration, size: usize) -> Self {
        Self {
            bits,
            period,
            inner: Periodic::new(Instant::ZERO, every, size),
        }
    }

    fn on_at(&self, t: Instant) -> bool {
        if self.bits.is_empty() || self.period == Duration::ZERO {
            return false;
        }
        let idx = (t.total_micros() / self.period.total_micros()) as usize % self.bits.len();
        self.bits[idx]
    }
}

impl InnerSource for OnOff {
    fn next_at(&self) -> Option<Instant> {
        if self.bits.iter().all(|b| !b) {
            return None;
        }
        self.inner.next_at()
    }

    fn produce(&mut self, now: Instant, out: &mut Vec<u8>) {
        if self.on_at(now) {
            self.inner.produce(now, out);
        } else {
            out.clear();
            self.inner.next += self.inner.every;
        }
    }
}

fn fill(out: &mut Vec<u8>, size: usize, count: u64) {
    out.clear();
    out.resize(size, 0);
    let c = count.to_be_bytes();
    let n = size.min(8);
    out[..n].copy_from_slice(&c[8 - n..]);
    for (i, b) in out.iter_mut().enumerate().skip(8) {
        *b = (i as u64 ^ count) as u8;
    }
}
