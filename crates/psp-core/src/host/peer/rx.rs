//! Frames from the uplinks: [`Peer::handle_uplink`]. First which key opens a frame, then what a
//! frame may carry under that key ([`classify`]): a kind that does not belong under the key it
//! came under is refused, whatever its content.
//!
//! ```text
//!  path 2 ─► group opener (path 2) ─► handshake messages only
//!  path 1, unicast with a session key id ─► key ring ─► data, control, stream payload, group copy
//!  path 1, unicast from a key_file peer ─► its own opener ─► data, stream payload, group copy
//!  path 1, everything else ─► group opener ─► broadcasts (genuine group payloads from a session
//!                                              peer), handshake messages, a group-keyed peer's data
//! ```

use core::ops::Range;

use rand_core::CryptoRngCore;

use super::super::{
    GroupOpener, Keying, Received, RxDrop, Shared, is_group, is_group_payload, mac_at,
};
use super::stream::Delivered;
use super::{Peer, Session};
use crate::handshake::messages::Repr;
use crate::handshake::{FailReason, PathId, RingOpenError};
use crate::plant::{self, Bug};
use crate::protect::DropReason;
use crate::time::Instant;
use crate::wire::{Frame, Protocol};

/// Under which key a frame opened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Under {
    /// One of the peer's sessions.
    Session,
    /// The peer's `key_file` key.
    Own,
    /// The group key.
    Group,
}

/// What an opened frame is, given the key it came under.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Kind {
    /// An inner frame to deliver (at this range), and whether an ICV vouches for it.
    Data(Range<usize>, bool),
    /// A group copy to unpack and deliver.
    GroupCopy(Range<usize>, bool),
    /// A normalized stream's payload.
    Stream(Range<usize>),
    /// A handshake message's payload.
    Handshake(Range<usize>),
    /// A control or other sub-protocol message: consumed.
    Sub,
    /// A membership message (`[pki]`), and whether it came under the group key.
    Member(Range<usize>, bool),
    /// A broadcast under the group key from a peer whose broadcasts come in its stream.
    GroupIgnored,
    /// Not allowed under this key (a session peer's data under the group key, a group copy or
    /// stream payload under a key that never carries them).
    Refused,
}

/// What an opened frame may be: its protocol, its destination, the key it came under and the
/// peer's keying decide. `genuine`: it is a genuine group payload (ARP, an IP broadcast or
/// multicast).
#[allow(clippy::too_many_arguments)]
fn classify(
    under: Under,
    protocol: Protocol,
    range: Range<usize>,
    group_dst: bool,
    keying: &Keying,
    normalized: bool,
    streaming: bool,
    genuine: bool,
    trusted: bool,
) -> Kind {
    let session = matches!(keying, Keying::Session { .. });
    let payload = range.start + crate::wire::ETHERNET_HEADER_LEN..range.end;
    match under {
        Under::Session | Under::Own => match protocol {
            Protocol::Control => Kind::Sub,
            Protocol::Membership if session => Kind::Member(payload, false),
            Protocol::Normalized if normalized => Kind::Stream(payload),
            Protocol::GroupCopy => Kind::GroupCopy(range, trusted),
            p if p.is_sub_protocol() => Kind::Sub,
            _ => Kind::Data(range, trusted),
        },
        Under::Group => {
            if group_dst && streaming {
                return Kind::GroupIgnored;
            }
            match protocol {
                Protocol::SessionEstablishment | Protocol::KeyExchange if session && !group_dst => {
                    Kind::Handshake(payload)
                }
                // Only a peer without a key of its own streams under the group key.
                Protocol::Normalized
                    if normalized
                        && !group_dst
                        && (*keying == Keying::Group || plant::on(Bug::StreamUnderGroupKey)) =>
                {
                    Kind::Stream(payload)
                }
                Protocol::Normalized | Protocol::GroupCopy => Kind::Refused,
                Protocol::Membership if session => Kind::Member(payload, true),
                p if p.is_sub_protocol() => Kind::Sub,
                _ if session && !(group_dst && genuine) => Kind::Refused,
                _ => Kind::Data(range, trusted),
            }
        }
    }
}

