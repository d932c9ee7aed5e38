//! Normalized peers: fixed-size paced frames, with static keys and with sessions.

use core::time::Duration;

use crate::harness::{Net, Opts, counter, exchange, flows, frame, session_state, settle};

const NORM: &str = "[normalize]\nenabled = true\ns_goal_kbps = 2000\n";

#[tokio::test(start_paused = true)]
async fn a_reload_applies_a_new_rate_and_keeps_the_tunnel() {
    let net = Net::new(Opts {
        extra: NORM.into(),
        ..Opts::default()
    });
    let (a, b) = (net.start(1), net.start(2));
    let got = exchange(&a, &b, (1, 2), 0..5, Duration::from_millis(500)).await;
    assert_eq!(got.len(), 5);
    let s = a.status().await;
    assert_eq!(
        counter(&s, "peer:vm2.normalize.s_current_kbps"),
        2000,
        "{s}"
    );
    let sent = counter(&s, "peer:vm2.normalize.frames_sent");
    let text = net
        .config_text(1)
        .replace("s_goal_kbps = 2000", "s_goal_kbps = 3000");
    let changed = a.reload(net.parse(1, &text)).await.expect("reload");
    assert_eq!(changed, 1);
    settle_until(&a, |s| {
        counter(s, "peer:vm2.normalize.s_current_kbps") == 3000
    })
    .await;
    let got = exchange(&a, &b, (1, 2), 10..15, Duration::from_millis(500)).await;
    assert_eq!(got.len(), 5);
    // The stream was changed, not replaced: its frame count went on, and the peer saw no loss.
    let s = a.status().await;
    assert!(counter(&s, "peer:vm2.normalize.frames_sent") > sent, "{s}");
    let s = b.status().await;
    assert_eq!(counter(&s, "peer:vm1.drops_total"), 0, "{s}");
    assert_eq!(counter(&s, "peer:vm1.normalize.last_loss_ppm"), 0, "{s}");
    a.stop().await;
    b.stop().await;
}

/// Lets virtual time pass until `ok` holds for `g`'s status (at most 10 s).
async fn settle_until(
    g: &psp_gateway::testing::MemGateway,
    ok: impl Fn(&serde_json::Value) -> bool,
) {
    for _ in 0..100 {
        if ok(&g.status().await) {
            return;
        }
        settle(Duration::from_millis(100)).await;
    }
    panic!("not within 10 s: {}", g.status().await);
}

/// Normalized peers with sessions. Handshakes and rekeys (every 2 s)
/// ride inside the streams; for a simulated minute of traffic both ways every outer frame has
/// the same length and leaves at the same interval, whether it carries data, a handshake
/// message or nothing, and no frame is lost.
#[tokio::test(start_paused = true)]
async fn sessions_inside_normalized_streams_change_nothing_an_observer_sees() {
    let net = Net::new(Opts {
        session_extra: "rekey_after_s = 2\n".into(),
        extra: "[normalize]\nenabled = true\ns_goal_kbps = 2000\nalgorithm = \"fixed\"\n".into(),
        ..Opts::sessions()
    });
    let (a, b) = (net.start(1), net.start(2));
    // The first session comes up (its handshake in the clear stream-less path: group key).
    flows(&a, &b, (1, 2), 0..3, Duration::from_millis(500)).await;
    settle(Duration::from_secs(1)).await;
    let _ = net.segs[0].take_capture_timed();
    let (mut to_b, mut to_a) = (Vec::new(), Vec::new());
    for i in 0..600u32 {
        if i % 3 == 0 {
            a.tap.inject(&frame(1, 2, i, 300));
        }
        if i % 7 == 0 {
            b.tap.inject(&frame(2, 1, i, 900));
        }
        settle(Duration::from_millis(100)).await;
        to_b.extend(crate::harness::ids(&b.tap.take()));
        to_a.extend(crate::harness::ids(&a.tap.take()));
    }
    settle(Duration::from_millis(500)).await;
    to_b.extend(crate::harness::ids(&b.tap.take()));
    to_a.extend(crate::harness::ids(&a.tap.take()));
    assert_eq!(to_b, (0..600).step_by(3).collect::<Vec<_>>(), "vm1 -> vm2");
    assert_eq!(to_a, (0..600).step_by(7).collect::<Vec<_>>(), "vm2 -> vm1");
    let s = a.status().await;
    let rekeys = counter(&s, "peer:vm2.session.rekeys");
    assert!(rekeys >= 20, "{rekeys} rekeys: {s}");
    // What an observer sees from vm1: one length, one interval.
    let cap = net.segs[0].take_capture_timed();
    let from_a: Vec<_> = cap
        .iter()
        .filter(|(_, f)| f[6..12] == crate::harness::mac(1))
        .collect();
    let lens: std::collections::BTreeSet<usize> = from_a.iter().map(|(_, f)| f.len()).collect();
    assert_eq!(lens.len(), 1, "outer frame lengths from vm1: {lens:?}");
    let gaps: std::collections::BTreeSet<u128> = from_a
        .windows(2)
        .map(|w| (w[1].0 - w[0].0).as_micros())
        .collect();
    assert!(
        gaps.iter().max().unwrap_or(&0) - gaps.iter().min().unwrap_or(&0) <= 1000,
        "inter-departure times from vm1 (µs): {gaps:?}"
    );
    a.stop().await;
    b.stop().await;
}

