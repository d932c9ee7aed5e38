//! The reorder buffer of a peer whose frames this host spreads over two paths
//! ([`PathMode::Both`](super::PathMode::Both)): frames of the peer's session come back in
//! sequence-number order, as one path would have delivered them (docs/SESSIONS.md, "Two
//! paths").
//!
//! Every frame opened under the session's current key passes [`Reorder::arrive`] with its
//! sequence number and path. One that continues the sequence is delivered in place; one that
//! comes early is held (copied into one of [`CAPACITY`] slots) until the frames before it have
//! come, or are known to be lost, or have been waited for [`REORDER_WAIT`]. A gap is known to
//! be lost when every path that is up has carried a later frame: each path delivers in order,
//! so the missing frame is not on its way any more. Control frames (probes, keepalives) take
//! numbers too; they pass `arrive` without a payload and only fill their place. A frame that
//! comes after its place was given up (late) is delivered at once, like one on a single path
//! that overtook nothing.
//!
//! The slots are allocated once, on the first frame that must wait: nothing per frame.

use alloc::collections::VecDeque;
use alloc::vec;
use alloc::vec::Vec;

use crate::handshake::PathId;
use crate::time::{Duration, Instant};

/// Frames held at most.
pub const CAPACITY: usize = 64;

/// How long a frame waits for the ones before it at most (default of
/// `SessionSettings::reorder_wait`).
pub const REORDER_WAIT: Duration = Duration::from_millis(20);

/// What to do with a frame that arrived.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Placement {
    /// Deliver (or handle) it now, in place.
    Now,
    /// It was copied into the buffer; [`Reorder::poll_ready`] hands it out in its turn.
    Held,
}

/// One held frame (or a control frame's place: `len` 0, nothing to deliver).
#[derive(Clone, Copy, Debug)]
struct Held {
    seq: u32,
    len: u16,
    at: Instant,
    /// Released: waiting in `ready` to be handed out.
    ready: bool,
}

/// Counters of the reorder buffer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct ReorderCounters {
    /// Frames that came before a frame with a lower number and waited for it.
    pub(crate) held: u64,
    /// Numbers given up: lost on their path (every path carried a later frame), or waited for
    /// too long.
    pub(crate) gaps: u64,
    /// Frames that came after their place was given up, delivered at once.
    pub(crate) late: u64,
    /// Frames delivered out of order because every slot was taken.
    pub(crate) overflow: u64,
}

/// See the module docs.
#[derive(Debug)]
pub(crate) struct Reorder {
    wait: Duration,
    slot_len: usize,
    /// The session key whose numbers are followed.
    key: Option<u32>,
    /// Every number below it was delivered, handled or given up.
    next: u32,
    /// The highest number opened on each path under `key`.
    high: [Option<u32>; 2],
    /// `CAPACITY * slot_len` bytes once a frame had to wait.
    store: Vec<u8>,
    slots: [Option<Held>; CAPACITY],
    /// Slots released for delivery, in order.
    ready: VecDeque<u8>,
    pub(crate) counters: ReorderCounters,
}

impl Reorder {
    /// A buffer for frames of up to `slot_len` bytes that waits `wait` at most.
    pub(crate) fn new(slot_len: usize, wait: Duration) -> Self {
        Self {
            wait,
            slot_len,
            key: None,
            next: 0,
            high: [None; 2],
            store: Vec::new(),
            slots: [None; CAPACITY],
            ready: VecDeque::new(),
            counters: ReorderCounters::default(),
        }
    }

    /// A frame opened under session key `key` with number `seq` on `path`: `inner` is what to
    /// deliver (`None` for a control frame, which is handled now in any case). `up` says which
    /// paths are up.
    pub(crate) fn arrive(
        &mut self,
        now: Instant,
        key: u32,
        seq: u32,
        path: PathId,
        inner: Option<&[u8]>,
        up: [bool; 2],
    ) -> Placement {
        if self.key != Some(key) {
            // A new session (or a frame of the one before, in its grace period): what waits
            // is released, and the numbers of this key are followed from here.
            self.release_all();
            self.key = Some(key);
            self.next = seq;
            self.high = [None; 2];
        }
        let p = usize::from(path.0).min(1);
        self.high[p] = Some(self.high[p].map_or(seq, |h| h.max(seq)));
        let placement = if seq < self.next {
            if inner.is_some() {
                self.counters.late += 1;
            }
            self.in_turn(inner)
        } else if seq == self.next {
            let placement = self.in_turn(inner);
            self.next = seq.saturating_add(1);
            self.release_in_order();
            placement
        } else if inner.is_some_and(|f| f.len() > self.slot_len)
            || seq - self.next > 2 * CAPACITY as u32
        {
            // Too far ahead to wait for: give the gap up.
            self.give_up_to(seq);
            let placement = self.in_turn(inner);
            self.next = seq.saturating_add(1);
            self.release_in_order();
            placement
        } else {
            match self.hold(now, seq, inner, false) {
                Some(()) => {
                    if inner.is_some() {
                        self.counters.held += 1;
                    }
                    Placement::Held
                }
                None => {
                    self.counters.overflow += 1;
                    Placement::Now
                }
            }
        };
        self.release_lost(up);
        placement
    }