impl Peer {
    /// Opens a frame from uplink `path` in place (its source MAC is this peer's) and says what
    /// it was: an inner frame to deliver (at a range of `frame`), a message consumed, or a drop
    /// (counted).
    pub fn handle_uplink(
        &mut self,
        now: Instant,
        shared: &mut Shared,
        path: PathId,
        frame: &mut [u8],
        rng: &mut dyn CryptoRngCore,
    ) -> Received {
        let id = self.id;
        if self.session.as_deref().is_some_and(|s| s.revoked) {
            self.counters.revoked += 1;
            return Received::Dropped(RxDrop::Revoked(id));
        }
        let group_dst = mac_at(frame, 0).is_some_and(|d| is_group(&d));
        let key_id = Frame::new_checked(&*frame, 0)
            .ok()
            .and_then(|f| f.security_number());
        let session_frame = !group_dst
            && self.session.is_some()
            && key_id.is_some_and(|k| Some(k) != shared.group_sn());
        // Path 2 carries SMKEX's messages under the group key and, with two paths in use,
        // session frames (data moved there, probes); one key ring opens those on either path.
        if path != PathId::FIRST
            && !(session_frame && self.session.as_deref().is_some_and(|s| s.paths.redundant()))
        {
            return self.receive_path2(now, shared, frame, rng);
        }
        let normalized = self.spec.normalize.is_some();
        let mut numbered = None;
        let (under, protocol, range, genuine, trusted) = if session_frame {
            let Some(s) = self.session.as_deref_mut() else {
                return Received::Consumed;
            };
            let trusted = s.suite_has_icv();
            let waiting = s.ring().next().is_some();
            let heard_before = s.ring().current_heard();
            match s.ring().open(now, frame) {
                Ok(o) => {
                    let (protocol, range) = (o.protocol(), o.range());
                    numbered = o.security_number().map(|k| (k.get(), o.seq().0));
                    let promoted = waiting && s.ring().next().is_none();
                    let first = !heard_before || promoted;
                    self.with_session(now, shared, rng, |s, cx| s.heard(cx, first, path));
                    (Under::Session, protocol, range, false, trusted)
                }
                Err(RingOpenError::Open(e)) => {
                    self.counters.drop_frame(e.reason());
                    return Received::Dropped(RxDrop::Open(id, e.reason()));
                }
                Err(_) => {
                    self.with_session(now, shared, rng, |s, cx| s.unknown_key(cx));
                    return Received::Dropped(RxDrop::UnknownKey(id));
                }
            }
        } else {
            let pin = self.pin();
            // A broadcast under a broadcast key (`[pki]`): its key id names it.
            let bkey = key_id
                .filter(|k| group_dst && shared.cfg.pki.is_some() && Some(*k) != shared.group_sn());
            let (opener, under) = if let Some(k) = bkey {
                let known = self.bkeys.iter().position(|(id, _)| *id == k.get());
                let made = known.or_else(|| {
                    let spec = shared.bkeys.spec_of(k)?;
                    let o = spec.opener(&self.spec.name, shared.cfg.max_frame).ok()?;
                    // Only the keys the host still holds keep an opener.
                    self.bkeys
                        .retain(|(id, _)| shared.bkeys.held.iter().any(|h| h.key_id == *id));
                    self.bkeys.push((k.get(), GroupOpener::new(o, pin)));
                    Some(self.bkeys.len() - 1)
                });
                let Some(i) = made else {
                    // A key this host missed: it asks for the peer's state, which brings it.
                    self.counters.unknown_key += 1;
                    if let Some(s) = self.session.as_deref_mut() {
                        s.member_due |= super::OWE_STATE;
                    }
                    return Received::Dropped(RxDrop::UnknownKey(id));
                };
                (self.bkeys[i].1.opener(pin.as_ref()), Under::Group)
            } else {
                match (&self.spec.keying, self.unicast.as_mut()) {
                    (Keying::Static(_), Some(u)) if !group_dst => (u, Under::Own),
                    _ => match self.group[0].as_mut() {
                        Some(g) => (g.opener(pin.as_ref()), Under::Group),
                        None => return Received::Dropped(RxDrop::NotForUs),
                    },
                }
            };
            let trusted = opener.suite().icv_len() > 0;
            match opener.open(now, frame) {
                Ok(o) => {
                    let genuine = group_dst && is_group_payload(o.frame(), &shared.cfg.subnets);
                    (under, o.protocol(), o.range(), genuine, trusted)
                }
                Err(e) => {
                    let reason = e.reason();
                    self.counters.drop_frame(reason);
                    if reason == DropReason::BadSignature {
                        self.bad_signature(now);
                    }
                    return Received::Dropped(RxDrop::Open(id, reason));
                }
            }
        };
        let streaming =
            self.stream.is_some() && self.session.as_deref().is_none_or(|s| s.peer_streams(now));
        let kind = classify(
            under,
            protocol,
            range,
            group_dst,
            &self.spec.keying,
            normalized,
            streaming,
            genuine,
            trusted,
        );
        let got = self.act(now, shared, kind, frame, rng);
        match numbered {
            Some((key, seq)) if self.reorder.is_some() => {
                self.reorder(now, key, seq, path, frame, got)
            }
            _ => got,
        }
    }

