//! Traffic normalization in the dataplane (issue 4): one [`NormPeer`] per peer with
//! `[normalize] enabled`, wrapping psp-core's sans-I/O [`Endpoint`] and the peer's sealer.
//!
//! ```text
//!  tx_loop: TAP frame to the peer (or a broadcast) ──push_inner──► Endpoint tx queue (drop-tail)
//!  pacer thread (all peers, super::pacing): poll_transmit(next slot) ─► seal_sub(Normalized)
//!                 ahead of the slot ─► at the slot: uplink (every frame one length, real or dummy)
//!  rx_loop: opened frame, protocol Normalized ──handle_payload──► Endpoint ─► poll_event
//!           ─► check_inner (length, our MAC or a group, the peer's MAC) ─► TAP
//! ```
//!
//! The non-normalized fast path is unchanged: the transmit and receive tasks only divert frames
//! of normalized peers here. The endpoint sits behind a mutex shared by the two tasks and the pacer
//! thread (taken once per inner frame, per received payload and per outer frame, which the
//! pacer seals ahead of its slot; never across an await).
//! The peer's unicast frames are sealed only by the pacer thread, with the sealer kept in that
//! mutex, so one key never has two sequence-number streams; on reload a replacement endpoint
//! takes the sealer over in the peer set's commit step ([`super::set`]). The inner frames the
//! endpoint reassembles are checked like the ordinary path's opened frames before the TAP
//! write, and a frame that fails (or that the TAP refuses) is a counted drop, never an error
//! of the receive task. What this module does not do: choose rates (the core's controller
//! does), build or replace endpoints on reload ([`super::set`] decides), or touch
//! non-normalized peers.

use core::net::SocketAddr;
use core::sync::atomic::{AtomicBool, Ordering};
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

use psp_core::normalize::{self as norm, Endpoint, Event};
use psp_core::session::Sealer;

use super::keys::KeySealer;
use psp_core::time::{Duration, Instant};
use psp_core::wire::Protocol;
use serde_json::{Value, json};

use super::counters::{Counter, PeerCounters};
use super::{DropLog, Mac, Shared, is_group, mac_at};
use crate::config::{ConfigError, NormalizeConfig, PeerConfig, PeerSecurity};
use crate::io::tap::Tap;
use crate::io::{Batch, ETHERNET_HEADER_LEN, SLOT_LEN, Uplink};

/// Bytes of the delivery queue of each endpoint (inner frames waiting for the TAP write).
const RX_QUEUE_BYTES: usize = 32 * 1024;

/// What the daemon knows about the uplink when it builds normalized peers.
#[derive(Debug, Clone)]
pub(crate) struct NormContext {
    /// The largest sealed frame the uplink carries (the default frame size).
    pub(crate) max_frame: usize,
    /// Whether the uplink is UDP (outer frames then also pay IP, UDP and Ethernet headers).
    pub(crate) udp: bool,
    /// The clock origin (core time is microseconds since it).
    pub(crate) origin: std::time::Instant,
    /// The state directory (sequence-number reservations of static keys); `None` only in unit
    /// tests.
    pub(crate) state: Option<Arc<crate::state::StateDir>>,
}

impl NormContext {
    fn now(&self) -> Instant {
        Instant::from_std(self.origin, std::time::Instant::now())
    }
}

/// Counters of a normalized peer besides the endpoint's own.
#[derive(Debug, Default)]
pub(crate) struct NormCounters {
    /// Outer frames the uplink refused to send.
    pub(crate) tx_error: Counter,
    /// Payloads that could not be sealed.
    pub(crate) seal_error: Counter,
    /// Group-key frames from the peer, ignored (its broadcasts come through the endpoint).
    pub(crate) group_ignored: Counter,
    /// Delivered inner frames shorter than an Ethernet header.
    pub(crate) rx_short: Counter,
    /// Delivered inner frames to a unicast MAC other than ours.
    pub(crate) rx_not_for_us: Counter,
    /// Delivered inner frames whose source MAC is not one of the peer's.
    pub(crate) rx_foreign_src: Counter,
    /// Inner frames the TAP refused.
    pub(crate) rx_tap_error: Counter,
}

