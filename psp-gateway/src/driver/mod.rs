//! The driver: one task that owns the [`Host`] (every sealer, opener, session and counter) and
//! moves frames between it and the I/O. It waits on the TAP, the uplinks, the host's next timer
//! and its control channel; handles a batch (at most [`BATCH`] frames) per wake-up; and after
//! each drains what the host has to send and to say. Nothing else touches the host, so no lock
//! is taken per frame. The clock is read here only ([`Clock`]).
//!
//! ```text
//!  TAP ─► handle_tap ─► sealed ─► uplink (path 1)            (with normalized peers: the pacer
//!  uplink 1/2 ─► handle_uplink ─► inner frames ─► TAP          thread is path 1's one writer)
//!  poll_timeout ─► handle_timeout;  after each: poll_transmit ─► uplinks (a normalized frame,
//!  with its slot, ─► pacer), poll_event ─► state directory (reservations, pins, clock, replay
//!  floors), logs
//! ```
//!
//! | file | what it holds |
//! |---|---|
//! | `mod.rs` | [`Driver`]: the loop, sending, receiving |
//! | `build.rs` | the configuration as the host takes it |
//! | `events.rs` | what the host asks the driver to persist and log |
//! | `pacer.rs` | the pacer thread (normalized streams' departures) |
//! | `snapshot.rs` | the counters and states `status` and the metrics render |
//! | `unknown.rs` | the last few unknown source MACs, for `status` |

pub(crate) mod build;
mod events;
pub(crate) mod pacer;
pub(crate) mod snapshot;
pub(crate) mod unknown;

use core::net::SocketAddr;
use std::io;
use std::sync::Arc;

use psp_core::handshake::PathId;
use psp_core::host::{Dest, Host, PeerId, Received, RxDrop, TapJob, TapResult};
use psp_core::time::{Duration, Instant};
use rand_core::CryptoRngCore;
use tokio::sync::{mpsc, oneshot};

use self::build::Endpoints;
use self::pacer::{Departure, Pacer};
use self::unknown::UnknownSources;
use crate::io::{BATCH, Batch, TapIo, UplinkIo};
use crate::state::{REVOCATION_FILE, StateDir};
use crate::tofu::Tofu;

/// How long the driver works through ready branches before it gives tokio a turn (its reactor
/// runs only then): a quiet uplink's frame waits at most about this long. A turn costs
/// throughput, so not every round gets one (BENCHMARKS.md, "Packets and latency").
const YIELD_EVERY: Duration = Duration::from_millis(5);

/// Runs `f` to completion, and says whether it had to wait on the way (returned `Pending`: the
/// worker thread then ran tokio's reactor and timers, or another task).
async fn noting_wait<F: Future>(f: F) -> (F::Output, bool) {
    let mut f = core::pin::pin!(f);
    let mut waited = false;
    let out = core::future::poll_fn(|cx| {
        let p = f.as_mut().poll(cx);
        waited |= p.is_pending();
        p
    })
    .await;
    (out, waited)
}

/// The driver's clock: core time is microseconds since `origin` (tokio's clock, so a test's
/// paused time moves it), and `std_origin` is the same instant on the pacer thread's clock.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Clock {
    origin: tokio::time::Instant,
    std_origin: std::time::Instant,
}

impl Clock {
    /// A clock starting now.
    pub(crate) fn start() -> Self {
        Self {
            origin: tokio::time::Instant::now(),
            std_origin: std::time::Instant::now(),
        }
    }

    /// The current core time.
    pub(crate) fn now(&self) -> Instant {
        Instant::from_micros(u64::try_from(self.origin.elapsed().as_micros()).unwrap_or(u64::MAX))
    }

    fn tokio_at(&self, t: Instant) -> tokio::time::Instant {
        self.origin + core::time::Duration::from_micros(t.total_micros())
    }

    fn std_at(&self, t: Instant) -> std::time::Instant {
        self.std_origin + core::time::Duration::from_micros(t.total_micros())
    }

    /// Milliseconds since the start.
    pub(crate) fn uptime_ms(&self) -> u64 {
        u64::try_from(self.origin.elapsed().as_millis()).unwrap_or(u64::MAX)
    }
}

/// What the daemon asks of the driver.
#[derive(Debug)]
pub(crate) enum Control {
    /// Apply a reloaded configuration (peers and keys); the reply is the number of peers that
    /// are new or changed, or why nothing changed.
    Reload(
        Box<crate::config::Config>,
        oneshot::Sender<Result<usize, String>>,
    ),
    /// A snapshot of the counters and states.
    Snapshot(oneshot::Sender<snapshot::Snapshot>),
}

