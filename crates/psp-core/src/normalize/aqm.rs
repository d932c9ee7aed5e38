//! Active queue management for the inner transmit queue: CoDel (RFC 8289) or the paper's
//! drop-tail.
//!
//! The inner queue sits in front of the pacer, so its drain rate is S_current, which can be far
//! below what the protected hosts' TCP assumes. Drop-tail lets a single cubic flow fill the
//! whole byte cap (64 KiB: about 100 ms at 5 Mbit/s, and more milliseconds at lower rates).
//! CoDel bounds the *time* a frame waits instead: every queued frame carries its enqueue instant,
//! and when the frame reaches the head of the queue at a transmit slot (RFC 8289's "dequeue") its
//! sojourn time drives the control law. The byte cap stays as a hard memory bound (drop-tail
//! beyond it, counted separately).
//!
//! With [`CodelParams::ecn`] (the default, as Linux's fq_codel) a frame that CoDel picks and
//! that carries an ECN-capable IPv4 or IPv6 packet is marked Congestion Experienced instead of
//! dropped ([`set_ce`]): the inner TCP halves its window without losing a segment.
//!
//! What this does *not* do: it never changes the outer schedule. Frames leave at the pacer's
//! slots whether the queue holds data, dummies or nothing; CoDel only decides which inner frames
//! are dropped, which only the inner hosts can see (as loss, which their TCP reacts to).

use crate::time::{Duration, Instant};

/// How the inner transmit queue drops frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Aqm {
    /// Drop-tail only (the paper's queue): a frame that does not fit the byte cap is refused.
    DropTail,
    /// CoDel (RFC 8289) on each frame's sojourn time, drop-tail at the byte cap.
    Codel(CodelParams),
}

impl Default for Aqm {
    fn default() -> Self {
        Self::Codel(CodelParams::default())
    }
}

/// CoDel's parameters (RFC 8289 §4.3, §4.4) and whether it marks ECN-capable frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CodelParams {
    /// The acceptable standing queue delay (RFC default 5 ms).
    pub target: Duration,
    /// The window over which the delay must stay above `target` before dropping starts, and
    /// the base of the drop spacing `interval / sqrt(count)` (RFC default 100 ms).
    pub interval: Duration,
    /// Mark ECN-capable inner IP packets (CE) instead of dropping them (RFC 8289 §5.1's
    /// "drop or mark"; default true, as Linux's fq_codel).
    pub ecn: bool,
}

impl Default for CodelParams {
    fn default() -> Self {
        Self {
            target: Duration::from_millis(5),
            interval: Duration::from_millis(100),
            ecn: true,
        }
    }
}

impl CodelParams {
    /// Whether `0 < target <= interval`.
    pub const fn is_valid(&self) -> bool {
        self.target.total_micros() > 0 && self.target.total_micros() <= self.interval.total_micros()
    }
}

/// The head of a queue as CoDel sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Head {
    /// How long the head frame has been queued.
    pub(crate) sojourn: Duration,
    /// Bytes queued behind the head (RFC 8289's `bytes()` after the dequeue).
    pub(crate) backlog: usize,
}

/// The queue operations CoDel needs.
pub(crate) trait Queue {
    /// The head frame at `now`, or `None` if the queue is empty.
    fn head(&self, now: Instant) -> Option<Head>;
    /// Removes the head frame (dropped).
    fn drop_head(&mut self);
    /// Marks the head frame Congestion Experienced if it is ECN-capable ([`set_ce`]); whether
    /// it did (the frame stays queued either way).
    fn mark_head(&mut self) -> bool;
}

/// The CoDel state machine of RFC 8289 §5 (the Linux variant of the count reuse), sans-I/O.
///
/// [`Codel::dequeue`] is called once for every frame that reaches the head of the queue at a
/// transmit opportunity (and once when an opportunity finds the queue empty). It may drop head
/// frames; the head it leaves is the one to send.
#[derive(Clone, Debug)]
pub(crate) struct Codel {
    params: CodelParams,
    // RFC 8289's MAXPACKET: no drop while at most this many bytes wait behind the head (a link
    // so slow that one frame takes longer than `target` must still keep a frame queued).
    max_packet: usize,
    first_above_time: Option<Instant>,
    drop_next: Instant,
    count: u32,
    lastcount: u32,
    dropping: bool,
    drops: u64,
    marks: u64,
}

