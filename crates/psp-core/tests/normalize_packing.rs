//! Properties of normalization packing through two endpoints (no link simulation; see psp-test
//! for that): every payload has the fixed size, frames round-trip in order without loss, and
//! under loss and reordering exactly the inner frames that had a byte in a lost outer frame
//! are missing, none is corrupted or duplicated.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;
use psp_core::normalize::feedback::{Frame, HEADER_LEN, Repr};
use psp_core::normalize::packing::{Segment, Segments};
use psp_core::normalize::{Algorithm, Endpoint, NormConfig, NormEvent, Packing, Rate};
use psp_core::time::{Duration, Instant};

fn config(packing: Packing, frame_len: usize) -> NormConfig {
    let mut c = NormConfig::default();
    c.packing = packing;
    c.frame_len = frame_len;
    c.wire_len = 0;
    c.algorithm = Algorithm::Fixed;
    c.s_goal = Rate::from_kbps(8000);
    c.tx_queue_bytes = 128 * 1024;
    c.reassembly_slots = 8;
    c.reorder_window = 16;
    c
}

/// Inner frames with a unique 2-byte index in front.
fn frames(sizes: &[usize]) -> Vec<Vec<u8>> {
    sizes
        .iter()
        .enumerate()
        .map(|(i, &n)| {
            let mut f: Vec<u8> = (0..n).map(|j| (j * 7 + i) as u8).collect();
            f[..2].copy_from_slice(&(i as u16).to_be_bytes());
            f
        })
        .collect()
}

/// Sends `frames` through A and returns every payload until the queue is empty (plus two).
fn send_all(cfg: NormConfig, frames: &[Vec<u8>]) -> (Vec<Vec<u8>>, Vec<bool>) {
    let mut a = Endpoint::new(Instant::ZERO, cfg, vec![0; cfg.storage_len()]).unwrap();
    let accepted: Vec<bool> = frames
        .iter()
        .map(|f| a.handle_inner(Instant::ZERO, f).is_ok())
        .collect();
    let mut out = vec![0u8; cfg.frame_len];
    let mut payloads = Vec::new();
    let mut now = Instant::ZERO;
    let mut idle = 0;
    while idle < 2 {
        now = a.poll_timeout().unwrap();
        let t = a.poll_transmit(now, &mut out).unwrap();
        assert_eq!(t.payload.len(), cfg.frame_len);
        if t.is_dummy() {
            idle += 1;
        }
        payloads.push(out.clone());
        assert!(a.poll_transmit(now, &mut out).is_none());
    }
    let _ = now;
    (payloads, accepted)
}

/// Which outer payloads (indices) carry a byte of each inner frame, keyed by frame index.
fn carriers(payloads: &[Vec<u8>]) -> BTreeMap<u16, BTreeSet<usize>> {
    let mut by_frag_id: BTreeMap<u16, u16> = BTreeMap::new();
    let mut map: BTreeMap<u16, BTreeSet<usize>> = BTreeMap::new();
    for (i, p) in payloads.iter().enumerate() {
        let f = Frame::new_checked(&p[..]).unwrap();
        Repr::parse(&f).unwrap();
        for seg in Segments::new(f.data()) {
            match seg.unwrap() {
                Segment::Whole(d) => {
                    map.entry(u16::from_be_bytes([d[0], d[1]]))
                        .or_default()
                        .insert(i);
                }
                Segment::Fragment(fr) => {
                    if fr.offset == 0 {
                        by_frag_id.insert(fr.id, u16::from_be_bytes([fr.data[0], fr.data[1]]));
                    }
                    let idx = by_frag_id[&fr.id];
                    map.entry(idx).or_default().insert(i);
                }
            }
        }
    }
    map
}

