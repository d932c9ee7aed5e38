//! Normalized peers (seed 003, docs/NORMALIZATION.md): the peer's traffic leaves as a stream
//! of fixed-size frames at a paced rate, real or dummy, sealed under its key (its `key_file`,
//! or its current session).
//!
//! The host prepares each outer frame ahead of its slot ([`Host::poll_departure`]); the
//! caller's pacer thread only waits for the slot and sends it, so the departure time depends on
//! the pacer alone, never on what the host was doing. Inner frames to the peer (its unicast
//! frames, the broadcasts, and for a session peer its handshake and keepalive messages once
//! its stream runs) go into the stream; the inner frames the peer's stream delivers come out of
//! [`Host::poll_delivery`], its handshake and control messages are handled here.
//!
//! What this does not hide: a session peer's first handshake (before any stream exists; its
//! messages leave under the group key at their natural size and time) and, with two paths,
//! the SMKEX messages on path 2 (which carries nothing else).

use alloc::vec;
use alloc::vec::Vec;

use super::{Host, Mac, PeerId, is_group, is_handshake, mac_at};
use crate::normalize::{self, Endpoint};
use crate::time::{Duration, Instant};
use crate::wire::Protocol;

/// How a peer's stream is built: the normalization settings (their `frame_len` and `wire_len`
/// are derived here from `frame_size` and the key's overhead), the size of every outer frame,
/// and what the uplink adds on the wire (UDP: IP, UDP and Ethernet headers).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NormSpec {
    /// The normalization settings.
    pub cfg: normalize::Config,
    /// Bytes of every sealed outer frame (at most the uplink's largest frame).
    pub frame_size: usize,
    /// Bytes the uplink adds per frame on the wire.
    pub wire_extra: usize,
    /// How far ahead of its slot a frame is sealed ([`Host::poll_departure`]).
    pub lead: Duration,
}

/// A sealed outer frame and the instant it must leave ([`Host::poll_departure`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use]
pub struct Departure {
    /// Whose stream it belongs to.
    pub peer: PeerId,
    /// When it leaves (the pacer's slot).
    pub at: Instant,
    /// Its length at the start of the caller's buffer.
    pub len: usize,
}

/// Why an inner frame the peer's stream delivered was not passed on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum InnerDrop {
    /// Shorter than an Ethernet header.
    Short,
    /// To a unicast MAC other than ours.
    NotForUs,
    /// From a MAC that is not one of the peer's.
    ForeignSource,
}

/// Counters of a normalized peer besides its endpoint's own.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NormCounters {
    /// Outer frames that could not be sealed (no session, or the sealer refused).
    pub seal_error: u64,
    /// Group-key frames from the peer, ignored (its broadcasts come through its stream).
    pub group_ignored: u64,
    /// Delivered inner frames shorter than an Ethernet header.
    pub rx_short: u64,
    /// Delivered inner frames to a unicast MAC other than ours.
    pub rx_not_for_us: u64,
    /// Delivered inner frames whose source MAC is not one of the peer's.
    pub rx_foreign_src: u64,
}

/// One normalized peer's stream.
#[derive(Debug)]
pub(super) struct Stream {
    pub(super) ep: Endpoint<Vec<u8>>,
    pub(super) spec: NormSpec,
    pub(super) counters: NormCounters,
    /// Inner frames delivered by the last payload are waiting in `ep`.
    pub(super) delivering: bool,
}

impl Stream {
    /// A stream for `spec` sealed with at most `overhead` bytes (the key's, or the largest of
    /// the session suites): every payload is as long as fits `frame_size`.
    pub(super) fn new(now: Instant, spec: NormSpec, overhead: usize) -> Result<Self, &'static str> {
        let cfg = Self::endpoint_config(&spec, overhead)?;
        let ep = Endpoint::new(now, cfg, vec![0; cfg.storage_len()])
            .map_err(|_| "the normalization settings are refused")?;
        Ok(Self {
            ep,
            spec,
            counters: NormCounters::default(),
            delivering: false,
        })
    }
}

impl Stream {
    /// Whether a stream for `spec` sealed with at most `overhead` bytes can run.
    pub(super) fn check(spec: &NormSpec, overhead: usize) -> Result<(), &'static str> {
        let cfg = Self::endpoint_config(spec, overhead)?;
        Endpoint::new(Instant::ZERO, cfg, vec![0; cfg.storage_len()])
            .map(|_| ())
            .map_err(|_| "the normalization settings are refused")
    }

    /// The endpoint settings of a stream for `spec` sealed with at most `overhead` bytes.
    fn endpoint_config(
        spec: &NormSpec,
        overhead: usize,
    ) -> Result<normalize::Config, &'static str> {
        let frame_len = spec
            .frame_size
            .checked_sub(overhead + crate::wire::ETHERNET_HEADER_LEN)
            .filter(|l| *l > normalize::HEADER_LEN)
            .ok_or("the normalized frame size leaves no room for data")?;
        let mut cfg = spec.cfg;
        cfg.frame_len = frame_len;
        cfg.wire_len = spec.frame_size + spec.wire_extra;
        cfg.aqm_lead = spec.lead;
        Ok(cfg)
    }
}