/// Counters of the driver's own I/O (the host counts everything else).
#[derive(Debug, Default, Clone)]
pub(crate) struct IoCounters {
    /// Sealed frames the uplink refused to send.
    pub(crate) tx_error: u64,
    /// Opened frames the TAP refused (each loses one frame, or one coalesced group).
    pub(crate) rx_tap_error: u64,
    /// Frames the TAP reader or an uplink dropped before the host saw them (bad offload
    /// headers, datagrams longer than a slot).
    pub(crate) io_dropped: u64,
    /// Frames the pacer thread's queue had no room for.
    pub(crate) pacer_dropped: u64,
}

/// Where departures go: the pacer thread (the daemon), or (tests under paused time, feature
/// `testing`) a task that sends each at its slot on tokio's clock.
#[derive(Debug)]
enum Departures {
    Thread(Pacer),
    #[cfg(feature = "testing")]
    Task(mpsc::UnboundedSender<pacer::TaskDeparture>),
}

/// The driver of one host.
pub(crate) struct Driver<T: TapIo, U: UplinkIo> {
    host: Host,
    tap: Arc<T>,
    uplinks: Vec<Arc<U>>,
    endpoints: Vec<Endpoints>,
    /// Departures go to a pacer thread (the daemon) rather than inline (tests).
    pacer_thread: bool,
    names: Vec<String>,
    clock: Clock,
    state: Option<Arc<StateDir>>,
    tofu: Option<Tofu>,
    departures: Option<Departures>,
    ctl: mpsc::Receiver<Control>,
    rng: Box<dyn CryptoRngCore + Send>,
    io: IoCounters,
    /// The last unknown sources (`unknown_peer`), by MAC.
    unknown: UnknownSources,
    max_frame: usize,
    udp: bool,
    /// The batch that sends the TAP's frames moved to path 2 (kept, not made per read).
    path2_out: Option<Batch>,
}

impl<T: TapIo, U: UplinkIo> core::fmt::Debug for Driver<T, U> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Driver")
            .field("peers", &self.names)
            .finish_non_exhaustive()
    }
}

/// What a [`Driver`] is made of (the daemon builds it from the configuration and real I/O;
/// tests from memory).
pub(crate) struct Parts<T, U> {
    pub(crate) host: Host,
    pub(crate) tap: Arc<T>,
    pub(crate) uplinks: Vec<Arc<U>>,
    pub(crate) endpoints: Vec<Endpoints>,
    pub(crate) names: Vec<String>,
    pub(crate) clock: Clock,
    pub(crate) state: Option<Arc<StateDir>>,
    pub(crate) tofu: Option<Tofu>,
    /// Start the pacer thread (the daemon) or send departures from the task (tests).
    pub(crate) pacer_thread: bool,
    pub(crate) ctl: mpsc::Receiver<Control>,
    pub(crate) rng: Box<dyn CryptoRngCore + Send>,
    pub(crate) max_frame: usize,
}

impl<T: TapIo, U: UplinkIo> Driver<T, U> {
    /// A driver; with normalized peers and `pacer_thread`, starts the pacer thread (call before
    /// dropping privileges: it asks for real-time priority).
    ///
    /// # Errors
    /// The pacer thread cannot be spawned.
    pub(crate) fn new(p: Parts<T, U>) -> io::Result<Self> {
        let departures = departures_for(&p.host, p.pacer_thread, &p.uplinks, p.clock)?;
        let udp = p.uplinks[0].is_addressed();
        let mut d = Self {
            host: p.host,
            tap: p.tap,
            uplinks: p.uplinks,
            endpoints: p.endpoints,
            pacer_thread: p.pacer_thread,
            names: p.names,
            clock: p.clock,
            state: p.state,
            tofu: p.tofu,
            departures,
            ctl: p.ctl,
            rng: p.rng,
            io: IoCounters::default(),
            unknown: UnknownSources::default(),
            max_frame: p.max_frame,
            udp,
            path2_out: None,
        };
        d.resume_revocation_list();
        Ok(d)
    }

