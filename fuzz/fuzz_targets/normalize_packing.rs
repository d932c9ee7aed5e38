//! Normalization packing: the segment parser and a receiving endpoint never panic on any bytes,
//! whatever they deliver fits the configured bounds, and inner frames cut from the input
//! round-trip through a sending and a receiving endpoint unchanged and in order.
#![no_main]

use libfuzzer_sys::fuzz_target;
use psp_core::normalize::feedback::{Frame, HEADER_LEN, Repr};
use psp_core::normalize::packing::{Segment, Segments};
use psp_core::normalize::{Endpoint, NormConfig, NormEvent, Packing, Rate};
use psp_core::time::Instant;

fuzz_target!(|input: &[u8]| {
    let Some((&sel, rest)) = input.split_first() else {
        return;
    };
    // 1. The parser alone: segments stay inside the buffer.
    for seg in Segments::new(rest) {
        match seg {
            Ok(Segment::Whole(d)) => assert!(!d.is_empty() && d.len() <= rest.len()),
            Ok(Segment::Fragment(f)) => {
                assert!(usize::from(f.offset) + f.data.len() <= usize::from(f.total));
            }
            Err(_) => {}
        }
    }

    let mut cfg = NormConfig::default();
    cfg.frame_len = 64 + usize::from(sel >> 2) * 23;
    cfg.wire_len = 0;
    cfg.packing = if sel & 1 == 0 {
        Packing::Packed
    } else {
        Packing::Single
    };
    cfg.max_inner_len = 1600;
    cfg.reassembly_slots = 1 + usize::from(sel >> 5);
    cfg.reorder_window = 1 + u64::from(sel & 0x0f);
    cfg.s_goal = Rate::from_kbps(10_000);

    // 2. A receiver fed chunks of the input (length-prefixed), raw or behind a valid header.
    let mut b = Endpoint::new(Instant::ZERO, cfg, vec![0; cfg.storage_len()]).expect("config");
    let mut data = rest;
    let mut seq = 0u64;
    let mut payload = Vec::new();
    while let Some((&n, tail)) = data.split_first() {
        let n = usize::from(n).min(tail.len());
        let (chunk, t) = tail.split_at(n);
        data = t;
        payload.clear();
        if sel & 2 == 0 {
            seq += 1 + u64::from(n as u8 & 3);
            payload.resize(HEADER_LEN, 0);
            Repr {
                seq,
                s_current: Rate::from_kbps(u32::from(n as u8) * 100),
                r_recent: 0,
                s_suggested: Rate::from_kbps(1000),
                r_current: 0,
                sent_at: n as u32,
            }
            .emit(&mut Frame::new_unchecked(&mut payload[..]));
        }
        payload.extend_from_slice(chunk);
        let _ = b.handle_payload(Instant::from_micros(seq), &payload);
        while let Some(NormEvent::Inner(f)) = b.poll_event() {
            assert!(!f.is_empty() && f.len() <= cfg.max_inner_len);
        }
    }

    // 3. Round trip without loss: the input cut into frames by its own bytes.
    let mut a = Endpoint::new(Instant::ZERO, cfg, vec![0; cfg.storage_len()]).expect("config");
    let mut b = Endpoint::new(Instant::ZERO, cfg, vec![0; cfg.storage_len()]).expect("config");
    let mut sent = Vec::new();
    let mut data = rest;
    while let Some((&n, tail)) = data.split_first() {
        let n = (usize::from(n) * 7).min(tail.len());
        let (frame, t) = tail.split_at(n);
        data = t;
        if a.handle_inner(Instant::ZERO, frame).is_ok() {
            sent.push(frame.to_vec());
        }
    }
    let mut got = Vec::new();
    let mut out = vec![0u8; cfg.frame_len];
    let mut idle = 0;
    while idle < 2 {
        let now = a.poll_timeout().expect("sequence space");
        let t = a.poll_transmit(now, &mut out).expect("due");
        assert_eq!(t.payload.len(), cfg.frame_len);
        if t.is_dummy() {
            idle += 1;
        }
        b.handle_payload(now, &out).expect("own payload parses");
        while let Some(NormEvent::Inner(f)) = b.poll_event() {
            got.push(f.to_vec());
        }
    }
    assert_eq!(got, sent);
});
