//! The sans-I/O normalization endpoint for one peer: queue, pacer, packing, feedback and the rate
//! controller together.
//!
//! Call order (the gateway's driver, one task per peer):
//!
//! 1. [`Endpoint::new`] at connection establishment, with a [`NormConfig`] and a storage buffer of
//!    [`NormConfig::storage_len`] bytes;
//! 2. for every inner frame from the protected side: [`Endpoint::handle_inner`];
//! 3. for every authenticated, decrypted PSP payload of sub-protocol `Normalized` from the peer:
//!    [`Endpoint::handle_payload`], then drain [`Endpoint::poll_event`] (the delivered inner
//!    frames) before the next call;
//! 4. at (or after) [`Endpoint::poll_timeout`]: call [`Endpoint::poll_transmit`] until it
//!    returns `None`, sealing and sending each payload at once.
//!
//! Every payload from `poll_transmit` has exactly [`NormConfig::frame_len`] bytes, real or dummy, and
//! its departure time depends only on the pacer, which depends only on the feedback from the
//! peer: never on inner traffic. [`NormTransmit::inner_bytes`] is local information for counters; a
//! driver must not treat dummies differently on the wire.

use core::fmt;

use super::aqm::{Aqm, Codel, Head, Queue, set_ce};
use super::controller::{Loss, Packet, RateController, sender_rate};
use super::feedback::{self, Frame, MAX_SEQ, Repr};
use super::pacer::Pacer;
use super::packing::{
    FRAGMENT_HEADER_LEN, Fragment, FrameRing, Inserted, MIN_FRAGMENT_LEN, Packing, Reassembler,
    Segment, SegmentWriter, Segments, WHOLE_HEADER_LEN,
};
use super::{Algorithm, HEADER_LEN, NormConfig, NormConfigError, Rate};
#[cfg(test)]
use super::{CodelParams, packing::TX_RECORD_OVERHEAD};
use crate::time::{Duration, Instant};

/// A payload to seal and send now.
#[derive(Debug, PartialEq, Eq)]
#[must_use]
pub struct NormTransmit<'a> {
    /// The payload: exactly [`NormConfig::frame_len`] bytes.
    pub payload: &'a [u8],
    /// Inner bytes it carries (0: a dummy). Local information only.
    pub inner_bytes: usize,
}

impl NormTransmit<'_> {
    /// Whether the payload carries no inner data.
    pub fn is_dummy(&self) -> bool {
        self.inner_bytes == 0
    }
}

/// Something for the caller.
#[derive(Debug, PartialEq, Eq)]
#[non_exhaustive]
#[must_use]
pub enum NormEvent<'a> {
    /// An inner frame from the peer, to deliver to the protected side.
    Inner(&'a [u8]),
}

/// Why [`Endpoint::handle_inner`] refused a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum InnerError {
    /// The frame is empty.
    Empty,
    /// Longer than [`NormConfig::max_sendable_inner_len`].
    TooLarge,
    /// The inner queue is full (drop-tail); the frame is dropped and counted.
    QueueFull,
}

impl fmt::Display for InnerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Empty => "empty inner frame",
            Self::TooLarge => "inner frame larger than the normalized frame can carry",
            Self::QueueFull => "inner queue full",
        })
    }
}

impl core::error::Error for InnerError {}

/// A snapshot of an endpoint's state and counters (for `status`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Stats {
    /// Our sending rate S_current.
    pub s_current: Rate,
    /// Our administrative rate S_goal.
    pub s_goal: Rate,
    /// The latest rate the peer suggested for us.
    pub peer_suggested: Rate,
    /// The rate we suggest to the peer (S_suggested).
    pub s_suggested: Rate,
    /// Our round number R_current for the peer.
    pub round: u32,
    /// The highest round received from the peer (R_recent).
    pub r_recent: u32,
    /// The loss ratio of the last completed observation of the peer's frames.
    pub last_loss: Loss,
    /// The observation interval O (RTT estimate).
    pub rtt_estimate: Duration,
    /// The latest raw RTT sample.
    pub last_rtt_sample: Duration,
    /// Times our suggestion to the peer changed.
    pub rate_decisions: u64,
    /// Outer frames sent.
    pub frames_sent: u64,
    /// Outer frames sent without inner data.
    pub dummy_frames_sent: u64,
    /// Inner frames accepted into the queue.
    pub inner_queued: u64,
    /// Inner frames in the queue now.
    pub inner_queue_frames: usize,
    /// Inner bytes in the queue now.
    pub inner_queue_bytes: usize,
    /// Inner frames refused (queue full or too large).
    pub inner_drops: u64,
    /// Inner frames dropped by the AQM (CoDel) at the head of the queue.
    pub aqm_drops: u64,
    /// Inner frames the AQM marked Congestion Experienced instead of dropping them.
    pub aqm_marks: u64,
    /// Pacer slots skipped after late wake-ups.
    pub pacer_skipped: u64,
    /// Outer payloads accepted from the peer.
    pub frames_received: u64,
    /// Inner frames delivered through [`Endpoint::poll_event`].
    pub inner_delivered: u64,
    /// Inner frames dropped because the delivery queue was full.
    pub delivery_drops: u64,
    /// Partial inner frames dropped (a fragment lost or too late).
    pub reassembly_drops: u64,
    /// Payloads refused as malformed.
    pub malformed: u64,
}

