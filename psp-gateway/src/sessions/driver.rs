//! The driver task: runs SEP/SMKEX handshakes for the session peers and installs their keys.
//!
//! It owns one [`Handshake`] per peer at most (bounded half-open state), a per-source token
//! bucket for requests ([`RequestLimiter`], WireGuard's 20/s with a burst of 5), and the
//! trust-on-first-use pins. It starts a handshake when a frame waits for a session, when the
//! current session is due for a rekey (sequence number, age, expiry) or when the peer sends
//! under a key we do not have (it restarted). A failure is counted by reason, logged once, and
//! retried after a backoff (1 s doubling to 32 s, ±12.5 % jitter). Handshake messages are
//! sealed under the group key (the thesis' choice) by the shared group sealer, so there is one
//! sequence-number stream per key, and sent on the path the handshake names.

use core::net::IpAddr;
use core::sync::atomic::Ordering;
use std::collections::HashMap;
use std::sync::Arc;

use psp_core::crypto::SuiteId;
use psp_core::handshake::identity::{ed25519_of, x25519_of};
use psp_core::handshake::messages::{Body, Repr, SuiteList};
use psp_core::handshake::{
    self, Event, FailReason, Freshness, Handshake, Identity, PathId, Peer, RequestLimiter, Role,
    SessionKeys, Tai64n, TimestampClock, Transmit,
};
use psp_core::time::{Duration, Instant};
use psp_core::wire::Protocol;
use rand_core::{OsRng, RngCore};
use tokio::sync::{mpsc, watch};

use super::{PeerSession, Tofu};
use crate::config::{SessionConfig, UplinkConfig};
use crate::dataplane::counters::Counter;
use crate::dataplane::set::PeerSet;
use crate::dataplane::{Mac, Shared};
use crate::io::{Batch, SLOT_LEN, Uplink};
use crate::state::StateDir;

/// What the dataplane tasks hand the driver.
#[derive(Debug)]
pub(crate) enum Inbound {
    /// The peer with this MAC needs a look (frames wait, a rekey is due, an unknown key id).
    Kick(Mac),
    /// A handshake message (the opened payload of a sub-protocol frame) from `from` on `path`.
    Message {
        /// The sender's MAC.
        from: Mac,
        /// The path it came on.
        path: PathId,
        /// The payload.
        bytes: Vec<u8>,
    },
}

/// The dataplane's end of the channel to the driver: never blocks, counts what it drops.
#[derive(Debug)]
pub(crate) struct Link {
    tx: mpsc::Sender<Inbound>,
    /// Messages and kicks dropped because the driver was behind (a flood).
    pub(crate) dropped: Counter,
}

/// How many messages may wait for the driver.
const CHANNEL: usize = 256;

impl Link {
    /// A link and the driver's receiving end.
    pub(crate) fn new() -> (Self, mpsc::Receiver<Inbound>) {
        let (tx, rx) = mpsc::channel(CHANNEL);
        (
            Self {
                tx,
                dropped: Counter::default(),
            },
            rx,
        )
    }

    /// Asks the driver to look at `peer` (once until it has).
    pub(crate) fn kick(&self, peer: &PeerSession) {
        if peer.mark_kicked() && self.tx.try_send(Inbound::Kick(peer.mac)).is_err() {
            peer.clear_kicked();
            self.dropped.add(1);
        }
    }

    /// Hands a handshake message to the driver.
    pub(crate) fn message(&self, from: Mac, path: PathId, bytes: &[u8]) {
        let m = Inbound::Message {
            from,
            path,
            bytes: bytes.to_vec(),
        };
        if self.tx.try_send(m).is_err() {
            self.dropped.add(1);
        }
    }
}

/// Per-peer driver state.
#[derive(Debug, Default)]
struct PeerState {
    hs: Option<Handshake>,
    /// When the running handshake started (for `handshake_ms`).
    started: Option<Instant>,
    /// No new handshake by this host before then (backoff after a failure).
    holdoff: Option<Instant>,
    /// Failures in a row.
    fails: u32,
    /// The peer's address as learnt (config, a frame, or a completed handshake it started).
    addr: Option<IpAddr>,
    /// The address in the Request of the running responder handshake: learnt only if that
    /// handshake completes (a Request alone is not authenticated).
    offered_addr: Option<IpAddr>,
    /// The highest Request timestamp accepted from the peer.
    freshness: Freshness,
    /// When the current session was established, and our role in it.
    established: Option<(Instant, Role)>,
    /// A responder's announcement and queued frames wait for the end of this drive.
    after_send: bool,
}

