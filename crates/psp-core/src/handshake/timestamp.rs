//! Request freshness: the [`Tai64n`] timestamp every Request carries (WireGuard's idea), the
//! initiator's [`TimestampClock`] that never issues the same or a lower value twice, and the
//! responder's rule ([`Freshness`]): a Request is taken only if its timestamp is above the
//! highest one already accepted from that peer.
//!
//! The timestamp is inside the Request, so it is covered by the transcript hash and by the frame's
//! ICV and signature: an attacker without the group key cannot change it, and a replayed Request
//! is never newer than the one it copies. What it does not stop: an insider with the group key
//! (and, without identities, anybody who has it) can mint Requests with fresh timestamps.

/// A TAI64N label: 8 bytes of TAI64 seconds (2^62 + seconds since the Unix epoch, as WireGuard
/// writes it) and 4 bytes of nanoseconds, big-endian, so byte order is time order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Tai64n(pub [u8; 12]);

impl Tai64n {
    /// The encoded length.
    pub const LEN: usize = 12;
    /// The TAI64 label of the Unix epoch (WireGuard's base; leap seconds are not added).
    const BASE: u64 = 1 << 62;

    /// The label of `secs` seconds and `nanos` nanoseconds (at most 999,999,999) since the Unix
    /// epoch.
    pub fn from_unix(secs: u64, nanos: u32) -> Self {
        let mut b = [0u8; Self::LEN];
        b[..8].copy_from_slice(&Self::BASE.saturating_add(secs).to_be_bytes());
        b[8..].copy_from_slice(&nanos.min(999_999_999).to_be_bytes());
        Self(b)
    }

    /// The label of a wall-clock time (the caller reads the clock; times before the epoch give
    /// the epoch).
    #[cfg(feature = "std")]
    pub fn from_system_time(t: std::time::SystemTime) -> Self {
        let d = t.duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        Self::from_unix(d.as_secs(), d.subsec_nanos())
    }

    /// Seconds since the Unix epoch and nanoseconds.
    pub fn to_unix(self) -> (u64, u32) {
        let mut s = [0u8; 8];
        s.copy_from_slice(&self.0[..8]);
        let mut n = [0u8; 4];
        n.copy_from_slice(&self.0[8..]);
        (
            u64::from_be_bytes(s).saturating_sub(Self::BASE),
            u32::from_be_bytes(n),
        )
    }

    /// The next label: one nanosecond later.
    pub fn successor(self) -> Self {
        let (s, n) = self.to_unix();
        if n >= 999_999_999 {
            Self::from_unix(s.saturating_add(1), 0)
        } else {
            Self::from_unix(s, n + 1)
        }
    }

    /// This label plus `d` (a monotonic clock's progress since the label's instant).
    pub fn plus(self, d: crate::time::Duration) -> Self {
        let (s, n) = self.to_unix();
        let total = u64::from(n) + (d.total_micros() % 1_000_000) * 1000;
        Self::from_unix(
            s.saturating_add(d.total_micros() / 1_000_000 + total / 1_000_000_000),
            (total % 1_000_000_000) as u32,
        )
    }

    /// This label plus `secs` seconds.
    pub fn plus_secs(self, secs: u64) -> Self {
        let (s, n) = self.to_unix();
        Self::from_unix(s.saturating_add(secs), n)
    }
}

/// The initiator's source of Request timestamps: the wall clock, but never equal to or below a
/// value issued before. Across restarts the caller persists [`reserved`](Self::reserved) and
/// starts the next clock with [`resume`](Self::resume), so a wall clock that went back (a host
/// without a battery clock, an NTP step) still issues increasing values.
#[derive(Clone, Copy, Debug, Default)]
pub struct TimestampClock {
    last: Tai64n,
    reserved: Tai64n,
}

impl TimestampClock {
    /// How far ahead of the last issued value [`reserve_due`](Self::reserve_due) asks the caller
    /// to persist a floor, in seconds.
    pub const RESERVE_SECS: u64 = 60;

    /// A clock that has issued nothing (a first start).
    pub const fn new() -> Self {
        Self {
            last: Tai64n([0; Tai64n::LEN]),
            reserved: Tai64n([0; Tai64n::LEN]),
        }
    }

    /// A clock that issues only values above `floor` (the persisted reservation of the run
    /// before).
    pub fn resume(floor: Tai64n) -> Self {
        Self {
            last: floor,
            reserved: floor,
        }
    }

    /// The timestamp for a new Request, given the wall clock now: `max(wall, last + 1 ns)`.
    pub fn issue(&mut self, wall: Tai64n) -> Tai64n {
        let t = wall.max(self.last.successor());
        self.last = t;
        t
    }