    /// When the oldest held frame has waited long enough.
    pub(crate) fn poll_timeout(&self) -> Option<Instant> {
        self.slots
            .iter()
            .flatten()
            .filter(|h| !h.ready)
            .map(|h| h.at + self.wait)
            .min()
    }

    /// Gives up the gaps before every frame that waited `wait`.
    pub(crate) fn handle_timeout(&mut self, now: Instant) {
        while let Some(h) = self.oldest_waiting() {
            if h.at + self.wait > now {
                break;
            }
            self.give_up_to(h.seq);
            self.release_in_order();
        }
    }

    /// Whether frames are ready to be handed out.
    pub(crate) fn has_ready(&self) -> bool {
        !self.ready.is_empty()
    }

    /// The next frame in order, copied into `out` (its length).
    pub(crate) fn poll_ready(&mut self, out: &mut [u8]) -> Option<usize> {
        loop {
            let i = usize::from(self.ready.pop_front()?);
            let Some(h) = self.slots[i].take() else {
                continue;
            };
            let len = usize::from(h.len);
            if len == 0 {
                continue;
            }
            let at = i * self.slot_len;
            let n = len.min(out.len());
            out[..n].copy_from_slice(&self.store[at..at + n]);
            return Some(n);
        }
    }

    /// A frame in its turn: delivered in place unless frames released before it still wait
    /// to be handed out (then it queues behind them, so the order holds).
    fn in_turn(&mut self, inner: Option<&[u8]>) -> Placement {
        let Some(f) = inner else {
            return Placement::Now;
        };
        if self.ready.is_empty() {
            return Placement::Now;
        }
        match self.hold(Instant::ZERO, 0, Some(f), true) {
            Some(()) => Placement::Held,
            None => {
                self.counters.overflow += 1;
                Placement::Now
            }
        }
    }

    /// Copies a frame into a free slot (released at once with `ready`).
    fn hold(&mut self, now: Instant, seq: u32, inner: Option<&[u8]>, ready: bool) -> Option<()> {
        let i = self.slots.iter().position(Option::is_none)?;
        let len = inner.map_or(0, <[u8]>::len);
        if len > 0 {
            if self.store.is_empty() {
                self.store = vec![0; CAPACITY * self.slot_len];
            }
            let at = i * self.slot_len;
            self.store[at..at + len].copy_from_slice(inner.unwrap_or_default());
        }
        self.slots[i] = Some(Held {
            seq,
            len: u16::try_from(len).ok()?,
            at: now,
            ready,
        });
        if ready {
            self.ready.push_back(i as u8);
        }
        Some(())
    }

    fn oldest_waiting(&self) -> Option<Held> {
        self.slots
            .iter()
            .flatten()
            .filter(|h| !h.ready)
            .min_by_key(|h| h.at)
            .copied()
    }

