//! Throughput of the symmetric primitives PSP compares against, one criterion group per
//! primitive, swept over message sizes 64 B .. 64 KiB (`cargo bench --bench primitives`).
//!
//! Duration: 60 benchmarks × (0.3 s warm-up + 1 s measuring + analysis), about 1.5 min (91 s measured) on the
//! project's 2-vCPU guest, build not included (see `config()`). `benches/run-criterion.sh`
//! runs every bench file and writes BENCHMARKS.md's tables.
//!
//! Keys are set up once outside the timed loop (an established tunnel). Block ciphers
//! process the size rounded up to whole blocks (1500 B → 1504 B, as padding would) while
//! `Throughput::Bytes` counts the payload size, so every group is comparable per payload
//! byte. AEADs seal in place with a fixed nonce and no AAD (cost is data-independent).
//! DES and 3DES sweep fewer sizes: they are ~300x slower than AES-NI.
#![allow(missing_docs)] // criterion's macros generate undocumented items.

use core::hint::black_box;
use core::time::Duration;

use cipher::{KeyInit, KeyIvInit};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use hmac::{Hmac, Mac};
use psp_benches::{cbc_encrypt, criterion_config, ecb_encrypt, message};
use ring::aead::{self, Aad, LessSafeKey, Nonce, UnboundKey};
use sha1::Sha1;

/// The sweep: tiny, Table II's message, an Ethernet MTU, a jumbo frame, 64 KiB.
const SIZES: &[usize] = &[64, 512, 1280, 1500, 9000, 65536];
/// The shorter sweep for DES and 3DES.
const SLOW_SIZES: &[usize] = &[64, 1280, 9000];

/// Benchmarks `op` over each size on its own buffer of `size` rounded up to `block` bytes.
fn sweep(
    c: &mut Criterion,
    group: &str,
    sizes: &[usize],
    block: usize,
    mut op: impl FnMut(&mut [u8]),
) {
    let mut g = c.benchmark_group(group);
    for &size in sizes {
        let mut buf = message(size.next_multiple_of(block));
        g.throughput(Throughput::Bytes(size as u64));
        g.bench_function(BenchmarkId::from_parameter(size), |b| {
            b.iter(|| op(black_box(&mut buf[..])));
        });
    }
    g.finish();
}

fn memcpy(c: &mut Criterion) {
    let mut g = c.benchmark_group("memcpy");
    for &size in SIZES {
        let src = message(size);
        let mut dst = vec![0u8; size];
        g.throughput(Throughput::Bytes(size as u64));
        g.bench_function(BenchmarkId::from_parameter(size), |b| {
            b.iter(|| black_box(&mut dst[..]).copy_from_slice(black_box(&src[..])));
        });
    }
    g.finish();
}

fn des_family(c: &mut Criterion) {
    let des = des::Des::new(&[0x13; 8].into());
    sweep(c, "des-ecb", SLOW_SIZES, 8, |b| ecb_encrypt(&des, b));
    let tdes = des::TdesEde3::new(&[0x13; 24].into());
    sweep(c, "3des-ecb", SLOW_SIZES, 8, |b| ecb_encrypt(&tdes, b));
}

fn aes_ecb(c: &mut Criterion) {
    let a128 = aes::Aes128::new(&[0x24; 16].into());
    sweep(c, "aes-128-ecb", SIZES, 16, |b| ecb_encrypt(&a128, b));
    let a192 = aes::Aes192::new(&[0x24; 24].into());
    sweep(c, "aes-192-ecb", SIZES, 16, |b| ecb_encrypt(&a192, b));
    let a256 = aes::Aes256::new(&[0x24; 32].into());
    sweep(c, "aes-256-ecb", SIZES, 16, |b| ecb_encrypt(&a256, b));
}

fn blowfish_cbc(c: &mut Criterion) {
    // Blowfish takes 4..=56-byte keys; 16 bytes always fits, so this cannot fail.
    let Ok(mut enc) = cbc::Encryptor::<blowfish::Blowfish>::new_from_slices(&[0x35; 16], &[0; 8])
    else {
        unreachable!("16-byte key and 8-byte IV are valid for Blowfish-CBC")
    };
    // The chain continues across iterations: same cost as a fresh IV per message.
    sweep(c, "blowfish-cbc", SIZES, 8, |b| cbc_encrypt(&mut enc, b));
}

fn hmac_sha1(c: &mut Criterion) {
    // HMAC accepts keys of any length, so this cannot fail.
    let Ok(mac) = <Hmac<Sha1> as Mac>::new_from_slice(&[0x57; 20]) else {
        unreachable!("HMAC takes any key length")
    };
    // Cloning the keyed state per message is what a tunnel does (no per-message key setup).
    sweep(c, "hmac-sha1", SIZES, 1, |b| {
        let mut m = mac.clone();
        m.update(b);
        black_box(m.finalize().into_bytes());
    });
}

fn ring_aead(c: &mut Criterion) {
    for (group, alg, key_len) in [
        ("ring-aes-128-gcm-seal", &aead::AES_128_GCM, 16),
        ("ring-aes-256-gcm-seal", &aead::AES_256_GCM, 32),
        ("ring-chacha20-poly1305-seal", &aead::CHACHA20_POLY1305, 32),
    ] {
        // The key lengths above match each algorithm, so this cannot fail.
        let Ok(key) = UnboundKey::new(alg, &[0x68; 32][..key_len]) else {
            unreachable!("key length matches the algorithm")
        };
        let key = LessSafeKey::new(key);
        sweep(c, group, SIZES, 1, |b| {
            let tag = key.seal_in_place_separate_tag(
                Nonce::assume_unique_for_key([0x5a; 12]),
                Aad::empty(),
                b,
            );
            black_box(tag.map(|t| t.as_ref()[0]).ok());
        });
    }
}

/// Short warm-up and measurement: 60 benchmarks at about 1.65 s each (0.45 s of warm-up, 1 s of
/// measuring, 0.2 s of analysis), about 1.5 min in all (91 s measured).
fn config() -> Criterion {
    criterion_config(Duration::from_millis(300), Duration::from_millis(1000), 20)
}

criterion_group! {
    name = primitives;
    config = config();
    targets = memcpy, des_family, aes_ecb, blowfish_cbc, hmac_sha1, ring_aead
}
criterion_main!(primitives);