/// One normalized connection to one peer; see the [module docs](self) for the call order.
///
/// `S` is the byte storage (e.g. `Vec<u8>` or a `&mut [u8]`), split into the inner transmit
/// queue, the delivery queue and the reassembly slots.
#[derive(Debug)]
pub struct Endpoint<S> {
    cfg: NormConfig,
    storage: S,
    tx: FrameRing,
    rx: FrameRing,
    // CoDel, or None for drop-tail only.
    codel: Option<Codel>,
    // The tx head frame has been through the AQM (it is evaluated once, when it first reaches
    // the head at a transmit slot).
    tx_head_checked: bool,
    reasm: Reassembler,
    // Bytes of the front inner frame already sent as fragments, and its fragment id.
    tx_offset: usize,
    tx_frag_id: u16,
    next_frag_id: u16,
    pacer: Pacer,
    controller: RateController,
    peer_suggested: Rate,
    s_current: Rate,
    r_recent: u32,
    next_seq: u64,
    release_pending: bool,
    stats: Stats,
}

impl<S: AsRef<[u8]> + AsMut<[u8]>> Endpoint<S> {
    /// A new endpoint at connection establishment; the first frame is due at `now`.
    ///
    /// # Errors
    /// The [`NormConfigError`] of [`NormConfig::validate`], or [`NormConfigError::Storage`] if `storage` is
    /// shorter than [`NormConfig::storage_len`].
    pub fn new(now: Instant, cfg: NormConfig, storage: S) -> Result<Self, NormConfigError> {
        cfg.validate()?;
        if storage.as_ref().len() < cfg.storage_len() {
            return Err(NormConfigError::Storage);
        }
        let init = cfg.initial_rate();
        let s_current = match cfg.algorithm {
            Algorithm::Fixed => cfg.s_goal,
            _ => sender_rate(cfg.s_goal, init),
        };
        Ok(Self {
            cfg,
            storage,
            tx: FrameRing::stamped(),
            rx: FrameRing::default(),
            codel: match cfg.aqm {
                Aqm::Codel(p) => Some(Codel::new(p, cfg.max_sendable_inner_len())),
                Aqm::DropTail => None,
            },
            tx_head_checked: false,
            reasm: Reassembler::new(cfg.reassembly_slots, cfg.max_inner_len, cfg.reorder_window),
            tx_offset: 0,
            tx_frag_id: 0,
            next_frag_id: 0,
            pacer: Pacer::new(now, cfg.effective_wire_len(), s_current, cfg.max_catch_up),
            controller: RateController::new(now, cfg.controller()),
            peer_suggested: init,
            s_current,
            r_recent: 0,
            next_seq: 1,
            release_pending: false,
            stats: Stats::default(),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &NormConfig {
        &self.cfg
    }

    /// The controller of the peer's sending rate.
    pub fn controller(&self) -> &RateController {
        &self.controller
    }

    /// Changes S_goal (an administrative decision, e.g. mode security); applies at once.
    pub fn set_s_goal(&mut self, goal: Rate) {
        self.cfg.s_goal = core::cmp::max(goal, self.cfg.s_min);
        self.apply_rate();
    }

    /// Queues an inner frame from the protected side, stamped with `now` (drop-tail when the
    /// byte cap is reached; with CoDel, frames that waited too long are dropped later, when
    /// they reach the head of the queue at a transmit slot).
    ///
    /// # Errors
    /// [`InnerError`]; the frame is not queued.
    pub fn handle_inner(&mut self, now: Instant, frame: &[u8]) -> Result<(), InnerError> {
        if frame.is_empty() {
            return Err(InnerError::Empty);
        }
        if frame.len() > self.cfg.max_sendable_inner_len() {
            self.stats.inner_drops += 1;
            return Err(InnerError::TooLarge);
        }
        let tx_len = self.cfg.tx_queue_bytes;
        let region = &mut self.storage.as_mut()[..tx_len];
        if !self.tx.push_stamped(region, frame, now.total_micros()) {
            self.stats.inner_drops += 1;
            return Err(InnerError::QueueFull);
        }
        self.stats.inner_queued += 1;
        Ok(())
    }

    /// Processes one decrypted payload from the peer: feedback, rate control, inner frames.
    ///
    /// Feedback is applied before the segments are parsed, so a payload with a malformed data
    /// area still counts for congestion control.
    ///
    /// # Errors
    /// A [`feedback::Error`] for a malformed header (nothing is applied) or data area (frames
    /// before the bad segment are delivered).
    pub fn handle_payload(&mut self, now: Instant, payload: &[u8]) -> Result<(), feedback::Error> {
        self.release();
        let repr = match Frame::new_checked(payload).and_then(|f| Repr::parse(&f)) {
            Ok(r) => r,
            Err(e) => {
                self.stats.malformed += 1;
                return Err(e);
            }
        };
        self.stats.frames_received += 1;
        self.controller.on_packet(
            now,
            Packet {
                sn: repr.seq,
                r_rcnt: repr.r_recent,
                s_current: repr.s_current,
                sent_at: repr.sent_at,
            },
        );
        self.peer_suggested = repr.s_suggested;
        self.r_recent = self.r_recent.max(repr.r_current);
        self.apply_rate();
        self.reasm.advance(repr.seq);

        let (tx_len, rx_len) = (self.cfg.tx_queue_bytes, self.cfg.rx_queue_bytes);
        let storage = &mut self.storage.as_mut()[tx_len..];
        let (rx_region, slots) = storage.split_at_mut(rx_len);
        for seg in Segments::new(&payload[HEADER_LEN..]) {
            match seg {
                Ok(Segment::Whole(d)) => {
                    if !self.rx.push(rx_region, d) {
                        self.stats.delivery_drops += 1;
                    }
                }
                Ok(Segment::Fragment(f)) => match self.reasm.insert(slots, repr.seq, &f) {
                    Inserted::Complete { slot, total } => {
                        let src = &slots[self.reasm.slot_range(slot, total)];
                        if !self.rx.push(rx_region, src) {
                            self.stats.delivery_drops += 1;
                        }
                    }
                    Inserted::Pending => {}
                    Inserted::Refused => self.stats.delivery_drops += 1,
                },
                Err(e) => {
                    self.stats.malformed += 1;
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    /// The next delivered inner frame, valid until the next call on this endpoint.
    pub fn poll_event(&mut self) -> Option<NormEvent<'_>> {
        self.release();
        let (tx_len, rx_len) = (self.cfg.tx_queue_bytes, self.cfg.rx_queue_bytes);
        let region = &self.storage.as_ref()[tx_len..tx_len + rx_len];
        let r = self.rx.front(region)?;
        self.release_pending = true;
        self.stats.inner_delivered += 1;
        Some(NormEvent::Inner(
            &self.storage.as_ref()[tx_len + r.start..tx_len + r.end],
        ))
    }

    /// The payload to send now, if the pacer has a slot due at `now`; call until `None`.
    ///
    /// # Panics
    /// If `out` is shorter than [`NormConfig::frame_len`] (a caller bug, not input).
    pub fn poll_transmit<'o>(
        &mut self,
        now: Instant,
        out: &'o mut [u8],
    ) -> Option<NormTransmit<'o>> {
        if self.next_seq > MAX_SEQ || !self.pacer.poll_departure(now) {
            return None;
        }
        let frame_len = self.cfg.frame_len;
        assert!(
            out.len() >= frame_len,
            "poll_transmit: output buffer shorter than the frame length"
        );
        let buf = &mut out[..frame_len];
        // The scheduled slot, not `now`: a late wake-up must not show in the header.
        let slot = self.pacer.last_slot().unwrap_or(now);
        let repr = Repr {
            seq: self.next_seq,
            s_current: self.s_current,
            r_recent: self.r_recent,
            s_suggested: self.controller.suggested(),
            r_current: self.controller.round(),
            // Modulo 2^32 µs by design (the receiver uses differences only).
            sent_at: slot.total_micros() as u32,
        };
        self.next_seq += 1;
        let mut frame = Frame::new_unchecked(&mut *buf);
        repr.emit(&mut frame);
        let inner_bytes = self.fill(now, frame.data_mut());
        self.stats.frames_sent += 1;
        if inner_bytes == 0 {
            self.stats.dummy_frames_sent += 1;
        }
        Some(NormTransmit {
            payload: &out[..frame_len],
            inner_bytes,
        })
    }

    /// When [`poll_transmit`](Self::poll_transmit) has the next frame (the pacer's next slot);
    /// `None` once the 48-bit sequence space is used up.
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.next_seq > MAX_SEQ {
            return None;
        }
        Some(self.pacer.next_departure())
    }

    /// State and counters.
    pub fn stats(&self) -> Stats {
        let mut s = self.stats;
        s.s_current = self.s_current;
        s.s_goal = self.cfg.s_goal;
        s.peer_suggested = self.peer_suggested;
        s.s_suggested = self.controller.suggested();
        s.round = self.controller.round();
        s.r_recent = self.r_recent;
        s.last_loss = self.controller.last_loss();
        s.rtt_estimate = self.controller.observation();
        s.last_rtt_sample = self.controller.last_rtt_sample();
        s.rate_decisions = self.controller.decisions();
        s.inner_queue_frames = self.tx.frames();
        s.inner_queue_bytes = self.tx.bytes().saturating_sub(self.tx_offset);
        s.pacer_skipped = self.pacer.skipped();
        s.reassembly_drops = self.reasm.dropped();
        s.aqm_drops = self.codel.as_ref().map_or(0, Codel::drops);
        s.aqm_marks = self.codel.as_ref().map_or(0, Codel::marks);
        s
    }

    /// The sender rule, applied after every feedback or goal change. Never below our S_min: a
    /// peer's controller never suggests less than its S_min, but a zero suggestion (a peer bug)
    /// would stop the pacer and with it the feedback that could raise the rate again.
    fn apply_rate(&mut self) {
        self.s_current = match self.cfg.algorithm {
            Algorithm::Fixed => self.cfg.s_goal,
            _ => core::cmp::max(
                self.cfg.s_min,
                sender_rate(self.cfg.s_goal, self.peer_suggested),
            ),
        };
        self.pacer.set_rate(self.s_current);
    }

    /// Drops the frame handed out by the previous `poll_event`.
    fn release(&mut self) {
        if self.release_pending {
            self.release_pending = false;
            let (tx_len, rx_len) = (self.cfg.tx_queue_bytes, self.cfg.rx_queue_bytes);
            self.rx.pop(&self.storage.as_ref()[tx_len..tx_len + rx_len]);
        }
    }

    /// Moves queued inner data into a data area; returns the inner bytes written.
    fn fill(&mut self, now: Instant, area: &mut [u8]) -> usize {
        let tx_len = self.cfg.tx_queue_bytes;
        let mut w = SegmentWriter::new(area);
        let mut inner = 0;
        loop {
            // A new head (not partly sent) meets the AQM first: RFC 8289's dequeue.
            if self.tx_offset == 0 && !self.tx_head_checked {
                if let Some(codel) = &mut self.codel {
                    let mut q = TxQueue {
                        ring: &mut self.tx,
                        region: &mut self.storage.as_mut()[..tx_len],
                        lead: self.cfg.aqm_lead,
                    };
                    codel.dequeue(now, &mut q);
                }
                self.tx_head_checked = self.tx.frames() > 0;
            }
            let region = &self.storage.as_ref()[..tx_len];
            let Some(r) = self.tx.front(region) else {
                break;
            };
            let frame = &region[r];
            if self.tx_offset == 0 && w.push_whole(frame) {
                inner += frame.len();
                self.tx.pop(region);
                self.tx_head_checked = false;
                if self.cfg.packing == Packing::Single {
                    break;
                }
                continue;
            }
            if self.cfg.packing == Packing::Single {
                // Frames that cannot fit were refused in handle_inner; the area was not empty.
                break;
            }
            if w.remaining() < FRAGMENT_HEADER_LEN + MIN_FRAGMENT_LEN
                && w.remaining() < FRAGMENT_HEADER_LEN + frame.len() - self.tx_offset
            {
                break;
            }
            if self.tx_offset == 0 {
                self.tx_frag_id = self.next_frag_id;
                self.next_frag_id = self.next_frag_id.wrapping_add(1);
            }
            let n = (frame.len() - self.tx_offset).min(w.remaining() - FRAGMENT_HEADER_LEN);
            // offset + n <= frame.len() <= MAX_INNER_LEN < u16::MAX (checked in handle_inner).
            let pushed = w.push_fragment(Fragment {
                id: self.tx_frag_id,
                offset: self.tx_offset as u16,
                total: frame.len() as u16,
                data: &frame[self.tx_offset..self.tx_offset + n],
            });
            if !pushed {
                break;
            }
            inner += n;
            self.tx_offset += n;
            if self.tx_offset < frame.len() {
                break;
            }
            self.tx_offset = 0;
            self.tx.pop(region);
            self.tx_head_checked = false;
        }
        w.finish();
        inner
    }
}

/// The transmit queue as CoDel sees it.
struct TxQueue<'a> {
    ring: &'a mut FrameRing,
    region: &'a mut [u8],
    /// Not queueing: the caller's fixed lead ([`NormConfig::aqm_lead`]).
    lead: Duration,
}

impl Queue for TxQueue<'_> {
    fn head(&self, now: Instant) -> Option<Head> {
        let r = self.ring.front(self.region)?;
        let stamp = Instant::from_micros(self.ring.front_stamp(self.region)?);
        Some(Head {
            sojourn: Duration::from_micros(
                now.saturating_since(stamp)
                    .total_micros()
                    .saturating_sub(self.lead.total_micros()),
            ),
            backlog: self.ring.bytes() - r.len(),
        })
    }

    fn drop_head(&mut self) {
        self.ring.pop(self.region);
    }

    fn mark_head(&mut self) -> bool {
        match self.ring.front(self.region) {
            Some(r) => set_ce(&mut self.region[r]),
            None => false,
        }
    }
}

// Keep the whole-frame header length in sight for max_sendable_inner_len.
const _: () = assert!(WHOLE_HEADER_LEN < FRAGMENT_HEADER_LEN);

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(packing: Packing) -> NormConfig {
        NormConfig {
            frame_len: 200,
            wire_len: 0,
            packing,
            s_goal: Rate::from_kbps(1600), // 1 ms per 200-byte frame
            s_min: Rate::from_kbps(16),
            s_step: Rate::from_kbps(16),
            tx_queue_bytes: 4096,
            rx_queue_bytes: 4096,
            max_inner_len: 1000,
            ..NormConfig::default()
        }
    }

