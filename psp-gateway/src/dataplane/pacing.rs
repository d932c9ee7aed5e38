//! The normalizer's pacer thread: one OS thread for every normalized peer, outside the tokio
//! runtime, so the departure times of the fixed-size outer frames do not follow the protected
//! traffic (issue 11).
//!
//! ```text
//!  after each departure: lock the peer's endpoint ─► poll_transmit(next slot) ─► seal ─► unlock
//!  then:                 sleep until a margin before the earliest slot ─► spin ─► sendmmsg
//! ```
//!
//! What made the old per-peer tokio task leak: it slept on tokio's millisecond timer on the
//! same runtime as the transmit task, then sealed under the endpoint's mutex, which the
//! transmit task takes for every inner frame. While the protected side was saturated, the
//! runtime was busy and the outer frames left late, bunched up, or hardly at all
//! (`tests/leakage.rs`, "departure timing", has the numbers). Here:
//!
//! - each frame is sealed **ahead of its slot**, right after the previous departure, so the
//!   mutex, the copy of inner frames and the sealing all happen off the critical instant;
//! - the wait is a nanosleep with 1 ns timer slack to a margin before the slot, then a spin on
//!   the clock; the margin follows the measured wake-up latency ([`Waiter`]), so an idle CPU
//!   (deep sleep or a descheduled virtual CPU, slower to wake) and a busy one reach the slot
//!   alike;
//! - the thread asks for `SCHED_FIFO` (priority [`PRIORITY`]) before the daemon drops its
//!   privileges, so a saturated machine does not delay it behind the data path. Refused (no
//!   `CAP_SYS_NICE`, or systemd's `RestrictRealtime=yes`), it says so once and runs at normal
//!   priority, where CPU contention can still move departures (docs/GATEWAY.md).
//!
//! A late wake-up departs at once; the core's pacer bounds the catch-up burst and skips older
//! slots (counted `pacer_skipped`).

use core::time::Duration as StdDuration;
use std::sync::{Arc, Mutex, OnceLock};
use std::thread;
use std::time::Instant as StdInstant;

use psp_core::time::Instant;

use super::Mac;
use super::normalize::{NormPeer, Prepared};
use crate::io::{Batch, SLOT_LEN, Uplink};

/// The `SCHED_FIFO` priority asked for (low among real-time threads: above every normal one).
const PRIORITY: i32 = 10;

/// How long the thread parks with no normalized peer (new peers unpark it at once).
const IDLE: StdDuration = StdDuration::from_secs(1);

/// The pacer thread's handle: peers register here ([`NormPeer::start`]).
#[derive(Debug)]
pub(crate) struct Pacing {
    new: Mutex<Vec<(Arc<NormPeer>, Arc<Uplink>)>>,
    thread: OnceLock<thread::Thread>,
    realtime: OnceLock<bool>,
}

impl Pacing {
    /// Starts the thread (call before dropping privileges: it asks for real-time priority
    /// first thing). `origin` is the core clock's origin, `src` our MAC.
    ///
    /// # Errors
    /// The thread cannot be spawned.
    pub(crate) fn spawn(origin: StdInstant, src: Mac) -> std::io::Result<Arc<Self>> {
        let p = Arc::new(Self {
            new: Mutex::new(Vec::new()),
            thread: OnceLock::new(),
            realtime: OnceLock::new(),
        });
        let run = Arc::clone(&p);
        let handle = thread::Builder::new()
            .name("psp-pacer".into())
            .spawn(move || run.run(origin, src))?;
        let _ = p.thread.set(handle.thread().clone());
        // Wait until it knows its priority (a few µs), so the privilege drop comes after.
        while p.realtime.get().is_none() {
            thread::yield_now();
        }
        Ok(p)
    }

    /// Whether the thread runs at real-time priority.
    pub(crate) fn is_realtime(&self) -> bool {
        self.realtime.get().copied().unwrap_or(false)
    }

    /// Hands `np`, sending on `uplink`, to the thread.
    pub(crate) fn add(&self, np: Arc<NormPeer>, uplink: Arc<Uplink>) {
        self.new
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((np, uplink));
        if let Some(t) = self.thread.get() {
            t.unpark();
        }
    }

