//! Broadcasts and multicasts from the protected side: into every normalized peer's stream, and
//! under the group key for the others (once on a shared segment), or, too large for the group
//! key (with this host's signature) and with group copies on, as a group copy to each peer
//! under that peer's own key.

use alloc::vec::Vec;

use rand_core::CryptoRngCore;

use super::peer::tx::NoCopy;
use super::{Dest, Host, HostTransmit, PeerId, TapDrop, TapJob, TapResult};
use crate::handshake::PathId;
use crate::protect::SealError;
use crate::time::Instant;
use crate::wire::Protocol;

/// A broadcast going out as group copies: the inner frame without its source MAC, the next
/// peer to take one, and the peers whose queue holds the frame instead.
#[derive(Debug)]
pub(crate) struct CopyJob {
    copy: Vec<u8>,
    next: usize,
    queued: Vec<PeerId>,
}

impl Host {
    /// A broadcast or multicast frame from the protected side.
    pub(super) fn broadcast(
        &mut self,
        now: Instant,
        job: &mut TapJob<'_>,
        rng: &mut dyn CryptoRngCore,
    ) -> TapResult {
        let frame = job.input;
        // Normalized peers get broadcasts in their streams; the others under the group key (no
        // copy at all when every peer is normalized).
        let mut all = !self.peers.is_empty();
        for i in 0..self.peers.len() {
            if self.peers[i].streams(now) {
                let _ = self.peers[i].push_inner(now, frame);
                self.touch(PeerId(i), now);
            } else {
                all = false;
            }
        }
        if all {
            return TapResult::Queued;
        }
        if self.shared.cfg.group_copies && !self.fits_group_key(frame.len()) {
            return self.queue_copies(now, frame, rng);
        }
        // Under the group key on path 1 only, also while a peer's path 1 is down: a copy on
        // path 2 would be delivered twice if path 1 only held the frame (the simulator's seed
        // 17 found that), so such a peer misses broadcasts until path 1 is back
        // (docs/SESSIONS.md, "Two paths").
        self.seal_group(now, job)
    }

    /// Whether an inner frame of `len` bytes sealed under the group key (signed, when this host
    /// has an identity) fits the uplink.
    fn fits_group_key(&self, len: usize) -> bool {
        self.shared
            .group
            .r
            .sealer
            .sealed_len(len)
            .is_some_and(|l| l <= self.shared.cfg.max_frame)
    }

    /// A broadcast too large for the group key goes as a group copy to each peer under its own
    /// key: a session peer without a session holds it in its queue (as a unicast frame would
    /// wait); the others get theirs from [`Host::poll_transmit`]. The frame is copied once.
    fn queue_copies(
        &mut self,
        now: Instant,
        frame: &[u8],
        rng: &mut dyn CryptoRngCore,
    ) -> TapResult {
        let Some(ty) = frame.get(12..14) else {
            self.shared.counters.malformed += 1;
            return TapResult::Dropped(TapDrop::Malformed);
        };
        // An 802.3 length frame has no EtherType to carry (as `Sealer::seal` refuses it); a
        // frame beyond the MTU is refused once, not once per peer.
        if u16::from_be_bytes([ty[0], ty[1]]) < Protocol::MIN_ETHERTYPE
            || frame.len() + self.overhead > self.shared.cfg.max_frame
        {
            self.shared.counters.tx_unsupported += 1;
            return TapResult::Dropped(TapDrop::Unsupported);
        }
        self.shared.counters.group_copies += 1;
        let mut queued = Vec::new();
        for i in 0..self.peers.len() {
            if self.peers[i].waits_for_session(now) {
                self.peers[i].hold(now, &mut self.shared, frame, rng);
                self.touch(PeerId(i), now);
                queued.push(PeerId(i));
            }
        }
        let mut copy = Vec::with_capacity(frame.len() - 6);
        copy.extend_from_slice(&frame[..6]);
        copy.extend_from_slice(&frame[12..]);
        self.copies.push_back(CopyJob {
            copy,
            next: 0,
            queued,
        });
        TapResult::Queued
    }

    /// The next group copy, sealed for the next peer that takes one.
    pub(super) fn poll_copy(
        &mut self,
        now: Instant,
        out: &mut [u8],
        rng: &mut dyn CryptoRngCore,
    ) -> Option<HostTransmit> {
        while let Some(job) = self.copies.front_mut() {
            while job.next < self.peers.len() {
                let i = job.next;
                job.next += 1;
                if job.queued.contains(&PeerId(i)) {
                    continue;
                }
                let r = self.peers[i].seal_group_copy(now, &mut self.shared, &job.copy, out, rng);
                self.shared.events.extend(self.peers[i].events.drain(..));
                match r {
                    Ok((len, path)) => {
                        return Some(HostTransmit {
                            path,
                            dest: Dest::Peer(PeerId(i)),
                            len,
                            at: None,
                        });
                    }
                    Err(NoCopy::Elsewhere | NoCopy::Counted) => {}
                }
            }
            self.copies.pop_front();
        }
        None
    }

    /// Seals a broadcast or multicast frame under the group key.
    fn seal_group(&mut self, now: Instant, job: &mut TapJob<'_>) -> TapResult {
        if self.shared.cfg.pki.is_some()
            && let Some(len) = self.seal_bkey(now, job.input, job.out)
        {
            let s = &mut self.shared;
            s.counters.group_tx_frames += 1;
            s.counters.group_tx_bytes += job.input.len() as u64;
            return TapResult::Sealed {
                len,
                dest: Dest::Group,
                path: PathId::FIRST,
            };
        }
        let s = &mut self.shared;
        let r = s
            .group
            .r
            .sealer
            .seal(now, job.input, job.out)
            .map(<[u8]>::len);
        if let Some(e) = s.group.r.due(true) {
            s.events.push_back(e);
        }
        match r {
            // Larger than the uplink carries (an inner frame beyond the MTU): never sent.
            Ok(len) if len > s.cfg.max_frame => {
                s.counters.tx_unsupported += 1;
                TapResult::Dropped(TapDrop::Unsupported)
            }
            Ok(len) => {
                s.counters.group_tx_frames += 1;
                s.counters.group_tx_bytes += job.input.len() as u64;
                TapResult::Sealed {
                    len,
                    dest: Dest::Group,
                    path: PathId::FIRST,
                }
            }
            Err(SealError::BadInput) => {
                s.counters.malformed += 1;
                TapResult::Dropped(TapDrop::Malformed)
            }
            Err(SealError::Unreserved) => {
                s.counters.tx_unreserved += 1;
                TapResult::Dropped(TapDrop::Unreserved)
            }
            Err(_) => {
                s.counters.tx_unsupported += 1;
                TapResult::Dropped(TapDrop::Unsupported)
            }
        }
    }
}
