//! Three gateways on one segment (root-only; CI runs it): vm1, vm2 and vm3 each hold a key per
//! pair and the group key. Every pair resolves ARP (broadcast, group key) and pings both ways,
//! and no gateway counts a drop from traffic between the other two. On the raw uplink (a hub)
//! every gateway also sees the other pairs' unicast frames and ignores them (`not_for_us`); over
//! UDP each datagram goes to its peer's endpoint only.

mod common;

use core::time::Duration;

use common::{Testbed, TestbedOptions, Uplink, counter, delta};

const PAIRS: [(u8, u8); 3] = [(1, 2), (1, 3), (2, 3)];

fn three_gateways(uplink: Uplink) {
    let tb = Testbed::up(TestbedOptions {
        hosts: 3,
        uplink,
        ..TestbedOptions::default()
    });
    let gws = [tb.start(1), tb.start(2), tb.start(3)];
    let start: Vec<_> = gws.iter().map(|g| g.status_json()).collect();

    for (a, b) in PAIRS {
        tb.ping_until_up(a, b, Duration::from_secs(5));
        for (x, y) in [(a, b), (b, a)] {
            let p = tb.ping(x, y, 3);
            assert_eq!(p.received, 3, "vm{x} -> vm{y}: {p:?}");
            let neigh = tb.neigh(x, &Testbed::ip(y));
            let mac = format!("lladdr 02:50:53:00:00:0{y}");
            assert!(neigh.contains(&mac), "vm{x} resolved vm{y}: {neigh}");
        }
    }

    for (i, g) in gws.iter().enumerate() {
        let n = i + 1;
        let s = g.status_json();
        assert_eq!(
            counter(&s, "drops_total"),
            0,
            "vm{n} counted drops: {:?}",
            delta(&start[i], &s)
        );
        for peer in (1..=3).filter(|&p| p != n) {
            assert!(
                counter(&s, &format!("peer:vm{peer}.rx_frames")) > 0,
                "vm{n} received from vm{peer}: {s}"
            );
            assert!(
                counter(&s, &format!("peer:vm{peer}.tx_frames")) > 0,
                "vm{n} sent to vm{peer}: {s}"
            );
        }
        if uplink == Uplink::Raw {
            assert!(
                counter(&s, "ignored.not_for_us") > 0,
                "vm{n} saw the other pair's unicast on the hub and ignored it: {s}"
            );
        }
    }
}

#[test]
fn root_three_gateways_raw_uplink() {
    three_gateways(Uplink::Raw);
}

#[test]
fn root_three_gateways_udp_uplink() {
    three_gateways(Uplink::Udp);
}