    fn endpoint(c: NormConfig) -> Endpoint<Vec<u8>> {
        Endpoint::new(Instant::ZERO, c, vec![0; c.storage_len()]).unwrap()
    }

    fn drain(e: &mut Endpoint<Vec<u8>>) -> Vec<Vec<u8>> {
        let mut v = Vec::new();
        while let Some(NormEvent::Inner(f)) = e.poll_event() {
            v.push(f.to_vec());
        }
        v
    }

    #[test]
    fn dummies_and_fixed_size() {
        let mut a = endpoint(cfg(Packing::Packed));
        let mut out = [0u8; 256];
        let t = a.poll_transmit(Instant::ZERO, &mut out).unwrap();
        assert_eq!(t.payload.len(), 200);
        assert!(t.is_dummy());
        assert!(a.poll_transmit(Instant::ZERO, &mut out).is_none());
        assert_eq!(a.poll_timeout(), Some(Instant::from_millis(1)));
        let repr = Repr::parse(&Frame::new_checked(&out[..200]).unwrap()).unwrap();
        assert_eq!(repr.seq, 1);
        assert_eq!(repr.s_current, Rate::from_kbps(1600));
    }

    #[test]
    fn packed_roundtrip_small_and_large() {
        let mut a = endpoint(cfg(Packing::Packed));
        let mut b = endpoint(cfg(Packing::Packed));
        let frames: Vec<Vec<u8>> = [10usize, 20, 500, 30, 999, 5]
            .iter()
            .enumerate()
            .map(|(i, &n)| (0..n).map(|j| (i * 31 + j) as u8).collect())
            .collect();
        for f in &frames {
            a.handle_inner(Instant::ZERO, f).unwrap();
        }
        let mut got = Vec::new();
        let mut out = [0u8; 200];
        for ms in 0..20 {
            let now = Instant::from_millis(ms);
            while let Some(t) = a.poll_transmit(now, &mut out) {
                assert_eq!(t.payload.len(), 200);
                b.handle_payload(now, &out).unwrap();
                got.extend(drain(&mut b));
            }
        }
        assert_eq!(got, frames);
        let s = a.stats();
        assert_eq!(s.inner_queue_frames, 0);
        // 1564 inner bytes + headers fit in 10 payloads of 176 data bytes.
        assert_eq!(s.frames_sent - s.dummy_frames_sent, 10);
    }

