//! SIGHUP: what a reload changes, and what it must not touch.

use core::time::Duration;

use crate::harness::{Net, Opts, counter, exchange, flows, frame, ids, settle};

/// A reload with nothing changed touches nothing: the sessions, their keys and counters stay
/// (no handshake, no lost frame), and it says no peer changed.
#[tokio::test(start_paused = true)]
async fn a_reload_without_changes_keeps_the_sessions() {
    let net = Net::new(Opts::sessions());
    let (a, b) = (net.start(1), net.start(2));
    flows(&a, &b, (1, 2), 0..3, Duration::from_millis(200)).await;
    let before = a.status().await;
    let key_id = before["peers"][0]["session"]["key_id"].clone();
    for _ in 0..3 {
        assert_eq!(a.reload(net.config(1)).await, Ok(0));
        assert_eq!(b.reload(net.config(2)).await, Ok(0));
    }
    // Frames keep flowing while reloads land.
    let mut got = Vec::new();
    for i in 10..60u32 {
        a.tap.inject(&frame(1, 2, i, 200));
        if i % 10 == 0 {
            assert_eq!(a.reload(net.config(1)).await, Ok(0));
        }
        settle(Duration::from_millis(5)).await;
        got.extend(ids(&b.tap.take()));
    }
    assert_eq!(got, (10..60).collect::<Vec<_>>());
    let after = a.status().await;
    assert_eq!(after["peers"][0]["session"]["key_id"], key_id, "{after}");
    for k in ["session.sessions", "session.initiated", "tx_frames"] {
        let path = format!("peer:vm2.{k}");
        assert!(counter(&after, &path) >= counter(&before, &path), "{k}");
    }
    assert_eq!(counter(&after, "peer:vm2.session.sessions"), 1);
    a.stop().await;
    b.stop().await;
}

/// A new pair key on both sides: the peer's frames flow under it at once; a third peer added
/// by a reload is reachable; a peer removed is no route.
#[tokio::test(start_paused = true)]
async fn a_reload_changes_keys_adds_and_removes_peers() {
    let net = Net::new(Opts {
        hosts: 3,
        ..Opts::default()
    });
    // vm1 starts without vm3.
    let without_vm3 = |n: u8| {
        let text = net.config_text(n);
        let cut = text
            .find("\n[[peer]]\nname = \"vm3\"")
            .expect("vm3's section");
        let rest = &text[cut + 1..];
        let end = rest[1..].find("\n[").map_or(rest.len(), |e| e + 1);
        format!("{}{}", &text[..cut + 1], &rest[end..])
    };
    let a = net.start_with(1, &net.parse(1, &without_vm3(1)));
    let (b, c) = (net.start(2), net.start(3));
    flows(&a, &b, (1, 2), 0..3, Duration::from_millis(10)).await;
    assert!(
        exchange(&a, &c, (1, 3), 0..3, Duration::from_millis(10))
            .await
            .is_empty()
    );
    let s = a.status().await;
    assert_eq!(counter(&s, "drops.no_route"), 3, "{s}");
    // Add vm3.
    assert_eq!(a.reload(net.config(1)).await, Ok(1));
    flows(&a, &c, (1, 3), 10..13, Duration::from_millis(10)).await;
    flows(&c, &a, (3, 1), 20..23, Duration::from_millis(10)).await;
    // vm2 still fine (unchanged peer, untouched).
    flows(&a, &b, (1, 2), 30..33, Duration::from_millis(10)).await;
    // A new key for vm1-vm2 on both sides.
    let fresh = std::process::Command::new(env!("CARGO_BIN_EXE_psp-gateway"))
        .args(["keygen", "--suite", "aes128-gcm"])
        .output()
        .expect("keygen");
    std::fs::write(net.dir.join("vm1-vm2.key"), &fresh.stdout).expect("write key");
    assert_eq!(a.reload(net.config(1)).await, Ok(1));
    assert_eq!(b.reload(net.config(2)).await, Ok(1));
    flows(&a, &b, (1, 2), 40..43, Duration::from_millis(10)).await;
    flows(&b, &a, (2, 1), 50..53, Duration::from_millis(10)).await;
    // Remove vm3 again.
    assert_eq!(a.reload(net.parse(1, &without_vm3(1))).await, Ok(0));
    assert!(
        exchange(&a, &c, (1, 3), 60..63, Duration::from_millis(10))
            .await
            .is_empty()
    );
    for g in [a, b, c] {
        g.stop().await;
    }
}

