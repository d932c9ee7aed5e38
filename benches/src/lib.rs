//! Shared helpers for the benchmarks and the Table II reproduction (`--bin table`).
//!
//! - [`Suite`]: a small interleaved timer. Every case is calibrated to a batch length, then
//!   the suite runs *rounds*: one batch of every case per round, so slow drift of a shared
//!   machine hits all cases alike. Each case's result is the median ns/op over its batches.
//! - Block-mode helpers ([`ecb_encrypt`], [`cbc_encrypt`], ...) that run a RustCrypto block
//!   cipher over a `&mut [u8]` without copying, shared by `benches/primitives.rs` and the table.
//! - Pure formatting helpers (Markdown table, µs, ratios, dates, `/proc/cpuinfo`), unit-tested.
//! - [`criterion_config`]: the criterion settings every bench file starts from, and
//!   [`criterion_tables`]: their saved estimates as BENCHMARKS.md's tables.

use core::hint::black_box;
use core::time::Duration;
use std::time::Instant;

use cipher::inout::InOutBuf;
use cipher::{BlockDecrypt, BlockDecryptMut, BlockEncrypt, BlockEncryptMut};

pub mod congestion;
pub mod criterion_tables;

/// How long and how often a [`Suite`] measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// Number of rounds; each round runs one batch of every case.
    pub rounds: usize,
    /// Target wall time of one batch.
    pub batch: Duration,
    /// Warm-up batches per case before calibration is final.
    pub warmup_batches: usize,
}

impl Config {
    /// The default: about 0.8 s per case, median of 31 batches.
    pub const FULL: Self = Self {
        rounds: 31,
        batch: Duration::from_millis(25),
        warmup_batches: 2,
    };

    /// CI smoke mode: a few tiny batches, only checks that everything runs.
    pub const QUICK: Self = Self {
        rounds: 3,
        batch: Duration::from_micros(300),
        warmup_batches: 0,
    };
}

/// The criterion settings a bench file of this crate starts from: `warm_up` and `measurement`
/// per benchmark, `samples` samples, and no plots.
///
/// Criterion draws its HTML report with gnuplot whenever gnuplot is installed, whatever its cargo
/// features: about 20 SVG plots per benchmark, several of them kernel density estimates over the
/// 100 000 bootstrap resamples. On the project's 2-vCPU guest that cost about 4 s per benchmark,
/// against 1.3 s of warm-up and measuring in `--bench primitives`, and made its 60 benchmarks
/// take 6 minutes. Nothing reads the report (`benches/run-criterion.sh` turns the saved estimates
/// into tables); `-- --plotting-backend gnuplot` brings it back for one run.
///
/// A benchmark then costs about 1.5 × `warm_up` (criterion doubles the warm-up batch until the
/// time is up) + `measurement` + 0.2 s of analysis (the bootstrap, on one thread: the workspace
/// builds criterion without `rayon`), and twice the warm-up and measurement for `iter_batched`
/// routines (their untimed set-up runs in between). Command-line flags (`--quick`,
/// `--measurement-time`, ...) still override these, because `criterion_group!` applies them
/// afterwards.
pub fn criterion_config(
    warm_up: Duration,
    measurement: Duration,
    samples: usize,
) -> criterion::Criterion {
    criterion::Criterion::default()
        .warm_up_time(warm_up)
        .measurement_time(measurement)
        .sample_size(samples)
        .without_plots()
}

/// A handle to a case added to a [`Suite`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CaseId(usize);

/// One timed operation: `run(n)` performs the operation `n` times.
struct Case<'a> {
    name: String,
    run: Box<dyn FnMut(u64) + 'a>,
    iters: u64,
    samples: Vec<f64>,
}

/// A set of cases timed together, interleaved round by round.
#[derive(Default)]
pub struct Suite<'a> {
    cases: Vec<Case<'a>>,
}

impl<'a> Suite<'a> {
    /// An empty suite.
    pub fn new() -> Self {
        Self { cases: Vec::new() }
    }

    /// Adds a case; `op` is one operation (e.g. encrypting one 1280-byte message).
    /// Wrap inputs and outputs in [`black_box`] inside `op`.
    pub fn add(&mut self, name: impl Into<String>, mut op: impl FnMut() + 'a) -> CaseId {
        let id = CaseId(self.cases.len());
        self.cases.push(Case {
            name: name.into(),
            run: Box::new(move |n| {
                for _ in 0..n {
                    op();
                }
            }),
            iters: 1,
            samples: Vec::new(),
        });
        id
    }

