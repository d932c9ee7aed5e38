//! The scrambler: the paper's two versions and every production kernel this CPU has agree on a
//! 300-byte message split across two calls, and descrambling restores it.

use psp_core::scramble::{self, Descrambler, Kernel, Scrambler, Seed};

/// The message: byte `i` is `7i + 3`.
fn message() -> [u8; 300] {
    let mut msg = [0u8; 300];
    for (i, b) in msg.iter_mut().enumerate() {
        *b = (i * 7 + 3) as u8;
    }
    msg
}

/// Runs the scrambler checks.
pub fn check(report: &mut dyn FnMut(bool, &str)) {
    let seed = Seed::from_key(b"Jefe");
    let msg = message();
    let mut a = msg;
    scramble::straightforward::Scrambler::new(&seed).scramble_in_place(&mut a);
    let mut b = msg;
    scramble::revised::Scrambler::new(&seed).scramble_in_place(&mut b);
    report(a == b && a != msg, "scramble: straightforward == revised");
    for k in Kernel::ALL {
        let (Some(mut s), Some(mut r)) = (
            Scrambler::with_kernel(&seed, *k),
            Descrambler::with_kernel(&seed, *k),
        ) else {
            continue;
        };
        let mut c = msg;
        s.scramble_in_place(&mut c[..100]);
        s.scramble_in_place(&mut c[100..]);
        let mut d = c;
        r.descramble_in_place(&mut d);
        report(c == a && d == msg, k.name());
    }
}
