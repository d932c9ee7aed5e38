//! Frames from the uplinks: [`Host::handle_uplink`].
//!
//! ```text
//!  frame ─► dst ours or a group? ─► src a peer's? ─► path 2: its path-2 group opener, handshake
//!                                                    messages only
//!                                   path 1: session peer + key id ─► key ring ─► data / keepalive
//!                                           else group (or static) opener ─► handshake message
//!                                           (budget, freshness) / genuine group payload / data
//! ```

use rand_core::CryptoRngCore;

use super::keys::KeyRef;
use super::{
    Event, Host, PeerId, REPORT_EVERY, Received, RxDrop, is_group, is_group_payload, is_handshake,
    mac_at,
};
use crate::handshake::{PathId, RingOpenError};
use crate::protect::DropReason;
use crate::time::Instant;
use crate::wire::{Frame, Protocol};

/// What a frame turned out to be, once opened (the borrow of the buffer ends here).
enum Content {
    Data(core::ops::Range<usize>, bool),
    GroupCopy(core::ops::Range<usize>, bool),
    Handshake(core::ops::Range<usize>),
    Normalized(core::ops::Range<usize>),
    GroupIgnored,
    Control,
    Sub,
    NotGroupPayload,
}

impl Host {
    /// Opens a frame from uplink `path` in place and says what it was: an inner frame to
    /// deliver (at a range of `frame`), a message the host consumed (a handshake message, a
    /// keepalive), or a drop (counted; the peer's counters when the sender is known).
    pub fn handle_uplink(
        &mut self,
        now: Instant,
        path: PathId,
        frame: &mut [u8],
        rng: &mut dyn CryptoRngCore,
    ) -> Received {
        let r = self.receive(now, path, frame, rng);
        self.take_clock_event();
        r
    }

