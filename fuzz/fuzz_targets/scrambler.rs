//! Scrambler round trip: every kernel and the paper's two implementations agree, any split of the
//! input gives the same output, and descrambling restores the input.
#![no_main]

use libfuzzer_sys::fuzz_target;
use psp_core::scramble::{self, Descrambler, Kernel, Scrambler, Seed};

fuzz_target!(|input: &[u8]| {
    if input.len() < 3 {
        return;
    }
    let key_len = usize::from(input[0] % 32);
    let Some(key) = input.get(2..2 + key_len) else {
        return;
    };
    let data = &input[2 + key_len..];
    let split = usize::from(input[1]).min(data.len());
    let seed = Seed::from_key(key);

    let mut reference = data.to_vec();
    scramble::revised::Scrambler::new(&seed).scramble_in_place(&mut reference);
    if data.len() <= 4096 {
        let mut slow = data.to_vec();
        scramble::straightforward::Scrambler::new(&seed).scramble_in_place(&mut slow);
        assert_eq!(slow, reference);
    }
    for &k in Kernel::ALL {
        let Some(mut s) = Scrambler::with_kernel(&seed, k) else {
            continue;
        };
        let mut out = data.to_vec();
        let (a, b) = out.split_at_mut(split);
        s.scramble_in_place(a);
        s.scramble_in_place(b);
        assert_eq!(out, reference, "kernel {}", k.name());
        let Some(mut d) = Descrambler::with_kernel(&seed, k) else {
            continue;
        };
        let (a, b) = out.split_at_mut(data.len() - split);
        d.descramble_in_place(a);
        d.descramble_in_place(b);
        assert_eq!(out, data, "kernel {}", k.name());
    }
});
