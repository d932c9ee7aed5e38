//! The TAP device: layer-2 frames to and from the protected host's kernel.
//!
//! Opened on `/dev/net/tun` with `IFF_TAP | IFF_NO_PI` (`TUNSETIFF` in `sys/tap.rs`, which can
//! ask for `IFF_VNET_HDR`), made non-blocking and
//! driven by tokio's [`AsyncFd`]. MTU, MAC and link state go through netdevice ioctls in
//! [`super::sys`]. One task may read while another writes: every method takes `&self`.
//!
//! With offloads (`Tap::open_with`) every read and write carries a virtio-net header: the
//! kernel hands us TCP (and, with USO, UDP) super-frames of up to 64 KiB and partial
//! checksums, which `Tap::recv_batch_with` cuts into MTU-sized frames (`crate::offload`); on
//! the way back `Tap::send_gro` writes coalesced TCP super-frames (UDP ones only with
//! `COALESCE_UDP`, off) and marks verified checksums. With io_uring (`[interface] io_uring`) a
//! busy TAP's reads, and a batch's writes, take one system call each (`sys::TapReadRing`,
//! `sys::TapWriteRing`); a quiet TAP and a single write use plain `readv`/`writev`.

use core::future::Future;
use std::fs::File;
use std::io::{self, IoSlice, IoSliceMut, Read, Write};
use std::os::fd::AsFd;

use tokio::io::unix::AsyncFd;

use super::{Batch, SLOT_LEN, sys};
use crate::offload::{self, GRO_MAX, Gro, MAX_GSO_FRAME, MAX_HDR, TxPlan, VNET_HDR_LEN, VnetHdr};

/// Whether received UDP datagrams of one flow are written to a TAP with USO as one
/// `GSO_UDP_L4` super-frame. Off: measured, it did not speed UDP floods up (BENCHMARKS.md,
/// "Packets and latency"); the coalescer stays built and tested (`offload::Gro::with_udp`).
const COALESCE_UDP: bool = false;

/// The most reads one io_uring submission makes on a readable TAP.
const URING_READS: u32 = 32;

/// Ethernet header bytes on top of the MTU in each TAP frame (no VLAN tag: the TAP is ours).
const ETH_HEADER_LEN: usize = 14;

/// The offloads a TAP opened with `Tap::open_with` got from the kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Offloads {
    /// `TUN_F_CSUM`: frames may come with a partial transport checksum.
    pub(crate) csum: bool,
    /// `TUN_F_TSO4 | TUN_F_TSO6`: TCP super-frames.
    pub(crate) tso: bool,
    /// `TUN_F_TSO_ECN`: super-frames may carry CWR.
    pub(crate) tso_ecn: bool,
    /// `TUN_F_USO4 | TUN_F_USO6` (kernel 6.2 and later): UDP super-frames both ways.
    pub(crate) uso: bool,
}

/// An open TAP interface (`IFF_TAP | IFF_NO_PI`, with `IFF_VNET_HDR` when offloading),
/// non-blocking, registered with tokio. The interface disappears when this is dropped (it is
/// not persistent).
///
/// Public, with the methods `tests/io_root.rs` calls, for the integration tests; the rest is
/// `pub(crate)`.
#[derive(Debug)]
pub struct Tap {
    name: String,
    fd: AsyncFd<File>,
    /// `Some` when every read and write carries a virtio-net header.
    offloads: Option<Offloads>,
    /// Whether readers and writers go through io_uring (with offloads only).
    uring: bool,
}

impl Tap {
    /// Creates (or attaches to) the TAP interface `name`, without offloads.
    ///
    /// Must be called inside a tokio runtime with I/O enabled. The interface is created in
    /// the calling thread's network namespace.
    ///
    /// # Errors
    /// Without CAP_NET_ADMIN, or when `/dev/net/tun` is missing.
    pub fn open(name: &str) -> io::Result<Self> {
        Self::open_with(name, false, false)
    }

