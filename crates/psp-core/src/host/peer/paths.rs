//! [`Paths`]: which of a session peer's two paths are alive, and which one carries its data.
//!
//! Liveness is per path and comes only from authenticated frames: a frame of the peer that
//! opened under its session keys on a path proves that path works in the peer-to-us direction.
//! To keep that proof coming on a path that carries nothing else, each side sends a *probe*
//! (control message 0x02, sealed under the session like a keepalive; docs/SESSIONS.md, "Two
//! paths") on every path it sent nothing on for [`PROBE_EVERY`]. A path from which nothing
//! opened for [`DOWN_AFTER`] is down; the first frame that opens on it again brings it up.
//!
//! What the data path is, per [`PathMode`]:
//!
//! - [`PathMode::Thesis`]: path 1 always (the thesis: path 2 carries SMKEX's messages only; no
//!   probes);
//! - [`PathMode::Failover`]: path 1 while it is up, else path 2 while that is up, else path 1;
//! - [`PathMode::Both`]: the paths that are up in turn, frame by frame (path 1 if none is).
//!
//! Nothing here seals or reads a clock: the peer asks [`Paths::data_path`] where a frame goes,
//! tells [`Paths::sent`] and [`Paths::heard`] what happened, and runs [`Paths::tick`] at
//! [`Paths::next_tick`].

use crate::handshake::PathId;
use crate::time::{Duration, Instant};

/// How often a path that carried nothing from this host gets a probe, by default
/// ([`SessionSettings::probe_every`](crate::host::SessionSettings::probe_every)).
pub const PROBE_EVERY: Duration = Duration::from_millis(25);
/// A path from which nothing authenticated came for this long is down, by default
/// ([`SessionSettings::down_after`](crate::host::SessionSettings::down_after)).
pub const DOWN_AFTER: Duration = Duration::from_millis(100);

/// How a session peer's two paths are used (`[session] paths`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum PathMode {
    /// The thesis: data on path 1 only, path 2 for SMKEX's messages; no probes. A cut of path
    /// 1 stops the traffic.
    Thesis,
    /// Data on path 1; on path 2 while path 1 is down, back when it returns.
    #[default]
    Failover,
    /// Data on every path that is up, frame by frame in turn.
    Both,
}

impl PathMode {
    /// Its name in the configuration.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Thesis => "thesis",
            Self::Failover => "failover",
            Self::Both => "both",
        }
    }

    /// The mode of a name.
    pub fn from_name(name: &str) -> Option<Self> {
        [Self::Thesis, Self::Failover, Self::Both]
            .into_iter()
            .find(|m| m.name() == name)
    }
}

/// One path's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PathState {
    /// Whether frames of the peer open on it.
    pub up: bool,
    /// When it last went up or down (or the session started).
    pub since: Instant,
    /// When a frame of the peer last opened on it.
    pub last_heard: Option<Instant>,
    /// How often it went down.
    pub downs: u64,
}

/// A change of a path's state (for the host's events).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Change {
    /// The path.
    pub path: PathId,
    /// Up (else down).
    pub up: bool,
}

/// The two paths of one session peer (see the module docs).
#[derive(Clone, Debug)]
pub(crate) struct Paths {
    mode: PathMode,
    probe_every: Duration,
    down_after: Duration,
    /// 1 or 2.
    count: u8,
    state: [PathState; 2],
    last_sent: [Option<Instant>; 2],
    /// Probes owed, per path.
    probe_due: [bool; 2],
    /// [`PathMode::Both`]: the path of the next frame.
    turn: u8,
    /// Liveness runs (a session is up and there are two paths in a mode that uses them).
    running: bool,
    next_tick: Option<Instant>,
}

impl Paths {
    /// Two paths (or one) in `mode`, both presumed up, liveness not running yet.
    #[cfg(test)]
    pub(crate) fn new(mode: PathMode, count: u8, now: Instant) -> Self {
        Self::with_timing(mode, count, now, PROBE_EVERY, DOWN_AFTER)
    }

    /// Two paths (or one) in `mode`, both presumed up, liveness not running yet; probes every
    /// `probe_every`, a path down after `down_after`.
    pub(crate) fn with_timing(
        mode: PathMode,
        count: u8,
        now: Instant,
        probe_every: Duration,
        down_after: Duration,
    ) -> Self {
        let fresh = PathState {
            up: true,
            since: now,
            last_heard: None,
            downs: 0,
        };
        Self {
            mode,
            probe_every,
            down_after,
            count: count.clamp(1, 2),
            state: [fresh; 2],
            last_sent: [None; 2],
            probe_due: [false; 2],
            turn: 0,
            running: false,
            next_tick: None,
        }
    }

    /// The mode.
    pub(crate) fn mode(&self) -> PathMode {
        self.mode
    }

    /// Whether probes and failover apply: two paths, not [`PathMode::Thesis`].
    pub(crate) fn redundant(&self) -> bool {
        self.count == 2 && self.mode != PathMode::Thesis
    }