impl NormCounters {
    fn count(&self, drop: InnerDrop) {
        match drop {
            InnerDrop::Short => self.rx_short.add(1),
            InnerDrop::NotForUs => self.rx_not_for_us.add(1),
            InnerDrop::ForeignSource => self.rx_foreign_src.add(1),
            InnerDrop::TapWrite => self.rx_tap_error.add(1),
        }
    }

    /// Inner frames dropped on the way to the TAP, all reasons.
    pub(crate) fn rx_drops_total(&self) -> u64 {
        self.rx_short.get()
            + self.rx_not_for_us.get()
            + self.rx_foreign_src.get()
            + self.rx_tap_error.get()
    }
}

/// Why a delivered inner frame did not reach the TAP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum InnerDrop {
    /// Shorter than an Ethernet header (the TAP would refuse it).
    Short,
    /// To a unicast MAC other than ours.
    NotForUs,
    /// From a MAC that is not one of the peer's.
    ForeignSource,
    /// The TAP write failed.
    TapWrite,
}

impl InnerDrop {
    /// The reason as logged.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Short => "inner-short",
            Self::NotForUs => "inner-not-for-us",
            Self::ForeignSource => "inner-foreign-src",
            Self::TapWrite => "inner-tap-error",
        }
    }
}

/// Checks an inner frame the peer's endpoint delivered as the ordinary receive path checks an
/// opened frame (which the outer header and the key vouch for): a whole Ethernet header, a
/// destination that is our MAC or a group address, a source that is one of the peer's MACs.
///
/// # Errors
/// The first check that fails.
pub(crate) fn check_inner(frame: &[u8], ours: Mac, peer: &[Mac]) -> Result<(), InnerDrop> {
    let (Some(dst), Some(src)) = (mac_at(frame, 0), mac_at(frame, 6)) else {
        return Err(InnerDrop::Short);
    };
    if frame.len() < ETHERNET_HEADER_LEN {
        return Err(InnerDrop::Short);
    }
    if !is_group(&dst) && dst != ours {
        return Err(InnerDrop::NotForUs);
    }
    if !peer.contains(&src) {
        return Err(InnerDrop::ForeignSource);
    }
    Ok(())
}

struct State {
    // The peer's configuration and the uplink's largest frame this endpoint was built for.
    settings: (PeerConfig, usize),
    ep: Endpoint<Vec<u8>>,
    // Handed to a successor on reload (same key: one sequence-number stream per key).
    sealer: Option<KeySealer>,
}

/// One normalized peer: the endpoint, the sealer of its unicast key and the pacing state.
pub(crate) struct NormPeer {
    /// The peer's name.
    pub(crate) name: String,
    /// Extra counters.
    pub(crate) counters: NormCounters,
    // The peer's MACs; the first is the destination of our outer frames.
    macs: Vec<Mac>,
    endpoint: Option<SocketAddr>,
    sealed_len: usize,
    peer_counters: Arc<PeerCounters>,
    state: Mutex<State>,
    started: AtomicBool,
    retired: AtomicBool,
}

impl core::fmt::Debug for NormPeer {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("NormPeer")
            .field("name", &self.name)
            .field("sealed_len", &self.sealed_len)
            .finish_non_exhaustive()
    }
}

/// Inner frames delivered by one payload, copied out of the endpoint so the TAP write happens
/// without the lock. The buffers keep their capacity (no allocation per frame once warm).
#[derive(Debug, Default)]
pub(crate) struct Delivery {
    buf: Vec<u8>,
    ends: Vec<usize>,
}

impl Delivery {
    fn clear(&mut self) {
        self.buf.clear();
        self.ends.clear();
    }

    fn push(&mut self, frame: &[u8]) {
        self.buf.extend_from_slice(frame);
        self.ends.push(self.buf.len());
    }

    /// The delivered frames.
    pub(crate) fn frames(&self) -> impl Iterator<Item = &[u8]> {
        let mut start = 0;
        self.ends.iter().map(move |&end| {
            let f = &self.buf[start..end];
            start = end;
            f
        })
    }
}

/// The payload length whose sealed frame is the largest not above `frame_size`.
fn payload_len(sealer: &Sealer, frame_size: usize) -> Option<usize> {
    sealer
        .max_inner_len(frame_size)?
        .checked_sub(ETHERNET_HEADER_LEN)
}