    #[test]
    fn single_mode_one_frame_per_payload() {
        let mut a = endpoint(cfg(Packing::Single));
        let mut b = endpoint(cfg(Packing::Single));
        assert_eq!(
            a.handle_inner(Instant::ZERO, &[1u8; 171]),
            Err(InnerError::TooLarge)
        );
        a.handle_inner(Instant::ZERO, &[1u8; 170]).unwrap();
        a.handle_inner(Instant::ZERO, &[2u8; 3]).unwrap();
        a.handle_inner(Instant::ZERO, &[3u8; 3]).unwrap();
        let mut out = [0u8; 200];
        let mut per_frame = Vec::new();
        for ms in 0..4 {
            let now = Instant::from_millis(ms);
            let t = a.poll_transmit(now, &mut out).unwrap();
            let n = t.inner_bytes;
            b.handle_payload(now, &out).unwrap();
            per_frame.push((n, drain(&mut b).len()));
        }
        assert_eq!(per_frame, vec![(170, 1), (3, 1), (3, 1), (0, 0)]);
    }

    #[test]
    fn lost_fragment_drops_only_its_frame() {
        let mut a = endpoint(cfg(Packing::Packed));
        let mut c = cfg(Packing::Packed);
        c.reorder_window = 4;
        let mut b = endpoint(c);
        a.handle_inner(Instant::ZERO, &[7u8; 100]).unwrap();
        a.handle_inner(Instant::ZERO, &[8u8; 300]).unwrap(); // spans payloads 1-2(-3)
        a.handle_inner(Instant::ZERO, &[9u8; 100]).unwrap();
        let mut payloads = Vec::new();
        let mut out = [0u8; 200];
        for ms in 0..12 {
            if let Some(t) = a.poll_transmit(Instant::from_millis(ms), &mut out) {
                payloads.push(t.payload.to_vec());
            }
        }
        // Lose payload 2 (index 1): the 300-byte frame's middle.
        let mut got = Vec::new();
        for (i, p) in payloads.iter().enumerate() {
            if i != 1 {
                b.handle_payload(Instant::from_millis(i as u64), p).unwrap();
                got.extend(drain(&mut b).into_iter().map(|f| (f[0], f.len())));
            }
        }
        assert_eq!(got, vec![(7, 100), (9, 100)]);
        assert_eq!(b.stats().reassembly_drops, 1);
    }

