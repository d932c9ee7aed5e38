//! The two segments (paths) between the hosts: each frame sent on one reaches every host on it
//! after the path's delay and jitter, unless it is lost; it may arrive twice; nothing crosses a
//! partitioned path. Every decision about a frame is keyed by its bytes and the seed (not by a
//! running generator), so a shrunk run keeps the decisions about the frames it still sends.

use std::collections::{BTreeMap, HashMap};

use psp_core::time::{Duration, Instant};

use super::scenario::Faults;
use super::{digest, mix};

/// Who put a frame on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Sender {
    /// An honest host (by index).
    Host(u8),
    /// The attacker.
    Attacker,
}

/// A frame on its way.
#[derive(Clone, Debug)]
pub(crate) struct InFlight {
    pub(crate) path: u8,
    pub(crate) from: Sender,
    pub(crate) frame: Vec<u8>,
}

/// The paths.
#[derive(Debug)]
pub(crate) struct Net {
    seed: u64,
    faults: Faults,
    queue: BTreeMap<(Instant, u64), InFlight>,
    seq: u64,
    /// When each path is down: (from, until).
    down: [Vec<(Instant, Instant)>; 2],
    /// How often each frame content was sent (the decision key of a repeat).
    sent: HashMap<u64, u32>,
    /// Frames lost to faults and partitions.
    pub(crate) lost: u64,
}

impl Net {
    pub(crate) fn new(seed: u64, faults: Faults) -> Self {
        Self {
            seed,
            faults,
            queue: BTreeMap::new(),
            seq: 0,
            down: [Vec::new(), Vec::new()],
            sent: HashMap::new(),
            lost: 0,
        }
    }

    /// Puts `frame` on `path` at `now`; it arrives after the path's delay (or at `not_before`,
    /// if later: the attacker held it).
    pub(crate) fn send(
        &mut self,
        now: Instant,
        path: u8,
        from: Sender,
        frame: Vec<u8>,
        not_before: Option<Instant>,
    ) {
        if self.is_down(path, now) {
            self.lost += 1;
            return;
        }
        let d = digest(&frame);
        let n = self.sent.entry(d).or_insert(0);
        *n += 1;
        let key = mix(self.seed ^ u64::from(path), d ^ u64::from(*n) << 48);
        let f = self.faults;
        if u64::from(f.loss) > key % 1000 {
            self.lost += 1;
            return;
        }
        let copies = if u64::from(f.dup) > (key >> 10) % 1000 {
            2
        } else {
            1
        };
        for c in 0..copies {
            let jitter = if f.jitter_us > 0 {
                (key >> 20).wrapping_add(c * 7919) % u64::from(f.jitter_us)
            } else {
                0
            };
            let mut at = now + Duration::from_micros(u64::from(f.delay_us) + jitter);
            if let Some(t) = not_before {
                at = at.max(t);
            }
            self.seq += 1;
            self.queue.insert(
                (at, self.seq),
                InFlight {
                    path,
                    from,
                    frame: frame.clone(),
                },
            );
        }
    }

    /// When the next frame arrives.
    pub(crate) fn next_at(&self) -> Option<Instant> {
        self.queue.keys().next().map(|(t, _)| *t)
    }

    /// The next frame due by `now`.
    pub(crate) fn pop_due(&mut self, now: Instant) -> Option<InFlight> {
        let (&(t, s), _) = self.queue.iter().next()?;
        if t > now {
            return None;
        }
        self.queue.remove(&(t, s))
    }

    /// Whether `path` carries nothing at `t`.
    pub(crate) fn is_down(&self, path: u8, t: Instant) -> bool {
        self.down[usize::from(path & 1)]
            .iter()
            .any(|(a, b)| *a <= t && t < *b)
    }

    /// `path` carries nothing from `from` until `until`.
    pub(crate) fn partition(&mut self, path: u8, from: Instant, until: Instant) {
        self.down[usize::from(path & 1)].push((from, until));
    }

    /// Faults and partitions stop; frames in flight arrive as they were going to.
    pub(crate) fn quiet(&mut self, now: Instant) {
        self.faults = Faults {
            delay_us: self.faults.delay_us,
            ..Faults::default()
        };
        for d in &mut self.down {
            d.retain(|(a, _)| *a < now);
            for (_, b) in d.iter_mut() {
                *b = (*b).min(now);
            }
        }
    }
}
