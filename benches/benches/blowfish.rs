//! Blowfish-CBC: RustCrypto (`blowfish`, alone as psp-core used it before and with `cbc`) against psp-core's interleaved implementation,
//! and PSP `bf-cbc-hmac-sha1` seal/open of a 1500-byte frame, all in one run
//! (`cargo bench -p psp-benches --bench blowfish`, about 1.5 minutes).
//!
//! Buffers are 1496 bytes: the padded section of a 1500-byte inner frame (187 blocks).
//! `Throughput::Bytes` counts every byte processed, so the batched cases (8 buffers per
//! iteration) are directly comparable per byte with the single ones.
//!
//! The "before" PSP rows rebuild what `Sealer::seal` / `Opener::open` cost before this
//! implementation: the same IV derivation, HMAC-SHA1 and frame-sized buffers, with RustCrypto
//! Blowfish-CBC in place of ours (the framing itself, a few hundred bytes copied, is left out,
//! so "before" is slightly flattered).
#![allow(missing_docs)] // criterion's macros generate undocumented items.

use core::hint::black_box;
use core::time::Duration;

use cipher::generic_array::GenericArray;
use cipher::{BlockDecrypt, BlockEncrypt, KeyInit, KeyIvInit};
use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use psp_benches::message;
use psp_benches::{cbc_decrypt, cbc_encrypt};
use psp_core::crypto::blowfish_cbc::{BlowfishCbc, CbcJob};
use psp_core::crypto::hmac_sha1::HmacSha1Key;
use psp_core::crypto::{SuiteId, SuiteKey};
use psp_core::session::{Opener, OpenerConfig, SealJob, Sealer, SealerConfig};
use psp_core::time::Instant;

/// The padded section of a 1500-byte inner frame.
const SECTION: usize = 1496;
/// The inner Ethernet frame length of the PSP rows.
const FRAME: usize = 1500;
/// Buffers (frames) per batched iteration.
const BATCH: usize = 8;
const KEY: [u8; 32] = [0x35; 32];
const IV: [u8; 8] = [0x5a; 8];

type RcBlowfish = blowfish::Blowfish;

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

fn cbc(c: &mut Criterion) {
    // 32-byte keys are valid for both implementations.
    let Ok(rc) = RcBlowfish::new_from_slice(&KEY) else {
        unreachable!("32-byte Blowfish key")
    };
    let Ok(ours) = BlowfishCbc::new(&KEY) else {
        unreachable!("32-byte Blowfish key")
    };
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
    g.bench_function("ours-decrypt", |b| {
        b.iter(|| ours.decrypt_in_place(&IV, black_box(&mut buf)));
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
    macro_rules! many {
        ($name:literal, $lanes:literal) => {
            g.bench_function($name, |b| {
                b.iter(|| {
                    let mut jobs: [CbcJob<'_>; BATCH] = Default::default();
                    for ((job, buf), iv) in jobs.iter_mut().zip(bufs.iter_mut()).zip(&ivs) {
                        *job = CbcJob { iv: *iv, buf };
                    }
                    ours.encrypt_many_in_place_lanes::<$lanes>(black_box(&mut jobs))
                });
            });
        };
    }
    many!("ours-encrypt-x8-2-lanes", 2);
    many!("ours-encrypt-x8-4-lanes", 4);
    many!("ours-encrypt-x8-8-lanes", 8);
    g.bench_function("ours-encrypt-x8", |b| {
        b.iter(|| {
            let mut jobs: [CbcJob<'_>; BATCH] = Default::default();
            for ((job, buf), iv) in jobs.iter_mut().zip(bufs.iter_mut()).zip(&ivs) {
                *job = CbcJob { iv: *iv, buf };
            }
            ours.encrypt_many_in_place(black_box(&mut jobs))
        });
    });
    g.finish();
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

fn psp(c: &mut Criterion) {
    let Ok(mut sealer) = Sealer::new(suite_key(), 0, SealerConfig::default()) else {
        unreachable!("default sealer config")
    };
    let Ok(mut opener) = Opener::new(suite_key(), OpenerConfig::default()) else {
        unreachable!("default opener config")
    };
    let inner = inner_frame(FRAME);
    let out_len = FRAME + sealer.overhead();
    let mut out = vec![0u8; out_len];

    let mut g = c.benchmark_group("psp-bf-cbc-hmac-sha1-1500");
    g.throughput(Throughput::Bytes(FRAME as u64));
    g.bench_function("seal", |b| {
        b.iter(|| {
            let sealed = sealer.seal(Instant::ZERO, black_box(&inner), &mut out);
            black_box(sealed.map(<[u8]>::len))
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

    // "Before": the same work per frame with RustCrypto Blowfish-CBC.
    let Ok(rc) = RcBlowfish::new_from_slice(&KEY) else {
        unreachable!("32-byte Blowfish key")
    };
    let Ok(ours) = BlowfishCbc::new(&KEY) else {
        unreachable!("32-byte Blowfish key")
    };
    let mac = HmacSha1Key::new(&KEY);
    let bivn = [0x11; 20];
    let mut frame = vec![0u8; out_len];
    let clear_len = psp_core::wire::HEADER_LEN;
    let icv_at = clear_len + SECTION;
    g.bench_function("seal-before", |b| {
        let mut seq = 0u32;
        b.iter(|| {
            seq = seq.wrapping_add(1);
            frame[clear_len..icv_at].copy_from_slice(&inner[..SECTION]);
            let iv = ours.derive_iv(&bivn, seq);
            rc_cbc_encrypt(&rc, &iv, &mut frame[clear_len..icv_at]);
            let icv = mac.mac(&[&frame[..clear_len], &frame[clear_len..icv_at]]);
            frame[icv_at..icv_at + 20].copy_from_slice(&icv);
            black_box(&frame);
        });
    });
    g.bench_function("open-before", |b| {
        let icv = mac.mac(&[&frame[..icv_at]]);
        b.iter_batched_ref(
            || frame.clone(),
            |frame| {
                let ok = mac.verify(&[&frame[..clear_len], &frame[clear_len..icv_at]], &icv);
                let iv = ours.derive_iv(&bivn, 7);
                rc_cbc_decrypt(&rc, &iv, &mut frame[clear_len..icv_at]);
                black_box(ok)
            },
            BatchSize::SmallInput,
        );
    });

    // A batch of 8 frames for one peer, per frame.
    let mut outs: Vec<Vec<u8>> = (0..BATCH).map(|_| vec![0u8; out_len]).collect();
    g.throughput(Throughput::Bytes((FRAME * BATCH) as u64));
    g.bench_function("seal-x8-loop", |b| {
        b.iter(|| {
            for out in &mut outs {
                black_box(sealer.seal(Instant::ZERO, &inner, out).map(<[u8]>::len)).ok();
            }
        });
    });
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
    g.finish();
}

/// Short warm-up and measurement: 20 cases in about 1.5 minutes.
fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_millis(2000))
        .sample_size(30)
}

criterion_group! {
    name = benches;
    config = config();
    targets = cbc, psp
}
criterion_main!(benches);