    /// Number of cases.
    pub fn len(&self) -> usize {
        self.cases.len()
    }

    /// Whether the suite has no cases.
    pub fn is_empty(&self) -> bool {
        self.cases.is_empty()
    }

    /// The name a case was added with.
    pub fn name(&self, id: CaseId) -> &str {
        &self.cases[id.0].name
    }

    /// Calibrates and measures every case; `progress` is called with each case name as it
    /// is calibrated. Returns the median ns per operation of each case, indexed by [`CaseId`].
    pub fn run(&mut self, cfg: &Config, mut progress: impl FnMut(&str)) -> Results {
        let target_ns = cfg.batch.as_secs_f64() * 1e9;
        for case in &mut self.cases {
            progress(&case.name);
            // First call: cold; the second estimate is from a batch near the target length.
            let t = time_batch(&mut case.run, 1);
            let mut iters = iters_for(target_ns, t);
            for _ in 0..cfg.warmup_batches.max(1) {
                let t = time_batch(&mut case.run, iters);
                iters = iters_for(target_ns, t / iters as f64);
            }
            case.iters = iters;
            case.samples.clear();
        }
        for _ in 0..cfg.rounds.max(1) {
            for case in &mut self.cases {
                let t = time_batch(&mut case.run, case.iters);
                case.samples.push(t / case.iters as f64);
            }
        }
        Results {
            ns: self
                .cases
                .iter()
                .map(|c| median(&c.samples).unwrap_or(f64::NAN))
                .collect(),
        }
    }
}

/// Median ns per operation of each case of a [`Suite`] run.
#[derive(Clone, Debug, PartialEq)]
pub struct Results {
    ns: Vec<f64>,
}

impl Results {
    /// Median ns per operation of `id`.
    pub fn ns(&self, id: CaseId) -> f64 {
        self.ns[id.0]
    }

    /// Median µs per operation of `id`.
    pub fn us(&self, id: CaseId) -> f64 {
        self.ns[id.0] / 1e3
    }
}

/// Wall time in ns of `run(iters)`.
fn time_batch(run: &mut dyn FnMut(u64), iters: u64) -> f64 {
    let start = Instant::now();
    run(black_box(iters));
    start.elapsed().as_secs_f64() * 1e9
}

/// Iterations so that a batch of `per_iter_ns` operations lasts about `target_ns` (at least 1).
pub fn iters_for(target_ns: f64, per_iter_ns: f64) -> u64 {
    if per_iter_ns.is_nan() || per_iter_ns <= 0.0 || per_iter_ns.is_infinite() {
        return 1;
    }
    let n = (target_ns / per_iter_ns).ceil();
    if n < 1.0 {
        1
    } else if n > 1e12 {
        1_000_000_000_000
    } else {
        n as u64
    }
}

/// The median of `xs` (mean of the two middle values for an even count); `None` if empty.
/// NaNs sort last.
pub fn median(xs: &[f64]) -> Option<f64> {
    if xs.is_empty() {
        return None;
    }
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let mid = v.len() / 2;
    Some(if v.len() % 2 == 1 {
        v[mid]
    } else {
        (v[mid - 1] + v[mid]) / 2.0
    })
}

/// Encrypts the whole blocks of `buf` in place in ECB mode (a partial tail is left as is).
pub fn ecb_encrypt<C: BlockEncrypt>(cipher: &C, buf: &mut [u8]) {
    let (blocks, _tail) = InOutBuf::from(buf).into_chunks();
    cipher.encrypt_blocks_inout(blocks);
}

/// Decrypts the whole blocks of `buf` in place in ECB mode (a partial tail is left as is).
pub fn ecb_decrypt<C: BlockDecrypt>(cipher: &C, buf: &mut [u8]) {
    let (blocks, _tail) = InOutBuf::from(buf).into_chunks();
    cipher.decrypt_blocks_inout(blocks);
}

/// Encrypts the whole blocks of `buf` in place with a stateful mode (e.g. `cbc::Encryptor`),
/// continuing its chain.
pub fn cbc_encrypt<C: BlockEncryptMut>(mode: &mut C, buf: &mut [u8]) {
    let (blocks, _tail) = InOutBuf::from(buf).into_chunks();
    mode.encrypt_blocks_inout_mut(blocks);
}

/// Decrypts the whole blocks of `buf` in place with a stateful mode (e.g. `cbc::Decryptor`),
/// continuing its chain.
pub fn cbc_decrypt<C: BlockDecryptMut>(mode: &mut C, buf: &mut [u8]) {
    let (blocks, _tail) = InOutBuf::from(buf).into_chunks();
    mode.decrypt_blocks_inout_mut(blocks);
}

