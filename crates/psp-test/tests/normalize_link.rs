//! Normalization over a simulated link (virtual clock): convergence below a bottleneck, the
//! outer schedule's independence from inner traffic, and intact delivery under loss and
//! reordering.

use psp_core::normalize::{Algorithm, NormConfig, Packing, Rate};
use psp_core::time::{Duration, Instant};
use psp_test::{Bursts, InnerSource, LinkConfig, OnOff, Pair, Periodic, Silent, TxRecord};

const BOTTLENECK_BPS: u64 = 10_000_000;

fn config(algorithm: Algorithm, goal_kbps: u32) -> NormConfig {
    let mut c = NormConfig::default();
    c.algorithm = algorithm;
    c.s_goal = Rate::from_kbps(goal_kbps);
    c
}

fn mean_rate_kbps(pair: &Pair, from: Instant) -> f64 {
    let v: Vec<f64> = pair
        .samples
        .iter()
        .filter(|s| s.at >= from)
        .map(|s| f64::from(s.a.s_current.kbps()))
        .collect();
    v.iter().sum::<f64>() / v.len() as f64
}

#[test]
fn controller_converges_below_the_bottleneck() {
    for algorithm in [Algorithm::Faithful, Algorithm::Improved] {
        // S_goal 16 Mbit/s into a 10 Mbit/s bottleneck with a 20-packet queue, RTT 40 ms.
        let c = config(algorithm, 16_000);
        let link = LinkConfig::new(BOTTLENECK_BPS, Duration::from_millis(20));
        let mut pair = Pair::new(c, c, link, link, 7);
        pair.sample_every(Duration::from_millis(10));
        pair.run_until(Instant::from_secs(10));
        let before = pair.ab.stats();
        pair.run_until(Instant::from_secs(30));
        let after = pair.ab.stats();
        let mean = mean_rate_kbps(&pair, Instant::from_secs(10));
        let sent = after.sent - before.sent;
        let dropped = after.dropped_queue - before.dropped_queue;
        let drop_ratio = dropped as f64 / sent as f64;
        let delivered_kbps = (after.delivered - before.delivered) as f64 * 1460.0 * 8.0 / 20_000.0;
        eprintln!(
            "{algorithm:?}: mean S_current {mean:.0} kbit/s, delivered {delivered_kbps:.0} \
             kbit/s, queue drops {dropped}/{sent}"
        );
        // The rate settles at the bottleneck, not at S_goal, and the path delivers >= 95% of it.
        assert!(mean < 10_300.0 && mean > 9_000.0, "{algorithm:?}: {mean}");
        assert!(delivered_kbps > 9_500.0, "{algorithm:?}: {delivered_kbps}");
        match algorithm {
            // Faithful probes into the full queue: about 1% drops.
            Algorithm::Faithful => assert!(drop_ratio < 0.02, "{drop_ratio}"),
            // Improved stays under the delay target: no drops at all, mean below the bottleneck.
            _ => {
                assert_eq!(dropped, 0);
                assert!(mean < 10_000.0, "{mean}");
            }
        }
    }
}

#[test]
fn no_congestion_keeps_s_goal() {
    // The paper's scenario 0: S_goal 8.16 Mbit/s below a 10 Mbit/s bottleneck.
    for algorithm in [Algorithm::Fixed, Algorithm::Faithful, Algorithm::Improved] {
        let c = config(algorithm, 8160);
        let link = LinkConfig::new(BOTTLENECK_BPS, Duration::from_millis(5));
        let mut pair = Pair::new(c, c, link, link, 3);
        pair.sample_every(Duration::from_millis(10));
        pair.run_until(Instant::from_secs(10));
        assert_eq!(pair.ab.stats().dropped_queue, 0, "{algorithm:?}");
        let mean = mean_rate_kbps(&pair, Instant::from_secs(1));
        assert_eq!(mean, 8160.0, "{algorithm:?}");
        // 8.16 Mbit/s of 1460-byte frames for 10 s, the first at t = 0.
        assert_eq!(pair.a.ep.stats().frames_sent, 6987, "{algorithm:?}");
    }
}

#[test]
fn fixed_rate_collapses_under_congestion() {
    // Without congestion control the excess is simply dropped, for ever: ~37.5% at 16 vs 10.
    let c = config(Algorithm::Fixed, 16_000);
    let link = LinkConfig::new(BOTTLENECK_BPS, Duration::from_millis(20));
    let mut pair = Pair::new(c, c, link, link, 7);
    pair.run_until(Instant::from_secs(5));
    let s = pair.ab.stats();
    let ratio = s.dropped_queue as f64 / s.sent as f64;
    assert!((0.36..0.39).contains(&ratio), "{ratio}");
}

/// Runs A and B with the given inner sources over a congested, lossy, jittery path and returns
/// both outer schedules.
fn schedules(
    packing: Packing,
    algorithm: Algorithm,
    a_src: Box<dyn InnerSource>,
    b_src: Box<dyn InnerSource>,
) -> (Vec<TxRecord>, Vec<TxRecord>, u64) {
    let mut c = config(algorithm, 12_000);
    c.packing = packing;
    c.max_inner_len = 1400;
    let ab = LinkConfig::new(BOTTLENECK_BPS, Duration::from_millis(15))
        .with_loss_ppm(2_000)
        .with_jitter(Duration::from_millis(3));
    let ba = LinkConfig::new(6_000_000, Duration::from_millis(25)).with_loss_ppm(5_000);
    let mut pair = Pair::new(c, c, ab, ba, 11);
    pair.record_tx = true;
    pair.set_sources(a_src, b_src);
    pair.run_until(Instant::from_secs(8));
    let delivered = pair.a.delivered_frames + pair.b.delivered_frames;
    let (a, b) = (pair.a.tx_log, pair.b.tx_log);
    (a, b, delivered)
}

