//! Frames to the peer: a run of frames from the protected side ([`Peer::handle_tap`]), what
//! the peer has to send on its own ([`Peer::poll_transmit`]: handshake messages, a keepalive,
//! frames that waited for a session, its normalized stream's next frame) and a broadcast's
//! group copy ([`Peer::seal_group_copy`]).

use rand_core::CryptoRngCore;

use super::super::keys::KeyRef;
use super::super::{
    Dest, HostCounters, HostTransmit, PeerCounters, Shared, TapDrop, TapJob, TapResult, is_group,
};
use super::{KEEPALIVE, PROBE, Peer};
use crate::handshake::PathId;
use crate::handshake::messages::MAX_MESSAGE_LEN;
use crate::protect::{MAX_BATCH, SealError, SealJob, Sealer};
use crate::time::Instant;
use crate::wire::Protocol;

/// Why a peer took no group copy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NoCopy {
    /// It gets the broadcast another way (its stream, its queue): nothing to count.
    Elsewhere,
    /// Counted already.
    Counted,
}

impl Peer {
    /// Handles a run of frames from the protected side, all to this peer (`jobs` is the run, at
    /// least one): into its stream, held for its session, or sealed (as many as the sealer
    /// takes in one batch). Returns how many it handled.
    pub fn handle_tap(
        &mut self,
        now: Instant,
        shared: &mut Shared,
        jobs: &mut [TapJob<'_>],
        rng: &mut dyn CryptoRngCore,
    ) -> usize {
        if self.streams(now) {
            let ok = self.push_inner(now, jobs[0].input);
            jobs[0].result = TapResult::Queued;
            let _ = ok;
            return 1;
        }
        if let Some(s) = self.session.as_deref_mut() {
            if !s.seals(now) {
                // No session: the frame waits, and a handshake starts if one may.
                let input = jobs[0].input;
                let before = self.counters.no_session;
                self.with_session(now, shared, rng, |s, cx| s.enqueue(cx, input));
                jobs[0].result = if self.counters.no_session > before {
                    TapResult::Dropped(TapDrop::NoSession)
                } else {
                    TapResult::Queued
                };
                return 1;
            }
            let Ok(batch) = s.ring().sealer(now).map(|s| s.batch_len()) else {
                return 1;
            };
            let n = jobs.len().min(batch).min(MAX_BATCH);
            // Each frame's path first (in `both`, they take turns).
            let mut paths = [PathId::FIRST; MAX_BATCH];
            for p in &mut paths[..n] {
                *p = s.paths.data_path();
            }
            let Ok(sealer) = s.ring().sealer(now) else {
                return 1;
            };
            let max_frame = shared.cfg.max_frame;
            let sent = seal_run(
                sealer,
                now,
                self.id,
                &mut jobs[..n],
                &paths[..n],
                &mut self.counters,
                &mut shared.counters,
                max_frame,
            );
            for path in [PathId::FIRST, PathId::SECOND] {
                if sent[usize::from(path.0)] {
                    self.with_session(now, shared, rng, |s, cx| s.sent(cx, path));
                }
            }
            return n;
        }
        let group = matches!(self.key, KeyRef::Group);
        let max_frame = shared.cfg.max_frame;
        let Shared {
            statics,
            group: g,
            counters,
            events,
            ..
        } = shared;
        let reserved = statics.sealer_mut(self.key, g);
        let n = jobs.len().min(reserved.sealer.batch_len()).min(MAX_BATCH);
        let _ = seal_run(
            &mut reserved.sealer,
            now,
            self.id,
            &mut jobs[..n],
            &[PathId::FIRST; MAX_BATCH][..n],
            &mut self.counters,
            counters,
            max_frame,
        );
        if let Some(e) = reserved.due(group) {
            events.push_back(e);
        }
        n
    }

    /// What the peer has to send now, sealed into `out`: its handshake's messages, a keepalive,
    /// the frames that waited for its session, and its stream's next frame if its slot is
    /// within the stream's lead (a [`HostTransmit`] with `at`). Call until `None`.
    pub fn poll_transmit(
        &mut self,
        now: Instant,
        shared: &mut Shared,
        out: &mut [u8],
        rng: &mut dyn CryptoRngCore,
    ) -> Option<HostTransmit> {
        loop {
            // `Some(None)`: a message went into the stream (or was refused): look again.
            match self.poll_handshake(now, shared, out) {
                Some(Some(t)) => return Some(t),
                Some(None) => continue,
                None => {}
            }
            match self.poll_session_frame(now, shared, out, rng) {
                Some(Some(t)) => return Some(t),
                Some(None) => continue,
                None => return self.poll_stream(now, shared, out, rng),
            }
        }
    }

    /// The running handshake's next message: `Some(Some(t))` sealed under the group key,
    /// `Some(None)` put into the stream (or refused by the sealer), `None` nothing to send.
    fn poll_handshake(
        &mut self,
        now: Instant,
        shared: &mut Shared,
        out: &mut [u8],
    ) -> Option<Option<HostTransmit>> {
        let streams = self.streams(now);
        let s = self.session.as_deref_mut()?;
        let in_stream = s.hs_in_stream && streams;
        let hs = s.handshake_to_send()?;
        let mut buf = [0u8; MAX_MESSAGE_LEN];
        let t = hs.poll_transmit(now, &mut buf)?;
        s.reap(&mut self.timers);
        let payload = &buf[..t.len];
        if t.path == PathId::FIRST && in_stream {
            let src = shared.cfg.mac;
            let _ = self.push_message(now, src, t.protocol, payload);
            return Some(None);
        }
        let path = if t.path.0 < shared.cfg.paths {
            t.path
        } else {
            PathId::FIRST
        };
        let dst = *self.spec.macs.first()?;
        let len = shared.seal_group_sub(now, dst, t.protocol, payload, out);
        Some(len.map(|len| HostTransmit {
            path,
            dest: Dest::Peer(self.id),
            len,
            at: None,
        }))
    }

    /// A keepalive, then the frames that waited, under the current session.
    fn poll_session_frame(
        &mut self,
        now: Instant,
        shared: &mut Shared,
        out: &mut [u8],
        rng: &mut dyn CryptoRngCore,
    ) -> Option<Option<HostTransmit>> {
        let streams = self.streams(now);
        let s = self.session.as_deref_mut()?;
        if !s.seals(now) {
            return None;
        }
        let dst = *self.spec.macs.first()?;
        let src = shared.cfg.mac;
        let max_frame = shared.cfg.max_frame;
        let mut path = s.paths.steady_path();
        let sealed = if s.keepalive_due {
            s.keepalive_due = false;
            if streams {
                let _ = self.push_message(now, src, Protocol::Control, &KEEPALIVE);
                return Some(None);
            }
            s.ring()
                .seal_sub(now, dst, src, Protocol::Control, &KEEPALIVE, out)
                .map(<[u8]>::len)
                .ok()
        } else if s.member_due != 0 {
            // The list first (a peer behind needs it), then this host's state.
            let mut buf = [0u8; crate::pki::message::MAX_MESSAGE_LEN];
            let newest = shared.bkeys.newest();
            let msg = if s.member_due & super::OWE_LIST != 0 && shared.revoked.number() > 0 {
                s.member_due &= !super::OWE_LIST;
                crate::pki::message::Message::Revocation(shared.revoked.as_bytes())
            } else if let (true, Some(k)) = (s.member_due & super::OWE_KEY != 0, newest) {
                s.member_due &= !super::OWE_KEY;
                crate::pki::message::Message::BroadcastKey(k.message(now))
            } else {
                s.member_due = 0;
                crate::pki::message::Message::State(super::super::members::holding(shared))
            };
            let n = msg.emit(&mut buf);
            if streams {
                let _ = self.push_message(now, src, Protocol::Membership, &buf[..n]);
                return Some(None);
            }
            s.ring()
                .seal_sub(now, dst, src, Protocol::Membership, &buf[..n], out)
                .map(<[u8]>::len)
                .ok()
        } else if let Some(mut frame) = s.pending.pop_front() {
            if streams {
                let _ = self.push_inner(now, &frame);
                return Some(None);
            }
            path = s.paths.data_path();
            let inner_len = frame.len();
            let sealed = if is_group(&frame) && frame.len() >= 12 {
                // A broadcast that waited for the session: as a group copy.
                frame.drain(6..12);
                s.ring()
                    .seal_sub(now, dst, src, Protocol::GroupCopy, &frame, out)
            } else {
                s.ring().seal(now, &frame, out)
            };
            match sealed {
                // Larger than the uplink carries: never sent.
                Ok(f) if f.len() > max_frame => {
                    shared.counters.tx_unsupported += 1;
                    return Some(None);
                }
                Ok(f) => {
                    self.counters.tx_frames += 1;
                    self.counters.tx_bytes += inner_len as u64;
                    Some(f.len())
                }
                Err(_) => {
                    self.counters.no_session += 1;
                    return Some(None);
                }
            }
        } else {
            // A probe on a path that carried nothing lately (docs/SESSIONS.md, "Two paths").
            path = s.paths.take_probe()?;
            s.ring()
                .seal_sub(now, dst, src, Protocol::Control, &[PROBE, path.0], out)
                .map(<[u8]>::len)
                .ok()
        };
        let Some(len) = sealed else {
            return Some(None);
        };
        self.with_session(now, shared, rng, |s, cx| s.sent(cx, path));
        Some(Some(HostTransmit {
            path,
            dest: Dest::Peer(self.id),
            len,
            at: None,
        }))
    }

    /// The stream's next frame, if its slot is within the lead: sealed under the peer's key.
    /// A frame that cannot be sealed (a session peer between sessions) is skipped and counted.
    fn poll_stream(
        &mut self,
        now: Instant,
        shared: &mut Shared,
        out: &mut [u8],
        rng: &mut dyn CryptoRngCore,
    ) -> Option<HostTransmit> {
        loop {
            let st = self.stream.as_mut()?;
            let slot = st.ep.poll_timeout()?;
            if slot > now + st.spec.lead {
                self.arm_departure();
                return None;
            }
            let at = slot.max(now);
            let dst = self.spec.macs[0];
            let src = shared.cfg.mac;
            let mut payload = [0u8; 2048];
            let Some(t) = st.ep.poll_transmit(at, &mut payload) else {
                self.arm_departure();
                return None;
            };
            let len = t.payload.len();
            let path = self
                .session
                .as_deref()
                .map_or(PathId::FIRST, |s| s.paths.steady_path());
            let sealed = match (&mut self.session, self.key) {
                (Some(s), _) => s
                    .ring()
                    .seal_sub(at, dst, src, Protocol::Normalized, &payload[..len], out)
                    .map(<[u8]>::len)
                    .ok(),
                (None, key) => {
                    let r = shared.statics.sealer_mut(key, &mut shared.group);
                    let sealed = r
                        .sealer
                        .seal_sub(at, dst, src, Protocol::Normalized, &payload[..len], out)
                        .map(<[u8]>::len)
                        .ok();
                    if let Some(e) = r.due(false) {
                        shared.events.push_back(e);
                    }
                    sealed
                }
            };
            self.arm_departure();
            match sealed {
                Some(len) => {
                    if self.session.is_some() {
                        self.with_session(now, shared, rng, |s, cx| s.sent(cx, path));
                    }
                    return Some(HostTransmit {
                        path,
                        dest: Dest::Peer(self.id),
                        len,
                        at: Some(at),
                    });
                }
                None => {
                    if let Some(st) = self.stream.as_mut() {
                        st.counters.seal_error += 1;
                    }
                }
            }
        }
    }

    /// Seals the group copy `copy` (an inner broadcast frame without its source MAC) for this
    /// peer under its own key (its live session, or its `key_file` key) into `out`. A peer that
    /// streams gets the broadcast in its stream, one whose queue holds it gets it from there; a
    /// session peer whose session stopped sealing meanwhile loses it (`no_session`), and a peer
    /// on the group key cannot take one (`tx_unsupported`).
    pub(crate) fn seal_group_copy(
        &mut self,
        now: Instant,
        shared: &mut Shared,
        copy: &[u8],
        out: &mut [u8],
        rng: &mut dyn CryptoRngCore,
    ) -> Result<(usize, PathId), NoCopy> {
        if self.streams(now) {
            return Err(NoCopy::Elsewhere);
        }
        let path = self
            .session
            .as_deref_mut()
            .map_or(PathId::FIRST, |s| s.paths.data_path());
        let dst = *self.spec.macs.first().ok_or(NoCopy::Elsewhere)?;
        let src = shared.cfg.mac;
        let sealed = if let Some(s) = self.session.as_deref_mut() {
            let Ok(sealer) = s.ring().sealer(now) else {
                self.counters.no_session += 1;
                return Err(NoCopy::Counted);
            };
            sealer
                .seal_sub(now, dst, src, Protocol::GroupCopy, copy, out)
                .map(<[u8]>::len)
        } else if let KeyRef::Static(k) = self.key
            && let Some(r) = shared.statics.get_mut(k)
        {
            let sealed = r
                .sealer
                .seal_sub(now, dst, src, Protocol::GroupCopy, copy, out)
                .map(<[u8]>::len);
            if let Some(e) = r.due(false) {
                shared.events.push_back(e);
            }
            sealed
        } else {
            shared.counters.tx_unsupported += 1;
            return Err(NoCopy::Counted);
        };
        match sealed {
            Ok(len) if len <= shared.cfg.max_frame => {
                self.counters.tx_frames += 1;
                self.counters.tx_bytes += copy.len() as u64 + 6;
                if self.session.is_some() {
                    self.with_session(now, shared, rng, |s, cx| s.sent(cx, path));
                }
                Ok((len, path))
            }
            Err(SealError::Unreserved) => {
                self.counters.tx_unreserved += 1;
                Err(NoCopy::Counted)
            }
            _ => {
                shared.counters.tx_unsupported += 1;
                Err(NoCopy::Counted)
            }
        }
    }

    /// Whether the peer holds a frame for its session (a group copy then waits in its queue).
    pub(crate) fn waits_for_session(&self, now: Instant) -> bool {
        self.session.as_deref().is_some_and(|s| !s.seals(now))
    }

    /// Holds a broadcast in the peer's queue until its session is up.
    pub(crate) fn hold(
        &mut self,
        now: Instant,
        shared: &mut Shared,
        frame: &[u8],
        rng: &mut dyn CryptoRngCore,
    ) {
        self.with_session(now, shared, rng, |s, cx| s.enqueue(cx, frame));
    }
}

/// Seals `jobs` (all to peer `pid`) with `sealer` in one batch; whether any was sealed.
#[allow(clippy::too_many_arguments)]
fn seal_run(
    sealer: &mut Sealer,
    now: Instant,
    pid: super::super::PeerId,
    jobs: &mut [TapJob<'_>],
    paths: &[PathId],
    peer: &mut PeerCounters,
    host: &mut HostCounters,
    max_frame: usize,
) -> [bool; 2] {
    let n = jobs.len().min(MAX_BATCH);
    let mut results = [Ok(0); MAX_BATCH];
    {
        let mut seal: [SealJob<'_>; MAX_BATCH] =
            core::array::from_fn(|_| SealJob::new(&[], &mut []));
        for (s, j) in seal.iter_mut().zip(jobs.iter_mut()) {
            *s = SealJob::new(j.input, &mut *j.out);
        }
        sealer.seal_batch(now, &mut seal[..n]);
        for (r, s) in results.iter_mut().zip(&seal[..n]) {
            *r = s.result;
        }
    }
    let mut any = [false; 2];
    for ((r, j), path) in results[..n].iter().zip(jobs.iter_mut()).zip(paths) {
        j.result = match *r {
            // Larger than the uplink carries (an inner frame beyond the MTU): never sent.
            Ok(len) if len > max_frame => {
                host.tx_unsupported += 1;
                TapResult::Dropped(TapDrop::Unsupported)
            }
            Ok(len) => {
                any[usize::from(path.0).min(1)] = true;
                peer.tx_frames += 1;
                peer.tx_bytes += j.input.len() as u64;
                TapResult::Sealed {
                    len,
                    dest: Dest::Peer(pid),
                    path: *path,
                }
            }
            Err(SealError::BadInput) => {
                host.malformed += 1;
                TapResult::Dropped(TapDrop::Malformed)
            }
            Err(SealError::Unreserved) => {
                peer.tx_unreserved += 1;
                TapResult::Dropped(TapDrop::Unreserved)
            }
            Err(_) => {
                host.tx_unsupported += 1;
                TapResult::Dropped(TapDrop::Unsupported)
            }
        };
    }
    any
}