    /// The held frame with the lowest number.
    fn lowest_waiting(&self) -> Option<(usize, Held)> {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(i, h)| h.filter(|h| !h.ready).map(|h| (i, h)))
            .min_by_key(|(_, h)| h.seq)
    }

    /// Releases the held frames that continue the sequence.
    fn release_in_order(&mut self) {
        while let Some((i, h)) = self.lowest_waiting() {
            if h.seq > self.next {
                break;
            }
            self.release(i);
            self.next = self.next.max(h.seq.saturating_add(1));
        }
    }

    /// Gives up every number below `seq` that has not come.
    fn give_up_to(&mut self, seq: u32) {
        while let Some((i, h)) = self.lowest_waiting() {
            if h.seq >= seq {
                break;
            }
            self.skip_to(h.seq);
            self.release(i);
            self.next = h.seq.saturating_add(1);
        }
        self.skip_to(seq);
    }

    /// Counts the numbers from `next` up to `seq` as given up.
    fn skip_to(&mut self, seq: u32) {
        if seq > self.next {
            self.counters.gaps += u64::from(seq - self.next);
            self.next = seq;
        }
    }

    /// While the number `next` is known to be lost (every path that is up carried a later
    /// one), skips it.
    fn release_lost(&mut self, up: [bool; 2]) {
        while let Some((_, h)) = self.lowest_waiting() {
            let lost = (0..2)
                .filter(|&p| up[p])
                .all(|p| self.high[p].is_some_and(|s| s > self.next));
            if !lost || !up.iter().any(|u| *u) {
                break;
            }
            self.skip_to(h.seq);
            self.release_in_order();
        }
    }

    fn release(&mut self, i: usize) {
        if let Some(h) = self.slots[i].as_mut() {
            h.ready = true;
            self.ready.push_back(i as u8);
        }
    }

    /// Releases everything held, in order (a key change).
    fn release_all(&mut self) {
        while let Some((i, h)) = self.lowest_waiting() {
            self.skip_to(h.seq);
            self.release(i);
            self.next = h.seq.saturating_add(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const P1: PathId = PathId::FIRST;
    const P2: PathId = PathId::SECOND;
    const UP: [bool; 2] = [true, true];

    fn t(ms: u64) -> Instant {
        Instant::from_micros(ms * 1000)
    }

    /// Feeds `(seq, path)` data frames (the frame's byte is its number) and returns the order
    /// of delivery, in place and from the buffer interleaved as a driver sees them: what a call
    /// delivers in place first, then what is ready.
    fn run(r: &mut Reorder, frames: &[(u32, PathId)], up: [bool; 2]) -> Vec<u32> {
        let mut order = Vec::new();
        for &(seq, path) in frames {
            let f = [seq as u8; 60];
            if r.arrive(t(0), 1, seq, path, Some(&f), up) == Placement::Now {
                order.push(seq);
            }
            let mut out = [0u8; 100];
            while let Some(n) = r.poll_ready(&mut out) {
                assert_eq!(n, 60);
                order.push(u32::from(out[0]));
            }
        }
        order
    }

    #[test]
    fn in_order_frames_pass_in_place_and_nothing_is_allocated() {
        let mut r = Reorder::new(1514, REORDER_WAIT);
        let got = run(&mut r, &[(0, P1), (1, P2), (2, P1), (3, P2)], UP);
        assert_eq!(got, [0, 1, 2, 3]);
        assert!(r.store.is_empty());
        assert_eq!(r.counters, ReorderCounters::default());
    }

    #[test]
    fn a_path_that_reorders_by_itself_makes_a_frame_late() {
        let mut r = Reorder::new(1514, REORDER_WAIT);
        // Path 2 carries 3 before 1: once path 1 carried 2 and path 2 carried 3, number 1 is
        // taken as lost; when it comes it is delivered at once, late.
        let got = run(&mut r, &[(0, P1), (2, P1), (3, P2), (1, P2), (4, P1)], UP);
        assert_eq!(got, [0, 2, 3, 1, 4]);
        assert_eq!((r.counters.gaps, r.counters.late), (1, 1));
    }

    #[test]
    fn a_gap_waits_until_the_other_path_catches_up() {
        let mut r = Reorder::new(1514, REORDER_WAIT);
        // 1 on path 2 is slower: 2 and 4 on path 1 wait; 1 comes, then 3 on path 2.
        let got = run(
            &mut r,
            &[(0, P2), (2, P1), (4, P1), (1, P2), (3, P2), (5, P2)],
            UP,
        );
        assert_eq!(got, [0, 1, 2, 3, 4, 5]);
        assert_eq!(r.counters.held, 2);
        assert_eq!((r.counters.gaps, r.counters.late), (0, 0));
    }

    #[test]
    fn a_lost_frame_is_given_up_as_soon_as_both_paths_carried_a_later_one() {
        let mut r = Reorder::new(1514, REORDER_WAIT);
        // 1 (path 2) is lost: 2 waits until path 2 carries 3.
        let got = run(&mut r, &[(0, P1), (2, P1), (3, P2), (4, P1)], UP);
        assert_eq!(got, [0, 2, 3, 4]);
        assert_eq!(r.counters.gaps, 1);
        assert_eq!(r.poll_timeout(), None);
    }

    #[test]
    fn with_one_path_up_a_gap_is_lost_at_once() {
        let mut r = Reorder::new(1514, REORDER_WAIT);
        let got = run(&mut r, &[(0, P1), (2, P1), (3, P1)], [true, false]);
        assert_eq!(got, [0, 2, 3]);
        assert_eq!(r.counters.gaps, 1);
    }

    #[test]
    fn a_silent_path_is_waited_for_at_most_reorder_wait() {
        let mut r = Reorder::new(1514, REORDER_WAIT);
        assert_eq!(r.arrive(t(0), 1, 0, P1, Some(&[0; 60]), UP), Placement::Now);
        assert_eq!(
            r.arrive(t(1), 1, 2, P1, Some(&[2; 60]), UP),
            Placement::Held
        );
        assert_eq!(r.poll_timeout(), Some(t(1) + REORDER_WAIT));
        r.handle_timeout(t(20));
        assert!(!r.has_ready());
        r.handle_timeout(t(21));
        let mut out = [0u8; 100];
        assert_eq!(r.poll_ready(&mut out), Some(60));
        assert_eq!(out[0], 2);
        assert_eq!(r.counters.gaps, 1);
        assert_eq!(r.poll_timeout(), None);
    }

    #[test]
    fn control_frames_fill_their_place() {
        let mut r = Reorder::new(1514, REORDER_WAIT);
        assert_eq!(r.arrive(t(0), 1, 0, P1, Some(&[0; 60]), UP), Placement::Now);
        assert_eq!(
            r.arrive(t(0), 1, 2, P1, Some(&[2; 60]), UP),
            Placement::Held
        );
        // 1 is a probe on path 2: handled now, and 2 follows it.
        assert_eq!(r.arrive(t(0), 1, 1, P2, None, UP), Placement::Now);
        let mut out = [0u8; 100];
        assert_eq!(r.poll_ready(&mut out), Some(60));
        assert_eq!(r.counters.gaps, 0);
    }

    #[test]
    fn frames_in_turn_queue_behind_released_ones() {
        let mut r = Reorder::new(1514, REORDER_WAIT);
        let mut order = Vec::new();
        // One batch: 0, 2 (held), 1 (releases 2), 3: 3 must not pass 2.
        for seq in [0u32, 2, 1, 3] {
            let path = if seq % 2 == 0 { P1 } else { P2 };
            if r.arrive(t(0), 1, seq, path, Some(&[seq as u8; 60]), UP) == Placement::Now {
                order.push(seq);
            }
        }
        let mut out = [0u8; 100];
        while r.poll_ready(&mut out).is_some() {
            order.push(u32::from(out[0]));
        }
        assert_eq!(order, [0, 1, 2, 3]);
    }

    #[test]
    fn a_new_key_releases_what_waits_and_follows_its_own_numbers() {
        let mut r = Reorder::new(1514, REORDER_WAIT);
        assert_eq!(r.arrive(t(0), 1, 5, P1, Some(&[5; 60]), UP), Placement::Now);
        assert_eq!(
            r.arrive(t(0), 1, 7, P1, Some(&[7; 60]), UP),
            Placement::Held
        );
        assert_eq!(
            r.arrive(t(0), 2, 0, P2, Some(&[0; 60]), UP),
            Placement::Held
        );
        let mut out = [0u8; 100];
        let mut got = Vec::new();
        while r.poll_ready(&mut out).is_some() {
            got.push(out[0]);
        }
        assert_eq!(got, [7, 0]);
        assert_eq!(r.arrive(t(0), 2, 1, P1, Some(&[1; 60]), UP), Placement::Now);
    }

    #[test]
    fn a_full_buffer_delivers_out_of_order_and_counts_it() {
        let mut r = Reorder::new(100, Duration::from_secs(1));
        assert_eq!(r.arrive(t(0), 1, 0, P1, Some(&[0; 60]), UP), Placement::Now);
        for seq in 2..2 + CAPACITY as u32 {
            assert_eq!(
                r.arrive(t(0), 1, seq, P1, Some(&[0; 60]), [true, true]),
                Placement::Held
            );
            // Path 2 never carries anything: nothing is known lost.
            r.high[1] = None;
        }
        let seq = 2 + CAPACITY as u32;
        assert_eq!(
            r.arrive(t(0), 1, seq, P1, Some(&[0; 60]), UP),
            Placement::Now
        );
        assert_eq!(r.counters.overflow, 1);
    }

    #[test]
    fn hostile_numbers_neither_panic_nor_stall() {
        let mut r = Reorder::new(64, REORDER_WAIT);
        let mut out = [0u8; 64];
        let mut x = 12345u32;
        for i in 0..10_000u32 {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
            let seq = if i % 3 == 0 { x } else { x % 200 };
            let path = if x & 1 == 0 { P1 } else { P2 };
            let len = (x >> 8) as usize % 80;
            let _ = r.arrive(
                t(u64::from(i)),
                1 + (x >> 30) % 2,
                seq,
                path,
                Some(&[1; 80][..len]),
                UP,
            );
            r.handle_timeout(t(u64::from(i)));
            while r.poll_ready(&mut out).is_some() {}
        }
        r.handle_timeout(t(1_000_000));
        while r.poll_ready(&mut out).is_some() {}
        assert_eq!(r.poll_timeout(), None);
        assert!(r.slots.iter().all(Option::is_none));
    }
}