    /// A session is up (again, after none sealed): both paths count as up from `now`, and
    /// liveness runs. A rekey while it runs leaves the states as they are.
    pub(crate) fn start(&mut self, now: Instant) {
        // A rekey while liveness runs changes nothing: the paths' states stand.
        if !self.redundant() || self.running {
            return;
        }
        for s in &mut self.state {
            if !s.up {
                s.up = true;
                s.since = now;
            }
            s.last_heard = Some(s.last_heard.map_or(now, |t| t.max(now)));
        }
        self.running = true;
        self.next_tick = Some(now + self.probe_every);
    }

    /// No session any more: liveness stops (the states stay for status).
    pub(crate) fn stop(&mut self) {
        self.running = false;
        self.next_tick = None;
        self.probe_due = [false; 2];
    }

    /// State of `path`.
    pub(crate) fn state(&self, path: PathId) -> Option<&PathState> {
        (usize::from(path.0) < usize::from(self.count)).then(|| &self.state[usize::from(path.0)])
    }

    /// Whether `path` is up (an absent path is not).
    pub(crate) fn is_up(&self, path: PathId) -> bool {
        self.state(path).is_some_and(|s| s.up)
    }

    /// Where the next data frame goes (and, in [`PathMode::Both`], turns to the next path).
    pub(crate) fn data_path(&mut self) -> PathId {
        if !self.redundant() || crate::plant::on(crate::plant::Bug::NoFailover) {
            return PathId::FIRST;
        }
        let up = [self.state[0].up, self.state[1].up];
        match self.mode {
            PathMode::Thesis => PathId::FIRST,
            PathMode::Failover => {
                if !up[0] && up[1] {
                    PathId::SECOND
                } else {
                    PathId::FIRST
                }
            }
            PathMode::Both => match up {
                [true, true] => {
                    self.turn ^= 1;
                    PathId(self.turn ^ 1)
                }
                [false, true] => PathId::SECOND,
                _ => PathId::FIRST,
            },
        }
    }

    /// The path data would go on now, without turning ([`PathMode::Both`] answers path 1 when
    /// both are up): for messages that need one path, such as a normalized stream.
    pub(crate) fn steady_path(&self) -> PathId {
        if self.redundant()
            && !self.state[0].up
            && self.state[1].up
            && !crate::plant::on(crate::plant::Bug::NoFailover)
        {
            PathId::SECOND
        } else {
            PathId::FIRST
        }
    }

    /// This host sent a frame to the peer on `path`.
    pub(crate) fn sent(&mut self, path: PathId, now: Instant) {
        if let Some(t) = self.last_sent.get_mut(usize::from(path.0)) {
            *t = Some(now);
        }
        if let Some(d) = self.probe_due.get_mut(usize::from(path.0)) {
            *d = false;
        }
    }

    /// A frame of the peer opened on `path`: the path is up. Returns the change, if it was down.
    pub(crate) fn heard(&mut self, path: PathId, now: Instant) -> Option<Change> {
        let i = usize::from(path.0);
        if i >= usize::from(self.count) {
            return None;
        }
        let s = &mut self.state[i];
        s.last_heard = Some(now);
        if s.up || !self.running {
            return None;
        }
        s.up = true;
        s.since = now;
        Some(Change { path, up: true })
    }

    /// When [`tick`](Self::tick) is due.
    pub(crate) fn next_tick(&self) -> Option<Instant> {
        self.next_tick
    }

    /// Runs the liveness check at `now`: paths silent for [`DOWN_AFTER`] go down (returned, at
    /// most one change per path), and probes fall due on paths this host sent nothing on for
    /// [`PROBE_EVERY`].
    pub(crate) fn tick(&mut self, now: Instant) -> [Option<Change>; 2] {
        let mut changes = [None; 2];
        if !self.running {
            return changes;
        }
        let (down_after, probe_every) = (self.down_after, self.probe_every);
        for (i, (s, change)) in self.state.iter_mut().zip(&mut changes).enumerate() {
            let silent = s
                .last_heard
                .is_none_or(|t| now.saturating_since(t) >= down_after);
            if s.up && silent {
                s.up = false;
                s.since = now;
                s.downs += 1;
                *change = Some(Change {
                    path: PathId(i as u8),
                    up: false,
                });
            }
            let idle = self.last_sent[i].is_none_or(|t| now.saturating_since(t) >= probe_every);
            self.probe_due[i] |= idle;
        }
        self.next_tick = Some(now + self.probe_every);
        changes
    }

    /// Whether a probe is owed on a path.
    pub(crate) fn probe_pending(&self) -> bool {
        self.probe_due.iter().any(|d| *d)
    }

    /// The next path a probe is owed on (and clears it), if any.
    pub(crate) fn take_probe(&mut self) -> Option<PathId> {
        let i = self.probe_due.iter().position(|d| *d)?;
        self.probe_due[i] = false;
        Some(PathId(i as u8))
    }
}