    /// If the values issued have come within [`RESERVE_SECS`](Self::RESERVE_SECS) / 2 of the
    /// persisted floor, the new floor to persist (then call [`reserved`](Self::reserved) with it
    /// once it is durable). Issuing never waits for it: a crash before the write only matters if
    /// the wall clock also went back.
    pub fn reserve_due(&self) -> Option<Tai64n> {
        let soon = self.last.plus_secs(Self::RESERVE_SECS / 2);
        (soon >= self.reserved).then(|| self.last.plus_secs(Self::RESERVE_SECS))
    }

    /// The floor `t` is durable.
    pub fn reserved(&mut self, t: Tai64n) {
        self.reserved = self.reserved.max(t);
    }

    /// The last value issued.
    pub fn last(&self) -> Tai64n {
        self.last
    }
}

/// The responder's memory of one peer's Requests: the highest timestamp accepted. Kept in memory
/// only (docs/SESSIONS.md, "Freshness"): after a restart the first Request accepted may be an
/// old one replayed, which cannot complete without the initiator's keys, and any newer genuine
/// Request replaces it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Freshness {
    highest: Option<Tai64n>,
}

impl Freshness {
    /// Nothing accepted yet.
    pub const fn new() -> Self {
        Self { highest: None }
    }

    /// Whether a Request stamped `t` is newer than every one accepted (changes nothing).
    pub fn is_fresh(&self, t: Tai64n) -> bool {
        self.highest.is_none_or(|h| t > h)
    }

    /// Records that a Request stamped `t` was accepted.
    pub fn accept(&mut self, t: Tai64n) {
        self.highest = Some(self.highest.map_or(t, |h| h.max(t)));
    }

    /// The highest timestamp accepted.
    pub fn highest(&self) -> Option<Tai64n> {
        self.highest
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `plus` carries nanoseconds into seconds; `from_system_time` reads the Unix epoch's
    /// offset; `highest` is the newest Request taken.
    #[test]
    fn plus_carries_and_the_clock_reads_the_epoch() {
        let t =
            Tai64n::from_unix(5, 999_000_000).plus(crate::time::Duration::from_micros(1_500_000));
        assert_eq!(t.to_unix(), (7, 499_000_000));
        let t = Tai64n::from_unix(5, 0).plus(crate::time::Duration::from_micros(2_250_000));
        assert_eq!(t.to_unix(), (7, 250_000_000));
        #[cfg(feature = "std")]
        {
            let five = std::time::UNIX_EPOCH + core::time::Duration::from_millis(5_001);
            assert_eq!(Tai64n::from_system_time(five).to_unix(), (5, 1_000_000));
        }
        let mut f = Freshness::default();
        assert_eq!(f.highest(), None);
        let newest = Tai64n::from_unix(9, 0);
        assert!(f.is_fresh(newest));
        f.accept(newest);
        assert_eq!(f.highest(), Some(newest));
    }

    #[test]
    fn labels_order_like_time() {
        let a = Tai64n::from_unix(1_700_000_000, 999_999_999);
        let b = a.successor();
        assert_eq!(b.to_unix(), (1_700_000_001, 0));
        assert!(b > a);
        assert!(Tai64n::from_unix(5, 0) < Tai64n::from_unix(5, 1));
        // WireGuard's encoding of the epoch.
        assert_eq!(
            Tai64n::from_unix(0, 0).0,
            [0x40, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]
        );
    }

    #[test]
    fn the_clock_never_repeats_or_goes_back() {
        let mut c = TimestampClock::new();
        let t1 = c.issue(Tai64n::from_unix(100, 0));
        let t2 = c.issue(Tai64n::from_unix(100, 0));
        let t3 = c.issue(Tai64n::from_unix(50, 0));
        assert!(t1 < t2 && t2 < t3);
        // A restart from the persisted floor, with the wall clock far behind it.
        let floor = c.reserve_due().unwrap();
        let mut c2 = TimestampClock::resume(floor);
        assert!(c2.issue(Tai64n::from_unix(10, 0)) > t3);
        assert_eq!(c2.reserve_due(), Some(floor.successor().plus_secs(60)));
    }

    #[test]
    fn reservations_are_asked_for_ahead_of_use() {
        let mut c = TimestampClock::new();
        c.issue(Tai64n::from_unix(1000, 0));
        let r = c.reserve_due().unwrap();
        assert_eq!(r, Tai64n::from_unix(1060, 0));
        c.reserved(r);
        assert_eq!(c.reserve_due(), None);
        c.issue(Tai64n::from_unix(1031, 0));
        assert!(c.reserve_due().is_some());
    }

    #[test]
    fn only_newer_requests_are_fresh() {
        let mut f = Freshness::new();
        let t = Tai64n::from_unix(7, 7);
        assert!(f.is_fresh(t));
        f.accept(t);
        assert!(!f.is_fresh(t), "a replay");
        assert!(!f.is_fresh(Tai64n::from_unix(7, 6)));
        assert!(f.is_fresh(t.successor()));
    }
}
