//! A tiny seeded RNG (SplitMix64): deterministic, no dependencies, good enough for simulation.

/// SplitMix64 (Steele, Lea, Flood 2014), the seeding generator of xoshiro.
#[derive(Clone, Debug)]
pub struct Rng {
    state: u64,
}

impl Rng {
    /// A generator from `seed`.
    pub fn new(seed: u64) -> Self {
        Self { state: seed }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A uniform value in `0..n` (0 when `n` is 0), by 128-bit multiply (Lemire, no modulo bias
    /// worth caring about here).
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// A uniform value in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi.saturating_sub(lo) + 1)
    }

    /// True with probability `ppm` / 1 000 000.
    pub fn chance_ppm(&mut self, ppm: u32) -> bool {
        self.below(1_000_000) < u64::from(ppm)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix_known_answer() {
        // Reference output of SplitMix64 seeded with 0.
        let mut r = Rng::new(0);
        assert_eq!(r.next_u64(), 0xe220_a839_7b1d_cdaf);
        assert_eq!(r.next_u64(), 0x6e78_9e6a_a1b9_65f4);
    }

    #[test]
    fn ranges_and_chances() {
        let mut r = Rng::new(42);
        let mut hits = 0;
        for _ in 0..100_000 {
            let v = r.range(3, 5);
            assert!((3..=5).contains(&v));
            if r.chance_ppm(10_000) {
                hits += 1;
            }
        }
        assert!((800..1200).contains(&hits), "{hits}");
        assert_eq!(r.below(0), 0);
    }
}