    #[test]
    fn reordered_fragments_reassemble() {
        let mut a = endpoint(cfg(Packing::Packed));
        let mut b = endpoint(cfg(Packing::Packed));
        let big: Vec<u8> = (0..900u32).map(|i| (i % 251) as u8).collect();
        a.handle_inner(Instant::ZERO, &big).unwrap();
        let mut payloads = Vec::new();
        let mut out = [0u8; 200];
        for ms in 0..8 {
            if let Some(t) = a.poll_transmit(Instant::from_millis(ms), &mut out) {
                payloads.push(t.payload.to_vec());
            }
        }
        payloads.reverse();
        let mut got = Vec::new();
        for p in &payloads {
            b.handle_payload(Instant::from_millis(9), p).unwrap();
            got.extend(drain(&mut b));
        }
        assert_eq!(got, vec![big]);
    }

    #[test]
    fn queue_full_is_drop_tail() {
        let mut c = cfg(Packing::Packed);
        c.tx_queue_bytes = 1000 + TX_RECORD_OVERHEAD;
        let mut a = endpoint(c);
        a.handle_inner(Instant::ZERO, &[1u8; 500]).unwrap();
        assert_eq!(
            a.handle_inner(Instant::ZERO, &[1u8; 500]),
            Err(InnerError::QueueFull)
        );
        assert_eq!(a.stats().inner_drops, 1);
        assert_eq!(a.stats().inner_queue_frames, 1);
    }