    /// A session frame, handled, passes the reorder buffer: one to deliver may wait there for
    /// the frames before it (it is then handed out by `poll_delivery`); any other fills its
    /// number's place.
    fn reorder(
        &mut self,
        now: Instant,
        key: u32,
        seq: u32,
        path: PathId,
        frame: &[u8],
        got: Received,
    ) -> Received {
        let up = self.session.as_deref().map_or([true; 2], |s| {
            [s.paths.is_up(PathId::FIRST), s.paths.is_up(PathId::SECOND)]
        });
        let Some(r) = self.reorder.as_mut() else {
            return got;
        };
        // Only a frame an ICV vouches for waits: what `poll_delivery` hands out is taken as
        // checked (a frame of the `none` suite goes now, in place, with its flag).
        let inner = match &got {
            Received::Deliver {
                range,
                trusted: true,
                ..
            } => Some(&frame[range.clone()]),
            _ => None,
        };
        let placed = r.arrive(now, key, seq, path, inner, up);
        self.sync_reorder();
        match placed {
            super::reorder::Placement::Held => Received::Consumed,
            super::reorder::Placement::Now => got,
        }
    }

    fn act(
        &mut self,
        now: Instant,
        shared: &mut Shared,
        kind: Kind,
        frame: &mut [u8],
        rng: &mut dyn CryptoRngCore,
    ) -> Received {
        let id = self.id;
        match kind {
            Kind::Data(range, trusted) => self.deliver(frame, range, trusted),
            Kind::GroupCopy(range, trusted) => match unpack_group_copy(frame, range) {
                Some(range) => self.deliver(frame, range, trusted),
                None => {
                    self.counters.drop_frame(DropReason::Malformed);
                    Received::Dropped(RxDrop::Open(id, DropReason::Malformed))
                }
            },
            Kind::Stream(range) => {
                if let Some(st) = self.stream.as_mut() {
                    // A malformed payload is counted by the endpoint.
                    let _ = st.ep.handle_payload(now, &frame[range]);
                    st.delivering = true;
                }
                self.arm_departure();
                Received::Consumed
            }
            Kind::Sub => {
                self.counters.rx_sub += 1;
                Received::Consumed
            }
            Kind::Member(range, under_group) => {
                let session = self.session.as_deref_mut();
                if super::super::members::handle(
                    shared,
                    session,
                    id,
                    now,
                    &frame[range],
                    under_group,
                ) {
                    self.counters.rx_sub += 1;
                    Received::Consumed
                } else {
                    self.counters.drop_frame(DropReason::Malformed);
                    Received::Dropped(RxDrop::Open(id, DropReason::Malformed))
                }
            }
            Kind::GroupIgnored => {
                if let Some(st) = self.stream.as_mut() {
                    st.counters.group_ignored += 1;
                }
                Received::Consumed
            }
            Kind::Refused => {
                // Any holder of the group key could have sealed it; the peer's data travels
                // under its own keys.
                self.counters.group_unicast += 1;
                Received::Dropped(RxDrop::GroupUnicast(id))
            }
            Kind::Handshake(range) => {
                self.handshake_message(now, shared, PathId::FIRST, &frame[range], false, rng)
            }
        }
    }

