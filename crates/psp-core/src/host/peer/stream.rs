//! A normalized peer's stream (seed 003, docs/NORMALIZATION.md): the peer's traffic leaves as a
//! stream of fixed-size frames at a paced rate, real or dummy, sealed under its key (its
//! `key_file`, the group key for a peer without one, or its current session).
//!
//! The peer prepares each outer frame ahead of its slot (a [`HostTransmit`](super::super::HostTransmit)
//! with `at`, from [`Peer::poll_transmit`](super::Peer::poll_transmit)); the caller's pacer
//! only waits for the slot and sends it, so the departure time depends on the pacer alone.
//! Inner frames to the peer (its unicast frames, the broadcasts, and for a session peer the
//! handshake and keepalive messages of a rekey once its stream runs) go into the stream; the
//! inner frames the peer's stream delivers come out of
//! [`Host::poll_delivery`](super::super::Host::poll_delivery).
//!
//! What this does not hide: a session peer's first handshake, and any handshake after the peer
//! fell silent or restarted (before any stream runs, or while the peer cannot read it, its
//! messages leave under the group key at their natural size and time), and, with two paths,
//! the SMKEX messages on path 2 (which carries nothing else).

use alloc::vec;
use alloc::vec::Vec;

use super::super::{Mac, is_group, mac_at};
use super::Peer;
use super::timers::Timer;
use crate::normalize::{self, Endpoint};
use crate::time::{Duration, Instant};
use crate::wire::Protocol;

/// How a peer's stream is built: the normalization settings (their `frame_len` and `wire_len`
/// are derived here from `frame_size` and the key's overhead), the size of every outer frame,
/// and what the uplink adds on the wire (UDP: IP, UDP and Ethernet headers).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NormSpec {
    /// The normalization settings.
    pub cfg: normalize::NormConfig,
    /// Bytes of every sealed outer frame (at most the uplink's largest frame).
    pub frame_size: usize,
    /// Bytes the uplink adds per frame on the wire.
    pub wire_extra: usize,
    /// How far ahead of its slot a frame is sealed.
    pub lead: Duration,
}

/// Why an inner frame the peer's stream delivered was not passed on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum InnerDrop {
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
pub(crate) struct Stream {
    pub(crate) ep: Endpoint<Vec<u8>>,
    pub(crate) spec: NormSpec,
    pub(crate) counters: NormCounters,
    /// Inner frames delivered by the last payload are waiting in `ep`.
    pub(crate) delivering: bool,
}

impl Stream {
    /// A stream for `spec` sealed with at most `overhead` bytes (the key's, or the largest of
    /// the session suites): every payload is as long as fits `frame_size`.
    pub(crate) fn new(now: Instant, spec: NormSpec, overhead: usize) -> Result<Self, &'static str> {
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

    /// Whether a stream for `spec` sealed with at most `overhead` bytes can run.
    pub(crate) fn check(spec: &NormSpec, overhead: usize) -> Result<(), &'static str> {
        let cfg = Self::endpoint_config(spec, overhead)?;
        Endpoint::new(Instant::ZERO, cfg, vec![0; cfg.storage_len()])
            .map(|_| ())
            .map_err(|_| "the normalization settings are refused")
    }

    /// The endpoint settings of a stream for `spec` sealed with at most `overhead` bytes.
    pub(crate) fn endpoint_config(
        spec: &NormSpec,
        overhead: usize,
    ) -> Result<normalize::NormConfig, &'static str> {
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

    /// When its next frame is to be prepared: its slot less the lead.
    pub(crate) fn prepare_at(&self) -> Option<Instant> {
        let slot = self.ep.poll_timeout()?;
        Some(Instant::from_micros(
            slot.total_micros()
                .saturating_sub(self.spec.lead.total_micros()),
        ))
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

/// What the stream delivered next.
pub(crate) enum Delivered {
    /// An inner frame, copied into the caller's buffer: its length.
    Frame(usize),
    /// A handshake message of path 1 (its payload copied into the caller's buffer).
    Handshake(usize),
    /// A control or other sub-protocol message, consumed.
    Sub,
}

impl Peer {
    /// Whether this peer's traffic goes through a running stream: a static normalized peer
    /// always; a session peer while a session seals.
    pub(crate) fn streams(&self, now: Instant) -> bool {
        self.stream.is_some() && self.session.as_deref().is_none_or(|s| s.seals(now))
    }

    /// Puts an inner frame into the stream (drop-tail: a full queue drops and counts it).
    pub(crate) fn push_inner(&mut self, now: Instant, frame: &[u8]) -> bool {
        let Some(st) = self.stream.as_mut() else {
            return false;
        };
        let ok = st.ep.handle_inner(now, frame).is_ok();
        if ok {
            self.counters.tx_frames += 1;
            self.counters.tx_bytes += frame.len() as u64;
        }
        self.arm_departure();
        ok
    }

    /// A message into the stream, as an inner frame whose type is the sub-protocol (`dst | src |
    /// protocol | payload`).
    pub(crate) fn push_message(
        &mut self,
        now: Instant,
        src: Mac,
        proto: Protocol,
        payload: &[u8],
    ) -> bool {
        let dst = self.spec.macs[0];
        let mut f = Vec::with_capacity(14 + payload.len());
        f.extend_from_slice(&dst);
        f.extend_from_slice(&src);
        f.extend_from_slice(&u16::from(proto).to_be_bytes());
        f.extend_from_slice(payload);
        self.push_inner(now, &f)
    }

    /// Sets the departure timer: the stream's next slot less its lead.
    pub(crate) fn arm_departure(&mut self) {
        let at = self.stream.as_ref().and_then(Stream::prepare_at);
        self.timers.set_opt(Timer::Departure, at);
    }

    /// The next inner frame or message the stream delivered, copied into `out`.
    pub(crate) fn next_delivered(&mut self, ours: Mac, out: &mut [u8]) -> Option<Delivered> {
        loop {
            let st = self.stream.as_mut().filter(|s| s.delivering)?;
            let Some(normalize::NormEvent::Inner(f)) = st.ep.poll_event() else {
                st.delivering = false;
                return None;
            };
            if let Err(d) = check_inner(f, ours, &self.spec.macs) {
                match d {
                    InnerDrop::Short => st.counters.rx_short += 1,
                    InnerDrop::NotForUs => st.counters.rx_not_for_us += 1,
                    InnerDrop::ForeignSource => st.counters.rx_foreign_src += 1,
                }
                continue;
            }
            let ty = Protocol::from(u16::from_be_bytes([f[12], f[13]]));
            if ty.is_sub_protocol() {
                self.counters.rx_sub += 1;
                // A session peer's handshake messages (path 1) travel in its stream during a
                // rekey.
                let hs = self.session.is_some()
                    && matches!(ty, Protocol::SessionEstablishment | Protocol::KeyExchange)
                    && !is_group(&f[..6]);
                if hs {
                    let payload = &f[crate::wire::ETHERNET_HEADER_LEN..];
                    let n = payload.len().min(out.len());
                    out[..n].copy_from_slice(&payload[..n]);
                    return Some(Delivered::Handshake(n));
                }
                return Some(Delivered::Sub);
            }
            let n = f.len().min(out.len());
            out[..n].copy_from_slice(&f[..n]);
            self.counters.rx_frames += 1;
            self.counters.rx_bytes += n as u64;
            return Some(Delivered::Frame(n));
        }
    }
}
