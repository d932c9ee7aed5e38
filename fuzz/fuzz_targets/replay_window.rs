//! Replay window against a model that remembers every accepted sequence number.
#![no_main]

use std::collections::BTreeSet;

use libfuzzer_sys::fuzz_target;
use psp_core::replay::{MAX_WINDOW, ReplayWindow};

fuzz_target!(|input: &[u8]| {
    let Some((head, ops)) = input.split_first_chunk::<4>() else {
        return;
    };
    let window = (u32::from_le_bytes(*head) % MAX_WINDOW) + 1;
    let mut w = ReplayWindow::new(window).expect("window in range");
    let mut seen = BTreeSet::new();
    let mut highest: Option<u32> = None;
    for op in ops.chunks_exact(4) {
        let seq = u32::from_le_bytes([op[0], op[1], op[2], op[3]]);
        let too_old = highest.is_some_and(|h| seq <= h && h - seq >= window);
        let expect_ok = !too_old && !seen.contains(&seq);
        assert_eq!(w.check(seq).is_ok(), expect_ok);
        assert_eq!(w.commit(seq).is_ok(), expect_ok);
        if expect_ok {
            seen.insert(seq);
            highest = Some(highest.map_or(seq, |h| h.max(seq)));
        }
        assert_eq!(w.highest(), highest);
    }
});
