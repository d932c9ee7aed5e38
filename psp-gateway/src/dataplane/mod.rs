//! The dataplane: two tasks per gateway, one per direction, each owning its half of the peer
//! table. TAP → seal → uplink, and uplink → open → TAP, a batch per wake-up (at most
//! [`BATCH`] frames, so neither direction starves the other), no allocation
//! and no lock per frame. Reloads arrive through a `watch` channel as a complete [`set::PeerSet`];
//! each task takes its half between batches (see [`set`] for the build and commit steps).
//! With `PSP_SPLIT=1` each direction's last step (the uplink send, the TAP write) runs in a
//! pipeline [`stage`] on a thread of its own.

pub(crate) mod counters;
pub(crate) mod group_filter;
pub(crate) mod keys;
pub(crate) mod normalize;
pub(crate) mod pacing;
pub(crate) mod peers;
pub(crate) mod set;
pub(crate) mod stage;

use std::io;
use std::sync::Arc;

use psp_core::handshake::{PathId, RingOpenError};
use psp_core::session::{DropReason, MAX_BATCH, SealError, SealJob, Sealer};
use psp_core::time::Instant;
use psp_core::wire::{Frame, Protocol, SecurityNumber};
use tokio::sync::watch;

use self::counters::GlobalCounters;
use self::keys::KeySealer;
use self::peers::{RxPeers, TxPeer, TxPeers, lock_group};
use self::set::PeerSet;
use self::stage::{Drain, Stage};
use crate::io::{BATCH, Batch, SLOT_LEN, Uplink, tap::Tap};
use crate::offload::Gro;

/// A MAC address.
pub(crate) type Mac = [u8; 6];

/// What both directions share: counters not tied to a peer, our MAC, the clock origin.
#[derive(Debug)]
pub(crate) struct Shared {
    /// Global counters.
    pub(crate) global: GlobalCounters,
    /// Our protected MAC (the TAP's).
    pub(crate) mac: Mac,
    /// The clock origin (core time is microseconds since this instant).
    pub(crate) origin: std::time::Instant,
    /// The channel to the session driver, with `[session]`.
    pub(crate) sessions: Option<crate::sessions::Link>,
    /// The normalizer's pacer thread.
    pub(crate) pacing: Arc<pacing::Pacing>,
    /// This host's protected addresses and prefix lengths (which IPv4 broadcasts are genuine).
    pub(crate) subnets: Vec<(core::net::IpAddr, u8)>,
}

impl Shared {
    /// The current core time.
    pub(crate) fn now(&self) -> Instant {
        Instant::from_std(self.origin, std::time::Instant::now())
    }
}

/// Whether `frame` carries a security number other than the group key's: a session key id.
fn carries_key_id(frame: &[u8], group: Option<SecurityNumber>) -> bool {
    Frame::new_checked(frame, 0)
        .ok()
        .and_then(|f| f.security_number())
        .is_some_and(|sn| Some(sn) != group)
}

fn is_group(mac: &[u8]) -> bool {
    mac.first().is_some_and(|b| b & 1 == 1)
}

fn mac_at(frame: &[u8], at: usize) -> Option<Mac> {
    frame.get(at..at + 6)?.try_into().ok()
}

/// Rate-limited debug logging of dropped frames (at most `PER_SECOND` lines a second).
#[derive(Debug)]
struct DropLog {
    second: std::time::Instant,
    lines: u32,
    suppressed: u64,
}

impl DropLog {
    const PER_SECOND: u32 = 10;

    fn new() -> Self {
        Self {
            second: std::time::Instant::now(),
            lines: 0,
            suppressed: 0,
        }
    }

    fn log(&mut self, peer: &str, reason: &str, len: usize) {
        if !tracing::enabled!(tracing::Level::DEBUG) {
            return;
        }
        let now = std::time::Instant::now();
        if now.duration_since(self.second).as_secs() >= 1 {
            if self.suppressed > 0 {
                tracing::debug!(suppressed = self.suppressed, "dropped frames not logged");
            }
            self.second = now;
            self.lines = 0;
            self.suppressed = 0;
        }
        if self.lines < Self::PER_SECOND {
            self.lines += 1;
            tracing::debug!(peer, reason, len, "frame dropped");
        } else {
            self.suppressed += 1;
        }
    }
}