fn st_after_send(state: &mut HashMap<Mac, PeerState>, mac: Mac) {
    state.entry(mac).or_default().after_send = true;
}

/// The driver.
pub(crate) struct Driver {
    cfg: SessionConfig,
    identity: Option<Identity>,
    two_uplinks: bool,
    udp2: bool,
    uplinks: Vec<Arc<Uplink>>,
    shared: Arc<Shared>,
    set: watch::Receiver<Arc<PeerSet>>,
    peers: HashMap<Mac, Arc<PeerSession>>,
    state: HashMap<Mac, PeerState>,
    limiter: RequestLimiter<256>,
    tofu: Option<Tofu>,
    /// Where our Request timestamps come from; its floor persists in the state directory.
    clock: TimestampClock,
    state_dir: Arc<StateDir>,
    out: Batch,
    scratch: Vec<u8>,
    buf: Vec<u8>,
}

/// The control payload of a session keepalive (docs/SESSIONS.md, "Control messages"): type
/// 0x01, no body.
const KEEPALIVE: [u8; 1] = [0x01];

/// The state-directory file of the Request clock's floor (24 hex digits, a TAI64N label).
const CLOCK_FILE: &str = "request-clock";

/// The first retry backoff; doubles per failure in a row up to [`MAX_BACKOFF`].
const BACKOFF: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(32);
/// The longest sleep between two looks at every peer.
const TICK: Duration = Duration::from_millis(100);

impl Driver {
    /// A driver for `cfg` over `uplinks` (path 1, and path 2 if present).
    pub(crate) fn new(
        cfg: SessionConfig,
        uplink2: Option<&UplinkConfig>,
        uplinks: Vec<Arc<Uplink>>,
        shared: Arc<Shared>,
        set: watch::Receiver<Arc<PeerSet>>,
        state_dir: Arc<StateDir>,
    ) -> Self {
        let identity = cfg
            .identity
            .as_ref()
            .and_then(|f| Identity::from_seed(*f.seed).ok());
        let tofu = {
            let config = &set.borrow().config;
            match Tofu::load(&super::known_peers_path(config)) {
                Ok(t) => Some(t),
                Err(e) => {
                    tracing::error!(error = %e, "known_peers: first-use pins cannot be kept");
                    None
                }
            }
        };
        let clock = match state_dir.read(CLOCK_FILE) {
            Ok(Some(text)) => hex::decode(text.trim())
                .ok()
                .and_then(|b| <[u8; Tai64n::LEN]>::try_from(b).ok())
                .map_or_else(TimestampClock::new, |b| TimestampClock::resume(Tai64n(b))),
            Ok(None) => TimestampClock::new(),
            Err(e) => {
                tracing::warn!(error = %e, "request clock: starting from the wall clock");
                TimestampClock::new()
            }
        };
        Self {
            clock,
            state_dir,
            identity,
            two_uplinks: uplinks.len() >= 2,
            udp2: matches!(uplink2, Some(UplinkConfig::Udp { .. })),
            uplinks,
            shared,
            set,
            peers: HashMap::new(),
            state: HashMap::new(),
            limiter: RequestLimiter::new(),
            tofu,
            out: Batch::new(4),
            scratch: vec![0u8; SLOT_LEN],
            buf: vec![0u8; SLOT_LEN],
            cfg,
        }
    }

    /// Runs until the channel closes (the daemon stops).
    pub(crate) async fn run(mut self, mut rx: mpsc::Receiver<Inbound>) {
        self.refresh();
        loop {
            let now = self.shared.now();
            let wake = self.next_wake(now);
            let sleep = self.shared.origin
                + core::time::Duration::from_micros(
                    wake.saturating_since(Instant::ZERO).total_micros(),
                );
            tokio::select! {
                m = rx.recv() => match m {
                    None => return,
                    Some(m) => self.inbound(m).await,
                },
                _ = tokio::time::sleep_until(sleep.into()) => {}
                r = self.set.changed() => {
                    if r.is_err() {
                        return;
                    }
                    self.refresh();
                }
            }
            self.tick().await;
        }
    }

    /// Takes the session peers of the newest peer set (their pins came with them).
    fn refresh(&mut self) {
        let set = Arc::clone(&self.set.borrow_and_update());
        self.peers.clear();
        for s in set.sessions.iter().flatten() {
            self.peers.insert(s.mac, Arc::clone(s));
        }
        self.state.retain(|mac, _| self.peers.contains_key(mac));
    }

