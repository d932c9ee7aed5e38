//! The last few source MACs of frames dropped as `unknown_peer`, for `status`: the counter
//! says how many, the log names each MAC at most once a minute; this names them where the
//! administrator looks. A fixed table, updated in place: nothing is allocated per frame.

use psp_core::host::Mac;
use psp_core::time::Instant;

/// How many unknown sources `status` names.
pub(crate) const UNKNOWN_SHOWN: usize = 4;

/// One unknown source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct UnknownSource {
    /// Its MAC.
    pub(crate) mac: Mac,
    /// Frames from it since it (last) entered the table.
    pub(crate) frames: u64,
    /// When its last frame came.
    pub(crate) last: Instant,
}

/// The [`UNKNOWN_SHOWN`] unknown sources heard from most recently.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct UnknownSources {
    slots: [Option<UnknownSource>; UNKNOWN_SHOWN],
}

impl UnknownSources {
    /// Counts a frame from `mac`: its entry, or a new one in place of the source heard from
    /// least recently.
    pub(crate) fn note(&mut self, mac: Mac, now: Instant) {
        if let Some(s) = self.slots.iter_mut().flatten().find(|s| s.mac == mac) {
            s.frames += 1;
            s.last = now;
            return;
        }
        // An empty slot sorts first (`None < Some`), then the oldest.
        if let Some(oldest) = self.slots.iter_mut().min_by_key(|s| s.map(|s| s.last)) {
            *oldest = Some(UnknownSource {
                mac,
                frames: 1,
                last: now,
            });
        }
    }

    /// The sources, newest first.
    pub(crate) fn newest_first(&self) -> impl Iterator<Item = UnknownSource> {
        let mut v = self.slots;
        v.sort_unstable_by_key(|s| core::cmp::Reverse(s.map(|s| s.last)));
        v.into_iter().flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mac(n: u8) -> Mac {
        [2, 0, 0, 0, 0, n]
    }

    #[test]
    fn the_newest_sources_are_kept_with_their_counts() {
        let mut u = UnknownSources::default();
        assert_eq!(u.newest_first().count(), 0);
        for i in 0..3 {
            u.note(mac(1), Instant::from_millis(i));
        }
        u.note(mac(2), Instant::from_millis(10));
        let v: Vec<_> = u.newest_first().map(|s| (s.mac[5], s.frames)).collect();
        assert_eq!(v, [(2, 1), (1, 3)]);
        // A hundred forged sources: the table stays bounded, holding the last ones.
        for n in 0..100u8 {
            u.note(mac(100 + n), Instant::from_millis(100 + u64::from(n)));
        }
        let v: Vec<_> = u.newest_first().map(|s| s.mac[5]).collect();
        assert_eq!(v, [199, 198, 197, 196]);
        // A source heard again stays, and the least recent one gives way.
        u.note(mac(196), Instant::from_millis(300));
        u.note(mac(7), Instant::from_millis(301));
        let v: Vec<_> = u.newest_first().map(|s| (s.mac[5], s.frames)).collect();
        assert_eq!(v, [(7, 1), (196, 2), (199, 1), (198, 1)]);
    }
}
