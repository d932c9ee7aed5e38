//! [`TimerTable`]: a peer's timers, each recorded when the decision that needs it is made (as
//! quinn-proto's `TimerTable`), so [`Peer::poll_timeout`](super::Peer::poll_timeout) is their
//! minimum and nothing is worked out again after the fact. A timer that fires is cleared before
//! its handler runs; the handler sets it again if it still needs it.

use crate::time::Instant;

/// One of a peer's timers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Timer {
    /// The running handshake's retransmission or deadline.
    Handshake,
    /// A key-ring session retires (its grace period ends) or expires.
    KeyExpiry,
    /// The current session is old enough for a rekey (`rekey_after`, once the peer used it) or
    /// near its expiry.
    Rekey,
    /// The backoff after a failed handshake ends.
    Backoff,
    /// A responder handshake whose initiator never answered its Accept may be given up.
    Stall,
    /// Nothing from the peer since this host sent to it, for the liveness bound: the session
    /// goes down.
    Silence,
    /// This host heard from the peer and has sent it nothing since: a keepalive is due.
    Keepalive,
    /// The normalized stream's next frame is to be prepared (its slot less the lead).
    Departure,
    /// The paths' liveness check and probes ([`PROBE_EVERY`](super::PROBE_EVERY)).
    Probe,
    /// A frame in the reorder buffer ([`PathMode::Both`](super::PathMode::Both)) has waited
    /// for the ones before it long enough ([`REORDER_WAIT`](super::REORDER_WAIT)).
    Reorder,
}

impl Timer {
    /// Every timer, in table order.
    pub const ALL: [Self; 10] = [
        Self::Handshake,
        Self::KeyExpiry,
        Self::Rekey,
        Self::Backoff,
        Self::Stall,
        Self::Silence,
        Self::Keepalive,
        Self::Departure,
        Self::Probe,
        Self::Reorder,
    ];

    /// Its name (status, tests).
    pub fn name(self) -> &'static str {
        match self {
            Self::Handshake => "handshake",
            Self::KeyExpiry => "key_expiry",
            Self::Rekey => "rekey",
            Self::Backoff => "backoff",
            Self::Stall => "stall",
            Self::Silence => "silence",
            Self::Keepalive => "keepalive",
            Self::Departure => "departure",
            Self::Probe => "probe",
            Self::Reorder => "reorder",
        }
    }

    const fn index(self) -> usize {
        self as usize
    }
}

/// When each of a peer's timers fires, if it is set.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TimerTable {
    at: [Option<Instant>; 10],
    /// The earliest of `at`.
    next: Option<Instant>,
}

impl TimerTable {
    /// When `t` fires, if it is set.
    pub fn get(&self, t: Timer) -> Option<Instant> {
        self.at[t.index()]
    }

    /// The earliest timer.
    pub fn next(&self) -> Option<Instant> {
        self.next
    }

    /// Sets `t` to fire at `at`.
    pub(crate) fn set(&mut self, t: Timer, at: Instant) {
        self.at[t.index()] = Some(at);
        self.next = self.at.iter().flatten().min().copied();
    }

    /// Sets `t` to `at`, or stops it (`None`).
    pub(crate) fn set_opt(&mut self, t: Timer, at: Option<Instant>) {
        match at {
            Some(at) => self.set(t, at),
            None => self.stop(t),
        }
    }

    /// Stops `t`.
    pub(crate) fn stop(&mut self, t: Timer) {
        if self.at[t.index()].take().is_some() {
            self.next = self.at.iter().flatten().min().copied();
        }
    }

    /// Whether `t` is set.
    pub(crate) fn is_set(&self, t: Timer) -> bool {
        self.at[t.index()].is_some()
    }

    /// Takes the first timer due at `now`, if any (it is stopped).
    pub(crate) fn take_due(&mut self, now: Instant) -> Option<Timer> {
        if self.next.is_none_or(|n| n > now) {
            return None;
        }
        let t = Timer::ALL
            .into_iter()
            .find(|t| self.at[t.index()].is_some_and(|at| at <= now))?;
        self.stop(t);
        Some(t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_earliest_timer_is_next_and_due_timers_are_taken_once() {
        let mut t = TimerTable::default();
        assert_eq!(t.next(), None);
        t.set(Timer::Rekey, Instant::from_secs(5));
        t.set(Timer::Handshake, Instant::from_secs(2));
        t.set(Timer::Silence, Instant::from_secs(9));
        assert_eq!(t.next(), Some(Instant::from_secs(2)));
        // Moving the earliest later moves `next` with it.
        t.set(Timer::Handshake, Instant::from_secs(4));
        assert_eq!(t.next(), Some(Instant::from_secs(4)));
        t.set(Timer::Handshake, Instant::from_secs(2));
        assert_eq!(t.take_due(Instant::from_secs(1)), None);
        assert_eq!(t.take_due(Instant::from_secs(6)), Some(Timer::Handshake));
        assert_eq!(t.take_due(Instant::from_secs(6)), Some(Timer::Rekey));
        assert_eq!(t.take_due(Instant::from_secs(6)), None);
        assert_eq!(t.next(), Some(Instant::from_secs(9)));
        t.stop(Timer::Silence);
        assert_eq!(t.next(), None);
        t.set_opt(Timer::Backoff, Some(Instant::from_secs(3)));
        assert!(t.is_set(Timer::Backoff));
        t.set_opt(Timer::Backoff, None);
        assert!(!t.is_set(Timer::Backoff));
    }
}
