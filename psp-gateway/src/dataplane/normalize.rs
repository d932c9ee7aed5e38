//! Traffic normalization in the dataplane (issue 4): one [`NormPeer`] per peer with
//! `[normalize] enabled`, wrapping psp-core's sans-I/O [`Endpoint`] and the peer's sealer.
//!
//! ```text
//!  tx_loop: TAP frame to the peer (or a broadcast) ──push_inner──► Endpoint tx queue (drop-tail)
//!  pacing task (one per peer): sleep_until(poll_timeout) ─► poll_transmit ─► seal_sub(Normalized)
//!                              ─► uplink (every frame the same length, real or dummy)
//!  rx_loop: opened frame, protocol Normalized ──handle_payload──► Endpoint ─► poll_event ─► TAP
//! ```
//!
//! The non-normalized fast path is unchanged: the transmit and receive tasks only divert frames
//! of normalized peers here. The endpoint sits behind a mutex shared by the three tasks (taken
//! once per inner frame, per received payload and per pacing wake-up; never across an await).
//! The peer's unicast frames are sealed only by the pacing task, with the sealer kept in that
//! mutex, so one key never has two sequence-number streams. What this module does not do:
//! choose rates (the core's controller does) or touch non-normalized peers.

use core::net::SocketAddr;
use core::sync::atomic::{AtomicBool, Ordering};
use std::io;
use std::sync::{Arc, Mutex, MutexGuard};

use psp_core::crypto::SuiteKey;
use psp_core::normalize::{self as norm, Endpoint, Event};
use psp_core::session::Sealer;
use psp_core::time::{Duration, Instant};
use psp_core::wire::Protocol;
use serde_json::{Value, json};

use super::Shared;
use super::counters::{Counter, PeerCounters};
use super::peers::{Mac, PeerSet};
use crate::config::{ConfigError, NormalizeConfig, PeerConfig, PeerSecurity};
use crate::io::tap::Tap;
use crate::io::{BATCH, Batch, ETHERNET_HEADER_LEN, SLOT_LEN, Uplink};

/// Bytes of the delivery queue of each endpoint (inner frames waiting for the TAP write).
const RX_QUEUE_BYTES: usize = 32 * 1024;

/// What the daemon knows about the uplink when it builds normalized peers.
#[derive(Debug, Clone, Copy)]
pub(crate) struct NormContext {
    /// The largest sealed frame the uplink carries (the default frame size).
    pub(crate) max_frame: usize,
    /// Whether the uplink is UDP (outer frames then also pay IP, UDP and Ethernet headers).
    pub(crate) udp: bool,
    /// The clock origin (core time is microseconds since it).
    pub(crate) origin: std::time::Instant,
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
}

struct State {
    // The peer's configuration and the uplink's largest frame this endpoint was built for.
    settings: (PeerConfig, usize),
    ep: Endpoint<Vec<u8>>,
    // Taken by a successor on reload (same key: one sequence-number stream per key).
    sealer: Option<Sealer>,
}

