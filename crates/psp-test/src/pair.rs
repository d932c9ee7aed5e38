//! [`Pair`]: two normalization endpoints A and B, links A→B and B→A, inner sources, a virtual
//! clock, and logs of what happened.
//!
//! The harness jumps from event to event (the earliest of both endpoints' `poll_timeout`, both
//! links' next arrival, both sources' next frame and the next sample). At each instant it
//! delivers arrivals first, then offers inner frames, then drains `poll_transmit`, so a frame is
//! sent exactly at its pacer slot.

use psp_core::normalize::feedback::HEADER_LEN;
use psp_core::normalize::{Endpoint, NormConfig, NormEvent, Stats};
use psp_core::time::{Duration, Instant};

use crate::link::{Link, LinkConfig};
use crate::traffic::{InnerSource, Silent};

/// One outer frame as an observer of the wire sees it (time and size), plus the decrypted header
/// for stronger comparisons.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TxRecord {
    /// Departure time.
    pub at: Instant,
    /// Payload length.
    pub len: usize,
    /// The normalized header (sequence number and feedback).
    pub header: [u8; HEADER_LEN],
}

/// Both endpoints' state at one instant.
#[derive(Clone, Copy, Debug)]
pub struct Sample {
    /// When.
    pub at: Instant,
    /// A's stats.
    pub a: Stats,
    /// B's stats.
    pub b: Stats,
}

/// One endpoint with its source and logs.
pub struct Side {
    /// The endpoint.
    pub ep: Endpoint<Vec<u8>>,
    /// Its inner traffic.
    pub source: Box<dyn InnerSource>,
    /// Every outer frame it sent (if recording).
    pub tx_log: Vec<TxRecord>,
    /// Inner frames delivered to this side.
    pub delivered_frames: u64,
    /// Inner bytes delivered to this side.
    pub delivered_bytes: u64,
    /// Delivered inner frames, kept if `keep_delivered` is set.
    pub delivered: Vec<Vec<u8>>,
    /// Whether to keep delivered frames.
    pub keep_delivered: bool,
    /// Inner frames offered by the source.
    pub offered_frames: u64,
}

impl core::fmt::Debug for Side {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Side")
            .field("stats", &self.ep.stats())
            .field("tx_log", &self.tx_log.len())
            .field("delivered_frames", &self.delivered_frames)
            .finish()
    }
}

impl Side {
    fn new(cfg: NormConfig) -> Self {
        let ep = Endpoint::new(Instant::ZERO, cfg, vec![0; cfg.storage_len()])
            .unwrap_or_else(|e| panic!("bad test config: {e}"));
        Self {
            ep,
            source: Box::new(Silent),
            tx_log: Vec::new(),
            delivered_frames: 0,
            delivered_bytes: 0,
            delivered: Vec::new(),
            keep_delivered: false,
            offered_frames: 0,
        }
    }
}

/// Two endpoints over two simulated links.
#[derive(Debug)]
pub struct Pair {
    /// The virtual clock.
    pub now: Instant,
    /// Endpoint A.
    pub a: Side,
    /// Endpoint B.
    pub b: Side,
    /// The link A→B.
    pub ab: Link,
    /// The link B→A.
    pub ba: Link,
    /// Whether sent frames are logged in [`Side::tx_log`].
    pub record_tx: bool,
    /// Stats samples (if `sample_every` is set).
    pub samples: Vec<Sample>,
    sample_every: Option<Duration>,
    next_sample: Instant,
    out: Vec<u8>,
    inner: Vec<u8>,
}

impl Pair {
    /// A pair at time zero; links seeded from `seed`.
    pub fn new(a: NormConfig, b: NormConfig, ab: LinkConfig, ba: LinkConfig, seed: u64) -> Self {
        let out_len = a.frame_len.max(b.frame_len);
        Self {
            now: Instant::ZERO,
            a: Side::new(a),
            b: Side::new(b),
            ab: Link::new(ab, seed.wrapping_mul(2).wrapping_add(1)),
            ba: Link::new(ba, seed.wrapping_mul(2).wrapping_add(2)),
            record_tx: false,
            samples: Vec::new(),
            sample_every: None,
            next_sample: Instant::ZERO,
            out: vec![0; out_len],
            inner: Vec::new(),
        }
    }

    /// Sets the inner sources of A and B.
    pub fn set_sources(&mut self, a: Box<dyn InnerSource>, b: Box<dyn InnerSource>) {
        self.a.source = a;
        self.b.source = b;
    }

    /// Records both endpoints' stats every `every` from now on.
    pub fn sample_every(&mut self, every: Duration) {
        self.sample_every = Some(every);
        self.next_sample = self.now;
    }

    /// Runs the simulation until `end` (inclusive).
    pub fn run_until(&mut self, end: Instant) {
        loop {
            let next = [
                self.a.ep.poll_timeout(),
                self.b.ep.poll_timeout(),
                self.ab.next_arrival(),
                self.ba.next_arrival(),
                self.a.source.next_at(),
                self.b.source.next_at(),
                self.sample_every.map(|_| self.next_sample),
            ]
            .into_iter()
            .flatten()
            .min();
            match next {
                Some(t) if t <= end => {
                    self.now = self.now.max(t);
                    self.step();
                }
                _ => {
                    self.now = self.now.max(end);
                    return;
                }
            }
        }
    }

    /// Processes everything due at `self.now`.
    fn step(&mut self) {
        let now = self.now;
        while let Some(p) = self.ab.poll_arrival(now) {
            deliver(&mut self.b, now, &p);
        }
        while let Some(p) = self.ba.poll_arrival(now) {
            deliver(&mut self.a, now, &p);
        }
        offer(&mut self.a, now, &mut self.inner);
        offer(&mut self.b, now, &mut self.inner);
        transmit(
            &mut self.a,
            &mut self.ab,
            now,
            &mut self.out,
            self.record_tx,
        );
        transmit(
            &mut self.b,
            &mut self.ba,
            now,
            &mut self.out,
            self.record_tx,
        );
        if let Some(every) = self.sample_every
            && now >= self.next_sample
        {
            self.samples.push(Sample {
                at: now,
                a: self.a.ep.stats(),
                b: self.b.ep.stats(),
            });
            self.next_sample = now + every;
        }
    }
}

fn deliver(side: &mut Side, now: Instant, payload: &[u8]) {
    // Malformed payloads cannot happen here; errors are counted by the endpoint.
    let _ = side.ep.handle_payload(now, payload);
    while let Some(NormEvent::Inner(f)) = side.ep.poll_event() {
        side.delivered_frames += 1;
        side.delivered_bytes += f.len() as u64;
        if side.keep_delivered {
            side.delivered.push(f.to_vec());
        }
    }
}

fn offer(side: &mut Side, now: Instant, buf: &mut Vec<u8>) {
    while side.source.next_at().is_some_and(|t| t <= now) {
        side.source.produce(now, buf);
        if !buf.is_empty() {
            side.offered_frames += 1;
            // A full queue drops the frame (counted by the endpoint), as the gateway would.
            let _ = side.ep.handle_inner(now, buf);
        }
    }
}

fn transmit(side: &mut Side, link: &mut Link, now: Instant, out: &mut [u8], record: bool) {
    let wire_len = side.ep.config().effective_wire_len();
    while let Some(t) = side.ep.poll_transmit(now, out) {
        if record {
            let mut header = [0u8; HEADER_LEN];
            header.copy_from_slice(&t.payload[..HEADER_LEN]);
            side.tx_log.push(TxRecord {
                at: now,
                len: t.payload.len(),
                header,
            });
        }
        link.send(now, wire_len, t.payload);
    }
}
