//! Drops that are not about a received frame's cryptography: the protected side's own frames,
//! the I/O refusing, sequence numbers not reserved, path 2, and what only an insider with a
//! key can send (bad signatures, bad padding, group-key unicasts, unknown session keys,
//! handshake floods, replayed Requests, bad inner frames in a normalized stream). With
//! `attacks.rs`, every counter of the status table's drops is reached here.

use core::time::Duration;

use psp_core::crypto::{SigningKey, SuiteId, SuiteKey};
use psp_core::protect::{Sealer, SealerConfig};
use psp_core::time::Instant as CoreInstant;
use psp_core::wire::{Protocol, Seq};
use psp_gateway::testing::{MemGateway, MemOptions};

use crate::harness::{
    Net, Opts, broadcast, counter, drop_delta, exchange, flows, frame, handshake_kinds, ids, mac,
    settle, want,
};

/// Sends `frames` from vm1's protected side and checks vm1's drop counters moved by `wants`.
async fn from_tap(g: &MemGateway, frames: &[Vec<u8>], wants: &[(&str, i64)]) {
    let before = g.status().await;
    for f in frames {
        g.tap.inject(f);
    }
    settle(Duration::from_millis(10)).await;
    assert_eq!(drop_delta(&before, &g.status().await), want(wants));
}

/// Puts `frames` on path `p` and checks `g`'s drop counters moved by `wants`.
async fn on_wire(net: &Net, p: usize, g: &MemGateway, frames: &[Vec<u8>], wants: &[(&str, i64)]) {
    let before = g.status().await;
    for f in frames {
        net.segs[p].inject(f);
    }
    settle(Duration::from_millis(20)).await;
    let after = g.status().await;
    assert_eq!(drop_delta(&before, &after), want(wants), "{after}");
}

/// A frame sealed under `key` as if from vmA to vmB, carrying `proto` and
/// `payload`, with the sealer `cfg` and an optional signing seed.
fn sealed(
    key: SuiteKey,
    seq: u32,
    (from, to): (u8, u8),
    cfg: SealerConfig,
    sign: Option<[u8; 32]>,
    proto: Protocol,
    payload: &[u8],
) -> Vec<u8> {
    let mut s = Sealer::new(key, Seq(seq), cfg).expect("sealer");
    if let Some(seed) = sign {
        s = s.with_signer(SigningKey::from_seed(&seed).expect("seed"));
    }
    let dst = if to == 0 { [0xff; 6] } else { mac(to) };
    let mut out = vec![0u8; 4096];
    let n = match proto {
        Protocol::EtherType(t) => {
            let mut inner = dst.to_vec();
            inner.extend_from_slice(&mac(from));
            inner.extend_from_slice(&t.to_be_bytes());
            inner.extend_from_slice(payload);
            s.seal(CoreInstant::from_millis(0), &inner, &mut out)
                .expect("seal")
                .len()
        }
        _ => s
            .seal_sub(
                CoreInstant::from_millis(0),
                dst,
                mac(from),
                proto,
                payload,
                &mut out,
            )
            .expect("seal")
            .len(),
    };
    out.truncate(n);
    out
}

#[tokio::test(start_paused = true)]
async fn the_protected_side_cannot_send_what_it_should_not() {
    let net = Net::new(Opts::default());
    let a = net.start(1);
    let mut to_nobody = frame(1, 2, 1, 100);
    to_nobody[..6].copy_from_slice(&[0x02, 0x50, 0x53, 0, 0, 0x77]);
    let spoofed = frame(9, 2, 2, 100);
    let mut length_frame = frame(1, 2, 3, 100);
    length_frame[12..14].copy_from_slice(&[0x00, 0x40]);
    let giant = frame(1, 2, 4, 1600);
    from_tap(
        &a,
        &[to_nobody, spoofed, length_frame, giant, vec![0u8; 10]],
        &[
            ("drops.no_route", 1),
            ("drops.spoofed_src", 1),
            ("drops.tx_unsupported", 2),
            ("drops.malformed", 1),
        ],
    )
    .await;
    a.stop().await;
}

