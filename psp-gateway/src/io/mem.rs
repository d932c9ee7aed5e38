//! In-memory I/O for tests: a [`MemTap`] (the protected host at the other end is the test) and
//! [`MemUplink`] ports on a [`MemSegment`] (a hub: every frame reaches every other port, as a
//! shared Ethernet segment does; a frame with a UDP address reaches only the port that has it).
//! Loss on the segment comes from a seeded generator, so a run is repeatable. They work under
//! `tokio::time::pause`: nothing here reads a clock.

use core::net::SocketAddr;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::collections::VecDeque;
use std::io;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::Notify;

use super::{Batch, SLOT_LEN, TapIo, UplinkIo};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A queue of frames with a waker.
#[derive(Debug, Default)]
struct Queue {
    frames: Mutex<VecDeque<(Vec<u8>, Option<SocketAddr>)>>,
    ready: Notify,
    /// Frames longer than a batch slot, dropped (as the UDP uplink drops such datagrams).
    dropped: AtomicU64,
}

impl Queue {
    fn push(&self, frame: Vec<u8>, from: Option<SocketAddr>) {
        lock(&self.frames).push_back((frame, from));
        self.ready.notify_one();
    }

    /// Waits for at least one frame, then moves up to the batch's capacity into it.
    async fn recv(&self, batch: &mut Batch) -> usize {
        batch.clear();
        loop {
            {
                let mut q = lock(&self.frames);
                while !batch.is_full() {
                    let Some((f, from)) = q.pop_front() else {
                        break;
                    };
                    if f.len() > SLOT_LEN {
                        self.dropped.fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                    let len = f.len();
                    batch.push_with(from, |slot| {
                        slot[..len].copy_from_slice(&f[..len]);
                        Some(len)
                    });
                }
                if !q.is_empty() {
                    // More than a batch: the next call must not wait.
                    self.ready.notify_one();
                }
            }
            if !batch.is_empty() {
                return batch.len();
            }
            self.ready.notified().await;
        }
    }
}

/// A TAP in memory: the test is the protected host. [`MemTap::inject`] is a frame the host's
/// stack sends (the gateway reads it); [`MemTap::take`] returns what the gateway delivered.
#[derive(Debug, Default, Clone)]
pub struct MemTap {
    from_host: Arc<Queue>,
    to_host: Arc<Mutex<Vec<Vec<u8>>>>,
    delivered: Arc<Notify>,
    /// Writes fail (as a TAP whose interface went away does).
    write_fails: Arc<AtomicBool>,
}

impl MemTap {
    /// An empty TAP.
    pub fn new() -> Self {
        Self::default()
    }

    /// The protected host sends `frame`.
    pub fn inject(&self, frame: &[u8]) {
        self.from_host.push(frame.to_vec(), None);
    }

    /// Every frame the gateway delivered to the protected host since the last call.
    pub fn take(&self) -> Vec<Vec<u8>> {
        core::mem::take(&mut *lock(&self.to_host))
    }

    /// Makes every write to the protected host fail (`true`) or succeed again.
    pub fn set_write_fails(&self, fail: bool) {
        self.write_fails.store(fail, Ordering::Relaxed);
    }

    /// Waits until the gateway delivers a frame (or returns at once if one waits).
    pub async fn delivered(&self) {
        if !lock(&self.to_host).is_empty() {
            return;
        }
        self.delivered.notified().await;
    }
}

impl TapIo for MemTap {
    type Reader = ();
    type Writer = ();

    fn reader(&self) {}

    fn writer(&self) {}

    async fn recv_batch(&self, batch: &mut Batch, (): &mut ()) -> io::Result<usize> {
        Ok(self.from_host.recv(batch).await)
    }

    fn take_dropped((): &mut ()) -> u64 {
        0
    }

    async fn write(&self, (): &mut (), frames: &[(&[u8], bool)]) -> u64 {
        if self.write_fails.load(Ordering::Relaxed) {
            return frames.len() as u64;
        }
        let mut q = lock(&self.to_host);
        for (f, _) in frames {
            q.push(f.to_vec());
        }
        drop(q);
        self.delivered.notify_waiters();
        0
    }
}

/// A shared segment (a hub) that [`MemUplink`] ports attach to.
#[derive(Debug)]
pub struct MemSegment {
    ports: Mutex<Vec<(Option<SocketAddr>, Arc<Queue>)>>,
    /// Loss in parts per million, and the generator's state.
    loss: Mutex<(u32, u64)>,
    /// Every frame that crossed the segment (an eavesdropper's capture), with when it did
    /// (tokio's clock: virtual under paused time).
    capture: Mutex<Vec<(tokio::time::Instant, Vec<u8>)>>,
    /// One-way delay and the most added at random on top (frames then overtake each other).
    delay: Mutex<(core::time::Duration, core::time::Duration)>,
}

impl MemSegment {
    /// A segment without loss.
    pub fn new() -> Arc<Self> {
        Arc::new(Self {
            ports: Mutex::new(Vec::new()),
            loss: Mutex::new((0, 0x9e37_79b9_7f4a_7c15)),
            capture: Mutex::new(Vec::new()),
            delay: Mutex::new((core::time::Duration::ZERO, core::time::Duration::ZERO)),
        })
    }

