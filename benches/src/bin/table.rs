//! Reproduces seed 001's Table II ("processing time of 1280 byte message") on this machine,
//! next to the ciphers and AEADs the PSP tunnel actually uses.
//!
//! ```text
//! cargo run --release -p psp-benches --bin table [-- --quick] [--markdown-only]
//! ```
//!
//! Every operation is timed on one 1280-byte message with keys already set up (an established
//! tunnel): the paper's numbers are for *encryption and decryption* of the message ("we
//! measured the processing time of the encryption and decryption, or the scrambling and
//! descrambling for a message with 1280 byte length"), so we compare them with our enc+dec
//! sum. All cases are timed interleaved in one run (see [`psp_benches::Suite`]); only ratios
//! within one run are meaningful on a shared machine. A table of psp-mp's stream protections
//! gives the CPU per byte of one segment (scramble, aes128-gcm, chacha20-poly1305, memcpy). A
//! last table compares psp-core's two crypto backends (ring and RustCrypto) on the same
//! operations. The output ends with one `RATIOS` line.

use core::hint::black_box;
use std::process::ExitCode;
use std::time::{SystemTime, UNIX_EPOCH};

use cipher::{KeyInit, KeyIvInit};
use hmac::{Hmac, Mac};
use psp_benches::{
    CaseId, Config, Results, Suite, cbc_decrypt, cbc_encrypt, civil_date, cpu_description,
    ecb_decrypt, ecb_encrypt, fmt_ratio, fmt_us, markdown_table, message,
};
use psp_core::crypto::sign::backend as sign_backend;
use psp_core::crypto::{SuiteId, SuiteKey};
use psp_core::primitives::aead::backend as aead_backend;
use psp_core::protect::{Opener, OpenerConfig, Sealer, SealerConfig};
use psp_core::scramble::{self, Kernel, Seed};
use psp_core::time::Instant;
use psp_core::wire::Seq;
use ring::aead::{self, Aad, LessSafeKey, Nonce, UnboundKey};
use sha1::Sha1;

/// The message length of Table II.
const MSG_LEN: usize = 1280;
/// The bulk length for the throughput comparison with memcpy.
const BULK_LEN: usize = 64 * 1024;
/// A fixed nonce: reusing it is fine for timing only (AES-GCM/ChaCha cost is data-independent).
const NONCE: [u8; 12] = [0x5a; 12];

/// Table II of seed 001 (ms per 1280-byte message, encryption + decryption, i5-3230M 2.6 GHz).
const PAPER_DES: f64 = 2.24;
const PAPER_TDEA: f64 = 6.69;
const PAPER_AES128: f64 = 2.29;
const PAPER_AES192: f64 = 2.80;
const PAPER_AES256: f64 = 3.40;
const PAPER_STRAIGHT: f64 = 0.950;
const PAPER_REVISED: f64 = 0.0352;

const USAGE: &str = "usage: table [--quick] [--markdown-only]
  --quick          tiny iteration counts (CI smoke test, numbers are meaningless)
  --markdown-only  print only the header line, the tables and the RATIOS line";

/// Command-line options.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Opts {
    quick: bool,
    markdown_only: bool,
}

/// One row of the 1280-byte table: times in µs per message.
#[derive(Clone, Debug, PartialEq)]
struct Row {
    method: String,
    paper_ms: Option<f64>,
    enc_us: f64,
    dec_us: f64,
}

impl Row {
    fn sum_us(&self) -> f64 {
        self.enc_us + self.dec_us
    }
}

/// The headline numbers of one run.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Headline {
    /// Production scramble throughput / memcpy throughput at 64 KiB.
    scramble_vs_memcpy: f64,
    /// Production descramble throughput / memcpy throughput at 64 KiB.
    descramble_vs_memcpy: f64,
    /// AES-128-GCM seal time / production scramble time, 1280 B.
    speedup_vs_gcm: f64,
    /// Portable kernel scramble and descramble µs per 1280 B.
    portable_us: (f64, f64),
    /// AES-128-GCM seal µs per 1280 B.
    gcm_seal_us: f64,
}