/// An uplink that refuses to send, a TAP that refuses to take frames: counted, and traffic
/// resumes when they work again.
#[tokio::test(start_paused = true)]
async fn io_refusals_are_counted_and_traffic_resumes() {
    let net = Net::new(Opts::default());
    let (a, b) = (net.start(1), net.start(2));
    net.set_send_fails(1, 0, true);
    from_tap(
        &a,
        &[frame(1, 2, 1, 100), frame(1, 2, 2, 100)],
        &[("drops.tx_error", 2)],
    )
    .await;
    net.set_send_fails(1, 0, false);
    b.tap.set_write_fails(true);
    let s = b.status().await;
    assert!(
        exchange(&a, &b, (1, 2), 10..13, Duration::from_millis(10))
            .await
            .is_empty()
    );
    assert_eq!(
        drop_delta(&s, &b.status().await),
        want(&[("drops.rx_tap_error", 3)])
    );
    b.tap.set_write_fails(false);
    flows(&a, &b, (1, 2), 20..23, Duration::from_millis(10)).await;
    a.stop().await;
    b.stop().await;
}

/// Without a state directory that takes the reservations, nothing is sealed under the static
/// keys (never a number that could repeat after a restart): counted `tx_unreserved`.
#[tokio::test(start_paused = true)]
async fn no_frame_leaves_under_a_static_key_without_a_reservation() {
    let net = Net::new(Opts::default());
    let opts = MemOptions { state_lost: true };
    let a = net.start_opts(1, &net.config(1), &opts);
    let _ = net.capture(0);
    let before = a.status().await;
    a.tap.inject(&frame(1, 2, 1, 100));
    a.tap.inject(&broadcast(1, 2));
    settle(Duration::from_millis(10)).await;
    let s = a.status().await;
    assert_eq!(
        drop_delta(&before, &s),
        want(&[("drops.tx_unreserved", 1)]),
        "{s}"
    );
    assert_eq!(counter(&s, "peer:vm2.tx_unreserved"), 1, "{s}");
    assert!(net.capture(0).is_empty(), "nothing left vm1");
    a.stop().await;
}

/// Path 2 carries handshake messages only: a peer's data there is ignored, garbage dropped.
#[tokio::test(start_paused = true)]
async fn path_two_takes_handshake_messages_only() {
    let net = Net::new(Opts {
        paths: 2,
        ..Opts::sessions()
    });
    let (a, b) = (net.start(1), net.start(2));
    flows(&a, &b, (1, 2), 0..3, Duration::from_millis(200)).await;
    let key = net.key("group");
    let data = sealed(
        gk(&key),
        0xC000_0000,
        (2, 1),
        SealerConfig::new(),
        None,
        Protocol::EtherType(0x0800),
        &frame(2, 1, 5, 100)[14..],
    );
    let mut garbage = data.clone();
    let last = garbage.len() - 1;
    garbage[last] ^= 1;
    on_wire(
        &net,
        1,
        &a,
        &[data, garbage],
        &[("ignored.path2_not_handshake", 1), ("drops.path2", 1)],
    )
    .await;
    a.stop().await;
    b.stop().await;
}