    /// `[pki]`: a revocation list newer than the configured one, kept in the state directory by
    /// the run before (one a peer handed on), is put in force again.
    fn resume_revocation_list(&mut self) {
        if self.host.config().pki.is_none() {
            return;
        }
        let Some(text) = self
            .state
            .as_ref()
            .and_then(|s| s.read(REVOCATION_FILE).ok().flatten())
        else {
            return;
        };
        let list = hex::decode(text.trim())
            .ok()
            .and_then(|b| psp_core::pki::RevocationList::parse(&b).ok());
        let now = self.clock.now();
        match list.map(|l| self.host.handle_revocation_list(now, l, &mut *self.rng)) {
            Some(Ok(true)) => tracing::info!(
                number = self.host.revocation_list().number(),
                "revocation list from the state directory in force"
            ),
            Some(Ok(false)) => {}
            _ => tracing::warn!(
                file = REVOCATION_FILE,
                "the state directory's revocation list is not one the CA signed: ignored"
            ),
        }
        self.events(now);
    }

    /// Whether the pacer thread runs at real-time priority (`None`: no pacer thread).
    pub(crate) fn pacer_realtime(&self) -> Option<bool> {
        match &self.departures {
            Some(Departures::Thread(p)) => Some(p.is_realtime()),
            _ => None,
        }
    }

    /// Frames that reached the pacer thread after their slot (`None`: no pacer thread).
    pub(crate) fn pacer_late(&self) -> Option<u64> {
        match &self.departures {
            Some(Departures::Thread(p)) => Some(p.late()),
            _ => None,
        }
    }

    /// Runs until the control channel closes (`Ok`) or an I/O error stops a direction.
    ///
    /// # Errors
    /// A TAP or uplink read error (send errors are counted drops).
    pub(crate) async fn run(mut self) -> io::Result<()> {
        let tap = Arc::clone(&self.tap);
        let up1 = Arc::clone(&self.uplinks[0]);
        let up2 = self.uplinks.get(1).cloned();
        let mut reader = tap.reader();
        let mut writer = tap.writer();
        let mut tap_in = Batch::new(BATCH);
        let mut rx1 = Batch::new(BATCH);
        let mut rx2 = Batch::new(BATCH);
        let mut out = Batch::new(BATCH * 2);
        let mut delivered = Batch::new(BATCH);
        self.after(&mut out).await;
        let mut turned = self.clock.now();
        loop {
            let now = self.clock.now();
            let next = self
                .host
                .poll_timeout()
                .unwrap_or(now + Duration::from_secs(3600));
            let wake = self.clock.tokio_at(next);
            let (go, waited) = noting_wait(async {
                tokio::select! {
                    c = self.ctl.recv() => match c {
                        None => {
                            // A clean stop: the exact replay floors, so no frame seen before it
                            // opens again after the next start.
                            self.save_floors(&self.host.replay_floors());
                            return Ok(false);
                        }
                        Some(c) => self.control(c),
                    },
                    r = tap.recv_batch(&mut tap_in, &mut reader) => {
                        r?;
                        self.io.io_dropped += T::take_dropped(&mut reader);
                        self.seal_tap_batch(&tap_in, &mut out).await;
                    }
                    r = up1.recv_batch(&mut rx1) => {
                        r?;
                        self.io.io_dropped += up1.take_dropped();
                        self.open_uplink_batch(PathId::FIRST, &mut rx1, &mut delivered, &mut writer).await;
                    }
                    r = recv_opt(up2.as_deref(), &mut rx2) => {
                        r?;
                        self.io.io_dropped += up2.as_deref().map_or(0, UplinkIo::take_dropped);
                        self.open_uplink_batch(PathId::SECOND, &mut rx2, &mut delivered, &mut writer).await;
                    }
                    // The deadline is handled below (the clock then reads `next` or later).
                    () = tokio::time::sleep_until(wake) => {}
                }
                Ok::<_, io::Error>(true)
            })
            .await;
            if !go? {
                return Ok(());
            }
            // The deadline: its timer fired, or it passed while another branch was busy (then
            // it is handled now, not when tokio's timer next runs).
            let now = self.clock.now();
            if next <= now {
                self.host.handle_timeout(now, &mut *self.rng);
                self.write_deliveries(now, &mut delivered, &mut writer)
                    .await;
            }
            self.after(&mut out).await;
            // A busy uplink or TAP is ready at every turn of this loop, so the task could run
            // for long stretches without returning to tokio, whose reactor and timers then see
            // nothing new (a quiet path's probe waited 100 ms and more under load, and fell out
            // of the replay window): give tokio a turn every YIELD_EVERY of work. A wait above
            // was a turn (a ping's wake-up after a quiet spell needs none).
            if waited {
                turned = now;
            } else if now.saturating_since(turned) >= YIELD_EVERY {
                tokio::task::yield_now().await;
                turned = self.clock.now();
            }
        }
    }