impl Codel {
    /// A controller with these parameters; `max_packet` is the largest frame's length.
    pub(crate) fn new(params: CodelParams, max_packet: usize) -> Self {
        Self {
            params,
            max_packet,
            first_above_time: None,
            drop_next: Instant::ZERO,
            count: 0,
            lastcount: 0,
            dropping: false,
            drops: 0,
            marks: 0,
        }
    }

    /// Frames marked CE so far (instead of a drop).
    pub(crate) fn marks(&self) -> u64 {
        self.marks
    }

    /// Frames dropped so far.
    pub(crate) fn drops(&self) -> u64 {
        self.drops
    }

    /// Whether the controller is in its dropping state.
    #[cfg(test)]
    pub(crate) fn dropping(&self) -> bool {
        self.dropping
    }

    /// RFC 8289's `dequeue()`: drops head frames as the control law says; the remaining head (if
    /// any) is the frame to send now.
    pub(crate) fn dequeue(&mut self, now: Instant, q: &mut impl Queue) {
        let ok_to_drop = self.ok_to_drop(now, q.head(now));
        if self.dropping {
            if !ok_to_drop {
                // Sojourn time below target: leave the dropping state.
                self.dropping = false;
            }
            // A large backlog can make the next drop due at once, hence the loop.
            while self.dropping && now >= self.drop_next {
                self.count = self.count.saturating_add(1);
                if self.mark(q) {
                    // A marked head stays and is sent: one signal per drop time (Linux).
                    self.drop_next = self.control_law(self.drop_next);
                    return;
                }
                self.drop(q);
                if self.ok_to_drop(now, q.head(now)) {
                    self.drop_next = self.control_law(self.drop_next);
                } else {
                    self.dropping = false;
                }
            }
        } else if ok_to_drop {
            // Above target for a whole interval: enter the dropping state.
            if !self.mark(q) {
                self.drop(q);
                // The next head is evaluated (it updates first_above_time) but sent regardless.
                let _ = self.ok_to_drop(now, q.head(now));
            }
            self.dropping = true;
            // If the delay went above target soon after it last went below, the drop rate
            // that controlled the queue last time is a good start (RFC 8289 §5.5, Linux).
            let delta = self.count.wrapping_sub(self.lastcount);
            let recent = now - self.drop_next < mul(self.params.interval, 16);
            self.count = if delta > 1 && recent { delta } else { 1 };
            self.drop_next = self.control_law(now);
            self.lastcount = self.count;
        }
    }

    /// RFC 8289's `dodequeue()` minus the dequeue: whether the head may be dropped.
    fn ok_to_drop(&mut self, now: Instant, head: Option<Head>) -> bool {
        let Some(h) = head else {
            // An empty queue cannot be above target.
            self.first_above_time = None;
            return false;
        };
        if h.sojourn < self.params.target || h.backlog <= self.max_packet {
            // Went below: stay below for at least an interval before dropping again.
            self.first_above_time = None;
            return false;
        }
        match self.first_above_time {
            None => {
                self.first_above_time = Some(now + self.params.interval);
                false
            }
            Some(t) => now >= t,
        }
    }

    fn drop(&mut self, q: &mut impl Queue) {
        q.drop_head();
        self.drops += 1;
    }

    /// Marks the head instead of dropping it, if ECN is on and the head is ECN-capable.
    fn mark(&mut self, q: &mut impl Queue) -> bool {
        let marked = self.params.ecn && q.mark_head();
        self.marks += u64::from(marked);
        marked
    }

    /// `t + interval / sqrt(count)`, in integers: `sqrt(count) * 2^16 = isqrt(count * 2^32)`.
    fn control_law(&self, t: Instant) -> Instant {
        let root = (u128::from(self.count.max(1)) << 32).isqrt();
        let us = u128::from(self.params.interval.total_micros()) * (1 << 16) / root;
        t + Duration::from_micros(u64::try_from(us).unwrap_or(u64::MAX))
    }
}

fn mul(d: Duration, k: u64) -> Duration {
    Duration::from_micros(d.total_micros().saturating_mul(k))
}

const ETHERTYPE_VLAN: u16 = 0x8100;
const ETHERTYPE_QINQ: u16 = 0x88a8;
const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_IPV6: u16 = 0x86dd;
const ECN_MASK: u8 = 0b11;
const ECN_CE: u8 = 0b11;

