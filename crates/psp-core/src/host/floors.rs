//! Replay floors: what a restarted host needs so that a frame captured before the restart does
//! not open again after it. Sessions need none (their keys die with the host); a `key_file` key
//! and the group key live on, and their openers' windows would start empty. So the host asks
//! the caller to persist each such window's highest sequence number ([`HostEvent::ReplayFloors`],
//! every [`FLOOR_EVERY`] while windows move, and [`Host::replay_floors`] at a clean stop), and
//! starts each window above its floor at the next start ([`Resume`]).
//!
//! What this does not cover: frames that opened after the last floor was written, if the host
//! then crashed (at most [`FLOOR_EVERY`] of them; a clean stop writes the exact floors), and a
//! state directory lost or rolled back (the floors with it).

use alloc::vec::Vec;

use super::{Fingerprint, Host, HostEvent, Keying, Mac, Tai64n};
use crate::time::{Duration, Instant};

/// How often the host asks for its replay floors to be persisted while they move.
pub const FLOOR_EVERY: Duration = Duration::from_secs(10);

/// One window's floor: frames from `mac` under the key `key` on `path` are accepted only from
/// sequence number `next` on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ReplayFloor {
    /// The sender's MAC.
    pub mac: Mac,
    /// The key (its fingerprint).
    pub key: Fingerprint,
    /// The path (0 or 1).
    pub path: u8,
    /// The lowest sequence number accepted.
    pub next: u32,
}

/// What a host resumes from at its start: the Request clock's floor and the replay floors
/// persisted by the run before (empty on a first start).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Resume {
    /// The Request clock's floor ([`HostEvent::ClockFloor`]).
    pub clock: Option<Tai64n>,
    /// The replay floors ([`HostEvent::ReplayFloors`]).
    pub floors: Vec<ReplayFloor>,
}

/// When to ask for the floors next, and what was asked for last.
#[derive(Debug)]
pub(crate) struct Floors {
    pub(crate) at: Instant,
    last: Vec<ReplayFloor>,
}

impl Floors {
    pub(crate) fn new(now: Instant) -> Self {
        Self {
            at: now + FLOOR_EVERY,
            last: Vec::new(),
        }
    }
}

impl Host {
    /// Every static-key window's floor now (the group key's per peer and path, and each
    /// `key_file` peer's own): persist them at a clean stop, pass them in [`Resume`] at the
    /// next start.
    pub fn replay_floors(&self) -> Vec<ReplayFloor> {
        let group = self.shared.group.fingerprint();
        let mut out = Vec::new();
        for p in &self.peers {
            let Some(&mac) = p.spec.macs.first() else {
                continue;
            };
            for (path, g) in p.group.iter().enumerate() {
                if let Some(h) = g.as_ref().and_then(|g| g.highest()) {
                    out.push(ReplayFloor {
                        mac,
                        key: group,
                        path: path as u8,
                        next: h.saturating_add(1),
                    });
                }
            }
            if let (Keying::Static(k), Some(u)) = (&p.spec.keying, &p.unicast)
                && let Some(h) = u.replay_window().highest()
            {
                out.push(ReplayFloor {
                    mac,
                    key: k.fingerprint(),
                    path: 0,
                    next: h.saturating_add(1),
                });
            }
        }
        out
    }

    /// Starts every window named by `floors` at its floor.
    pub(crate) fn restore_floors(&mut self, floors: &[ReplayFloor]) {
        if crate::plant::on(crate::plant::Bug::ForgetFloors) {
            return;
        }
        let group = self.shared.group.fingerprint();
        for f in floors {
            let Some(&pid) = self.by_mac.get(&f.mac) else {
                continue;
            };
            let p = &mut self.peers[pid.0];
            if f.key == group {
                if let Some(g) = p
                    .group
                    .get_mut(usize::from(f.path))
                    .and_then(Option::as_mut)
                {
                    g.restart_at(f.next);
                }
            } else if let (Keying::Static(k), Some(u)) = (&p.spec.keying, p.unicast.as_mut())
                && k.fingerprint() == f.key
                && f.path == 0
            {
                u.restart_replay_window(f.next);
            }
        }
    }

    /// The floor timer fired: asks for the floors if they moved since last asked.
    pub(crate) fn floors_due(&mut self, now: Instant) {
        self.floors.at = now + FLOOR_EVERY;
        let floors = self.replay_floors();
        if floors != self.floors.last {
            self.floors.last = floors.clone();
            self.shared
                .events
                .push_back(HostEvent::ReplayFloors(floors));
        }
    }
}