    fn control(&mut self, c: Control) {
        match c {
            Control::Snapshot(reply) => {
                let _ = reply.send(self.snapshot());
            }
            Control::Reload(config, reply) => {
                let _ = reply.send(self.reload(&config));
            }
        }
    }

    fn reload(&mut self, config: &crate::config::Config) -> Result<usize, String> {
        let now = self.clock.now();
        let tofu = self.tofu.as_ref();
        let (specs, endpoints) = build::peers(config, self.max_frame, self.udp, |name| {
            tofu.and_then(|t| t.get(name))
        });
        let group = build::key_spec(&config.group, self.max_frame);
        let before: Vec<_> = self.host.peers().map(|(_, s)| s.clone()).collect();
        let changed = specs.iter().filter(|s| !before.contains(s)).count();
        self.host
            .reconfigure(now, group, specs)
            .map_err(|e| e.to_string())?;
        if let Some(list) = config.pki.as_ref().and_then(|p| p.revoked.clone()) {
            // A newer list from the file: in force, and handed on to every peer.
            let _ = self.host.handle_revocation_list(now, list, &mut *self.rng);
        }
        if self.departures.is_none() {
            // The first normalized peer came with this reload: its stream needs a pacer.
            self.departures =
                departures_for(&self.host, self.pacer_thread, &self.uplinks, self.clock)
                    .map_err(|e| format!("the pacer thread: {e}"))?;
        }
        self.names = self.host.peers().map(|(_, s)| s.name.clone()).collect();
        self.endpoints = endpoints;
        Ok(changed)
    }