/// What an insider with the group key can try against session peers, and what it gets.
#[tokio::test(start_paused = true)]
async fn an_insider_with_the_group_key_is_counted_not_delivered() {
    let net = Net::new(Opts {
        identity: true,
        ..Opts::sessions()
    });
    let (a, b) = (net.start(1), net.start(2));
    let _ = net.capture(0);
    flows(&a, &b, (1, 2), 0..3, Duration::from_millis(200)).await;
    let requests = handshake_kinds(&net, &net.capture(0), 1, 2);
    assert_eq!(requests.first().map(String::as_str), Some("Request"));
    let key = net.key("group");
    // A broadcast "from vm2", signed by the insider's own key: bad signature.
    let forged = sealed(
        gk(&key),
        0xC000_0000,
        (2, 0),
        SealerConfig::new(),
        Some([9; 32]),
        Protocol::EtherType(0x0806),
        &[0u8; 28],
    );
    on_wire(
        &net,
        0,
        &a,
        &[forged],
        &[("peers.vm2.drops.bad-signature", 1)],
    )
    .await;
    a.stop().await;
    b.stop().await;

    // Without identities, the group-key frames open; the session logic still refuses.
    let net = Net::new(Opts::sessions());
    let (a, b) = (net.start(1), net.start(2));
    let _ = net.capture(0);
    flows(&a, &b, (1, 2), 0..3, Duration::from_millis(200)).await;
    let key = net.key("group");
    let ins = |seq: u32, cfg: SealerConfig, proto: Protocol, payload: &[u8]| {
        sealed(gk(&key), seq, (2, 1), cfg, None, proto, payload)
    };
    // Unicast data under the group key (a session peer's data travels under session keys).
    let unicast = ins(
        0xC000_0000,
        SealerConfig::new(),
        Protocol::EtherType(0x0800),
        &frame(2, 1, 7, 100)[14..],
    );
    // A frame under a session key id vm1 does not have.
    let unknown = ins(
        0xC000_0001,
        SealerConfig::new().with_security_number(Some(
            psp_core::wire::SecurityNumber::new(0x00ab_cdef).expect("sn"),
        )),
        Protocol::EtherType(0x0800),
        &frame(2, 1, 8, 100)[14..],
    );
    on_wire(
        &net,
        0,
        &a,
        &[unicast, unknown],
        &[
            ("peers.vm2.session.group_unicast", 1),
            ("peers.vm2.session.unknown_key", 1),
        ],
    )
    .await;
    // A flood of handshake messages: beyond the budget, dropped unread.
    let flood: Vec<Vec<u8>> = (0..200u32)
        .map(|i| {
            ins(
                0xC100_0000 + i,
                SealerConfig::new(),
                Protocol::SessionEstablishment,
                &[0u8; 40],
            )
        })
        .collect();
    let before = a.status().await;
    for f in &flood {
        net.segs[0].inject(f);
    }
    settle(Duration::from_millis(20)).await;
    let after = a.status().await;
    let limited = counter(&after, "peer:vm2.session.messages_limited")
        - counter(&before, "peer:vm2.session.messages_limited");
    assert!(limited > 100, "{limited} of 200 limited: {after}");
    // The session carried on.
    flows(&a, &b, (1, 2), 10..13, Duration::from_millis(50)).await;
    a.stop().await;
    b.stop().await;
}

/// A replayed Request of an earlier handshake (sealed anew by an insider, same timestamp) is
/// not newer than the ones taken since: counted `stale_requests`, and the session untouched.
#[tokio::test(start_paused = true)]
async fn a_replayed_request_is_stale() {
    use psp_core::protect::{Opener, OpenerConfig};
    let net = Net::new(Opts {
        session_extra: "rekey_after_s = 2\n".into(),
        ..Opts::sessions()
    });
    let (a, b) = (net.start(1), net.start(2));
    let _ = net.capture(0);
    flows(&b, &a, (2, 1), 0..3, Duration::from_millis(200)).await;
    let first = net.capture(0);
    // Two-way traffic for 7 s: rekeys (new Requests) in between.
    for i in 0..70u32 {
        a.tap.inject(&frame(1, 2, i, 100));
        b.tap.inject(&frame(2, 1, i, 100));
        settle(Duration::from_millis(100)).await;
    }
    let s = a.status().await;
    assert!(counter(&s, "peer:vm2.session.rekeys") >= 2, "{s}");
    let key = net.key("group");
    let suite = SuiteId::Aes128Gcm;
    // The Request vm2 sent, opened with the group key and sealed again with a new number.
    let payload = first
        .iter()
        .filter(|f| f[..6] == mac(1) && f[6..12] == mac(2))
        .find_map(|f| {
            let mut o = Opener::new(SuiteKey::new(suite, &key).ok()?, OpenerConfig::new()).ok()?;
            let mut f = f.clone();
            let opened = o.open(CoreInstant::ZERO, &mut f).ok()?;
            let is_request = matches!(
                psp_core::handshake::messages::Repr::parse_bytes(opened.payload()).map(|r| r.body),
                Ok(psp_core::handshake::messages::Body::Request(_))
            );
            (opened.protocol() == Protocol::SessionEstablishment && is_request)
                .then(|| opened.payload().to_vec())
        });
    let payload = payload.expect("vm2's Request");
    let again = sealed(
        gk(&key),
        0xC000_0000,
        (2, 1),
        SealerConfig::new(),
        None,
        Protocol::SessionEstablishment,
        &payload,
    );
    on_wire(
        &net,
        0,
        &a,
        &[again],
        &[("peers.vm2.session.stale_requests", 1)],
    )
    .await;
    flows(&a, &b, (1, 2), 10..13, Duration::from_millis(50)).await;
    a.stop().await;
    b.stop().await;
}

