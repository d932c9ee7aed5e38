//! io_uring for the TAP (the `io-uring` crate): the frames waiting on a readable TAP read with
//! one `io_uring_enter`, and a batch of writes handed to the kernel with one.
//!
//! The crate wraps the ring itself; the `unsafe` left here is pushing entries whose buffers
//! the kernel writes or reads until they complete. [`TapReadRing`] owns its buffers and never
//! frees one with a read in flight (its reads complete before `read_now` returns; after a
//! failed `io_uring_enter`, drop cancels and waits, or leaks them); [`WriteBatch::finish`]
//! waits for every write it submitted before it returns.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

use io_uring::{IoUring, opcode, types};

/// Reads on a TAP: `count` buffers of `buf_len` bytes; a read completed with a frame keeps its
/// buffer until [`release`](TapReadRing::release).
pub(crate) struct TapReadRing {
    ring: IoUring,
    bufs: Box<[u8]>,
    buf_len: usize,
    /// Buffers with no read in flight (completed and handed out, or never submitted).
    idle: Vec<u32>,
    inflight: usize,
    /// Reads completed with a frame by [`read_now`](Self::read_now), not yet popped.
    done: std::collections::VecDeque<(u32, i32)>,
}

impl core::fmt::Debug for TapReadRing {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("TapReadRing")
            .field("buffers", &(self.bufs.len() / self.buf_len))
            .field("buf_len", &self.buf_len)
            .field("inflight", &self.inflight)
            .finish()
    }
}

impl TapReadRing {
    /// A ring for up to `count` reads at once of up to `buf_len` bytes each.
    ///
    /// # Errors
    /// `io_uring_setup` failure (`ENOSYS`, `EPERM` under a seccomp filter or with
    /// `kernel.io_uring_disabled`, `ENOMEM`).
    pub(crate) fn new(count: u32, buf_len: usize) -> io::Result<Self> {
        let ring = IoUring::new(count.next_power_of_two())?;
        Ok(Self {
            ring,
            bufs: vec![0; count as usize * buf_len].into_boxed_slice(),
            buf_len,
            idle: (0..count).rev().collect(),
            inflight: 0,
            done: std::collections::VecDeque::with_capacity(count as usize),
        })
    }

    /// Puts up to `want` reads of `tap` that do not wait (`RWF_NOWAIT`: a read that finds no
    /// frame completes at once with `-EAGAIN`) into idle buffers, submits them and returns
    /// when all have completed (one system call). Returns how many found a frame (they wait
    /// for [`pop`](Self::pop); the others' buffers are idle again).
    ///
    /// # Errors
    /// `io_uring_enter` failure; the entries stay queued (and their buffers in flight) for the
    /// next call.
    pub(crate) fn read_now(&mut self, tap: BorrowedFd<'_>, want: usize) -> io::Result<usize> {
        let fd = types::Fd(tap.as_raw_fd());
        let mut n = 0;
        while n < want {
            let Some(&i) = self.idle.last() else { break };
            let start = i as usize * self.buf_len;
            let ptr = self.bufs[start..start + self.buf_len].as_mut_ptr();
            let len = u32::try_from(self.buf_len).unwrap_or(u32::MAX);
            let e = opcode::Read::new(fd, ptr, len)
                .offset(u64::MAX)
                .rw_flags(libc::RWF_NOWAIT)
                .build()
                .user_data(u64::from(i));
            // SAFETY: buffer `i` is idle (no read in flight on it), lives in `self.bufs`,
            // which is neither moved nor freed while a read is in flight (see Drop), and is
            // not handed out again until this read completes.
            if unsafe { self.ring.submission().push(&e) }.is_err() {
                break;
            }
            self.idle.pop();
            self.inflight += 1;
            n += 1;
        }
        if n > 0 {
            self.ring.submit_and_wait(n)?;
        }
        let mut hits = 0;
        while let Some(c) = self.ring.completion().next() {
            self.inflight -= 1;
            let i = u32::try_from(c.user_data()).unwrap_or(0);
            if c.result() == -libc::EAGAIN {
                self.idle.push(i);
            } else {
                hits += 1;
                self.done.push_back((i, c.result()));
            }
        }
        Ok(hits)
    }

