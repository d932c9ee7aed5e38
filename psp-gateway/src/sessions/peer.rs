//! [`PeerSession`]: one session peer's state shared by the transmit task (seals under the ring,
//! queues frames while there is no session), the receive task (opens under the ring, learns
//! the pin for group frames), the driver (installs keys) and `status`.

use core::net::IpAddr;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::collections::VecDeque;
use std::sync::{Mutex, MutexGuard, OnceLock};

use psp_core::handshake::{FailReason, KeyRing, KeyRingConfig};
use serde_json::{Map, Value};

use crate::dataplane::Mac;
use crate::dataplane::counters::Counter;

/// Every handshake failure counted, in a fixed order (the counter index), then `pin_unsaved`
/// (a first-use pin could not be written, so the session was refused) and `install` (the key
/// ring refused the keys).
pub(crate) const FAIL_REASONS: [&str; 13] = [
    "smkex_mismatch",
    "confirm_mismatch",
    "timeout",
    "no_common_suite",
    "too_few_paths",
    "bad_message",
    "identity_mismatch",
    "rate_limited",
    "expiry_refused",
    "bad_share",
    "not_for_us",
    "pin_unsaved",
    "install",
];

/// A token bucket for the handshake messages one peer may hand the driver, applied by the
/// receive tasks before anything is copied or queued: a flood costs the dataplane an AEAD open
/// and a counter, never a wake-up of the driver. A handshake is about six messages plus
/// retransmissions; the driver's own per-source request limit (20/s, burst 5) comes after.
#[derive(Debug, Clone, Copy)]
pub(crate) struct MessageBudget {
    tokens: u64,
    at: psp_core::time::Instant,
}

impl MessageBudget {
    /// Messages per second.
    const RATE: u64 = 50;
    /// Burst.
    const BURST: u64 = 20;
    /// Tokens are counted in millionths (one per µs at one message per second).
    const UNIT: u64 = 1_000_000;

    /// A full bucket.
    pub(crate) const fn new() -> Self {
        Self {
            tokens: Self::BURST * Self::UNIT,
            at: psp_core::time::Instant::ZERO,
        }
    }

    /// Takes one token if there is one.
    pub(crate) fn take(&mut self, now: psp_core::time::Instant) -> bool {
        let dt = now.saturating_since(self.at).total_micros();
        self.at = now;
        self.tokens = (self.tokens + dt.saturating_mul(Self::RATE)).min(Self::BURST * Self::UNIT);
        if self.tokens >= Self::UNIT {
            self.tokens -= Self::UNIT;
            true
        } else {
            false
        }
    }
}

/// Session counters of one peer.
#[derive(Debug, Default)]
pub(crate) struct SessionStats {
    /// Core time (µs) + 1 of the newest session's establishment; 0: none yet.
    pub(crate) established_us: AtomicU64,
    /// Index into `SuiteId::ALL` of the newest session's suite.
    pub(crate) suite: AtomicU64,
    /// Whether the newest session ran SMKEX over two paths.
    pub(crate) two_path: AtomicBool,
    /// Sessions established.
    pub(crate) sessions: Counter,
    /// Sessions established while another was current (rekeys).
    pub(crate) rekeys: Counter,
    /// Handshakes started by this host.
    pub(crate) initiated: Counter,
    /// The newest handshake's duration in µs, from start (or request) to keys.
    pub(crate) handshake_us: AtomicU64,
    /// Failures, parallel to [`FAIL_REASONS`].
    pub(crate) failures: [Counter; FAIL_REASONS.len()],
    /// Frames dropped for want of a session (queue full, or the handshake failed).
    pub(crate) no_session: Counter,
    /// Frames under a key id of no live session (e.g. the peer's session from before a restart).
    pub(crate) unknown_key: Counter,
    /// Unicast data frames under the group key: a session peer's data never uses it (dropped).
    pub(crate) group_unicast: Counter,
    /// Handshake messages dropped by the receive tasks' budget (a flood).
    pub(crate) messages_limited: Counter,
    /// Requests not newer than one already accepted from the peer (a replay after this host
    /// restarted, or a peer whose clock went back): ignored, no state, no answer.
    pub(crate) stale_requests: Counter,
}

impl SessionStats {
    /// Counts a failure by name (unknown names count as `bad_message`).
    pub(crate) fn fail(&self, reason: &str) {
        let i = FAIL_REASONS.iter().position(|r| *r == reason).unwrap_or(5);
        self.failures[i].add(1);
    }

    /// Counts a handshake failure.
    pub(crate) fn fail_reason(&self, reason: FailReason) {
        self.fail(reason.as_str());
    }
}

