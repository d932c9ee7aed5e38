//! A host's receive path never panics and never delivers what it should not: arbitrary frames
//! from the uplink, and arbitrary group copies (sub-protocol 0x0006) sealed under a peer's
//! static key, whose data the host unpacks in place. Input: a mode byte, then the frame or the
//! copy's data.
#![no_main]

use std::sync::Mutex;

use libfuzzer_sys::fuzz_target;
use psp_core::handshake::{PathId, Tai64n};
use psp_core::host::{Host, HostConfig, KeySpec, Keying, PeerSpec, Received};
use psp_core::protect::{OpenerConfig, SealerConfig};
use psp_core::{Instant, Protocol, Sealer, Seq, SuiteId, SuiteKey};
use zeroize::Zeroizing;

const US: [u8; 6] = [2, 0, 0, 0, 0, 1];
const PEER: [u8; 6] = [2, 0, 0, 0, 0, 2];
const KEY: [u8; 16] = [0x17; 16];

fn key_spec(key: &[u8]) -> KeySpec {
    KeySpec {
        suite: SuiteId::Aes128Gcm,
        key: Zeroizing::new(key.to_vec()),
        sealer: SealerConfig::new(),
        opener: OpenerConfig::new(),
    }
}

fn host() -> Host {
    let cfg = HostConfig {
        mac: US,
        subnets: Vec::new(),
        paths: 1,
        max_frame: 1514,
        session: None,
        wall_origin: Tai64n::from_unix(1_800_000_000, 0),
        group_copies: true,
        pki: None,
    };
    let peer = PeerSpec {
        name: "peer".into(),
        macs: vec![PEER],
        keying: Keying::Static(key_spec(&KEY)),
        paths: 1,
        normalize: None,
    };
    Host::new(
        Instant::ZERO,
        cfg,
        key_spec(&[0x42; 16]),
        None,
        vec![peer],
        Default::default(),
    )
    .unwrap()
}

struct State {
    host: Host,
    sealer: Sealer,
}

static STATE: Mutex<Option<State>> = Mutex::new(None);

struct NoRng;
impl rand_core::RngCore for NoRng {
    fn next_u32(&mut self) -> u32 {
        4
    }
    fn next_u64(&mut self) -> u64 {
        4
    }
    fn fill_bytes(&mut self, d: &mut [u8]) {
        d.fill(4);
    }
    fn try_fill_bytes(&mut self, d: &mut [u8]) -> Result<(), rand_core::Error> {
        d.fill(4);
        Ok(())
    }
}
impl rand_core::CryptoRng for NoRng {}

fuzz_target!(|input: &[u8]| {
    let Some((&mode, rest)) = input.split_first() else {
        return;
    };
    let mut guard = STATE.lock().unwrap();
    let st = guard.get_or_insert_with(|| State {
        host: host(),
        sealer: Sealer::new(
            SuiteKey::new(SuiteId::Aes128Gcm, &KEY).unwrap(),
            Seq(1),
            SealerConfig::new(),
        )
        .unwrap(),
    });
    let mut frame = if mode & 1 == 0 {
        rest.to_vec()
    } else {
        let mut out = vec![0u8; 2048];
        match st
            .sealer
            .seal_sub(Instant::ZERO, US, PEER, Protocol::GroupCopy, rest, &mut out)
        {
            Ok(f) => f.to_vec(),
            Err(_) => return,
        }
    };
    let sealed_copy = mode & 1 == 1;
    match st
        .host
        .handle_uplink(Instant::ZERO, PathId::FIRST, &mut frame, &mut NoRng)
    {
        Received::Deliver { range, .. } => {
            let inner = &frame[range];
            assert!(inner.len() >= 14);
            if sealed_copy {
                // A copy delivers its own destination (a group MAC), the sender's MAC as
                // source, and its data after the first 8 bytes.
                assert_eq!(inner[0] & 1, 1);
                assert_eq!(&inner[6..12], &PEER);
                assert_eq!(&inner[..6], &rest[..6]);
                assert_eq!(&inner[12..], &rest[6..]);
            }
        }
        Received::Consumed | Received::Dropped(_) => {}
    }
});
