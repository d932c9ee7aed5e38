//! Session peers: handshakes, rekeys, restarts, two paths, loss.

use core::time::Duration;

use crate::harness::{Net, Opts, counter, exchange, frame, ids, session_state, settle};

/// Sessions every `rekey_s` seconds.
fn rekeying(rekey_s: u32) -> Opts {
    Opts {
        session_extra: format!("rekey_after_s = {rekey_s}\n"),
        ..Opts::sessions()
    }
}

#[tokio::test(start_paused = true)]
async fn the_first_frames_wait_for_the_session_and_arrive() {
    let net = Net::new(Opts::sessions());
    let (a, b) = (net.start(1), net.start(2));
    let got = exchange(&a, &b, (1, 2), 0..10, Duration::from_millis(200)).await;
    assert_eq!(got, (0..10).collect::<Vec<_>>());
    let got = exchange(&b, &a, (2, 1), 10..20, Duration::from_millis(20)).await;
    assert_eq!(got, (10..20).collect::<Vec<_>>());
    for (g, peer) in [(&a, "vm2"), (&b, "vm1")] {
        let s = g.status().await;
        assert_eq!(session_state(&s, peer), "up", "{s}");
        assert_eq!(s["peers"][0]["session"]["paths"], "single-path", "{s}");
        assert_eq!(counter(&s, "drops_total"), 0, "{s}");
    }
    a.stop().await;
    b.stop().await;
}

#[tokio::test(start_paused = true)]
async fn two_paths_give_an_smkex_session_and_require_holds_it() {
    let net = Net::new(Opts {
        paths: 2,
        session_extra: "smkex = \"require\"\n".into(),
        ..Opts::sessions()
    });
    let (a, b) = (net.start(1), net.start(2));
    let got = exchange(&a, &b, (1, 2), 0..10, Duration::from_millis(200)).await;
    assert_eq!(got.len(), 10);
    let s = a.status().await;
    assert_eq!(s["peers"][0]["session"]["paths"], "two-path", "{s}");
    // Path 2 carried handshake messages only.
    let on2 = net.capture(1);
    assert!(!on2.is_empty());
    a.stop().await;
    b.stop().await;
}

/// Rekeys every simulated 2 s for a minute under a steady flow both ways: not a frame lost,
/// no drop counted, about 30 rekeys.
#[tokio::test(start_paused = true)]
async fn rekeys_every_two_seconds_lose_nothing() {
    let net = Net::new(rekeying(2));
    let (a, b) = (net.start(1), net.start(2));
    let mut sent = 0u32;
    let (mut got_b, mut got_a) = (Vec::new(), Vec::new());
    for _ in 0..6000 {
        a.tap.inject(&frame(1, 2, sent, 300));
        b.tap.inject(&frame(2, 1, sent, 300));
        sent += 1;
        settle(Duration::from_millis(10)).await;
        got_b.extend(ids(&b.tap.take()));
        got_a.extend(ids(&a.tap.take()));
    }
    settle(Duration::from_millis(100)).await;
    got_b.extend(ids(&b.tap.take()));
    got_a.extend(ids(&a.tap.take()));
    assert_eq!(got_b, (0..sent).collect::<Vec<_>>(), "vm1 -> vm2");
    assert_eq!(got_a, (0..sent).collect::<Vec<_>>(), "vm2 -> vm1");
    let (sa, sb) = (a.status().await, b.status().await);
    // Each rekey counts on both hosts.
    let rekeys = counter(&sa, "peer:vm2.session.rekeys");
    assert_eq!(rekeys, counter(&sb, "peer:vm1.session.rekeys"));
    assert!((25..=35).contains(&rekeys), "{rekeys} rekeys in 60 s: {sa}");
    assert_eq!(
        counter(&sa, "drops_total") + counter(&sb, "drops_total"),
        0,
        "{sa}\n{sb}"
    );
    a.stop().await;
    b.stop().await;
}

