//! Busy polling: after traffic in either direction, a task about to park on an empty TAP or
//! uplink first retries its non-blocking read for a short window (issue 11, latency).
//!
//! A parked task costs a wake-up when the next frame arrives: the reactor's `epoll_wait`
//! returns, the worker thread is scheduled, and on an idle (virtual) CPU that is tens of µs.
//! A ping through two gateways crosses four such wake-ups. Within [`window`] of the last frame
//! seen by *either* direction, the receive paths instead yield to the runtime and read again,
//! so the answer to a request just sent is picked up by a task that is still running. Bulk
//! traffic never waits (its queues are not empty), and an idle gateway never spins (no recent
//! frame); what pays is sparse request/response traffic: at most one window of CPU per
//! direction per exchange. The first frame after a quiet spell also kicks the parked paths
//! awake (a [`tokio::sync::Notify`]), so the task that will receive the answer is already
//! spinning when it comes. `PSP_BUSY_POLL_US` (0 turns it off) overrides the default of
//! [`DEFAULT_WINDOW_US`] µs.

use core::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Instant;

/// The default window in microseconds.
pub const DEFAULT_WINDOW_US: u64 = 0;

static ORIGIN: OnceLock<Instant> = OnceLock::new();
static LAST_NS: AtomicU64 = AtomicU64::new(0);
static WINDOW_NS: OnceLock<u64> = OnceLock::new();

fn now_ns() -> u64 {
    let origin = ORIGIN.get_or_init(Instant::now);
    u64::try_from(origin.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// The busy-poll window in nanoseconds (0: off).
pub fn window() -> u64 {
    *WINDOW_NS.get_or_init(|| {
        std::env::var("PSP_BUSY_POLL_US")
            .ok()
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(DEFAULT_WINDOW_US)
            .saturating_mul(1000)
    })
}

static KICK: tokio::sync::Notify = tokio::sync::Notify::const_new();

/// Records that a frame was just received or sent. The first frame after a quiet spell also
/// wakes the parked receive paths (the other direction's included), so they spin while the
/// answer travels instead of waking when it arrives.
pub(crate) fn note() {
    let w = window();
    if w == 0 {
        return;
    }
    let now = now_ns().max(1);
    let last = LAST_NS.swap(now, Ordering::Relaxed);
    if last == 0 || now.saturating_sub(last) >= w {
        KICK.notify_waiters();
    }
}

/// Completes when [`note`] kicks the parked receive paths (never with busy polling off).
pub(crate) async fn kicked() {
    if window() == 0 {
        core::future::pending::<()>().await;
    }
    KICK.notified().await;
}

/// Whether a receive path should read again instead of parking.
pub(crate) fn spinning() -> bool {
    let w = window();
    let last = LAST_NS.load(Ordering::Relaxed);
    w > 0 && last > 0 && now_ns().saturating_sub(last) < w
}

/// One spin step: lets the runtime's other tasks run, then the kernel's other threads
/// (`sched_yield`), so a spinning task never keeps a woken one off the CPU.
pub(crate) async fn pause() {
    tokio::task::yield_now().await;
    std::thread::yield_now();
}