/// Transmit direction: reads frames from the TAP, seals each, sends them on the uplink (split:
/// a sender stage does, in order). Returns only on an I/O error.
///
/// # Errors
/// A TAP read error or an uplink error other than a full buffer (split: the sender stage's,
/// returned as soon as it stops), or a sender stage that could not start.
pub(crate) async fn tx_loop(
    tap: Arc<Tap>,
    uplink: Arc<Uplink>,
    shared: Arc<Shared>,
    mut set: watch::Receiver<Arc<PeerSet>>,
    mut peers: TxPeers,
) -> io::Result<()> {
    let udp = matches!(*uplink, Uplink::Udp(_));
    let mut inb = Batch::new(BATCH);
    let mut out = Batch::new(BATCH);
    let mut scratch = vec![0u8; SLOT_LEN];
    // With TAP offloads, TCP super-frames are cut into MTU-sized frames here.
    let mut reader = tap.reader();
    let g = &shared.global;
    // `PSP_SPLIT=1`: sealed batches go to a sender thread, in order (one FIFO).
    let mut stage = if stage::enabled() {
        let (uplink, shared) = (Arc::clone(&uplink), Arc::clone(&shared));
        let make = || Batch::new(BATCH);
        Some(Stage::spawn("psp-send", make, |d| {
            send_stage(uplink, shared, d)
        })?)
    } else {
        None
    };
    loop {
        let n = match &mut stage {
            None => tap.recv_batch_with(&mut inb, &mut reader).await?,
            // A send error ends the direction at once, not at the next frame from the TAP.
            Some(st) => tokio::select! {
                r = tap.recv_batch_with(&mut inb, &mut reader) => r?,
                e = st.failed() => return Err(e),
            },
        };
        crate::io::busy::note();
        g.malformed.add(reader.take_dropped());
        if set.has_changed().unwrap_or(false) {
            let next = Arc::clone(&set.borrow_and_update());
            // Every published set holds a complete transmit half that only this task takes.
            if let Some(fresh) = next.take_tx() {
                peers = fresh.carry_over(peers);
            }
        }
        let now = shared.now();
        out.clear();
        let mut i = 0;
        while i < n {
            let frame = inb.frame(i);
            let (Some(dst), Some(src)) = (mac_at(frame, 0), mac_at(frame, 6)) else {
                g.malformed.add(1);
                i += 1;
                continue;
            };
            // Only this host's frames are sealed: a frame from another source MAC (a bridged
            // or spoofing sender behind the TAP) would leave as ours.
            if src != shared.mac {
                g.spoofed_src.add(1);
                i += 1;
                continue;
            }
            if out.capacity() - out.len() < RUN {
                flush(&uplink, &mut stage, &mut out, g).await?;
            }
            if is_group(&dst) {
                if let Some(len) = seal_group(&mut peers, now, frame, &mut scratch, g) {
                    // Raw: once for the segment. UDP: one copy per endpoint, flushing as the
                    // batch fills (with many peers a broadcast is more copies than one batch).
                    let sealed = &scratch[..len];
                    let copies = peers
                        .peers
                        .iter()
                        .filter(|p| udp && p.norm.is_none())
                        .filter_map(|p| p.endpoint.map(Some));
                    for addr in copies.chain((!udp).then_some(None)) {
                        if out.is_full() {
                            flush(&uplink, &mut stage, &mut out, g).await?;
                        }
                        push_copy(&mut out, addr, sealed);
                        g.group_tx_frames.add(1);
                        g.group_tx_bytes.add(frame.len() as u64);
                    }
                }
                i += 1;
                continue;
            }
            let Some(&pi) = peers.by_mac.get(&dst) else {
                g.no_route.add(1);
                i += 1;
                continue;
            };
            if let Some(np) = &peers.peers[pi].norm {
                np.push_inner(now, frame);
                i += 1;
                continue;
            }
            if let Some(s) = peers.peers[pi].session.clone() {
                i = seal_session(&peers.peers[pi], &s, now, &inb, i, n, &shared, &mut out);
                continue;
            }
            // A run of frames to the same peer is sealed in one call, so the suite can
            // interleave their cipher chains (as many as it runs side by side).
            let peer = &peers.peers[pi];
            let mut group;
            let sealer = match peer.sealer {
                Some(k) => &mut peers.sealers[k],
                None => {
                    group = lock_group(&peers.group);
                    &mut *group
                }
            };
            let end = run_end(&inb, i, n, sealer.batch_len(), dst, shared.mac);
            seal_run(peer, sealer, now, &inb, i..end, &mut out, g);
            keep_reserved(sealer, g);
            i = end;
        }
        flush(&uplink, &mut stage, &mut out, g).await?;
    }
}

