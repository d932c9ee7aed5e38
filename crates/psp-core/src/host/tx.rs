//! Frames from the protected side: [`Host::handle_tap`].

use rand_core::CryptoRngCore;

use alloc::vec::Vec;

use super::keys::KeyRef;
use super::session::{OutKind, Outgoing};
use super::{Dest, Host, PeerId, TapDrop, TapJob, TapResult, Transmit, is_group, mac_at};
use crate::handshake::PathId;
use crate::protect::{MAX_BATCH, SealError, SealJob, Sealer};
use crate::time::Instant;
use crate::wire::Protocol;

impl Host {
    /// Seals a batch of Ethernet II frames from the protected side, each into its job's `out`
    /// (at least `max_frame` bytes), and sets each job's result: sealed (with where it goes),
    /// queued (a session peer without a session: the frame waits and a handshake starts), or
    /// dropped (counted). A run of frames to one peer is sealed in one call, so a suite can
    /// interleave their cipher chains.
    ///
    /// Only this host's frames are sealed: a frame from another source MAC (a bridged or
    /// spoofing sender behind the TAP) would leave as ours.
    pub fn handle_tap(
        &mut self,
        now: Instant,
        jobs: &mut [TapJob<'_>],
        rng: &mut dyn CryptoRngCore,
    ) {
        let mut i = 0;
        while i < jobs.len() {
            let frame = jobs[i].input;
            let (Some(dst), Some(src)) = (mac_at(frame, 0), mac_at(frame, 6)) else {
                self.counters.malformed += 1;
                jobs[i].result = TapResult::Dropped(TapDrop::Malformed);
                i += 1;
                continue;
            };
            if src != self.cfg.mac {
                self.counters.spoofed_src += 1;
                jobs[i].result = TapResult::Dropped(TapDrop::SpoofedSrc);
                i += 1;
                continue;
            }
            if is_group(&dst) {
                // Normalized peers get broadcasts in their streams; the others under the group
                // key (no copy at all when every peer is normalized).
                self.push_group_to_streams(now, frame);
                jobs[i].result = if self.all_streaming(now) {
                    TapResult::Queued
                } else if self.cfg.group_copies && !self.fits_group_key(frame.len()) {
                    self.queue_group_copies(now, frame, rng)
                } else {
                    self.seal_group(now, &mut jobs[i])
                };
                i += 1;
                continue;
            }
            let Some(&pid) = self.by_mac.get(&dst) else {
                self.counters.no_route += 1;
                jobs[i].result = TapResult::Dropped(TapDrop::NoRoute);
                i += 1;
                continue;
            };
            if self.streams(pid.0, now) {
                let _ = self.push_inner(now, pid.0, frame);
                jobs[i].result = TapResult::Queued;
                i += 1;
                continue;
            }
            i = self.seal_peer_run(now, pid, dst, jobs, i, rng);
        }
        self.take_clock_event();
    }

    /// Whether an inner frame of `len` bytes sealed under the group key (signed, when this host
    /// has an identity) fits the uplink.
    fn fits_group_key(&self, len: usize) -> bool {
        self.group
            .r
            .sealer
            .sealed_len(len)
            .is_some_and(|l| l <= self.cfg.max_frame)
    }

    /// A broadcast or multicast frame too large for the group key goes as a group copy to each
    /// peer under its own key: a session peer without a session holds it in its queue (as a
    /// unicast frame would wait); the others get theirs from [`Host::poll_transmit`]. The
    /// frame is copied once, into the transmit queue.
    fn queue_group_copies(
        &mut self,
        now: Instant,
        frame: &[u8],
        rng: &mut dyn CryptoRngCore,
    ) -> TapResult {
        let Some(ty) = frame.get(12..14) else {
            self.counters.malformed += 1;
            return TapResult::Dropped(TapDrop::Malformed);
        };
        // An 802.3 length frame has no EtherType to carry (as `Sealer::seal` refuses it); a
        // frame beyond the MTU is refused once, not once per peer.
        if u16::from_be_bytes([ty[0], ty[1]]) < Protocol::MIN_ETHERTYPE
            || frame.len() + self.overhead > self.cfg.max_frame
        {
            self.counters.tx_unsupported += 1;
            return TapResult::Dropped(TapDrop::Unsupported);
        }
        self.counters.group_copies += 1;
        let mut queued = Vec::new();
        for i in 0..self.peers.len() {
            let waiting = self.peers[i]
                .session
                .as_deref_mut()
                .is_some_and(|s| s.ring().sealer(now).is_err());
            if waiting {
                self.with_session(PeerId(i), now, rng, |s, cx| s.enqueue(cx, frame));
                queued.push(PeerId(i));
            }
        }
        let mut copy = Vec::with_capacity(frame.len() - 6);
        copy.extend_from_slice(&frame[..6]);
        copy.extend_from_slice(&frame[12..]);
        self.transmits.push_back(Outgoing {
            peer: PeerId(0),
            path: PathId::FIRST,
            kind: OutKind::GroupCopy(copy, queued),
        });
        TapResult::Queued
    }

    /// Seals the group copy `copy` for the first peer from `from` on that takes one, and
    /// queues the rest; `None` when no peer from `from` on takes one. A peer takes a copy under
    /// its live session or its static key; a normalized peer whose stream runs had the frame
    /// in its stream, a session peer in `queued` holds it in its queue, a session peer whose
    /// session stopped sealing since loses it (`no_session`), and a peer on the group key
    /// cannot take one (a copy under the group key is refused: `tx_unsupported`).
    pub(super) fn seal_group_copy(
        &mut self,
        now: Instant,
        from: usize,
        (copy, queued): (Vec<u8>, Vec<PeerId>),
        out: &mut [u8],
    ) -> Option<Transmit> {
        let src = self.cfg.mac;
        for i in from..self.peers.len() {
            if self.streams(i, now) || queued.contains(&PeerId(i)) {
                continue;
            }
            let p = &mut self.peers[i];
            let Some(&dst) = p.spec.macs.first() else {
                continue;
            };
            let sealed = if let Some(s) = p.session.as_deref_mut() {
                let Ok(sealer) = s.ring().sealer(now) else {
                    p.counters.no_session += 1;
                    continue;
                };
                sealer
                    .seal_sub(now, dst, src, Protocol::GroupCopy, &copy, out)
                    .map(<[u8]>::len)
            } else if let KeyRef::Static(k) = p.key
                && let Some(r) = self.statics.get_mut(k)
            {
                let sealed = r
                    .sealer
                    .seal_sub(now, dst, src, Protocol::GroupCopy, &copy, out)
                    .map(<[u8]>::len);
                if let Some(e) = r.due(false) {
                    self.events.push_back(e);
                }
                sealed
            } else {
                self.counters.tx_unsupported += 1;
                continue;
            };
            match sealed {
                Ok(len) if len <= self.cfg.max_frame => {
                    p.counters.tx_frames += 1;
                    p.counters.tx_bytes += copy.len() as u64 + 6;
                    if i + 1 < self.peers.len() {
                        self.transmits.push_front(Outgoing {
                            peer: PeerId(i + 1),
                            path: PathId::FIRST,
                            kind: OutKind::GroupCopy(copy, queued),
                        });
                    }
                    return Some(Transmit {
                        path: PathId::FIRST,
                        dest: Dest::Peer(PeerId(i)),
                        len,
                    });
                }
                Err(SealError::Unreserved) => p.counters.tx_unreserved += 1,
                _ => self.counters.tx_unsupported += 1,
            }
        }
        None
    }

    /// Seals a broadcast or multicast frame under the group key.
    fn seal_group(&mut self, now: Instant, job: &mut TapJob<'_>) -> TapResult {
        let r = self
            .group
            .r
            .sealer
            .seal(now, job.input, job.out)
            .map(<[u8]>::len);
        if let Some(e) = self.group.r.due(true) {
            self.events.push_back(e);
        }
        match r {
            // Larger than the uplink carries (an inner frame beyond the MTU): never sent.
            Ok(len) if len > self.cfg.max_frame => {
                self.counters.tx_unsupported += 1;
                TapResult::Dropped(TapDrop::Unsupported)
            }
            Ok(len) => {
                self.counters.group_tx_frames += 1;
                self.counters.group_tx_bytes += job.input.len() as u64;
                TapResult::Sealed {
                    len,
                    dest: Dest::Group,
                }
            }
            Err(e) => TapResult::Dropped(self.count_seal_error(e)),
        }
    }

    /// Seals the run of frames from `jobs[i]` to peer `pid` (at `dst`), up to the sealer's
    /// batch length; returns the index after the run.
    fn seal_peer_run(
        &mut self,
        now: Instant,
        pid: PeerId,
        dst: super::Mac,
        jobs: &mut [TapJob<'_>],
        i: usize,
        rng: &mut dyn CryptoRngCore,
    ) -> usize {
        let ours = self.cfg.mac;
        let run_end = |jobs: &[TapJob<'_>], len: usize| {
            let mut end = i + 1;
            while end < jobs.len()
                && end - i < len
                && mac_at(jobs[end].input, 0) == Some(dst)
                && mac_at(jobs[end].input, 6) == Some(ours)
            {
                end += 1;
            }
            end
        };
        if self.peers[pid.0].session.is_some() {
            let can_seal = self.peers[pid.0]
                .session
                .as_deref_mut()
                .is_some_and(|s| s.ring().sealer(now).is_ok());
            if !can_seal {
                // No session: the frames wait, and a handshake starts if one may.
                let end = run_end(jobs, MAX_BATCH);
                for job in &mut jobs[i..end] {
                    let input = job.input;
                    let before = self.peers[pid.0].counters.no_session;
                    self.with_session(pid, now, rng, |s, cx| s.enqueue(cx, input));
                    job.result = if self.peers[pid.0].counters.no_session > before {
                        TapResult::Dropped(TapDrop::NoSession)
                    } else {
                        TapResult::Queued
                    };
                }
                return end;
            }
            let p = &mut self.peers[pid.0];
            let Some(Ok(sealer)) = p.session.as_deref_mut().map(|s| s.ring().sealer(now)) else {
                return i + 1;
            };
            let end = run_end(jobs, sealer.batch_len());
            seal_run(
                sealer,
                now,
                pid,
                &mut jobs[i..end],
                &mut p.counters,
                &mut self.counters,
                self.cfg.max_frame,
            );
            self.with_session(pid, now, rng, |s, cx| s.after_seal(cx));
            return end;
        }
        let p = &mut self.peers[pid.0];
        let reserved = match p.key {
            KeyRef::Static(k) => match self.statics.get_mut(k) {
                Some(r) => r,
                None => &mut self.group.r,
            },
            KeyRef::Group => &mut self.group.r,
        };
        let end = run_end(jobs, reserved.sealer.batch_len());
        seal_run(
            &mut reserved.sealer,
            now,
            pid,
            &mut jobs[i..end],
            &mut p.counters,
            &mut self.counters,
            self.cfg.max_frame,
        );
        if let Some(e) = reserved.due(matches!(p.key, KeyRef::Group)) {
            self.events.push_back(e);
        }
        end
    }

    fn count_seal_error(&mut self, e: SealError) -> TapDrop {
        match e {
            SealError::BadInput => {
                self.counters.malformed += 1;
                TapDrop::Malformed
            }
            SealError::Unreserved => {
                self.counters.tx_unreserved += 1;
                TapDrop::Unreserved
            }
            _ => {
                self.counters.tx_unsupported += 1;
                TapDrop::Unsupported
            }
        }
    }
}

/// Seals `jobs` (all to peer `pid`) with `sealer` in one batch.
fn seal_run(
    sealer: &mut Sealer,
    now: Instant,
    pid: PeerId,
    jobs: &mut [TapJob<'_>],
    peer: &mut super::PeerCounters,
    host: &mut super::HostCounters,
    max_frame: usize,
) {
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
    for (r, j) in results[..n].iter().zip(jobs.iter_mut()) {
        j.result = match *r {
            // Larger than the uplink carries (an inner frame beyond the MTU): never sent.
            Ok(len) if len > max_frame => {
                host.tx_unsupported += 1;
                TapResult::Dropped(TapDrop::Unsupported)
            }
            Ok(len) => {
                peer.tx_frames += 1;
                peer.tx_bytes += j.input.len() as u64;
                TapResult::Sealed {
                    len,
                    dest: Dest::Peer(pid),
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
}
