//! Session policy at its boundaries, driven at the exact instants `poll_timeout` gives: the
//! backoff after a failure, the normalized stream's timer, what a frame teaches about the
//! peer's address, settings refused up front (found missing by cargo-mutants).

use alloc::vec;
use alloc::vec::Vec;

use super::*;

/// Every event of `h` now; reservations granted as the gateway would.
fn events(h: &mut Host) -> Vec<HostEvent> {
    let mut all = Vec::new();
    while let Some(e) = h.poll_event() {
        if let HostEvent::Reserve { key, next, .. } = e {
            h.handle_reserved(
                key,
                Claim {
                    from: next.unwrap_or(Seq(1000)),
                    limit: Seq(1 << 20),
                },
            );
        }
        all.push(e);
    }
    all
}

fn tap(h: &mut Host, now: Instant, frame: &[u8], rng: &mut TestRng) -> TapResult {
    let mut out = vec![0u8; 2048];
    let mut jobs = [TapJob::new(frame, &mut out)];
    h.handle_tap(now, &mut jobs, rng);
    jobs[0].result
}

/// A handshake that fails (here at once: `require` with one path) holds further ones off for
/// 1 s, 2 s, 4 s ... up to 32 s, each within ±12.5 % and not always the same; the frames
/// that waited are dropped and counted; when the hold-off ends, the frame that waited meanwhile
/// starts the next handshake at that very instant.
#[test]
fn failures_back_off_exponentially_with_jitter() {
    let mut h = host(
        1,
        Opts {
            paths: 1,
            ..Opts::default()
        },
    );
    let mut rng = TestRng(11);
    let mut now = Instant::from_secs(10);
    let _ = events(&mut h);
    let _ = tap(&mut h, now, &ping(1, 0), &mut rng);
    let started = |ev: &[HostEvent]| {
        ev.iter()
            .any(|e| matches!(e, HostEvent::HandshakeStarted { .. }))
    };
    let mut ev = events(&mut h);
    let mut ratios = Vec::new();
    for k in 0..8u32 {
        // The handshake started (at once, or at the end of the last hold-off) has failed.
        assert!(
            ev.iter()
                .any(|e| matches!(e, HostEvent::HandshakeFailed { .. })),
            "failure {k}: {ev:?}"
        );
        assert_eq!(
            h.peer_counters(PeerId(0)).unwrap().no_session,
            u64::from(k) + 1
        );
        let failed_at = now;
        now += Duration::from_millis(1);
        assert_eq!(tap(&mut h, now, &ping(1, 1), &mut rng), TapResult::Queued);
        assert!(!started(&events(&mut h)));
        // Every deadline until the next handshake starts (the host's own timers come between).
        for _ in 0..20 {
            now = h.poll_timeout().unwrap().max(now);
            h.handle_timeout(now, &mut rng);
            ev = events(&mut h);
            if started(&ev) {
                break;
            }
        }
        let base = (1_000_000u64 << k.min(5)).min(32_000_000);
        let wait = now.saturating_since(failed_at).total_micros();
        assert!(
            wait >= base - base / 8 && wait <= base + base / 8,
            "failure {k}: waited {wait} µs for a base of {base}"
        );
        ratios.push(wait * 1000 / base);
        assert!(
            started(&ev),
            "not started at the end of hold-off {k}: {ev:?}"
        );
    }
    assert!(
        ratios.iter().any(|r| *r != ratios[0]),
        "the same jitter every time: {ratios:?}"
    );
}

/// A normalized peer's timers always lie ahead once handled: the stream's next frame is
/// prepared at its slot less the lead, never "now" again.
#[test]
fn a_normalized_peers_next_deadline_is_ahead() {
    let mut n = Net::new(Opts {
        normalize: true,
        ..Opts::default()
    });
    up(&mut n);
    for _ in 0..50 {
        let t = n.hosts[0].poll_timeout().unwrap();
        let now = t.max(n.now);
        n.now = now;
        n.hosts[0].handle_timeout(now, &mut n.rng);
        n.drain(0);
        n.wire.clear();
        assert!(
            n.hosts[0].poll_timeout().unwrap() > now,
            "a deadline at or before {now:?} right after it was handled"
        );
    }
}

/// Frames into a normalized stream are counted once each.
#[test]
fn frames_into_a_stream_are_counted() {
    let mut n = Net::new(Opts {
        normalize: true,
        ..Opts::default()
    });
    up(&mut n);
    let before = n.counters(0).tx_frames;
    for s in 0..3 {
        assert_eq!(n.send(0, &ping(1, s)), TapResult::Queued);
    }
    assert_eq!(n.counters(0).tx_frames, before + 3);
}

