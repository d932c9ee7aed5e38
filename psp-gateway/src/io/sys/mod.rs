//! The one folder with `unsafe`: ioctls, AF_PACKET, `recvmmsg`/`sendmmsg`, socket options.
//! Every `unsafe` block carries a `// SAFETY:` comment.
//!
//! One file per concern, each a thin, synchronous wrapper over a few system calls on
//! non-blocking descriptors:
//!
//! | file | what |
//! |---|---|
//! | `fd.rs` | `O_NONBLOCK`, new sockets, integer socket options, registering with tokio |
//! | `netdev.rs` | interface names, MTU, MAC, flags, index, driver (ethtool), `getifaddrs` |
//! | `tap.rs` | `/dev/net/tun`: `TUNSETIFF`, `TUNSETVNETHDRSZ`, `TUNSETOFFLOAD` |
//! | `packet.rs` | AF_PACKET sockets: bind, promiscuous mode, options; [`PacketSocket`] |
//! | `mmsg.rs` | batched `recvmmsg`/`sendmmsg` into a [`Batch`](super::Batch) |
//! | `sockaddr.rs` | `SocketAddr` ↔ C socket addresses (through `socket2::SockAddr`) |
//! | `users.rs` | user lookup, dropping privileges, handing a file to a user (never through a link) |
//! | `netns.rs` | entering a network namespace (tests) |
//! | `ring.rs` | the raw uplink's `PACKET_MMAP` receive ring (TPACKET_V2) |
//! | `sched.rs` | timer slack, real-time priority, waiting for writability (the pacer thread) |
//! | `uring.rs` | io_uring for the TAP: reads in flight, batched writes (`io-uring` crate) |
//!
//! Where `nix` or `socket2` wrap a call safely we use them (users, `setgroups`/`setgid`/
//! `setuid`, `getifaddrs`, `if_nametoindex`, `socket`, `fcntl`, `setns`, `poll`, `recvfrom`,
//! socket addresses); hand-written `unsafe` is left for what they do not cover, and each file
//! says which. Readiness (tokio), retry and drop policy live in the safe callers
//! ([`super::tap`], [`super::raw_eth`], [`super::udp`]). Linux only.
//!
//! The public items are the few the integration tests (`psp-gateway/tests/`) use; everything
//! else is `pub(crate)`.

mod fd;
mod mmsg;
mod netdev;
mod netns;
mod packet;
mod ring;
mod sched;
mod sockaddr;
mod tap;
mod uring;
mod users;

pub(crate) use fd::{
    getsockopt_int, register_fd_readable, register_file, set_buffer_sizes, set_nonblocking,
    writable,
};
pub(crate) use mmsg::{MMSG_CHUNK, SendError, SendMode, send_mmsg};
pub use mmsg::{RecvMode, recv_mmsg};
pub use netdev::if_index;
pub(crate) use netdev::{if_driver, if_mac, if_mtu, interfaces, set_if_mac, set_if_mtu, set_if_up};
pub use netns::enter_netns;
pub(crate) use packet::{
    ETH_P_PSP, packet_add_promisc, packet_ignore_outgoing, packet_qdisc_bypass, packet_socket,
};
pub use packet::{PacketSocket, Received};
pub use ring::RxRing;
pub(crate) use sched::{set_realtime, set_timer_slack_ns, wait_writable};
pub(crate) use tap::{open_tap, tap_set_offload, tap_set_vnet_hdr_len};
pub(crate) use uring::{MAX_PARTS, TapReadRing, TapWriteRing};
pub(crate) use users::{FileKind, check_ancestors, set_owner_mode};
pub use users::{chown_path, current_uids, drop_privileges, lookup_user};
