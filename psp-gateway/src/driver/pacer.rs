//! The pacer thread: sends each normalized stream's frames at their slots. The host seals them
//! ahead of time ([`psp_core::host::Host::poll_transmit`] gives them with their slot, in the
//! driver task); this thread only
//! waits for each slot and sends, so a departure time depends on the slot alone, never on what
//! the driver was doing (the departure-timing test in `tests/leakage.rs` checks it). With
//! normalized peers this thread is the uplink's only writer: the driver hands it its other
//! frames too, to send at once.
//!
//! ```text
//!  driver task: poll_transmit (lead_ms ahead) ─► (slot, frame) ─► channel ─┐
//!               other frames ─────────────► (now, frame) ─► channel ─┤
//!  pacer thread: sleep until a margin before the earliest slot ─► spin ─► send ◄┘
//! ```
//!
//! The thread asks for `SCHED_FIFO` (priority [`PRIORITY`]) before the daemon drops its
//! privileges, so a saturated machine does not delay it behind the data path; refused (no
//! `CAP_SYS_NICE`, or systemd's `RestrictRealtime=yes`), it says so once and runs at normal
//! priority, where CPU contention can still move departures (docs/GATEWAY.md).

use core::net::SocketAddr;
use core::sync::atomic::{AtomicU64, Ordering};
use core::time::Duration as StdDuration;
use std::collections::BinaryHeap;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::thread;
use std::time::Instant as StdInstant;

use crate::io::{Batch, UplinkIo};

/// The pacer of the in-memory gateways (feature `testing`, tokio's paused clock): a task that
/// sends each frame at its slot, in the order they come, until the driver stops.
#[cfg(feature = "testing")]
pub(crate) fn task<U: UplinkIo + Send + Sync + 'static>(
    uplinks: [Arc<U>; 2],
    clock: super::Clock,
) -> tokio::sync::mpsc::UnboundedSender<TaskDeparture> {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<TaskDeparture>();
    tokio::spawn(async move {
        let mut out = Batch::new(1);
        while let Some((at, f, addr, path)) = rx.recv().await {
            let uplink = &uplinks[usize::from(path).min(1)];
            tokio::time::sleep_until(clock.tokio_at(at)).await;
            // The driver stopped (its gateway did): what it prepared dies with it, as the
            // pacer thread's queue does.
            if rx.is_closed() {
                break;
            }
            out.clear();
            out.push_with(addr, |s| {
                s[..f.len()].copy_from_slice(&f);
                Some(f.len())
            });
            let _ = uplink.send_batch(&out).await;
        }
    });
    tx
}

/// A departure for the in-memory pacer: its slot, the frame, its address, its path (0 or 1).
#[cfg(feature = "testing")]
pub(crate) type TaskDeparture = (psp_core::time::Instant, Vec<u8>, Option<SocketAddr>, u8);

/// The `SCHED_FIFO` priority asked for (low among real-time threads: above every normal one).
const PRIORITY: i32 = 10;
/// Frames waiting for the thread at most (more are dropped and counted by the driver).
const QUEUE: usize = 4096;

/// A frame for the pacer: send it at `at` (`None`: at once).
#[derive(Debug)]
pub(crate) struct Departure {
    pub(crate) at: Option<StdInstant>,
    pub(crate) frame: Vec<u8>,
    pub(crate) addr: Option<SocketAddr>,
    /// The uplink: 0 (path 1) or 1 (path 2; path 1's when there is one uplink).
    pub(crate) path: u8,
}

/// The driver's end.
#[derive(Debug)]
pub(crate) struct Pacer {
    tx: SyncSender<Departure>,
    /// Buffers back from the thread, for reuse.
    spare: Receiver<Vec<u8>>,
    realtime: bool,
    /// Frames that reached the thread after their slot (sent at once, late), counted by it.
    late: Arc<AtomicU64>,
}

impl Pacer {
    /// Starts the thread sending on `uplinks` (path 1's, path 2's; the same twice with one
    /// uplink) (call before dropping privileges).
    ///
    /// # Errors
    /// The thread cannot be spawned.
    pub(crate) fn spawn<U: UplinkIo>(uplinks: [Arc<U>; 2]) -> std::io::Result<Self> {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Departure>(QUEUE);
        let (back, spare) = std::sync::mpsc::sync_channel::<Vec<u8>>(QUEUE);
        let (ready_tx, ready) = std::sync::mpsc::sync_channel::<bool>(1);
        let late = Arc::new(AtomicU64::new(0));
        let counter = Arc::clone(&late);
        thread::Builder::new()
            .name("psp-pacer".into())
            .spawn(move || run(&uplinks, &rx, &back, &ready_tx, &counter))?;
        let realtime = ready.recv().unwrap_or(false);
        Ok(Self {
            tx,
            spare,
            realtime,
            late,
        })
    }

    /// Frames with a slot that reached the thread after it (they left at once, late: their
    /// departure followed the driver's timing, not the schedule).
    pub(crate) fn late(&self) -> u64 {
        self.late.load(Ordering::Relaxed)
    }

