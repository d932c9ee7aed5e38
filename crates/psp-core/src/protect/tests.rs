//! Seal/open round trips, options, batching and the drop reasons, across every suite.

use super::*;
use crate::crypto::{SigningKey, SuiteId, SuiteKey};
use crate::time::{Duration, Instant};
use crate::wire::{MIN_FRAME_LEN, Protocol, SecurityNumber, Seq};

const KEY: [u8; 32] = [0x42; 32];
const DST: [u8; 6] = [0x02, 0, 0, 0, 0, 0x02];
const SRC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x01];

fn key(suite: SuiteId) -> SuiteKey {
    SuiteKey::new(suite, &KEY[..suite.key_len()]).unwrap()
}

fn pair(suite: SuiteId, scfg: SealerConfig, ocfg: OpenerConfig) -> (Sealer, Opener) {
    (
        Sealer::new(key(suite), Seq(1000), scfg).unwrap(),
        Opener::new(key(suite), ocfg).unwrap(),
    )
}

/// A sealer/opener pair that permits the `none` suite, the sealer padding to `pad_to`.
fn pair_allowing_none(suite: SuiteId, pad_to: u8) -> (Sealer, Opener) {
    let scfg = SealerConfig::new()
        .with_pad_to(pad_to)
        .with_allow_none(true);
    let ocfg = OpenerConfig::new().with_allow_none(true);
    pair(suite, scfg, ocfg)
}

fn eth(payload: &[u8]) -> Vec<u8> {
    let mut v = Vec::new();
    v.extend_from_slice(&DST);
    v.extend_from_slice(&SRC);
    v.extend_from_slice(&0x0800u16.to_be_bytes());
    v.extend_from_slice(payload);
    v
}

#[test]
fn roundtrip_every_suite() {
    let inner = eth(b"hello, layer two");
    for &suite in SuiteId::ALL {
        let (mut s, mut o) = pair_allowing_none(suite, SealerConfig::default().pad_to());
        let mut out = [0u8; 256];
        let sealed = s.seal(Instant::ZERO, &inner, &mut out).unwrap();
        assert!(
            sealed.len() <= (inner.len() + s.overhead()).max(60),
            "{suite}"
        );
        assert!(sealed.len() >= MIN_FRAME_LEN, "{suite}");
        assert_eq!(Some(sealed.len()), s.sealed_len(inner.len()));
        assert_eq!(sealed[14], u8::from(suite.encrypts()), "{suite}");
        let mut buf = sealed.to_vec();
        let opened = o.open(Instant::ZERO, &mut buf).unwrap();
        assert_eq!(opened.frame(), &inner[..], "{suite}");
        assert_eq!(opened.protocol(), Protocol::EtherType(0x0800));
        assert_eq!(opened.seq(), Seq(1000));
    }
}

#[test]
fn none_refused_by_default() {
    assert_eq!(
        Sealer::new(key(SuiteId::None), Seq(0), SealerConfig::default()).unwrap_err(),
        ConfigError::NoneRefused
    );
    assert_eq!(
        Opener::new(key(SuiteId::None), OpenerConfig::default()).unwrap_err(),
        ConfigError::NoneRefused
    );
}

#[test]
fn sn_never_wraps() {
    let mut s = Sealer::new(
        key(SuiteId::BfCbcHmacSha1),
        Seq(u32::MAX),
        SealerConfig::default(),
    )
    .unwrap();
    let mut out = [0u8; 128];
    assert!(s.seal(Instant::ZERO, &eth(b"x"), &mut out).is_ok());
    assert_eq!(
        s.seal(Instant::ZERO, &eth(b"x"), &mut out),
        Err(SealError::RekeyRequired)
    );
    assert_eq!(s.next_seq(), None);
}

#[test]
fn random_initial_seq_lower_half() {
    assert_eq!(Sealer::random_initial_seq([0xff; 4]), Seq(0x7fff_ffff));
    assert_eq!(Sealer::random_initial_seq([0; 4]), Seq(0));
}