    /// Delays every frame by `delay` plus up to `jitter` more (drawn from the loss generator's
    /// sequence), so frames may arrive out of order. Needs a tokio runtime (the frames wait in
    /// tasks on its clock, so paused time applies).
    pub fn set_delay(&self, delay: core::time::Duration, jitter: core::time::Duration) {
        *lock(&self.delay) = (delay, jitter);
    }

    /// Drops each frame with probability `ppm` / 10^6 (a seeded, repeatable sequence).
    pub fn set_loss(&self, ppm: u32, seed: u64) {
        *lock(&self.loss) = (ppm, seed | 1);
    }

    /// A new port; `addr` makes it reachable by UDP address.
    pub fn port(self: &Arc<Self>, addr: Option<SocketAddr>) -> MemUplink {
        let q = Arc::new(Queue::default());
        lock(&self.ports).push((addr, Arc::clone(&q)));
        MemUplink {
            segment: Arc::clone(self),
            rx: q,
            addr,
            send_fails: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Puts a frame on the segment as if a host without any key sent it (an attacker).
    pub fn inject(&self, frame: &[u8]) {
        for (_, q) in lock(&self.ports).iter() {
            q.push(frame.to_vec(), None);
        }
    }

    /// Everything that crossed the segment since the last call.
    pub fn take_capture(&self) -> Vec<Vec<u8>> {
        self.take_capture_timed()
            .into_iter()
            .map(|(_, f)| f)
            .collect()
    }

    /// [`take_capture`](Self::take_capture) with the instant each frame was sent.
    pub fn take_capture_timed(&self) -> Vec<(tokio::time::Instant, Vec<u8>)> {
        core::mem::take(&mut *lock(&self.capture))
    }

    fn random(&self) -> u64 {
        let mut l = lock(&self.loss);
        l.1 ^= l.1 << 13;
        l.1 ^= l.1 >> 7;
        l.1 ^= l.1 << 17;
        l.1
    }

    fn lost(&self) -> bool {
        let ppm = lock(&self.loss).0;
        ppm != 0 && (self.random() % 1_000_000) < u64::from(ppm)
    }

    fn send(
        &self,
        from: &Arc<Queue>,
        from_addr: Option<SocketAddr>,
        frame: &[u8],
        to: Option<SocketAddr>,
    ) {
        lock(&self.capture).push((tokio::time::Instant::now(), frame.to_vec()));
        if self.lost() {
            return;
        }
        let (delay, jitter) = *lock(&self.delay);
        for (addr, q) in lock(&self.ports).iter() {
            if Arc::ptr_eq(q, from) || (to.is_some() && *addr != to) {
                continue;
            }
            if delay.is_zero() && jitter.is_zero() {
                q.push(frame.to_vec(), from_addr);
                continue;
            }
            let extra = match u64::try_from(jitter.as_micros()).unwrap_or(u64::MAX) {
                0 => 0,
                j => self.random() % (j + 1),
            };
            let at = delay + core::time::Duration::from_micros(extra);
            let (q, f) = (Arc::clone(q), frame.to_vec());
            tokio::spawn(async move {
                tokio::time::sleep(at).await;
                q.push(f, from_addr);
            });
        }
    }
}

/// A port on a [`MemSegment`]: an uplink in memory.
#[derive(Debug)]
pub struct MemUplink {
    segment: Arc<MemSegment>,
    rx: Arc<Queue>,
    addr: Option<SocketAddr>,
    send_fails: Arc<AtomicBool>,
}

impl MemUplink {
    /// A switch that makes this port's sends fail while it is `true` (a link gone down); the
    /// test keeps it after handing the port to a gateway.
    pub fn send_switch(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.send_fails)
    }
}

impl UplinkIo for MemUplink {
    async fn recv_batch(&self, batch: &mut Batch) -> io::Result<usize> {
        Ok(self.rx.recv(batch).await)
    }

    async fn send_batch(&self, batch: &Batch) -> io::Result<usize> {
        self.send_batch_blocking(batch)
    }

    fn send_batch_blocking(&self, batch: &Batch) -> io::Result<usize> {
        if self.send_fails.load(Ordering::Relaxed) {
            return Err(io::Error::from(io::ErrorKind::NetworkDown));
        }
        for i in 0..batch.len() {
            self.segment
                .send(&self.rx, self.addr, batch.frame(i), batch.addr(i));
        }
        Ok(batch.len())
    }

    fn take_dropped(&self) -> u64 {
        self.rx.dropped.swap(0, Ordering::Relaxed)
    }

    fn is_addressed(&self) -> bool {
        self.addr.is_some()
    }
}
