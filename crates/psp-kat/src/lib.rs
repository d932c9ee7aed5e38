//! Known-answer checks of psp-core that run wherever psp-core builds: on a host (`cargo test`),
//! in the freestanding x86-64 proof (`crates/psp-nostd-proof`) and on a Cortex-M4 under
//! `qemu-system-arm` (`crates/psp-cortex-m`). `#![no_std]`, no allocator, no clock: every check
//! is a pure function of the vectors below.
//!
//! ```
//! let mut failed = 0;
//! let all = psp_kat::run(&mut |ok, what| {
//!     if !ok {
//!         failed += 1;
//!         println!("FAIL {what}");
//!     }
//! });
//! assert!(all && failed == 0);
//! ```
//!
//! | module | what it checks |
//! |---|---|
//! | `scramble` | the three scramblers agree and round-trip on every kernel this CPU has |
//! | `frames` | a PSP frame per AEAD suite against `psp_frames.json`, replays and flipped bits refused; Ed25519 (RFC 8032) |
//! | `session` | a complete two-path SEP + SMKEX handshake against docs/SESSIONS.md's first vector, then its first data frames |
#![no_std]

pub mod frames;
pub mod scramble;
pub mod session;

/// Runs every check, calling `report(passed, name)` once per check; true if all passed.
pub fn run(report: &mut dyn FnMut(bool, &str)) -> bool {
    let mut all = true;
    let mut check = |ok: bool, what: &str| {
        report(ok, what);
        all &= ok;
    };
    scramble::check(&mut check);
    frames::check(&mut check);
    session::check(&mut check);
    all
}

/// Decodes lower-case hex into `out`; returns the length (`out` must be long enough).
pub(crate) fn unhex(s: &str, out: &mut [u8]) -> usize {
    let b = s.as_bytes();
    let nib = |c: u8| if c <= b'9' { c - b'0' } else { c - b'a' + 10 };
    let n = b.len() / 2;
    for (i, o) in out.iter_mut().enumerate().take(n) {
        *o = nib(b[2 * i]) << 4 | nib(b[2 * i + 1]);
    }
    n
}

/// `N` bytes from hex of exactly `2 * N` digits.
pub(crate) fn arr<const N: usize>(s: &str) -> [u8; N] {
    let mut out = [0u8; N];
    unhex(s, &mut out);
    out
}

#[cfg(test)]
mod tests {
    extern crate std;

    #[test]
    fn every_check_passes_on_the_host() {
        let mut names = std::vec::Vec::new();
        let all = super::run(&mut |ok, what| names.push((ok, std::string::String::from(what))));
        let failed: std::vec::Vec<_> = names.iter().filter(|(ok, _)| !ok).collect();
        assert!(all && failed.is_empty(), "failed: {failed:?}");
        assert!(names.len() >= 8, "{names:?}");
    }
}