/// A frame whose padding size is impossible (the `none` suite: anyone can write one).
#[tokio::test(start_paused = true)]
async fn impossible_padding_is_bad_padding() {
    let net = Net::new(Opts {
        suite: "none",
        ..Opts::default()
    });
    let (a, b) = (net.start(1), net.start(2));
    flows(&b, &a, (2, 1), 0..3, Duration::from_millis(10)).await;
    let mut f = Vec::new();
    f.extend_from_slice(&mac(1));
    f.extend_from_slice(&mac(2));
    f.extend_from_slice(&[0x19, 0x82, 0x00]);
    // Above every sequence number vm2 can have used: a new static key starts at random in the
    // lower half of the space (0x7f00_0000 was behind that start in about one run of 128).
    f.extend_from_slice(&0xf000_0000u32.to_be_bytes());
    f.extend_from_slice(&[0x08, 0x00, 200]);
    f.extend_from_slice(&[0u8; 60]);
    on_wire(&net, 0, &a, &[f], &[("peers.vm2.drops.bad-padding", 1)]).await;
    a.stop().await;
    b.stop().await;
}

/// Frames for a session peer whose session cannot come up (it is not there) wait in a bounded
/// queue; beyond it they are dropped, counted `no_session`.
#[tokio::test(start_paused = true)]
async fn frames_beyond_the_queue_are_no_session() {
    let net = Net::new(Opts::sessions());
    let a = net.start(1);
    for i in 0..80u32 {
        a.tap.inject(&frame(1, 2, i, 100));
    }
    settle(Duration::from_millis(10)).await;
    let s = a.status().await;
    assert_eq!(counter(&s, "peer:vm2.session.no_session"), 16, "{s}");
    a.stop().await;
}

/// Inner frames in a normalized stream are checked before the TAP (an insider with the pair
/// key made the stream).
#[tokio::test(start_paused = true)]
async fn bad_inner_frames_in_a_normalized_stream_are_dropped() {
    use psp_core::normalize::{self, Endpoint};
    let net = Net::new(Opts {
        extra: "[normalize]\nenabled = true\ns_goal_kbps = 2000\n".into(),
        ..Opts::default()
    });
    let (a, b) = (net.start(1), net.start(2));
    settle(Duration::from_millis(100)).await;
    b.stop().await;
    let good = frame(2, 1, 41, 100);
    let inner = [
        vec![0x5a],
        good[..13].to_vec(),
        frame(2, 0x77, 42, 100),
        frame(3, 1, 43, 100),
        good.clone(),
    ];
    let key = net.key("vm1-vm2");
    let mut sealer = Sealer::new(
        SuiteKey::new(SuiteId::Aes128Gcm, &key).expect("key"),
        Seq(0x7fff_0000),
        SealerConfig::default(),
    )
    .expect("sealer");
    let mut c = normalize::NormConfig::default();
    c.frame_len = 1000;
    c.max_inner_len = 2048;
    c.rx_queue_bytes = 32 * 1024;
    let mut ep = Endpoint::new(CoreInstant::ZERO, c, vec![0; c.storage_len()]).expect("endpoint");
    for f in &inner {
        ep.handle_inner(CoreInstant::ZERO, f).expect("queued");
    }
    let mut frames = Vec::new();
    let mut payload = vec![0u8; 2048];
    for ms in 0..2000 {
        let now = CoreInstant::from_millis(ms);
        while let Some(t) = ep.poll_transmit(now, &mut payload) {
            if t.is_dummy() {
                continue;
            }
            let mut buf = vec![0u8; 2048];
            let n = sealer
                .seal_sub(
                    now,
                    mac(1),
                    mac(2),
                    Protocol::Normalized,
                    t.payload,
                    &mut buf,
                )
                .expect("seal")
                .len();
            buf.truncate(n);
            frames.push(buf);
        }
        if frames.len() >= 2 {
            break;
        }
    }
    let _ = a.tap.take();
    on_wire(
        &net,
        0,
        &a,
        &frames,
        &[
            ("peers.vm2.normalize.rx_short", 2),
            ("peers.vm2.normalize.rx_not_for_us", 1),
            ("peers.vm2.normalize.rx_foreign_src", 1),
        ],
    )
    .await;
    assert_eq!(
        ids(&a.tap.take()),
        [41],
        "the good frame after the bad ones arrived"
    );
    a.stop().await;
}

/// The group key (aes128-gcm, the tests' suite).
fn gk(key: &[u8]) -> SuiteKey {
    SuiteKey::new(SuiteId::Aes128Gcm, key).expect("key")
}