    /// The next completed read: its buffer index and result (bytes, or a negative errno).
    /// The buffer stays out of the ring until [`release`](Self::release).
    pub(crate) fn pop(&mut self) -> Option<(u32, i32)> {
        if let Some(d) = self.done.pop_front() {
            return Some(d);
        }
        let c = self.ring.completion().next()?;
        self.inflight -= 1;
        let i = u32::try_from(c.user_data()).unwrap_or(0);
        Some((i, c.result()))
    }

    /// Whether reads that found a frame wait for [`pop`](Self::pop).
    pub(crate) fn pending(&self) -> bool {
        !self.done.is_empty()
    }

    /// The first `len` bytes of buffer `i` (one that [`pop`](Self::pop) returned).
    pub(crate) fn buf(&self, i: u32, len: usize) -> &[u8] {
        let start = i as usize * self.buf_len;
        &self.bufs[start..start + len.min(self.buf_len)]
    }

    /// Gives buffer `i` back for the next [`read_now`](Self::read_now).
    pub(crate) fn release(&mut self, i: u32) {
        self.idle.push(i);
    }
}

impl Drop for TapReadRing {
    fn drop(&mut self) {
        if self.inflight == 0 {
            return;
        }
        // Cancel every read and wait (at most a second) for the kernel to let go of the
        // buffers; if it has not, leak them rather than free memory it may still write.
        let cancel = opcode::AsyncCancel2::new(types::CancelBuilder::any())
            .build()
            .user_data(u64::MAX);
        // SAFETY: a cancel request carries no buffer.
        let pushed = unsafe { self.ring.submission().push(&cancel) }.is_ok();
        let deadline = std::time::Instant::now() + core::time::Duration::from_secs(1);
        while pushed && self.inflight > 0 && std::time::Instant::now() < deadline {
            let ts = types::Timespec::new().nsec(50_000_000);
            let args = types::SubmitArgs::new().timespec(&ts);
            let _ = self.ring.submitter().submit_with_args(1, &args);
            for c in self.ring.completion() {
                if c.user_data() != u64::MAX {
                    self.inflight -= 1;
                }
            }
        }
        if self.inflight > 0 {
            core::mem::forget(core::mem::take(&mut self.bufs));
        }
    }
}

/// Writes to a TAP: a batch of frames, each gathered from parts, handed to the kernel with one
/// `io_uring_enter` that waits for all of them.
pub(crate) struct TapWriteRing {
    ring: IoUring,
    entries: usize,
    /// The current batch's iovecs (capacity fixed at creation: never reallocated). Pointers
    /// are only read by the kernel during [`WriteBatch::finish`], and cleared after it.
    iovs: Vec<libc::iovec>,
    /// Per frame: its first iovec and how many.
    spans: Vec<(usize, usize)>,
    /// Set when `io_uring_enter` failed with entries queued: the ring is never entered again.
    broken: bool,
}

// SAFETY: the raw pointers in `iovs` are dangling between batches and never dereferenced
// then (a batch borrows what they point to for its whole life, and `finish` clears them);
// the ring itself is a descriptor and mappings owned by this value.
unsafe impl Send for TapWriteRing {}

impl core::fmt::Debug for TapWriteRing {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("TapWriteRing")
            .field("entries", &self.entries)
            .field("broken", &self.broken)
            .finish()
    }
}

/// Most parts of one frame (a virtio-net header and segments).
pub(crate) const MAX_PARTS: usize = 66;

impl TapWriteRing {
    /// A ring for batches of up to `entries` frames.
    ///
    /// # Errors
    /// As [`TapReadRing::new`].
    pub(crate) fn new(entries: u32) -> io::Result<Self> {
        let entries = entries.next_power_of_two();
        Ok(Self {
            ring: IoUring::new(entries)?,
            entries: entries as usize,
            iovs: Vec::with_capacity(entries as usize * MAX_PARTS),
            spans: Vec::with_capacity(entries as usize),
            broken: false,
        })
    }

    /// Whether an earlier failure of `io_uring_enter` retired the ring.
    pub(crate) fn is_broken(&self) -> bool {
        self.broken
    }