    /// Creates (or attaches to) the TAP interface `name`; with `offload`, asks for the
    /// virtio-net header and checksum and TCP segmentation offloads. A kernel that refuses
    /// some (or all) of them gets the rest, logged. With `offload` and `io_uring`, readers
    /// and writers batch their system calls through io_uring (`sys::TapReadRing`,
    /// `sys::TapWriteRing`); a kernel that refuses io_uring gets plain reads and writes,
    /// logged.
    ///
    /// # Errors
    /// As [`open`](Self::open).
    pub(crate) fn open_with(name: &str, offload: bool, io_uring: bool) -> io::Result<Self> {
        // An empty name (or one with `%d`) lets the kernel pick; `name()` tells which.
        let ctx =
            |e: io::Error| io::Error::new(e.kind(), format!("TAP {name} (/dev/net/tun): {e}"));
        let (file, offloads) = if offload {
            match sys::open_tap(name, true) {
                Ok(f) => {
                    let o = negotiate(&f.0);
                    (f, Some(o))
                }
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                    tracing::warn!(error = %e, "TAP without IFF_VNET_HDR: offloads off");
                    (sys::open_tap(name, false).map_err(ctx)?, None)
                }
                Err(e) => return Err(ctx(e)),
            }
        } else {
            (sys::open_tap(name, false).map_err(ctx)?, None)
        };
        let (file, name) = file;
        if let Some(o) = offloads {
            tracing::info!(tap = %name, csum = o.csum, tso = o.tso, tso_ecn = o.tso_ecn, uso = o.uso, "TAP offloads");
        }
        sys::set_nonblocking(&file)?;
        Ok(Self {
            name,
            fd: sys::register_file(file)?,
            offloads,
            uring: io_uring && offloads.is_some(),
        })
    }

    /// The interface name the kernel gave.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Sets the interface MTU.
    ///
    /// # Errors
    /// ioctl failure, or `InvalidInput` when an MTU-sized frame (plus its 14-byte Ethernet
    /// header) would not fit a [`SLOT_LEN`] batch slot.
    pub fn set_mtu(&self, mtu: usize) -> io::Result<()> {
        if mtu + ETH_HEADER_LEN > SLOT_LEN {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "TAP MTU {mtu} too large (at most {})",
                    SLOT_LEN - ETH_HEADER_LEN
                ),
            ));
        }
        sys::set_if_mtu(&self.name, mtu)
    }

    /// The interface MTU.
    ///
    /// # Errors
    /// ioctl failure.
    pub fn mtu(&self) -> io::Result<usize> {
        sys::if_mtu(&self.name)
    }

    /// Sets the interface MAC address.
    ///
    /// # Errors
    /// ioctl failure.
    pub fn set_mac(&self, mac: [u8; 6]) -> io::Result<()> {
        sys::set_if_mac(&self.name, mac)
    }

    /// The interface MAC address.
    ///
    /// # Errors
    /// ioctl failure.
    pub fn mac(&self) -> io::Result<[u8; 6]> {
        sys::if_mac(&self.name)
    }

    /// Brings the interface up.
    ///
    /// # Errors
    /// ioctl failure.
    pub fn set_up(&self) -> io::Result<()> {
        sys::set_if_up(&self.name)
    }

    /// Waits until readable, then reads up to `batch.capacity()` frames (one `read` each,
    /// stopping at `WouldBlock`) into `batch` (cleared first). Returns the count (≥ 1).
    /// On a TAP with offloads use `recv_batch_with`.
    ///
    /// # Errors
    /// Read errors other than `WouldBlock`/`EINTR` (only when no frame was read; otherwise
    /// the frames are returned and the error comes back on the next call). `Unsupported` on
    /// a TAP with offloads.
    pub async fn recv_batch(&self, batch: &mut Batch) -> io::Result<usize> {
        if self.offloads.is_some() {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "TAP with offloads: use recv_batch_with",
            ));
        }
        batch.clear();
        loop {
            let mut guard = self.fd.readable().await?;
            while !batch.is_full() {
                let i = batch.len();
                let slot = batch.slot_mut(i);
                match guard.try_io(|fd| fd.get_ref().read(slot)) {
                    Ok(Ok(n)) => {
                        batch.set_frame_len(i, n.min(SLOT_LEN));
                        batch.set_addr(i, None);
                        batch.set_len(i + 1);
                    }
                    Ok(Err(e)) if e.kind() == io::ErrorKind::Interrupted => {}
                    Ok(Err(e)) => return batch.partial(e),
                    // WouldBlock: try_io cleared the readiness.
                    Err(_would_block) => break,
                }
            }
            if !batch.is_empty() {
                return Ok(batch.len());
            }
        }
    }

    /// A reader for `recv_batch_with`: the buffer one super-frame
    /// is read into (allocated here, once; tiny without offloads).
    pub(crate) fn reader(&self) -> TapReader {
        let len = if self.offloads.is_some() {
            SLOT_LEN + MAX_GSO_FRAME
        } else {
            0
        };
        let uring = self.ring("read", UringRead::new);
        TapReader {
            cut: Cutter {
                buf: vec![0; len].into_boxed_slice(),
                pending: None,
                dropped: 0,
            },
            uring,
        }
    }

    /// With io_uring on, the ring `new` makes (logged as the TAP's `what`s); `None` when off or
    /// when the kernel refuses (logged: that side then makes a system call per frame).
    fn ring<R>(&self, what: &str, new: impl FnOnce() -> io::Result<R>) -> Option<R> {
        if !self.uring {
            return None;
        }
        match new() {
            Ok(r) => {
                tracing::info!(tap = %self.name, "TAP {what}s through io_uring");
                Some(r)
            }
            Err(e) => {
                tracing::warn!(error = %e, "io_uring refused: one {what} per TAP frame");
                None
            }
        }
    }

    /// Like [`recv_batch`](Self::recv_batch), on any TAP: with offloads, a TCP super-frame
    /// becomes as many MTU-sized frames as it carries (those that do not fit this batch wait
    /// in `reader` for the next call) and partial checksums are completed, so every frame in
    /// `batch` is an ordinary Ethernet frame. Frames with a nonsensical virtio-net header are
    /// dropped and counted in `reader`.
    ///
    /// # Errors
    /// As [`recv_batch`](Self::recv_batch).
    pub(crate) async fn recv_batch_with(
        &self,
        batch: &mut Batch,
        reader: &mut TapReader,
    ) -> io::Result<usize> {
        if self.offloads.is_none() {
            return self.recv_batch(batch).await;
        }
        let TapReader { cut, uring } = reader;
        let mut reads = 0;
        let Some(u) = uring.as_mut() else {
            return self.recv_plain(batch, cut, &mut reads).await;
        };
        if u.want > 2 || u.ring.pending() {
            return self.recv_uring(batch, cut, u).await;
        }
        // Quiet: plain reads (one frame and one `EAGAIN` cost two cheap calls); when a call
        // finds more than one frame, the next goes through the ring.
        let r = self.recv_plain(batch, cut, &mut reads).await;
        if reads > 1 {
            u.want = 4;
        }
        r
    }

    /// `recv_batch_with` on a TAP with offloads, one `readv` per frame; counts in `reads`
    /// the frames read.
    async fn recv_plain(
        &self,
        batch: &mut Batch,
        reader: &mut Cutter,
        reads: &mut usize,
    ) -> io::Result<usize> {
        batch.clear();
        loop {
            reader.drain(batch);
            if batch.is_full() {
                return Ok(batch.len());
            }
            let i = batch.len();
            let mut hdr = [0u8; VNET_HDR_LEN];
            let res = {
                let rest = &mut reader.buf[SLOT_LEN..];
                let mut iov = [
                    IoSliceMut::new(&mut hdr),
                    IoSliceMut::new(batch.slot_mut(i)),
                    IoSliceMut::new(rest),
                ];
                let mut f: &File = self.fd.get_ref();
                f.read_vectored(&mut iov)
            };
            match res {
                Ok(n) => {
                    *reads += 1;
                    reader.accept(batch, i, &hdr, n);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if !batch.is_empty() {
                        return Ok(batch.len());
                    }
                    let mut guard = self.fd.readable().await?;
                    // Clear, then retry the read: an edge after this point sets it again.
                    guard.clear_ready();
                }
                Err(e) => return batch.partial(e),
            }
        }
    }

    /// `recv_batch_with` through io_uring: when the TAP is readable, one submission of as
    /// many reads as the last one found frames, and one more (2 to `URING_READS`), each
    /// completing at once (`RWF_NOWAIT`); the frames are copied into `batch`, then cut as a
    /// read's would be. Awaits only with `batch` empty, and completed reads wait in the ring,
    /// so a dropped future loses no frame. A submission that finds at most one frame sends
    /// the next call back to plain reads (`want` 2).
    async fn recv_uring(
        &self,
        batch: &mut Batch,
        cut: &mut Cutter,
        u: &mut UringRead,
    ) -> io::Result<usize> {
        batch.clear();
        let mut failed = None;
        loop {
            cut.drain(batch);
            if batch.is_full() {
                break;
            }
            let Some((b, res)) = u.ring.pop() else {
                if !batch.is_empty() || failed.is_some() {
                    break;
                }
                let mut guard = self.fd.readable().await?;
                let hits = match u.ring.read_now(self.fd.get_ref().as_fd(), u.want) {
                    Ok(h) => h,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(e),
                };
                u.want = (hits + 1)
                    .next_power_of_two()
                    .clamp(2, URING_READS as usize);
                if hits == 0 {
                    // Clear, then read again: an edge after this point sets it again.
                    guard.clear_ready();
                }
                continue;
            };
            match usize::try_from(res) {
                Ok(n) => cut.accept_copy(batch, u.ring.buf(b, n)),
                Err(_) if res == -libc::EINTR => {}
                Err(_) => failed = Some(io::Error::from_raw_os_error(-res)),
            }
            u.ring.release(b);
        }
        match failed {
            Some(e) if batch.is_empty() => Err(e),
            _ => Ok(batch.len()),
        }
    }

    /// Writes one frame to the kernel (waits for writability on `WouldBlock`). With
    /// offloads, a virtio-net header without flags goes in front.
    ///
    /// # Errors
    /// Write errors (e.g. `EIO` while the interface is down, `EINVAL` for a frame shorter
    /// than an Ethernet header).
    pub async fn send(&self, frame: &[u8]) -> io::Result<()> {
        if self.offloads.is_some() {
            let hdr = VnetHdr::default().emit();
            return self
                .send_vectored(&[IoSlice::new(&hdr), IoSlice::new(frame)])
                .await;
        }
        self.send_vectored(&[IoSlice::new(frame)]).await
    }

    /// Writes one frame gathered from `parts` (one `writev`; with offloads the first part
    /// must be the virtio-net header).
    async fn send_vectored(&self, parts: &[IoSlice<'_>]) -> io::Result<()> {
        loop {
            let mut f: &File = self.fd.get_ref();
            match f.write_vectored(parts) {
                Ok(_) => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    let mut guard = self.fd.writable().await?;
                    // Clear, then retry the write: an edge after this point sets it again.
                    guard.clear_ready();
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Writes every frame of `batch` (one `write` each). Frames the kernel refuses are
    /// dropped; returns the number written.
    ///
    /// # Errors
    /// When the first frame fails with an error that is not per-frame (`EIO`: the interface
    /// is down, `EBADFD`, …). Later failures end the batch early with the count so far.
    pub async fn send_batch(&self, batch: &Batch) -> io::Result<usize> {
        let mut sent = 0;
        for i in 0..batch.len() {
            match self.send(batch.frame(i)).await {
                Ok(()) => sent += 1,
                Err(e) if e.kind() == io::ErrorKind::InvalidInput => {}
                Err(e) if sent == 0 && i == 0 => return Err(e),
                Err(_) => break,
            }
        }
        Ok(sent)
    }

    /// Writes the groups of `gro` (a TAP with offloads): each coalesced TCP flow as one
    /// super-frame, every other frame alone with `DATA_VALID` when its checksum is trusted.
    /// `frame(i)` is the `i`th frame pushed into `gro`. Without offloads, writes the frames
    /// one by one. Frames the kernel refuses (`EINVAL`) are dropped; returns the number of
    /// writes that succeeded.
    ///
    /// # Errors
    /// Write errors other than `EINVAL` (`EIO`: the interface is down).
    pub(crate) async fn send_gro<'a>(
        &self,
        gro: &Gro,
        frame: impl Fn(usize) -> &'a [u8],
    ) -> io::Result<usize> {
        let mut sent = 0;
        let mut head = [0u8; VNET_HDR_LEN + MAX_HDR];
        for g in 0..gro.groups() {
            if self.offloads.is_some() {
                let mut iov = [IoSlice::new(&[]); GRO_MAX + 1];
                let e = gro.emit(g, &mut head);
                iov[0] = IoSlice::new(&head[..e.head_len]);
                let mut n = 1;
                let off = e.payload_offset.unwrap_or(0);
                for i in gro.members(g) {
                    iov[n] = IoSlice::new(frame(i).get(off..).unwrap_or_default());
                    n += 1;
                }
                match self.send_vectored(&iov[..n]).await {
                    Ok(()) => sent += 1,
                    Err(e) if e.kind() == io::ErrorKind::InvalidInput => {}
                    Err(e) => return Err(e),
                }
            } else {
                for i in gro.members(g) {
                    match self.send(frame(i)).await {
                        Ok(()) => sent += 1,
                        Err(e) if e.kind() == io::ErrorKind::InvalidInput => {}
                        Err(e) => return Err(e),
                    }
                }
            }
        }
        Ok(sent)
    }
}

/// Asks the kernel for the offloads we handle, the most first; returns what it took.
fn negotiate(file: &File) -> Offloads {
    if let Err(e) = sys::tap_set_vnet_hdr_len(file.as_fd(), VNET_HDR_LEN) {
        tracing::warn!(error = %e, "TUNSETVNETHDRSZ {VNET_HDR_LEN}");
    }
    let (csum, tso4, tso6, ecn) = (
        libc::TUN_F_CSUM,
        libc::TUN_F_TSO4,
        libc::TUN_F_TSO6,
        libc::TUN_F_TSO_ECN,
    );
    let uso = libc::TUN_F_USO4 | libc::TUN_F_USO6;
    let tries = [
        (
            csum | tso4 | tso6 | ecn | uso,
            Offloads {
                csum: true,
                tso: true,
                tso_ecn: true,
                uso: true,
            },
        ),
        (
            csum | tso4 | tso6 | ecn,
            Offloads {
                csum: true,
                tso: true,
                tso_ecn: true,
                uso: false,
            },
        ),
        (
            csum | tso4 | tso6,
            Offloads {
                csum: true,
                tso: true,
                tso_ecn: false,
                uso: false,
            },
        ),
        (
            csum,
            Offloads {
                csum: true,
                tso: false,
                tso_ecn: false,
                uso: false,
            },
        ),
    ];
    for (flags, got) in tries {
        match sys::tap_set_offload(file.as_fd(), flags) {
            Ok(()) => return got,
            Err(e) => tracing::warn!(error = %e, flags, "TUNSETOFFLOAD refused"),
        }
    }
    Offloads {
        csum: false,
        tso: false,
        tso_ecn: false,
        uso: false,
    }
}

/// Receive state of a TAP with offloads (see `Tap::recv_batch_with`): one per reading task.
#[derive(Debug)]
pub struct TapReader {
    cut: Cutter,
    /// With io_uring: its buffers.
    uring: Option<UringRead>,
}

/// A TAP reader's io_uring: its buffers, and how many reads the next submission makes.
#[derive(Debug)]
struct UringRead {
    ring: sys::TapReadRing,
    want: usize,
}

impl UringRead {
    fn new() -> io::Result<Self> {
        Ok(Self {
            ring: sys::TapReadRing::new(URING_READS, VNET_HDR_LEN + SLOT_LEN + MAX_GSO_FRAME)?,
            want: 2,
        })
    }
}

/// A TAP reader's frame cutting: the rest of a super-frame, and the drop count.
#[derive(Debug)]
struct Cutter {
    /// `[SLOT_LEN bytes | MAX_GSO_FRAME bytes]`: a read fills a batch slot, then the second
    /// part; a super-frame is made contiguous at the start.
    buf: Box<[u8]>,
    /// A super-frame being cut: its plan, length and the next segment.
    pending: Option<(offload::Tso, usize, usize)>,
    dropped: u64,
}

impl TapReader {
    /// Frames dropped since the last call (bad virtio-net header or a segment larger than a
    /// slot).
    pub(crate) fn take_dropped(&mut self) -> u64 {
        core::mem::take(&mut self.cut.dropped)
    }
}

impl Cutter {
    /// Handles one read held in `data` (virtio-net header, then the frame): copies it where
    /// a `read_vectored` would have put it, then [`accept`](Self::accept)s it.
    fn accept_copy(&mut self, batch: &mut Batch, data: &[u8]) {
        let i = batch.len();
        let Some((hdr, frame)) = data.split_first_chunk::<VNET_HDR_LEN>() else {
            self.dropped += 1;
            return;
        };
        let (head, rest) = frame.split_at(frame.len().min(SLOT_LEN));
        batch.slot_mut(i)[..head.len()].copy_from_slice(head);
        if let Some(dst) = self.buf.get_mut(SLOT_LEN..SLOT_LEN + rest.len()) {
            dst.copy_from_slice(rest);
        } else {
            self.dropped += 1;
            return;
        }
        self.accept(batch, i, hdr, data.len());
    }

    /// Handles one read of `n` bytes: header `hdr`, frame in slot `i` of `batch` and, past
    /// `SLOT_LEN` bytes, in `buf[SLOT_LEN..]`.
    fn accept(&mut self, batch: &mut Batch, i: usize, hdr: &[u8; VNET_HDR_LEN], n: usize) {
        let Some(len) = n.checked_sub(VNET_HDR_LEN) else {
            self.dropped += 1;
            return;
        };
        let Some(h) = VnetHdr::parse(hdr) else {
            self.dropped += 1;
            return;
        };
        if len > SLOT_LEN {
            // Only a super-frame is longer than a slot: make it contiguous in `buf`.
            let (head, _) = self.buf.split_at_mut(SLOT_LEN);
            head.copy_from_slice(batch.slot_mut(i));
        }
        let frame: &[u8] = if len > SLOT_LEN {
            &self.buf[..len]
        } else {
            &batch.slot_mut(i)[..len]
        };
        match offload::plan_tx(&h, frame) {
            Ok(TxPlan::Plain) if len <= SLOT_LEN => push_slot(batch, i, len),
            Ok(TxPlan::Csum { start, offset }) if len <= SLOT_LEN => {
                match offload::complete_csum(&mut batch.slot_mut(i)[..len], start, offset) {
                    Ok(()) => push_slot(batch, i, len),
                    Err(_) => self.dropped += 1,
                }
            }
            Ok(TxPlan::Tso(t)) if t.max_segment_len() <= SLOT_LEN => {
                if len <= SLOT_LEN {
                    let (head, _) = self.buf.split_at_mut(SLOT_LEN);
                    head[..len].copy_from_slice(&batch.slot_mut(i)[..len]);
                }
                self.pending = Some((t, len, 0));
                self.drain(batch);
            }
            _ => self.dropped += 1,
        }
    }

    /// Cuts pending segments into the free slots of `batch`.
    fn drain(&mut self, batch: &mut Batch) {
        let Some((t, len, mut k)) = self.pending else {
            return;
        };
        while k < t.segments() && !batch.is_full() {
            let i = batch.len();
            match t.segment(&self.buf[..len], k, batch.slot_mut(i)) {
                Some(n) => push_slot(batch, i, n),
                None => self.dropped += 1,
            }
            k += 1;
        }
        self.pending = (k < t.segments()).then_some((t, len, k));
    }
}

/// Appends slot `i` (= `batch.len()`), holding a frame of `len` bytes.
fn push_slot(batch: &mut Batch, i: usize, len: usize) {
    batch.set_frame_len(i, len);
    batch.set_addr(i, None);
    batch.set_len(i + 1);
}

/// A TAP's write state: the coalescing tables (with offloads), and with io_uring the ring its
/// batches go through.
#[derive(Debug)]
pub struct TapWriter {
    gro: Gro,
    uring: Option<UringWrite>,
}

/// A TAP writer's io_uring: the ring, each group's header and each write's result.
#[derive(Debug)]
struct UringWrite {
    ring: sys::TapWriteRing,
    heads: Box<[[u8; VNET_HDR_LEN + MAX_HDR]; GRO_MAX]>,
    head_lens: [usize; GRO_MAX],
    offsets: [usize; GRO_MAX],
    results: [i32; GRO_MAX],
}

impl UringWrite {
    fn new() -> io::Result<Self> {
        Ok(Self {
            ring: sys::TapWriteRing::new(GRO_MAX as u32)?,
            heads: Box::new([[0; VNET_HDR_LEN + MAX_HDR]; GRO_MAX]),
            head_lens: [0; GRO_MAX],
            offsets: [0; GRO_MAX],
            results: [0; GRO_MAX],
        })
    }
}

impl Tap {
    /// Writes the groups of `gro` (built from `chunk`) as `send_gro` does, all in one
    /// io_uring submission. Returns how many frames the kernel refused.
    fn send_gro_uring(&self, gro: &Gro, chunk: &[(&[u8], bool)], u: &mut UringWrite) -> u64 {
        let groups = gro.groups().min(GRO_MAX);
        for g in 0..groups {
            let e = gro.emit(g, &mut u.heads[g]);
            u.head_lens[g] = e.head_len;
            u.offsets[g] = e.payload_offset.unwrap_or(0);
        }
        let mut batch = u.ring.batch(self.fd.get_ref().as_fd());
        for g in 0..groups {
            let mut parts: [&[u8]; sys::MAX_PARTS] = [&[]; sys::MAX_PARTS];
            parts[0] = &u.heads[g][..u.head_lens[g]];
            let mut n = 1;
            for i in gro.members(g) {
                if n < parts.len() {
                    parts[n] = chunk[i].0.get(u.offsets[g]..).unwrap_or_default();
                    n += 1;
                }
            }
            batch.push(&parts[..n]);
        }
        if let Err(e) = batch.finish(&mut u.results) {
            tracing::warn!(error = %e, "TAP write ring failed");
        }
        let mut refused = 0;
        for g in 0..groups {
            if u.results[g] < 0 {
                refused += gro.members(g).count() as u64;
                tracing::debug!(errno = -u.results[g], "TAP write failed");
            }
        }
        refused
    }
}

impl super::TapIo for Tap {
    type Reader = TapReader;
    type Writer = TapWriter;

    fn reader(&self) -> TapReader {
        Self::reader(self)
    }

    fn writer(&self) -> TapWriter {
        TapWriter {
            gro: Gro::with_udp(COALESCE_UDP && self.offloads.is_some_and(|o| o.uso)),
            uring: self.ring("write", UringWrite::new),
        }
    }

    fn recv_batch(
        &self,
        batch: &mut Batch,
        reader: &mut TapReader,
    ) -> impl Future<Output = io::Result<usize>> + Send {
        self.recv_batch_with(batch, reader)
    }

    fn take_dropped(reader: &mut TapReader) -> u64 {
        reader.take_dropped()
    }

    async fn write(
        &self,
        TapWriter { gro, uring }: &mut TapWriter,
        frames: &[(&[u8], bool)],
    ) -> u64 {
        let mut refused = 0u64;
        if self.offloads.is_none() {
            for (f, _) in frames {
                if let Err(e) = self.send(f).await {
                    refused += 1;
                    tracing::debug!(error = %e, len = f.len(), "TAP write failed");
                }
            }
            return refused;
        }
        // With offloads: consecutive segments of a TCP flow (and with USO, datagrams of a UDP
        // flow) go as one super-frame.
        for chunk in frames.chunks(GRO_MAX) {
            gro.clear();
            for (f, trusted) in chunk {
                gro.push(f, *trusted);
            }
            // A single write goes plain: one `writev` is cheaper than a submission.
            if let Some(u) = uring
                .as_mut()
                .filter(|u| !u.ring.is_broken() && gro.groups() > 1)
            {
                refused += self.send_gro_uring(gro, chunk, u);
                continue;
            }
            match self.send_gro(gro, |i| chunk[i].0).await {
                Ok(_) => {}
                Err(e) => {
                    refused += chunk.len() as u64;
                    tracing::debug!(error = %e, "TAP write failed");
                }
            }
        }
        refused
    }
}