    /// Keeps `standing` 100-byte frames queued at every 1 ms slot for 1 s; returns the stats
    /// and the number of payloads that carried inner data.
    fn standing_queue(aqm: Aqm, standing: usize) -> (Stats, u64) {
        standing_queue_of(aqm, standing, |ms| vec![ms as u8; 100])
    }

    fn standing_queue_of(
        aqm: Aqm,
        standing: usize,
        frame: impl Fn(u64) -> Vec<u8>,
    ) -> (Stats, u64) {
        let mut c = cfg(Packing::Single);
        c.aqm = aqm;
        let mut a = endpoint(c);
        let mut out = [0u8; 200];
        let mut real = 0;
        for ms in 0..1000u64 {
            let now = Instant::from_millis(ms);
            while a.stats().inner_queue_frames < standing {
                a.handle_inner(now, &frame(ms)).unwrap();
            }
            while let Some(t) = a.poll_transmit(now, &mut out) {
                real += u64::from(!t.is_dummy());
            }
        }
        (a.stats(), real)
    }

    #[test]
    fn codel_drops_from_a_standing_queue() {
        // 20 frames of 1 ms each: a 20 ms standing queue, above the 5 ms target.
        let (s, real) = standing_queue(Aqm::default(), 20);
        assert_eq!(s.frames_sent, 1000);
        assert_eq!(real, 1000);
        assert_eq!(s.inner_drops, 0);
        // First drop 100 ms after the sojourn passed 5 ms, then interval / sqrt(count):
        // about 2 * 100 ms * sqrt(n) for n drops.
        assert!((15..=30).contains(&s.aqm_drops), "{}", s.aqm_drops);
        assert_eq!(
            s.inner_queued,
            real + s.aqm_drops + s.inner_queue_frames as u64
        );
    }

