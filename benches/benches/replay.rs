//! Anti-replay window: cost of check + commit per frame, in order and reordered.
#![allow(missing_docs)]

use core::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
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

criterion_group!(benches, replay);
criterion_main!(benches);
