//! What `status` tells the administrator: the unknown sources by MAC, hints that are true of
//! the counters, and the group row's frames and bytes.

use core::time::Duration;

use crate::harness::{Net, Opts, arp_request, counter, frame, settle};

/// A peer whose `mac =` is wrong here: `unknown_peer` counts its frames, and `status` names
/// the MAC they came from (the JSON's `unknown_sources`, the table, and the peer's hint).
#[tokio::test(start_paused = true)]
async fn status_names_the_unknown_source_macs() {
    let net = Net::new(Opts::default());
    let wrong_mac = net
        .config_text(1)
        .replace("mac = \"02:50:53:00:00:02\"", "mac = \"02:50:53:00:00:09\"");
    let a = net.start_with(1, &net.parse(1, &wrong_mac));
    let b = net.start(2);
    for i in 0..12u32 {
        b.tap.inject(&frame(2, 1, i, 100));
        settle(Duration::from_millis(50)).await;
    }
    settle(Duration::from_secs(2)).await;
    let s = a.status().await;
    assert_eq!(counter(&s, "drops.unknown_peer"), 12, "{s}");
    let src = &s["unknown_sources"][0];
    assert_eq!(src["mac"], "02:50:53:00:00:02", "{s}");
    assert_eq!(src["frames"], 12, "{s}");
    assert_eq!(src["last_s_ago"], 2, "{s}");
    let table = a.status_table().await;
    assert!(
        table.contains(
            "unknown sources (unknown_peer, newest first): 02:50:53:00:00:02 x12 (2 s ago)"
        ),
        "{table}"
    );
    // vm1 sent nothing to vm2 (it has the wrong MAC for it), so no hint about it; once vm1
    // sends, the hint for the silent peer names the MAC that is probably its own.
    a.tap.inject(&frame(1, 9, 0, 100));
    settle(Duration::from_millis(50)).await;
    let table = a.status_table().await;
    let hint = table
        .lines()
        .find(|l| l.starts_with("hint vm2:"))
        .unwrap_or_else(|| panic!("no hint for vm2 in\n{table}"));
    assert!(
        hint.contains(
            "12 frame(s) came from MACs no [[peer]] here lists (unknown_peer: \
                       02:50:53:00:00:02)"
        ),
        "{hint}"
    );
    a.stop().await;
    b.stop().await;
}

/// A session peer that never started: before anything is sent the hint says nothing was sent;
/// after 70 ARP broadcasts under the group key it says those went out and it never answered,
/// not "nothing was sent".
#[tokio::test(start_paused = true)]
async fn the_hint_for_a_silent_peer_counts_the_broadcasts_it_was_sent() {
    let net = Net::new(Opts::sessions());
    let a = net.start(1);
    settle(Duration::from_millis(100)).await;
    let hint = |table: String| {
        table
            .lines()
            .find(|l| l.starts_with("hint vm2:"))
            .map(ToOwned::to_owned)
            .unwrap_or_else(|| panic!("no hint for vm2 in\n{table}"))
    };
    let before = hint(a.status_table().await);
    assert!(
        before.contains("no session yet: nothing was sent to it so far"),
        "{before}"
    );
    for _ in 0..70 {
        a.tap.inject(&arp_request(1, 2));
        settle(Duration::from_millis(100)).await;
    }
    let s = a.status().await;
    assert_eq!(counter(&s, "group.tx_frames"), 70, "{s}");
    assert_eq!(counter(&s, "peer:vm2.tx_frames"), 0, "{s}");
    let after = hint(a.status_table().await);
    assert!(!after.contains("nothing was sent"), "{after}");
    assert!(
        after.contains(
            "no session yet, and nothing heard from it: 70 frame(s) went out under the group \
             key (broadcasts such as ARP reach every peer) and it never answered"
        ),
        "{after}"
    );
    a.stop().await;
}

/// The group row's TX-FRAMES counts every frame sealed under the group key, the handshake
/// messages to a peer without a session included; TX-BYTES only the protected (inner) frames'
/// bytes. Requests to a peer that does not answer raise the first and not the second, and the
/// table says why.
#[tokio::test(start_paused = true)]
async fn the_group_row_says_that_handshake_messages_have_no_inner_bytes() {
    let net = Net::new(Opts::sessions());
    let a = net.start(1);
    a.tap.inject(&arp_request(1, 2));
    settle(Duration::from_millis(100)).await;
    let s = a.status().await;
    let (frames, bytes) = (
        counter(&s, "group.tx_frames"),
        counter(&s, "group.tx_bytes"),
    );
    assert_eq!((frames, bytes), (1, 60), "{s}");
    // A unicast frame to vm2 starts a handshake; vm2 is not running: Requests go out again.
    a.tap.inject(&frame(1, 2, 0, 100));
    settle(Duration::from_secs(10)).await;
    let s = a.status().await;
    assert!(counter(&s, "group.tx_frames") > frames + 1, "{s}");
    assert_eq!(counter(&s, "group.tx_bytes"), bytes, "{s}");
    let table = a.status_table().await;
    assert!(
        table.contains(
            "(group) TX-FRAMES counts the handshake and membership messages sealed under the \
             group key too; TX-BYTES only the inner bytes of broadcast and multicast frames"
        ),
        "{table}"
    );
    a.stop().await;
}