/// Marks the IP packet in an Ethernet frame Congestion Experienced (RFC 3168), as Linux's
/// `INET_ECN_set_ce`: true if the packet is ECN-capable (ECT(0), ECT(1)) or already CE, false
/// (nothing changed) for Not-ECT, non-IP or truncated frames. Up to two VLAN tags are skipped;
/// the IPv4 header checksum is updated incrementally (RFC 1624).
pub fn set_ce(frame: &mut [u8]) -> bool {
    let mut off = 12;
    let ethertype = loop {
        let Some(t) = frame.get(off..off + 2) else {
            return false;
        };
        let t = u16::from_be_bytes([t[0], t[1]]);
        if (t == ETHERTYPE_VLAN || t == ETHERTYPE_QINQ) && off < 20 {
            off += 4;
        } else {
            break t;
        }
    };
    let ip = off + 2;
    match ethertype {
        ETHERTYPE_IPV4 => {
            let Some(h) = frame.get_mut(ip..ip + 20) else {
                return false;
            };
            if h[0] >> 4 != 4 {
                return false;
            }
            let ecn = h[1] & ECN_MASK;
            if ecn == 0 {
                return false;
            }
            if ecn == ECN_CE {
                return true;
            }
            let old = u16::from_be_bytes([h[0], h[1]]);
            h[1] |= ECN_CE;
            let new = u16::from_be_bytes([h[0], h[1]]);
            // RFC 1624 eqn. 3: HC' = ~(~HC + ~m + m').
            let hc = u16::from_be_bytes([h[10], h[11]]);
            let sum = ones_add(ones_add(!hc, !old), new);
            h[10..12].copy_from_slice(&(!sum).to_be_bytes());
            true
        }
        ETHERTYPE_IPV6 => {
            let Some(h) = frame.get_mut(ip..ip + 40) else {
                return false;
            };
            if h[0] >> 4 != 6 {
                return false;
            }
            // Traffic class: the low 4 bits of byte 0 and the high 4 of byte 1; ECN is its
            // low two bits, bits 4-5 of byte 1.
            let ecn = (h[1] >> 4) & ECN_MASK;
            if ecn == 0 {
                return false;
            }
            h[1] |= ECN_CE << 4;
            true
        }
        _ => false,
    }
}