/// One session peer.
#[derive(Debug)]
pub(crate) struct PeerSession {
    /// The peer's name.
    pub(crate) name: String,
    /// The peer's (first) MAC: sessions are set up with it.
    pub(crate) mac: Mac,
    /// The data keys (previous / current / next).
    pub(crate) ring: Mutex<KeyRing>,
    /// The peer's pinned Ed25519 identity (config `identity`, or learnt on first use).
    pub(crate) pin: OnceLock<[u8; 32]>,
    /// `identity = "tofu"`: the driver pins the identity of the first session.
    pub(crate) tofu: bool,
    /// The configured address (SEP stage 1), if any.
    pub(crate) address: Option<IpAddr>,
    /// Counters.
    pub(crate) stats: SessionStats,
    pending: Mutex<VecDeque<Vec<u8>>>,
    cap: usize,
    kicked: AtomicBool,
    want: AtomicBool,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl PeerSession {
    /// A peer with no session yet.
    pub(crate) fn new(
        name: &str,
        mac: Mac,
        ring: KeyRingConfig,
        pin: Option<[u8; 32]>,
        tofu: bool,
        address: Option<IpAddr>,
        cap: usize,
    ) -> Self {
        let p = OnceLock::new();
        if let Some(k) = pin {
            let _ = p.set(k);
        }
        Self {
            name: name.to_string(),
            mac,
            ring: Mutex::new(KeyRing::new(ring)),
            pin: p,
            tofu,
            address,
            stats: SessionStats::default(),
            pending: Mutex::new(VecDeque::new()),
            cap,
            kicked: AtomicBool::new(false),
            want: AtomicBool::new(false),
        }
    }

    /// The key ring, locked (by one task at a time, per batch, never across an await).
    pub(crate) fn ring(&self) -> MutexGuard<'_, KeyRing> {
        lock(&self.ring)
    }

    /// Holds `frame` until the session is up; a full queue drops it (counted `no_session`).
    pub(crate) fn enqueue(&self, frame: &[u8]) {
        let mut q = lock(&self.pending);
        if q.len() >= self.cap {
            self.stats.no_session.add(1);
            return;
        }
        q.push_back(frame.to_vec());
    }

    /// The frames waiting for a session.
    pub(crate) fn take_pending(&self) -> VecDeque<Vec<u8>> {
        core::mem::take(&mut *lock(&self.pending))
    }

    /// The address hint from the first waiting frame.
    pub(crate) fn pending_hint(&self) -> Option<IpAddr> {
        lock(&self.pending)
            .front()
            .and_then(|f| super::peer_addr_from_frame(f))
    }

    /// Whether frames wait.
    pub(crate) fn has_pending(&self) -> bool {
        !lock(&self.pending).is_empty()
    }

    /// Marks the peer as needing the driver; `true` if it was not marked (send one kick).
    pub(crate) fn mark_kicked(&self) -> bool {
        !self.kicked.swap(true, Ordering::AcqRel)
    }

    /// Asks for a session even with no frame waiting (the peer sends under a key we lack).
    pub(crate) fn want_session(&self) {
        self.want.store(true, Ordering::Release);
    }

    /// Whether a session was asked for since the last call.
    pub(crate) fn take_want(&self) -> bool {
        self.want.swap(false, Ordering::AcqRel)
    }

    /// Clears the mark (the driver looked at the peer).
    pub(crate) fn clear_kicked(&self) {
        self.kicked.store(false, Ordering::Release);
    }

    /// Whether the newest session's suite has an ICV (only `none` has not): its frames'
    /// checksums can be trusted.
    pub(crate) fn suite_has_icv(&self) -> bool {
        psp_core::crypto::SuiteId::ALL
            .get(usize::try_from(self.stats.suite.load(Ordering::Relaxed)).unwrap_or(0))
            .is_none_or(|s| s.icv_len() > 0)
    }

    /// The session fields of the status document.
    pub(crate) fn to_json(&self, now_us: u64) -> Map<String, Value> {
        let s = &self.stats;
        let mut m = Map::new();
        let est = s.established_us.load(Ordering::Relaxed);
        let ring = self.ring();
        let live = ring.current().is_some();
        m.insert("state".into(), if live { "up" } else { "down" }.into());
        if est > 0 {
            let age = now_us.saturating_sub(est - 1) / 1_000_000;
            m.insert("age_s".into(), age.into());
            let suite = psp_core::crypto::SuiteId::ALL
                .get(usize::try_from(s.suite.load(Ordering::Relaxed)).unwrap_or(0))
                .map_or("?", |x| x.name());
            m.insert("suite".into(), suite.into());
            let paths = if s.two_path.load(Ordering::Relaxed) {
                "two-path"
            } else {
                "single-path"
            };
            m.insert("paths".into(), paths.into());
            m.insert(
                "handshake_ms".into(),
                (s.handshake_us.load(Ordering::Relaxed) as f64 / 1000.0).into(),
            );
        }
        if let Some(cur) = ring.current() {
            m.insert("key_id".into(), cur.key_id().get().into());
            m.insert("next_seq".into(), cur.next_seq().map_or(0, |q| q.0).into());
        }
        drop(ring);
        m.insert("sessions".into(), s.sessions.get().into());
        m.insert("rekeys".into(), s.rekeys.get().into());
        m.insert("initiated".into(), s.initiated.get().into());
        let mut f = Map::new();
        for (r, c) in FAIL_REASONS.iter().zip(&s.failures) {
            f.insert((*r).into(), c.get().into());
        }
        m.insert("handshake_failures".into(), Value::Object(f));
        m.insert("no_session".into(), s.no_session.get().into());
        m.insert("unknown_key".into(), s.unknown_key.get().into());
        m.insert("group_unicast".into(), s.group_unicast.get().into());
        m.insert("messages_limited".into(), s.messages_limited.get().into());
        m.insert("stale_requests".into(), s.stale_requests.get().into());
        if let Some(pin) = self.pin.get() {
            m.insert("identity".into(), hex::encode(pin).into());
        }
        m
    }
}
