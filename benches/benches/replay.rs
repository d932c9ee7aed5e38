//! Anti-replay window: cost of check + commit per frame, in order and reordered
//! (`cargo bench -p psp-benches --bench replay`). Duration: 2 benchmarks at about 3 s each
//! (see `config()`), under 10 s on the project's 2-vCPU guest, build not included.
#![allow(missing_docs)]

use core::hint::black_box;
use core::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use psp_benches::criterion_config;
use psp_core::replay::ReplayWindow;

fn replay(c: &mut Criterion) {
    let mut g = c.benchmark_group("replay");
    g.throughput(Throughput::Elements(1024));
    g.bench_function("in_order_1024", |b| {
        let mut w = ReplayWindow::default();
        let mut seq = 0u32;
        b.iter(|| {
            for _ in 0..1024 {
                seq += 1;
                w.check(black_box(seq)).ok();
                w.commit(seq).ok();
            }
        });
    });
    g.bench_function("reordered_pairs_1024", |b| {
        let mut w = ReplayWindow::default();
        let mut seq = 0u32;
        b.iter(|| {
            for _ in 0..512 {
                seq += 2;
                for s in [seq, seq - 1] {
                    w.check(black_box(s)).ok();
                    w.commit(s).ok();
                }
            }
        });
    });
    g.finish();
}

/// 0.5 s warm-up, 2 s measuring, 50 samples (criterion's defaults, 3 s + 5 s and 100 samples,
/// spent 10 s per benchmark for no better figure).
fn config() -> Criterion {
    criterion_config(Duration::from_millis(500), Duration::from_secs(2), 50)
}

criterion_group! {
    name = benches;
    config = config();
    targets = replay
}
criterion_main!(benches);
