//! Blowfish-CBC: RustCrypto (`blowfish` in the CBC loop psp-core used before, and the `cbc`
//! crate) against psp-core's interleaved implementation, and PSP `bf-cbc-hmac-sha1` seal/open
//! of a 1500-byte frame before and after (`cargo bench -p psp-benches --bench blowfish`).
//!
//! Duration: 19 criterion benchmarks at about 2.2 s each (`open` about 4 s: its set-up seals a
//! frame between the timed iterations; see `config()`), then about 8 s of interleaved timing:
//! about 50 s on the project's 2-vCPU guest, build not included. With criterion's `--quick`
//! the interleaved part runs its smoke configuration too.
//!
//! Two parts:
//! 1. criterion groups `blowfish-cbc-1496` and `psp-bf-cbc-hmac-sha1-1500`, one case at a time;
//! 2. then an **interleaved** run of the headline cases (`psp_benches::Suite`: one batch of every
//!    case per round, median of 31 rounds) that prints a Markdown table and one `BLOWFISH` line
//!    of ratios. On a shared machine only these interleaved ratios are robust; criterion's
//!    per-case numbers drift with the other load.
//!
//! Buffers are 1496 bytes: the padded section of a 1500-byte inner frame (187 blocks).
//! Batched cases process 8 buffers (frames) per iteration and are reported per buffer.
//!
//! "Before" rebuilds what `Sealer::seal` / `Opener::open` cost before this implementation: the
//! same IV derivation, HMAC-SHA1 and frame-sized buffers, with RustCrypto Blowfish in the old
//! CBC loop in place of ours (the framing, a 1.5 KB copy, is left out, so "before" is slightly
//! flattered).
#![allow(missing_docs)] // criterion's macros generate undocumented items.

use core::hint::black_box;
use core::time::Duration;

use cipher::generic_array::GenericArray;
use cipher::{BlockDecrypt, BlockEncrypt, KeyInit, KeyIvInit};
use criterion::{BatchSize, Criterion, Throughput, criterion_group};
use psp_benches::{Config, Suite, cbc_decrypt, cbc_encrypt, criterion_config, message};
use psp_core::crypto::{SuiteId, SuiteKey};
use psp_core::primitives::blowfish::{BlowfishCbc, CbcJob};
use psp_core::primitives::hmac_sha1::HmacSha1Key;
use psp_core::protect::{Opener, OpenerConfig, SealJob, Sealer, SealerConfig};
use psp_core::time::Instant;
use psp_core::wire::{HEADER_LEN, Seq};

/// The padded section of a 1500-byte inner frame.
const SECTION: usize = 1496;
/// The inner Ethernet frame length of the PSP rows.
const FRAME: usize = 1500;
/// Buffers (frames) per batched iteration.
const BATCH: usize = 8;
const KEY: [u8; 32] = [0x35; 32];
const IV: [u8; 8] = [0x5a; 8];
/// Any 20 bytes: the model's BIVN.
const BIVN: [u8; 20] = [0x11; 20];

type RcBlowfish = blowfish::Blowfish;

fn rc_blowfish() -> RcBlowfish {
    let Ok(bf) = RcBlowfish::new_from_slice(&KEY) else {
        unreachable!("32-byte Blowfish key")
    };
    bf
}

fn ours() -> BlowfishCbc {
    let Ok(bf) = BlowfishCbc::new(&KEY) else {
        unreachable!("32-byte Blowfish key")
    };
    bf
}

/// CBC encryption as psp-core did it before: the RustCrypto block cipher in a `u64`-chained loop.
fn rc_cbc_encrypt(bf: &RcBlowfish, iv: &[u8; 8], buf: &mut [u8]) {
    let mut chain = u64::from_be_bytes(*iv);
    for block in buf.chunks_exact_mut(8) {
        let x = (u64::from_be_bytes(block_of(block)) ^ chain).to_be_bytes();
        block.copy_from_slice(&x);
        bf.encrypt_block(GenericArray::from_mut_slice(block));
        chain = u64::from_be_bytes(block_of(block));
    }
}

