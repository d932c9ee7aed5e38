//! Property tests of whole-frame sealing and opening: round trips for every suite and option,
//! tamper and truncation rejection, and the replay window as seen through `Opener::open`.
#![allow(missing_docs)]

use proptest::prelude::*;
use psp_core::crypto::sign::SigningKey;
use psp_core::crypto::{SuiteId, SuiteKey};
use psp_core::protect::{DropReason, Opener, OpenerConfig, Sealer, SealerConfig};
use psp_core::time::{Duration, Instant};
use psp_core::wire::{MIN_FRAME_LEN, SecurityNumber, Seq};

const DST: [u8; 6] = [0x02, 0, 0, 0, 0, 0x02];
const SRC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x01];
const NOW: Instant = Instant::from_millis(1_700_000_000_000);

#[derive(Debug, Clone, Copy)]
struct Options {
    security_number: Option<u32>,
    timestamps: bool,
    pad_to: u8,
    signed: bool,
}

fn suite() -> impl Strategy<Value = SuiteId> {
    proptest::sample::select(SuiteId::ALL.to_vec())
}

/// Suites whose ICV protects the frame (everything but `none`).
fn keyed_suite() -> impl Strategy<Value = SuiteId> {
    proptest::sample::select(
        SuiteId::ALL
            .iter()
            .copied()
            .filter(|s| *s != SuiteId::None)
            .collect::<Vec<_>>(),
    )
}

fn options() -> impl Strategy<Value = Options> {
    (
        proptest::option::of(0u32..=0xff_ffff),
        any::<bool>(),
        proptest::sample::select(vec![0u8, 1, 8, 16, 32, 64]),
        proptest::bool::weighted(0.1),
    )
        .prop_map(|(security_number, timestamps, pad_to, signed)| Options {
            security_number,
            timestamps,
            pad_to,
            signed,
        })
}

fn key_bytes(suite: SuiteId, seed: u8) -> Vec<u8> {
    (0..suite.key_len())
        .map(|i| (i as u8).wrapping_mul(31) ^ seed)
        .collect()
}

fn endpoints(suite: SuiteId, opts: Options, window: u32, initial_seq: u32) -> (Sealer, Opener) {
    let key = key_bytes(suite, 0x5c);
    let sn = opts
        .security_number
        .map(|n| SecurityNumber::new(n).unwrap());
    let scfg = SealerConfig::new()
        .with_security_number(sn)
        .with_timestamps(opts.timestamps)
        .with_pad_to(opts.pad_to)
        .with_allow_none(true);
    let ocfg = OpenerConfig::new()
        .with_security_number(sn)
        .with_require_timestamp(opts.timestamps)
        .with_allow_none(true)
        .with_replay_window(window);
    let initial_seq = Seq(initial_seq);
    let mut sealer = Sealer::new(SuiteKey::new(suite, &key).unwrap(), initial_seq, scfg).unwrap();
    let mut opener = Opener::new(SuiteKey::new(suite, &key).unwrap(), ocfg).unwrap();
    if opts.signed {
        let signer = SigningKey::from_seed(&[0x11; 32]).unwrap();
        opener = opener.with_verifier(signer.public_key());
        sealer = sealer.with_signer(signer);
    }
    (sealer, opener)
}

fn eth(ethertype: u16, payload: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(14 + payload.len());
    v.extend_from_slice(&DST);
    v.extend_from_slice(&SRC);
    v.extend_from_slice(&ethertype.to_be_bytes());
    v.extend_from_slice(payload);
    v
}

