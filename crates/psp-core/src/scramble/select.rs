//! Which production kernel a new [`Scrambler`] or
//! [`Descrambler`] runs: chosen per direction, from a measurement on this CPU
//! ([`calibrate`], then [`set_preferred`]) or, until one is made, from a per-CPU default
//! ([`Kernel::detect_for`]).
//!
//! Feature flags alone pick badly: on AMD Zen 4, which runs 512-bit operations as two 256-bit
//! halves, the AVX-512 descramble kernel is slower than the AVX2 one (28.8 vs 33.5 GB/s at
//! 64 KiB, BENCHMARKS.md), while on Intel Xeon AVX-512 wins both ways. The core reads no clock,
//! so [`calibrate`] takes the caller's.

use core::sync::atomic::{AtomicU8, Ordering};

use super::{Descrambler, Kernel, Scrambler, Seed};
use crate::time::{Duration, Instant};

/// The two directions of the scrambler.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Direction {
    /// Sending: [`Scrambler`].
    Scramble,
    /// Receiving: [`Descrambler`].
    Descramble,
}

/// The kernel each direction runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelChoice {
    /// The kernel of new scramblers.
    pub scramble: Kernel,
    /// The kernel of new descramblers.
    pub descramble: Kernel,
}

impl KernelChoice {
    /// The per-CPU defaults of [`Kernel::detect_for`].
    pub fn detect() -> Self {
        Self {
            scramble: Kernel::detect_for(Direction::Scramble),
            descramble: Kernel::detect_for(Direction::Descramble),
        }
    }

    /// The kernel for `dir`.
    pub fn get(self, dir: Direction) -> Kernel {
        match dir {
            Direction::Scramble => self.scramble,
            Direction::Descramble => self.descramble,
        }
    }
}

/// [`set_preferred`] was given a kernel this CPU cannot run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Unavailable(pub Kernel);

impl core::fmt::Display for Unavailable {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "scrambler kernel {} is not available on this CPU",
            self.0.name()
        )
    }
}

impl core::error::Error for Unavailable {}

/// The process-wide choice: 0 = none made (use the defaults), else `(s + 1) | (d + 1) << 4`
/// with `s`, `d` indices into [`Kernel::ALL`].
static PREFERRED: AtomicU8 = AtomicU8::new(0);

/// The kernels new scramblers and descramblers run: the last [`set_preferred`], else the
/// per-CPU defaults.
pub fn preferred() -> KernelChoice {
    let bits = PREFERRED.load(Ordering::Relaxed);
    let kernel = |nibble: u8| {
        usize::from(nibble)
            .checked_sub(1)
            .and_then(|i| Kernel::ALL.get(i))
            .copied()
    };
    match (kernel(bits & 0x0f), kernel(bits >> 4)) {
        (Some(scramble), Some(descramble)) => KernelChoice {
            scramble,
            descramble,
        },
        _ => KernelChoice::detect(),
    }
}

/// Makes `choice` the kernels of every scrambler and descrambler built from now on (existing
/// ones keep theirs; the output is the same byte for byte whatever the kernel).
///
/// # Errors
/// [`Unavailable`] if this CPU cannot run one of the kernels; nothing changes then.
pub fn set_preferred(choice: KernelChoice) -> Result<(), Unavailable> {
    let index = |k: Kernel| {
        if !k.is_available() {
            return Err(Unavailable(k));
        }
        let i = Kernel::ALL
            .iter()
            .position(|&a| a == k)
            .ok_or(Unavailable(k))?;
        // `Kernel::ALL` has at most a handful of entries, so `i + 1` fits in a nibble.
        Ok(u8::try_from(i + 1).unwrap_or(0) & 0x0f)
    };
    let bits = index(choice.scramble)? | index(choice.descramble)? << 4;
    PREFERRED.store(bits, Ordering::Relaxed);
    Ok(())
}

/// Forgets any [`set_preferred`]: new scramblers use the per-CPU defaults again.
pub fn reset_preferred() {
    PREFERRED.store(0, Ordering::Relaxed);
}

/// Passes over the buffer per timed sample of [`calibrate`], so a microsecond clock resolves
/// kernels that take only a few microseconds per pass.
pub const PASSES: u32 = 16;

/// What [`calibrate`] measured for one kernel: the fastest of its rounds, per direction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timing {
    /// The kernel.
    pub kernel: Kernel,
    /// Time to scramble the buffer [`PASSES`] times.
    pub scramble: Duration,
    /// Time to descramble the buffer [`PASSES`] times.
    pub descramble: Duration,
}

/// The most kernels any target compiles in (the length of [`Calibration::timings`]).
pub const MAX_KERNELS: usize = 3;

