//! Example: two PSP endpoints in one process. Alice seals an ARP request and an IPv4 frame with
//! the default suite; Bob opens them; a replayed and a tampered frame are refused with a local
//! reason (what a gateway would count).
//!
//! ```sh
//! cargo run -p psp-examples --bin loopback [-- SUITE]
//! ```

use std::process::ExitCode;

use psp_core::crypto::{SuiteId, SuiteKey};
use psp_core::protect::{Opener, OpenerConfig, Sealer, SealerConfig};
use psp_core::time::Instant;

const ALICE: [u8; 6] = [0x02, 0, 0, 0, 0, 0x01];
const BOB: [u8; 6] = [0x02, 0, 0, 0, 0, 0x02];

fn main() -> ExitCode {
    let name = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "bf-cbc-hmac-sha1".to_owned());
    let Some(suite) = SuiteId::from_name(&name) else {
        eprintln!("loopback: unknown suite `{name}`");
        return ExitCode::from(2);
    };
    // A fixed demo key; real deployments load keys from files (`psp-gateway keygen`).
    let key: Vec<u8> = (0..suite.key_len()).map(|i| i as u8 ^ 0x5a).collect();
    let (Ok(ka), Ok(kb)) = (SuiteKey::new(suite, &key), SuiteKey::new(suite, &key)) else {
        eprintln!("loopback: key rejected");
        return ExitCode::FAILURE;
    };
    let cfg = SealerConfig::new().with_allow_none(true);
    let ocfg = OpenerConfig::new().with_allow_none(true);
    // The initial sequence number comes from the caller's RNG (here: a fixed demo value).
    let mut alice = Sealer::new(
        ka,
        Sealer::random_initial_seq([0x77, 0x9f, 0x62, 0x55]),
        cfg,
    )
    .expect("suite allowed");
    let mut bob = Opener::new(kb, ocfg).expect("suite allowed");
    let now = Instant::from_secs(1_700_000_000);

    let frames = [arp_request(), ipv4_ping()];
    let mut wire = Vec::new();
    for inner in &frames {
        let mut out = [0u8; 1600];
        let sealed = alice.seal(now, inner, &mut out).expect("seal");
        println!(
            "sealed {} -> {} bytes: {}",
            inner.len(),
            sealed.len(),
            hex::encode(&sealed[..24])
        );
        wire.push(sealed.to_vec());
    }
    for (frame, inner) in wire.iter().zip(&frames) {
        let mut buf = frame.clone();
        match bob.open(now, &mut buf) {
            Ok(o) => {
                assert_eq!(o.frame(), &inner[..]);
                println!(
                    "opened seq {:#010x}: {:?}, {} bytes",
                    o.seq().0,
                    o.protocol(),
                    o.frame().len()
                );
            }
            Err(e) => {
                eprintln!("unexpected drop: {}", e.reason());
                return ExitCode::FAILURE;
            }
        }
    }
    let mut replay = wire[0].clone();
    println!(
        "replayed frame: {:?}",
        bob.open(now, &mut replay)
            .map(|_| ())
            .map_err(|e| e.reason())
    );
    // A fresh frame with one bit flipped in transit: the ICV check (before decryption) fails.
    let mut out = [0u8; 1600];
    let mut tampered = alice
        .seal(now, &frames[1], &mut out)
        .expect("seal")
        .to_vec();
    let last = tampered.len() - 1;
    tampered[last] ^= 0x80;
    println!(
        "tampered frame: {:?}",
        bob.open(now, &mut tampered)
            .map(|_| ())
            .map_err(|e| e.reason())
    );
    if suite == SuiteId::None {
        println!("(suite `none` has no ICV: tampering goes unnoticed; measurement mode only)");
    }
    ExitCode::SUCCESS
}

/// ARP who-has 10.0.0.2 tell 10.0.0.1, broadcast.
fn arp_request() -> Vec<u8> {
    let mut f = vec![0xff; 6];
    f.extend_from_slice(&ALICE);
    f.extend_from_slice(&[0x08, 0x06, 0, 1, 0x08, 0, 6, 4, 0, 1]);
    f.extend_from_slice(&ALICE);
    f.extend_from_slice(&[10, 0, 0, 1, 0, 0, 0, 0, 0, 0, 10, 0, 0, 2]);
    f
}

/// An IPv4 ICMP echo request from 10.0.0.1 to 10.0.0.2 (checksums not computed).
fn ipv4_ping() -> Vec<u8> {
    let mut f = BOB.to_vec();
    f.extend_from_slice(&ALICE);
    f.extend_from_slice(&[0x08, 0x00, 0x45, 0, 0, 36, 0, 1, 0x40, 0, 64, 1, 0, 0]);
    f.extend_from_slice(&[10, 0, 0, 1, 10, 0, 0, 2, 8, 0, 0, 0, 0x12, 0x34, 0, 1]);
    f.extend_from_slice(b"psp ping");
    f
}