/// CBC decryption as psp-core did it before.
fn rc_cbc_decrypt(bf: &RcBlowfish, iv: &[u8; 8], buf: &mut [u8]) {
    let mut chain = u64::from_be_bytes(*iv);
    for block in buf.chunks_exact_mut(8) {
        let ct = u64::from_be_bytes(block_of(block));
        bf.decrypt_block(GenericArray::from_mut_slice(block));
        let x = (u64::from_be_bytes(block_of(block)) ^ chain).to_be_bytes();
        block.copy_from_slice(&x);
        chain = ct;
    }
}

/// An 8-byte chunk as an array (`chunks_exact_mut(8)` items always are 8 bytes).
fn block_of(chunk: &[u8]) -> [u8; 8] {
    let mut b = [0u8; 8];
    b.copy_from_slice(chunk);
    b
}

/// Encrypts `bufs` (each with its IV from `ivs`) with [`BlowfishCbc::encrypt_many_in_place_lanes`].
fn ours_many<const L: usize>(bf: &BlowfishCbc, ivs: &[[u8; 8]; BATCH], bufs: &mut [Vec<u8>]) {
    let mut jobs: [CbcJob<'_>; BATCH] = Default::default();
    for ((job, buf), iv) in jobs.iter_mut().zip(bufs.iter_mut()).zip(ivs) {
        *job = CbcJob { iv: *iv, buf };
    }
    black_box(bf.encrypt_many_in_place_lanes::<L>(black_box(&mut jobs))).ok();
}

fn inner_frame(len: usize) -> Vec<u8> {
    let mut f = message(len);
    f[..6].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
    f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
    f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    f
}

fn suite_key() -> SuiteKey {
    let Ok(key) = SuiteKey::new(SuiteId::BfCbcHmacSha1, &KEY) else {
        unreachable!("32-byte key for bf-cbc-hmac-sha1")
    };
    key
}

fn sealer() -> Sealer {
    let Ok(s) = Sealer::new(suite_key(), Seq(0), SealerConfig::default()) else {
        unreachable!("default sealer config")
    };
    s
}

fn opener() -> Opener {
    let Ok(o) = Opener::new(suite_key(), OpenerConfig::default()) else {
        unreachable!("default opener config")
    };
    o
}

/// The old seal and open of one frame, modelled: returns the opened section's first byte.
struct Before {
    rc: RcBlowfish,
    iv_cipher: BlowfishCbc,
    mac: HmacSha1Key,
    frame: Vec<u8>,
    seq: u32,
}

impl Before {
    fn new() -> Self {
        Self {
            rc: rc_blowfish(),
            iv_cipher: ours(),
            mac: HmacSha1Key::new(&KEY),
            frame: vec![0u8; HEADER_LEN + SECTION + 20],
            seq: 0,
        }
    }

    fn seal(&mut self, inner: &[u8]) {
        self.seq = self.seq.wrapping_add(1);
        let (clear, rest) = self.frame.split_at_mut(HEADER_LEN);
        let (section, icv) = rest.split_at_mut(SECTION);
        section.copy_from_slice(&inner[..SECTION]);
        let iv = self.iv_cipher.derive_iv(&BIVN, self.seq);
        rc_cbc_encrypt(&self.rc, &iv, section);
        icv.copy_from_slice(&self.mac.mac(&[clear, section]));
    }

    fn open(&mut self) -> bool {
        let (clear, rest) = self.frame.split_at_mut(HEADER_LEN);
        let (section, icv) = rest.split_at_mut(SECTION);
        let ok = self.mac.verify(&[clear, section], icv).is_ok();
        let iv = self.iv_cipher.derive_iv(&BIVN, self.seq);
        rc_cbc_decrypt(&self.rc, &iv, section);
        ok
    }
}

/// Seals `inner` BATCH times with `seal_batch` into `outs`, then opens every frame.
fn seal_batch_open(s: &mut Sealer, o: &mut Opener, inner: &[u8], outs: &mut [Vec<u8>]) -> bool {
    let mut jobs: [SealJob<'_>; BATCH] = core::array::from_fn(|_| SealJob::default());
    for (job, out) in jobs.iter_mut().zip(outs.iter_mut()) {
        *job = SealJob::new(inner, out);
    }
    s.seal_batch(Instant::ZERO, black_box(&mut jobs));
    let lens: [usize; BATCH] = core::array::from_fn(|i| jobs[i].result.unwrap_or(0));
    let mut ok = true;
    for (out, len) in outs.iter_mut().zip(lens) {
        ok &= o.open(Instant::ZERO, &mut out[..len]).is_ok();
    }
    ok
}

fn cbc(c: &mut Criterion) {
    let rc = rc_blowfish();
    let ours = ours();
    let mut buf = message(SECTION);
    let mut g = c.benchmark_group("blowfish-cbc-1496");
    g.throughput(Throughput::Bytes(SECTION as u64));
    g.bench_function("rustcrypto-encrypt", |b| {
        b.iter(|| rc_cbc_encrypt(&rc, &IV, black_box(&mut buf)));
    });
    g.bench_function("rustcrypto-decrypt", |b| {
        b.iter(|| rc_cbc_decrypt(&rc, &IV, black_box(&mut buf)));
    });
    let Ok(mut cbc_enc) = cbc::Encryptor::<RcBlowfish>::new_from_slices(&KEY, &IV) else {
        unreachable!("32-byte key, 8-byte IV")
    };
    let Ok(mut cbc_dec) = cbc::Decryptor::<RcBlowfish>::new_from_slices(&KEY, &IV) else {
        unreachable!("32-byte key, 8-byte IV")
    };
    // The `cbc` crate continues one chain across iterations (same cost as a fresh IV).
    g.bench_function("cbc-crate-encrypt", |b| {
        b.iter(|| cbc_encrypt(&mut cbc_enc, black_box(&mut buf)));
    });
    g.bench_function("cbc-crate-decrypt", |b| {
        b.iter(|| cbc_decrypt(&mut cbc_dec, black_box(&mut buf)));
    });
    g.bench_function("ours-encrypt", |b| {
        b.iter(|| ours.encrypt_in_place(&IV, black_box(&mut buf)));
    });
    g.bench_function("ours-decrypt-1-lane", |b| {
        b.iter(|| ours.decrypt_in_place_lanes::<1>(&IV, black_box(&mut buf)));
    });
    g.bench_function("ours-decrypt-2-lanes", |b| {
        b.iter(|| ours.decrypt_in_place_lanes::<2>(&IV, black_box(&mut buf)));
    });
    g.bench_function("ours-decrypt-4-lanes", |b| {
        b.iter(|| ours.decrypt_in_place_lanes::<4>(&IV, black_box(&mut buf)));
    });
    g.bench_function("ours-decrypt-8-lanes", |b| {
        b.iter(|| ours.decrypt_in_place_lanes::<8>(&IV, black_box(&mut buf)));
    });

    let mut bufs: Vec<Vec<u8>> = (0..BATCH).map(|_| message(SECTION)).collect();
    let ivs: [[u8; 8]; BATCH] = core::array::from_fn(|i| [i as u8; 8]);
    g.throughput(Throughput::Bytes((SECTION * BATCH) as u64));
    g.bench_function("rustcrypto-encrypt-x8", |b| {
        b.iter(|| {
            for (buf, iv) in bufs.iter_mut().zip(&ivs) {
                rc_cbc_encrypt(&rc, iv, black_box(buf));
            }
        });
    });
    g.bench_function("ours-encrypt-x8-2-lanes", |b| {
        b.iter(|| ours_many::<2>(&ours, &ivs, &mut bufs));
    });
    g.bench_function("ours-encrypt-x8-4-lanes", |b| {
        b.iter(|| ours_many::<4>(&ours, &ivs, &mut bufs));
    });
    g.bench_function("ours-encrypt-x8-8-lanes", |b| {
        b.iter(|| ours_many::<8>(&ours, &ivs, &mut bufs));
    });
    g.finish();
}

fn psp(c: &mut Criterion) {
    let mut sealer = sealer();
    let mut opener = opener();
    let inner = inner_frame(FRAME);
    let out_len = FRAME + sealer.overhead();
    let mut out = vec![0u8; out_len];

    let mut g = c.benchmark_group("psp-bf-cbc-hmac-sha1-1500");
    g.throughput(Throughput::Bytes(FRAME as u64));
    g.bench_function("seal", |b| {
        b.iter(|| {
            let sealed = sealer.seal(Instant::ZERO, black_box(&inner), &mut out);
            black_box(sealed.map(<[u8]>::len)).ok()
        });
    });
    g.bench_function("open", |b| {
        b.iter_batched_ref(
            || match sealer.seal(Instant::ZERO, &inner, &mut out) {
                Ok(frame) => frame.to_vec(),
                Err(e) => panic!("seal: {e}"),
            },
            |frame| black_box(opener.open(Instant::ZERO, frame).map(|o| o.frame().len())),
            BatchSize::SmallInput,
        );
    });
    let mut before = Before::new();
    g.bench_function("seal-before", |b| {
        b.iter(|| before.seal(black_box(&inner)));
    });
    g.bench_function("seal+open-before", |b| {
        b.iter(|| {
            before.seal(black_box(&inner));
            black_box(before.open())
        });
    });

    let mut outs: Vec<Vec<u8>> = (0..BATCH).map(|_| vec![0u8; out_len]).collect();
    g.throughput(Throughput::Bytes((FRAME * BATCH) as u64));
    g.bench_function("seal-batch-x8", |b| {
        b.iter(|| {
            let mut jobs: [SealJob<'_>; BATCH] = core::array::from_fn(|_| SealJob::default());
            for (job, out) in jobs.iter_mut().zip(outs.iter_mut()) {
                *job = SealJob::new(&inner, out);
            }
            sealer.seal_batch(Instant::ZERO, black_box(&mut jobs));
            black_box(jobs[BATCH - 1].result)
        });
    });
    let mut opener = self::opener();
    let mut sealer = self::sealer();
    g.bench_function("seal-batch+open-x8", |b| {
        b.iter(|| black_box(seal_batch_open(&mut sealer, &mut opener, &inner, &mut outs)));
    });
    g.finish();
}

/// The headline cases timed interleaved; prints a Markdown table and the `BLOWFISH` line.
fn interleaved(quick: bool) {
    let rc = rc_blowfish();
    let bf = ours();
    let ivs: [[u8; 8]; BATCH] = core::array::from_fn(|i| [i as u8; 8]);
    let inner = inner_frame(FRAME);
    let mut suite = Suite::new();

    let mut buf = message(SECTION);
    let rc_enc = suite.add("RustCrypto CBC encrypt (before)", {
        let rc = &rc;
        move || rc_cbc_encrypt(rc, &IV, black_box(&mut buf))
    });
    let mut buf = message(SECTION);
    let our_enc = suite.add("ours CBC encrypt, one chain", {
        let bf = &bf;
        move || black_box(bf.encrypt_in_place(&IV, black_box(&mut buf))).unwrap_or(())
    });
    let mut bufs: Vec<Vec<u8>> = (0..BATCH).map(|_| message(SECTION)).collect();
    let our_many = suite.add("ours CBC encrypt, 8 chains interleaved (per buffer)", {
        let bf = &bf;
        move || ours_many::<8>(bf, &ivs, &mut bufs)
    });
    let mut buf = message(SECTION);
    let rc_dec = suite.add("RustCrypto CBC decrypt (before)", {
        let rc = &rc;
        move || rc_cbc_decrypt(rc, &IV, black_box(&mut buf))
    });
    let mut buf = message(SECTION);
    let our_dec = suite.add("ours CBC decrypt, 8 lanes", {
        let bf = &bf;
        move || black_box(bf.decrypt_in_place(&IV, black_box(&mut buf))).unwrap_or(())
    });

    let mut before = Before::new();
    let psp_before = suite.add("PSP seal+open (before, model)", move || {
        before.seal(black_box(&inner));
        black_box(before.open());
    });
    let (mut s, mut o) = (sealer(), opener());
    let mut out = vec![0u8; FRAME + s.overhead()];
    let inner2 = inner_frame(FRAME);
    let psp_seal_open = suite.add("PSP seal+open", move || {
        let len = s
            .seal(Instant::ZERO, black_box(&inner2), &mut out)
            .map_or(0, <[u8]>::len);
        black_box(o.open(Instant::ZERO, &mut out[..len]).is_ok());
    });
    let (mut s, mut o) = (sealer(), opener());
    let mut outs: Vec<Vec<u8>> = (0..BATCH)
        .map(|_| vec![0u8; FRAME + s.overhead()])
        .collect();
    let inner3 = inner_frame(FRAME);
    assert!(
        seal_batch_open(&mut s, &mut o, &inner3, &mut outs),
        "seal_batch frames must open"
    );
    let psp_batch = suite.add("PSP seal_batch x8 + open (per frame)", move || {
        black_box(seal_batch_open(&mut s, &mut o, &inner3, &mut outs));
    });

    let cfg = if quick { Config::QUICK } else { Config::FULL };
    let r = suite.run(&cfg, |_| {});
    // Batched cases run 8 buffers per operation; every base is a one-buffer case.
    let per_buffer = |id, n: f64| r.ns(id) / n;
    let rows = [
        (rc_enc, 1.0, SECTION, rc_enc),
        (our_enc, 1.0, SECTION, rc_enc),
        (our_many, BATCH as f64, SECTION, rc_enc),
        (rc_dec, 1.0, SECTION, rc_dec),
        (our_dec, 1.0, SECTION, rc_dec),
        (psp_before, 1.0, FRAME, psp_before),
        (psp_seal_open, 1.0, FRAME, psp_before),
        (psp_batch, BATCH as f64, FRAME, psp_before),
    ];
    println!("\n| case | µs per buffer/frame | MB/s | speed vs before |");
    println!("| --- | --- | --- | --- |");
    for (id, n, bytes, base) in rows {
        let ns = per_buffer(id, n);
        let base_ns = r.ns(base);
        println!(
            "| {} | {:.2} | {:.0} | {:.2}x |",
            suite.name(id),
            ns / 1e3,
            bytes as f64 / ns * 1e3,
            base_ns / ns
        );
    }
    println!(
        "\nBLOWFISH enc_one_vs_rustcrypto={:.2} enc_x8_vs_rustcrypto={:.2} dec_vs_rustcrypto={:.2} \
         seal_open_vs_before={:.2} seal_batch_open_vs_before={:.2}",
        r.ns(rc_enc) / r.ns(our_enc),
        r.ns(rc_enc) / per_buffer(our_many, BATCH as f64),
        r.ns(rc_dec) / r.ns(our_dec),
        r.ns(psp_before) / r.ns(psp_seal_open),
        r.ns(psp_before) / per_buffer(psp_batch, BATCH as f64),
    );
}

/// 0.3 s warm-up, 1.5 s measuring, 20 samples: 19 criterion benchmarks in about 45 s.
fn config() -> Criterion {
    criterion_config(Duration::from_millis(300), Duration::from_millis(1500), 20)
}

criterion_group! {
    name = benches;
    config = config();
    targets = cbc, psp
}

fn main() {
    benches();
    // `cargo bench` passes `--bench`; without it (e.g. `cargo test --benches`), or with
    // criterion's `--quick`, run a smoke pass.
    let quick =
        !std::env::args().any(|a| a == "--bench") || std::env::args().any(|a| a == "--quick");
    interleaved(quick);
    Criterion::default().configure_from_args().final_summary();
}