    /// Whether the thread runs at real-time priority.
    pub(crate) fn is_realtime(&self) -> bool {
        self.realtime
    }

    /// A buffer for a frame (one the thread sent before, or a new one).
    pub(crate) fn buffer(&self) -> Vec<u8> {
        let mut b = self.spare.try_recv().unwrap_or_default();
        b.clear();
        b
    }

    /// Hands a frame to the thread; `false` if its queue is full (the frame is dropped).
    pub(crate) fn send(&self, d: Departure) -> bool {
        match self.tx.try_send(d) {
            Ok(()) => true,
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => false,
        }
    }
}

/// One queued departure, ordered by time, then by arrival.
#[derive(Debug)]
struct Queued(StdInstant, u64, Departure);

impl PartialEq for Queued {
    fn eq(&self, o: &Self) -> bool {
        (self.0, self.1) == (o.0, o.1)
    }
}
impl Eq for Queued {}
impl PartialOrd for Queued {
    fn partial_cmp(&self, o: &Self) -> Option<core::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Queued {
    fn cmp(&self, o: &Self) -> core::cmp::Ordering {
        // Reversed: the heap pops the earliest.
        (o.0, o.1).cmp(&(self.0, self.1))
    }
}

fn run<U: UplinkIo>(
    uplinks: &[Arc<U>; 2],
    rx: &Receiver<Departure>,
    back: &SyncSender<Vec<u8>>,
    ready: &SyncSender<bool>,
    late: &AtomicU64,
) {
    if let Err(e) = crate::io::sys::set_timer_slack_ns(1) {
        tracing::debug!(error = %e, "pacer: timer slack unchanged");
    }
    let rt = crate::io::sys::set_realtime(PRIORITY);
    if let Err(e) = &rt {
        tracing::warn!(
            error = %e,
            "normalized peers: the pacer thread could not get real-time priority (needs CAP_SYS_NICE, and RestrictRealtime=no under systemd); under CPU contention departure times can follow the load"
        );
    }
    let _ = ready.send(rt.is_ok());
    let mut heap: BinaryHeap<Queued> = BinaryHeap::new();
    let mut seq = 0u64;
    let mut waiter = Waiter::new();
    let mut out = Batch::new(1);
    let mut push = |heap: &mut BinaryHeap<Queued>, d: Departure| {
        if d.at.is_some_and(|at| at < StdInstant::now()) {
            late.fetch_add(1, Ordering::Relaxed);
        }
        seq += 1;
        heap.push(Queued(d.at.unwrap_or_else(StdInstant::now), seq, d));
    };
    loop {
        // Everything queued now; then wait for the earliest, waking early for a new one.
        while let Ok(d) = rx.try_recv() {
            push(&mut heap, d);
        }
        let Some(next) = heap.peek().map(|q| q.0) else {
            match rx.recv() {
                Ok(d) => push(&mut heap, d),
                Err(_) => return,
            }
            continue;
        };
        match waiter.sleep_before(next, rx) {
            Some(Ok(d)) => {
                push(&mut heap, d);
                continue;
            }
            Some(Err(())) => return,
            None => {}
        }
        waiter.spin_until(next);
        while let Some(q) = heap.peek()
            && q.0 <= StdInstant::now()
        {
            let Some(Queued(_, _, d)) = heap.pop() else {
                break;
            };
            out.clear();
            out.push_with(d.addr, |slot| {
                let n = d.frame.len().min(slot.len());
                slot[..n].copy_from_slice(&d.frame[..n]);
                Some(n)
            });
            if let Err(e) = uplinks[usize::from(d.path).min(1)].send_batch_blocking(&out) {
                tracing::debug!(error = %e, "pacer: frame not sent");
            }
            let _ = back.try_send(d.frame);
        }
    }
}

/// Waits for slots: sleeps until a margin before the slot, then spins on the clock. The margin
/// follows the measured wake-up latency (a maximum that decays by 1/32 per wake-up, plus
/// [`HEADROOM`], between [`MIN_SPIN`] and [`MAX_SPIN`]): a sleeping CPU (or a descheduled
/// virtual CPU) wakes tens of µs later than a busy one, and the spin hides that difference.
#[derive(Debug)]
struct Waiter {
    late_ns: u64,
}

/// Spin at least this long before a slot.
const MIN_SPIN: StdDuration = StdDuration::from_micros(30);
/// Spin at most this long before a slot (longer wake-ups are the virtual CPU losing its
/// physical one, which spinning cannot hide either).
const MAX_SPIN: StdDuration = StdDuration::from_micros(250);
/// Added to the wake-up latency seen.
const HEADROOM: StdDuration = StdDuration::from_micros(20);

impl Waiter {
    fn new() -> Self {
        Self { late_ns: 50_000 }
    }

    /// The current margin.
    fn margin(&self) -> StdDuration {
        (StdDuration::from_nanos(self.late_ns) + HEADROOM).clamp(MIN_SPIN, MAX_SPIN)
    }

