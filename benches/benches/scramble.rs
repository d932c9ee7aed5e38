//! Scrambler throughput: the paper's two implementations, every available production kernel,
//! and two references in the same groups: `memcpy` (`copy_from_slice`) and ring's
//! AES-128-GCM seal (the brief's yardsticks).
//!
//! `cargo bench --bench scramble`; filter with e.g. `-- scramble/1280`. Duration: 8 benchmarks
//! per size plus 2 per kernel the CPU has beyond AVX2, and the straightforward pair up to
//! 1500 B: 56 benchmarks with AVX2 (about 1.5 minutes on the project's 2-vCPU guest, build not
//! included), 68 with AVX-512 (about 1 min 45 s), at about 1.55 s each (see `config()`).
//! `benches/run-criterion.sh` runs every bench file and writes BENCHMARKS.md's tables.
#![allow(missing_docs)]

use core::hint::black_box;
use core::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use psp_benches::criterion_config;
use psp_core::scramble::{Descrambler, Kernel, Scrambler, Seed, revised, straightforward};
use ring::aead::{AES_128_GCM, Aad, LessSafeKey, Nonce, UnboundKey};

const SIZES: [usize; 6] = [64, 512, 1280, 1500, 9000, 65536];
/// The straightforward version costs ~64 XORs per byte; only bench it on small sizes.
const SLOW_MAX: usize = 1500;

fn bench(c: &mut Criterion) {
    let seed = Seed::from_key(b"bench key");
    let mut g = c.benchmark_group("scramble");
    for &n in &SIZES {
        g.throughput(Throughput::Bytes(n as u64));
        let src: Vec<u8> = (0..n).map(|i| (i * 13 + 7) as u8).collect();
        let mut buf = src.clone();

        g.bench_with_input(BenchmarkId::new("memcpy", n), &src, |b, src| {
            b.iter(|| buf.copy_from_slice(black_box(src)))
        });
        let key = LessSafeKey::new(UnboundKey::new(&AES_128_GCM, &[7; 16]).unwrap());
        g.bench_function(BenchmarkId::new("aes128gcm_seal_ring", n), |b| {
            b.iter(|| {
                let nonce = Nonce::assume_unique_for_key([1; 12]);
                key.seal_in_place_separate_tag(nonce, Aad::empty(), black_box(&mut buf))
                    .unwrap()
            })
        });
        if n <= SLOW_MAX {
            let mut s = straightforward::Scrambler::new(&seed);
            g.bench_function(BenchmarkId::new("straightforward_scramble", n), |b| {
                b.iter(|| s.scramble_in_place(black_box(&mut buf)))
            });
            let mut d = straightforward::Descrambler::new(&seed);
            g.bench_function(BenchmarkId::new("straightforward_descramble", n), |b| {
                b.iter(|| d.descramble_in_place(black_box(&mut buf)))
            });
        }
        let mut s = revised::Scrambler::new(&seed);
        g.bench_function(BenchmarkId::new("revised_scramble", n), |b| {
            b.iter(|| s.scramble_in_place(black_box(&mut buf)))
        });
        let mut d = revised::Descrambler::new(&seed);
        g.bench_function(BenchmarkId::new("revised_descramble", n), |b| {
            b.iter(|| d.descramble_in_place(black_box(&mut buf)))
        });
        for &k in Kernel::ALL {
            let (Some(mut s), Some(mut d)) = (
                Scrambler::with_kernel(&seed, k),
                Descrambler::with_kernel(&seed, k),
            ) else {
                continue;
            };
            g.bench_function(BenchmarkId::new(format!("{}_scramble", k.name()), n), |b| {
                b.iter(|| s.scramble_in_place(black_box(&mut buf)))
            });
            g.bench_function(
                BenchmarkId::new(format!("{}_descramble", k.name()), n),
                |b| b.iter(|| d.descramble_in_place(black_box(&mut buf))),
            );
        }
    }
    g.finish();
}

/// 0.3 s warm-up, 0.9 s measuring, 30 samples: about 1.55 s per benchmark with the analysis.
fn config() -> Criterion {
    criterion_config(Duration::from_millis(300), Duration::from_millis(900), 30)
}

criterion_group! {
    name = benches;
    config = config();
    targets = bench
}
criterion_main!(benches);