fn main() -> ExitCode {
    let opts = match parse_args(std::env::args().skip(1)) {
        Ok(Some(opts)) => opts,
        Ok(None) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("table: {e}\n{USAGE}");
            return ExitCode::FAILURE;
        }
    };
    match run(opts) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("table: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `Ok(None)` means `--help`.
fn parse_args(args: impl Iterator<Item = String>) -> Result<Option<Opts>, String> {
    let mut opts = Opts::default();
    for arg in args {
        match arg.as_str() {
            "--quick" => opts.quick = true,
            "--markdown-only" => opts.markdown_only = true,
            "-h" | "--help" => return Ok(None),
            // `cargo bench` passes `--bench` to every target; accept and ignore it.
            "--bench" => {}
            other => return Err(format!("unknown argument `{other}`")),
        }
    }
    Ok(Some(opts))
}

/// The ids of the two cases (enc, dec) of one row, or of a derived value.
#[derive(Clone, Copy)]
enum Timing {
    Pair(CaseId, CaseId),
    /// `open` is timed as restore-copy + open; the copy case is subtracted.
    OpenMinusCopy {
        seal: CaseId,
        copy_open: CaseId,
        copy: CaseId,
    },
}

struct Planned {
    method: String,
    paper_ms: Option<f64>,
    timing: Timing,
}

struct Bulk {
    label: String,
    scramble: CaseId,
    descramble: CaseId,
}

fn run(opts: Opts) -> Result<(), String> {
    let cfg = if opts.quick {
        Config::QUICK
    } else {
        Config::FULL
    };
    let mut warnings = Vec::new();
    let mut suite = Suite::new();
    let mut plan = Vec::new();

    // --- memcpy -------------------------------------------------------------------------
    let memcpy = add_copy(&mut suite, "memcpy", MSG_LEN);
    plan.push(Planned {
        method: "memcpy (`copy_from_slice`)".into(),
        paper_ms: None,
        timing: Timing::Pair(memcpy, memcpy),
    });

    // --- Table II ciphers, ECB, RustCrypto --------------------------------------------
    let des_id = plan_ecb(&mut suite, &mut plan, "DES-ECB", Some(PAPER_DES), || {
        des::Des::new(&[0x13; 8].into())
    });
    plan_ecb(
        &mut suite,
        &mut plan,
        "3DES-ECB (TDEA, EDE3)",
        Some(PAPER_TDEA),
        || des::TdesEde3::new(&[0x13; 24].into()),
    );
    plan_ecb(
        &mut suite,
        &mut plan,
        "AES-128-ECB",
        Some(PAPER_AES128),
        || aes::Aes128::new(&[0x24; 16].into()),
    );
    plan_ecb(
        &mut suite,
        &mut plan,
        "AES-192-ECB",
        Some(PAPER_AES192),
        || aes::Aes192::new(&[0x24; 24].into()),
    );
    plan_ecb(
        &mut suite,
        &mut plan,
        "AES-256-ECB",
        Some(PAPER_AES256),
        || aes::Aes256::new(&[0x24; 32].into()),
    );

    // --- the scrambler ----------------------------------------------------------------
    let seed = Seed::from_key(b"psp table ii benchmark key");
    {
        let (mut s, mut d) = (
            scramble::straightforward::Scrambler::new(&seed),
            scramble::straightforward::Descrambler::new(&seed),
        );
        check_scrambler("straightforward", &seed, &mut warnings, |seed, m| {
            scramble::straightforward::Scrambler::new(seed).scramble_in_place(m);
            scramble::straightforward::Descrambler::new(seed).descramble_in_place(m);
        });
        let enc = add_in_place(&mut suite, "straightforward scramble", MSG_LEN, move |b| {
            s.scramble_in_place(b);
        });
        let dec = add_in_place(
            &mut suite,
            "straightforward descramble",
            MSG_LEN,
            move |b| {
                d.descramble_in_place(b);
            },
        );
        plan.push(Planned {
            method: "proposed, straightforward (paper §IV)".into(),
            paper_ms: Some(PAPER_STRAIGHT),
            timing: Timing::Pair(enc, dec),
        });
    }
    {
        let (mut s, mut d) = (
            scramble::revised::Scrambler::new(&seed),
            scramble::revised::Descrambler::new(&seed),
        );
        check_scrambler("revised", &seed, &mut warnings, |seed, m| {
            scramble::revised::Scrambler::new(seed).scramble_in_place(m);
            scramble::revised::Descrambler::new(seed).descramble_in_place(m);
        });
        let enc = add_in_place(&mut suite, "revised scramble", MSG_LEN, move |b| {
            s.scramble_in_place(b);
        });
        let dec = add_in_place(&mut suite, "revised descramble", MSG_LEN, move |b| {
            d.descramble_in_place(b);
        });
        plan.push(Planned {
            method: "proposed, revised (paper §IV)".into(),
            paper_ms: Some(PAPER_REVISED),
            timing: Timing::Pair(enc, dec),
        });
    }

    // Production: every available kernel, then the auto-selected one.
    let mut kernels: Vec<(String, Option<Kernel>)> = Kernel::ALL
        .iter()
        .filter(|k| k.is_available())
        .map(|&k| (format!("production [{}]", k.name()), Some(k)))
        .collect();
    // The kernel per direction is chosen by measuring each on this CPU (as the gateway does at
    // start-up), not by feature flags alone.
    let defaults = scramble::KernelChoice::detect();
    let origin = std::time::Instant::now();
    let mut cal_buf = vec![0u8; BULK_LEN];
    let cal = scramble::select::calibrate(
        || Instant::from_std(origin, std::time::Instant::now()),
        &mut cal_buf,
        20,
    );
    scramble::select::set_preferred(cal.choice).map_err(|e| e.to_string())?;
    let calibration = format!(
        "calibrated: scramble {} / descramble {} (per-CPU default without calibration: {} / {}); \
         fastest of 20 rounds at 64 KiB: {}",
        cal.choice.scramble.name(),
        cal.choice.descramble.name(),
        defaults.scramble.name(),
        defaults.descramble.name(),
        cal.timings
            .iter()
            .flatten()
            .map(|t| format!(
                "{} {:.1}/{:.1} GB/s",
                t.kernel.name(),
                gbps_of(t.scramble),
                gbps_of(t.descramble)
            ))
            .collect::<Vec<_>>()
            .join(", ")
    );
    kernels.push((
        format!(
            "production (calibrated = {}/{})",
            cal.choice.scramble.name(),
            cal.choice.descramble.name()
        ),
        None,
    ));
    let mut bulk = Vec::new();
    let memcpy_bulk = add_copy(&mut suite, "memcpy 64 KiB", BULK_LEN);
    let mut portable = None;
    let mut auto = None;
    for (label, kernel) in &kernels {
        let make = |seed: &Seed| match kernel {
            Some(k) => scramble::Scrambler::with_kernel(seed, *k)
                .zip(scramble::Descrambler::with_kernel(seed, *k)),
            None => Some((
                scramble::Scrambler::new(seed),
                scramble::Descrambler::new(seed),
            )),
        };
        let Some((s, d)) = make(&seed) else {
            warnings.push(format!("{label}: kernel unavailable, skipped"));
            continue;
        };
        check_scrambler(label, &seed, &mut warnings, |seed, m| {
            if let Some((mut s, mut d)) = make(seed) {
                s.scramble_in_place(m);
                d.descramble_in_place(m);
            }
        });
        let pair = add_scrambler(&mut suite, label, MSG_LEN, s.clone(), d.clone());
        let bulk_pair = add_scrambler(&mut suite, &format!("{label} 64 KiB"), BULK_LEN, s, d);
        plan.push(Planned {
            method: label.clone(),
            paper_ms: None,
            timing: Timing::Pair(pair.0, pair.1),
        });
        bulk.push(Bulk {
            label: label.clone(),
            scramble: bulk_pair.0,
            descramble: bulk_pair.1,
        });
        match kernel {
            Some(Kernel::Portable) => portable = Some(pair),
            None => auto = Some((pair, bulk_pair)),
            Some(_) => {}
        }
    }
    let Some((auto_1280, auto_bulk)) = auto else {
        return Err("the auto-selected production scrambler is unavailable".into());
    };

    // --- other symmetric primitives ---------------------------------------------------
    {
        let (key, iv) = ([0x35u8; 16], [0x46u8; 8]);
        let mut enc = cbc::Encryptor::<blowfish::Blowfish>::new_from_slices(&key, &iv)
            .map_err(|_| "Blowfish-CBC: bad key length")?;
        let mut dec = cbc::Decryptor::<blowfish::Blowfish>::new_from_slices(&key, &iv)
            .map_err(|_| "Blowfish-CBC: bad key length")?;
        // Both chains continue across messages: the cost equals a fresh IV per message.
        let e = add_in_place(&mut suite, "Blowfish-CBC enc", MSG_LEN, move |b| {
            cbc_encrypt(&mut enc, b);
        });
        let d = add_in_place(&mut suite, "Blowfish-CBC dec", MSG_LEN, move |b| {
            cbc_decrypt(&mut dec, b);
        });
        plan.push(Planned {
            method: "Blowfish-CBC (128-bit key)".into(),
            paper_ms: None,
            timing: Timing::Pair(e, d),
        });
    }
    {
        let mac = <Hmac<Sha1> as Mac>::new_from_slice(&[0x57; 20])
            .map_err(|_| "HMAC-SHA1: bad key length")?;
        let msg = message(MSG_LEN);
        let tag = mac.clone().chain_update(&msg).finalize().into_bytes();
        if mac.clone().chain_update(&msg).verify_slice(&tag).is_err() {
            return Err("HMAC-SHA1: self-check failed".into());
        }
        let (mac2, msg2) = (mac.clone(), msg.clone());
        // The keyed state is cloned per message, as a tunnel would (no per-message key setup).
        let e = suite.add("HMAC-SHA1 tag", move || {
            let mut m = mac.clone();
            m.update(black_box(&msg));
            black_box(m.finalize().into_bytes());
        });
        let d = suite.add("HMAC-SHA1 verify", move || {
            let mut m = mac2.clone();
            m.update(black_box(&msg2));
            black_box(m.verify_slice(black_box(&tag)).is_ok());
        });
        plan.push(Planned {
            method: "HMAC-SHA1 tag / verify".into(),
            paper_ms: None,
            timing: Timing::Pair(e, d),
        });
    }
    let mut gcm128_seal = None;
    for (name, alg, key_len) in [
        ("ring AES-128-GCM seal / open", &aead::AES_128_GCM, 16),
        ("ring AES-256-GCM seal / open", &aead::AES_256_GCM, 32),
        (
            "ring ChaCha20-Poly1305 seal / open",
            &aead::CHACHA20_POLY1305,
            32,
        ),
    ] {
        let (seal, copy_open) = add_aead(&mut suite, name, alg, &[0x68; 32][..key_len])?;
        if gcm128_seal.is_none() {
            gcm128_seal = Some(seal);
        }
        plan.push(Planned {
            method: name.into(),
            paper_ms: None,
            timing: Timing::OpenMinusCopy {
                seal,
                copy_open,
                copy: memcpy,
            },
        });
    }
    let gcm128_seal = gcm128_seal.ok_or("no AES-128-GCM case")?;

    // --- measure ------------------------------------------------------------------------
    let quiet = opts.markdown_only;
    if !quiet {
        eprintln!(
            "timing {} cases: {} rounds of ~{:?} batches ...",
            suite.len(),
            cfg.rounds,
            cfg.batch
        );
    }
    let res = suite.run(&cfg, |name| {
        if !quiet {
            eprintln!("  calibrating {name}");
        }
    });

    // --- report -------------------------------------------------------------------------
    let rows: Vec<Row> = plan.iter().map(|p| resolve(p, &res)).collect();
    let des_sum = rows
        .iter()
        .zip(&plan)
        .find(|(_, p)| matches!(p.timing, Timing::Pair(e, _) if e == des_id))
        .map_or(f64::NAN, |(r, _)| r.sum_us());
    let gcm_row = rows
        .iter()
        .zip(&plan)
        .find(
            |(_, p)| matches!(p.timing, Timing::OpenMinusCopy { seal, .. } if seal == gcm128_seal),
        )
        .map_or(f64::NAN, |(r, _)| r.sum_us());
    let memcpy_sum = 2.0 * res.us(memcpy);

    let memcpy_bulk_ns = res.ns(memcpy_bulk);
    let head = Headline {
        scramble_vs_memcpy: memcpy_bulk_ns / res.ns(auto_bulk.0),
        descramble_vs_memcpy: memcpy_bulk_ns / res.ns(auto_bulk.1),
        speedup_vs_gcm: res.ns(gcm128_seal) / res.ns(auto_1280.0),
        portable_us: portable.map_or((f64::NAN, f64::NAN), |(s, d)| (res.us(s), res.us(d))),
        gcm_seal_us: res.us(gcm128_seal),
    };

    println!("{}", header_line(opts));
    println!();
    println!(
        "### Per 1280-byte message (µs; ratios are enc+dec time over the reference's, same run)"
    );
    println!();
    print!("{}", main_table(&rows, des_sum, gcm_row, memcpy_sum));
    println!();
    println!("### Throughput at 64 KiB (GB/s = 10^9 B/s)");
    println!();
    println!("Kernel choice: {calibration}.");
    println!();
    print!(
        "{}",
        bulk_table(
            memcpy_bulk_ns,
            &bulk
                .iter()
                .map(|b| (b.label.clone(), res.ns(b.scramble), res.ns(b.descramble)))
                .collect::<Vec<_>>(),
        )
    );
    println!();
    println!(
        "### psp-mp stream protection: CPU per byte (sender + receiver work on one segment, ns \
         per byte; ratio = time / the calibrated scrambler's, same run)"
    );
    println!();
    print!("{}", stream_protection_table(&cfg, &mut warnings)?);
    println!();
    println!(
        "### PSP seal + open per suite (ns per frame round trip; ratios to `aes128-gcm` and to \
         memcpy of the same frame, same run)"
    );
    println!();
    print!("{}", psp_suite_table(&cfg, &mut warnings)?);
    println!();
    println!(
        "### Crypto backend: ring vs RustCrypto ({BACKEND_LEN}-byte section or message, \
         {BACKEND_AAD_LEN}-byte AAD; ns per operation; ratio = RustCrypto time / ring time, same run)"
    );
    println!();
    print!("{}", backend_table(&cfg, &mut warnings)?);
    if !opts.markdown_only {
        println!();
        println!(
            "Notes: keys are set up once (an established tunnel); the scramblers continue one \
             stream across messages; \"open\" = (restore copy + open) - memcpy of 1280 B; AEADs \
             use no AAD; Blowfish-CBC continues one chain. Paper: Core i5-3230M @ 2.6 GHz, \
             C code, `time` over 10,000 iterations, enc+dec per message."
        );
        for w in &warnings {
            println!("WARNING: {w}");
        }
        println!();
        println!("Targets (this run):");
        for (text, ok) in targets(&head) {
            println!("- [{}] {text}", if ok { "PASS" } else { "FAIL" });
        }
    } else {
        for w in &warnings {
            eprintln!("WARNING: {w}");
        }
    }
    println!();
    println!("{}", ratios_line(&head));
    Ok(())
}

fn resolve(p: &Planned, res: &Results) -> Row {
    let (enc_us, dec_us) = match p.timing {
        Timing::Pair(e, d) => (res.us(e), res.us(d)),
        Timing::OpenMinusCopy {
            seal,
            copy_open,
            copy,
        } => (res.us(seal), (res.us(copy_open) - res.us(copy)).max(0.0)),
    };
    Row {
        method: p.method.clone(),
        paper_ms: p.paper_ms,
        enc_us,
        dec_us,
    }
}

/// Adds a case that runs `op` on its own `len`-byte buffer, in place.
fn add_in_place<'a>(
    suite: &mut Suite<'a>,
    name: &str,
    len: usize,
    mut op: impl FnMut(&mut [u8]) + 'a,
) -> CaseId {
    let mut buf = message(len);
    suite.add(name, move || {
        op(black_box(&mut buf[..]));
        black_box(&buf);
    })
}

