//! What a session peer may send under the group key besides handshake messages: genuine group
//! payloads only. Its unicast data travels under its session keys, and every holder of the
//! group key can seal a group frame "from" it, so a unicast packet inside a broadcast-addressed
//! group frame (which the kernel would accept: Linux answers a unicast IP packet that arrived
//! with a broadcast destination MAC) is dropped here.

use core::net::{IpAddr, Ipv4Addr};

/// Whether `inner` (an opened Ethernet II frame) is a genuine group payload: a group
/// destination MAC carrying ARP, an IPv4 packet to a multicast, limited-broadcast or
/// directed-broadcast address of one of `subnets` (this host's addresses and prefix lengths), or
/// an IPv6 packet to a multicast address (ND, MLD). Everything else, other EtherTypes included,
/// is not.
pub(crate) fn is_group_payload(inner: &[u8], subnets: &[(IpAddr, u8)]) -> bool {
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
        let nets = [("10.77.0.1".parse().unwrap(), 24)];
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
        // A unicast destination MAC, other EtherTypes, truncated frames.
        assert!(!is_group_payload(
            &frame([2, 0, 0, 0, 0, 1], 0x0806, &[0; 28]),
            &nets
        ));
        assert!(!is_group_payload(&frame(BCAST, 0x88cc, &[0; 40]), &nets));
        assert!(!is_group_payload(&frame(BCAST, 0x0800, &[0x45; 10]), &nets));
        assert!(!is_group_payload(&[], &nets));
    }
}