/// One's complement addition of two 16-bit words.
fn ones_add(a: u16, b: u16) -> u16 {
    let s = u32::from(a) + u32::from(b);
    // s < 2^17: one fold suffices.
    ((s & 0xffff) + (s >> 16)) as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Frames of `len` bytes, each with its enqueue instant.
    #[derive(Default)]
    struct Fifo {
        frames: Vec<(Instant, usize)>,
        dropped: Vec<Instant>,
        now: Instant,
        // Every frame is ECN-capable; the instants of the marks.
        ect: bool,
        marked: Vec<Instant>,
    }

    impl Queue for Fifo {
        fn head(&self, now: Instant) -> Option<Head> {
            let (t, _) = *self.frames.first()?;
            Some(Head {
                sojourn: now - t,
                backlog: self.frames[1..].iter().map(|f| f.1).sum(),
            })
        }
        fn drop_head(&mut self) {
            self.frames.remove(0);
            self.dropped.push(self.now);
        }
        fn mark_head(&mut self) -> bool {
            if self.ect {
                self.marked.push(self.now);
            }
            self.ect
        }
    }

    impl Fifo {
        /// One transmit opportunity: CoDel, then the head leaves (if any).
        fn slot(&mut self, codel: &mut Codel, now: Instant) -> Option<Instant> {
            self.now = now;
            codel.dequeue(now, self);
            if self.frames.is_empty() {
                None
            } else {
                Some(self.frames.remove(0).0)
            }
        }
    }

    const MS: u64 = 1000;

    fn codel() -> Codel {
        Codel::new(CodelParams::default(), 1500)
    }

    /// A queue where every frame has waited `sojourn` at each 1 ms slot and 10 frames stay
    /// queued: a constant standing queue.
    fn standing(codel: &mut Codel, q: &mut Fifo, from_ms: u64, to_ms: u64, sojourn_ms: u64) {
        for ms in from_ms..to_ms {
            let now = Instant::from_millis(ms);
            while q.frames.len() < 10 {
                let t = Instant::from_micros((ms * MS).saturating_sub(sojourn_ms * MS));
                q.frames.push((t, 1000));
            }
            // Keep the sojourn constant: every queued frame entered sojourn_ms ago.
            for f in q.frames.iter_mut() {
                f.0 = Instant::from_micros((ms * MS).saturating_sub(sojourn_ms * MS));
            }
            let _ = q.slot(codel, now);
        }
    }

    #[test]
    fn no_drops_below_target() {
        let mut c = codel();
        let mut q = Fifo::default();
        standing(&mut c, &mut q, 0, 5000, 4);
        assert_eq!(c.drops(), 0);
        assert!(!c.dropping());
    }

    #[test]
    fn no_drops_with_at_most_one_frame_behind_the_head() {
        // A slow link: 50 ms per frame, two frames queued, sojourn far above target.
        let mut c = codel();
        let mut q = Fifo::default();
        for i in 0..200u64 {
            let now = Instant::from_millis(i * 50);
            while q.frames.len() < 2 {
                q.frames.push((now, 1500));
            }
            q.frames[0].0 = Instant::from_millis((i * 50).saturating_sub(100));
            let _ = q.slot(&mut c, now);
        }
        assert_eq!(c.drops(), 0);
    }

    #[test]
    fn drops_begin_one_interval_after_sojourn_exceeds_target() {
        let mut c = codel();
        let mut q = Fifo::default();
        standing(&mut c, &mut q, 0, 1000, 2);
        assert_eq!(c.drops(), 0);
        // From 1000 ms the sojourn is 20 ms: first_above_time = 1100 ms.
        standing(&mut c, &mut q, 1000, 1100, 20);
        assert_eq!(c.drops(), 0);
        standing(&mut c, &mut q, 1100, 1101, 20);
        assert_eq!(c.drops(), 1);
        assert_eq!(q.dropped, [Instant::from_millis(1100)]);
        assert!(c.dropping());
    }

    #[test]
    fn drop_spacing_is_interval_over_sqrt_count() {
        let mut c = codel();
        let mut q = Fifo::default();
        standing(&mut c, &mut q, 0, 2000, 20);
        // The sojourn passes the 5 ms target at 5 ms (the queue starts at 0), so the first
        // drop is at 105 ms, then after 100/sqrt(1), 100/sqrt(2), 100/sqrt(3), ... ms.
        let times: Vec<u64> = q.dropped.iter().map(|t| t.total_micros()).collect();
        assert_eq!(times[0], 105 * MS);
        assert!(times.len() > 10);
        let mut expect = times[0];
        for (i, &t) in times.iter().enumerate().skip(1) {
            let gap = 100_000.0 / (i as f64).sqrt();
            expect += gap as u64;
            // 1 ms slots: a drop happens at the first slot at or after drop_next; the
            // schedule itself runs from drop_next, so the error never accumulates.
            assert!(
                t + 50 >= expect && t < expect + MS + 50,
                "drop {i} at {t}, want ~{expect}"
            );
        }
    }

    #[test]
    fn leaves_dropping_state_below_target_and_reuses_count() {
        let mut c = codel();
        let mut q = Fifo::default();
        standing(&mut c, &mut q, 0, 1000, 20);
        assert!(c.dropping());
        let n = c.drops();
        let count = c.count;
        assert!(count > 5);
        standing(&mut c, &mut q, 1000, 1010, 1);
        assert!(!c.dropping());
        assert_eq!(c.drops(), n);
        // Above target again soon after: dropping resumes an interval later with the old
        // drop rate (count = count - lastcount), not from 1.
        standing(&mut c, &mut q, 1010, 1111, 20);
        assert!(c.dropping());
        assert_eq!(c.drops(), n + 1);
        assert_eq!(c.count, count - 1);
    }

    #[test]
    fn empty_queue_resets() {
        let mut c = codel();
        let mut q = Fifo::default();
        standing(&mut c, &mut q, 0, 300, 20);
        assert!(c.dropping());
        q.frames.clear();
        assert_eq!(q.slot(&mut c, Instant::from_millis(300)), None);
        assert!(!c.dropping());
        assert_eq!(c.first_above_time, None);
    }

    #[test]
    fn control_law_integer_sqrt() {
        let mut c = codel();
        // The root is rounded down, so the spacing is rounded up by at most a microsecond.
        for (count, want) in [(1, 100_000), (2, 70_711), (4, 50_000), (100, 10_000)] {
            c.count = count;
            assert_eq!(c.control_law(Instant::ZERO).total_micros(), want);
        }
    }

    #[test]
    fn ecn_capable_heads_are_marked_not_dropped() {
        let mut c = codel();
        let mut q = Fifo {
            ect: true,
            ..Fifo::default()
        };
        standing(&mut c, &mut q, 0, 2000, 20);
        assert_eq!(c.drops(), 0);
        // Same schedule as the drops of `drop_spacing_is_interval_over_sqrt_count`.
        assert_eq!(q.marked[0], Instant::from_millis(105));
        assert_eq!(q.marked[1], Instant::from_millis(205));
        assert_eq!(q.marked[2], Instant::from_millis(276));
        assert_eq!(c.marks(), q.marked.len() as u64);
        // With ECN off the same heads are dropped.
        let mut c = Codel::new(
            CodelParams {
                ecn: false,
                ..CodelParams::default()
            },
            1500,
        );
        let mut q = Fifo {
            ect: true,
            ..Fifo::default()
        };
        standing(&mut c, &mut q, 0, 2000, 20);
        assert_eq!(c.marks(), 0);
        assert!(q.marked.is_empty());
        assert_eq!(q.dropped[..3], [105, 205, 276].map(Instant::from_millis));
    }

    /// The IPv4 header checksum, computed from scratch.
    fn ipv4_checksum(h: &[u8]) -> u16 {
        let mut sum = 0u16;
        for (i, w) in h.chunks(2).enumerate() {
            if i != 5 {
                sum = ones_add(sum, u16::from_be_bytes([w[0], w[1]]));
            }
        }
        !sum
    }

    fn eth(ethertype: u16, ip: &[u8]) -> Vec<u8> {
        let mut f = vec![0u8; 12];
        f.extend_from_slice(&ethertype.to_be_bytes());
        f.extend_from_slice(ip);
        f
    }

    #[test]
    fn set_ce_ipv4_ipv6_vlan() {
        for tos in [0x01u8, 0x02, 0xb9, 0xfe] {
            let mut ip = [
                0x45, tos, 0x05, 0xdc, 0x12, 0x34, 0x40, 0x00, 0x40, 0x06, 0, 0, 10, 8, 1, 1, 10,
                8, 2, 1,
            ];
            let c = ipv4_checksum(&ip);
            ip[10..12].copy_from_slice(&c.to_be_bytes());
            let mut f = eth(ETHERTYPE_IPV4, &ip);
            assert!(set_ce(&mut f));
            assert_eq!(f[15] & 3, 3);
            assert_eq!(f[15] >> 2, tos >> 2, "DSCP kept");
            let h = &f[14..34];
            assert_eq!(
                u16::from_be_bytes([h[10], h[11]]),
                ipv4_checksum(h),
                "{tos:#x}"
            );
            // Already CE: true, unchanged.
            let before = f.clone();
            assert!(set_ce(&mut f));
            assert_eq!(f, before);
        }
        // Not-ECT, truncated, not IP: false and unchanged.
        let mut ip = [0u8; 20];
        ip[0] = 0x45;
        for mut f in [
            eth(ETHERTYPE_IPV4, &ip),
            eth(ETHERTYPE_IPV4, &[0x45, 2]),
            eth(0x0806, &[2; 28]),
        ] {
            let before = f.clone();
            assert!(!set_ce(&mut f));
            assert_eq!(f, before);
        }
        // IPv6, ECT(0) behind a VLAN tag: the traffic class' ECN bits become CE.
        let mut ip6 = [0u8; 40];
        ip6[0] = 0x6b;
        ip6[1] = 0x80 | 0x20;
        let mut tagged = vec![0x81, 0x00, 0x00, 0x05];
        tagged.extend_from_slice(&ETHERTYPE_IPV6.to_be_bytes());
        tagged.extend_from_slice(&ip6);
        let mut f = vec![0u8; 12];
        f.extend_from_slice(&tagged);
        assert!(set_ce(&mut f));
        assert_eq!((f[18], f[19]), (0x6b, 0xb0));
        ip6[1] = 0x80;
        let mut f = eth(ETHERTYPE_IPV6, &ip6);
        assert!(!set_ce(&mut f));
    }

    #[test]
    fn params_validity() {
        assert!(CodelParams::default().is_valid());
        let p = |t, i| CodelParams {
            target: Duration::from_millis(t),
            interval: Duration::from_millis(i),
            ecn: true,
        };
        assert!(!p(0, 100).is_valid());
        assert!(!p(200, 100).is_valid());
        assert!(p(100, 100).is_valid());
    }
}