#[test]
fn replay_and_tamper() {
    let (mut s, mut o) = pair(
        SuiteId::Aes128Gcm,
        SealerConfig::default(),
        OpenerConfig::default(),
    );
    let mut out = [0u8; 128];
    let sealed = s
        .seal(Instant::ZERO, &eth(b"abc"), &mut out)
        .unwrap()
        .to_vec();
    let mut bad = sealed.clone();
    bad[20] ^= 1;
    assert_eq!(
        o.open(Instant::ZERO, &mut bad).unwrap_err().reason(),
        DropReason::BadIcv
    );
    assert!(o.open(Instant::ZERO, &mut sealed.clone()).is_ok());
    assert_eq!(
        o.open(Instant::ZERO, &mut sealed.clone())
            .unwrap_err()
            .reason(),
        DropReason::Replay
    );
}

#[test]
fn options_security_number_timestamp_padding() {
    let scfg = SealerConfig::new()
        .with_security_number(sn(0xabcdef))
        .with_timestamps(true)
        .with_pad_to(16);
    let ocfg = OpenerConfig::new()
        .with_security_number(sn(0xabcdef))
        .with_require_timestamp(true);
    let (mut s, mut o) = pair(SuiteId::BfCbcHmacSha1, scfg, ocfg);
    let now = Instant::from_secs(1_700_000_000);
    let mut out = [0u8; 256];
    for n in 0..40 {
        let inner = eth(&vec![n as u8; n]);
        let sealed = s.seal(now, &inner, &mut out).unwrap();
        assert_eq!((sealed.len() - 26 - 20) % 16, 0);
        let mut buf = sealed.to_vec();
        let opened = o.open(now + Duration::from_millis(1999), &mut buf).unwrap();
        assert_eq!(opened.frame(), &inner[..]);
        assert_eq!(opened.security_number(), sn(0xabcdef));
        assert_eq!(opened.timestamp(), Some(now.total_millis() as u32));
    }
    // Skew.
    let mut buf = s.seal(now, &eth(b"late"), &mut out).unwrap().to_vec();
    assert_eq!(
        o.open(now + Duration::from_millis(2001), &mut buf)
            .unwrap_err()
            .reason(),
        DropReason::Timestamp
    );
}

#[test]
fn security_number_rotation() {
    let scfg = SealerConfig::new().with_security_number(sn(0xabcdef));
    let ocfg = OpenerConfig::new()
        .with_security_number(sn(0xabcdef))
        .with_security_number_grace(Duration::from_secs(5));
    let (mut s, mut o) = pair(SuiteId::BfCbcHmacSha1, scfg, ocfg);
    let now = Instant::from_secs(100);
    let mut out = [0u8; 256];
    let mut seal = |s: &mut Sealer| s.seal(now, &eth(b"x"), &mut out).unwrap().to_vec();
    let mut old = seal(&mut s);
    let mut old_late = seal(&mut s);
    s.set_security_number(sn(0x123456));
    let mut new = seal(&mut s);
    // The opener has not rotated yet.
    assert_eq!(
        o.open(now, &mut new.clone()).unwrap_err().reason(),
        DropReason::SecurityNumber
    );
    o.set_security_number(now, sn(0x123456));
    assert!(o.open(now, &mut new).is_ok());
    // The previous number is accepted during the grace, then refused.
    assert!(o.open(now + Duration::from_secs(5), &mut old).is_ok());
    assert_eq!(
        o.open(now + Duration::from_secs(6), &mut old_late)
            .unwrap_err()
            .reason(),
        DropReason::SecurityNumber
    );
    // A frame without a security number is refused when one is expected.
    let mut s2 = Sealer::new(key(SuiteId::BfCbcHmacSha1), Seq(9), SealerConfig::default()).unwrap();
    let mut none = seal(&mut s2);
    assert_eq!(
        o.open(now, &mut none).unwrap_err().reason(),
        DropReason::SecurityNumber
    );
}

#[test]
fn short_frames_reach_the_ethernet_minimum() {
    for suite in [SuiteId::BfCbcHmacSha1, SuiteId::Aes128Gcm, SuiteId::None] {
        for pad_to in [0u8, 8, 16, 40, 64] {
            let (mut s, mut o) = pair_allowing_none(suite, pad_to);
            for n in 0..80 {
                let mut out = [0u8; 256];
                let payload = [n as u8; 80];
                let sealed = s
                    .seal_sub(
                        Instant::ZERO,
                        DST,
                        SRC,
                        Protocol::Dummy,
                        &payload[..n],
                        &mut out,
                    )
                    .unwrap();
                assert!(sealed.len() >= MIN_FRAME_LEN, "{suite} {pad_to} {n}");
                assert!(sealed.len() <= (n + 14).max(MIN_FRAME_LEN) + s.overhead());
                assert_eq!(s.sealed_len(n + 14), Some(sealed.len()));
                let mut buf = sealed.to_vec();
                assert_eq!(
                    o.open(Instant::ZERO, &mut buf).unwrap().payload(),
                    &payload[..n]
                );
            }
        }
    }
}