fn add_copy(suite: &mut Suite<'_>, name: &str, len: usize) -> CaseId {
    let mut src = PageBuf::new(len, 0);
    src.as_mut().copy_from_slice(&message(len));
    let mut dst = PageBuf::new(len, COPY_DST_OFFSET);
    suite.add(name, move || {
        black_box(dst.as_mut()).copy_from_slice(black_box(src.as_ref()));
        black_box(dst.as_ref());
    })
}

/// Where the memcpy destination starts within its page (the source starts at a page start).
///
/// glibc's memcpy (`rep movsb` on CPUs with FSRM) drops from ~45 to ~2 GB/s on AMD Zen 3 when
/// `(dst - src) mod 4096` is below 64 (measured here: 2.2 GB/s at 16, 47 GB/s at 64 and 2048).
/// Heap buffers land anywhere, so the reference is pinned half a page apart: it then measures
/// memcpy at its best, which makes the ratios against it conservative.
const COPY_DST_OFFSET: usize = 2048;

/// `len` bytes starting `offset` bytes into a page.
struct PageBuf {
    buf: Vec<u8>,
    start: usize,
    len: usize,
}

impl PageBuf {
    fn new(len: usize, offset: usize) -> Self {
        let buf = vec![0u8; len + 2 * 4096];
        let start = (4096 - buf.as_ptr() as usize % 4096) % 4096 + offset;
        Self { buf, start, len }
    }