    fn next_wake(&self, now: Instant) -> Instant {
        let mut t = now + TICK;
        for st in self.state.values() {
            if let Some(x) = st.hs.as_ref().and_then(Handshake::poll_timeout) {
                t = t.min(x);
            }
        }
        t
    }

    async fn inbound(&mut self, m: Inbound) {
        match m {
            Inbound::Kick(mac) => {
                if let Some(p) = self.peers.get(&mac).cloned() {
                    p.clear_kicked();
                    self.consider(&p).await;
                }
            }
            Inbound::Message { from, path, bytes } => self.message(from, path, &bytes).await,
        }
    }

    /// Only peers with driver state (a session, a handshake, a backoff, frames that waited) are
    /// looked at: an idle peer has nothing that changes by time alone, and its first frame or
    /// message reaches the driver as a kick. With 1,000 mostly idle peers a tick stays cheap.
    async fn tick(&mut self) {
        let now = self.shared.now();
        let active: Vec<Mac> = self.state.keys().copied().collect();
        for mac in active {
            let Some(p) = self.peers.get(&mac).cloned() else {
                continue;
            };
            p.ring().handle_timeout(now);
            if let Some(st) = self.state.get_mut(&p.mac)
                && let Some(hs) = st.hs.as_mut()
                && hs.poll_timeout().is_some_and(|t| t <= now)
            {
                hs.handle_timeout(now);
                self.drive(&p).await;
            }
            self.consider(&p).await;
        }
    }

    /// Starts a handshake with `p` if it needs one and may have one.
    async fn consider(&mut self, p: &Arc<PeerSession>) {
        let now = self.shared.now();
        let st = self.state.entry(p.mac).or_default();
        if st.hs.is_some() || st.holdoff.is_some_and(|t| now < t) {
            return;
        }
        let (has_current, due, heard) = {
            let ring = p.ring();
            (
                ring.current().is_some(),
                ring.rekey_due(now) && ring.next().is_none(),
                ring.current_heard(),
            )
        };
        let rekey_after = self.cfg.rekey_after;
        let aged = st.established.is_some_and(|(at, role)| {
            let age = now.saturating_since(at);
            // The initiator of the current session rekeys on time; the responder a little
            // later, so normally only one side starts (crossings are resolved by MAC order).
            let slack = if role == Role::Initiator {
                Duration::ZERO
            } else {
                Duration::from_secs(3)
            };
            age.total_micros() >= rekey_after.total_micros() + slack.total_micros()
        });
        // The peer sent under a key we lack (we restarted, or our session expired first).
        let asked = p.take_want() && !has_current;
        let wanted = asked
            || p.has_pending()
            || (has_current && (due || (aged && heard)))
            || (due && st.established.is_some());
        if wanted {
            self.initiate(p, now);
            self.drive(p).await;
        }
    }

    fn hs_config(&self, paths: u8) -> handshake::Config {
        let (addr, prefix) = self.cfg.address;
        let mut c = handshake::Config::new(self.shared.mac, addr, prefix);
        c.suites = SuiteList::from_suites(&self.cfg.suites);
        c.smkex = self.cfg.smkex;
        c.paths = paths;
        c.lifetime = self.cfg.lifetime;
        c.min_lifetime = Duration::from_secs(60).min(self.cfg.lifetime);
        c.static_key = self.identity.as_ref().map(Identity::static_key);
        c
    }

    fn paths_to(&self, p: &PeerSession) -> u8 {
        let set = self.set.borrow();
        let endpoint2 = set
            .config
            .peers
            .iter()
            .find(|c| c.name == p.name)
            .is_some_and(|c| c.endpoint2.is_some());
        if self.two_uplinks && (!self.udp2 || endpoint2) {
            2
        } else {
            1
        }
    }

    fn peer_of(&self, p: &PeerSession, addr: IpAddr) -> Peer {
        Peer {
            mac: p.mac,
            addr,
            pinned_static: p.pin.get().and_then(x25519_of),
        }
    }

    /// The timestamp for our next Request: the wall clock, never at or below one issued before
    /// (this run or, through the persisted floor, an earlier one).
    fn request_timestamp(&mut self) -> Tai64n {
        let t = self
            .clock
            .issue(Tai64n::from_system_time(std::time::SystemTime::now()));
        if let Some(floor) = self.clock.reserve_due() {
            match self
                .state_dir
                .write(CLOCK_FILE, &format!("{}\n", hex::encode(floor.0)))
            {
                Ok(()) => self.clock.reserved(floor),
                Err(e) => tracing::warn!(error = %e, "request clock: floor not saved"),
            }
        }
        t
    }