#[test]
fn bad_config() {
    let cfg = SealerConfig::new().with_pad_to(60);
    assert_eq!(
        Sealer::new(key(SuiteId::BfCbcHmacSha1), Seq(0), cfg).unwrap_err(),
        ConfigError::PaddingGranule { granule: 120 }
    );
    // A 24-bit security number is a type, so a wider one cannot reach a config.
    assert!(SecurityNumber::new(1 << 24).is_err());
    for size in [0, crate::replay::MAX_WINDOW + 1] {
        let cfg = OpenerConfig::new().with_replay_window(size);
        assert_eq!(
            Opener::new(key(SuiteId::Aes128Gcm), cfg).unwrap_err(),
            ConfigError::ReplayWindow { size }
        );
    }
}

#[test]
fn max_inner_len_is_the_exact_fit() {
    for suite in [SuiteId::BfCbcHmacSha1, SuiteId::Aes128Gcm, SuiteId::None] {
        for pad_to in [0u8, 8, 16, 64] {
            let (s, _) = pair_allowing_none(suite, pad_to);
            for frame_len in [0, 40, 59, 60, 61, 100, 1514, 9000] {
                let got = s.max_inner_len(frame_len);
                let fits = |n: usize| s.sealed_len(n).is_some_and(|l| l <= frame_len);
                // A step-by-step search from the smallest inner frame, as callers used to do.
                let mut want = None;
                let mut n = 14;
                while fits(n) {
                    want = Some(n);
                    n += 1;
                }
                assert_eq!(got, want, "{suite} pad {pad_to} frame {frame_len}");
            }
        }
    }
}

#[test]
fn opened_range_locates_the_inner_frame() {
    let (mut s, mut o) = pair(SuiteId::Aes128Gcm, SealerConfig::new(), OpenerConfig::new());
    let inner = eth(b"where am i");
    let mut out = [0u8; 256];
    let mut buf = s.seal(Instant::ZERO, &inner, &mut out).unwrap().to_vec();
    let range = o.open(Instant::ZERO, &mut buf).unwrap().range();
    assert_eq!(&buf[range], &inner[..]);
}

fn sn(value: u32) -> Option<SecurityNumber> {
    Some(SecurityNumber::new(value).unwrap())
}

#[test]
fn signed_frames() {
    let signer = SigningKey::from_seed(&[7; 32]).unwrap();
    let vk = signer.public_key();
    let (s, o) = pair(
        SuiteId::NullHmacSha1,
        SealerConfig::default(),
        OpenerConfig::default(),
    );
    let mut s = s.with_signer(signer);
    let mut o = o.with_verifier(vk);
    let mut out = [0u8; 256];
    let sealed = s
        .seal(Instant::ZERO, &eth(b"broadcast"), &mut out)
        .unwrap()
        .to_vec();
    assert_eq!(sealed[14], 0x02);
    let mut bad = sealed.clone();
    let n = bad.len();
    bad[n - 1] ^= 0x80;
    assert_eq!(
        o.open(Instant::ZERO, &mut bad).unwrap_err().reason(),
        DropReason::BadSignature
    );
    let mut good = sealed.clone();
    assert!(o.open(Instant::ZERO, &mut good).unwrap().signed());
    // An opener without a verifier refuses signed frames.
    let mut plain = Opener::new(key(SuiteId::NullHmacSha1), OpenerConfig::default()).unwrap();
    assert_eq!(
        plain
            .open(Instant::ZERO, &mut sealed.clone())
            .unwrap_err()
            .reason(),
        DropReason::Unsupported
    );
}