    fn as_ref(&self) -> &[u8] {
        &self.buf[self.start..self.start + self.len]
    }

    fn as_mut(&mut self) -> &mut [u8] {
        &mut self.buf[self.start..self.start + self.len]
    }
}

/// Adds ECB encrypt and decrypt cases of a cipher and its row; returns the encrypt case.
fn plan_ecb<C>(
    suite: &mut Suite<'_>,
    plan: &mut Vec<Planned>,
    name: &str,
    paper_ms: Option<f64>,
    make: impl Fn() -> C,
) -> CaseId
where
    C: cipher::BlockEncrypt + cipher::BlockDecrypt + 'static,
{
    let (e, d) = (make(), make());
    let enc = add_in_place(suite, &format!("{name} enc"), MSG_LEN, move |b| {
        ecb_encrypt(&e, b);
    });
    let dec = add_in_place(suite, &format!("{name} dec"), MSG_LEN, move |b| {
        ecb_decrypt(&d, b);
    });
    plan.push(Planned {
        method: name.into(),
        paper_ms,
        timing: Timing::Pair(enc, dec),
    });
    enc
}

fn add_scrambler(
    suite: &mut Suite<'_>,
    label: &str,
    len: usize,
    mut s: scramble::Scrambler,
    mut d: scramble::Descrambler,
) -> (CaseId, CaseId) {
    let enc = add_in_place(suite, &format!("{label} scramble"), len, move |b| {
        s.scramble_in_place(b);
    });
    let dec = add_in_place(suite, &format!("{label} descramble"), len, move |b| {
        d.descramble_in_place(b);
    });
    (enc, dec)
}