    /// Seals a batch from the TAP and sends it.
    async fn seal_tap_batch(&mut self, inb: &Batch, out: &mut Batch) {
        let now = self.clock.now();
        let n = inb.len();
        out.clear();
        let mut results = [TapResult::Queued; BATCH];
        {
            let mut jobs: [TapJob<'_>; BATCH] = core::array::from_fn(|_| TapJob::new(&[], &mut []));
            for ((job, i), slot) in jobs.iter_mut().zip(0..n).zip(out.slots_mut()) {
                *job = TapJob::new(inb.frame(i), slot);
            }
            self.host.handle_tap(now, &mut jobs[..n], &mut *self.rng);
            for (r, j) in results.iter_mut().zip(&jobs[..n]) {
                *r = j.result;
            }
        }
        // Commit the sealed frames in order (each was written into slot i of `out`).
        // Data moved to path 2 (failover, or `both`) goes from its own batch, copied out before
        // committing path 1's frames moves slots down (one batch kept for it: no allocation per
        // read).
        let mut path2 = self.path2_out.take().unwrap_or_else(|| Batch::new(BATCH));
        path2.clear();
        for (i, r) in results[..n].iter().enumerate() {
            if let TapResult::Sealed {
                len,
                dest: Dest::Peer(p),
                path: PathId::SECOND,
            } = *r
            {
                let f = &out.slot(i)[..len];
                path2.push_with(self.endpoint(p, PathId::SECOND), |s| {
                    s[..len].copy_from_slice(f);
                    Some(len)
                });
            }
        }
        let mut copies: Vec<(usize, SocketAddr)> = Vec::new();
        for (i, r) in results[..n].iter().enumerate() {
            if let TapResult::Sealed { len, dest, path } = *r {
                let at = out.len();
                match dest {
                    Dest::Peer(_) if path == PathId::SECOND => {}
                    Dest::Peer(p) => out.commit_slot(i, len, self.endpoint(p, path)),
                    Dest::Group if self.udp => {
                        // One copy per peer endpoint that is not normalized.
                        let mut eps = self.group_endpoints(now);
                        let first = eps.next();
                        out.commit_slot(i, len, first);
                        copies.extend(eps.map(|e| (at, e)));
                    }
                    Dest::Group => out.commit_slot(i, len, None),
                }
            }
        }
        for (from, addr) in copies {
            if out.is_full() {
                self.send(PathId::FIRST, out).await;
            }
            let (f, len) = (out.frame(from).to_vec(), out.frame(from).len());
            out.push_with(Some(addr), |slot| {
                slot[..len].copy_from_slice(&f);
                Some(len)
            });
        }
        self.send(PathId::SECOND, &path2).await;
        self.path2_out = Some(path2);
        self.send(PathId::FIRST, out).await;
    }

    /// Opens a batch from an uplink and writes the inner frames to the TAP.
    async fn open_uplink_batch(
        &mut self,
        path: PathId,
        rx: &mut Batch,
        delivered: &mut Batch,
        writer: &mut T::Writer,
    ) {
        let now = self.clock.now();
        let n = rx.len();
        let mut spans = [(0usize, 0usize, 0usize, false); BATCH];
        let mut k = 0;
        for i in 0..n {
            match self
                .host
                .handle_uplink(now, path, rx.frame_mut(i), &mut *self.rng)
            {
                Received::Deliver { range, trusted, .. } => {
                    spans[k] = (i, range.start, range.end, trusted);
                    k += 1;
                }
                Received::Dropped(RxDrop::UnknownPeer(mac)) => self.unknown.note(mac, now),
                Received::Consumed | Received::Dropped(_) => {}
            }
        }
        let more = self.fill_deliveries(now, delivered);
        let mut frames: [(&[u8], bool); 2 * BATCH] = [(&[], false); 2 * BATCH];
        let mut m = 0;
        for &(i, s, e, trusted) in &spans[..k] {
            frames[m] = (&rx.frame(i)[s..e], trusted);
            m += 1;
        }
        for j in 0..delivered.len() {
            frames[m] = (delivered.frame(j), true);
            m += 1;
        }
        if m > 0 {
            self.io.rx_tap_error += self.tap.write(writer, &frames[..m]).await;
        }
        if more {
            self.write_deliveries(now, delivered, writer).await;
        }
    }

    /// Fills `delivered` with what the host hands out (a normalized stream's inner frames, the
    /// reorder buffer's frames in their turn); whether more waits.
    fn fill_deliveries(&mut self, now: Instant, delivered: &mut Batch) -> bool {
        delivered.clear();
        while !delivered.is_full() {
            let mut got = None;
            delivered.push_with(None, |slot| {
                let r = self.host.poll_delivery(now, slot, &mut *self.rng);
                got = r;
                r.map(|(_, len)| len)
            });
            if got.is_none() {
                return false;
            }
        }
        true
    }

    /// Writes everything the host hands out to the TAP, a batch at a time (after a timer
    /// released frames from the reorder buffer, or after a batch that filled `delivered`).
    async fn write_deliveries(
        &mut self,
        now: Instant,
        delivered: &mut Batch,
        writer: &mut T::Writer,
    ) {
        loop {
            let more = self.fill_deliveries(now, delivered);
            if !delivered.is_empty() {
                let mut frames: [(&[u8], bool); BATCH] = [(&[], false); BATCH];
                for (j, f) in frames.iter_mut().enumerate().take(delivered.len()) {
                    *f = (delivered.frame(j), true);
                }
                self.io.rx_tap_error += self.tap.write(writer, &frames[..delivered.len()]).await;
            }
            if !more {
                return;
            }
        }
    }

    /// After every wake-up: what the host has to say (events first: a sealer's first
    /// reservation comes before its first frame), then what it has to send, sealed straight
    /// into the batch of path 1 (a path-2 message is moved to its own batch, a normalized frame
    /// handed to the pacer with its slot).
    async fn after(&mut self, out: &mut Batch) {
        // The path-2 batch is kept between wake-ups: allocating it here cost a zeroed 576 KiB
        // (64 slots of 9 KiB) per wake-up, a memset that showed in the profile.
        let mut path2 = self.path2_out.take().unwrap_or_else(|| Batch::new(BATCH));
        self.drain(out, &mut path2).await;
        self.path2_out = Some(path2);
    }

    /// [`after`](Self::after)'s rounds, with its path-2 batch.
    async fn drain(&mut self, out: &mut Batch, path2: &mut Batch) {
        for _ in 0..64 {
            let now = self.clock.now();
            let mut busy = self.events(now);
            out.clear();
            path2.clear();
            loop {
                let mut got = None;
                let host = &mut self.host;
                let rng = &mut *self.rng;
                out.push_with(None, |slot| {
                    got = host.poll_transmit(now, slot, rng);
                    got.map(|t| t.len)
                });
                let Some(t) = got else {
                    break;
                };
                busy = true;
                let i = out.len() - 1;
                let addr = match t.dest {
                    Dest::Peer(p) => self.endpoint(p, t.path),
                    Dest::Group => None,
                };
                if let Some(at) = t.at {
                    self.depart(at, out.frame(i), addr, t.path);
                    out.set_len(i);
                } else if t.path == PathId::SECOND {
                    let f = out.frame(i);
                    path2.push_with(addr, |s| {
                        s[..f.len()].copy_from_slice(f);
                        Some(f.len())
                    });
                    out.set_len(i);
                    if path2.is_full() {
                        self.send(PathId::SECOND, path2).await;
                        path2.clear();
                    }
                } else {
                    out.set_addr(i, addr);
                }
                if out.is_full() {
                    self.send(PathId::FIRST, out).await;
                    out.clear();
                }
            }
            self.send(PathId::FIRST, out).await;
            self.send(PathId::SECOND, path2).await;
            if !busy {
                return;
            }
        }
    }

    /// A normalized frame for the pacer, to leave at `at`.
    fn depart(&mut self, at: Instant, frame: &[u8], addr: Option<SocketAddr>, path: PathId) {
        match &self.departures {
            Some(Departures::Thread(p)) => {
                let mut f = p.buffer();
                f.extend_from_slice(frame);
                let at = Some(self.clock.std_at(at));
                if !p.send(Departure {
                    at,
                    frame: f,
                    addr,
                    path: path.0,
                }) {
                    self.io.pacer_dropped += 1;
                }
            }
            #[cfg(feature = "testing")]
            Some(Departures::Task(tx)) => {
                if tx.send((at, frame.to_vec(), addr, path.0)).is_err() {
                    self.io.pacer_dropped += 1;
                }
            }
            None => self.io.pacer_dropped += 1,
        }
    }

    /// Sends `out` on `path` (with a pacer thread, path 1's frames go through it: one writer).
    async fn send(&mut self, path: PathId, out: &Batch) {
        if out.is_empty() {
            return;
        }
        if let Some(Departures::Thread(p)) = &self.departures {
            for i in 0..out.len() {
                let mut frame = p.buffer();
                frame.extend_from_slice(out.frame(i));
                if !p.send(Departure {
                    at: None,
                    frame,
                    addr: out.addr(i),
                    path: path.0,
                }) {
                    self.io.pacer_dropped += 1;
                }
            }
            return;
        }
        let Some(up) = self.uplinks.get(usize::from(path.0)) else {
            return;
        };
        match up.send_batch(out).await {
            Ok(sent) => self.io.tx_error += out.len().saturating_sub(sent) as u64,
            Err(e) => {
                self.io.tx_error += out.len() as u64;
                tracing::debug!(error = %e, path = path.0 + 1, "uplink send failed");
            }
        }
    }

    /// A peer's UDP endpoint on `path`, if any.
    fn endpoint(&self, p: PeerId, path: PathId) -> Option<SocketAddr> {
        let e = self.endpoints.get(p.0)?;
        if path == PathId::FIRST {
            e.path1
        } else {
            e.path2
        }
    }

    /// The endpoints a broadcast goes to over UDP: every peer whose broadcasts do not travel in
    /// its normalized stream now (a normalized session peer gets copies until its first session).
    fn group_endpoints(&self, now: Instant) -> impl Iterator<Item = SocketAddr> + '_ {
        self.endpoints
            .iter()
            .enumerate()
            .filter(move |(i, _)| !self.host.streams_to(PeerId(*i), now))
            .filter_map(|(_, e)| e.path1)
    }
}

/// Where normalized departures go: nowhere without normalized peers, else the pacer thread
/// (`thread`), or (tests, feature `testing`) a task on tokio's clock.
fn departures_for<U: UplinkIo>(
    host: &Host,
    thread: bool,
    uplinks: &[Arc<U>],
    clock: Clock,
) -> io::Result<Option<Departures>> {
    let _ = clock;
    let both = || {
        let first = Arc::clone(&uplinks[0]);
        let second = Arc::clone(uplinks.get(1).unwrap_or(&uplinks[0]));
        [first, second]
    };
    Ok(
        match (host.peers().any(|(_, s)| s.normalize.is_some()), thread) {
            (false, _) => None,
            (true, true) => Some(Departures::Thread(Pacer::spawn(both())?)),
            #[cfg(feature = "testing")]
            (true, false) => Some(Departures::Task(pacer::task(both(), clock))),
            #[cfg(not(feature = "testing"))]
            (true, false) => None,
        },
    )
}

/// Receives on the second uplink, if there is one (never ready otherwise).
async fn recv_opt<U: UplinkIo>(up: Option<&U>, batch: &mut Batch) -> io::Result<usize> {
    match up {
        Some(u) => u.recv_batch(batch).await,
        None => core::future::pending().await,
    }
}