/// A frame with the signature flag but no valid ICV (a host without the key) is dropped by the
/// ICV check: the signature is never verified, so garbage costs no Ed25519 verification.
#[test]
fn the_icv_is_checked_before_the_signature() {
    for suite in [
        SuiteId::NullHmacSha1,
        SuiteId::Aes128Gcm,
        SuiteId::BfCbcHmacSha1,
    ] {
        let signer = SigningKey::from_seed(&[7; 32]).unwrap();
        let vk = signer.public_key();
        let (s, o) = pair(suite, SealerConfig::default(), OpenerConfig::default());
        let mut s = s.with_signer(signer);
        let mut o = o.with_verifier(vk);
        let mut out = [0u8; 256];
        let sealed = s
            .seal(Instant::ZERO, &eth(b"broadcast"), &mut out)
            .unwrap()
            .to_vec();
        // Garbage where the ICV and the signature are: both wrong, the ICV is found first.
        let mut garbage = sealed.clone();
        let n = garbage.len();
        for b in &mut garbage[n - 64 - suite.icv_len()..] {
            *b ^= 0x5a;
        }
        assert_eq!(
            o.open(Instant::ZERO, &mut garbage).unwrap_err().reason(),
            DropReason::BadIcv,
            "{suite}"
        );
        // A valid ICV with a forged signature (an insider with the key) fails the signature.
        let mut forged = sealed.clone();
        forged[n - 1] ^= 1;
        assert_eq!(
            o.open(Instant::ZERO, &mut forged).unwrap_err().reason(),
            DropReason::BadSignature,
            "{suite}"
        );
        assert!(o.open(Instant::ZERO, &mut sealed.clone()).unwrap().signed());
    }
}

#[test]
fn unverified_signatures_only_when_asked_and_a_key_learnt_later() {
    let signer = SigningKey::from_seed(&[7; 32]).unwrap();
    let vk = signer.public_key();
    let (s, mut o) = pair(
        SuiteId::NullHmacSha1,
        SealerConfig::default(),
        OpenerConfig::default(),
    );
    let mut s = s.with_signer(signer);
    let mut out = [0u8; 256];
    let mut frame = |s: &mut Sealer| {
        s.seal(Instant::ZERO, &eth(b"arp"), &mut out)
            .unwrap()
            .to_vec()
    };
    // Trust on first use: accepted, but not reported as signed.
    o.set_accept_unverified(true);
    let mut first = frame(&mut s);
    assert!(!o.open(Instant::ZERO, &mut first).unwrap().signed());
    // A forgery is accepted too while no key is known: that is what TOFU means.
    let mut forged = frame(&mut s);
    let n = forged.len();
    forged[n - 1] ^= 0x80;
    assert!(o.open(Instant::ZERO, &mut forged).is_ok());
    // Once the key is learnt, forgeries are dropped and the replay window was kept.
    o.set_verifier(Some(vk));
    let mut forged = frame(&mut s);
    let n = forged.len();
    forged[n - 1] ^= 0x80;
    assert_eq!(
        o.open(Instant::ZERO, &mut forged).unwrap_err().reason(),
        DropReason::BadSignature
    );
    assert!(o.open(Instant::ZERO, &mut frame(&mut s)).unwrap().signed());
    assert!(o.replay_window().highest().is_some());
}

#[test]
fn a_restarted_window_accepts_from_the_new_start_only() {
    let (mut s, mut o) = pair(
        SuiteId::NullHmacSha1,
        SealerConfig::default(),
        OpenerConfig::default(),
    );
    let mut out = [0u8; 256];
    let mut high = Sealer::new(
        key(SuiteId::NullHmacSha1),
        Seq(100_000),
        SealerConfig::default(),
    )
    .unwrap();
    let mut f = high
        .seal(Instant::ZERO, &eth(b"old"), &mut out)
        .unwrap()
        .to_vec();
    o.open(Instant::ZERO, &mut f).unwrap();
    // The sender restarted at a low sequence number: too old, until the window restarts.
    let mut low = s
        .seal(Instant::ZERO, &eth(b"new"), &mut out)
        .unwrap()
        .to_vec();
    assert_eq!(
        o.open(Instant::ZERO, &mut low.clone())
            .unwrap_err()
            .reason(),
        DropReason::TooOld
    );
    let next = s.next_seq().unwrap().0;
    o.restart_replay_window(next - 1);
    assert!(o.open(Instant::ZERO, &mut low).is_ok());
    // Anything the restarted sender sealed before the restart point stays refused.
    let mut before = Sealer::new(
        key(SuiteId::NullHmacSha1),
        Seq(998),
        SealerConfig::default(),
    )
    .unwrap();
    let mut stale = before
        .seal(Instant::ZERO, &eth(b"y"), &mut out)
        .unwrap()
        .to_vec();
    assert_eq!(
        o.open(Instant::ZERO, &mut stale).unwrap_err().reason(),
        DropReason::Replay
    );
    // Reordering above the restart point is still fine.
    let mut a = s
        .seal(Instant::ZERO, &eth(b"a"), &mut out)
        .unwrap()
        .to_vec();
    let mut b = s
        .seal(Instant::ZERO, &eth(b"b"), &mut out)
        .unwrap()
        .to_vec();
    assert!(o.open(Instant::ZERO, &mut b).is_ok());
    assert!(o.open(Instant::ZERO, &mut a).is_ok());
}