/// Adds `seal` and `restore copy + open` cases of a ring AEAD after checking a round trip.
fn add_aead(
    suite: &mut Suite<'_>,
    name: &str,
    alg: &'static aead::Algorithm,
    key: &[u8],
) -> Result<(CaseId, CaseId), String> {
    let key = LessSafeKey::new(UnboundKey::new(alg, key).map_err(|_| format!("{name}: bad key"))?);
    let msg = message(MSG_LEN);
    let mut ct = msg.clone();
    let tag = key
        .seal_in_place_separate_tag(Nonce::assume_unique_for_key(NONCE), Aad::empty(), &mut ct)
        .map_err(|_| format!("{name}: seal failed"))?;
    let mut work = ct.clone();
    let opened = key
        .open_in_place_separate_tag(
            Nonce::assume_unique_for_key(NONCE),
            Aad::empty(),
            tag,
            &mut work,
            0..,
        )
        .map_err(|_| format!("{name}: open failed"))?;
    if opened[..] != msg[..] {
        return Err(format!("{name}: round trip mismatch"));
    }
    let open_key = key.clone();
    let seal = add_in_place(suite, &format!("{name}: seal"), MSG_LEN, move |b| {
        let r =
            key.seal_in_place_separate_tag(Nonce::assume_unique_for_key(NONCE), Aad::empty(), b);
        black_box(r.map(|t| t.as_ref()[0]).ok());
    });
    // Opening decrypts in place, so each open starts from a restored ciphertext.
    let copy_open = suite.add(format!("{name}: copy+open"), move || {
        work.copy_from_slice(black_box(&ct));
        let r = open_key.open_in_place_separate_tag(
            Nonce::assume_unique_for_key(NONCE),
            Aad::empty(),
            black_box(tag),
            black_box(&mut work[..]),
            0..,
        );
        black_box(r.map(|p| p.len()).ok());
    });
    Ok((seal, copy_open))
}

/// Segment sizes of the stream protection comparison: a small write and psp-mp's full segment.
const SEGMENT_SIZES: [usize; 2] = [1280, 16 * 1024];

/// What one segment of psp-mp costs in CPU under each stream protection, sender and receiver
/// together, as psp-mp does it: the scrambler continuing one stream (scramble + descramble;
/// the calibrated kernel, and the portable one as on a CPU without SIMD), and each AEAD through
/// psp-core's `SuiteKey` with psp-mp's 32-byte AAD (seal + open), against memcpy of the segment
/// (what the plain stream costs at most). Renders the Markdown table.
fn stream_protection_table(cfg: &Config, warnings: &mut Vec<String>) -> Result<String, String> {
    let mut suite = Suite::new();
    let seed = Seed::from_key(b"psp-mp stream protection");
    let mut rows: Vec<(String, Vec<CaseId>)> = Vec::new();
    let mut copies = Vec::new();
    let mut scr = Vec::new();
    let mut portable = Vec::new();
    for &n in &SEGMENT_SIZES {
        copies.push(add_copy(&mut suite, &format!("memcpy {n}"), n));
        let (mut s, mut d) = (
            scramble::Scrambler::new(&seed),
            scramble::Descrambler::new(&seed),
        );
        scr.push(add_in_place(
            &mut suite,
            &format!("scramble rt {n}"),
            n,
            move |b| {
                s.scramble_in_place(b);
                d.descramble_in_place(b);
            },
        ));
        if let (Some(mut s), Some(mut d)) = (
            scramble::Scrambler::with_kernel(&seed, Kernel::Portable),
            scramble::Descrambler::with_kernel(&seed, Kernel::Portable),
        ) {
            portable.push(add_in_place(
                &mut suite,
                &format!("scramble portable rt {n}"),
                n,
                move |b| {
                    s.scramble_in_place(b);
                    d.descramble_in_place(b);
                },
            ));
        }
    }
    rows.push(("memcpy (plain: at most a copy)".into(), copies));
    let scr_ids = scr.clone();
    rows.push(("scramble (calibrated kernel), papers' mode".into(), scr));
    if portable.len() == SEGMENT_SIZES.len() {
        rows.push(("scramble (portable kernel: no SIMD)".into(), portable));
    }
    for (id, name) in [
        (SuiteId::Aes128Gcm, "aes128-gcm (psp-mp default)"),
        (SuiteId::ChaCha20Poly1305, "chacha20-poly1305"),
    ] {
        let mut ids = Vec::new();
        for &n in &SEGMENT_SIZES {
            let key: Vec<u8> = (0..id.key_len()).map(|i| i as u8).collect();
            let key = SuiteKey::new(id, &key).map_err(|e| format!("{name}: {e}"))?;
            let aad = [0x5au8; 32];
            let mut buf = message(n);
            let mut tag = [0u8; 16];
            let check = buf.clone();
            key.seal_in_place(7, &aad, &mut buf, &mut tag)
                .map_err(|e| format!("{name}: {e}"))?;
            key.open_in_place(7, &aad, &mut buf, &tag)
                .map_err(|e| format!("{name}: {e}"))?;
            if buf != check {
                warnings.push(format!("{name} {n} B: seal/open round trip FAILED"));
            }
            // The counter repeats: fine for timing only (the cost does not depend on it).
            ids.push(suite.add(format!("{name} rt {n}"), move || {
                if key
                    .seal_in_place(7, &aad, black_box(&mut buf), &mut tag)
                    .is_ok()
                {
                    black_box(key.open_in_place(7, &aad, &mut buf, &tag).is_ok());
                }
            }));
        }
        rows.push((name.into(), ids));
    }
    let res = suite.run(cfg, |_| {});
    let mut header = vec!["protection".to_owned()];
    for n in SEGMENT_SIZES {
        header.push(format!("{n} B: ns/B"));
        header.push(format!("{n} B: vs scramble"));
    }
    let body: Vec<Vec<String>> = rows
        .iter()
        .map(|(name, ids)| {
            let mut line = vec![name.clone()];
            for (i, (&c, &n)) in ids.iter().zip(&SEGMENT_SIZES).enumerate() {
                let ns = res.ns(c);
                line.push(format!("{:.3}", ns / n as f64));
                line.push(format!("{:.2}x", ns / res.ns(scr_ids[i])));
            }
            line
        })
        .collect();
    let header: Vec<&str> = header.iter().map(String::as_str).collect();
    Ok(markdown_table(&header, &body))
}

