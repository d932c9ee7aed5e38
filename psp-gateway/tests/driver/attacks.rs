//! Hostile frames, as a host on the segment with no key and as an insider with a key: every
//! one dropped under its exact reason in the status, the bystander unmoved, good traffic
//! unaffected. Together with `drops.rs`, every drop counter of the status table is reached.

use core::time::Duration;

use psp_core::crypto::{SuiteId, SuiteKey};
use psp_core::protect::{Sealer, SealerConfig};
use psp_core::time::Instant as CoreInstant;
use psp_core::wire::Seq;

use crate::harness::{Net, Opts, counter, drop_delta, exchange, flows, frame, mac, settle, want};

const SUITE: SuiteId = SuiteId::BfCbcHmacSha1;
/// Clear part of a PSP frame without security number and timestamp; the suite's ICV.
const CLEAR_LEN: usize = 19;
const ICV_LEN: usize = 20;

fn flip(f: &[u8], byte: usize, bit: u8) -> Vec<u8> {
    let mut f = f.to_vec();
    f[byte] ^= 1 << bit;
    f
}

fn seq_of(f: &[u8]) -> u32 {
    u32::from_be_bytes(f[15..19].try_into().expect("4 bytes"))
}

/// The reason of each single-bit flip of a fresh bf-cbc-hmac-sha1 frame of `len` bytes.
fn flip_table(len: usize) -> Vec<(usize, u8, &'static str)> {
    vec![
        (14, 7, "bad-version"),
        (14, 2, "reserved-flag"),
        (14, 0, "wrong-suite"),
        (14, 4, "security-number"),
        (14, 3, "timestamp"),
        (14, 1, "unsupported"),
        (15, 7, "bad-icv"),
        (CLEAR_LEN, 0, "bad-icv"),
        (len / 2, 3, "bad-icv"),
        (len - ICV_LEN - 1, 7, "bad-icv"),
        (len - ICV_LEN, 0, "bad-icv"),
        (len - 1, 7, "bad-icv"),
    ]
}

/// Frames vm2 sealed for vm1 that vm1 never received: vm1 is stopped while vm2 sends them,
/// and they are taken from the segment.
async fn fresh_frames(net: &Net, vm2: &psp_gateway::testing::MemGateway, n: u32) -> Vec<Vec<u8>> {
    let _ = net.capture(0);
    for id in 0..n {
        vm2.tap.inject(&frame(2, 1, 5000 + id, 200));
    }
    settle(Duration::from_millis(20)).await;
    net.capture(0)
        .into_iter()
        .filter(|f| f[..6] == mac(1) && f[6..12] == mac(2) && f.len() > 150)
        .collect()
}

/// Injects `frames` from a host with no key and checks vm1's drop counters moved by exactly
/// `wants` and vm2's (a bystander: it sees every frame on the hub) not at all.
async fn inject_expect(
    net: &Net,
    vm1: &psp_gateway::testing::MemGateway,
    vm2: &psp_gateway::testing::MemGateway,
    what: &str,
    frames: &[Vec<u8>],
    wants: &[(&str, i64)],
) {
    inject_expect_with(net, vm1, vm2, what, frames, wants, &[]).await;
}