/// A peer restarts (its sessions gone): the other learns it from the new handshake, and
/// frames flow again within a second, twenty times.
#[tokio::test(start_paused = true)]
async fn restarts_get_a_new_session_within_a_second() {
    let net = Net::new(Opts::sessions());
    let a = net.start(1);
    for round in 0..20u32 {
        let b = net.start(2);
        let base = round * 100;
        let _ = exchange(&a, &b, (1, 2), base..base + 5, Duration::from_secs(1)).await;
        let got = exchange(
            &a,
            &b,
            (1, 2),
            base + 50..base + 55,
            Duration::from_millis(50),
        )
        .await;
        assert_eq!(got.len(), 5, "round {round}: {}", a.status().await);
        let got = exchange(
            &b,
            &a,
            (2, 1),
            base + 60..base + 65,
            Duration::from_millis(50),
        )
        .await;
        assert_eq!(got.len(), 5, "round {round}");
        b.stop().await;
    }
    a.stop().await;
}

/// 10 % loss on the segment: the handshakes retry and sessions still come up and rekey.
#[tokio::test(start_paused = true)]
async fn sessions_survive_ten_percent_loss() {
    let net = Net::new(rekeying(2));
    net.segs[0].set_loss(100_000, 7);
    let (a, b) = (net.start(1), net.start(2));
    let (mut to_b, mut to_a) = (0, 0);
    for i in 0..200u32 {
        a.tap.inject(&frame(1, 2, i, 200));
        b.tap.inject(&frame(2, 1, i, 200));
        settle(Duration::from_millis(100)).await;
        to_b += ids(&b.tap.take()).len();
        to_a += ids(&a.tap.take()).len();
    }
    // Loss takes about a tenth; a session that stalled would take far more.
    let s = a.status().await;
    assert!(
        to_b >= 160 && to_a >= 160,
        "{to_b} and {to_a} of 200 delivered: {s}"
    );
    assert!(counter(&s, "peer:vm2.session.sessions") >= 5, "{s}");
    a.stop().await;
    b.stop().await;
}

/// One handshake for the first session: no second handshake right after it (a responder's
/// rate limit would refuse it, and the first frames would wait for nothing). Both hosts may
/// send a Request when they start at once (crossing handshakes: one is dropped).
#[tokio::test(start_paused = true)]
async fn a_session_takes_one_request() {
    let net = Net::new(Opts::sessions());
    net.segs[0].set_delay(Duration::from_micros(300), Duration::from_micros(200));
    let (a, b) = (net.start(1), net.start(2));
    let _ = net.capture(0);
    // As a first ping does: vm1's ARP request (a broadcast), vm2's reply (unicast: vm2 starts
    // the handshake), then the echo request and reply, every 20 ms.
    a.tap.inject(&crate::harness::broadcast(1, 0));
    settle(Duration::from_millis(1)).await;
    b.tap.inject(&frame(2, 1, 0, 60));
    for i in 1..50u32 {
        settle(Duration::from_millis(1)).await;
        a.tap.inject(&frame(1, 2, i, 200));
        settle(Duration::from_millis(1)).await;
        b.tap.inject(&frame(2, 1, i, 200));
        settle(Duration::from_millis(18)).await;
    }
    let cap = net.capture(0);
    let from_a = crate::harness::handshake_kinds(&net, &cap, 1, 2);
    let from_b = crate::harness::handshake_kinds(&net, &cap, 2, 1);
    let requests = from_a
        .iter()
        .chain(&from_b)
        .filter(|k| *k == "Request")
        .count();
    assert!(requests <= 2, "{from_a:?} {from_b:?}");
    for (g, peer) in [(&a, "vm2"), (&b, "vm1")] {
        let s = g.status().await;
        let n = counter(&s, &format!("peer:{peer}.session.sessions"));
        assert_eq!(n, 1, "{from_a:?} {from_b:?} {s}");
    }
    a.stop().await;
    b.stop().await;
}

