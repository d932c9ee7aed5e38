//! Anti-replay: an RFC 6479-style sliding bitmap window over the 32-bit PSP sequence number.
//!
//! The thesis (seed 004 §4.1) drops every frame whose SN is not greater than the last one seen.
//! That loses good frames whenever the network reorders (multipath, bonding, queueing in a
//! switch). We keep a bitmap of the last `window` sequence numbers instead, as IPsec does
//! (RFC 4303 §3.4.3, RFC 6479): a frame is accepted when its SN is newer than the highest seen, or
//! falls inside the window and has not been seen.
//!
//! Two steps, so that forged frames cannot move the window: [`ReplayWindow::check`] runs *before*
//! the ICV check and changes nothing; [`ReplayWindow::commit`] runs *after* the ICV passed.
//!
//! Storage is fixed (`[u64; 128]`, 1 KiB) so the window needs no allocation; its size is chosen at
//! run time up to [`MAX_WINDOW`]. The SN never wraps (a sealer refuses to pass `u32::MAX`), so no
//! wrap-around logic is needed here.

use core::fmt;

/// Bitmap blocks (64 bits each).
const BLOCKS: usize = 128;
/// Bits per block.
const BLOCK_BITS: u32 = u64::BITS;

/// The largest window this fixed storage supports: one block is kept as slack (RFC 6479 §2).
pub const MAX_WINDOW: u32 = (BLOCKS as u32 - 1) * BLOCK_BITS;
/// The default window: the largest, 8128 sequence numbers (WireGuard's too). The storage is the
/// same for every size, and a frame that another path or a socket buffer held back is accepted
/// as long as fewer than this many newer ones came first (a probe on an idle path overtakes
/// everything queued on the busy one).
pub const DEFAULT_WINDOW: u32 = MAX_WINDOW;

/// Why a sequence number was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReplayError {
    /// This sequence number was already accepted.
    Replayed,
    /// The sequence number is older than the window.
    TooOld,
    /// The requested window size is 0 or above [`MAX_WINDOW`].
    BadWindow,
}

impl fmt::Display for ReplayError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Replayed => "sequence number already seen",
            Self::TooOld => "sequence number older than the replay window",
            Self::BadWindow => "replay window size out of range",
        })
    }
}

impl core::error::Error for ReplayError {}

/// The receive-side anti-replay state for one sender and key.
#[derive(Clone)]
pub struct ReplayWindow {
    bitmap: [u64; BLOCKS],
    highest: Option<u32>,
    window: u32,
}

impl ReplayWindow {
    /// A window accepting the last `window` sequence numbers below the highest seen.
    ///
    /// # Errors
    /// [`ReplayError::BadWindow`] unless `1 <= window <= MAX_WINDOW`.
    pub fn new(window: u32) -> Result<Self, ReplayError> {
        if window == 0 || window > MAX_WINDOW {
            return Err(ReplayError::BadWindow);
        }
        Ok(Self {
            bitmap: [0; BLOCKS],
            highest: None,
            window,
        })
    }

    /// The window size in sequence numbers.
    pub fn window(&self) -> u32 {
        self.window
    }

    /// The highest sequence number committed so far.
    pub fn highest(&self) -> Option<u32> {
        self.highest
    }

    /// Forgets everything and starts over at `next`: `next` and above are accepted, everything
    /// below is refused (too old, or marked seen inside the window). For a sender that restarted
    /// with lower sequence numbers and proved it is live over a fresh authenticated channel.
    pub fn restart_at(&mut self, next: u32) {
        self.bitmap = [0; BLOCKS];
        self.highest = next.checked_sub(1);
        if let Some(highest) = self.highest {
            let low = highest.saturating_sub(self.window - 1);
            for seq in low..=highest {
                let (block, bit) = Self::position(seq);
                self.bitmap[block] |= bit;
            }
        }
    }

    /// Step 1, before the ICV check: would `seq` be accepted? Changes nothing.
    ///
    /// # Errors
    /// [`ReplayError::Replayed`] or [`ReplayError::TooOld`].
    pub fn check(&self, seq: u32) -> Result<(), ReplayError> {
        let Some(highest) = self.highest else {
            return Ok(());
        };
        if seq > highest {
            return Ok(());
        }
        if highest - seq >= self.window {
            return Err(ReplayError::TooOld);
        }
        let (block, bit) = Self::position(seq);
        if self.bitmap[block] & bit != 0 {
            return Err(ReplayError::Replayed);
        }
        Ok(())
    }

    /// Step 2, after the ICV passed: records `seq`, sliding the window forward if it is the newest.
    ///
    /// # Errors
    /// The same as [`check`](Self::check); the state is unchanged on error.
    pub fn commit(&mut self, seq: u32) -> Result<(), ReplayError> {
        self.check(seq)?;
        match self.highest {
            Some(highest) if seq <= highest => {}
            Some(highest) => {
                // Clear the blocks the window slides over (at most all of them).
                let old_block = highest / BLOCK_BITS;
                let new_block = seq / BLOCK_BITS;
                let steps = (new_block - old_block).min(BLOCKS as u32);
                for i in 1..=steps {
                    self.bitmap[(old_block.wrapping_add(i) as usize) % BLOCKS] = 0;
                }
                self.highest = Some(seq);
            }
            None => self.highest = Some(seq),
        }
        let (block, bit) = Self::position(seq);
        self.bitmap[block] |= bit;
        Ok(())
    }

