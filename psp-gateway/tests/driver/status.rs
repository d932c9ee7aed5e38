//! What `status` tells the administrator: the unknown sources by MAC.

use core::time::Duration;

use crate::harness::{Net, Opts, counter, frame, settle};

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