/// The outcome of [`calibrate`]: the fastest kernel per direction and every timing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Calibration {
    /// The fastest available kernel per direction (ties go to the earlier, simpler kernel).
    pub choice: KernelChoice,
    /// One entry per available kernel, in [`Kernel::ALL`] order.
    pub timings: [Option<Timing>; MAX_KERNELS],
}

/// Times every available kernel scrambling and descrambling `buf` (its contents are destroyed)
/// [`PASSES`] times per sample, `rounds` samples each, keeping the fastest, and picks the
/// fastest kernel per direction. `clock` returns the caller's current time (microseconds or
/// finer). A `buf` of 16 to 64 KiB measures the kernels in cache, where they differ most; the
/// whole call then takes a few milliseconds for 20 rounds. Nothing is applied: pass `choice`
/// to [`set_preferred`].
///
/// Rounds alternate between the kernels, so a burst of load elsewhere on the machine slows all
/// of them alike rather than one.
pub fn calibrate(mut clock: impl FnMut() -> Instant, buf: &mut [u8], rounds: u32) -> Calibration {
    let seed = Seed::from_bytes([0x5a; super::SEED_LEN]);
    let mut timings = [None::<Timing>; MAX_KERNELS];
    for _ in 0..rounds.max(1) {
        for (slot, &kernel) in timings.iter_mut().zip(Kernel::ALL) {
            let (Some(mut s), Some(mut d)) = (
                Scrambler::with_kernel(&seed, kernel),
                Descrambler::with_kernel(&seed, kernel),
            ) else {
                continue;
            };
            let t0 = clock();
            for _ in 0..PASSES {
                s.scramble_in_place(buf);
            }
            let t1 = clock();
            for _ in 0..PASSES {
                d.descramble_in_place(buf);
            }
            let t2 = clock();
            let (ts, td) = (t1.saturating_since(t0), t2.saturating_since(t1));
            let best = slot.get_or_insert(Timing {
                kernel,
                scramble: ts,
                descramble: td,
            });
            best.scramble = best.scramble.min(ts);
            best.descramble = best.descramble.min(td);
        }
    }
    let fastest = |dir: Direction| {
        timings
            .iter()
            .flatten()
            .min_by_key(|t| match dir {
                Direction::Scramble => t.scramble,
                Direction::Descramble => t.descramble,
            })
            .map_or(Kernel::Portable, |t| t.kernel)
    };
    Calibration {
        choice: KernelChoice {
            scramble: fastest(Direction::Scramble),
            descramble: fastest(Direction::Descramble),
        },
        timings,
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// Held by tests that change or depend on the process-wide choice (tests run in parallel).
    pub(in crate::scramble) static PREFERRED_LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());

    #[test]
    fn set_and_reset_preferred() {
        let _guard = PREFERRED_LOCK.lock();
        let portable = KernelChoice {
            scramble: Kernel::Portable,
            descramble: Kernel::Portable,
        };
        set_preferred(portable).unwrap();
        assert_eq!(preferred(), portable);
        let seed = Seed::from_key(b"pref");
        assert_eq!(Scrambler::new(&seed).kernel(), Kernel::Portable);
        assert_eq!(Descrambler::new(&seed).kernel(), Kernel::Portable);
        reset_preferred();
        assert_eq!(preferred(), KernelChoice::detect());
        for &k in Kernel::ALL.iter().filter(|k| !k.is_available()) {
            let bad = KernelChoice {
                scramble: k,
                descramble: Kernel::Portable,
            };
            assert_eq!(set_preferred(bad), Err(Unavailable(k)));
            assert_eq!(preferred(), KernelChoice::detect());
        }
    }

    #[test]
    fn calibrate_times_every_available_kernel() {
        // A fake clock ticking 1 µs per call: every kernel ties, so the first (portable) wins.
        let mut t = 0;
        let clock = || {
            t += 1;
            Instant::from_micros(t)
        };
        let mut buf = [0u8; 4096];
        let cal = calibrate(clock, &mut buf, 3);
        let measured: Vec<Kernel> = cal.timings.iter().flatten().map(|t| t.kernel).collect();
        let available: Vec<Kernel> = Kernel::ALL
            .iter()
            .copied()
            .filter(|k| k.is_available())
            .collect();
        assert_eq!(measured, available);
        assert_eq!(cal.choice.scramble, Kernel::Portable);
        for t in cal.timings.iter().flatten() {
            assert_eq!(t.scramble, Duration::from_micros(1));
        }
        assert!(Kernel::ALL.len() <= MAX_KERNELS);
    }

    #[test]
    fn defaults_are_available() {
        let d = KernelChoice::detect();
        assert!(d.scramble.is_available() && d.descramble.is_available());
        assert_eq!(d.get(Direction::Scramble), d.scramble);
        assert_eq!(d.get(Direction::Descramble), d.descramble);
    }
}
