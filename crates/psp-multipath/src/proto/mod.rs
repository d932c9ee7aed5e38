//! The psp-mp protocol without I/O: [`Setup`] (hellos, the SEP/SMKEX handshake, binding tags,
//! stream keys) and [`Connection`] (the data phase: protection, segments, the share policy,
//! acknowledgements, re-sending after a path failure, reassembly). Both take bytes per path and
//! give bytes per path; time is an argument and randomness comes from the caller. Neither reads
//! a socket or a clock, spawns a task or holds a waker: [`crate::connect`], the [`crate::Listener`]
//! and [`crate::MultipathStream`] drive them over TCP with tokio, and the unit tests drive them
//! in memory on a virtual clock.
//!
//! Paths are numbered by *slot*: in dispersal mode slot [`crate::UNTRUSTED`] (0)
//! is the untrusted connection and [`crate::TRUSTED`] (1) the trusted one; in kernel
//! MPTCP mode slot 0 is the one (trusted) connection. The wire format is in [`crate::wire`] and,
//! normatively, in docs/MULTIPATH.md.

mod connection;
mod setup;

pub(crate) use connection::RETAIN_LIMIT;
pub use connection::{Connection, Event, Read};
pub use setup::{Established, Setup, SetupEvent};

use crate::wire::PathRole;
use crate::{Mode, TRUSTED};

/// The slots' roles for `mode`: `[untrusted, trusted]` (dispersal) or `[trusted]` (kernel
/// MPTCP: one connection).
pub(crate) fn roles(mode: Mode) -> &'static [PathRole] {
    match mode {
        Mode::KernelMptcp => &[PathRole::Trusted],
        Mode::Dispersal => &[PathRole::Untrusted, PathRole::Trusted],
    }
}

/// The slot of the trusted connection among `n` slots.
pub(crate) fn trusted_slot(n: usize) -> usize {
    if n == 1 { 0 } else { TRUSTED }
}
