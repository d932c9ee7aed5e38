//! `flood`: sends keyless garbage PSP frames on an interface at a fixed rate, as a host on the
//! segment without any key would: a valid clear header (EtherType 0x1982, version 0, the ENC and
//! digital-signature flags, increasing sequence numbers) and random bytes where the section, the
//! ICV and the signature are, except that the signature is shaped to be worth verifying: its R is
//! a valid curve point (the base point's encoding) and its s is canonical (below the group order),
//! so a receiver that verifies before the ICV pays a full Ed25519 verification for every frame
//! (random bytes would be refused cheaply 15 times in 16, for a non-canonical s). The receiver's
//! work per frame is what `testbed/flood.sh` measures (docs/PROTOCOL.md §3: the ICV is checked
//! before the signature).
//!
//! ```text
//! flood --iface up0 --dst 02:50:53:00:00:01 --src 02:50:53:00:00:02 --rate 20000 --seconds 10
//! ```
//! Prints `sent=N seconds=S rate=R`. Root (an AF_PACKET socket).

use core::time::Duration;
use std::time::Instant;

use psp_gateway::io::sys::PacketSocket;

const ETH_P_PSP: u16 = 0x1982;

/// The compressed Edwards encoding of Ed25519's base point (RFC 8032 §5.1).
const BASE_POINT: [u8; 32] = [
    0x58, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66,
    0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66,
];

fn mac(s: &str) -> [u8; 6] {
    let mut m = [0u8; 6];
    let parts: Vec<&str> = s.split(':').collect();
    assert_eq!(parts.len(), 6, "MAC {s}");
    for (o, p) in m.iter_mut().zip(parts) {
        *o = u8::from_str_radix(p, 16).unwrap_or_else(|_| panic!("MAC {s}"));
    }
    m
}

fn main() {
    let mut iface = String::from("up0");
    let (mut dst, mut src) = ([0xffu8; 6], [2u8, 0, 0, 0, 0, 2]);
    let (mut rate, mut seconds, mut len) = (10_000u64, 10u64, 128usize);
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut v = || args.next().unwrap_or_else(|| panic!("{a} needs a value"));
        match a.as_str() {
            "--iface" => iface = v(),
            "--dst" => dst = mac(&v()),
            "--src" => src = mac(&v()),
            "--rate" => rate = v().parse().expect("--rate N"),
            "--seconds" => seconds = v().parse().expect("--seconds N"),
            "--len" => len = v().parse().expect("--len N"),
            _ => {
                eprintln!(
                    "usage: flood --iface IF --dst MAC --src MAC --rate FPS --seconds S [--len N]"
                );
                std::process::exit(2);
            }
        }
    }
    let sock = PacketSocket::open(&iface, ETH_P_PSP)
        .unwrap_or_else(|e| panic!("AF_PACKET socket on {iface}: {e}"));
    // 14 Ethernet + 1 VF + 4 SN, then garbage: section, 16-byte ICV, 64-byte signature.
    let len = len.max(14 + 5 + 3 + 16 + 64);
    let mut frame = vec![0u8; len];
    frame[..6].copy_from_slice(&dst);
    frame[6..12].copy_from_slice(&src);
    frame[12..14].copy_from_slice(&ETH_P_PSP.to_be_bytes());
    // Version 0; flags: digital signature (0x02) and encryption (0x01).
    frame[14] = 0x03;
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let start = Instant::now();
    let end = start + Duration::from_secs(seconds);
    let mut sent = 0u64;
    // Above any sender's window: the replay check passes and the frame reaches the crypto.
    let mut seq = 0xf000_0000u32;
    while Instant::now() < end {
        for b in &mut frame[19..] {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            *b = x as u8;
        }
        // The signature's R: the base point; its s: random below 2^252 (canonical).
        frame[len - 64..len - 32].copy_from_slice(&BASE_POINT);
        frame[len - 1] &= 0x0f;
        frame[15..19].copy_from_slice(&seq.to_be_bytes());
        seq = seq.wrapping_add(1);
        if sock.send(&frame).is_ok() {
            sent += 1;
        }
        let due = start + Duration::from_nanos(sent.saturating_mul(1_000_000_000) / rate.max(1));
        let now = Instant::now();
        if due > now {
            std::thread::sleep(due - now);
        }
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "sent={sent} seconds={secs:.1} rate={:.0}",
        sent as f64 / secs
    );
}