/// A peer configured with the wrong MAC, or the wrong identity: the log names the MAC or the
/// peer and the config line to check, once a minute per source, and the status never shows the
/// peer `up`.
#[tokio::test(start_paused = true)]
async fn misconfigured_peers_are_named_in_the_log_once_a_minute() {
    use crate::harness::Logs;
    let (logs, _guard) = Logs::capture();
    let net = Net::new(Opts {
        identity: true,
        ..Opts::sessions()
    });
    // vm1 has vm2's MAC wrong.
    let wrong_mac = net
        .config_text(1)
        .replace("mac = \"02:50:53:00:00:02\"", "mac = \"02:50:53:00:00:09\"");
    let a = net.start_with(1, &net.parse(1, &wrong_mac));
    let b = net.start(2);
    for i in 0..30u32 {
        b.tap.inject(&frame(2, 1, i, 100));
        settle(Duration::from_secs(1)).await;
    }
    let warned = logs.lines("02:50:53:00:00:02");
    assert_eq!(warned.len(), 1, "{warned:?}");
    assert!(warned[0].contains("mac ="), "{warned:?}");
    settle(Duration::from_secs(40)).await;
    b.tap.inject(&frame(2, 1, 99, 100));
    settle(Duration::from_secs(1)).await;
    assert_eq!(
        logs.lines("02:50:53:00:00:02").len(),
        2,
        "again after a minute"
    );
    let s = a.status().await;
    assert!(counter(&s, "drops.unknown_peer") > 0, "{s}");
    assert_ne!(session_state(&s, "vm2"), "up", "{s}");
    a.stop().await;
    b.stop().await;

    // vm1 expects another identity for vm2.
    let other = Net::new(Opts {
        identity: true,
        ..Opts::sessions()
    });
    let wrong_id = net.config_text(1).replace(
        &net.config_text(1)
            .lines()
            .find(|l| l.starts_with("identity = \""))
            .expect("vm2's identity line")
            .to_owned(),
        other
            .config_text(1)
            .lines()
            .find(|l| l.starts_with("identity = \""))
            .expect("another identity"),
    );
    let a = net.start_with(1, &net.parse(1, &wrong_id));
    let b = net.start(2);
    for i in 0..10u32 {
        b.tap.inject(&frame(2, 1, i, 100));
        settle(Duration::from_secs(1)).await;
    }
    let warned = logs.lines("fail their signature check");
    assert_eq!(warned.len(), 1, "{warned:?}");
    assert!(
        warned[0].contains("vm2") && warned[0].contains("identity ="),
        "{warned:?}"
    );
    let s = a.status().await;
    assert!(counter(&s, "peer:vm2.drops.bad-signature") > 0, "{s}");
    assert_ne!(session_state(&s, "vm2"), "up", "{s}");
    a.stop().await;
    b.stop().await;
}

/// A restarted gateway reaches a peer that stays idle: its first broadcast (the ARP request a
/// restarted host sends) opens at the peer (the group key's numbers continue above the last
/// run's, from the state directory), so the peer answers and the session follows.
#[tokio::test(start_paused = true)]
async fn a_restarted_gateway_reaches_an_idle_peer() {
    use crate::harness::arp_request;
    let net = Net::new(Opts::sessions());
    let b = net.start(2);
    for round in 0..10u32 {
        let a = net.start(1);
        let _ = b.tap.take();
        a.tap.inject(&arp_request(1, 2));
        settle(Duration::from_millis(20)).await;
        assert_eq!(b.tap.take(), [arp_request(1, 2)], "restart {round}");
        let got = exchange(
            &a,
            &b,
            (1, 2),
            round * 10..round * 10 + 3,
            Duration::from_millis(300),
        )
        .await;
        assert_eq!(got.len(), 3, "restart {round}");
        a.stop().await;
    }
    let s = b.status().await;
    assert_eq!(counter(&s, "peer:vm1.drops.too-old"), 0, "{s}");
    b.stop().await;
}