#[test]
fn sub_protocols_and_8023() {
    let (mut s, mut o) = pair(
        SuiteId::ChaCha20Poly1305,
        SealerConfig::default(),
        OpenerConfig::default(),
    );
    let mut out = [0u8; 128];
    let sealed = s
        .seal_sub(Instant::ZERO, DST, SRC, Protocol::Control, b"fb", &mut out)
        .unwrap();
    let mut buf = sealed.to_vec();
    let opened = o.open(Instant::ZERO, &mut buf).unwrap();
    assert_eq!(opened.protocol(), Protocol::Control);
    assert_eq!(opened.payload(), b"fb");
    assert_eq!(opened.dst_addr(), DST);
    assert_eq!(opened.src_addr(), SRC);
    let mut llc = eth(b"llc");
    llc[12..14].copy_from_slice(&3u16.to_be_bytes());
    assert_eq!(
        s.seal(Instant::ZERO, &llc, &mut out),
        Err(SealError::BadProtocol)
    );
    assert_eq!(
        s.seal_sub(
            Instant::ZERO,
            DST,
            SRC,
            Protocol::EtherType(0x0800),
            b"",
            &mut out
        ),
        Err(SealError::BadProtocol)
    );
    assert_eq!(
        s.seal(Instant::ZERO, &[0u8; 13], &mut out),
        Err(SealError::BadInput)
    );
    assert_eq!(
        s.seal(Instant::ZERO, &eth(&[0; 200]), &mut out),
        Err(SealError::BufferTooSmall)
    );
}

/// Seals `inputs` one by one with `seal` and as one `seal_batch`, from identical sealers,
/// and checks that results, bytes and the next SN agree.
fn check_batch_equals_sequential(make: &dyn Fn() -> Sealer, inputs: &[Vec<u8>], out_len: usize) {
    let now = Instant::from_secs(1_700_000_000);
    let mut seq_sealer = make();
    let mut expected = Vec::new();
    for input in inputs {
        let mut out = vec![0u8; out_len];
        let r = seq_sealer.seal(now, input, &mut out).map(<[u8]>::len);
        expected.push((r, out));
    }
    let mut batch_sealer = make();
    let mut outs: Vec<Vec<u8>> = inputs.iter().map(|_| vec![0u8; out_len]).collect();
    let mut jobs: Vec<SealJob<'_>> = inputs
        .iter()
        .zip(outs.iter_mut())
        .map(|(input, out)| SealJob::new(input, out))
        .collect();
    batch_sealer.seal_batch(now, &mut jobs);
    let results: Vec<_> = jobs.iter().map(|j| j.result).collect();
    drop(jobs);
    for (i, (((want_r, want), got_r), got)) in expected.iter().zip(&results).zip(&outs).enumerate()
    {
        assert_eq!(want_r, got_r, "job {i} of {}", inputs.len());
        if let Ok(n) = *want_r {
            assert_eq!(want[..n], got[..n], "job {i} of {}", inputs.len());
        }
    }
    assert_eq!(seq_sealer.next_seq(), batch_sealer.next_seq());
}

/// A mix of frame lengths and bad inputs (too short, 802.3 length, too long for `out`).
fn batch_inputs(n: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| match i % 11 {
            3 => vec![1u8; 13],
            5 => {
                let mut f = eth(b"llc");
                f[12..14].copy_from_slice(&3u16.to_be_bytes());
                f
            }
            7 => eth(&vec![9u8; 2000]),
            _ => eth(&vec![i as u8; (i * 97) % 1500]),
        })
        .collect()
}

