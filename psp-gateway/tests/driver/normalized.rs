//! Normalized peers: fixed-size paced frames, with static keys and with sessions.

use core::time::Duration;

use crate::harness::{Net, Opts, counter, exchange};

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
        crate::harness::settle(Duration::from_millis(100)).await;
    }
    panic!("not within 10 s: {}", g.status().await);
}