    fn initiate(&mut self, p: &Arc<PeerSession>, now: Instant) {
        let hint = p.pending_hint();
        let st = self.state.entry(p.mac).or_default();
        let Some(addr) = p.address.or(st.addr).or(hint) else {
            // Nothing names the peer's address yet; the frames wait (or are dropped when the
            // queue is full) until one does, e.g. an IP packet after ARP.
            return;
        };
        st.addr = Some(addr);
        let cfg = self.hs_config(self.paths_to(p));
        let peer = self.peer_of(p, addr);
        let timestamp = self.request_timestamp();
        let hs = Handshake::initiate(now, cfg, peer, timestamp, &mut OsRng);
        p.stats.initiated.add(1);
        let st = self.state.entry(p.mac).or_default();
        st.hs = Some(hs);
        st.started = Some(now);
    }

    async fn message(&mut self, from: Mac, path: PathId, bytes: &[u8]) {
        let Some(p) = self.peers.get(&from).cloned() else {
            return;
        };
        let now = self.shared.now();
        let Ok(repr) = Repr::parse_bytes(bytes) else {
            p.stats.fail_reason(FailReason::BadMessage);
            return;
        };
        if let Body::Request(req) = repr.body {
            let st = self.state.entry(p.mac).or_default();
            if let Some(hs) = &mut st.hs
                && hs.session_id().initiator == repr.initiator_id
            {
                // A copy of the request this handshake answers (answered at most once per half
                // RTO by the core).
                let _ = hs.handle_message(now, path, bytes);
                self.drive(&p).await;
                return;
            }
            // Only a Request newer than every one accepted from this peer may start a handshake,
            // and so replace the one in progress: a replay never does (docs/SESSIONS.md,
            // "Freshness"). Checked before the token bucket, so replays cost no token either.
            if !st.freshness.is_fresh(req.timestamp) {
                p.stats.stale_requests.add(1);
                return;
            }
            // The token bucket next: a flood of fresh requests (an insider) is bounded.
            if let Err(r) = self.limiter.check(now, from) {
                p.stats.fail_reason(r);
                return;
            }
            let st = self.state.entry(p.mac).or_default();
            if let Some(hs) = &st.hs {
                // Crossing handshakes: the host with the lower MAC stays initiator.
                if hs.role() == Role::Initiator && !hs.is_closed() && self.shared.mac < from {
                    return;
                }
            }
            let cfg = self.hs_config(self.paths_to(&p));
            let peer = self.peer_of(&p, req.initiator_addr);
            match Handshake::respond(now, cfg, peer, path, bytes, &mut OsRng) {
                Ok(hs) => {
                    let st = self.state.entry(p.mac).or_default();
                    st.freshness.accept(req.timestamp);
                    st.hs = Some(hs);
                    st.started = Some(now);
                    st.offered_addr = Some(req.initiator_addr);
                }
                Err(r) => {
                    // Stage 1 refused it (not for us): the running handshake, if any, goes on.
                    p.stats.fail_reason(r);
                    return;
                }
            }
        } else if let Some(hs) = self.state.get_mut(&p.mac).and_then(|s| s.hs.as_mut()) {
            let _ = hs.handle_message(now, path, bytes);
        } else {
            return;
        }
        self.drive(&p).await;
    }

    /// Sends what the peer's handshake queued and handles what it reported.
    async fn drive(&mut self, p: &Arc<PeerSession>) {
        loop {
            let now = self.shared.now();
            let Some(hs) = self.state.get_mut(&p.mac).and_then(|s| s.hs.as_mut()) else {
                return;
            };
            // Events first: the keys are installed before the message that lets the peer use
            // them (ConfirmAck) leaves, so its first frame under them never finds them missing.
            if let Some(ev) = hs.poll_event() {
                match ev {
                    Event::Established(keys) => self.established(p, &keys, now).await,
                    Event::Failed(r) => self.failed(p, r.as_str(), now),
                }
                continue;
            }
            let Some(t) = hs.poll_transmit(now, &mut self.buf) else {
                break;
            };
            self.send(p, t).await;
        }
        if let Some(st) = self.state.get_mut(&p.mac)
            && core::mem::take(&mut st.after_send)
        {
            let now = self.shared.now();
            self.announce(p, now).await;
            self.flush_pending(p, now).await;
        }
        if let Some(st) = self.state.get_mut(&p.mac)
            && st.hs.as_ref().is_some_and(Handshake::is_closed)
        {
            st.hs = None;
        }
    }