    /// Sleeps until a margin before `target`, or until a new departure arrives (returned);
    /// `Some(Err(()))` when the driver is gone.
    fn sleep_before(
        &mut self,
        target: StdInstant,
        rx: &Receiver<Departure>,
    ) -> Option<Result<Departure, ()>> {
        let sleep = target
            .checked_duration_since(StdInstant::now())
            .and_then(|left| left.checked_sub(self.margin()))
            .filter(|d| !d.is_zero())?;
        let woke_for = StdInstant::now() + sleep;
        match rx.recv_timeout(sleep) {
            Ok(d) => Some(Ok(d)),
            Err(RecvTimeoutError::Disconnected) => Some(Err(())),
            Err(RecvTimeoutError::Timeout) => {
                let late = StdInstant::now().saturating_duration_since(woke_for);
                let late = u64::try_from(late.as_nanos()).unwrap_or(u64::MAX);
                self.late_ns = late.max(self.late_ns - self.late_ns / 32);
                None
            }
        }
    }

    /// Returns at `target` (at once if it is past).
    fn spin_until(&self, target: StdInstant) {
        while StdInstant::now() < target {
            core::hint::spin_loop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A departure the thread cannot take (its queue full, or the thread gone) is refused, and
    /// the driver counts it `pacer_dropped` (the in-memory gateways send departures inline, so
    /// this is where that counter is reached).
    #[test]
    fn a_departure_the_thread_cannot_take_is_refused() {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Departure>(1);
        let (_back, spare) = std::sync::mpsc::sync_channel::<Vec<u8>>(1);
        let p = Pacer {
            tx,
            spare,
            realtime: false,
            late: Arc::new(AtomicU64::new(0)),
        };
        let d = || Departure {
            path: 0,
            at: None,
            frame: vec![0; 60],
            addr: None,
        };
        assert!(p.send(d()), "room for one");
        assert!(!p.send(d()), "the queue is full");
        drop(rx);
        assert!(!p.send(d()), "the thread is gone");
    }

    #[test]
    fn waits_until_the_target_and_not_less() {
        let (_tx, rx) = std::sync::mpsc::sync_channel::<Departure>(1);
        let mut w = Waiter::new();
        for _ in 0..20 {
            let target = StdInstant::now() + StdDuration::from_micros(700);
            assert!(w.sleep_before(target, &rx).is_none());
            w.spin_until(target);
            assert!(StdInstant::now() >= target);
        }
        // A target in the past returns at once.
        assert!(
            w.sleep_before(StdInstant::now() - StdDuration::from_millis(1), &rx)
                .is_none()
        );
    }

    #[test]
    fn the_margin_follows_the_wake_up_latency_within_bounds() {
        let mut w = Waiter { late_ns: 0 };
        assert_eq!(w.margin(), MIN_SPIN);
        w.late_ns = 100_000;
        assert_eq!(w.margin(), StdDuration::from_micros(120));
        w.late_ns = 5_000_000;
        assert_eq!(w.margin(), MAX_SPIN);
    }

    #[test]
    fn the_earliest_leaves_first_then_by_arrival() {
        let t = StdInstant::now();
        let d = || Departure {
            path: 0,
            at: None,
            frame: Vec::new(),
            addr: None,
        };
        let mut h = BinaryHeap::new();
        h.push(Queued(t + StdDuration::from_millis(2), 1, d()));
        h.push(Queued(t + StdDuration::from_millis(1), 3, d()));
        h.push(Queued(t + StdDuration::from_millis(1), 2, d()));
        let order: Vec<u64> = core::iter::from_fn(|| h.pop().map(|q| q.1)).collect();
        assert_eq!(order, [2, 3, 1]);
    }

    /// A frame handed over after its slot leaves at once and is counted late; one handed over
    /// before its slot waits for it and is not; one without a slot is not either.
    #[test]
    fn a_frame_after_its_slot_leaves_at_once_and_is_counted_late() {
        let seg = crate::io::mem::MemSegment::new();
        let up = Arc::new(seg.port(None));
        let _other = seg.port(None);
        let p = Pacer::spawn([Arc::clone(&up), up]).expect("pacer thread");
        let now = StdInstant::now();
        let d = |at: Option<StdInstant>| Departure {
            path: 0,
            at,
            frame: vec![0x5a; 60],
            addr: None,
        };
        assert!(p.send(d(Some(now + StdDuration::from_millis(30)))));
        assert!(p.send(d(Some(now - StdDuration::from_millis(1)))));
        assert!(p.send(d(None)));
        let deadline = StdInstant::now() + StdDuration::from_secs(5);
        let mut sent = 0;
        while sent < 3 && StdInstant::now() < deadline {
            thread::sleep(StdDuration::from_millis(5));
            sent += seg.take_capture_timed().len();
        }
        assert_eq!(sent, 3, "every frame left");
        assert_eq!(p.late(), 1);
    }
}