/// The sender stage of a split transmit direction: sends each batch `tx_loop` sealed, in
/// order. Returns on the first send error (which `tx_loop` then returns).
async fn send_stage(
    uplink: Arc<Uplink>,
    shared: Arc<Shared>,
    mut batches: Drain<Batch>,
) -> io::Result<()> {
    while let Some(mut out) = batches.next().await {
        send(&uplink, &mut out, &shared.global).await?;
        batches.done(out);
    }
    Ok(())
}

/// The end of the run of frames from `i` (before `n`, at most `run` long) to `dst` from `ours`.
fn run_end(inb: &Batch, i: usize, n: usize, run: usize, dst: Mac, ours: Mac) -> usize {
    let mut end = i + 1;
    while end < n
        && end - i < run
        && mac_at(inb.frame(end), 0) == Some(dst)
        && mac_at(inb.frame(end), 6) == Some(ours)
    {
        end += 1;
    }
    end
}

/// Seals the run of frames from `i` to a session peer under its current session, or queues
/// them for the driver when there is none. Returns the index after the run.
#[allow(clippy::too_many_arguments)]
fn seal_session(
    peer: &TxPeer,
    s: &crate::sessions::PeerSession,
    now: Instant,
    inb: &Batch,
    i: usize,
    n: usize,
    shared: &Shared,
    out: &mut Batch,
) -> usize {
    let dst = mac_at(inb.frame(i), 0).unwrap_or_default();
    let mut ring = s.ring();
    let (end, kick) = match ring.sealer(now) {
        Ok(sealer) => {
            let end = run_end(inb, i, n, sealer.batch_len(), dst, shared.mac);
            seal_run(peer, sealer, now, inb, i..end, out, &shared.global);
            (end, ring.rekey_due(now))
        }
        Err(_) => {
            drop(ring);
            let end = run_end(inb, i, n, RUN, dst, shared.mac);
            for k in i..end {
                s.enqueue(inb.frame(k));
            }
            (end, true)
        }
    };
    if kick && let Some(link) = &shared.sessions {
        link.kick(s);
    }
    end
}

/// The longest run `seal_run` takes (runs are `Sealer::batch_len` frames at most).
const RUN: usize = MAX_BATCH;

/// Seals a broadcast/multicast frame under the group key into `scratch` and returns its
/// length, or `None` when every peer is normalized (they get it through their endpoints) or
/// sealing failed (counted). The caller sends the copies.
fn seal_group(
    peers: &mut TxPeers,
    now: Instant,
    frame: &[u8],
    scratch: &mut [u8],
    g: &GlobalCounters,
) -> Option<usize> {
    // Normalized peers get broadcasts through their endpoint, not under the group key.
    for np in peers.peers.iter().filter_map(|p| p.norm.as_deref()) {
        np.push_inner(now, frame);
    }
    if peers.peers.iter().all(|p| p.norm.is_some()) && !peers.peers.is_empty() {
        return None;
    }
    let mut group = peers.group();
    let sealed = match group.seal(now, frame, scratch) {
        Ok(s) => Some(s.len()),
        Err(e) => {
            count_seal_error(g, e);
            None
        }
    };
    keep_reserved(&mut group, g);
    sealed
}