    fn deliver(&mut self, frame: &[u8], range: Range<usize>, trusted: bool) -> Received {
        // A peer learnt from a certificate sends only from the addresses it names; one with a
        // `[pki]` pin whose certificate is not known yet (no session so far) sends nothing.
        if let Some(s) = self.session.as_deref()
            && s.certified()
            && !s
                .cert
                .as_ref()
                .is_some_and(|c| super::super::source_allowed(c, &frame[range.clone()]))
            && !plant::on(Bug::NoAddressBinding)
        {
            self.counters.spoofed_addr += 1;
            return Received::Dropped(RxDrop::SpoofedAddr(self.id));
        }
        self.counters.rx_frames += 1;
        self.counters.rx_bytes += range.len() as u64;
        Received::Deliver {
            peer: self.id,
            range,
            trusted,
        }
    }

    /// Path 2 carries only handshake messages, under the group key, with its own opener and
    /// window there.
    fn receive_path2(
        &mut self,
        now: Instant,
        shared: &mut Shared,
        frame: &mut [u8],
        rng: &mut dyn CryptoRngCore,
    ) -> Received {
        let id = self.id;
        let pin = self.pin();
        let Some(g) = self.group[1].as_mut() else {
            shared.counters.path2_drops += 1;
            return Received::Dropped(RxDrop::Path2Ignored(id));
        };
        match g.opener(pin.as_ref()).open(now, frame) {
            Ok(o)
                if matches!(
                    o.protocol(),
                    Protocol::SessionEstablishment | Protocol::KeyExchange
                ) && self.session.is_some() =>
            {
                let r = o.range();
                let payload = r.start + crate::wire::ETHERNET_HEADER_LEN..r.end;
                self.handshake_message(now, shared, PathId::SECOND, &frame[payload], false, rng)
            }
            Ok(_) => {
                shared.counters.path2_ignored += 1;
                Received::Dropped(RxDrop::Path2Ignored(id))
            }
            Err(e) => {
                shared.counters.path2_drops += 1;
                if e.reason() == DropReason::BadSignature {
                    self.bad_signature(now);
                }
                Received::Dropped(RxDrop::Open(id, e.reason()))
            }
        }
    }

    /// A handshake message from the peer: the budget first (a flood costs a counter), then one
    /// parse, then the session (freshness, the handshake).
    pub(crate) fn handshake_message(
        &mut self,
        now: Instant,
        shared: &mut Shared,
        path: PathId,
        payload: &[u8],
        in_stream: bool,
        rng: &mut dyn CryptoRngCore,
    ) -> Received {
        let id = self.id;
        if !self.budget[usize::from(path.0).min(1)].take(now) {
            self.counters.messages_limited += 1;
            return Received::Dropped(RxDrop::Limited(id));
        }
        let Ok(repr) = Repr::parse_bytes(payload) else {
            self.counters.fail(FailReason::BadMessage.as_str());
            return Received::Consumed;
        };
        match self.with_session(now, shared, rng, |s: &mut Session, cx| {
            s.message(cx, path, repr, in_stream)
        }) {
            Some(Err(())) => Received::Dropped(RxDrop::StaleRequest(id)),
            _ => Received::Consumed,
        }
    }

    /// The next inner frame the stream delivered, copied into `out` (its length); handshake and
    /// control messages in the stream are handled here.
    pub fn poll_delivery(
        &mut self,
        now: Instant,
        shared: &mut Shared,
        out: &mut [u8],
        rng: &mut dyn CryptoRngCore,
    ) -> Option<usize> {
        if let Some(n) = self.reorder.as_mut().and_then(|r| r.poll_ready(out)) {
            return Some(n);
        }
        let ours = shared.cfg.mac;
        loop {
            match self.next_delivered(ours, out)? {
                Delivered::Frame(n) => return Some(n),
                Delivered::Handshake(n) => {
                    let payload = out[..n].to_vec();
                    let _ = self.handshake_message(now, shared, PathId::FIRST, &payload, true, rng);
                }
                Delivered::Sub => {}
            }
        }
    }
}