/// Inner Ethernet frame sizes for the per-suite seal + open comparison.
const FRAME_SIZES: [usize; 4] = [64, 512, 1500, 9000];

/// Times `Sealer::seal` + `Opener::open` of whole frames for every suite and frame size, in a run
/// of its own with a memcpy reference per size, and renders the Markdown table.
fn psp_suite_table(cfg: &Config, warnings: &mut Vec<String>) -> Result<String, String> {
    let mut suite = Suite::new();
    let mut ids = Vec::new();
    let copies: Vec<CaseId> = FRAME_SIZES
        .iter()
        .map(|&n| add_copy(&mut suite, &format!("memcpy {n}"), n))
        .collect();
    for &id in SuiteId::ALL {
        let mut row = Vec::new();
        for &n in &FRAME_SIZES {
            row.push(add_psp_round_trip(&mut suite, id, n, warnings)?);
        }
        ids.push((id, row));
    }
    let res = suite.run(cfg, |_| {});
    let gcm = ids
        .iter()
        .find(|(id, _)| *id == SuiteId::Aes128Gcm)
        .map(|(_, row)| row.clone())
        .ok_or("aes128-gcm missing")?;
    let mut header = vec!["suite".to_owned()];
    header.extend(FRAME_SIZES.iter().map(|n| format!("{n} B ns")));
    header.push("1500 B MB/s".to_owned());
    header.push("1500 B vs aes128-gcm".to_owned());
    header.push("1500 B vs memcpy".to_owned());
    let mut body = Vec::new();
    for (id, row) in &ids {
        let mut line = vec![format!("`{}`", id.name())];
        line.extend(row.iter().map(|c| format!("{:.0}", res.ns(*c))));
        let ns1500 = res.ns(row[2]);
        line.push(format!("{:.0}", 1500.0 * 1e3 / ns1500));
        line.push(format!("{:.2}x time", ns1500 / res.ns(gcm[2])));
        line.push(format!("{:.1}x time", ns1500 / res.ns(copies[2])));
        body.push(line);
    }
    let header: Vec<&str> = header.iter().map(String::as_str).collect();
    Ok(markdown_table(&header, &body))
}

/// One case: seal an `n`-byte inner frame, copy it to the wire buffer, open it.
fn add_psp_round_trip(
    suite: &mut Suite<'_>,
    id: SuiteId,
    n: usize,
    warnings: &mut Vec<String>,
) -> Result<CaseId, String> {
    let key: Vec<u8> = (0..id.key_len()).map(|i| i as u8).collect();
    let mk = || SuiteKey::new(id, &key).map_err(|e| format!("{}: {e}", id.name()));
    let scfg = SealerConfig::new().with_allow_none(true);
    let ocfg = OpenerConfig::new().with_allow_none(true);
    let mut sealer = Sealer::new(mk()?, Seq(0), scfg).map_err(|e| format!("{}: {e}", id.name()))?;
    let mut opener = Opener::new(mk()?, ocfg).map_err(|e| format!("{}: {e}", id.name()))?;
    let mut inner = message(n);
    inner[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    let mut out = vec![0u8; n + 256];
    let mut wire = vec![0u8; n + 256];
    let now = Instant::from_secs(1_700_000_000);
    // Check once before timing.
    let len = sealer
        .seal(now, &inner, &mut out)
        .map_err(|e| format!("{}: {e}", id.name()))?
        .len();
    wire[..len].copy_from_slice(&out[..len]);
    match opener.open(now, &mut wire[..len]) {
        Ok(o) if o.frame() == &inner[..] => {}
        _ => warnings.push(format!("{} {n} B: seal/open round trip FAILED", id.name())),
    }
    Ok(suite.add(format!("{} {n}", id.name()), move || {
        let Ok(sealed) = sealer.seal(now, black_box(&inner), &mut out) else {
            return;
        };
        let len = sealed.len();
        wire[..len].copy_from_slice(sealed);
        black_box(
            opener
                .open(now, &mut wire[..len])
                .map(|o| o.frame().len())
                .ok(),
        );
    }))
}

/// The section (AEAD) or message (Ed25519) length of the backend comparison: a full Ethernet
/// payload.
const BACKEND_LEN: usize = 1500;
/// The AAD of the backend comparison: a frame's clear part (Ethernet addresses, EtherType, PSP
/// header).
const BACKEND_AAD_LEN: usize = 19;

/// What the backend comparison times: one AEAD implementation's seal then open, in place.
trait AeadRoundTrip {
    /// Seals `buf` and opens it again (so `buf` ends as it began); `false` if the open failed.
    fn round_trip(&self, aad: &[u8], buf: &mut [u8]) -> bool;
}

impl AeadRoundTrip for aead_backend::Ring {
    fn round_trip(&self, aad: &[u8], buf: &mut [u8]) -> bool {
        self.seal(&NONCE, aad, buf)
            .and_then(|tag| self.open(&NONCE, aad, buf, &tag))
            .is_ok()
    }
}

impl AeadRoundTrip for aead_backend::RustCrypto {
    fn round_trip(&self, aad: &[u8], buf: &mut [u8]) -> bool {
        self.seal(&NONCE, aad, buf)
            .and_then(|tag| self.open(&NONCE, aad, buf, &tag))
            .is_ok()
    }
}

/// Adds a seal + open case for one AEAD implementation after checking its round trip.
fn add_backend_round_trip<'a>(
    suite: &mut Suite<'a>,
    name: String,
    aead: impl AeadRoundTrip + 'a,
    warnings: &mut Vec<String>,
) -> CaseId {
    let aad = message(BACKEND_AAD_LEN);
    let msg = message(BACKEND_LEN);
    let mut buf = msg.clone();
    if !aead.round_trip(&aad, &mut buf) || buf != msg {
        warnings.push(format!("{name}: seal/open round trip FAILED"));
    }
    suite.add(name, move || {
        black_box(aead.round_trip(black_box(&aad), black_box(&mut buf[..])));
    })
}