/// Seals frames `range` of `inb` (all to `peer`) into the next free slots of `out`.
/// The caller made room for `range.len()` frames.
fn seal_run(
    peer: &TxPeer,
    sealer: &mut Sealer,
    now: Instant,
    inb: &Batch,
    range: core::ops::Range<usize>,
    out: &mut Batch,
    g: &GlobalCounters,
) {
    let first = out.len();
    let count = range.len();
    let mut results = [Ok(0); RUN];
    {
        let mut slots = out.slots_mut().skip(first);
        let mut jobs: [SealJob<'_>; RUN] = core::array::from_fn(|_| SealJob::new(&[], &mut []));
        for (job, i) in jobs.iter_mut().zip(range.clone()) {
            if let Some(slot) = slots.next() {
                *job = SealJob::new(inb.frame(i), slot);
            }
        }
        sealer.seal_batch(now, &mut jobs[..count]);
        for (r, job) in results.iter_mut().zip(&jobs) {
            *r = job.result;
        }
    }
    for ((j, r), i) in results[..count].iter().enumerate().zip(range) {
        match *r {
            Ok(len) => {
                out.commit_slot(first + j, len, peer.endpoint);
                peer.counters.tx_frames.add(1);
                peer.counters.tx_bytes.add(inb.frame(i).len() as u64);
            }
            Err(e) => count_seal_error(g, e),
        }
    }
}

fn push_copy(out: &mut Batch, addr: Option<core::net::SocketAddr>, sealed: &[u8]) {
    out.push_with(addr, |slot| {
        slot.get_mut(..sealed.len())?.copy_from_slice(sealed);
        Some(sealed.len())
    });
}

fn count_seal_error(g: &GlobalCounters, e: SealError) {
    match e {
        SealError::BadInput => g.malformed.add(1),
        SealError::Unreserved => g.tx_unreserved.add(1),
        _ => g.tx_unsupported.add(1),
    }
}

/// Claims the next sequence numbers of a static key when due ([`KeySealer::keep_reserved`]);
/// a failed write is logged (the first time, then every power of two of frames it cost) and the
/// sealer stops at its old limit.
pub(crate) fn keep_reserved(sealer: &mut KeySealer, g: &GlobalCounters) {
    if let Err(e) = sealer.keep_reserved() {
        let n = g.tx_unreserved.get();
        if n.is_power_of_two() || n == 0 {
            tracing::error!(error = %e, unsealed = n, "sequence numbers not reserved: frames under this key stop until the state directory is writable");
        }
    }
}

/// Sends `out` and empties it, or (split) hands it to the sender stage for an empty one.
async fn flush(
    uplink: &Uplink,
    stage: &mut Option<Stage<Batch>>,
    out: &mut Batch,
    g: &GlobalCounters,
) -> io::Result<()> {
    match stage {
        Some(st) if !out.is_empty() => st.swap(out).await,
        Some(_) => Ok(()),
        None => send(uplink, out, g).await,
    }
}

/// Sends `out` (counting the frames the uplink refused) and empties it.
async fn send(uplink: &Uplink, out: &mut Batch, g: &GlobalCounters) -> io::Result<()> {
    if out.is_empty() {
        return Ok(());
    }
    let sent = uplink.send_batch(out).await?;
    g.tx_error.add(out.len().saturating_sub(sent) as u64);
    out.clear();
    Ok(())
}

/// Receive direction: reads PSP frames from the uplink, opens each with the sender's key and
/// writes the inner frame to the TAP (split: a writer stage does, in order; normalized
/// peers' frames are still written here). Returns only on an I/O error.
///
/// # Errors
/// An uplink read error (a TAP write the TAP refuses is one counted drop, `rx_tap_error`), or
/// with the split a writer stage that could not start or stopped.
pub(crate) async fn rx_loop(
    tap: Arc<Tap>,
    uplink: Arc<Uplink>,
    shared: Arc<Shared>,
    mut set: watch::Receiver<Arc<PeerSet>>,
    mut peers: RxPeers,
) -> io::Result<()> {
    let mut cur = Opened::new();
    let mut log = DropLog::new();
    // With TAP offloads, the inner frames of a batch go through GRO (see `Opened`).
    let offload = tap.offloads().is_some();
    // `PSP_SPLIT=1`: opened batches go to a TAP writer thread, in order (one FIFO).
    let mut stage = if stage::enabled() {
        let (tap, shared) = (Arc::clone(&tap), Arc::clone(&shared));
        Some(Stage::spawn("psp-tap-write", Opened::new, |d| {
            write_stage(tap, shared, d)
        })?)
    } else {
        None
    };
    let mut delivery = normalize::Delivery::default();
    let g = &shared.global;
    loop {
        let n = uplink.recv_batch(&mut cur.inb).await?;
        crate::io::busy::note();
        g.malformed.add(uplink.take_dropped());
        if set.has_changed().unwrap_or(false) {
            let next = Arc::clone(&set.borrow_and_update());
            // Every published set holds a complete receive half that only this task takes.
            if let Some(fresh) = next.take_rx() {
                peers = fresh.carry_over(peers);
            }
        }
        let now = shared.now();
        cur.clear();
        for i in 0..n {
            let frame = cur.inb.frame_mut(i);
            let (Some(dst), Some(src)) = (mac_at(frame, 0), mac_at(frame, 6)) else {
                g.malformed.add(1);
                log.log("-", "malformed", frame.len());
                continue;
            };
            let group = is_group(&dst);
            if !group && dst != shared.mac {
                g.not_for_us.add(1);
                continue;
            }
            let Some(&pi) = peers.by_mac.get(&src) else {
                g.unknown_peer.add(1);
                log.log("-", "unknown-peer", frame.len());
                continue;
            };
            let peer = &mut peers.peers[pi];
            if let Some(np) = peer.norm.as_deref().filter(|_| group) {
                np.counters.group_ignored.add(1);
                continue;
            }
            let len = frame.len();
            let session = peer.session.clone();
            // A session peer's unicast frames carry their session's key id; its handshake
            // messages (and everyone's group frames) come under the group key.
            let via_ring =
                !group && session.is_some() && carries_key_id(frame, peer.group_security_number());
            let (result, trusted) = if let (true, Some(s)) = (via_ring, session.as_deref()) {
                let r = s.ring().open(now, frame);
                match r {
                    Ok(o) => (Ok(o), s.suite_has_icv()),
                    Err(RingOpenError::Open(e)) => (Err(e), true),
                    Err(_) => {
                        // A key we do not have: the peer kept a session we lost (we restarted),
                        // or a stale frame. Ask the driver to set up a new one.
                        s.stats.unknown_key.add(1);
                        s.want_session();
                        if let Some(link) = &shared.sessions {
                            link.kick(s);
                        }
                        log.log(&peer.name, "unknown-key", len);
                        continue;
                    }
                }
            } else {
                // Group frames and a session peer's handshake messages: one opener, one replay
                // window (a replayed Request is a replay here, before anything else sees it).
                let opener = if group || session.is_some() {
                    peer.group.opener(session.as_deref())
                } else {
                    &mut peer.unicast
                };
                // Only an ICV vouches for the sender's checksums (`none` has none).
                let trusted = opener.suite().icv_len() > 0;
                (opener.open(now, frame), trusted)
            };
            match result {
                Ok(opened) if opened.protocol() == Protocol::Normalized && peer.norm.is_some() => {
                    if let Some(np) = peer.norm.as_deref() {
                        let payload = opened.payload();
                        let ours = shared.mac;
                        normalize::deliver(np, now, payload, &mut delivery, &tap, ours, &mut log)
                            .await;
                    }
                }
                // A session keepalive (it already promoted the session it came under).
                Ok(opened) if via_ring && opened.protocol() == Protocol::Control => {
                    peer.counters.rx_sub.add(1);
                }
                Ok(opened) if opened.protocol().is_sub_protocol() => {
                    let handshake = matches!(
                        opened.protocol(),
                        Protocol::SessionEstablishment | Protocol::KeyExchange
                    );
                    match (&shared.sessions, session.as_deref()) {
                        (Some(link), Some(s)) if handshake && !group && !via_ring => {
                            // The budget first: a flood never wakes the driver.
                            if peer.budget.take(now) {
                                link.message(src, PathId::FIRST, opened.payload());
                            } else {
                                s.stats.messages_limited.add(1);
                            }
                        }
                        _ => peer.counters.rx_sub.add(1),
                    }
                }
                Ok(opened)
                    if !via_ring
                        && session.is_some()
                        && (!group
                            || !group_filter::is_group_payload(
                                opened.frame(),
                                &shared.subnets,
                            )) =>
                {
                    // Data under the group key from a session peer that is not a genuine group
                    // payload (ARP, IPv4 broadcast or multicast, IPv6 multicast): any holder of
                    // the group key could have sealed it, and its data travels under session keys.
                    if let Some(s) = session.as_deref() {
                        s.stats.group_unicast.add(1);
                    }
                    log.log(&peer.name, "group-unicast", len);
                }
                Ok(opened) => {
                    let inner = opened.frame();
                    peer.counters.rx_frames.add(1);
                    peer.counters.rx_bytes.add(inner.len() as u64);
                    if offload {
                        let at = opened.range();
                        cur.spans[cur.gro.len()] = (i, at.start, at.end);
                        cur.gro.push(inner, trusted);
                    } else if stage.is_some() {
                        let at = opened.range();
                        cur.spans[cur.plain] = (i, at.start, at.end);
                        cur.plain += 1;
                    } else if let Err(e) = tap.send(inner).await {
                        // A frame the TAP refuses is one lost frame, not the end of the task.
                        g.rx_tap_error.add(1);
                        tracing::debug!(error = %e, len = inner.len(), "TAP write failed");
                    }
                }
                Err(e) => {
                    let reason: DropReason = e.reason();
                    peer.counters.drop_frame(reason);
                    log.log(&peer.name, reason.as_str(), len);
                }
            }
        }
        match &mut stage {
            None => cur.write(&tap, g).await,
            Some(st) if !cur.is_empty() => st.swap(&mut cur).await?,
            Some(_) => {}
        }
    }
}

/// An opened receive batch and where in it the inner frames for the TAP are: what `rx_loop`
/// writes, or (split) hands to the TAP writer stage, which then owns the arena the frames
/// are in (opening works in place).
#[derive(Debug)]
struct Opened {
    inb: Batch,
    /// With TAP offloads, the inner frames in order, grouped for GRO.
    gro: Gro,
    /// The `j`th inner frame (of `gro`, or of the `plain` ones) as (slot, start, end).
    spans: [(usize, usize, usize); BATCH],
    /// Inner frames to write one by one (split without offloads; `spans[..plain]`).
    plain: usize,
}

impl Opened {
    fn new() -> Self {
        Self {
            inb: Batch::new(BATCH),
            gro: Gro::new(),
            spans: [(0, 0, 0); BATCH],
            plain: 0,
        }
    }

    /// Forgets the inner frames (the next receive refills `inb`).
    fn clear(&mut self) {
        self.gro.clear();
        self.plain = 0;
    }

    fn is_empty(&self) -> bool {
        self.gro.is_empty() && self.plain == 0
    }

    /// Writes the inner frames to the TAP; a write the TAP refuses is one counted drop.
    async fn write(&self, tap: &Tap, g: &GlobalCounters) {
        let frame = |j: usize| {
            let (slot, start, end) = self.spans[j];
            &self.inb.frame(slot)[start..end]
        };
        if !self.gro.is_empty()
            && let Err(e) = tap.send_gro(&self.gro, frame).await
        {
            g.rx_tap_error.add(1);
            tracing::debug!(error = %e, "TAP write failed");
        }
        for j in 0..self.plain {
            if let Err(e) = tap.send(frame(j)).await {
                g.rx_tap_error.add(1);
                tracing::debug!(error = %e, len = frame(j).len(), "TAP write failed");
            }
        }
    }
}

/// The TAP writer stage of a split receive direction: writes each batch `rx_loop` opened, in
/// order. TAP write errors are counted drops, so it never fails.
async fn write_stage(
    tap: Arc<Tap>,
    shared: Arc<Shared>,
    mut batches: Drain<Opened>,
) -> io::Result<()> {
    while let Some(mut o) = batches.next().await {
        o.write(&tap, &shared.global).await;
        o.clear();
        batches.done(o);
    }
    Ok(())
}

/// Receive direction of the second path (SMKEX): opens group-key frames from session peers
/// (with replay windows of their own, kept across reloads while the group key and the peer's
/// pin are) and hands their handshake messages to the driver; anything else is counted and
/// dropped (data travels on path 1). Returns only on an I/O error.
///
/// # Errors
/// An uplink read error.
pub(crate) async fn rx2_loop(
    uplink: Arc<Uplink>,
    shared: Arc<Shared>,
    mut set: watch::Receiver<Arc<PeerSet>>,
    max_frame: usize,
) -> io::Result<()> {
    let mut inb = Batch::new(BATCH);
    let mut openers = Path2Openers::new();
    path2_openers(&mut openers, &set.borrow_and_update(), max_frame);
    let g = &shared.global;
    loop {
        let n = uplink.recv_batch(&mut inb).await?;
        g.malformed.add(uplink.take_dropped());
        if set.has_changed().unwrap_or(false) {
            path2_openers(&mut openers, &set.borrow_and_update(), max_frame);
        }
        let now = shared.now();
        for i in 0..n {
            let frame = inb.frame_mut(i);
            let (Some(dst), Some(src)) = (mac_at(frame, 0), mac_at(frame, 6)) else {
                g.malformed.add(1);
                continue;
            };
            if dst != shared.mac {
                g.not_for_us.add(1);
                continue;
            }
            let Some(p) = openers.get_mut(&src) else {
                g.unknown_peer.add(1);
                continue;
            };
            match p.opener.opener(Some(&p.session)).open(now, frame) {
                Ok(o)
                    if matches!(
                        o.protocol(),
                        Protocol::SessionEstablishment | Protocol::KeyExchange
                    ) =>
                {
                    if !p.budget.take(now) {
                        p.session.stats.messages_limited.add(1);
                    } else if let Some(link) = &shared.sessions {
                        link.message(src, PathId::SECOND, o.payload());
                    }
                }
                Ok(_) => g.path2_ignored.add(1),
                Err(e) => {
                    g.path2_drops.add(1);
                    tracing::debug!(reason = e.reason().as_str(), "path 2 frame dropped");
                }
            }
        }
    }
}

/// One session peer's path-2 receive state.
#[derive(Debug)]
struct Path2Peer {
    session: Arc<crate::sessions::PeerSession>,
    opener: peers::GroupOpener,
    budget: crate::sessions::MessageBudget,
    /// What the opener was built for: the group key settings and the configured pin.
    settings: (crate::config::PeerSecurity, Option<[u8; 32]>),
}

type Path2Openers = std::collections::HashMap<Mac, Path2Peer>;

/// Brings `openers` in line with `set`: a peer whose session, group key and configured pin are
/// unchanged keeps its opener (and so its replay window); others get a fresh one.
fn path2_openers(openers: &mut Path2Openers, set: &PeerSet, max_frame: usize) {
    let mut old = core::mem::take(openers);
    for (p, s) in set.config.peers.iter().zip(&set.sessions) {
        let Some(s) = s else { continue };
        let settings = (set.config.group.clone(), p.identity);
        for mac in &p.macs {
            let kept = old
                .remove(mac)
                .filter(|o| Arc::ptr_eq(&o.session, s) && o.settings == settings);
            let entry = match kept {
                Some(o) => o,
                None => {
                    let pin = p.identity.or_else(|| s.pin.get().copied());
                    let Ok(opener) = peers::GroupOpener::new(&set.config, pin, max_frame) else {
                        continue;
                    };
                    Path2Peer {
                        session: Arc::clone(s),
                        opener,
                        budget: crate::sessions::MessageBudget::new(),
                        settings: settings.clone(),
                    }
                }
            };
            openers.insert(*mac, entry);
        }
    }
}