    /// A new, empty batch of writes to `tap`; what is pushed must live as long as `'a`.
    pub(crate) fn batch<'r, 'a>(&'r mut self, tap: BorrowedFd<'a>) -> WriteBatch<'r, 'a> {
        self.iovs.clear();
        self.spans.clear();
        WriteBatch { ring: self, tap }
    }
}

/// Frames gathered for one submission ([`TapWriteRing::batch`]).
pub(crate) struct WriteBatch<'r, 'a> {
    ring: &'r mut TapWriteRing,
    tap: BorrowedFd<'a>,
}

impl<'a> WriteBatch<'_, 'a> {
    /// Adds a frame gathered from `parts` (at most [`MAX_PARTS`]). False when the batch is
    /// full (the frame was not added).
    pub(crate) fn push(&mut self, parts: &[&'a [u8]]) -> bool {
        let r = &mut *self.ring;
        if r.spans.len() == r.entries || parts.len() > MAX_PARTS {
            return false;
        }
        let start = r.iovs.len();
        for p in parts {
            r.iovs.push(libc::iovec {
                iov_base: p.as_ptr().cast_mut().cast(),
                iov_len: p.len(),
            });
        }
        r.spans.push((start, parts.len()));
        true
    }

    /// Submits every frame and waits for all; `results[k]` gets frame `k`'s bytes written or
    /// a negative errno.
    ///
    /// # Errors
    /// `io_uring_enter` failed with writes queued: the ring is retired (see
    /// [`TapWriteRing::is_broken`]) and every result is `-EIO`.
    pub(crate) fn finish(self, results: &mut [i32]) -> io::Result<()> {
        let r = self.ring;
        let n = r.spans.len();
        results[..n].fill(-libc::EIO);
        if r.broken {
            return Err(io::Error::other("TAP write ring retired"));
        }
        let fd = types::Fd(self.tap.as_raw_fd());
        let mut pushed = 0;
        for (k, &(start, len)) in r.spans.iter().enumerate() {
            let v = &r.iovs[start..start + len];
            let e = opcode::Writev::new(fd, v.as_ptr(), u32::try_from(len).unwrap_or(0))
                .offset(u64::MAX)
                .build()
                .user_data(k as u64);
            // SAFETY: the iovecs point into memory borrowed for `'a` (which outlives this
            // call), `r.iovs` is not touched until every write completed below (or the ring is
            // retired, never entered again, so the kernel never reads them), and the queue
            // has room: at most `entries` frames, and the previous batch was reaped.
            if unsafe { r.ring.submission().push(&e) }.is_ok() {
                pushed += 1;
            } else {
                results[k] = -libc::EBUSY;
            }
        }
        let mut done = 0;
        let mut fails = 0;
        while done < pushed {
            match r.ring.submit_and_wait(pushed - done) {
                Ok(_) => fails = 0,
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
                Err(e) => {
                    fails += 1;
                    if fails > 100 {
                        r.broken = true;
                        r.iovs.clear();
                        return Err(e);
                    }
                }
            }
            for c in r.ring.completion() {
                if let Some(x) = results.get_mut(c.user_data() as usize) {
                    *x = c.result();
                }
                done += 1;
            }
        }
        r.iovs.clear();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;
    use std::os::unix::net::UnixDatagram;

    /// A datagram socket pair, non-blocking like the TAP.
    fn pair() -> (UnixDatagram, UnixDatagram) {
        let (a, b) = UnixDatagram::pair().unwrap();
        a.set_nonblocking(true).unwrap();
        b.set_nonblocking(true).unwrap();
        (a, b)
    }

    #[test]
    fn one_submission_reads_every_waiting_datagram_and_no_more() {
        let (a, b) = pair();
        let mut r = TapReadRing::new(4, 64).unwrap();
        assert_eq!(r.read_now(b.as_fd(), 4).unwrap(), 0);
        assert_eq!((r.idle.len(), r.inflight), (4, 0));
        for m in [&b"one"[..], b"two!", b"three"] {
            a.send(m).unwrap();
        }
        assert_eq!(r.read_now(b.as_fd(), 4).unwrap(), 3);
        assert_eq!(r.inflight, 0);
        let mut got = Vec::new();
        while let Some((i, n)) = r.pop() {
            got.push(r.buf(i, usize::try_from(n).unwrap()).to_vec());
            r.release(i);
        }
        // In the order they were sent.
        assert_eq!(got, [b"one".to_vec(), b"two!".to_vec(), b"three".to_vec()]);
        assert_eq!(r.idle.len(), 4);
    }

    #[test]
    fn reads_stop_at_the_idle_buffers_and_the_rest_wait_in_the_socket() {
        let (a, b) = pair();
        let mut r = TapReadRing::new(2, 16).unwrap();
        for k in 0..3u8 {
            a.send(&[k; 5]).unwrap();
        }
        assert_eq!(r.read_now(b.as_fd(), 8).unwrap(), 2);
        // No buffer is idle until one is released: nothing is submitted.
        assert_eq!(r.read_now(b.as_fd(), 8).unwrap(), 0);
        let (i, n) = r.pop().unwrap();
        assert_eq!(r.buf(i, usize::try_from(n).unwrap()), &[0; 5]);
        r.release(i);
        let (i, _) = r.pop().unwrap();
        assert_eq!(r.buf(i, 5), &[1; 5]);
        r.release(i);
        assert_eq!(r.read_now(b.as_fd(), 8).unwrap(), 1);
        let (i, _) = r.pop().unwrap();
        assert_eq!(r.buf(i, 5), &[2; 5]);
    }

    #[test]
    fn a_datagram_longer_than_a_buffer_is_cut_to_it() {
        let (a, b) = pair();
        let mut r = TapReadRing::new(1, 8).unwrap();
        a.send(&[7; 20]).unwrap();
        assert_eq!(r.read_now(b.as_fd(), 1).unwrap(), 1);
        let (i, n) = r.pop().unwrap();
        assert_eq!(n, 8);
        assert_eq!(r.buf(i, 100), &[7; 8]);
    }

    #[test]
    fn a_read_error_is_a_completion_with_its_errno() {
        let (a, _b) = pair();
        let mut r = TapReadRing::new(1, 8).unwrap();
        // A write-only end: reading a pipe's write end is EBADF.
        let (_rx, tx) = io::pipe().unwrap();
        assert_eq!(r.read_now(tx.as_fd(), 1).unwrap(), 1);
        assert_eq!(r.pop(), Some((0, -libc::EBADF)));
        drop(a);
    }

    #[test]
    fn a_batch_of_gathered_writes_is_one_datagram_each() {
        let (a, b) = pair();
        let mut w = TapWriteRing::new(4).unwrap();
        let parts: [[&[u8]; 2]; 3] = [[b"h1", b"aaa"], [b"h2", b""], [b"h3", b"ccccc"]];
        let mut results = [0; 4];
        let mut batch = w.batch(a.as_fd());
        for p in &parts {
            assert!(batch.push(p));
        }
        batch.finish(&mut results).unwrap();
        assert_eq!(results[..3], [5, 2, 7]);
        let mut buf = [0; 16];
        for want in [&b"h1aaa"[..], b"h2", b"h3ccccc"] {
            let n = b.recv(&mut buf).unwrap();
            assert_eq!(&buf[..n], want);
        }
        // A full batch refuses more, and the ring is reused.
        let mut batch = w.batch(a.as_fd());
        for _ in 0..4 {
            assert!(batch.push(&[b"x"]));
        }
        assert!(!batch.push(&[b"y"]));
        batch.finish(&mut results).unwrap();
        assert_eq!(results, [1; 4]);
    }

    #[test]
    fn a_refused_write_has_its_errno_and_the_others_go() {
        let (a, b) = pair();
        let mut w = TapWriteRing::new(2).unwrap();
        let mut results = [0; 2];
        let big = vec![0u8; 1 << 22];
        let mut batch = w.batch(a.as_fd());
        assert!(batch.push(&[&big]));
        assert!(batch.push(&[b"ok"]));
        batch.finish(&mut results).unwrap();
        assert_eq!(results[0], -libc::EMSGSIZE);
        assert_eq!(results[1], 2);
        let mut buf = [0; 4];
        assert_eq!(b.recv(&mut buf).unwrap(), 2);
        assert!(!w.is_broken());
    }
}