impl NormPeer {
    /// Builds the normalized endpoint for peer `index` (`p`, whose `normalize` is `cfg`) of the
    /// configuration in `file`, sealing with `sealer`.
    ///
    /// # Errors
    /// A frame size that does not fit the uplink or leaves no room for data, or settings the
    /// core's endpoint refuses (named as `peer[index].normalize.KEY`).
    pub(crate) fn new(
        ctx: &NormContext,
        file: &Path,
        index: usize,
        p: &PeerConfig,
        cfg: NormalizeConfig,
        peer_counters: Arc<PeerCounters>,
        sealer: KeySealer,
    ) -> Result<Self, ConfigError> {
        let key = |k: &str| format!("peer[{index}].normalize.{k}");
        let err = |k: &str, problem: String| ConfigError::new(file, key(k), problem);
        let frame_size = cfg.frame_size.unwrap_or(ctx.max_frame);
        if frame_size > ctx.max_frame {
            return Err(err(
                "frame_size",
                format!(
                    "{frame_size} does not fit the uplink: at most {}",
                    ctx.max_frame
                ),
            ));
        }
        let frame_len = payload_len(&sealer, frame_size).ok_or_else(|| {
            err(
                "frame_size",
                format!("{frame_size} leaves no room for data"),
            )
        })?;
        // frame_len + 14 is sealable: payload_len checked it.
        let sealed_len = sealer
            .sealed_len(ETHERNET_HEADER_LEN + frame_len)
            .unwrap_or(frame_size);
        let wire_extra = match (ctx.udp, p.endpoint) {
            (false, _) => 0,
            (true, Some(SocketAddr::V6(_))) => 40 + 8 + ETHERNET_HEADER_LEN,
            (true, _) => 20 + 8 + ETHERNET_HEADER_LEN,
        };
        let mut c = norm::Config::default();
        c.frame_len = frame_len;
        c.wire_len = sealed_len + wire_extra;
        c.packing = cfg.packing;
        c.algorithm = cfg.algorithm;
        c.s_goal = cfg.s_goal;
        c.s_min = cfg.s_min;
        c.s_step = cfg.s_step;
        c.o_min = Duration::from_millis(u64::from(cfg.o_min_ms));
        c.w = cfg.weight();
        c.tx_queue_bytes = cfg.queue_bytes;
        c.aqm = cfg.aqm;
        c.max_inner_len = SLOT_LEN;
        c.rx_queue_bytes = RX_QUEUE_BYTES;
        let ep = Endpoint::new(ctx.now(), c, vec![0; c.storage_len()])
            .map_err(|e| err("enabled", format!("{e} (frame {frame_size} bytes)")))?;
        Ok(Self {
            name: p.name.clone(),
            counters: NormCounters::default(),
            macs: p.macs.clone(),
            endpoint: p.endpoint,
            sealed_len,
            peer_counters,
            state: Mutex::new(State {
                settings: (p.clone(), ctx.max_frame),
                ep,
                sealer: Some(sealer),
            }),
            started: AtomicBool::new(false),
            retired: AtomicBool::new(false),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves a consistent endpoint (no partial update is
        // observable through its API): keep going with it.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The largest inner frame this peer's endpoint accepts.
    pub(crate) fn max_inner_len(&self) -> usize {
        self.lock().ep.config().max_sendable_inner_len()
    }

    /// Queues an inner frame for the peer (drop-tail: a full queue drops and counts it).
    pub(crate) fn push_inner(&self, now: Instant, frame: &[u8]) {
        if self.lock().ep.handle_inner(now, frame).is_ok() {
            self.peer_counters.tx_frames.add(1);
            self.peer_counters.tx_bytes.add(frame.len() as u64);
        }
    }

    /// Processes an opened payload from the peer; the inner frames it completes land in `out`
    /// (cleared first).
    pub(crate) fn handle_payload(&self, now: Instant, payload: &[u8], out: &mut Delivery) {
        out.clear();
        let mut st = self.lock();
        // A malformed payload is counted by the endpoint (`malformed` in status).
        let _ = st.ep.handle_payload(now, payload);
        while let Some(ev) = st.ep.poll_event() {
            if let Event::Inner(f) = ev {
                out.push(f);
            }
        }
    }

    /// The status object (`normalize` in the peer's status entry).
    pub(crate) fn to_json(&self) -> Value {
        let s = self.lock().ep.stats();
        json!({
            "frame_bytes": self.sealed_len,
            "s_current_kbps": s.s_current.kbps(),
            "s_goal_kbps": s.s_goal.kbps(),
            "peer_suggested_kbps": s.peer_suggested.kbps(),
            "s_suggested_kbps": s.s_suggested.kbps(),
            "round": s.round,
            "r_recent": s.r_recent,
            "last_loss_ppm": s.last_loss.ppm(),
            "rtt_estimate_us": s.rtt_estimate.total_micros(),
            "last_rtt_sample_us": s.last_rtt_sample.total_micros(),
            "rate_decisions": s.rate_decisions,
            "frames_sent": s.frames_sent,
            "real_frames_sent": s.frames_sent - s.dummy_frames_sent,
            "dummy_frames_sent": s.dummy_frames_sent,
            "frames_received": s.frames_received,
            "inner_queued": s.inner_queued,
            "inner_queue_frames": s.inner_queue_frames,
            "inner_queue_bytes": s.inner_queue_bytes,
            "inner_drops": s.inner_drops,
            "aqm_drops": s.aqm_drops,
            "aqm_marks": s.aqm_marks,
            "inner_delivered": s.inner_delivered,
            "delivery_drops": s.delivery_drops,
            "reassembly_drops": s.reassembly_drops,
            "malformed": s.malformed,
            "pacer_skipped": s.pacer_skipped,
            "tx_error": self.counters.tx_error.get(),
            "seal_error": self.counters.seal_error.get(),
            "group_ignored": self.counters.group_ignored.get(),
            "rx_short": self.counters.rx_short.get(),
            "rx_not_for_us": self.counters.rx_not_for_us.get(),
            "rx_foreign_src": self.counters.rx_foreign_src.get(),
            "rx_tap_error": self.counters.rx_tap_error.get(),
        })
    }

    /// Whether this endpoint can serve `p` (with an uplink carrying `max_frame`): as it is,
    /// after [`Self::update`] (only S_goal changed: the endpoint keeps its sequence numbers,
    /// rounds and queue), or not at all. Changes nothing.
    pub(crate) fn reuse(&self, p: &PeerConfig, max_frame: usize) -> Reuse {
        let st = self.lock();
        if st.settings.1 != max_frame {
            return Reuse::Replace;
        }
        if st.settings.0 == *p {
            return Reuse::Same;
        }
        let (Some(mut a), Some(b)) = (st.settings.0.normalize, p.normalize) else {
            return Reuse::Replace;
        };
        a.s_goal = b.s_goal;
        let mut same = st.settings.0.clone();
        same.normalize = Some(a);
        if same == *p {
            Reuse::Update
        } else {
            Reuse::Replace
        }
    }

    /// Takes the settings of `p`, for which [`Self::reuse`] said [`Reuse::Update`]: applies
    /// its S_goal to the running endpoint.
    pub(crate) fn update(&self, p: &PeerConfig) {
        let mut st = self.lock();
        if let Some(n) = p.normalize {
            st.ep.set_s_goal(n.s_goal);
        }
        st.settings.0 = p.clone();
    }

    /// Whether this endpoint seals with key settings `s`.
    pub(crate) fn has_key_settings(&self, s: &PeerSecurity) -> bool {
        self.lock().settings.0.security == *s
    }

    /// Takes over the sealer of `old` (its predecessor, same key settings), so the key keeps
    /// one sequence-number stream; the pacer drops `old` after its next departure. Keeps this
    /// endpoint's own sealer if `old` has none left.
    pub(crate) fn take_sealer_from(&self, old: &Self) {
        let Some(sealer) = old.lock().sealer.take() else {
            return;
        };
        self.lock().sealer = Some(sealer);
    }

    /// Stops the pacer serving this endpoint after its next departure (the peer left the configuration, or got a
    /// new endpoint).
    pub(crate) fn retire(&self) {
        self.retired.store(true, Ordering::Relaxed);
    }

    /// Hands `np` to the pacer thread ([`super::pacing`]), unless it has it already.
    pub(crate) fn start(np: &Arc<Self>, uplink: &Arc<Uplink>, shared: &Arc<Shared>) {
        if !np.started.swap(true, Ordering::Relaxed) {
            shared.pacing.add(Arc::clone(np), Arc::clone(uplink));
        }
    }

    /// Whether the pacer was told to stop serving this endpoint.
    pub(crate) fn is_retired(&self) -> bool {
        self.retired.load(Ordering::Relaxed)
    }

    /// Seals the frame of the pacer's next slot into `out` (cleared first), ahead of the slot
    /// (the pacer thread's step after each departure; `now` is the current time, `src` our
    /// MAC). A slot already past departs at `now`: the core's pacer then bounds the catch-up.
    pub(crate) fn prepare(
        &self,
        now: Instant,
        payload: &mut [u8],
        out: &mut Batch,
        src: Mac,
    ) -> Prepared {
        out.clear();
        let mut st = self.lock();
        let State { ep, sealer, .. } = &mut *st;
        let Some(sealer) = sealer.as_mut() else {
            // Handed over to a replacement endpoint.
            return Prepared::Done;
        };
        let Some(slot) = ep.poll_timeout() else {
            tracing::warn!(peer = %self.name, "normalized sequence numbers used up; restart the daemon to re-key");
            return Prepared::Done;
        };
        let at = slot.max(now);
        // Validation guarantees at least one MAC per peer.
        let dst = self.macs.first().copied().unwrap_or_default();
        if let Some(t) = ep.poll_transmit(at, payload) {
            let mut sealed = false;
            out.push_with(self.endpoint, |frame| {
                let r = sealer.seal_sub(at, dst, src, Protocol::Normalized, t.payload, frame);
                sealed = r.is_ok();
                r.ok().map(<[u8]>::len)
            });
            if !sealed {
                self.counters.seal_error.add(1);
            }
            if let Err(e) = sealer.keep_reserved() {
                self.counters.seal_error.add(1);
                tracing::error!(peer = %self.name, error = %e, "sequence numbers not reserved");
            }
        }
        Prepared::At(at)
    }

    /// Sends the frame [`Self::prepare`] sealed (at its slot), counting refusals.
    pub(crate) fn send(&self, uplink: &Uplink, out: &Batch) {
        if out.is_empty() {
            return;
        }
        let sent = match uplink.send_batch_blocking(out) {
            Ok(n) => n,
            Err(e) => {
                tracing::debug!(peer = %self.name, error = %e, "normalized frame not sent");
                0
            }
        };
        self.counters
            .tx_error
            .add(out.len().saturating_sub(sent) as u64);
    }
}

/// What [`NormPeer::prepare`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Prepared {
    /// A frame is sealed for this instant (none when sealing failed; counted).
    At(Instant),
    /// The endpoint is done: its sealer went to a replacement, or its sequence numbers ran out.
    Done,
}

#[cfg(test)]
impl NormPeer {
    /// The next sequence number of the sealer this endpoint holds, if it holds one.
    pub(crate) fn sealer_seq(&self) -> Option<psp_core::Seq> {
        self.lock().sealer.as_ref().and_then(|s| s.next_seq())
    }
}

/// What a running endpoint can do for a peer's new settings ([`NormPeer::reuse`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reuse {
    /// Serve them unchanged.
    Same,
    /// Serve them after [`NormPeer::update`] (a new S_goal).
    Update,
    /// Nothing: the peer needs a new endpoint.
    Replace,
}

/// Passes an opened `Normalized` payload from `np` to its endpoint and writes the inner frames
/// it completes to the TAP (the receive task's hook). Each frame is checked first
/// ([`check_inner`], `ours` is our MAC); a frame that fails a check or that the TAP refuses is
/// dropped, counted and logged (`log`), and the next one goes on.
pub(super) async fn deliver(
    np: &NormPeer,
    now: Instant,
    payload: &[u8],
    scratch: &mut Delivery,
    tap: &Tap,
    ours: Mac,
    log: &mut DropLog,
) {
    np.handle_payload(now, payload, scratch);
    for f in scratch.frames() {
        let drop = match check_inner(f, ours, &np.macs) {
            Ok(()) => match tap.send(f).await {
                Ok(()) => {
                    np.peer_counters.rx_frames.add(1);
                    np.peer_counters.rx_bytes.add(f.len() as u64);
                    continue;
                }
                Err(_) => InnerDrop::TapWrite,
            },
            Err(d) => d,
        };
        np.counters.count(drop);
        log.log(&np.name, drop.as_str(), f.len());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use psp_core::crypto::{SuiteId, SuiteKey};

    fn sealer(suite: SuiteId) -> Sealer {
        let key = SuiteKey::new(suite, &vec![7u8; suite.key_len().max(16)]).unwrap();
        Sealer::new(
            key,
            psp_core::Seq(1),
            psp_core::session::SealerConfig::default(),
        )
        .unwrap()
    }

    #[test]
    fn payload_fills_the_frame_exactly() {
        for suite in [
            SuiteId::Aes128Gcm,
            SuiteId::BfCbcHmacSha1,
            SuiteId::ChaCha20Poly1305,
        ] {
            let s = sealer(suite);
            for size in [200usize, 1000, 1500, 1514, 2048] {
                let n = payload_len(&s, size).unwrap();
                let l = s.sealed_len(ETHERNET_HEADER_LEN + n).unwrap();
                assert!(l <= size, "{suite:?} {size}");
                // Blowfish pads to 8: the frame may be up to 7 bytes short of the size.
                assert!(size - l < 8, "{suite:?} {size}: {l}");
                assert!(s.sealed_len(ETHERNET_HEADER_LEN + n + 1).unwrap() > size);
            }
        }
    }

    #[test]
    fn inner_frames_are_checked_like_opened_frames() {
        let ours = [0x02, 0, 0, 0, 0, 0x01];
        let peer = [[0x02, 0, 0, 0, 0, 0x02], [0x02, 0, 0, 0, 0, 0x12]];
        let frame = |dst: Mac, src: Mac, len: usize| {
            let mut f = vec![0u8; len];
            f[..6].copy_from_slice(&dst);
            f[6..12].copy_from_slice(&src);
            f
        };
        let ok = frame(ours, peer[0], 60);
        assert_eq!(check_inner(&ok, ours, &peer), Ok(()));
        // Any of the peer's MACs; broadcast and multicast destinations.
        assert_eq!(check_inner(&frame(ours, peer[1], 14), ours, &peer), Ok(()));
        assert_eq!(
            check_inner(&frame([0xff; 6], peer[0], 42), ours, &peer),
            Ok(())
        );
        let mcast = [0x33, 0x33, 0, 0, 0, 1];
        assert_eq!(check_inner(&frame(mcast, peer[0], 86), ours, &peer), Ok(()));
        // 1..=13 bytes: the TAP would refuse them.
        for len in 0..ETHERNET_HEADER_LEN {
            assert_eq!(
                check_inner(&ok[..len], ours, &peer),
                Err(InnerDrop::Short),
                "{len}"
            );
        }
        let other = [0x02, 0, 0, 0, 0, 0x09];
        assert_eq!(
            check_inner(&frame(other, peer[0], 60), ours, &peer),
            Err(InnerDrop::NotForUs)
        );
        for src in [other, ours, [0xff; 6]] {
            assert_eq!(
                check_inner(&frame(ours, src, 60), ours, &peer),
                Err(InnerDrop::ForeignSource)
            );
        }
    }

    #[test]
    fn inner_drops_are_counted_by_reason() {
        let c = NormCounters::default();
        for (i, d) in [
            InnerDrop::Short,
            InnerDrop::NotForUs,
            InnerDrop::ForeignSource,
            InnerDrop::TapWrite,
        ]
        .into_iter()
        .enumerate()
        {
            for _ in 0..=i {
                c.count(d);
            }
        }
        assert_eq!(c.rx_short.get(), 1);
        assert_eq!(c.rx_not_for_us.get(), 2);
        assert_eq!(c.rx_foreign_src.get(), 3);
        assert_eq!(c.rx_tap_error.get(), 4);
        assert_eq!(c.rx_drops_total(), 10);
    }

    #[test]
    fn delivery_splits_frames() {
        let mut d = Delivery::default();
        d.push(b"abc");
        d.push(b"de");
        assert_eq!(d.frames().collect::<Vec<_>>(), [&b"abc"[..], b"de"]);
        d.clear();
        assert_eq!(d.frames().count(), 0);
    }
}