#[test]
fn seal_batch_equals_sequential_seal() {
    let configs = [
        SealerConfig::default(),
        SealerConfig::new()
            .with_security_number(sn(0x00ab_cdef))
            .with_timestamps(true)
            .with_pad_to(16),
    ];
    for cfg in configs {
        for n in [0, 1, 2, 3, 5, 8, 16, 17, 40] {
            let make = || Sealer::new(key(SuiteId::BfCbcHmacSha1), Seq(77), cfg).unwrap();
            check_batch_equals_sequential(&make, &batch_inputs(n), 1600);
        }
    }
    // Signed frames.
    let make = || {
        Sealer::new(key(SuiteId::BfCbcHmacSha1), Seq(5), SealerConfig::default())
            .unwrap()
            .with_signer(SigningKey::from_seed(&[3; 32]).unwrap())
    };
    check_batch_equals_sequential(&make, &batch_inputs(20), 1700);
    // Every suite, batched or looping.
    for &suite in SuiteId::ALL {
        let cfg = SealerConfig::new().with_allow_none(true);
        let make = || Sealer::new(key(suite), Seq(1), cfg).unwrap();
        check_batch_equals_sequential(&make, &batch_inputs(19), 1600);
    }
}

#[test]
fn seal_batch_runs_out_of_sns_like_seal() {
    let make = || {
        Sealer::new(
            key(SuiteId::BfCbcHmacSha1),
            Seq(u32::MAX - 2),
            SealerConfig::default(),
        )
        .unwrap()
    };
    check_batch_equals_sequential(&make, &batch_inputs(6), 1600);
    let mut s = make();
    let input = eth(b"x");
    let mut outs = [[0u8; 128]; 5];
    let mut jobs: Vec<SealJob<'_>> = outs.iter_mut().map(|o| SealJob::new(&input, o)).collect();
    s.seal_batch(Instant::ZERO, &mut jobs);
    let results: Vec<_> = jobs.iter().map(|j| j.result.map(|_| ())).collect();
    assert_eq!(
        results,
        [
            Ok(()),
            Ok(()),
            Ok(()),
            Err(SealError::RekeyRequired),
            Err(SealError::RekeyRequired)
        ]
    );
}

#[test]
fn seal_batch_frames_open() {
    let (mut s, mut o) = pair(
        SuiteId::BfCbcHmacSha1,
        SealerConfig::default(),
        OpenerConfig::default(),
    );
    let inputs: Vec<Vec<u8>> = (0..24).map(|i| eth(&vec![i as u8; i * 61])).collect();
    let mut outs = vec![[0u8; 1600]; inputs.len()];
    let mut jobs: Vec<SealJob<'_>> = inputs
        .iter()
        .zip(outs.iter_mut())
        .map(|(i, o)| SealJob::new(i, o))
        .collect();
    s.seal_batch(Instant::ZERO, &mut jobs);
    for (job, input) in jobs.iter().zip(&inputs) {
        let mut frame = job.sealed().unwrap().to_vec();
        let opened = o.open(Instant::ZERO, &mut frame).unwrap();
        assert_eq!(opened.frame(), &input[..]);
    }
    assert_eq!(SealJob::default().sealed(), Some(&[][..]));
}

#[test]
fn a_seq_limit_stops_sealing_until_it_is_raised() {
    let (mut s, _) = pair(
        SuiteId::Aes128Gcm,
        SealerConfig::default(),
        OpenerConfig::default(),
    );
    let start = s.next_seq().unwrap().0;
    s.set_seq_limit(Some(Seq(start + 2)));
    let mut out = [0u8; 256];
    assert!(s.seal(Instant::ZERO, &eth(b"a"), &mut out).is_ok());
    assert!(s.seal(Instant::ZERO, &eth(b"b"), &mut out).is_ok());
    assert_eq!(
        s.seal(Instant::ZERO, &eth(b"c"), &mut out),
        Err(SealError::Unreserved)
    );
    // Refused without consuming the number: the next one after raising is start + 2.
    s.set_seq_limit(Some(Seq(start + 3)));
    assert_eq!(s.next_seq(), Some(Seq(start + 2)));
    assert!(s.seal(Instant::ZERO, &eth(b"c"), &mut out).is_ok());
    let mut jobs_out = [[0u8; 256]; 2];
    let [o1, o2] = &mut jobs_out;
    let (f1, f2) = (eth(b"d"), eth(b"e"));
    let mut jobs = [SealJob::new(&f1, o1), SealJob::new(&f2, o2)];
    s.seal_batch(Instant::ZERO, &mut jobs);
    assert_eq!(jobs[0].result.err(), Some(SealError::Unreserved));
}