/// Times each AEAD suite's seal + open and Ed25519's sign and verify through ring and through
/// RustCrypto, interleaved in a run of their own, and renders the Markdown table. Both backends
/// must agree byte for byte first (a warning otherwise).
fn backend_table(cfg: &Config, warnings: &mut Vec<String>) -> Result<String, String> {
    let mut suite = Suite::new();
    let mut rows: Vec<(String, CaseId, CaseId)> = Vec::new();
    let aad = message(BACKEND_AAD_LEN);
    for id in [
        SuiteId::Aes128Gcm,
        SuiteId::Aes256Gcm,
        SuiteId::ChaCha20Poly1305,
    ] {
        let key: Vec<u8> = (0..id.key_len()).map(|i| i as u8 ^ 0x5c).collect();
        let bad = |e: &dyn core::fmt::Display| format!("{}: {e}", id.name());
        let ring = aead_backend::Ring::new(id, &key).map_err(|e| bad(&e))?;
        let rc = aead_backend::RustCrypto::new(id, &key).map_err(|e| bad(&e))?;
        let (mut a, mut b) = (message(BACKEND_LEN), message(BACKEND_LEN));
        let ta = ring.seal(&NONCE, &aad, &mut a).map_err(|e| bad(&e))?;
        let tb = rc.seal(&NONCE, &aad, &mut b).map_err(|e| bad(&e))?;
        if a != b || ta != tb {
            warnings.push(format!("{}: ring and RustCrypto DISAGREE", id.name()));
        }
        let r = add_backend_round_trip(&mut suite, format!("ring {id}"), ring, warnings);
        let c = add_backend_round_trip(&mut suite, format!("rustcrypto {id}"), rc, warnings);
        rows.push((format!("`{}` seal + open", id.name()), r, c));
    }
    let seed = [0x2d; 32];
    let ring = sign_backend::Ring::from_seed(&seed).map_err(|e| format!("ed25519: {e}"))?;
    let rc = sign_backend::RustCrypto::from_seed(&seed).map_err(|e| format!("ed25519: {e}"))?;
    let msg = message(BACKEND_LEN);
    let (public, sig) = (ring.public_key(), ring.sign(&msg));
    if public != rc.public_key() || sig != rc.sign(&msg) {
        warnings.push("ed25519: ring and RustCrypto DISAGREE".into());
    }
    let (m1, m2) = (msg.clone(), msg.clone());
    let r = suite.add("ring ed25519 sign", move || {
        black_box(ring.sign(black_box(&m1)));
    });
    let c = suite.add("rustcrypto ed25519 sign", move || {
        black_box(rc.sign(black_box(&m2)));
    });
    rows.push(("Ed25519 sign".into(), r, c));
    let m1 = msg.clone();
    let r = suite.add("ring ed25519 verify", move || {
        black_box(sign_backend::Ring::verify(&public, black_box(&m1), &sig).is_ok());
    });
    let c = suite.add("rustcrypto ed25519 verify", move || {
        black_box(sign_backend::RustCrypto::verify(&public, black_box(&msg), &sig).is_ok());
    });
    rows.push(("Ed25519 verify".into(), r, c));

    let res = suite.run(cfg, |_| {});
    let body: Vec<Vec<String>> = rows
        .iter()
        .map(|(label, r, c)| backend_row(label, res.ns(*r), res.ns(*c)))
        .collect();
    Ok(markdown_table(
        &["operation", "ring ns", "RustCrypto ns", "RustCrypto / ring"],
        &body,
    ))
}

/// One row of the backend table.
fn backend_row(label: &str, ring_ns: f64, rc_ns: f64) -> Vec<String> {
    vec![
        label.to_owned(),
        format!("{ring_ns:.0}"),
        format!("{rc_ns:.0}"),
        format!("{:.2}x time", rc_ns / ring_ns),
    ]
}

/// Round-trips two messages through fresh state; records a warning on mismatch.
fn check_scrambler(
    label: &str,
    seed: &Seed,
    warnings: &mut Vec<String>,
    round_trip: impl Fn(&Seed, &mut [u8]),
) {
    let msg = message(MSG_LEN + 77);
    let mut buf = msg.clone();
    round_trip(seed, &mut buf);
    if buf != msg {
        warnings.push(format!("{label}: scramble/descramble round trip FAILED"));
    }
}

/// GB/s of one calibration timing ([`scramble::select::PASSES`] passes over 64 KiB).
fn gbps_of(d: psp_core::time::Duration) -> f64 {
    let bytes = BULK_LEN as f64 * f64::from(scramble::select::PASSES);
    bytes / 1e3 / d.total_micros().max(1) as f64
}

fn header_line(opts: Opts) -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| cpu_description(&s))
        .unwrap_or_else(|| "unknown CPU".to_owned());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let rustc = rustc_version();
    let (y, m, d) = civil_date(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
    );
    let profile = if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    };
    let mode = if opts.quick {
        "quick (numbers meaningless)"
    } else {
        "full"
    };
    format!(
        "**Machine:** {cpu}, {cores} cores | **rustc:** {rustc} | **date:** {y:04}-{m:02}-{d:02} \
         | **profile:** {profile} | **mode:** {mode}"
    )
}

fn rustc_version() -> String {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_owned());
    std::process::Command::new(rustc)
        .arg("--version")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| {
            format!(
                "unknown (MSRV {})",
                option_env!("CARGO_PKG_RUST_VERSION").unwrap_or("?")
            )
        })
}

