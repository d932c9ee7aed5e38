//! Group-key receiving: [`GroupOpener`] (one peer's group-key opener, which takes the peer's pin
//! as soon as there is one) and [`is_group_payload`] (what a session peer may send under the
//! group key besides handshake messages).

use core::net::{IpAddr, Ipv4Addr};

use crate::crypto::VerifyingKey;
use crate::protect::Opener;

/// A group-key opener for one peer's frames on one path (broadcasts and handshake messages on
/// path 1, handshake messages on path 2), with its own replay window, never reset: the peer's
/// persisted sequence numbers keep it above the window across the peer's restarts. It checks
/// signatures against the peer's pinned identity from the moment there is one.
#[derive(Debug)]
pub struct GroupOpener {
    opener: Opener,
    pin: Option<[u8; 32]>,
}

impl GroupOpener {
    /// Wraps `opener` (for the group key): it checks signatures against `pin`, or, without one,
    /// accepts signed frames unverified (a peer with no identity, or one pinned on first use
    /// before its first session).
    pub fn new(mut opener: Opener, pin: Option<[u8; 32]>) -> Self {
        match pin {
            Some(k) => opener.set_verifier(Some(VerifyingKey::from_bytes(k))),
            None => opener.set_accept_unverified(true),
        }
        Self { opener, pin }
    }

    /// The opener, after applying `pin` if it is new (the one place a pin reaches an opener).
    #[inline]
    pub fn opener(&mut self, pin: Option<&[u8; 32]>) -> &mut Opener {
        if let Some(k) = pin
            && self.pin.as_ref() != Some(k)
        {
            self.opener.set_verifier(Some(VerifyingKey::from_bytes(*k)));
            self.pin = Some(*k);
        }
        &mut self.opener
    }

    /// The highest sequence number its window accepted, if any.
    pub fn highest(&self) -> Option<u32> {
        self.opener.replay_window().highest()
    }

    /// Starts its window over at `next`: everything below is refused (a floor persisted
    /// before a restart, or an opener's that a reload replaced).
    pub fn restart_at(&mut self, next: u32) {
        self.opener.restart_replay_window(next);
    }

    /// The pin signatures are checked against, if any.
    pub fn pin(&self) -> Option<&[u8; 32]> {
        self.pin.as_ref()
    }
}

/// Whether `inner` (an opened Ethernet II frame) is a genuine group payload: a group
/// destination MAC carrying ARP, an IPv4 packet to a multicast, limited-broadcast or
/// directed-broadcast address of one of `subnets` (this host's addresses and prefix lengths), or
/// an IPv6 packet to a multicast address (ND, MLD). Everything else, other EtherTypes included,
/// is not: a unicast packet inside a broadcast frame (which Linux answers) is the trick it stops.
pub fn is_group_payload(inner: &[u8], subnets: &[(IpAddr, u8)]) -> bool {
    if inner.first().is_none_or(|b| b & 1 == 0) {
        return false;
    }
    let Some(ty) = inner.get(12..14) else {
        return false;
    };
    match u16::from_be_bytes([ty[0], ty[1]]) {
        0x0806 => true,
        0x0800 => inner
            .get(14 + 16..14 + 20)
            .and_then(|b| <[u8; 4]>::try_from(b).ok())
            .map(Ipv4Addr::from)
            .is_some_and(|dst| {
                dst.is_multicast() || dst.is_broadcast() || directed_broadcast(dst, subnets)
            }),
        0x86dd => inner.get(14 + 24).is_some_and(|b| *b == 0xff),
        _ => false,
    }
}

fn directed_broadcast(dst: Ipv4Addr, subnets: &[(IpAddr, u8)]) -> bool {
    subnets.iter().any(|(addr, prefix)| match addr {
        IpAddr::V4(a) if *prefix < 31 => {
            let host = u32::MAX >> prefix;
            let net = u32::from(*a) & !host;
            u32::from(dst) == net | host
        }
        _ => false,
    })
}

#[cfg(test)]
mod tests {
    use alloc::vec;
    use alloc::vec::Vec;

    use super::*;

    fn frame(dst: [u8; 6], ty: u16, l3: &[u8]) -> Vec<u8> {
        let mut f = dst.to_vec();
        f.extend_from_slice(&[2, 0, 0, 0, 0, 2]);
        f.extend_from_slice(&ty.to_be_bytes());
        f.extend_from_slice(l3);
        f
    }

    fn ipv4_to(dst: [u8; 4]) -> Vec<u8> {
        let mut h = vec![0x45, 0, 0, 20, 0, 0, 0, 0, 64, 1, 0, 0, 10, 77, 0, 2];
        h.extend_from_slice(&dst);
        h
    }

    const BCAST: [u8; 6] = [0xff; 6];

    #[test]
    fn only_genuine_group_payloads_pass() {
        let nets = [(IpAddr::V4(Ipv4Addr::new(10, 77, 0, 1)), 24)];
        assert!(is_group_payload(&frame(BCAST, 0x0806, &[0; 28]), &nets));
        assert!(is_group_payload(
            &frame(BCAST, 0x0800, &ipv4_to([255, 255, 255, 255])),
            &nets
        ));
        assert!(is_group_payload(
            &frame(BCAST, 0x0800, &ipv4_to([10, 77, 0, 255])),
            &nets
        ));
        assert!(is_group_payload(
            &frame([1, 0, 0x5e, 0, 0, 0xfb], 0x0800, &ipv4_to([224, 0, 0, 251])),
            &nets
        ));
        let mut v6 = vec![0x60; 40];
        v6[24] = 0xff;
        assert!(is_group_payload(
            &frame([0x33, 0x33, 0, 0, 0, 1], 0x86dd, &v6),
            &nets
        ));
        // The insider's trick: a unicast packet to us inside a broadcast frame.
        assert!(!is_group_payload(
            &frame(BCAST, 0x0800, &ipv4_to([10, 77, 0, 1])),
            &nets
        ));
        v6[24] = 0xfe;
        assert!(!is_group_payload(&frame(BCAST, 0x86dd, &v6), &nets));
        assert!(!is_group_payload(
            &frame([2, 0, 0, 0, 0, 1], 0x0806, &[0; 28]),
            &nets
        ));
        assert!(!is_group_payload(&frame(BCAST, 0x88cc, &[0; 40]), &nets));
        assert!(!is_group_payload(&frame(BCAST, 0x0800, &[0x45; 10]), &nets));
        assert!(!is_group_payload(&[], &nets));
    }
}
