//! The hybrid (ML-KEM-768) handshake beside the gateway's framing (docs/SESSIONS.md, "Hybrid
//! post-quantum sessions"): its largest message fits one PSP frame on a 1500-byte uplink under
//! every group-key setting, so no message is split; and what it costs against X25519 alone
//! (`--ignored`, release build: `cargo test --release -p psp-core --test sep_exchange_kem --
//! --ignored --nocapture`).
#![allow(missing_docs)]

use core::net::{IpAddr, Ipv4Addr};

use psp_core::crypto::{SuiteId, SuiteKey};
use psp_core::handshake::messages::{
    KEM_SHARE_LEN, KEM_SHARE_REPLY_LEN, MAX_MESSAGE_LEN, MAX_REQUEST_LEN,
};
use psp_core::handshake::rand_core::{CryptoRng, RngCore};
use psp_core::handshake::{
    Config, Event, Handshake, Identity, KemMode, PathId, Peer, SessionKeys, SmkexMode, Tai64n,
};
use psp_core::protect::{Sealer, SealerConfig};
use psp_core::time::Instant;
use psp_core::wire::{Protocol, SecurityNumber, Seq};

/// The largest PSP frame a 1500-byte uplink carries, by uplink kind (docs/GATEWAY.md, "MTU":
/// raw: the MTU plus the 14-byte Ethernet header; UDP: the datagram payload).
const RAW_1500: usize = 1500 + 14;
const UDP4_1500: usize = 1500 - 20 - 8;
const UDP6_1500: usize = 1500 - 40 - 8;
// So a frame that fits UDP over IPv6 fits the other two.
const _: () = assert!(UDP6_1500 < UDP4_1500 && UDP4_1500 < RAW_1500);

/// A KemShare (1,238 bytes), the largest message, sealed under the group key with the most a
/// group sealer adds (a 3-byte security number, a 4-byte timestamp, `pad_to` 64 and so up to 63
/// bytes of padding, the suite's ICV, the 64-byte Ed25519 signature) fits a 1500-byte uplink of
/// every kind, for every suite: 1,414 bytes at most (bf-cbc-hmac-sha1), 38 to spare over UDP on
/// IPv6. The Request with a 382-byte certificate (503 bytes) and the KemShareReply (1,142) are
/// shorter. So nothing is split.
#[test]
fn the_largest_message_fits_one_frame_on_a_1500_byte_uplink() {
    assert_eq!(MAX_MESSAGE_LEN, KEM_SHARE_LEN);
    assert_eq!(
        (KEM_SHARE_LEN, KEM_SHARE_REPLY_LEN, MAX_REQUEST_LEN),
        (1238, 1142, 503)
    );
    let id = Identity::from_seed([0xa3; 32]).unwrap();
    let mut worst = 0;
    for &suite in SuiteId::ALL {
        let key = SuiteKey::new(suite, &[7; 32][..suite.key_len()]).unwrap();
        let cfg = SealerConfig::new()
            .with_security_number(Some(SecurityNumber::new(0x00ab_cdef).unwrap()))
            .with_timestamps(true)
            .with_pad_to(64)
            .with_allow_none(true);
        let mut sealer = Sealer::new(key, Seq(1), cfg)
            .unwrap()
            .with_signer(id.signing_key().unwrap());
        // The worst length over every message length up to the largest (padding varies).
        for len in [MAX_REQUEST_LEN, KEM_SHARE_REPLY_LEN, KEM_SHARE_LEN] {
            let sealed = sealer.sealed_len(14 + len).unwrap();
            assert!(sealed <= UDP6_1500, "{suite:?} {len}: {sealed}");
            worst = worst.max(sealed);
        }
        // The computed length is the real one.
        let msg = [0x5a; KEM_SHARE_LEN];
        let mut out = [0u8; 2048];
        let frame = sealer
            .seal_sub(
                Instant::from_secs(1),
                [2, 0, 0, 0, 0, 2],
                [2, 0, 0, 0, 0, 1],
                Protocol::SessionEstablishment,
                &msg,
                &mut out,
            )
            .unwrap();
        assert_eq!(frame.len(), sealer.sealed_len(14 + KEM_SHARE_LEN).unwrap());
    }
    assert_eq!(worst, 1390);
    assert_eq!(UDP6_1500 - worst, 62);
}

/// A fixed-seed RNG (xorshift; the handshake's draws only need to differ between runs).
struct Rng(u64);

impl RngCore for Rng {
    fn next_u32(&mut self) -> u32 {
        self.next_u64() as u32
    }
    fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn fill_bytes(&mut self, dest: &mut [u8]) {
        for c in dest.chunks_mut(8) {
            let v = self.next_u64().to_le_bytes();
            c.copy_from_slice(&v[..c.len()]);
        }
    }
    fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), rand_core::Error> {
        self.fill_bytes(dest);
        Ok(())
    }
}

impl CryptoRng for Rng {}

fn config(n: u8, kem: KemMode, id: &Identity) -> Config {
    let mut c = Config::new(
        [2, 0, 0, 0, 0, n],
        IpAddr::V4(Ipv4Addr::new(10, 77, 0, n)),
        24,
    );
    c.paths = 2;
    c.smkex = SmkexMode::Preferred;
    c.kem = kem;
    c.static_key = Some(id.static_key());
    c
}