/// The 1280-byte table. Ratios are enc+dec time over the reference's enc+dec time.
fn main_table(rows: &[Row], des_us: f64, gcm128_us: f64, memcpy_us: f64) -> String {
    let header = [
        "method",
        "paper ms (enc+dec)",
        "paper t/DES",
        "enc µs",
        "dec µs",
        "enc+dec µs",
        "t/DES",
        "t/AES-128-GCM",
        "t/memcpy",
    ];
    let body: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            let sum = r.sum_us();
            vec![
                r.method.clone(),
                r.paper_ms.map_or_else(String::new, fmt_ratio),
                r.paper_ms
                    .map_or_else(String::new, |ms| fmt_ratio(ms / PAPER_DES)),
                fmt_us(r.enc_us),
                fmt_us(r.dec_us),
                fmt_us(sum),
                fmt_ratio(sum / des_us),
                fmt_ratio(sum / gcm128_us),
                fmt_ratio(sum / memcpy_us),
            ]
        })
        .collect();
    markdown_table(&header, &body)
}

/// The 64 KiB table: `(label, scramble ns, descramble ns)` per production scrambler.
fn bulk_table(memcpy_ns: f64, rows: &[(String, f64, f64)]) -> String {
    let gbps = |ns: f64| BULK_LEN as f64 / ns;
    let header = [
        "method",
        "scramble GB/s",
        "descramble GB/s",
        "scramble / memcpy",
        "descramble / memcpy",
    ];
    let mut body = vec![vec![
        "memcpy (`copy_from_slice`)".to_owned(),
        fmt_ratio(gbps(memcpy_ns)),
        fmt_ratio(gbps(memcpy_ns)),
        "1.00".to_owned(),
        "1.00".to_owned(),
    ]];
    for (label, s, d) in rows {
        body.push(vec![
            label.clone(),
            fmt_ratio(gbps(*s)),
            fmt_ratio(gbps(*d)),
            fmt_ratio(memcpy_ns / s),
            fmt_ratio(memcpy_ns / d),
        ]);
    }
    markdown_table(&header, &body)
}

/// The target checks, as `(description, holds)`.
fn targets(h: &Headline) -> Vec<(String, bool)> {
    let (ps, pd) = h.portable_us;
    vec![
        (
            format!(
                "production scramble / memcpy throughput at 64 KiB = {:.2} >= 0.5",
                h.scramble_vs_memcpy
            ),
            h.scramble_vs_memcpy >= 0.5,
        ),
        (
            format!(
                "production descramble / memcpy throughput at 64 KiB = {:.2} >= 0.7",
                h.descramble_vs_memcpy
            ),
            h.descramble_vs_memcpy >= 0.7,
        ),
        (
            format!(
                "AES-128-GCM seal / production scramble time at 1280 B = {:.2} >= 3",
                h.speedup_vs_gcm
            ),
            h.speedup_vs_gcm >= 3.0,
        ),
        (
            format!(
                "portable kernel per 1280 B (scramble {} µs, descramble {} µs) <= AES-128-GCM \
                 seal ({} µs)",
                fmt_us(ps),
                fmt_us(pd),
                fmt_us(h.gcm_seal_us)
            ),
            ps <= h.gcm_seal_us && pd <= h.gcm_seal_us,
        ),
    ]
}

/// The final machine-readable line.
fn ratios_line(h: &Headline) -> String {
    format!(
        "RATIOS scramble_vs_memcpy={:.2} descramble_vs_memcpy={:.2} \
         scramble_speedup_vs_aes128gcm_1280={:.2}",
        h.scramble_vs_memcpy, h.descramble_vs_memcpy, h.speedup_vs_gcm
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> impl Iterator<Item = String> {
        a.iter()
            .map(|s| (*s).to_owned())
            .collect::<Vec<_>>()
            .into_iter()
    }

    #[test]
    fn parses_flags() {
        assert_eq!(parse_args(args(&[])), Ok(Some(Opts::default())));
        assert_eq!(
            parse_args(args(&["--quick", "--markdown-only"])),
            Ok(Some(Opts {
                quick: true,
                markdown_only: true
            }))
        );
        assert_eq!(parse_args(args(&["--help"])), Ok(None));
        assert!(parse_args(args(&["--slow"])).is_err());
    }

    #[test]
    fn ratios_line_format() {
        let h = Headline {
            scramble_vs_memcpy: 0.5049,
            descramble_vs_memcpy: 1.0,
            speedup_vs_gcm: 12.345,
            portable_us: (1.0, 2.0),
            gcm_seal_us: 1.5,
        };
        assert_eq!(
            ratios_line(&h),
            "RATIOS scramble_vs_memcpy=0.50 descramble_vs_memcpy=1.00 \
             scramble_speedup_vs_aes128gcm_1280=12.35"
        );
        let t = targets(&h);
        assert_eq!(
            t.iter().map(|(_, ok)| *ok).collect::<Vec<_>>(),
            [true, true, true, false]
        );
    }

    #[test]
    fn main_table_ratios() {
        let rows = [
            Row {
                method: "DES-ECB".into(),
                paper_ms: Some(PAPER_DES),
                enc_us: 10.0,
                dec_us: 10.0,
            },
            Row {
                method: "x".into(),
                paper_ms: None,
                enc_us: 1.0,
                dec_us: 1.0,
            },
        ];
        let t = main_table(&rows, 20.0, 4.0, 0.2);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 4);
        assert_eq!(
            lines[2],
            "| DES-ECB | 2.24 | 1.00 | 10.00 | 10.00 | 20.00 | 1.00 | 5.00 | 100 |"
        );
        assert_eq!(
            lines[3],
            "| x |  |  | 1.000 | 1.000 | 2.000 | 0.100 | 0.500 | 10.0 |"
        );
    }

    #[test]
    fn backend_row_ratio() {
        assert_eq!(
            backend_row("x", 400.0, 1000.0),
            ["x", "400", "1000", "2.50x time"]
        );
    }

    #[test]
    fn bulk_table_gbps() {
        // 65536 B in 6553.6 ns = 10 GB/s.
        let t = bulk_table(6553.6, &[("p".into(), 13107.2, 6553.6)]);
        assert!(t.contains("| memcpy (`copy_from_slice`) | 10.0 | 10.0 | 1.00 | 1.00 |"));
        assert!(t.contains("| p | 5.00 | 10.0 | 0.500 | 1.00 |"));
    }
}