#[test]
fn outer_schedule_is_independent_of_inner_traffic() {
    for packing in [Packing::Packed, Packing::Single] {
        for algorithm in [Algorithm::Faithful, Algorithm::Improved] {
            let (a0, b0, d0) = schedules(packing, algorithm, Box::new(Silent), Box::new(Silent));
            // Heavy random bursts of 40..1400-byte frames from A; an on/off "insider" from B.
            let (a1, b1, d1) = schedules(
                packing,
                algorithm,
                Box::new(Bursts::new(5, Duration::from_millis(3), 12, (40, 1400))),
                Box::new(OnOff::new(
                    vec![true, false, true, true, false],
                    Duration::from_secs(1),
                    Duration::from_micros(700),
                    900,
                )),
            );
            assert_eq!(d0, 0);
            assert!(
                d1 > 5_000,
                "{packing:?} {algorithm:?}: only {d1} inner frames"
            );
            // The controller did act (the path is congested and lossy).
            let rates: std::collections::BTreeSet<_> =
                a0.iter().map(|r| &r.header[8..12]).collect();
            assert!(
                rates.len() > 5,
                "{packing:?} {algorithm:?}: rate never changed"
            );
            // Same departure times, same sizes, and even the same (encrypted) headers.
            assert_eq!(a0.len(), a1.len(), "{packing:?} {algorithm:?}");
            assert!(a0 == a1, "{packing:?} {algorithm:?}: A's schedule differs");
            assert!(b0 == b1, "{packing:?} {algorithm:?}: B's schedule differs");
            assert!(a0.iter().all(|r| r.len == a0[0].len));
        }
    }
}

/// Checks a frame made by psp-test's sources: counter in the first 8 bytes, pattern after.
fn intact(f: &[u8]) -> Option<u64> {
    if f.len() < 8 {
        return None;
    }
    let count = u64::from_be_bytes(f[..8].try_into().ok()?);
    f.iter()
        .enumerate()
        .skip(8)
        .all(|(i, &b)| b == (i as u64 ^ count) as u8)
        .then_some(count)
}

#[test]
fn delivery_is_intact_under_loss_and_reordering() {
    for packing in [Packing::Packed, Packing::Single] {
        let mut c = config(Algorithm::Improved, 8_000);
        c.packing = packing;
        c.max_inner_len = 1300;
        // 1% loss and up to 4 ms of jitter (frames 1.46 ms apart: heavy reordering).
        let link = LinkConfig::new(0, Duration::from_millis(10))
            .with_loss_ppm(10_000)
            .with_jitter(Duration::from_millis(4));
        let mut pair = Pair::new(c, c, link, link, 21);
        pair.b.keep_delivered = true;
        pair.set_sources(
            Box::new(Bursts::new(9, Duration::from_millis(4), 6, (8, 1300))),
            Box::new(Silent),
        );
        pair.run_until(Instant::from_secs(5));
        // Stop the source and let the queue and the links drain.
        pair.set_sources(Box::new(Silent), Box::new(Silent));
        pair.run_until(Instant::from_secs(6));
        let offered = pair.a.offered_frames;
        let mut seen = std::collections::BTreeSet::new();
        for f in &pair.b.delivered {
            let n = intact(f).unwrap_or_else(|| panic!("{packing:?}: corrupted frame"));
            assert!(seen.insert(n), "{packing:?}: frame {n} delivered twice");
        }
        let a = pair.a.ep.stats();
        let lost_outer = pair.ab.stats().lost_random;
        let ratio = seen.len() as f64 / offered as f64;
        eprintln!(
            "{packing:?}: offered {offered}, delivered {}, queue drops {}, AQM drops {}, \
             outer lost {lost_outer}, reassembly drops {}",
            seen.len(),
            a.inner_drops,
            a.aqm_drops,
            pair.b.ep.stats().reassembly_drops
        );
        assert_eq!(a.inner_queue_frames, 0);
        assert!(ratio > 0.4, "{packing:?}: {ratio}");
        // Every missing frame is explained by the inner queue (drop-tail at its byte cap or
        // CoDel at its head) or by a lost outer frame, each of which takes only the few inner
        // frames that had a byte in it.
        let missing = offered - seen.len() as u64 - a.inner_drops - a.aqm_drops;
        assert!(
            missing <= lost_outer * 4,
            "{packing:?}: {missing} missing for {lost_outer} lost outer frames"
        );
    }
}

#[test]
fn periodic_small_frames_share_outer_frames_when_packed() {
    // 100-byte frames every 0.5 ms (1.6 Mbit/s) at 2 Mbit/s of 1460-byte outer frames: the
    // faithful mode cannot keep up (1 frame per 5.84 ms), the packed mode can.
    let mut results = Vec::new();
    for packing in [Packing::Single, Packing::Packed] {
        let mut c = config(Algorithm::Fixed, 2_000);
        c.packing = packing;
        let link = LinkConfig::new(0, Duration::from_millis(5));
        let mut pair = Pair::new(c, c, link, link, 1);
        pair.set_sources(
            Box::new(Periodic::new(
                Instant::ZERO,
                Duration::from_micros(500),
                100,
            )),
            Box::new(Silent),
        );
        pair.run_until(Instant::from_secs(3));
        results.push(pair.b.delivered_frames as f64 / pair.a.offered_frames as f64);
    }
    assert!(results[0] < 0.2, "{results:?}");
    assert!(results[1] > 0.99, "{results:?}");
}