    #[test]
    fn codel_marks_ecn_capable_frames_instead() {
        // 100-byte Ethernet frames with an IPv4 header, ECT(0).
        let ect = |_| {
            let mut f = vec![0u8; 100];
            f[12..14].copy_from_slice(&[0x08, 0x00]);
            f[14] = 0x45;
            f[15] = 0x02;
            f
        };
        let (s, real) = standing_queue_of(Aqm::default(), 20, ect);
        assert_eq!(s.aqm_drops, 0);
        assert!((15..=30).contains(&s.aqm_marks), "{}", s.aqm_marks);
        assert_eq!(s.inner_queued, real + s.inner_queue_frames as u64);
        // ECN off: dropped as before.
        let no_ecn = Aqm::Codel(CodelParams {
            ecn: false,
            ..CodelParams::default()
        });
        let (s, _) = standing_queue_of(no_ecn, 20, ect);
        assert_eq!(s.aqm_marks, 0);
        assert!((15..=30).contains(&s.aqm_drops), "{}", s.aqm_drops);
    }

    #[test]
    fn codel_leaves_a_short_queue_alone() {
        // 3 frames: 3 ms of sojourn, below target.
        let (s, _) = standing_queue(Aqm::default(), 3);
        assert_eq!(s.aqm_drops, 0);
    }

    /// A caller that asks for each frame 4 ms before its slot (the gateway's lead): with
    /// `aqm_lead` set, CoDel sees the 3 ms a short queue really waits, not 7.
    #[test]
    fn codel_does_not_count_the_callers_lead() {
        let run = |aqm_lead: u64| {
            let mut c = cfg(Packing::Single);
            c.aqm_lead = Duration::from_millis(aqm_lead);
            let mut a = endpoint(c);
            let mut out = [0u8; 200];
            for ms in 0..1000u64 {
                let now = Instant::from_millis(ms);
                while a.stats().inner_queue_frames < 3 {
                    a.handle_inner(now, &[ms as u8; 100]).unwrap();
                }
                // The slot of `now + 4 ms` is prepared now.
                while a
                    .poll_transmit(now + Duration::from_millis(4), &mut out)
                    .is_some()
                {}
            }
            a.stats().aqm_drops
        };
        assert!(run(0) > 0, "the lead counted as queueing: drops");
        assert_eq!(run(4), 0);
    }

    #[test]
    fn drop_tail_keeps_the_standing_queue() {
        let (s, real) = standing_queue(Aqm::DropTail, 20);
        assert_eq!((s.frames_sent, real), (1000, 1000));
        assert_eq!((s.aqm_drops, s.inner_drops), (0, 0));
        assert_eq!(s.inner_queued, real + s.inner_queue_frames as u64);
    }