/// One complete two-path handshake between two hosts with identities, both in memory; returns
/// both sides' keys.
fn handshake(kem: KemMode, rng: &mut Rng) -> (SessionKeys, SessionKeys) {
    let (ia, ib) = (
        Identity::from_seed([0xa3; 32]).unwrap(),
        Identity::from_seed([0xb2; 32]).unwrap(),
    );
    let now = Instant::from_secs(1);
    let peer = |n: u8, id: &Identity| Peer {
        mac: [2, 0, 0, 0, 0, n],
        addr: IpAddr::V4(Ipv4Addr::new(10, 77, 0, n)),
        pinned_x25519: Some(id.static_key().public_key()),
    };
    let mut a = Handshake::initiate(
        now,
        config(1, kem, &ia),
        peer(2, &ib),
        Tai64n::from_unix(1_700_000_000, 0),
        rng,
    );
    let mut buf = [0u8; MAX_MESSAGE_LEN];
    let t = a.poll_transmit(now, &mut buf).unwrap();
    let mut b = Handshake::respond(
        now,
        config(2, kem, &ib),
        peer(1, &ia),
        t.path,
        &buf[..t.len],
        rng,
    )
    .unwrap();
    let (mut ka, mut kb) = (None, None);
    for _ in 0..8 {
        while let Some(t) = b.poll_transmit(now, &mut buf) {
            let _ = a.handle_message(now, t.path, &buf[..t.len]);
        }
        while let Some(t) = a.poll_transmit(now, &mut buf) {
            let _ = b.handle_message(now, t.path, &buf[..t.len]);
        }
        for (h, k) in [(&mut a, &mut ka), (&mut b, &mut kb)] {
            if let Some(Event::Established(keys)) = h.poll_event() {
                *k = Some(keys);
            }
        }
    }
    (ka.unwrap(), kb.unwrap())
}

/// This thread's CPU time in nanoseconds (Linux: the first field of
/// /proc/thread-self/schedstat).
fn thread_cpu_ns() -> u64 {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap();
    s.split_whitespace().next().unwrap().parse().unwrap()
}

/// Handshake cost, X25519 only against X25519 + ML-KEM-768, in one run: both sides of a
/// two-path handshake with identities (the gateway's default shape), in one thread, so CPU and
/// wall time are both sides' together. Rounds alternate the two modes.
#[test]
#[ignore = "measurement: run in release, see the file's doc"]
fn handshake_cost_kem_against_x25519() {
    const ROUNDS: usize = 10;
    const PER_ROUND: u32 = 100;
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    // Warm up both paths.
    for kem in [KemMode::Off, KemMode::Preferred] {
        let (a, b) = handshake(kem, &mut rng);
        assert_eq!(a.kem(), kem == KemMode::Preferred);
        assert_eq!(a.key_id(), b.key_id());
    }
    let mut results: Vec<(KemMode, Vec<(f64, f64)>)> =
        vec![(KemMode::Off, Vec::new()), (KemMode::Preferred, Vec::new())];
    for _ in 0..ROUNDS {
        for (kem, samples) in results.iter_mut() {
            let (c0, w0) = (thread_cpu_ns(), std::time::Instant::now());
            for _ in 0..PER_ROUND {
                let _ = handshake(*kem, &mut rng);
            }
            let cpu = (thread_cpu_ns() - c0) as f64 / f64::from(PER_ROUND) / 1e3;
            let wall = w0.elapsed().as_nanos() as f64 / f64::from(PER_ROUND) / 1e3;
            samples.push((cpu, wall));
        }
    }
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        (v[v.len() / 2 - 1] + v[v.len() / 2]) / 2.0
    };
    println!(
        "handshake, both sides, two paths, identities; median of {ROUNDS} rounds of {PER_ROUND}"
    );
    println!("mode\tCPU us\twall us");
    let mut med = Vec::new();
    for (kem, samples) in &results {
        let cpu = median(samples.iter().map(|s| s.0).collect());
        let wall = median(samples.iter().map(|s| s.1).collect());
        println!("{kem:?}\t{cpu:.1}\t{wall:.1}");
        med.push((cpu, wall));
    }
    println!(
        "ratio\t{:.2}\t{:.2}",
        med[1].0 / med[0].0,
        med[1].1 / med[0].1
    );
    println!(
        "size_of: Handshake {} bytes, Repr {} bytes",
        size_of::<Handshake>(),
        size_of::<psp_core::handshake::messages::Repr>()
    );
}

#[test]
fn the_hybrid_handshake_completes_with_identities_over_two_paths() {
    let mut rng = Rng(1);
    let (a, b) = handshake(KemMode::Required, &mut rng);
    assert!(a.kem() && b.kem() && a.two_path());
    let (mut x, mut y) = ([0u8; 32], [0u8; 32]);
    a.export(b"t", &mut x).unwrap();
    b.export(b"t", &mut y).unwrap();
    assert_eq!(x, y);
    let _ = PathId::FIRST;
}
