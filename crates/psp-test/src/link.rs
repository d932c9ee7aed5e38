//! A simulated one-way link: random loss, then a rate-limited bottleneck with a drop-tail queue,
//! then propagation delay plus optional jitter (which may reorder).
//!
//! The bottleneck serves packets back to back at `rate` bits/s; a packet that finds
//! `queue_limit` packets waiting (not counting the one being served) is dropped, like a Linux
//! `tbf`/`pfifo` drop-tail queue with a packet limit.

use core::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use psp_core::time::{Duration, Instant};

use crate::rng::Rng;

/// Link parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinkConfig {
    /// Bottleneck rate in bits/s (0: unlimited, no queue).
    pub rate_bps: u64,
    /// Packets that may wait behind the one in service.
    pub queue_limit: usize,
    /// One-way propagation delay.
    pub delay: Duration,
    /// Extra delay drawn uniformly from 0..=jitter per packet (reorders when larger than the
    /// packet spacing).
    pub jitter: Duration,
    /// Random loss before the bottleneck, in parts per million.
    pub loss_ppm: u32,
}

impl LinkConfig {
    /// A link of `rate_bps` with a 20-packet drop-tail queue (the paper's testbed), `delay`,
    /// no jitter and no random loss.
    pub fn new(rate_bps: u64, delay: Duration) -> Self {
        Self {
            rate_bps,
            queue_limit: 20,
            delay,
            jitter: Duration::ZERO,
            loss_ppm: 0,
        }
    }

    /// The same link with random loss.
    #[must_use]
    pub fn with_loss_ppm(mut self, ppm: u32) -> Self {
        self.loss_ppm = ppm;
        self
    }

    /// The same link with jitter.
    #[must_use]
    pub fn with_jitter(mut self, jitter: Duration) -> Self {
        self.jitter = jitter;
        self
    }
}

/// Counters of a link.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LinkStats {
    /// Packets offered.
    pub sent: u64,
    /// Packets lost at random.
    pub lost_random: u64,
    /// Packets dropped by the full queue.
    pub dropped_queue: u64,
    /// Packets handed to the receiver.
    pub delivered: u64,
    /// The most packets ever waiting.
    pub max_queue: usize,
    /// Packets that passed the bottleneck (not dropped).
    pub queued: u64,
    /// Their total waiting time before service, in µs.
    pub queue_wait_us: u64,
}

impl LinkStats {
    /// The mean waiting time at the bottleneck of the packets in `self` but not in `earlier`.
    pub fn mean_queue_wait_since(&self, earlier: &Self) -> Duration {
        let n = self.queued - earlier.queued;
        if n == 0 {
            return Duration::ZERO;
        }
        Duration::from_micros((self.queue_wait_us - earlier.queue_wait_us) / n)
    }
}

/// One direction of a simulated path.
#[derive(Debug)]
pub struct Link {
    cfg: LinkConfig,
    rng: Rng,
    busy_until_ns: u64,
    // Service start times (ns) of accepted packets not yet in service.
    waiting: VecDeque<u64>,
    in_flight: BinaryHeap<Reverse<(Instant, u64, Vec<u8>)>>,
    order: u64,
    stats: LinkStats,
}

impl Link {
    /// A link drawing its randomness from `seed`.
    pub fn new(cfg: LinkConfig, seed: u64) -> Self {
        Self {
            cfg,
            rng: Rng::new(seed),
            busy_until_ns: 0,
            waiting: VecDeque::new(),
            in_flight: BinaryHeap::new(),
            order: 0,
            stats: LinkStats::default(),
        }
    }

    /// The parameters.
    pub fn config(&self) -> &LinkConfig {
        &self.cfg
    }

    /// Changes the parameters from now on (packets already accepted keep their fate).
    pub fn set_config(&mut self, cfg: LinkConfig) {
        self.cfg = cfg;
    }

    /// The counters.
    pub fn stats(&self) -> LinkStats {
        self.stats
    }

    /// Offers a packet that occupies `wire_len` bytes on the link.
    pub fn send(&mut self, now: Instant, wire_len: usize, payload: &[u8]) {
        self.stats.sent += 1;
        if self.cfg.loss_ppm > 0 && self.rng.chance_ppm(self.cfg.loss_ppm) {
            self.stats.lost_random += 1;
            return;
        }
        let now_ns = now.total_micros() * 1000;
        let depart_ns = if self.cfg.rate_bps == 0 {
            now_ns
        } else {
            while self.waiting.front().is_some_and(|&s| s <= now_ns) {
                self.waiting.pop_front();
            }
            if self.waiting.len() >= self.cfg.queue_limit {
                self.stats.dropped_queue += 1;
                return;
            }
            let start = self.busy_until_ns.max(now_ns);
            self.stats.queued += 1;
            self.stats.queue_wait_us += (start - now_ns) / 1000;
            let service = (wire_len as u64 * 8 * 1_000_000_000).div_ceil(self.cfg.rate_bps);
            self.busy_until_ns = start + service;
            if start > now_ns {
                self.waiting.push_back(start);
                self.stats.max_queue = self.stats.max_queue.max(self.waiting.len());
            }
            self.busy_until_ns
        };
        let jitter = match self.cfg.jitter.total_micros() {
            0 => 0,
            j => self.rng.below(j + 1),
        };
        let at = Instant::from_micros(depart_ns.div_ceil(1000))
            + self.cfg.delay
            + Duration::from_micros(jitter);
        self.order += 1;
        self.in_flight
            .push(Reverse((at, self.order, payload.to_vec())));
    }

    /// When the next packet arrives, if any is in flight.
    pub fn next_arrival(&self) -> Option<Instant> {
        self.in_flight.peek().map(|Reverse((at, _, _))| *at)
    }

    /// The next packet that has arrived by `now`.
    pub fn poll_arrival(&mut self, now: Instant) -> Option<Vec<u8>> {
        if self.next_arrival()? > now {
            return None;
        }
        let Reverse((_, _, p)) = self.in_flight.pop()?;
        self.stats.delivered += 1;
        Some(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serialization_delay_and_queue_limit() {
        // 1000-byte packets at 8 Mbit/s: 1 ms each; queue of 2.
        let mut cfg = LinkConfig::new(8_000_000, Duration::from_millis(5));
        cfg.queue_limit = 2;
        let mut l = Link::new(cfg, 1);
        for _ in 0..5 {
            l.send(Instant::ZERO, 1000, b"x");
        }
        // One in service, two waiting, two dropped.
        assert_eq!(l.stats().dropped_queue, 2);
        let mut arrivals = Vec::new();
        while let Some(t) = l.next_arrival() {
            arrivals.push(t.total_micros());
            l.poll_arrival(t).unwrap();
        }
        assert_eq!(arrivals, vec![6000, 7000, 8000]);
    }

    #[test]
    fn random_loss_rate() {
        let mut l = Link::new(LinkConfig::new(0, Duration::ZERO).with_loss_ppm(50_000), 7);
        for i in 0..20_000u64 {
            l.send(Instant::from_micros(i), 100, b"x");
        }
        let lost = l.stats().lost_random;
        assert!((800..1200).contains(&lost), "{lost}");
    }
}