/// [`inject_expect`], where vm2 may also count `bystander` (frames without a destination a
/// host could check: no header, longer than any slot).
async fn inject_expect_with(
    net: &Net,
    vm1: &psp_gateway::testing::MemGateway,
    vm2: &psp_gateway::testing::MemGateway,
    what: &str,
    frames: &[Vec<u8>],
    wants: &[(&str, i64)],
    bystander: &[&str],
) {
    let (b1, b2) = (vm1.status().await, vm2.status().await);
    for f in frames {
        net.segs[0].inject(f);
    }
    settle(Duration::from_millis(20)).await;
    let (a1, a2) = (vm1.status().await, vm2.status().await);
    assert_eq!(drop_delta(&b1, &a1), want(wants), "{what}: vm1");
    let moved = drop_delta(&b2, &a2);
    assert!(
        moved
            .keys()
            .all(|k| k == "ignored.not_for_us" || bystander.contains(&k.as_str())),
        "{what}: vm2 (a bystander) counted {moved:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_keyless_host_gets_every_opener_drop_reason_and_nothing_else() {
    let net = Net::new(Opts {
        suite: "bf-cbc-hmac-sha1",
        ..Opts::default()
    });
    let vm2 = net.start(2);
    let fresh = {
        let vm1 = net.start(1);
        flows(&vm2, &vm1, (2, 1), 0..3, Duration::from_millis(10)).await;
        vm1.stop().await;
        fresh_frames(&net, &vm2, 4).await
    };
    assert_eq!(fresh.len(), 4, "vm2 sealed four frames for vm1");
    let vm1 = net.start(1);
    let f = fresh[0].clone();
    let seq = seq_of(&f);

    // Single-bit flips.
    let mut frames = vec![flip(&f, 11, 0)];
    let mut wants = vec![("drops.unknown_peer", 1)];
    let reasons: Vec<String> = flip_table(f.len())
        .iter()
        .map(|(_, _, r)| format!("peers.vm2.drops.{r}"))
        .collect();
    for ((byte, bit, _), r) in flip_table(f.len()).into_iter().zip(&reasons) {
        frames.push(flip(&f, byte, bit));
        wants.push((r.as_str(), 1));
    }
    frames.push(flip(&f, 5, 0));
    wants.push(("ignored.not_for_us", 1));
    inject_expect(&net, &vm1, &vm2, "single-bit flips", &frames, &wants).await;

    // Truncated, oversized, garbage, another key, unknown senders, a frame without a header.
    let ahead = seq + 1_000_000;
    let garbage = |len: usize, vf: u8, seed: u8| {
        let mut g = f[..14].to_vec();
        g.push(vf);
        g.extend_from_slice(&ahead.to_be_bytes());
        g.extend((0..len - CLEAR_LEN).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)));
        g
    };
    let mut forger = Sealer::new(
        SuiteKey::new(SUITE, &[0x5a; 32]).expect("key"),
        Seq(ahead + 1),
        SealerConfig::default(),
    )
    .expect("sealer");
    let mut forged = |src: [u8; 6]| {
        let inner = frame(2, 1, 9, 100);
        let mut inner = inner;
        inner[6..12].copy_from_slice(&src);
        let mut out = vec![0u8; 256];
        let n = forger
            .seal(CoreInstant::from_millis(0), &inner, &mut out)
            .expect("seal")
            .len();
        out.truncate(n);
        out
    };
    let mut not_psp = f.clone();
    not_psp[12..14].copy_from_slice(&[0x08, 0x00]);
    let frames = vec![
        f[..30].to_vec(),
        f[..CLEAR_LEN].to_vec(),
        garbage(1518, 0x01, 4),
        garbage(CLEAR_LEN + 64 + ICV_LEN, 0x01, 1),
        garbage(100, 0x01, 2),
        garbage(100, 0xe1, 3),
        forged(mac(2)),
        forged([0x02, 0x50, 0x53, 0, 0, 0x09]),
        forged(mac(1)),
        f[..10].to_vec(),
        not_psp,
        vec![0u8; 70_000],
    ];
    let wants = [
        ("peers.vm2.drops.truncated", 2),
        ("peers.vm2.drops.oversized", 1),
        ("peers.vm2.drops.bad-icv", 2),
        ("peers.vm2.drops.wrong-suite", 1),
        ("peers.vm2.drops.bad-version", 1),
        ("drops.unknown_peer", 2),
        ("drops.malformed", 1),
        // Over UDP any datagram arrives; a raw socket bound to 0x1982 never sees this one.
        ("peers.vm2.drops.malformed", 1),
        // Longer than any slot: dropped by the uplink before the host.
        ("drops.io_dropped", 1),
    ];
    inject_expect_with(
        &net,
        &vm1,
        &vm2,
        "garbage and forgeries",
        &frames,
        &wants,
        &["drops.malformed", "drops.io_dropped"],
    )
    .await;

    // The fresh frame itself is fine: it opens; again, it is a replay; far behind, too old.
    let rx = counter(&vm1.status().await, "peer:vm2.rx_frames");
    inject_expect(&net, &vm1, &vm2, "the fresh frame", &fresh[1..2], &[]).await;
    assert_eq!(counter(&vm1.status().await, "peer:vm2.rx_frames"), rx + 1);
    inject_expect(
        &net,
        &vm1,
        &vm2,
        "replays",
        &[fresh[1].clone(), fresh[1].clone()],
        &[("peers.vm2.drops.replay", 2)],
    )
    .await;
    // Good traffic both ways afterwards; vm2's own frames still open (window not pinned).
    flows(&vm1, &vm2, (1, 2), 10..20, Duration::from_millis(10)).await;
    flows(&vm2, &vm1, (2, 1), 20..30, Duration::from_millis(10)).await;
    vm1.stop().await;
    vm2.stop().await;
}