fn seal(sealer: &mut Sealer, inner: &[u8]) -> Vec<u8> {
    let mut out = vec![0u8; inner.len().max(MIN_FRAME_LEN) + sealer.overhead()];
    let sealed = sealer.seal(NOW, inner, &mut out).unwrap();
    assert_eq!(Some(sealed.len()), sealer.sealed_len(inner.len()));
    sealed.to_vec()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn roundtrip(
        suite in suite(),
        opts in options(),
        payload in proptest::collection::vec(any::<u8>(), 0..1600),
        ethertype in 0x0600u16..,
        initial_seq in any::<u32>(),
        skew_ms in -2000i64..=2000,
    ) {
        let (mut sealer, mut opener) = endpoints(suite, opts, 64, initial_seq);
        let inner = eth(ethertype, &payload);
        let mut frame = seal(&mut sealer, &inner);
        prop_assert!(frame.len() <= inner.len().max(MIN_FRAME_LEN) + sealer.overhead());
        prop_assert!(frame.len() >= MIN_FRAME_LEN);
        let now = Instant::from_millis((NOW.total_millis() as i64 + skew_ms) as u64);
        let opened = opener.open(now, &mut frame).unwrap();
        prop_assert_eq!(opened.frame(), &inner[..]);
        prop_assert_eq!(opened.seq(), Seq(initial_seq));
        prop_assert_eq!(opened.security_number().map(SecurityNumber::get), opts.security_number);
        prop_assert_eq!(opened.signed(), opts.signed);
    }

    #[test]
    fn any_bit_flip_is_rejected(
        suite in keyed_suite(),
        opts in options(),
        payload in proptest::collection::vec(any::<u8>(), 0..300),
        bit in any::<proptest::sample::Index>(),
    ) {
        let (mut sealer, mut opener) = endpoints(suite, opts, 64, 7);
        let mut frame = seal(&mut sealer, &eth(0x0800, &payload));
        let bit = bit.index(frame.len() * 8);
        frame[bit / 8] ^= 1 << (bit % 8);
        prop_assert!(opener.open(NOW, &mut frame).is_err(), "bit {} of {}", bit, frame.len() * 8);
    }

    #[test]
    fn every_truncation_is_rejected(
        suite in suite(),
        opts in options(),
        payload in proptest::collection::vec(any::<u8>(), 0..120),
    ) {
        // `none` has no ICV: a cut frame is just a shorter valid one, so only a signed `none`
        // frame can detect truncation.
        let opts = Options { signed: opts.signed || suite == SuiteId::None, ..opts };
        let (mut sealer, mut opener) = endpoints(suite, opts, 64, 7);
        let frame = seal(&mut sealer, &eth(0x86dd, &payload));
        for n in 0..frame.len() {
            let mut cut = frame[..n].to_vec();
            prop_assert!(opener.open(NOW, &mut cut).is_err(), "length {}", n);
        }
        let mut whole = frame.clone();
        prop_assert!(opener.open(NOW, &mut whole).is_ok());
    }

    #[test]
    fn replay_is_rejected(suite in suite(), opts in options(), count in 1usize..20) {
        let opts = Options { signed: false, ..opts };
        let (mut sealer, mut opener) = endpoints(suite, opts, 64, 100);
        let frames: Vec<Vec<u8>> = (0..count).map(|i| seal(&mut sealer, &eth(0x0800, &[i as u8; 20]))).collect();
        for f in &frames {
            prop_assert!(opener.open(NOW, &mut f.clone()).is_ok());
        }
        for f in &frames {
            let err = opener.open(NOW, &mut f.clone()).unwrap_err();
            prop_assert_eq!(err.reason(), DropReason::Replay);
        }
    }

    #[test]
    fn reordering_within_window_loses_nothing(
        suite in keyed_suite(),
        order in Just((0..48usize).collect::<Vec<_>>()).prop_shuffle(),
    ) {
        let opts = Options { security_number: None, timestamps: false, pad_to: 0, signed: false };
        let (mut sealer, mut opener) = endpoints(suite, opts, 48, 1 << 20);
        let frames: Vec<Vec<u8>> = (0..48).map(|i| seal(&mut sealer, &eth(0x0800, &[i as u8; 10]))).collect();
        for &i in &order {
            let mut f = frames[i].clone();
            let opened = opener.open(NOW, &mut f).unwrap();
            prop_assert_eq!(opened.payload(), &[i as u8; 10][..]);
        }
        prop_assert_eq!(opener.replay_window().highest(), Some((1 << 20) + 47));
    }

    #[test]
    fn below_window_is_too_old(
        suite in keyed_suite(),
        window in 1u32..100,
        extra in 0u32..50,
    ) {
        let opts = Options { security_number: None, timestamps: false, pad_to: 0, signed: false };
        let (mut sealer, mut opener) = endpoints(suite, opts, window, 1000);
        let n = window + 1 + extra;
        let frames: Vec<Vec<u8>> = (0..n).map(|_| seal(&mut sealer, &eth(0x0800, b"x"))).collect();
        // Deliver the newest first: everything `window` or more below it is too old.
        let last = (n - 1) as usize;
        prop_assert!(opener.open(NOW, &mut frames[last].clone()).is_ok());
        for (i, f) in frames.iter().enumerate().take(last) {
            let mut f = f.clone();
            let result = opener.open(NOW, &mut f).map(|_| ());
            if (last - i) as u32 >= window {
                prop_assert_eq!(result.unwrap_err().reason(), DropReason::TooOld);
            } else {
                prop_assert!(result.is_ok());
            }
        }
    }

    #[test]
    fn garbage_never_panics(
        icv_suite in suite(),
        bytes in proptest::collection::vec(any::<u8>(), 0..200),
        flags in any::<u8>(),
    ) {
        let opts = Options { security_number: None, timestamps: false, pad_to: 0, signed: false };
        let (_, mut opener) = endpoints(icv_suite, opts, 64, 0);
        let mut frame = bytes;
        if frame.len() > 14 {
            frame[12] = 0x19;
            frame[13] = 0x82;
            frame[14] = flags;
        }
        let _ = opener.open(NOW, &mut frame);
    }
}

#[test]
fn timestamp_outside_skew_is_rejected() {
    let opts = Options {
        security_number: None,
        timestamps: true,
        pad_to: 0,
        signed: false,
    };
    let (mut sealer, mut opener) = endpoints(SuiteId::Aes256Gcm, opts, 64, 0);
    let frame = seal(&mut sealer, &eth(0x0800, b"t"));
    for late in [Duration::from_millis(2001), Duration::from_secs(3600)] {
        let err = opener.open(NOW + late, &mut frame.clone()).unwrap_err();
        assert_eq!(err.reason(), DropReason::Timestamp);
    }
    assert!(opener.open(NOW, &mut frame.clone()).is_ok());
}

#[test]
fn every_bit_flip_is_rejected_exhaustively() {
    let with_all = Options {
        security_number: Some(0x12_3456),
        timestamps: true,
        pad_to: 8,
        signed: false,
    };
    for &suite in SuiteId::ALL {
        let opts = Options {
            signed: suite == SuiteId::None,
            ..with_all
        };
        let (mut sealer, mut opener) = endpoints(suite, opts, 64, 7);
        let frame = seal(&mut sealer, &eth(0x0800, b"every bit counts"));
        for bit in 0..frame.len() * 8 {
            let mut f = frame.clone();
            f[bit / 8] ^= 1 << (bit % 8);
            assert!(opener.open(NOW, &mut f).is_err(), "{suite}: bit {bit}");
        }
        assert!(opener.open(NOW, &mut frame.clone()).is_ok(), "{suite}");
    }
}