/// A deterministic test message of `len` bytes (not all zero, not secret).
pub fn message(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 131 + 7) as u8).collect()
}

/// Formats a time in µs: 4 significant digits, at least 3 decimals below 1 µs.
pub fn fmt_us(us: f64) -> String {
    if !us.is_finite() {
        return "n/a".to_owned();
    }
    let a = us.abs();
    if a >= 1000.0 {
        format!("{us:.0}")
    } else if a >= 100.0 {
        format!("{us:.1}")
    } else if a >= 10.0 {
        format!("{us:.2}")
    } else {
        format!("{us:.3}")
    }
}

/// Formats a dimensionless ratio: 3 significant digits, scientific below 0.001.
pub fn fmt_ratio(r: f64) -> String {
    if !r.is_finite() {
        return "n/a".to_owned();
    }
    let a = r.abs();
    if a == 0.0 {
        "0".to_owned()
    } else if a >= 100.0 {
        format!("{r:.0}")
    } else if a >= 10.0 {
        format!("{r:.1}")
    } else if a >= 1.0 {
        format!("{r:.2}")
    } else if a >= 0.001 {
        // Three significant digits.
        let decimals = (2 - a.log10().floor() as i32).clamp(2, 5) as usize;
        format!("{r:.decimals$}")
    } else {
        format!("{r:.2e}")
    }
}

/// Renders a Markdown table with a header row; cells of short rows are left empty.
pub fn markdown_table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut out = String::new();
    push_row(&mut out, header.iter().copied(), header.len());
    push_row(&mut out, header.iter().map(|_| "---"), header.len());
    for row in rows {
        push_row(&mut out, row.iter().map(String::as_str), header.len());
    }
    out
}

fn push_row<'s>(out: &mut String, cells: impl Iterator<Item = &'s str>, width: usize) {
    let mut n = 0;
    out.push('|');
    for cell in cells.take(width) {
        out.push(' ');
        // A literal `|` would break the row.
        out.push_str(&cell.replace('|', "\\|"));
        out.push_str(" |");
        n += 1;
    }
    for _ in n..width {
        out.push_str("  |");
    }
    out.push('\n');
}

/// The first `model name` of a `/proc/cpuinfo` text.
pub fn cpu_model(cpuinfo: &str) -> Option<&str> {
    cpuinfo.lines().find_map(|line| {
        let (key, value) = line.split_once(':')?;
        (key.trim() == "model name").then(|| value.trim())
    })
}

/// The CPU's model name with its family, model and widest vector extension, e.g.
/// `AMD EPYC (family 25, model 1; AVX2)`: virtual machines often report only a vendor-level
/// model name, and the family tells Zen 3 from Zen 4 or one Xeon generation from the next.
pub fn cpu_description(cpuinfo: &str) -> Option<String> {
    let field = |name: &str| {
        cpuinfo.lines().find_map(|line| {
            let (key, value) = line.split_once(':')?;
            (key.trim() == name).then(|| value.trim())
        })
    };
    let flags: Vec<&str> = field("flags").unwrap_or("").split_whitespace().collect();
    let simd = if flags.contains(&"avx512f") {
        "AVX-512"
    } else if flags.contains(&"avx2") {
        "AVX2"
    } else {
        "no AVX2"
    };
    Some(format!(
        "{} (family {}, model {}; {simd})",
        cpu_model(cpuinfo)?,
        field("cpu family").unwrap_or("?"),
        field("model").unwrap_or("?"),
    ))
}

