//! Whole-frame seal and open per cipher suite (`psp_core::protect`), at 64/512/1500/9000-byte
//! inner Ethernet frames, reported as bytes of inner frame per second.
//!
//! `open` includes the replay check and commit; each iteration opens a freshly sealed frame
//! (sealing and copying happen in the untimed setup): `cargo bench -p psp-benches --bench
//! seal_open`. Duration: 7 suites × 4 sizes × seal and open = 56 benchmarks, 83 s measured on the
//! project's 2-vCPU guest (2026-11-29, BENCHMARKS.md), build not included; each benchmark's time
//! budget is `config()`'s. `benches/run-criterion.sh` runs every bench file and writes
//! BENCHMARKS.md's tables.
#![allow(missing_docs)]

use core::hint::black_box;
use core::time::Duration;

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use psp_benches::criterion_config;
use psp_core::crypto::{SuiteId, SuiteKey};
use psp_core::protect::{Opener, OpenerConfig, Sealer, SealerConfig};
use psp_core::time::Instant;
use psp_core::wire::{MIN_FRAME_LEN, Seq};

const SIZES: [usize; 4] = [64, 512, 1500, 9000];

fn key(suite: SuiteId) -> SuiteKey {
    let bytes: Vec<u8> = (0..suite.key_len()).map(|i| i as u8).collect();
    SuiteKey::new(suite, &bytes).expect("valid key length")
}

fn sealer(suite: SuiteId) -> Sealer {
    let cfg = SealerConfig::new().with_allow_none(true);
    Sealer::new(key(suite), Seq(0), cfg).expect("sealer")
}

fn opener(suite: SuiteId) -> Opener {
    let cfg = OpenerConfig::new().with_allow_none(true);
    Opener::new(key(suite), cfg).expect("opener")
}

fn inner_frame(len: usize) -> Vec<u8> {
    let mut f = vec![0u8; len];
    f[..6].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
    f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
    f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    for (i, b) in f[14..].iter_mut().enumerate() {
        *b = i as u8;
    }
    f
}

fn bench_seal(c: &mut Criterion) {
    let mut group = c.benchmark_group("seal");
    for &suite in SuiteId::ALL {
        for &size in &SIZES {
            let mut s = sealer(suite);
            let inner = inner_frame(size);
            let mut out = vec![0u8; size.max(MIN_FRAME_LEN) + s.overhead()];
            group.throughput(Throughput::Bytes(size as u64));
            group.bench_function(format!("{}/{size}", suite.name()), |b| {
                b.iter(|| {
                    let sealed = s
                        .seal(Instant::ZERO, black_box(&inner), &mut out)
                        .expect("seal");
                    black_box(sealed.len())
                });
            });
        }
    }
    group.finish();
}

fn bench_open(c: &mut Criterion) {
    let mut group = c.benchmark_group("open");
    for &suite in SuiteId::ALL {
        for &size in &SIZES {
            let mut s = sealer(suite);
            let mut o = opener(suite);
            let inner = inner_frame(size);
            let mut out = vec![0u8; size.max(MIN_FRAME_LEN) + s.overhead()];
            group.throughput(Throughput::Bytes(size as u64));
            group.bench_function(format!("{}/{size}", suite.name()), |b| {
                b.iter_batched_ref(
                    || {
                        s.seal(Instant::ZERO, &inner, &mut out)
                            .expect("seal")
                            .to_vec()
                    },
                    |frame| {
                        let opened = o.open(Instant::ZERO, frame).expect("open");
                        black_box(opened.frame().len())
                    },
                    BatchSize::SmallInput,
                );
            });
        }
    }
    group.finish();
}

/// 0.3 s warm-up, 1 s measuring, 20 samples.
fn config() -> Criterion {
    criterion_config(Duration::from_millis(300), Duration::from_millis(1000), 20)
}

criterion_group! {
    name = benches;
    config = config();
    targets = bench_seal, bench_open
}
criterion_main!(benches);
