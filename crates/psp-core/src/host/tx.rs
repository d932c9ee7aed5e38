//! Frames from the protected side: [`Host::handle_tap`].

use rand_core::CryptoRngCore;

use super::keys::KeyRef;
use super::{Dest, Host, PeerId, TapDrop, TapJob, TapResult, is_group, mac_at};
use crate::protect::{MAX_BATCH, SealError, SealJob, Sealer};
use crate::time::Instant;

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
