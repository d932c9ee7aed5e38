//! Sessions (docs/SESSIONS.md): per-peer keys from the thesis' Session Establishment Protocol
//! with SMKEX over two paths, instead of static keys.
//!
//! | file | what it holds |
//! |---|---|
//! | `peer.rs` | [`PeerSession`]: what the dataplane tasks and the driver share per peer (the key ring, the queue of frames waiting for a session, the pinned identity, counters) |
//! | `driver.rs` | the driver task: runs handshakes (psp-core's sans-I/O [`Handshake`](psp_core::handshake::Handshake)), installs keys, rekeys, retries with backoff |
//! | `tofu.rs` | the trust-on-first-use state file |
//!
//! The dataplane tasks never wait for the driver: they hand it messages and "need a session"
//! kicks through a bounded channel ([`Link`]) and drop (and count) what does not fit.

mod driver;
mod peer;
mod tofu;

pub(crate) use driver::{Driver, Link};
pub(crate) use peer::{FAIL_REASONS, MessageBudget, PeerSession};
pub(crate) use tofu::{Tofu, known_peers_path, parse as tofu_parse};

/// The address SEP's stage 1 names as destination, from the first frame waiting for a session:
/// an IPv4 or IPv6 destination, or an ARP reply's target.
pub(crate) fn peer_addr_from_frame(frame: &[u8]) -> Option<core::net::IpAddr> {
    use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};
    let ty = u16::from_be_bytes(frame.get(12..14)?.try_into().ok()?);
    let v4 = |at: usize| -> Option<IpAddr> {
        let b: [u8; 4] = frame.get(at..at + 4)?.try_into().ok()?;
        Some(IpAddr::V4(Ipv4Addr::from(b)))
    };
    match ty {
        0x0800 if frame.get(14)? >> 4 == 4 => v4(14 + 16),
        0x86dd => {
            let b: [u8; 16] = frame.get(14 + 24..14 + 40)?.try_into().ok()?;
            Some(IpAddr::V6(Ipv6Addr::from(b)))
        }
        // ARP for IPv4 over Ethernet: the target protocol address.
        0x0806 => v4(14 + 24),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_from_frames() {
        let mut ip = vec![0u8; 14 + 20];
        ip[12..14].copy_from_slice(&[0x08, 0x00]);
        ip[14] = 0x45;
        ip[30..34].copy_from_slice(&[10, 77, 0, 2]);
        assert_eq!(
            peer_addr_from_frame(&ip),
            Some("10.77.0.2".parse().unwrap())
        );
        let mut arp = vec![0u8; 14 + 28];
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        arp[38..42].copy_from_slice(&[10, 77, 0, 1]);
        assert_eq!(
            peer_addr_from_frame(&arp),
            Some("10.77.0.1".parse().unwrap())
        );
        assert_eq!(peer_addr_from_frame(&ip[..20]), None);
        assert_eq!(peer_addr_from_frame(&[]), None);
    }
}