/// A session peer without a configured address learns it from the first frame that names it:
/// an IPv4 or IPv6 packet's destination, or an ARP request's target.
#[test]
fn the_peers_address_comes_from_ipv4_or_arp() {
    let arp = {
        let mut f = MAC_B.to_vec();
        f.extend_from_slice(&MAC_A);
        f.extend_from_slice(&[0x08, 0x06, 0, 1, 8, 0, 6, 4, 0, 1]);
        f.extend_from_slice(&MAC_A);
        f.extend_from_slice(&[10, 77, 0, 1]);
        f.extend_from_slice(&[0; 6]);
        f.extend_from_slice(&[10, 77, 0, 2]);
        f
    };
    let ipv6 = {
        let mut f = MAC_B.to_vec();
        f.extend_from_slice(&MAC_A);
        f.extend_from_slice(&[0x86, 0xdd, 0x60, 0, 0, 0, 0, 8, 17, 64]);
        f.extend_from_slice(&[0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        f.extend_from_slice(&[0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
        f.extend_from_slice(&[0; 8]);
        f
    };
    for first in [ping(1, 0), arp, ipv6] {
        let mut h = host(1, Opts::default());
        let mut specs: Vec<PeerSpec> = h.peers().map(|(_, s)| s.clone()).collect();
        if let Keying::Session { address, .. } = &mut specs[0].keying {
            *address = None;
        }
        let now = Instant::from_secs(10);
        h.reconfigure(now, group_spec(), specs).unwrap();
        let mut rng = TestRng(3);
        let _ = events(&mut h);
        let _ = tap(&mut h, now, &first, &mut rng);
        let ev = events(&mut h);
        assert!(
            ev.iter()
                .any(|e| matches!(e, HostEvent::HandshakeStarted { .. })),
            "ethertype {:02x?}: {ev:?}",
            &first[12..14]
        );
    }
}

/// Normalization settings the stream cannot run with are refused when the host is made, named
/// by peer, not when the first session comes.
#[test]
fn unusable_stream_settings_are_refused_up_front() {
    let mut h = host(
        1,
        Opts {
            normalize: true,
            ..Opts::default()
        },
    );
    let mut specs: Vec<PeerSpec> = h.peers().map(|(_, s)| s.clone()).collect();
    if let Some(norm) = specs[0].normalize.as_mut() {
        norm.cfg.s_goal = crate::normalize::Rate::from_kbps(1);
        norm.cfg.s_min = crate::normalize::Rate::from_kbps(2);
    }
    let e = h
        .reconfigure(Instant::from_secs(1), group_spec(), specs)
        .unwrap_err();
    assert_eq!(e.peer, "vm2");
}

/// Each side counts what it sent and received, frames and bytes, on a session and through a
/// normalized stream (where sub-protocol messages are counted apart).
#[test]
fn frames_and_bytes_are_counted_both_ways() {
    for normalize in [false, true] {
        let mut n = Net::new(Opts {
            normalize,
            ..Opts::default()
        });
        up(&mut n);
        n.advance(500);
        let (tx0, rx1) = (n.counters(0).clone(), n.counters(1).clone());
        for s in 0..4 {
            let _ = n.send(0, &ping(1, s));
        }
        n.settle();
        n.advance(500);
        let len = ping(1, 0).len() as u64;
        let (tx, rx) = (n.counters(0), n.counters(1));
        assert_eq!(
            (tx.tx_frames - tx0.tx_frames, tx.tx_bytes - tx0.tx_bytes),
            (4, 4 * len),
            "normalize {normalize}"
        );
        assert_eq!(
            (rx.rx_frames - rx1.rx_frames, rx.rx_bytes - rx1.rx_bytes),
            (4, 4 * len),
            "normalize {normalize}"
        );
        if normalize {
            n.advance(130_000);
            assert!(
                n.counters(1).rx_sub > rx1.rx_sub,
                "the rekey's messages in the stream"
            );
        }
    }
}

/// With a rekey age beyond the lifetime, the keys wearing out (expiry near) start the rekey:
/// the session never goes down while traffic flows.
#[test]
fn keys_that_wear_out_are_replaced_before_they_expire() {
    let mut n = Net::new(Opts {
        rekey_after_s: 1_000_000,
        lifetime_s: 120,
        ..Opts::default()
    });
    up(&mut n);
    let rekeys = n.counters(0).rekeys + n.counters(1).rekeys;
    for s in 0..300u16 {
        let _ = n.send(0, &ping(1, s));
        n.advance(1_000);
        assert!(n.status(0).up && n.status(1).up, "down after {s} s");
    }
    assert!(n.counters(0).rekeys + n.counters(1).rekeys >= rekeys + 2);
}