/// One normalized peer: the endpoint, the sealer of its unicast key and the pacing state.
pub(crate) struct NormPeer {
    /// The peer's name.
    pub(crate) name: String,
    /// Extra counters.
    pub(crate) counters: NormCounters,
    dst: Mac,
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

fn new_sealer(s: &PeerSecurity) -> Result<Sealer, String> {
    let key = SuiteKey::new(s.suite, &s.key.bytes).map_err(|e| e.to_string())?;
    let mut seed = [0u8; 4];
    // A failing OS RNG leaves 0: still a valid start (see peers.rs).
    let _ = getrandom::fill(&mut seed);
    Sealer::new(key, Sealer::random_initial_seq(seed), s.sealer_config()).map_err(|e| e.to_string())
}

impl NormPeer {
    /// Builds the normalized peer `index` of `set` (whose `normalize` is `cfg`), taking over the
    /// sealer of `previous` when the key settings are unchanged.
    fn new(
        ctx: &NormContext,
        set: &PeerSet,
        index: usize,
        cfg: NormalizeConfig,
        previous: Option<&Self>,
    ) -> Result<Self, ConfigError> {
        let p = &set.config.peers[index];
        let key = |k: &str| format!("peer[{index}].normalize.{k}");
        let file = &set.config.path;
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
        let inherited = previous.and_then(|o| {
            let mut st = o.lock();
            if st.settings.0.security == p.security {
                st.sealer.take()
            } else {
                None
            }
        });
        let sealer = match inherited {
            Some(s) => s,
            None => new_sealer(&p.security).map_err(|e| err("enabled", e))?,
        };
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
        c.max_inner_len = SLOT_LEN;
        c.rx_queue_bytes = RX_QUEUE_BYTES;
        let ep = Endpoint::new(ctx.now(), c, vec![0; c.storage_len()])
            .map_err(|e| err("enabled", format!("{e} (frame {frame_size} bytes)")))?;
        Ok(Self {
            name: p.name.clone(),
            counters: NormCounters::default(),
            // Validation guarantees at least one MAC per peer.
            dst: p.macs.first().copied().unwrap_or_default(),
            endpoint: p.endpoint,
            sealed_len,
            peer_counters: Arc::clone(&set.counters[index]),
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
        drop(st);
        for f in out.frames() {
            self.peer_counters.rx_frames.add(1);
            self.peer_counters.rx_bytes.add(f.len() as u64);
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
            "inner_delivered": s.inner_delivered,
            "delivery_drops": s.delivery_drops,
            "reassembly_drops": s.reassembly_drops,
            "malformed": s.malformed,
            "pacer_skipped": s.pacer_skipped,
            "tx_error": self.counters.tx_error.get(),
            "seal_error": self.counters.seal_error.get(),
            "group_ignored": self.counters.group_ignored.get(),
        })
    }

    /// Whether this endpoint can serve `p`, applying a new S_goal in place (the endpoint keeps
    /// its sequence numbers, rounds and queue). Any other change needs a new endpoint.
    fn try_update(&self, p: &PeerConfig, max_frame: usize) -> bool {
        let mut st = self.lock();
        if st.settings.1 != max_frame {
            return false;
        }
        if st.settings.0 == *p {
            return true;
        }
        let (Some(mut a), Some(b)) = (st.settings.0.normalize, p.normalize) else {
            return false;
        };
        a.s_goal = b.s_goal;
        let mut same = st.settings.0.clone();
        same.normalize = Some(a);
        if same != *p {
            return false;
        }
        st.ep.set_s_goal(b.s_goal);
        st.settings.0 = p.clone();
        true
    }

    /// Stops the pacing task at its next wake-up (the peer left the configuration).
    fn retire(&self) {
        self.retired.store(true, Ordering::Relaxed);
    }
}

/// Passes an opened `Normalized` payload from `np` to its endpoint and writes the inner frames
/// it completes to the TAP (the receive task's hook).
///
/// # Errors
/// A TAP write error.
pub(crate) async fn deliver(
    np: &NormPeer,
    now: Instant,
    payload: &[u8],
    scratch: &mut Delivery,
    tap: &Tap,
) -> io::Result<()> {
    np.handle_payload(now, payload, scratch);
    for f in scratch.frames() {
        tap.send(f).await?;
    }
    Ok(())
}

/// Builds the normalized peers of `set` (`set.norm`), reusing those of `previous` whose
/// configuration is unchanged; the others of `previous` are retired. Call
/// [`spawn_pacers`] once the set is published.
///
/// # Errors
/// A frame size that does not fit the uplink or leaves no room for data.
pub(crate) fn attach(
    set: &mut PeerSet,
    previous: Option<&PeerSet>,
    ctx: &NormContext,
) -> Result<(), ConfigError> {
    // Check every frame size first: a failure must not leave sealers taken from `previous`.
    for (i, p) in set.config.peers.iter().enumerate() {
        if let Some(f) = p.normalize.and_then(|c| c.frame_size)
            && f > ctx.max_frame
        {
            return Err(ConfigError::new(
                &set.config.path,
                format!("peer[{i}].normalize.frame_size"),
                format!("{f} does not fit the uplink: at most {}", ctx.max_frame),
            ));
        }
    }
    let mut norm = Vec::with_capacity(set.config.peers.len());
    let mut kept = Vec::new();
    for (i, p) in set.config.peers.iter().enumerate() {
        let Some(cfg) = p.normalize else {
            norm.push(None);
            continue;
        };
        let old = previous.and_then(|prev| {
            prev.norm
                .iter()
                .flatten()
                .find(|o| o.name == p.name)
                .map(Arc::clone)
        });
        if let Some(o) = old.as_ref().filter(|o| o.try_update(p, ctx.max_frame)) {
            kept.push(Arc::as_ptr(o));
            norm.push(Some(Arc::clone(o)));
            continue;
        }
        norm.push(Some(Arc::new(NormPeer::new(
            ctx,
            set,
            i,
            cfg,
            old.as_deref(),
        )?)));
    }
    set.norm = norm;
    if let Some(prev) = previous {
        for o in prev.norm.iter().flatten() {
            if !kept.contains(&Arc::as_ptr(o)) {
                o.retire();
            }
        }
    }
    Ok(())
}

/// Starts the pacing task of every normalized peer of `set` that has none yet.
pub(crate) fn spawn_pacers(set: &PeerSet, uplink: &Arc<Uplink>, shared: &Arc<Shared>) {
    for np in set.norm.iter().flatten() {
        if !np.started.swap(true, Ordering::Relaxed) {
            tokio::spawn(pace(Arc::clone(np), Arc::clone(uplink), Arc::clone(shared)));
        }
    }
}

/// The smallest TAP MTU the normalized peers of `set` need lowered to (faithful packing
/// carries one inner frame per outer frame), if any.
pub(crate) fn mtu_limit(set: &PeerSet) -> Option<usize> {
    set.norm
        .iter()
        .flatten()
        .map(|np| np.max_inner_len().saturating_sub(ETHERNET_HEADER_LEN))
        .min()
}

/// The pacing task of one peer: at each slot of the endpoint's pacer, seals and sends every
/// payload it emits (real or dummy, all of one length). Ends when the peer is retired or its
/// sealer taken over, or on an uplink error (logged).
async fn pace(np: Arc<NormPeer>, uplink: Arc<Uplink>, shared: Arc<Shared>) {
    if let Err(e) = pace_inner(&np, &uplink, &shared).await {
        tracing::error!(peer = %np.name, error = %e, "normalized pacing stopped");
    }
}

async fn pace_inner(np: &NormPeer, uplink: &Uplink, shared: &Shared) -> io::Result<()> {
    let mut payload = vec![0u8; SLOT_LEN];
    let mut out = Batch::new(BATCH);
    let src = shared.mac;
    loop {
        if np.retired.load(Ordering::Relaxed) {
            return Ok(());
        }
        let Some(next) = np.lock().ep.poll_timeout() else {
            tracing::warn!(peer = %np.name, "normalized sequence numbers used up; restart the daemon to re-key");
            return Ok(());
        };
        let at = shared.origin + core::time::Duration::from_micros(next.total_micros());
        tokio::time::sleep_until(at.into()).await;
        let now = shared.now();
        out.clear();
        {
            let mut st = np.lock();
            let State { ep, sealer, .. } = &mut *st;
            let Some(sealer) = sealer.as_mut() else {
                return Ok(());
            };
            while !out.is_full() {
                let Some(t) = ep.poll_transmit(now, &mut payload) else {
                    break;
                };
                let mut sealed = false;
                out.push_with(np.endpoint, |slot| {
                    let r =
                        sealer.seal_sub(now, np.dst, src, Protocol::Normalized, t.payload, slot);
                    sealed = r.is_ok();
                    r.ok().map(<[u8]>::len)
                });
                if !sealed {
                    np.counters.seal_error.add(1);
                }
            }
        }
        if !out.is_empty() {
            let sent = uplink.send_batch(&out).await?;
            np.counters
                .tx_error
                .add(out.len().saturating_sub(sent) as u64);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use psp_core::crypto::SuiteId;

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
    fn delivery_splits_frames() {
        let mut d = Delivery::default();
        d.push(b"abc");
        d.push(b"de");
        assert_eq!(d.frames().collect::<Vec<_>>(), [&b"abc"[..], b"de"]);
        d.clear();
        assert_eq!(d.frames().count(), 0);
    }
}