/// Sequence numbers a long way behind the window are `too-old`; with the thesis' security
/// number and timestamps configured, frames without them are refused.
#[tokio::test(start_paused = true)]
async fn frames_far_behind_the_window_are_too_old() {
    let net = Net::new(Opts {
        suite: "bf-cbc-hmac-sha1",
        ..Opts::default()
    });
    let vm2 = net.start(2);
    let vm1 = net.start(1);
    let old = fresh_frames(&net, &vm2, 1).await;
    assert_eq!(old.len(), 1);
    let key = net.key("vm1-vm2");
    let mut insider = Sealer::new(
        SuiteKey::new(SUITE, &key).expect("key"),
        Seq(seq_of(&old[0]) + 100_000),
        SealerConfig::default(),
    )
    .expect("sealer");
    let mut out = vec![0u8; 512];
    let n = insider
        .seal(CoreInstant::from_millis(0), &frame(2, 1, 77, 200), &mut out)
        .expect("seal")
        .len();
    out.truncate(n);
    // An insider with the pair key moves vm1's window far ahead (it is authentic)...
    inject_expect(&net, &vm1, &vm2, "ahead", &[out], &[]).await;
    // ... and vm2's own next frames are now far behind it: what an insider with a static pair
    // key can do (sessions rekey out of it; docs/SESSIONS.md).
    let got = exchange(&vm2, &vm1, (2, 1), 0..3, Duration::from_millis(10)).await;
    assert!(got.is_empty(), "{got:?}");
    let s = vm1.status().await;
    assert_eq!(counter(&s, "peer:vm2.drops.too-old"), 3, "{s}");
    vm1.stop().await;
    vm2.stop().await;
}

/// A Request "from vm2" made by an insider with the group key (and its own ephemeral key).
fn forged_request(net: &Net, signed: Option<[u8; 32]>, seq: u32) -> Vec<u8> {
    use psp_core::handshake::{self, Handshake, Peer, Tai64n};
    use psp_core::wire::Protocol;
    let mut cfg = handshake::Config::new(mac(2), "10.0.0.2".parse().expect("ip"), 24);
    cfg.paths = 1;
    let mut hs = Handshake::initiate(
        CoreInstant::from_millis(0),
        cfg,
        Peer {
            mac: mac(1),
            addr: "10.0.0.1".parse().expect("ip"),
            pinned_x25519: None,
        },
        Tai64n::from_unix(1_900_000_000, 0),
        &mut psp_gateway::testing::TestRng(99),
    );
    let mut msg = vec![0u8; 512];
    let t = hs
        .poll_transmit(CoreInstant::from_millis(0), &mut msg)
        .expect("a Request");
    let key = SuiteKey::new(SuiteId::Aes128Gcm, &net.key("group")).expect("group key");
    let mut sealer = Sealer::new(key, Seq(seq), SealerConfig::new()).expect("sealer");
    if let Some(seed) = signed {
        sealer = sealer.with_signer(psp_core::crypto::SigningKey::from_seed(&seed).expect("key"));
    }
    let mut out = vec![0u8; 2048];
    sealer
        .seal_sub(
            CoreInstant::from_millis(0),
            mac(1),
            mac(2),
            Protocol::SessionEstablishment,
            &msg[..t.len],
            &mut out,
        )
        .expect("seal")
        .to_vec()
}

/// What the Request's freshness does not stop (docs/SESSIONS.md, "Freshness"): without
/// identities, anybody with the group key mints fresh Requests "from vm2", and vm1 answers;
/// with identities pinned, the same forgery fails its signature and gets no answer.
#[tokio::test(start_paused = true)]
async fn an_insider_mints_fresh_requests_unless_identities_are_pinned() {
    for identity in [false, true] {
        let net = Net::new(Opts {
            identity,
            ..Opts::sessions()
        });
        let (a, b) = (net.start(1), net.start(2));
        flows(&a, &b, (1, 2), 0..3, Duration::from_millis(200)).await;
        settle(Duration::from_secs(2)).await;
        let _ = net.capture(0);
        let before = a.status().await;
        net.segs[0].inject(&forged_request(
            &net,
            identity.then_some([7; 32]),
            u32::MAX - 10,
        ));
        settle(Duration::from_millis(50)).await;
        // vm1's answers to "vm2": group-key frames from vm1 to vm2 (handshake messages).
        let answered = net
            .capture(0)
            .iter()
            .filter(|f| f[..6] == mac(2) && f[6..12] == mac(1))
            .count();
        let s = a.status().await;
        let sig = counter(&s, "peer:vm2.drops.bad-signature")
            - counter(&before, "peer:vm2.drops.bad-signature");
        if identity {
            assert_eq!(
                answered, 0,
                "a forged Request answered despite identities: {s}"
            );
            assert_eq!(sig, 1, "{s}");
        } else {
            assert!(
                answered > 0,
                "without identities the insider's Request is answered: {s}"
            );
        }
        a.stop().await;
        b.stop().await;
    }
}