/// Broadcasts (ARP) between normalized session peers: before the first session they travel
/// under the group key and are delivered; once the streams run, inside them; either way
/// exactly once.
#[tokio::test(start_paused = true)]
async fn broadcasts_reach_normalized_session_peers_before_and_after_the_session() {
    for udp in [false, true] {
        broadcasts_before_and_after_the_session(udp).await;
    }
}

async fn broadcasts_before_and_after_the_session(udp: bool) {
    use crate::harness::arp_request;
    let net = Net::new(Opts {
        extra: "[normalize]\nenabled = true\ns_goal_kbps = 2000\n".into(),
        udp,
        ..Opts::sessions()
    });
    let (a, b) = (net.start(1), net.start(2));
    a.tap.inject(&arp_request(1, 2));
    settle(Duration::from_millis(50)).await;
    assert_eq!(
        b.tap.take(),
        [arp_request(1, 2)],
        "before any session (udp {udp})"
    );
    flows(&b, &a, (2, 1), 10..13, Duration::from_millis(500)).await;
    settle(Duration::from_secs(1)).await;
    let _ = net.capture(0);
    for _ in 0..3 {
        a.tap.inject(&arp_request(1, 2));
        b.tap.inject(&arp_request(2, 1));
    }
    settle(Duration::from_millis(500)).await;
    assert_eq!(b.tap.take(), vec![arp_request(1, 2); 3], "in vm1's stream");
    assert_eq!(a.tap.take(), vec![arp_request(2, 1); 3], "in vm2's stream");
    let cap = net.capture(0);
    assert!(
        !cap.iter().any(|f| f[..6] == [0xff; 6]),
        "no broadcast left outside the streams"
    );
    a.stop().await;
    b.stop().await;
}

/// Three gateways whose peers are all normalized session peers, as in testbed/congestion.sh:
/// no inner frame is sent, yet every session comes up and every stream runs at S_goal (the
/// experiment's competing tunnel A→C carries nothing but dummies). Then a simulated 20 s of
/// traffic vm1 → vm2 with a rekey every 2 s: every controller sees no loss, keeps its RTT
/// estimate at O_min (40 ms) and every rate at S_goal, checked every second.
#[tokio::test(start_paused = true)]
async fn normalized_session_peers_stream_without_traffic_and_rekeys_cost_no_rate() {
    let net = Net::new(Opts {
        hosts: 3,
        session_extra: "rekey_after_s = 2\n".into(),
        extra: format!("{NORM}algorithm = \"improved\"\n"),
        ..Opts::sessions()
    });
    let gws = [net.start(1), net.start(2), net.start(3)];
    settle(Duration::from_secs(3)).await;
    let check = |s: &serde_json::Value, me: usize, what: &str| {
        for j in (1..=3).filter(|j| *j != me) {
            let c = |k: &str| counter(s, &format!("peer:vm{j}.normalize.{k}"));
            assert_eq!(
                session_state(s, &format!("vm{j}")),
                "up",
                "vm{me}, {what}: {s}"
            );
            assert!(c("frames_received") > 100, "vm{me} from vm{j}, {what}: {s}");
            assert_eq!(c("s_current_kbps"), 2000, "vm{me} to vm{j}, {what}: {s}");
            assert_eq!(c("last_loss_ppm"), 0, "vm{me} from vm{j}, {what}: {s}");
            assert_eq!(
                c("rtt_estimate_us"),
                40_000,
                "vm{me} from vm{j}, {what}: {s}"
            );
        }
    };
    for (i, g) in gws.iter().enumerate() {
        check(&g.status().await, i + 1, "before any traffic");
    }
    for t in 0..20u32 {
        for k in 0..10 {
            gws[0].tap.inject(&frame(1, 2, t * 10 + k, 1000));
            settle(Duration::from_millis(100)).await;
        }
        for (i, g) in gws.iter().enumerate() {
            check(&g.status().await, i + 1, &format!("after {} s", t + 1));
        }
    }
    assert_eq!(gws[1].tap.take().len(), 200, "vm1 -> vm2");
    let s = gws[0].status().await;
    for j in [2, 3] {
        let rekeys = counter(&s, &format!("peer:vm{j}.session.rekeys"));
        assert!(rekeys >= 5, "vm{j}: {rekeys} rekeys: {s}");
    }
    for g in gws {
        g.stop().await;
    }
}