    #[test]
    fn codel_never_cuts_a_partly_sent_frame() {
        // Packed: a 900-byte frame spans 6 payloads; sent fragments are never followed by an
        // AQM drop of the rest, so the peer reassembles every frame that left.
        let mut c = cfg(Packing::Packed);
        c.tx_queue_bytes = 16 * 1024;
        let mut a = endpoint(c);
        let mut b = endpoint(cfg(Packing::Packed));
        let mut out = [0u8; 200];
        let mut got = 0u64;
        for ms in 0..2000u64 {
            let now = Instant::from_millis(ms);
            while a.stats().inner_queue_bytes < 4 * 900 {
                a.handle_inner(now, &[ms as u8; 900]).unwrap();
            }
            while let Some(_t) = a.poll_transmit(now, &mut out) {
                b.handle_payload(now, &out).unwrap();
                got += drain(&mut b).len() as u64;
            }
        }
        let s = a.stats();
        assert!(s.aqm_drops > 0);
        assert_eq!(b.stats().reassembly_drops, 0);
        assert_eq!(
            got + s.aqm_drops + s.inner_queue_frames as u64,
            s.inner_queued
        );
    }

    #[test]
    fn feedback_sets_rate_with_min_rule() {
        let mut a = endpoint(cfg(Packing::Packed));
        let mut payload = [0u8; 200];
        let mut repr = Repr {
            seq: 1,
            s_current: Rate::from_kbps(1600),
            r_recent: 0,
            s_suggested: Rate::from_kbps(800),
            r_current: 3,
            sent_at: 0,
        };
        repr.emit(&mut Frame::new_unchecked(&mut payload[..]));
        a.handle_payload(Instant::ZERO, &payload).unwrap();
        assert_eq!(a.stats().s_current, Rate::from_kbps(800));
        assert_eq!(a.stats().r_recent, 3);
        // A suggestion above S_goal is capped at S_goal.
        repr.seq = 2;
        repr.s_suggested = Rate::from_kbps(9000);
        repr.emit(&mut Frame::new_unchecked(&mut payload[..]));
        a.handle_payload(Instant::ZERO, &payload).unwrap();
        assert_eq!(a.stats().s_current, Rate::from_kbps(1600));
        // A suggestion below S_min (a peer bug) is floored at S_min.
        repr.seq = 3;
        repr.s_suggested = Rate::ZERO;
        repr.emit(&mut Frame::new_unchecked(&mut payload[..]));
        a.handle_payload(Instant::ZERO, &payload).unwrap();
        assert_eq!(a.stats().s_current, Rate::from_kbps(16));
        // Fixed ignores suggestions.
        let mut c = cfg(Packing::Packed);
        c.algorithm = Algorithm::Fixed;
        let mut f = endpoint(c);
        repr.s_suggested = Rate::from_kbps(100);
        repr.emit(&mut Frame::new_unchecked(&mut payload[..]));
        f.handle_payload(Instant::ZERO, &payload).unwrap();
        assert_eq!(f.stats().s_current, Rate::from_kbps(1600));
    }

    #[test]
    fn malformed_payloads_are_counted() {
        let mut b = endpoint(cfg(Packing::Packed));
        assert_eq!(
            b.handle_payload(Instant::ZERO, &[1, 0, 0]),
            Err(feedback::Error::Truncated)
        );
        let mut payload = [0u8; 40];
        Repr {
            seq: 1,
            s_current: Rate::from_kbps(100),
            r_recent: 0,
            s_suggested: Rate::from_kbps(100),
            r_current: 0,
            sent_at: 0,
        }
        .emit(&mut Frame::new_unchecked(&mut payload[..]));
        payload[HEADER_LEN] = 0xc0;
        payload[HEADER_LEN + 1] = 0x01;
        assert_eq!(
            b.handle_payload(Instant::ZERO, &payload),
            Err(feedback::Error::BadSegment)
        );
        assert_eq!(b.stats().malformed, 2);
        // The header of the second payload still counted.
        assert_eq!(b.stats().frames_received, 1);
    }

    #[test]
    fn storage_too_small() {
        let c = cfg(Packing::Packed);
        assert_eq!(
            Endpoint::new(Instant::ZERO, c, vec![0u8; c.storage_len() - 1]).unwrap_err(),
            NormConfigError::Storage
        );
    }
}