fn receive(cfg: NormConfig, payloads: &[(usize, Vec<u8>)]) -> Vec<Vec<u8>> {
    let mut b = Endpoint::new(Instant::ZERO, cfg, vec![0; cfg.storage_len()]).unwrap();
    let mut got = Vec::new();
    for (k, (_, p)) in payloads.iter().enumerate() {
        b.handle_payload(Instant::ZERO + Duration::from_micros(k as u64), p)
            .unwrap();
        while let Some(NormEvent::Inner(f)) = b.poll_event() {
            got.push(f.to_vec());
        }
    }
    got
}

fn packing() -> impl Strategy<Value = Packing> {
    prop_oneof![Just(Packing::Packed), Just(Packing::Single)]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn lossless_roundtrip_in_order(
        packing in packing(),
        frame_len in 100usize..1500,
        sizes in prop::collection::vec(2usize..=1518, 0..40),
    ) {
        let cfg = config(packing, frame_len);
        let fs = frames(&sizes);
        let (payloads, accepted) = send_all(cfg, &fs);
        let indexed: Vec<_> = payloads.into_iter().enumerate().collect();
        let got = receive(cfg, &indexed);
        let want: Vec<_> = fs.iter().zip(&accepted).filter(|(_, a)| **a).map(|(f, _)| f.clone()).collect();
        prop_assert_eq!(got, want);
        if packing == Packing::Packed {
            prop_assert!(accepted.iter().all(|a| *a));
        }
    }

    #[test]
    fn loss_and_reordering_drop_only_touched_frames(
        packing in packing(),
        frame_len in 100usize..1500,
        sizes in prop::collection::vec(2usize..=1518, 1..40),
        lost in prop::collection::btree_set(0usize..80, 0..6),
        swaps in prop::collection::vec((0usize..80, 1usize..4), 0..20),
    ) {
        let cfg = config(packing, frame_len);
        let fs = frames(&sizes);
        let (payloads, accepted) = send_all(cfg, &fs);
        let carried = carriers(&payloads);
        let mut arriving: Vec<(usize, Vec<u8>)> = payloads
            .into_iter()
            .enumerate()
            .filter(|(i, _)| !lost.contains(i))
            .collect();
        // Local reordering: swap neighbours at most 3 apart.
        for (i, d) in swaps {
            if i + d < arriving.len() {
                arriving.swap(i, i + d);
            }
        }
        let got = receive(cfg, &arriving);
        let mut seen = BTreeSet::new();
        for f in &got {
            let idx = u16::from_be_bytes([f[0], f[1]]);
            prop_assert_eq!(f, &fs[usize::from(idx)], "corrupted frame {}", idx);
            prop_assert!(seen.insert(idx), "frame {} twice", idx);
        }
        let want: BTreeSet<u16> = (0..fs.len() as u16)
            .filter(|&i| accepted[usize::from(i)])
            .filter(|i| carried[i].is_disjoint(&lost))
            .collect();
        prop_assert_eq!(seen, want);
    }
}

#[test]
fn header_fields_on_the_wire() {
    // The first payload of an endpoint: seq 1, S_current = S_goal, rounds 0, S_suggested =
    // S_init (= S_goal), departure slot 0, then an end marker and zero padding.
    let cfg = config(Packing::Packed, 64);
    let (payloads, _) = send_all(cfg, &[]);
    let mut want = vec![0u8; 64];
    want[..HEADER_LEN].copy_from_slice(&[
        0x01, 0x00, 0, 0, 0, 0, 0, 0x01, // version, flags, seq 1
        0, 0, 0x1f, 0x40, 0, 0, 0, 0, // S_current 8000 kbit/s, R_recent 0
        0, 0, 0x1f, 0x40, 0, 0, 0, 0, // S_suggested 8000 kbit/s, R_current 0
        0, 0, 0, 0, // departure slot 0 µs
    ]);
    assert_eq!(payloads[0], want);
    // The second slot: 64 bytes at 8000 kbit/s = 64 µs later.
    assert_eq!(&payloads[1][24..28], &[0, 0, 0, 64]);
}