    async fn send(&mut self, p: &PeerSession, t: Transmit) {
        let now = self.shared.now();
        let path = usize::from(t.path.0).min(self.uplinks.len() - 1);
        let endpoint = self.endpoint(p, path);
        let sealed = {
            let set = self.set.borrow();
            let mut group = set.group_sealer();
            let sealed = group
                .seal_sub(
                    now,
                    p.mac,
                    self.shared.mac,
                    t.protocol,
                    &self.buf[..t.len],
                    &mut self.scratch,
                )
                .map(<[u8]>::len);
            crate::dataplane::keep_reserved(&mut group, &self.shared.global);
            sealed
        };
        let len = match sealed {
            Ok(len) => len,
            Err(psp_core::session::SealError::Unreserved) => {
                self.shared.global.tx_unreserved.add(1);
                return;
            }
            Err(_) => {
                self.shared.global.tx_unsupported.add(1);
                return;
            }
        };
        self.out.clear();
        let frame = &self.scratch[..len];
        self.out.push_with(endpoint, |slot| {
            slot.get_mut(..len)?.copy_from_slice(frame);
            Some(len)
        });
        self.shared.global.group_tx_frames.add(1);
        self.transmit(path).await;
    }

    async fn transmit(&mut self, path: usize) {
        let Some(uplink) = self.uplinks.get(path) else {
            return;
        };
        match uplink.send_batch(&self.out).await {
            Ok(n) => self
                .shared
                .global
                .tx_error
                .add(self.out.len().saturating_sub(n) as u64),
            Err(e) => {
                self.shared.global.tx_error.add(self.out.len() as u64);
                tracing::debug!(error = %e, path, "session: send failed");
            }
        }
        self.out.clear();
    }

    async fn established(&mut self, p: &Arc<PeerSession>, keys: &SessionKeys, now: Instant) {
        // Trust on first use, only for a peer configured `identity = "tofu"`: pin the key the
        // peer proved it holds, durably, or refuse the session.
        if p.tofu
            && p.pin.get().is_none()
            && let Some(x) = keys.peer_static()
            && let Some(ed) = ed25519_of(&x)
        {
            let saved = match self.tofu.as_mut() {
                Some(tofu) => tofu.pin(&p.name, ed),
                None => Err(std::io::Error::other("known_peers could not be read")),
            };
            if let Err(e) = saved {
                tracing::error!(peer = %p.name, error = %e, "known_peers: cannot write the first-use pin; session refused");
                self.abandon(p, "pin_unsaved", now);
                return;
            }
            let _ = p.pin.set(ed);
            tracing::info!(peer = %p.name, identity = %hex::encode(ed), "peer identity pinned (first use)");
        }
        let had = p.ring().current().is_some();
        if let Err(e) = p.ring().install(now, keys) {
            tracing::warn!(peer = %p.name, error = %e, "session keys not installed");
            self.abandon(p, "install", now);
            return;
        }
        let st = self.state.entry(p.mac).or_default();
        if keys.role() == Role::Responder
            && let Some(addr) = st.offered_addr.take()
        {
            // The peer's address from its Request, now that the handshake it started completed.
            st.addr = Some(addr);
        }
        let took = st
            .started
            .map_or(0, |s| now.saturating_since(s).total_micros());
        st.established = Some((now, keys.role()));
        st.fails = 0;
        st.holdoff = None;
        let s = &p.stats;
        s.established_us.store(
            now.saturating_since(Instant::ZERO).total_micros() + 1,
            Ordering::Relaxed,
        );
        let suite_ix = SuiteId::ALL
            .iter()
            .position(|x| *x == keys.suite())
            .unwrap_or(0);
        s.suite.store(suite_ix as u64, Ordering::Relaxed);
        s.two_path.store(keys.two_path(), Ordering::Relaxed);
        s.handshake_us.store(took, Ordering::Relaxed);
        s.sessions.add(1);
        if had {
            s.rekeys.add(1);
        }
        let level_info = !had;
        let paths = if keys.two_path() {
            "two-path"
        } else {
            "single-path"
        };
        if level_info {
            tracing::info!(peer = %p.name, suite = keys.suite().name(), paths, role = ?keys.role(), handshake_ms = took as f64 / 1000.0, "session established");
        } else {
            tracing::debug!(peer = %p.name, suite = keys.suite().name(), paths, role = ?keys.role(), handshake_ms = took as f64 / 1000.0, "session rekeyed");
        }
        if keys.role() == Role::Initiator {
            self.announce(p, now).await;
            self.flush_pending(p, now).await;
        } else {
            // The responder's frames under the new keys wait until ConfirmAck has left (on
            // path 1, ahead of them), so the initiator has the keys when they arrive.
            st_after_send(&mut self.state, p.mac);
        }
    }