/// Checks an inner frame the stream delivered as the ordinary path checks an opened frame: a
/// whole Ethernet header, to our MAC or a group address, from one of the peer's MACs.
fn check_inner(frame: &[u8], ours: Mac, peer: &[Mac]) -> Result<(), InnerDrop> {
    let (Some(dst), Some(src)) = (mac_at(frame, 0), mac_at(frame, 6)) else {
        return Err(InnerDrop::Short);
    };
    if frame.len() < crate::wire::ETHERNET_HEADER_LEN {
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

impl Host {
    /// The next outer frame of a normalized peer whose slot is within its stream's lead
    /// ([`NormSpec::lead`]) of `now`, sealed into `out`, with the instant it must leave. Call
    /// until `None`; the caller's pacer sends each at its `at` (a frame prepared late leaves at
    /// once: its slot is in the past). A frame that cannot be sealed (a session peer between
    /// sessions) is skipped and counted.
    pub fn poll_departure(&mut self, now: Instant, out: &mut [u8]) -> Option<Departure> {
        let src = self.cfg.mac;
        for i in 0..self.peers.len() {
            let p = &mut self.peers[i];
            let Some(st) = p.stream.as_mut() else {
                continue;
            };
            let Some(slot) = st.ep.poll_timeout() else {
                continue;
            };
            if slot > now + st.spec.lead {
                continue;
            }
            let at = slot.max(now);
            let dst = p.spec.macs[0];
            let mut payload = [0u8; 2048];
            let Some(t) = st.ep.poll_transmit(at, &mut payload) else {
                continue;
            };
            let len = t.payload.len();
            let sealed = match (&mut p.session, p.key) {
                (Some(s), _) => s
                    .ring()
                    .seal_sub(at, dst, src, Protocol::Normalized, &payload[..len], out)
                    .map(<[u8]>::len)
                    .ok(),
                (None, key) => {
                    let r = self.statics.sealer_mut(key, &mut self.group);
                    let sealed = r
                        .sealer
                        .seal_sub(at, dst, src, Protocol::Normalized, &payload[..len], out)
                        .map(<[u8]>::len)
                        .ok();
                    if let Some(e) = r.due(false) {
                        self.events.push_back(e);
                    }
                    sealed
                }
            };
            let p = &mut self.peers[i];
            let Some(st) = p.stream.as_mut() else {
                continue;
            };
            match sealed {
                Some(len) => {
                    return Some(Departure {
                        peer: p.id,
                        at,
                        len,
                    });
                }
                None => st.counters.seal_error += 1,
            }
        }
        None
    }

    /// When [`poll_departure`](Self::poll_departure) has a frame next: the earliest slot of a
    /// normalized stream less its lead.
    pub fn poll_departure_timeout(&self) -> Option<Instant> {
        self.peers
            .iter()
            .filter_map(|p| {
                let st = p.stream.as_ref()?;
                let slot = st.ep.poll_timeout()?;
                Some(Instant::from_micros(
                    slot.total_micros()
                        .saturating_sub(st.spec.lead.total_micros()),
                ))
            })
            .min()
    }

    /// The next inner frame a normalized peer's stream delivered, copied into `out`, with the
    /// peer it came from: `Some((peer, len))`. Handshake and control messages in the stream are
    /// handled here, and frames that fail the inner checks are dropped (counted); call until
    /// `None` after every [`handle_uplink`](Self::handle_uplink) batch.
    pub fn poll_delivery(
        &mut self,
        now: Instant,
        out: &mut [u8],
        rng: &mut dyn rand_core::CryptoRngCore,
    ) -> Option<(PeerId, usize)> {
        let ours = self.cfg.mac;
        for i in 0..self.peers.len() {
            loop {
                let p = &mut self.peers[i];
                let Some(st) = p.stream.as_mut().filter(|s| s.delivering) else {
                    break;
                };
                let Some(normalize::Event::Inner(f)) = st.ep.poll_event() else {
                    st.delivering = false;
                    break;
                };
                if let Err(d) = check_inner(f, ours, &p.spec.macs) {
                    match d {
                        InnerDrop::Short => st.counters.rx_short += 1,
                        InnerDrop::NotForUs => st.counters.rx_not_for_us += 1,
                        InnerDrop::ForeignSource => st.counters.rx_foreign_src += 1,
                    }
                    continue;
                }
                let ty = Protocol::from(u16::from_be_bytes([f[12], f[13]]));
                if ty.is_sub_protocol() {
                    // A session peer's handshake messages (path 1) and keepalives travel in its
                    // stream once it runs.
                    let hs = p.session.is_some() && is_handshake(ty) && !is_group(&f[..6]);
                    let payload = f[crate::wire::ETHERNET_HEADER_LEN..].to_vec();
                    p.counters.rx_sub += 1;
                    if hs {
                        let path = crate::handshake::PathId::FIRST;
                        let _ = self.handshake_message(now, PeerId(i), path, &payload, rng);
                    }
                    continue;
                }
                let n = f.len().min(out.len());
                out[..n].copy_from_slice(&f[..n]);
                p.counters.rx_frames += 1;
                p.counters.rx_bytes += n as u64;
                return Some((p.id, n));
            }
        }
        None
    }

    /// A normalized peer's stream statistics and counters, for status.
    pub fn norm_status(&self, peer: PeerId) -> Option<(normalize::Stats, &NormCounters, usize)> {
        let st = self.peers.get(peer.0)?.stream.as_ref()?;
        Some((st.ep.stats(), &st.counters, st.spec.frame_size))
    }

    /// The largest inner frame every normalized stream carries whole, if any is configured
    /// (faithful packing: one inner frame per outer frame, so the protected side's MTU must
    /// shrink to it).
    pub fn norm_max_inner_len(&self) -> Option<usize> {
        self.peers
            .iter()
            .filter_map(|p| {
                let spec = p.spec.normalize.as_ref()?;
                // A session peer's stream does not run before its first session: its
                // settings decide all the same.
                let overhead = match (&p.session, &self.cfg.session) {
                    (Some(_), Some(settings)) => super::keys::session_overhead(&settings.handshake),
                    _ => self.statics.overhead_of(p.key, &self.group),
                };
                Stream::endpoint_config(spec, overhead)
                    .ok()
                    .map(|c| c.max_sendable_inner_len())
            })
            .min()
    }

    /// Puts an inner frame into a normalized peer's stream (drop-tail: a full queue drops and
    /// counts it).
    pub(super) fn push_inner(&mut self, now: Instant, peer: usize, frame: &[u8]) -> bool {
        let p = &mut self.peers[peer];
        let Some(st) = p.stream.as_mut() else {
            return false;
        };
        if st.ep.handle_inner(now, frame).is_ok() {
            p.counters.tx_frames += 1;
            p.counters.tx_bytes += frame.len() as u64;
            true
        } else {
            false
        }
    }

    /// A message for a normalized session peer whose stream runs: into the stream, as an inner
    /// frame whose type is the sub-protocol (`dst | src | protocol | payload`).
    pub(super) fn push_message(
        &mut self,
        now: Instant,
        peer: usize,
        proto: Protocol,
        payload: &[u8],
    ) -> bool {
        let dst = self.peers[peer].spec.macs[0];
        let mut f = Vec::with_capacity(14 + payload.len());
        f.extend_from_slice(&dst);
        f.extend_from_slice(&self.cfg.mac);
        f.extend_from_slice(&u16::from(proto).to_be_bytes());
        f.extend_from_slice(payload);
        self.push_inner(now, peer, &f)
    }

    /// Whether a peer's traffic goes through a running stream: a static normalized peer always;
    /// a session peer once it has a session that seals.
    pub(super) fn streams(&mut self, peer: usize, now: Instant) -> bool {
        let p = &mut self.peers[peer];
        p.stream.is_some()
            && p.session
                .as_deref_mut()
                .is_none_or(|s| s.ring().sealer(now).is_ok())
    }

    /// Whether broadcasts to `peer` travel inside its normalized stream now (then it needs no
    /// copy under the group key): a static normalized peer always, a session peer while it
    /// has a live session.
    pub fn streams_to(&self, peer: PeerId, now: Instant) -> bool {
        self.peers.get(peer.0).is_some_and(|p| {
            p.stream.is_some() && p.session.as_deref().is_none_or(|s| s.seals(now))
        })
    }

    /// Broadcast frames go to every normalized peer's stream too.
    pub(super) fn push_group_to_streams(&mut self, now: Instant, frame: &[u8]) {
        for i in 0..self.peers.len() {
            if self.peers[i].stream.is_some() && self.streams(i, now) {
                let _ = self.push_inner(now, i, frame);
            }
        }
    }

    /// Whether every peer gets broadcasts through a running stream (then a broadcast needs no
    /// group-key copy at all).
    pub(super) fn all_streaming(&mut self, now: Instant) -> bool {
        !self.peers.is_empty() && (0..self.peers.len()).all(|i| self.streams(i, now))
    }
}
