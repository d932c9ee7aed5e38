//! Thread scheduling for the normalizer's pacer: timer slack, real-time priority, and waiting
//! for a socket to become writable from a plain thread.
//!
//! `prctl(PR_SET_TIMERSLACK)` and `sched_setscheduler` have no wrapper in `nix` or `socket2`; `poll` goes through `nix`.

use std::io;
use std::os::fd::BorrowedFd;

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};

use super::fd::cvt;

/// Sets the calling thread's timer slack to `ns` nanoseconds (the kernel's default, 50 µs,
/// lets a sleep end up to that much late).
///
/// # Errors
/// `prctl` failure.
pub(crate) fn set_timer_slack_ns(ns: u64) -> io::Result<()> {
    // SAFETY: PR_SET_TIMERSLACK takes one unsigned long argument and touches no memory.
    cvt(unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, ns as libc::c_ulong, 0, 0, 0) }).map(drop)
}

/// Moves the calling thread to `SCHED_FIFO` at `priority` (1..=99).
///
/// # Errors
/// `EPERM` without `CAP_SYS_NICE` (or an `RLIMIT_RTPRIO` that allows it), or under systemd's
/// `RestrictRealtime=yes`.
pub(crate) fn set_realtime(priority: i32) -> io::Result<()> {
    let param = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: pid 0 is the calling thread; `param` is a valid sched_param for the call.
    cvt(unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &raw const param) }).map(drop)
}

/// Waits up to `timeout_ms` for `fd` to become writable. Returns whether it did.
///
/// # Errors
/// `poll` failure other than `EINTR` (which returns `false`).
pub(crate) fn wait_writable(fd: BorrowedFd<'_>, timeout_ms: u16) -> io::Result<bool> {
    let mut fds = [PollFd::new(fd, PollFlags::POLLOUT)];
    match poll(&mut fds, PollTimeout::from(timeout_ms)) {
        Ok(n) => Ok(n > 0),
        Err(nix::errno::Errno::EINTR) => Ok(false),
        Err(e) => Err(e.into()),
    }
}
