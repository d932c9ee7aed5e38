//! The rate controller as a loss × RTT table of steady-state rate and oscillation, kept as a
//! snapshot (`tests/snapshots/normalize_loss_rtt.md`).
//!
//! The simulation is deterministic (seeded RNG, integer core), so the table is compared as text.
//! After an intended change, regenerate it with
//! `UPDATE_SNAPSHOTS=1 cargo test -p psp-test --test normalize_table` and review the diff.

use core::fmt::Write as _;

use psp_core::normalize::{Algorithm, NormConfig, Rate};
use psp_core::time::{Duration, Instant};
use psp_test::{LinkConfig, Pair};

const SNAPSHOT: &str = "tests/snapshots/normalize_loss_rtt.md";
const LOSSES_PPM: [u32; 4] = [0, 1_000, 10_000, 50_000];
const RTTS_MS: [u64; 3] = [10, 40, 100];
const WARMUP_S: u64 = 10;
const END_S: u64 = 30;

struct Cell {
    mean_kbps: f64,
    osc_pct: f64,
    min_kbps: u32,
    max_kbps: u32,
    queue_drop_pct: f64,
    queue_ms: f64,
}

fn run(algorithm: Algorithm, loss_ppm: u32, rtt_ms: u64) -> Cell {
    let mut c = NormConfig::default();
    c.algorithm = algorithm;
    c.s_goal = Rate::from_kbps(16_000);
    let link =
        LinkConfig::new(10_000_000, Duration::from_millis(rtt_ms / 2)).with_loss_ppm(loss_ppm);
    let mut pair = Pair::new(c, c, link, link, 1);
    pair.sample_every(Duration::from_millis(10));
    pair.run_until(Instant::from_secs(WARMUP_S));
    let before = pair.ab.stats();
    pair.run_until(Instant::from_secs(END_S));
    let after = pair.ab.stats();
    let rates: Vec<u32> = pair
        .samples
        .iter()
        .filter(|s| s.at >= Instant::from_secs(WARMUP_S))
        .map(|s| s.a.s_current.kbps())
        .collect();
    let n = rates.len() as f64;
    let mean = rates.iter().map(|&r| f64::from(r)).sum::<f64>() / n;
    let var = rates
        .iter()
        .map(|&r| (f64::from(r) - mean).powi(2))
        .sum::<f64>()
        / n;
    let sent = (after.sent - before.sent) as f64;
    Cell {
        mean_kbps: mean,
        osc_pct: 100.0 * var.sqrt() / mean,
        min_kbps: rates.iter().copied().min().unwrap_or(0),
        max_kbps: rates.iter().copied().max().unwrap_or(0),
        queue_drop_pct: 100.0 * (after.dropped_queue - before.dropped_queue) as f64 / sent,
        queue_ms: after.mean_queue_wait_since(&before).total_micros() as f64 / 1000.0,
    }
}

fn table() -> String {
    let cases: Vec<(u32, u64)> = LOSSES_PPM
        .iter()
        .flat_map(|&l| RTTS_MS.iter().map(move |&r| (l, r)))
        .collect();
    // Two threads (the CI machine has two cores); each cell is independent and deterministic.
    let results: Vec<(Cell, Cell)> = std::thread::scope(|s| {
        let handles: Vec<_> = cases
            .chunks(cases.len().div_ceil(2))
            .map(|chunk| {
                s.spawn(move || {
                    chunk
                        .iter()
                        .map(|&(l, r)| {
                            (
                                run(Algorithm::Faithful, l, r),
                                run(Algorithm::Improved, l, r),
                            )
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("table thread panicked"))
            .collect()
    });
    let mut t = String::new();
    t.push_str(
        "# Rate controller: loss × RTT (psp-test simulation)\n\n\
         A→B steady-state sending rate S_current over 10..30 s of virtual time, sampled every \
         10 ms. Path: 10 Mbit/s bottleneck with a 20-packet drop-tail queue, random loss \
         before it, RTT split evenly between the directions (the reverse path is the same). \
         S_goal 16 Mbit/s, 1460-byte frames, S_min = S_step = 204 kbit/s, O_min 40 ms, w 1/8, \
         S_init = S_goal. osc = standard deviation / mean; qdrop = frames dropped by the full \
         queue / frames sent; queue = mean wait at the bottleneck. Regenerate: \
         `UPDATE_SNAPSHOTS=1 cargo test -p psp-test --test normalize_table`.\n\n",
    );
    t.push_str(
        "| loss | RTT | faithful Mbit/s | osc | min-max | qdrop | queue | \
         improved Mbit/s | osc | min-max | qdrop | queue |\n\
         |---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for (&(loss, rtt), (f, i)) in cases.iter().zip(&results) {
        let _ = writeln!(
            t,
            "| {:.1}% | {} ms | {} | {} | {} | {} | {:.1} ms | {} | {} | {} | {} | {:.1} ms |",
            f64::from(loss) / 10_000.0,
            rtt,
            mbps(f.mean_kbps),
            pct(f.osc_pct),
            range(f),
            pct(f.queue_drop_pct),
            f.queue_ms,
            mbps(i.mean_kbps),
            pct(i.osc_pct),
            range(i),
            pct(i.queue_drop_pct),
            i.queue_ms,
        );
    }
    t
}

fn mbps(kbps: f64) -> String {
    format!("{:.2}", kbps / 1000.0)
}

fn pct(p: f64) -> String {
    format!("{p:.1}%")
}

fn range(c: &Cell) -> String {
    format!(
        "{:.1}-{:.1}",
        f64::from(c.min_kbps) / 1000.0,
        f64::from(c.max_kbps) / 1000.0
    )
}

#[test]
fn loss_rtt_table_matches_snapshot() {
    let got = table();
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(SNAPSHOT);
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        std::fs::write(&path, &got).expect("write snapshot");
        eprintln!("wrote {}", path.display());
        return;
    }
    let want = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "cannot read {} ({e}); generate it with UPDATE_SNAPSHOTS=1",
            path.display()
        )
    });
    if got != want {
        panic!(
            "loss × RTT table differs from {SNAPSHOT}; if intended, regenerate with \
             UPDATE_SNAPSHOTS=1 and review.\n--- got ---\n{got}\n--- want ---\n{want}"
        );
    }
}