/// Rebuilds the inner frame of an opened group copy in place: `range` holds the rebuilt 14-byte
/// header (the PSP frame's MACs) and the copy's data (destination MAC, EtherType, payload); the
/// inner frame is the data's destination, the header's source, the EtherType and the payload,
/// ending where the data ends. `None` (malformed) when the data is shorter than 8 bytes, its
/// destination is not a group MAC or its type is no EtherType.
fn unpack_group_copy(frame: &mut [u8], range: Range<usize>) -> Option<Range<usize>> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::{KeySpec, Pin};

    fn keying_session() -> Keying {
        Keying::Session {
            pin: Pin::None,
            address: None,
        }
    }

    #[test]
    fn what_each_key_may_carry() {
        let r = 0..100;
        let c = |under, proto, group_dst, keying: &Keying, normalized, genuine| {
            classify(
                under,
                proto,
                r.clone(),
                group_dst,
                keying,
                normalized,
                false,
                genuine,
                true,
            )
        };
        let s = keying_session();
        let st = Keying::Static(KeySpec {
            suite: crate::SuiteId::Aes128Gcm,
            key: zeroize::Zeroizing::new(alloc::vec![1; 16]),
            sealer: crate::protect::SealerConfig::new(),
            opener: crate::protect::OpenerConfig::new(),
        });
        let data = Protocol::from(0x0800);
        // A stream payload only under the key that seals the peer's stream.
        assert_eq!(
            c(Under::Session, Protocol::Normalized, false, &s, true, false),
            Kind::Stream(14..100)
        );
        assert_eq!(
            c(Under::Group, Protocol::Normalized, false, &s, true, false),
            Kind::Refused
        );
        assert_eq!(
            c(Under::Own, Protocol::Normalized, false, &st, true, false),
            Kind::Stream(14..100)
        );
        assert_eq!(
            c(Under::Group, Protocol::Normalized, false, &st, true, false),
            Kind::Refused
        );
        assert_eq!(
            c(
                Under::Group,
                Protocol::Normalized,
                false,
                &Keying::Group,
                true,
                false
            ),
            Kind::Stream(14..100)
        );
        // A group copy never under the group key.
        assert_eq!(
            c(Under::Group, Protocol::GroupCopy, false, &s, false, false),
            Kind::Refused
        );
        assert_eq!(
            c(
                Under::Group,
                Protocol::GroupCopy,
                false,
                &Keying::Group,
                false,
                false
            ),
            Kind::Refused
        );
        assert_eq!(
            c(Under::Session, Protocol::GroupCopy, false, &s, false, false),
            Kind::GroupCopy(r.clone(), true)
        );
        // A session peer's data under the group key: genuine group payloads only.
        assert_eq!(
            c(Under::Group, data, true, &s, false, true),
            Kind::Data(r.clone(), true)
        );
        assert_eq!(c(Under::Group, data, true, &s, false, false), Kind::Refused);
        assert_eq!(
            c(Under::Group, data, false, &s, false, false),
            Kind::Refused
        );
        // A group-keyed peer's unicast data comes under the group key.
        assert_eq!(
            c(Under::Group, data, false, &Keying::Group, false, false),
            Kind::Data(r.clone(), true)
        );
        // Handshake messages under the group key, to us, from a session peer.
        assert_eq!(
            c(
                Under::Group,
                Protocol::SessionEstablishment,
                false,
                &s,
                false,
                false
            ),
            Kind::Handshake(14..100)
        );
        assert_eq!(
            c(
                Under::Group,
                Protocol::SessionEstablishment,
                true,
                &s,
                false,
                false
            ),
            Kind::Sub
        );
    }
}