/// The UTC civil date `(year, month, day)` of a Unix time in seconds
/// (Howard Hinnant's `civil_from_days`).
pub fn civil_date(unix_secs: u64) -> (i64, u32, u32) {
    let z = (unix_secs / 86_400) as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_description_names_family_and_simd() {
        let info = "vendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 1\nmodel name\t: AMD EPYC\nflags\t\t: fpu sse2 avx2 sha_ni\n";
        assert_eq!(
            cpu_description(info).as_deref(),
            Some("AMD EPYC (family 25, model 1; AVX2)")
        );
        assert_eq!(cpu_description(""), None);
    }

    #[test]
    fn median_odd_even_empty() {
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[3.0]), Some(3.0));
        assert_eq!(median(&[5.0, 1.0, 3.0]), Some(3.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&[1.0, f64::NAN, 2.0]), Some(2.0));
    }

    #[test]
    fn iters_for_bounds() {
        assert_eq!(iters_for(1000.0, 10.0), 100);
        assert_eq!(iters_for(1000.0, 3000.0), 1);
        assert_eq!(iters_for(1000.0, 0.0), 1);
        assert_eq!(iters_for(1000.0, f64::NAN), 1);
        assert_eq!(iters_for(1e15, 1e-3), 1_000_000_000_000);
    }

    #[test]
    fn formats_us_and_ratios() {
        assert_eq!(fmt_us(2240.4), "2240");
        assert_eq!(fmt_us(123.45), "123.5");
        assert_eq!(fmt_us(12.345), "12.35");
        assert_eq!(fmt_us(0.0352), "0.035");
        assert_eq!(fmt_us(f64::NAN), "n/a");
        assert_eq!(fmt_ratio(1.0), "1.00");
        assert_eq!(fmt_ratio(2.987), "2.99");
        assert_eq!(fmt_ratio(15.71), "15.7");
        assert_eq!(fmt_ratio(424.0), "424");
        assert_eq!(fmt_ratio(0.4241), "0.424");
        assert_eq!(fmt_ratio(0.01571), "0.0157");
        assert_eq!(fmt_ratio(0.0001234), "1.23e-4");
        assert_eq!(fmt_ratio(0.0), "0");
        assert_eq!(fmt_ratio(f64::INFINITY), "n/a");
    }

    #[test]
    fn markdown_table_shape() {
        let t = markdown_table(
            &["a", "b"],
            &[
                vec!["1".into(), "x|y".into()],
                vec!["2".into()],
                vec!["3".into(), "4".into(), "dropped".into()],
            ],
        );
        assert_eq!(
            t,
            "| a | b |\n| --- | --- |\n| 1 | x\\|y |\n| 2 |  |\n| 3 | 4 |\n"
        );
    }

    #[test]
    fn cpu_model_parses_first() {
        let info = "processor\t: 0\nmodel name\t: Intel(R) Core(TM) i5-3230M CPU @ 2.60GHz\n\
                    processor\t: 1\nmodel name\t: other\n";
        assert_eq!(
            cpu_model(info),
            Some("Intel(R) Core(TM) i5-3230M CPU @ 2.60GHz")
        );
        assert_eq!(cpu_model("flags: sse\n"), None);
    }

    #[test]
    fn civil_dates() {
        assert_eq!(civil_date(0), (1970, 1, 1));
        assert_eq!(civil_date(951_782_400), (2000, 2, 29));
        assert_eq!(civil_date(1_709_164_800), (2024, 2, 29));
        assert_eq!(civil_date(1_735_689_599), (2024, 12, 31));
    }

    #[test]
    fn ecb_and_cbc_round_trip() {
        use cipher::{KeyInit, KeyIvInit};
        let msg = message(1280);
        let aes = aes::Aes128::new(&[7u8; 16].into());
        let mut buf = msg.clone();
        ecb_encrypt(&aes, &mut buf);
        assert_ne!(buf, msg);
        ecb_decrypt(&aes, &mut buf);
        assert_eq!(buf, msg);

        let mut enc = cbc::Encryptor::<blowfish::Blowfish>::new_from_slices(&[1; 16], &[2; 8])
            .expect("valid key and IV lengths");
        let mut dec = cbc::Decryptor::<blowfish::Blowfish>::new_from_slices(&[1; 16], &[2; 8])
            .expect("valid key and IV lengths");
        // Two messages continuing one chain.
        let (mut a, mut b) = (msg.clone(), msg.clone());
        cbc_encrypt(&mut enc, &mut a);
        cbc_encrypt(&mut enc, &mut b);
        assert_ne!(a, b);
        cbc_decrypt(&mut dec, &mut a);
        cbc_decrypt(&mut dec, &mut b);
        assert_eq!((a, b), (msg.clone(), msg));
    }

    #[test]
    fn suite_measures_in_order() {
        let mut count = 0u64;
        let mut suite = Suite::new();
        let a = suite.add("spin", || {
            count += 1;
            black_box(count);
        });
        let b = suite.add("noop", || {});
        assert_eq!(suite.len(), 2);
        assert_eq!(suite.name(a), "spin");
        let mut seen = Vec::new();
        let res = suite.run(&Config::QUICK, |n| seen.push(n.to_owned()));
        assert_eq!(seen, ["spin", "noop"]);
        assert!(res.ns(a).is_finite() && res.ns(a) >= 0.0);
        assert!(res.ns(b).is_finite());
        assert!((res.us(a) - res.ns(a) / 1e3).abs() < 1e-9);
    }
}