#[cfg(test)]
mod tests {
    use alloc::vec::Vec;

    use super::*;

    fn ms(n: u64) -> Instant {
        Instant::from_millis(n)
    }

    fn running(mode: PathMode) -> Paths {
        let mut p = Paths::new(mode, 2, ms(0));
        p.start(ms(0));
        p
    }

    /// Runs ticks from `from` to `to` (every PROBE_EVERY), the peer heard on `heard` paths at
    /// each tick; the changes seen.
    fn run(p: &mut Paths, from: u64, to: u64, heard: [bool; 2]) -> Vec<(u64, Change)> {
        let mut out = Vec::new();
        let mut t = from;
        while t <= to {
            for (i, h) in heard.iter().enumerate() {
                if *h && let Some(c) = p.heard(PathId(i as u8), ms(t)) {
                    out.push((t, c));
                }
            }
            for c in p.tick(ms(t)).into_iter().flatten() {
                out.push((t, c));
            }
            t += 25;
        }
        out
    }

    #[test]
    fn failover_moves_data_to_path_2_within_the_bound_and_back_at_once() {
        let mut p = running(PathMode::Failover);
        assert_eq!(p.data_path(), PathId::FIRST);
        run(&mut p, 25, 1000, [true, true]);
        // Path 1 stops carrying anything at 1000 ms.
        let changes = run(&mut p, 1025, 1300, [false, true]);
        let (at, c) = changes[0];
        assert_eq!(
            c,
            Change {
                path: PathId::FIRST,
                up: false
            }
        );
        assert!(
            at - 1000 <= DOWN_AFTER.total_millis() + PROBE_EVERY.total_millis(),
            "{at}"
        );
        assert_eq!(p.data_path(), PathId::SECOND);
        assert_eq!(p.state(PathId::FIRST).unwrap().downs, 1);
        // The first frame on path 1 brings it back, and data with it.
        assert_eq!(
            p.heard(PathId::FIRST, ms(1310)),
            Some(Change {
                path: PathId::FIRST,
                up: true
            })
        );
        assert_eq!(p.data_path(), PathId::FIRST);
    }

    #[test]
    fn both_alternates_over_the_paths_that_are_up() {
        let mut p = running(PathMode::Both);
        let firsts: Vec<_> = (0..4).map(|_| p.data_path().0).collect();
        assert_eq!(firsts, [0, 1, 0, 1]);
        run(&mut p, 25, 200, [true, false]);
        assert!(!p.is_up(PathId::SECOND));
        assert!((0..4).all(|_| p.data_path() == PathId::FIRST));
    }

    #[test]
    fn the_thesis_mode_and_one_path_never_probe_or_move() {
        for mut p in [running(PathMode::Thesis), {
            let mut p = Paths::new(PathMode::Failover, 1, ms(0));
            p.start(ms(0));
            p
        }] {
            assert!(run(&mut p, 25, 1000, [false, false]).is_empty());
            assert_eq!(p.take_probe(), None);
            assert_eq!(p.data_path(), PathId::FIRST);
            assert_eq!(p.next_tick(), None);
        }
    }

    #[test]
    fn probes_go_only_on_paths_that_carried_nothing() {
        let mut p = running(PathMode::Failover);
        p.sent(PathId::FIRST, ms(20));
        let _ = p.tick(ms(25));
        assert_eq!(p.take_probe(), Some(PathId::SECOND));
        assert_eq!(p.take_probe(), None);
        // A frame sent on the path before the probe went out cancels it.
        let _ = p.tick(ms(60));
        p.sent(PathId::FIRST, ms(61));
        p.sent(PathId::SECOND, ms(61));
        assert_eq!(p.take_probe(), None);
    }

    #[test]
    fn both_paths_down_sends_on_path_1_and_a_stopped_session_keeps_no_timer() {
        let mut p = running(PathMode::Failover);
        run(&mut p, 25, 400, [false, false]);
        assert!(!p.is_up(PathId::FIRST) && !p.is_up(PathId::SECOND));
        assert_eq!(p.data_path(), PathId::FIRST);
        p.stop();
        assert_eq!(p.next_tick(), None);
        // Heard while stopped: recorded, no change reported.
        assert_eq!(p.heard(PathId::FIRST, ms(500)), None);
        p.start(ms(600));
        assert!(p.is_up(PathId::FIRST) && p.is_up(PathId::SECOND));
    }

    #[test]
    fn a_rekey_while_a_path_is_down_keeps_it_down() {
        let mut p = running(PathMode::Failover);
        run(&mut p, 25, 300, [false, true]);
        assert!(!p.is_up(PathId::FIRST));
        p.start(ms(310));
        assert!(!p.is_up(PathId::FIRST), "still down");
        assert_eq!(p.data_path(), PathId::SECOND);
    }
}