    fn run(&self, origin: StdInstant, src: Mac) {
        if let Err(e) = crate::io::sys::set_timer_slack_ns(1) {
            tracing::debug!(error = %e, "pacer: timer slack unchanged");
        }
        let rt = crate::io::sys::set_realtime(PRIORITY);
        match &rt {
            Ok(()) => tracing::debug!(priority = PRIORITY, "pacer thread at SCHED_FIFO"),
            Err(e) => tracing::debug!(error = %e, "pacer thread at normal priority"),
        }
        let _ = self.realtime.set(rt.is_ok());
        let now = || Instant::from_std(origin, StdInstant::now());
        let mut entries: Vec<Entry> = Vec::new();
        let mut payload = vec![0u8; SLOT_LEN];
        let mut warned = false;
        let mut waiter = Waiter::new();
        let mut round = 0usize;
        loop {
            {
                let mut new = self.new.lock().unwrap_or_else(|e| e.into_inner());
                entries.extend(new.drain(..).map(|(np, uplink)| Entry {
                    np,
                    uplink,
                    out: Batch::new(1),
                    at: None,
                }));
            }
            if !entries.is_empty() && rt.is_err() && !warned {
                warned = true;
                tracing::warn!(
                    "normalized peers: the pacer thread could not get real-time priority (needs CAP_SYS_NICE, and RestrictRealtime=no under systemd); under CPU contention departure times can follow the load"
                );
            }
            entries.retain_mut(|e| {
                if e.at.is_some() {
                    return true;
                }
                if e.np.is_retired() {
                    return false;
                }
                match e.np.prepare(now(), &mut payload, &mut e.out, src) {
                    Prepared::At(at) => {
                        e.at = Some(at);
                        true
                    }
                    Prepared::Done => false,
                }
            });
            let Some(due) = entries.iter().filter_map(|e| e.at).min() else {
                thread::park_timeout(IDLE);
                continue;
            };
            waiter.wait_until(origin + StdDuration::from_micros(due.total_micros()));
            let t = now();
            // Peers due at the same wake-up go out in an order that rotates: with a fixed
            // order, a congested bottleneck behind us would drop the later ones' frames every
            // time (its queue has room for the first), and one peer would take all the loss.
            round = round.wrapping_add(1);
            for i in rotated(round, entries.len()) {
                let e = &mut entries[i];
                if e.at.is_some_and(|a| a <= t) {
                    e.at = None;
                    e.np.send(&e.uplink, &e.out);
                }
            }
        }
    }
}

/// The indices `0..len`, starting at `round % len` and wrapping around.
fn rotated(round: usize, len: usize) -> impl Iterator<Item = usize> {
    let start = round.checked_rem(len).unwrap_or(0);
    (0..len).map(move |j| (start + j) % len)
}

/// One normalized peer on the thread, with its next frame sealed ahead (`at`: its slot).
struct Entry {
    np: Arc<NormPeer>,
    uplink: Arc<Uplink>,
    out: Batch,
    at: Option<Instant>,
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

    /// Returns at `target` (at once if it is past).
    fn wait_until(&mut self, target: StdInstant) {
        let margin = self.margin();
        if let Some(sleep) = target
            .checked_duration_since(StdInstant::now())
            .and_then(|left| left.checked_sub(margin))
            .filter(|d| !d.is_zero())
        {
            let woke_for = StdInstant::now() + sleep;
            thread::sleep(sleep);
            let late = StdInstant::now().saturating_duration_since(woke_for);
            let late = u64::try_from(late.as_nanos()).unwrap_or(u64::MAX);
            self.late_ns = late.max(self.late_ns - self.late_ns / 32);
        }
        while StdInstant::now() < target {
            core::hint::spin_loop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peers_due_together_take_turns_at_going_first() {
        assert_eq!(rotated(0, 3).collect::<Vec<_>>(), [0, 1, 2]);
        assert_eq!(rotated(1, 3).collect::<Vec<_>>(), [1, 2, 0]);
        assert_eq!(rotated(5, 3).collect::<Vec<_>>(), [2, 0, 1]);
        assert_eq!(rotated(7, 0).count(), 0);
        let firsts: Vec<_> = (0..4).filter_map(|r| rotated(r, 2).next()).collect();
        assert_eq!(firsts, [0, 1, 0, 1]);
    }

    #[test]
    fn waits_until_the_target_and_not_less() {
        let mut w = Waiter::new();
        for _ in 0..20 {
            let target = StdInstant::now() + StdDuration::from_micros(700);
            w.wait_until(target);
            assert!(StdInstant::now() >= target);
        }
        // A target in the past returns at once.
        w.wait_until(StdInstant::now() - StdDuration::from_millis(1));
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
}
