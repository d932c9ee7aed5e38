//! Peers with static keys (`key_file`) and the group key.

use core::time::Duration;

use crate::harness::{Net, Opts, broadcast, counter, exchange, ids, settle};

#[tokio::test(start_paused = true)]
async fn unicast_both_ways_and_broadcast() {
    let net = Net::new(Opts::default());
    let (a, b) = (net.start(1), net.start(2));
    let got = exchange(&a, &b, (1, 2), 0..50, Duration::from_millis(50)).await;
    assert_eq!(got, (0..50).collect::<Vec<_>>());
    let got = exchange(&b, &a, (2, 1), 100..150, Duration::from_millis(50)).await;
    assert_eq!(got, (100..150).collect::<Vec<_>>());
    a.tap.inject(&broadcast(1, 7));
    settle(Duration::from_millis(10)).await;
    assert_eq!(ids(&b.tap.take()), [7]);
    let s = a.status().await;
    assert_eq!(counter(&s, "peer:vm2.tx_frames"), 50);
    assert_eq!(counter(&s, "peer:vm2.rx_frames"), 50);
    assert_eq!(counter(&s, "group.tx_frames"), 1);
    assert_eq!(counter(&s, "drops_total"), 0, "{s}");
    // Everything on the wire is PSP (EtherType 0x1982), and no inner byte shows.
    for f in net.capture(0) {
        assert_eq!(f[12..14], [0x19, 0x82]);
    }
    a.stop().await;
    b.stop().await;
}

#[tokio::test(start_paused = true)]
async fn three_gateways_over_udp() {
    let net = Net::new(Opts {
        hosts: 3,
        udp: true,
        ..Opts::default()
    });
    let gws = [net.start(1), net.start(2), net.start(3)];
    for (x, y) in [(1u8, 2u8), (2, 3), (3, 1), (2, 1)] {
        let (gx, gy) = (&gws[usize::from(x - 1)], &gws[usize::from(y - 1)]);
        let base = u32::from(x) * 1000 + u32::from(y) * 100;
        let got = exchange(gx, gy, (x, y), base..base + 20, Duration::from_millis(50)).await;
        assert_eq!(got, (base..base + 20).collect::<Vec<_>>(), "vm{x} -> vm{y}");
    }
    // A broadcast reaches both others (one copy per endpoint over UDP).
    gws[0].tap.inject(&broadcast(1, 9));
    settle(Duration::from_millis(10)).await;
    assert_eq!(ids(&gws[1].tap.take()), [9]);
    assert_eq!(ids(&gws[2].tap.take()), [9]);
    for g in gws {
        g.stop().await;
    }
}

/// A restart continues above every sequence number the last run reserved: the peer's replay
/// window accepts the restarted sender's frames at once (no blackhole), a hundred times.
#[tokio::test(start_paused = true)]
async fn restarts_never_blackhole_a_static_key() {
    let net = Net::new(Opts::default());
    let b = net.start(2);
    for round in 0..100u32 {
        let a = net.start(1);
        let got = exchange(
            &a,
            &b,
            (1, 2),
            round * 10..round * 10 + 3,
            Duration::from_millis(5),
        )
        .await;
        assert_eq!(got.len(), 3, "restart {round}: {got:?}");
        a.stop().await;
    }
    let s = b.status().await;
    assert_eq!(counter(&s, "peer:vm1.drops.replay"), 0, "{s}");
    b.stop().await;
}