/// A reload that removes every peer: nothing is sealed for them any more (no route), and a
/// reload that puts them back brings the traffic back.
#[tokio::test(start_paused = true)]
async fn a_reload_without_peers_stops_their_traffic() {
    let net = Net::new(Opts::default());
    let (a, b) = (net.start(1), net.start(2));
    flows(&a, &b, (1, 2), 0..3, Duration::from_millis(10)).await;
    let mut cfg = net.config(1);
    cfg.peers.clear();
    assert_eq!(a.reload(cfg).await, Ok(0));
    assert!(
        exchange(&a, &b, (1, 2), 10..13, Duration::from_millis(10))
            .await
            .is_empty()
    );
    assert_eq!(counter(&a.status().await, "drops.no_route"), 3);
    assert_eq!(a.reload(net.config(1)).await, Ok(1));
    flows(&a, &b, (1, 2), 20..23, Duration::from_millis(10)).await;
    a.stop().await;
    b.stop().await;
}

/// A reload that changes a peer's settings but not its keys keeps what they protect: a frame
/// captured before the reload is still a replay after it, and a session peer keeps its
/// session (its key id) instead of handshaking again.
#[tokio::test(start_paused = true)]
async fn a_changed_peer_keeps_its_windows_and_sessions() {
    for session in [false, true] {
        let net = Net::new(Opts {
            session,
            ..Opts::default()
        });
        let (a, b) = (net.start(1), net.start(2));
        let _ = net.capture(0);
        flows(&b, &a, (2, 1), 0..3, Duration::from_millis(200)).await;
        let old: Vec<Vec<u8>> = net
            .capture(0)
            .into_iter()
            .filter(|f| f[..6] == crate::harness::mac(1) && f[6..12] == crate::harness::mac(2))
            .collect();
        let before = a.status().await;
        // vm2 gets a second MAC in vm1's config: the peer changed, its keys did not.
        let text = net.config_text(1).replace(
            "mac = \"02:50:53:00:00:02\"",
            "macs = [\"02:50:53:00:00:02\", \"02:50:53:00:00:12\"]",
        );
        assert_eq!(a.reload(net.parse(1, &text)).await, Ok(1));
        let last = old.last().expect("a frame vm2 -> vm1").clone();
        net.segs[0].inject(&last);
        settle(Duration::from_millis(20)).await;
        let after = a.status().await;
        assert_eq!(
            counter(&after, "peer:vm2.drops.replay") - counter(&before, "peer:vm2.drops.replay"),
            1,
            "session {session}: {after}"
        );
        if session {
            assert_eq!(
                after["peers"][0]["session"]["key_id"], before["peers"][0]["session"]["key_id"],
                "{after}"
            );
        }
        flows(&b, &a, (2, 1), 10..13, Duration::from_millis(50)).await;
        a.stop().await;
        b.stop().await;
    }
}

/// A peer pinned on first use since the start is unchanged for a reload of the same file (the
/// pin read back from `known_peers` is the one learnt): its session stays.
#[tokio::test(start_paused = true)]
async fn a_pin_learnt_since_the_start_is_no_change() {
    let net = Net::new(Opts {
        identity: true,
        tofu: true,
        ..Opts::sessions()
    });
    let (a, b) = (net.start(1), net.start(2));
    flows(&a, &b, (1, 2), 0..3, Duration::from_millis(200)).await;
    let before = a.status().await;
    assert!(
        before["peers"][0]["session"]["identity"].is_string(),
        "{before}"
    );
    assert_eq!(a.reload(net.config(1)).await, Ok(0));
    let after = a.status().await;
    assert_eq!(
        after["peers"][0]["session"]["key_id"], before["peers"][0]["session"]["key_id"],
        "{after}"
    );
    a.stop().await;
    b.stop().await;
}