    fn receive(
        &mut self,
        now: Instant,
        path: PathId,
        frame: &mut [u8],
        rng: &mut dyn CryptoRngCore,
    ) -> Received {
        let (Some(dst), Some(src)) = (mac_at(frame, 0), mac_at(frame, 6)) else {
            self.counters.malformed += 1;
            return Received::Dropped(RxDrop::Malformed);
        };
        let group = is_group(&dst);
        if (path != PathId::FIRST || !group) && dst != self.cfg.mac {
            self.counters.not_for_us += 1;
            return Received::Dropped(RxDrop::NotForUs);
        }
        let Some(&pid) = self.by_mac.get(&src) else {
            self.counters.unknown_peer += 1;
            self.report_unknown(now, src);
            return Received::Dropped(RxDrop::UnknownPeer(src));
        };
        if path != PathId::FIRST {
            return self.receive_path2(now, pid, frame, rng);
        }
        let group_sn = self.group.spec().sealer.security_number();
        let subnets = &self.cfg.subnets;
        let p = &mut self.peers[pid.0];
        let pin = p.pin();
        let session = p.session.is_some();
        // A session peer's unicast frames carry their session's key id; its handshake messages
        // and everyone's group frames come under the group key.
        // A session frame carries its key id in the thesis' security-number field.
        let key_id = Frame::new_checked(&*frame, 0)
            .ok()
            .and_then(|f| f.security_number());
        let via_ring = !group && session && key_id.is_some_and(|id| Some(id) != group_sn);
        let (opened, promoted) = if via_ring {
            let Some(s) = p.session.as_deref_mut() else {
                return Received::Consumed;
            };
            let trusted = s.suite_has_icv();
            let waiting = s.ring().next().is_some();
            match s.ring().open(now, frame) {
                Ok(o) => {
                    let kind = match o.protocol() {
                        Protocol::Control => Content::Control,
                        Protocol::Normalized => {
                            let r = o.range();
                            Content::Normalized(r.start + 14..r.end)
                        }
                        Protocol::GroupCopy => Content::GroupCopy(o.range(), trusted),
                        pr if pr.is_sub_protocol() => Content::Sub,
                        _ => Content::Data(o.range(), trusted),
                    };
                    (kind, waiting && s.ring().next().is_none())
                }
                Err(RingOpenError::Open(e)) => {
                    p.counters.drop_frame(e.reason());
                    return Received::Dropped(RxDrop::Open(pid, e.reason()));
                }
                Err(_) => {
                    self.with_session(pid, now, rng, |s, cx| s.unknown_key(cx));
                    return Received::Dropped(RxDrop::UnknownKey(pid));
                }
            }
        } else {
            // A streaming peer's broadcasts come in its stream: a static normalized peer's
            // always, a session peer's once it surely seals under its session (before that, or
            // in the moment a session starts, one may come under the group key too).
            let streaming =
                p.stream.is_some() && p.session.as_deref().is_none_or(|s| s.peer_streams(now));
            // A group copy comes under the peer's own key, never the group key.
            let own_key = !group && !session && matches!(p.key, KeyRef::Static(_));
            let opener = match (group || session, p.group[0].as_mut(), p.unicast.as_mut()) {
                (true, Some(g), _) => g.opener(pin.as_ref()),
                (_, _, Some(u)) => u,
                (_, Some(g), None) => g.opener(pin.as_ref()),
                (_, None, None) => return Received::Dropped(RxDrop::NotForUs),
            };
            let trusted = opener.suite().icv_len() > 0;
            let normalized = p.spec.normalize.is_some();
            let kind = match opener.open(now, frame) {
                Ok(_) if group && streaming => Content::GroupIgnored,
                Ok(o) if o.protocol() == Protocol::Normalized && normalized && !group => {
                    let r = o.range();
                    Content::Normalized(r.start + 14..r.end)
                }
                Ok(o) => match o.protocol() {
                    Protocol::GroupCopy if own_key => Content::GroupCopy(o.range(), trusted),
                    pr if is_handshake(pr) && session && !group => {
                        let r = o.range();
                        // The payload follows the rebuilt 14-byte header.
                        Content::Handshake(r.start + 14..r.end)
                    }
                    pr if pr.is_sub_protocol() => Content::Sub,
                    _ if session && (!group || !is_group_payload(o.frame(), subnets)) => {
                        Content::NotGroupPayload
                    }
                    _ => Content::Data(o.range(), trusted),
                },
                Err(e) => {
                    let reason = e.reason();
                    p.counters.drop_frame(reason);
                    if reason == DropReason::BadSignature {
                        self.report_bad_signature(now, pid);
                    }
                    return Received::Dropped(RxDrop::Open(pid, reason));
                }
            };
            (kind, false)
        };
        if promoted {
            self.with_session(pid, now, rng, |s, cx| s.promoted(cx));
        }
        let p = &mut self.peers[pid.0];
        let mut deliver = |range: core::ops::Range<usize>, trusted| {
            p.counters.rx_frames += 1;
            p.counters.rx_bytes += range.len() as u64;
            Received::Deliver {
                peer: pid,
                range,
                trusted,
            }
        };
        match opened {
            Content::Data(range, trusted) => deliver(range, trusted),
            Content::GroupCopy(range, trusted) => match unpack_group_copy(frame, range) {
                Some(range) => deliver(range, trusted),
                None => {
                    p.counters.drop_frame(DropReason::Malformed);
                    Received::Dropped(RxDrop::Open(pid, DropReason::Malformed))
                }
            },
            Content::Control | Content::Sub => {
                p.counters.rx_sub += 1;
                Received::Consumed
            }
            Content::Normalized(range) => {
                if let Some(st) = p.stream.as_mut() {
                    // A malformed payload is counted by the endpoint.
                    let _ = st.ep.handle_payload(now, &frame[range]);
                    st.delivering = true;
                }
                Received::Consumed
            }
            Content::GroupIgnored => {
                if let Some(st) = p.stream.as_mut() {
                    st.counters.group_ignored += 1;
                }
                Received::Consumed
            }
            Content::NotGroupPayload => {
                // Any holder of the group key could have sealed it; the peer's data travels
                // under its session keys.
                p.counters.group_unicast += 1;
                Received::Dropped(RxDrop::GroupUnicast(pid))
            }
            Content::Handshake(range) => {
                self.handshake_message(now, pid, PathId::FIRST, &frame[range], rng)
            }
        }
    }