    /// Sends one control frame under the new keys at once: a session keepalive ([`KEEPALIVE`]).
    /// From the initiator it is WireGuard's keepalive: the responder seals under the new keys
    /// only once a frame under them opened (a Confirm alone does not prove the initiator still
    /// holds them), so this frame switches it over even if no data flows its way.
    async fn announce(&mut self, p: &PeerSession, now: Instant) {
        let endpoint = self.endpoint(p, 0);
        let payload = KEEPALIVE;
        let sealed = p
            .ring()
            .seal_sub(
                now,
                p.mac,
                self.shared.mac,
                Protocol::Control,
                &payload,
                &mut self.scratch,
            )
            .map(<[u8]>::len);
        if let Ok(len) = sealed {
            self.out.clear();
            let frame = &self.scratch[..len];
            self.out.push_with(endpoint, |slot| {
                slot.get_mut(..len)?.copy_from_slice(frame);
                Some(len)
            });
            self.transmit(0).await;
        }
    }

    /// The peer's UDP endpoint on `path`, if any.
    fn endpoint(&self, p: &PeerSession, path: usize) -> Option<core::net::SocketAddr> {
        let set = self.set.borrow();
        set.config
            .peers
            .iter()
            .find(|c| c.name == p.name)
            .and_then(|c| if path == 0 { c.endpoint } else { c.endpoint2 })
    }

    /// Seals and sends the frames that waited for the session.
    async fn flush_pending(&mut self, p: &PeerSession, now: Instant) {
        let frames = p.take_pending();
        if frames.is_empty() {
            return;
        }
        let endpoint = self.endpoint(p, 0);
        let counters = {
            let set = self.set.borrow();
            set.config
                .peers
                .iter()
                .position(|c| c.name == p.name)
                .map(|i| Arc::clone(&set.counters[i]))
        };
        for f in frames {
            let sealed = p.ring().seal(now, &f, &mut self.scratch).map(<[u8]>::len);
            match sealed {
                Ok(len) => {
                    let frame = &self.scratch[..len];
                    self.out.push_with(endpoint, |slot| {
                        slot.get_mut(..len)?.copy_from_slice(frame);
                        Some(len)
                    });
                    if let Some(c) = &counters {
                        c.tx_frames.add(1);
                        c.tx_bytes.add(f.len() as u64);
                    }
                    if self.out.is_full() {
                        self.transmit(0).await;
                    }
                }
                Err(_) => p.stats.no_session.add(1),
            }
        }
        self.transmit(0).await;
    }

    /// Drops the peer's handshake after an Established event this host cannot act on (the keys
    /// or the pin could not be stored): nothing more is sent for it, so a responder never
    /// sends a ConfirmAck for keys it does not hold, and the failure is counted and backed off.
    fn abandon(&mut self, p: &PeerSession, reason: &'static str, now: Instant) {
        if let Some(st) = self.state.get_mut(&p.mac) {
            st.hs = None;
        }
        self.failed(p, reason, now);
    }

    fn failed(&mut self, p: &PeerSession, reason: &'static str, now: Instant) {
        p.stats.fail(reason);
        let st = self.state.entry(p.mac).or_default();
        st.fails = st.fails.saturating_add(1);
        let base = BACKOFF.total_micros() << st.fails.saturating_sub(1).min(5);
        let base = base.min(MAX_BACKOFF.total_micros());
        // base ± 12.5 %.
        let wait = base - base / 8 + OsRng.next_u64() % (base / 4 + 1);
        st.holdoff = Some(now + Duration::from_micros(wait));
        let dropped = p.take_pending().len() as u64;
        p.stats.no_session.add(dropped);
        tracing::warn!(
            peer = %p.name,
            reason,
            retry_in_ms = wait / 1000,
            dropped,
            "session handshake failed"
        );
    }
}
