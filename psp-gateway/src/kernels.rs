//! Picks the scrambler kernels for this process by measuring them on this CPU
//! (`psp_core::scramble::select`): the widest SIMD kernel is not always the fastest (AMD Zen 4
//! descrambles faster with AVX2 than with AVX-512).

use psp_core::scramble::select::{self, Calibration};
use psp_core::time::Instant;

/// Bytes per calibration pass: in L1/L2, where the kernels differ most.
const CALIBRATION_LEN: usize = 16 * 1024;
/// Samples per kernel and direction (the fastest counts); about 2 ms in all.
const CALIBRATION_ROUNDS: u32 = 8;

/// Measures every available scrambler kernel and makes the fastest per direction the default
/// of every scrambler this process builds from now on.
pub(crate) fn calibrate_scrambler() -> Calibration {
    let origin = std::time::Instant::now();
    let mut buf = vec![0u8; CALIBRATION_LEN];
    let cal = select::calibrate(
        || Instant::from_std(origin, std::time::Instant::now()),
        &mut buf,
        CALIBRATION_ROUNDS,
    );
    // `calibrate` only ever picks kernels it could run, so this cannot fail; if it did, the
    // per-CPU defaults stay, which are correct too.
    let _ = select::set_preferred(cal.choice);
    cal
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calibration_picks_available_kernels() {
        let cal = calibrate_scrambler();
        assert!(cal.choice.scramble.is_available());
        assert!(cal.choice.descramble.is_available());
        assert_eq!(select::preferred(), cal.choice);
        select::reset_preferred();
    }
}