    /// Path 2 carries only handshake messages, under the group key, each peer with its own
    /// opener and window there.
    fn receive_path2(
        &mut self,
        now: Instant,
        pid: PeerId,
        frame: &mut [u8],
        rng: &mut dyn CryptoRngCore,
    ) -> Received {
        let p = &mut self.peers[pid.0];
        let pin = p.pin();
        let Some(g) = p.group[1].as_mut() else {
            self.counters.path2_drops += 1;
            return Received::Dropped(RxDrop::Path2Ignored(pid));
        };
        match g.opener(pin.as_ref()).open(now, frame) {
            Ok(o) if is_handshake(o.protocol()) => {
                let r = o.range();
                self.handshake_message(now, pid, PathId::SECOND, &frame[r.start + 14..r.end], rng)
            }
            Ok(_) => {
                self.counters.path2_ignored += 1;
                Received::Dropped(RxDrop::Path2Ignored(pid))
            }
            Err(e) => {
                self.counters.path2_drops += 1;
                if e.reason() == DropReason::BadSignature {
                    self.report_bad_signature(now, pid);
                }
                Received::Dropped(RxDrop::Open(pid, e.reason()))
            }
        }
    }

    /// A handshake message from a session peer: the budget first (a flood costs a counter),
    /// then the session (freshness, the handshake).
    pub(super) fn handshake_message(
        &mut self,
        now: Instant,
        pid: PeerId,
        path: PathId,
        payload: &[u8],
        rng: &mut dyn CryptoRngCore,
    ) -> Received {
        let p = &mut self.peers[pid.0];
        if !p.budget[usize::from(path.0).min(1)].take(now) {
            p.counters.messages_limited += 1;
            return Received::Dropped(RxDrop::Limited(pid));
        }
        match self.with_session(pid, now, rng, |s, cx| s.message(cx, path, payload)) {
            Some(Err(())) => Received::Dropped(RxDrop::StaleRequest(pid)),
            _ => Received::Consumed,
        }
    }

    fn report_bad_signature(&mut self, now: Instant, pid: PeerId) {
        let p = &mut self.peers[pid.0];
        if p.bad_signature_reported
            .is_none_or(|t| now.saturating_since(t) >= REPORT_EVERY)
        {
            p.bad_signature_reported = Some(now);
            self.events.push_back(Event::BadSignature(pid));
        }
    }
}

/// Rebuilds the inner frame of an opened group copy in place: `range` holds the rebuilt 14-byte
/// header (the PSP frame's MACs) and the copy's data (destination MAC, EtherType, payload); the
/// inner frame is the data's destination, the header's source, the EtherType and the payload,
/// ending where the data ends. `None` (malformed) when the data is shorter than 8 bytes, its
/// destination is not a group MAC or its type is no EtherType.
fn unpack_group_copy(
    frame: &mut [u8],
    range: core::ops::Range<usize>,
) -> Option<core::ops::Range<usize>> {
    let data = frame.get(range.start + 14..range.end)?;
    let dst: [u8; 6] = data.get(..6)?.try_into().ok()?;
    let ty: [u8; 2] = data.get(6..8)?.try_into().ok()?;
    if !is_group(&dst) || u16::from_be_bytes(ty) < Protocol::MIN_ETHERTYPE {
        return None;
    }
    let src: [u8; 6] = frame
        .get(range.start + 6..range.start + 12)?
        .try_into()
        .ok()?;
    let start = range.start + 8;
    let head = frame.get_mut(start..start + 14)?;
    head[..6].copy_from_slice(&dst);
    head[6..12].copy_from_slice(&src);
    head[12..].copy_from_slice(&ty);
    Some(start..range.end)
}
