//! Example: a normalized stream (seed 003, [`psp_core::normalize`]). Two endpoints exchange
//! fixed-size outer frames at a paced rate for two virtual seconds over a link with a 5 ms
//! delay, each frame sealed as a PSP frame of sub-protocol `Normalized`. Host A sends a burst of
//! inner frames at 0.5 s; on the wire every frame has the same length whether it carries data
//! or is a dummy, and frames leave at the pacer's times, not the burst's.
//!
//! ```sh
//! cargo run -p psp-examples --bin normalized
//! ```

use std::collections::VecDeque;

use psp_core::crypto::{SuiteId, SuiteKey};
use psp_core::normalize::{Endpoint, NormConfig, NormEvent};
use psp_core::protect::{Opener, OpenerConfig, Sealer, SealerConfig};
use psp_core::time::{Duration, Instant};
use psp_core::wire::{Protocol, Seq};

const MACS: [[u8; 6]; 2] = [[2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]];
const DELAY: Duration = Duration::from_millis(5);

/// One side: its normalization endpoint, its sealer, and the opener for the peer's frames.
struct Side {
    ep: Endpoint<Vec<u8>>,
    sealer: Sealer,
    opener: Opener,
    /// Frames on the link toward the peer, with their arrival time.
    link: VecDeque<(Instant, Vec<u8>)>,
    sent: usize,
    dummies: usize,
    lengths: Vec<usize>,
    delivered: usize,
}

fn side(cfg: NormConfig) -> Side {
    let key = [0x42u8; 16]; // a pair key; a gateway uses the peer's session keys
    let suite_key = || SuiteKey::new(SuiteId::Aes128Gcm, &key).expect("16 bytes");
    Side {
        ep: Endpoint::new(Instant::ZERO, cfg, vec![0; cfg.storage_len()]).expect("valid"),
        sealer: Sealer::new(suite_key(), Seq(1), SealerConfig::new()).expect("allowed"),
        opener: Opener::new(suite_key(), OpenerConfig::new()).expect("allowed"),
        link: VecDeque::new(),
        sent: 0,
        dummies: 0,
        lengths: Vec::new(),
        delivered: 0,
    }
}

fn main() {
    let mut cfg = NormConfig::default();
    cfg.frame_len = 600; // every payload: 600 bytes
    let mut sides = [side(cfg), side(cfg)];
    let (mut now, end) = (Instant::ZERO, Instant::from_secs(2));
    let (mut payload, mut frame) = (vec![0u8; 2048], vec![0u8; 2048]);
    let mut burst_sent = false;
    while now < end {
        if !burst_sent && now >= Instant::from_millis(500) {
            for i in 0..20u8 {
                let inner = [&MACS[1][..], &MACS[0], &[0x88, 0xb5], &[i; 400]].concat();
                sides[0].ep.handle_inner(now, &inner).expect("queued");
            }
            burst_sent = true;
        }
        for me in 0..2 {
            // Payloads due now: seal each and put it on the link.
            let s = &mut sides[me];
            while let Some(t) = s.ep.poll_transmit(now, &mut payload) {
                let (dummy, len) = (t.is_dummy(), t.payload.len());
                let sealed = s
                    .sealer
                    .seal_sub(
                        now,
                        MACS[1 - me],
                        MACS[me],
                        Protocol::Normalized,
                        &payload[..len],
                        &mut frame,
                    )
                    .expect("sealed");
                s.lengths.push(sealed.len());
                s.link.push_back((now + DELAY, sealed.to_vec()));
                (s.sent, s.dummies) = (s.sent + 1, s.dummies + usize::from(dummy));
            }
            // Frames that arrived: open, hand to the peer's endpoint, deliver its inner frames.
            while sides[me].link.front().is_some_and(|(at, _)| *at <= now) {
                let (_, mut f) = sides[me].link.pop_front().expect("checked");
                let peer = &mut sides[1 - me];
                let opened = peer.opener.open(now, &mut f).expect("genuine");
                peer.ep
                    .handle_payload(now, opened.payload())
                    .expect("well formed");
                while let Some(NormEvent::Inner(_)) = peer.ep.poll_event() {
                    peer.delivered += 1;
                }
            }
        }
        // Wake at the next departure or arrival.
        let arrivals = sides
            .iter()
            .filter_map(|s| s.link.front().map(|(at, _)| *at));
        let departures = sides.iter().filter_map(|s| s.ep.poll_timeout());
        now = arrivals
            .chain(departures)
            .min()
            .unwrap_or(end)
            .max(now + Duration::from_micros(1));
    }
    for (name, s) in ["A", "B"].iter().zip(&sides) {
        let (min, max) = (s.lengths.iter().min(), s.lengths.iter().max());
        println!(
            "{name}: sent {} frames ({} dummies), lengths {min:?}..={max:?}, rate {} kbit/s, delivered {} inner frames",
            s.sent,
            s.dummies,
            s.ep.stats().s_current.kbps(),
            s.delivered
        );
        assert_eq!(min, max, "every outer frame has one length");
    }
    assert_eq!(sides[1].delivered, 20, "B got the whole burst");
}
