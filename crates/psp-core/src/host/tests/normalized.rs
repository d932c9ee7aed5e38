//! Normalized session peers and their rate controllers: the stream runs from start-up whether
//! or not a frame waits (the first handshake starts by itself), and the controller's loss and
//! RTT estimates stay clean across rekeys (the PSP sequence number starts again at each
//! session; the stream's own does not) and across a restart of either side (both streams start
//! again, so neither controller compares the new stream's numbers with the old one's).
//!
//! The wire is lossless and delivers within one 10 ms step, so any loss a controller reports
//! is an artefact of sessions, and every RTT sample is under 2 steps: the estimate stays at
//! O_min.

use alloc::vec::Vec;

use super::*;
use crate::normalize::{Algorithm, Loss, NormConfig, Rate};

const GOAL: Rate = Rate::from_kbps(2000);

/// The settings of the testbed's experiment (one path, no SMKEX) with a rekey every 2 s.
fn opts() -> Opts {
    Opts {
        paths: 1,
        smkex: SmkexMode::Off,
        normalize: true,
        rekey_after_s: 2,
        ..Opts::default()
    }
}

/// Host `me` of [`opts`] whose peer is normalized with `algorithm` at S_goal = [`GOAL`].
fn norm_host(me: u8, algorithm: Algorithm) -> Host {
    let o = opts();
    let h = host(me, o);
    let cfg = h.config().clone();
    let mut specs: Vec<PeerSpec> = h.peers().map(|(_, s)| s.clone()).collect();
    for n in specs.iter_mut().filter_map(|s| s.normalize.as_mut()) {
        n.cfg = NormConfig {
            algorithm,
            s_goal: GOAL,
            ..NormConfig::default()
        };
    }
    let signer = identity(me).signing_key().unwrap();
    Host::new(
        Instant::ZERO,
        cfg,
        group_spec(),
        Some(signer),
        specs,
        Resume::default(),
    )
    .unwrap()
}

/// What host `i`'s controller said over a stretch of time.
#[derive(Debug, Default)]
struct Seen {
    /// The largest loss of a completed observation.
    loss: Loss,
    /// The lowest S_current (ours, set by the peer's controller) and the lowest suggestion to
    /// the peer (our controller's).
    s_current: Option<Rate>,
    s_suggested: Option<Rate>,
    /// The largest observation interval O and RTT sample.
    rtt_estimate: Duration,
    rtt_sample: Duration,
    /// Rounds our controller completed.
    rounds: u32,
}

/// Pings both ways every 100 ms for `ms`, sampling both controllers every 10 ms.
fn run(n: &mut Net, ms: u64, seq: &mut u16) -> [Seen; 2] {
    let mut seen: [Seen; 2] = Default::default();
    let start = [0, 1].map(|i| n.hosts[i].norm_status(PeerId(0)).map(|s| s.0.round));
    for step in 0..ms / 10 {
        if step % 10 == 0 {
            *seq += 1;
            let _ = n.send(0, &ping(1, *seq));
            let _ = n.send(1, &ping(2, *seq));
        }
        n.advance(10);
        for (i, s) in seen.iter_mut().enumerate() {
            let Some((st, _, _)) = n.hosts[i].norm_status(PeerId(0)) else {
                continue;
            };
            s.loss = s.loss.max(st.last_loss);
            s.s_current = Some(s.s_current.map_or(st.s_current, |r| r.min(st.s_current)));
            s.s_suggested = Some(
                s.s_suggested
                    .map_or(st.s_suggested, |r| r.min(st.s_suggested)),
            );
            s.rtt_estimate = s.rtt_estimate.max(st.rtt_estimate);
            s.rtt_sample = s.rtt_sample.max(st.last_rtt_sample);
            s.rounds = st.round.wrapping_sub(start[i].unwrap_or(0));
        }
    }
    seen
}

/// Both controllers saw no loss, kept both rates at S_goal, kept O at O_min and made rounds.
#[track_caller]
fn assert_clean(seen: &[Seen; 2], what: &str) {
    for (i, s) in seen.iter().enumerate() {
        assert_eq!(s.loss, Loss(0), "host {i}, {what}: {s:?}");
        assert_eq!(s.s_current, Some(GOAL), "host {i}, {what}: {s:?}");
        assert!(s.s_suggested >= Some(GOAL), "host {i}, {what}: {s:?}");
        assert_eq!(
            s.rtt_estimate,
            NormConfig::default().o_min,
            "host {i}, {what}: {s:?}"
        );
        assert!(
            s.rtt_sample <= Duration::from_millis(20),
            "host {i}, {what}: {s:?}"
        );
        assert!(s.rounds >= 10, "host {i}, {what}: {s:?}");
    }
}

/// Host `i` crashes (keys, stream and controller lost) and starts again.
fn restart(n: &mut Net, i: usize, algorithm: Algorithm) {
    n.hosts[i] = norm_host(i as u8 + 1, algorithm);
    n.drain(i);
}

/// Neither host sends a frame: their streams run all the same (both directions at S_goal), and
/// the handshake that started them says why.
#[test]
fn a_normalized_session_peer_streams_before_any_frame() {
    let mut n = Net::with_hosts([
        norm_host(1, Algorithm::Improved),
        norm_host(2, Algorithm::Improved),
    ]);
    n.advance(2000);
    for i in 0..2 {
        assert!(n.status(i).up, "host {i}: no session");
        let (st, _, _) = n.hosts[i].norm_status(PeerId(0)).expect("a stream");
        assert_eq!(st.s_current, GOAL);
        // 2000 kbit/s of 600-byte frames: 416 a second; the stream ran for most of 2 s.
        assert!(st.frames_sent > 600, "host {i}: {st:?}");
        assert!(st.frames_received > 600, "host {i}: {st:?}");
        // Nothing to send but dummies, and the session's keepalive.
        assert!(
            st.frames_sent - st.dummy_frames_sent <= 1,
            "host {i}: {st:?}"
        );
    }
    assert!(n.events.iter().flatten().any(|e| matches!(
        e,
        HostEvent::HandshakeStarted {
            why: "normalized stream",
            ..
        }
    )));
    assert!(n.delivered.iter().all(Vec::is_empty));
}

fn across_rekeys_and_restarts(algorithm: Algorithm) {
    let mut n = Net::with_hosts([norm_host(1, algorithm), norm_host(2, algorithm)]);
    let mut seq = 0;
    // The start: both streams begin within one handshake.
    n.advance(1000);
    assert_clean(&run(&mut n, 6000, &mut seq), "rekeys");
    let rekeys = n.counters(0).rekeys + n.counters(1).rekeys;
    assert!(rekeys >= 2, "{rekeys} rekeys");
    for i in [1, 0] {
        restart(&mut n, i, algorithm);
        // The new session (a handshake) and the first observation of each new stream.
        n.advance(1000);
        let what = alloc::format!("after host {i} restarted");
        assert!(n.status(0).up && n.status(1).up, "{what}: no session");
        assert_clean(&run(&mut n, 6000, &mut seq), &what);
    }
}

#[test]
fn the_improved_controller_sees_no_loss_across_rekeys_and_restarts() {
    across_rekeys_and_restarts(Algorithm::Improved);
}

#[test]
fn the_faithful_controller_sees_no_loss_across_rekeys_and_restarts() {
    across_rekeys_and_restarts(Algorithm::Faithful);
}