    fn position(seq: u32) -> (usize, u64) {
        (
            (seq / BLOCK_BITS) as usize % BLOCKS,
            1u64 << (seq % BLOCK_BITS),
        )
    }
}

impl Default for ReplayWindow {
    fn default() -> Self {
        Self {
            bitmap: [0; BLOCKS],
            highest: None,
            window: DEFAULT_WINDOW,
        }
    }
}

impl fmt::Debug for ReplayWindow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReplayWindow")
            .field("highest", &self.highest)
            .field("window", &self.window)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use std::collections::BTreeSet;
    use std::vec::Vec;

    use proptest::prelude::*;

    use super::*;

    #[test]
    fn window_bounds() {
        assert_eq!(ReplayWindow::new(0).unwrap_err(), ReplayError::BadWindow);
        assert_eq!(
            ReplayWindow::new(MAX_WINDOW + 1).unwrap_err(),
            ReplayError::BadWindow
        );
        assert!(ReplayWindow::new(MAX_WINDOW).is_ok());
        assert_eq!(ReplayWindow::default().window(), DEFAULT_WINDOW);
        const { assert!(DEFAULT_WINDOW >= 1024) };
    }

    #[test]
    fn replay_and_reorder() {
        let mut w = ReplayWindow::new(64).unwrap();
        assert_eq!(w.highest(), None);
        w.commit(100).unwrap();
        assert_eq!(w.commit(100), Err(ReplayError::Replayed));
        // Reordered frames inside the window are accepted once.
        w.commit(98).unwrap();
        w.commit(99).unwrap();
        assert_eq!(w.check(98), Err(ReplayError::Replayed));
        // 100 - 37 = 63 < 64: still inside; 100 - 36 = 64: too old.
        w.commit(37).unwrap();
        assert_eq!(w.check(36), Err(ReplayError::TooOld));
        assert_eq!(w.highest(), Some(100));
    }

    #[test]
    fn check_does_not_change_state() {
        let mut w = ReplayWindow::default();
        w.commit(5).unwrap();
        w.check(6).unwrap();
        w.check(6).unwrap();
        assert_eq!(w.highest(), Some(5));
    }

    #[test]
    fn big_jump_clears_bitmap() {
        let mut w = ReplayWindow::new(MAX_WINDOW).unwrap();
        for s in 0..200 {
            w.commit(s).unwrap();
        }
        w.commit(1_000_000).unwrap();
        // Everything within the window below the new highest is fresh again.
        w.commit(1_000_000 - 1).unwrap();
        w.commit(1_000_000 - MAX_WINDOW + 1).unwrap();
        assert_eq!(w.check(1_000_000 - MAX_WINDOW), Err(ReplayError::TooOld));
    }

    #[test]
    fn top_of_sequence_space() {
        let mut w = ReplayWindow::default();
        w.commit(u32::MAX - 1).unwrap();
        w.commit(u32::MAX).unwrap();
        assert_eq!(w.check(u32::MAX), Err(ReplayError::Replayed));
        w.commit(u32::MAX - 5).unwrap();
    }

    /// The obvious model: remember every accepted SN.
    struct Model {
        seen: BTreeSet<u32>,
        highest: Option<u32>,
        window: u32,
    }

    impl Model {
        fn accept(&mut self, seq: u32) -> Result<(), ReplayError> {
            if let Some(h) = self.highest
                && seq <= h
                && h - seq >= self.window
            {
                return Err(ReplayError::TooOld);
            }
            if !self.seen.insert(seq) {
                return Err(ReplayError::Replayed);
            }
            self.highest = Some(self.highest.map_or(seq, |h| h.max(seq)));
            Ok(())
        }
    }

    proptest! {
        #[test]
        fn matches_model(
            window in 1u32..=MAX_WINDOW,
            base in 0u32..(u32::MAX - 100_000),
            steps in proptest::collection::vec((0u32..20_000, any::<bool>()), 1..400),
        ) {
            let mut w = ReplayWindow::new(window).unwrap();
            let mut m = Model { seen: BTreeSet::new(), highest: None, window };
            let mut accepted: Vec<u32> = Vec::new();
            for (off, replay_old) in steps {
                // Mix fresh SNs with deliberate replays of accepted ones.
                let seq = match (replay_old, accepted.last()) {
                    (true, Some(&s)) => s,
                    _ => base + off,
                };
                let expect = m.accept(seq);
                prop_assert_eq!(w.check(seq), expect);
                prop_assert_eq!(w.commit(seq), expect);
                if expect.is_ok() {
                    accepted.push(seq);
                }
                prop_assert_eq!(w.highest(), m.highest);
            }
        }
    }
}
