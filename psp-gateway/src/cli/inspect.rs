//! `psp-gateway inspect`: decode PSP frames given as hex lines on stdin or from a pcap file.
//!
//! For each frame it prints the Ethernet and PSP clear-header fields (the signature too when
//! flagged), the ICV verdict under the given key and suite, the opened section's sub-header
//! (protocol type, pad size, data length) and the inner EtherType with a one-line payload
//! summary. `contrib/wireshark/psp.lua` is tested against this output (`tests/dissector.rs`). The replay and
//! timestamp checks are switched off (an offline capture has no clock and may repeat frames); the
//! security number is reported, not checked. Exit status: 0 when every frame verified, 1 when any
//! frame did not (or the input was bad), 2 for bad arguments.

use core::net::{Ipv4Addr, Ipv6Addr};
use std::io::{self, Read};
use std::path::PathBuf;

use psp_core::crypto::sign::VerifyingKey;
use psp_core::crypto::{SuiteId, SuiteKey};
use psp_core::session::{Opener, OpenerConfig};
use psp_core::time::{Duration, Instant};
use psp_core::wire::{ETHERTYPE_PSP, Flags, Frame, Protocol};

use super::pcap::{Capture, LINKTYPE_ETHERNET};
use super::{Failure, KeyArgs, decode_hex};

/// Arguments of `inspect`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The key: `--key-hex HEX` or `--key-file PATH`.
    #[command(flatten)]
    key: KeyArgs,
    /// The suite the frames were sealed with.
    #[arg(long, default_value = "bf-cbc-hmac-sha1")]
    suite: String,
    /// Read frames from this pcap file instead of hex lines on stdin.
    #[arg(long)]
    pcap: Option<PathBuf>,
    /// Ed25519 public key (hex) to verify frames with the digital-signature flag.
    #[arg(long)]
    public_key_hex: Option<String>,
}

/// Runs `inspect`.
pub(crate) fn run(args: &Args) -> Result<(), Failure> {
    let suite = SuiteId::from_name(&args.suite)
        .ok_or_else(|| Failure::usage(format_args!("--suite: unknown suite `{}`", args.suite)))?;
    let key = args.key.load()?;
    SuiteKey::new(suite, &key)
        .map_err(|e| Failure::usage(format_args!("{}: {e}", args.key.flag())))?;
    let verifier = match &args.public_key_hex {
        Some(h) => {
            let bytes =
                decode_hex(h).map_err(|e| Failure::usage(format_args!("--public-key-hex: {e}")))?;
            let arr: [u8; 32] = bytes.try_into().map_err(|_| {
                Failure::usage("--public-key-hex: an Ed25519 public key is 32 bytes")
            })?;
            Some(VerifyingKey::from_bytes(arr))
        }
        None => None,
    };
    let frames = read_frames(args.pcap.as_ref())?;
    if frames.is_empty() {
        return Err(Failure::input("no frames in the input"));
    }
    let mut failed = 0usize;
    for (i, frame) in frames.into_iter().enumerate() {
        let ok = inspect_one(i + 1, frame, suite, &key, verifier.as_ref());
        failed += usize::from(!ok);
        println!();
    }
    if failed > 0 {
        return Err(Failure::input(format_args!(
            "{failed} frame(s) did not verify"
        )));
    }
    Ok(())
}

fn read_frames(pcap: Option<&PathBuf>) -> Result<Vec<Vec<u8>>, Failure> {
    if let Some(path) = pcap {
        let file = std::fs::read(path)
            .map_err(|e| Failure::input(format_args!("{}: {e}", path.display())))?;
        let cap = Capture::parse(&file)
            .map_err(|e| Failure::input(format_args!("{}: {e}", path.display())))?;
        if cap.link_type() != LINKTYPE_ETHERNET {
            return Err(Failure::input(format_args!(
                "{}: link type {} is not Ethernet",
                path.display(),
                cap.link_type()
            )));
        }
        return cap
            .map(|r| r.map(|r| r.data.to_vec()))
            .collect::<Result<_, _>>()
            .map_err(|e| Failure::input(format_args!("{}: {e}", path.display())));
    }
    let mut text = String::new();
    io::stdin()
        .read_to_string(&mut text)
        .map_err(|e| Failure::input(format_args!("reading stdin: {e}")))?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        .map(|(n, l)| {
            decode_hex(l).map_err(|e| Failure::input(format_args!("stdin line {}: {e}", n + 1)))
        })
        .collect()
}

/// Prints one frame's decode; returns whether it verified.
fn inspect_one(
    n: usize,
    mut buf: Vec<u8>,
    suite: SuiteId,
    key: &[u8],
    verifier: Option<&VerifyingKey>,
) -> bool {
    println!("frame {n}: {} bytes", buf.len());
    if buf.len() < 14 {
        println!("  error      too short for an Ethernet header");
        return false;
    }
    let ethertype = u16::from_be_bytes([buf[12], buf[13]]);
    println!(
        "  ethernet   dst {}  src {}  type {:#06x}{}",
        mac(&buf[0..6]),
        mac(&buf[6..12]),
        ethertype,
        if ethertype == ETHERTYPE_PSP {
            " (PSP)"
        } else {
            ""
        }
    );
    if ethertype != ETHERTYPE_PSP {
        println!("  verdict    not PSP: this frame would travel in clear");
        return false;
    }
    let view = match Frame::new_checked(&buf[..], suite.icv_len()) {
        Ok(v) => v,
        Err(e) => {
            println!("  verdict    malformed: {e}");
            return false;
        }
    };
    let flags = view.flags();
    println!(
        "  psp        version {}  flags {:#04x} [{}]  seq {:#010x} ({})",
        view.ver_flags() >> 5,
        flags.bits(),
        flag_names(flags),
        view.seq_number().0,
        view.seq_number().0
    );
    let secnum = view.security_number();
    let ts = view.timestamp();
    if let Some(s) = secnum {
        println!("  secnum     {:#08x}", s.get());
    }
    if let Some(t) = ts {
        println!("  timestamp  {t} ms (mod 2^32; not checked against a clock)");
    }
    println!(
        "  section    {} bytes{}  icv {}",
        view.section().len(),
        if flags.contains(Flags::ENCRYPTION) {
            " (encrypted)"
        } else {
            " (clear)"
        },
        hex::encode(view.icv())
    );
    if let Some(sig) = view.signature() {
        println!("  signature  {}", hex::encode(sig));
    }
    let section_len = view.section().len();

    // Offline: no replay or clock. Accept the frame's own security number and timestamp.
    let cfg = OpenerConfig::new()
        .with_allow_none(suite == SuiteId::None)
        .with_security_number(secnum)
        .with_max_skew(Duration::from_secs(1));
    let now = Instant::from_millis(ts.map_or(0, u64::from));
    let result = SuiteKey::new(suite, key)
        .map_err(|_| "key rejected")
        .and_then(|k| Opener::new(k, cfg).map_err(|_| "opener refused the suite"));
    let mut opener = match result {
        Ok(o) => o,
        Err(e) => {
            println!("  verdict    {e}");
            return false;
        }
    };
    if let Some(v) = verifier {
        opener = opener.with_verifier(*v);
    }
    match opener.open(now, &mut buf) {
        Ok(opened) => {
            let icv = if suite == SuiteId::None {
                "none (suite `none`)"
            } else {
                "ok"
            };
            println!(
                "  verdict    icv {icv}{}",
                if opened.signed() {
                    ", signature ok"
                } else {
                    ""
                }
            );
            // The section as opened: 3-byte sub-header, data, padding (PROTOCOL.md §1.2).
            let data_len = opened.payload().len();
            println!(
                "  subheader  protocol {:#06x}  pad {}  data {data_len} bytes",
                u16::from(opened.protocol()),
                section_len.saturating_sub(3 + data_len)
            );
            println!(
                "  inner      {}",
                summary(opened.protocol(), opened.payload())
            );
            true
        }
        Err(e) => {
            println!("  verdict    DROP: {}", e.reason());
            false
        }
    }
}

fn flag_names(f: Flags) -> String {
    let names = [
        (Flags::SECURITY_NUMBER, "SECNUM"),
        (Flags::TIMESTAMP, "TS"),
        (Flags::RESERVED, "RESERVED"),
        (Flags::SIGNATURE, "SIG"),
        (Flags::ENCRYPTION, "ENC"),
    ];
    let set: Vec<&str> = names
        .iter()
        .filter(|(bit, _)| f.contains(*bit))
        .map(|(_, n)| *n)
        .collect();
    if set.is_empty() {
        "none".to_owned()
    } else {
        set.join(",")
    }
}

fn mac(b: &[u8]) -> String {
    b.iter()
        .map(|x| format!("{x:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// One line about the inner payload.
fn summary(protocol: Protocol, p: &[u8]) -> String {
    let len = p.len();
    match protocol {
        Protocol::EtherType(0x0800) if len >= 20 => {
            let src = Ipv4Addr::new(p[12], p[13], p[14], p[15]);
            let dst = Ipv4Addr::new(p[16], p[17], p[18], p[19]);
            format!(
                "type 0x0800 IPv4, {len} bytes: {src} -> {dst} {}",
                ip_proto(p[9])
            )
        }
        Protocol::EtherType(0x86dd) if len >= 40 => {
            let addr = |o: usize| {
                let mut a = [0u8; 16];
                a.copy_from_slice(&p[o..o + 16]);
                Ipv6Addr::from(a)
            };
            format!(
                "type 0x86dd IPv6, {len} bytes: {} -> {} {}",
                addr(8),
                addr(24),
                ip_proto(p[6])
            )
        }
        Protocol::EtherType(0x0806) if len >= 28 => {
            let op = u16::from_be_bytes([p[6], p[7]]);
            let spa = Ipv4Addr::new(p[14], p[15], p[16], p[17]);
            let tpa = Ipv4Addr::new(p[24], p[25], p[26], p[27]);
            match op {
                1 => format!("type 0x0806 ARP request: who has {tpa}? tell {spa}"),
                2 => format!("type 0x0806 ARP reply: {spa} is at {}", mac(&p[8..14])),
                _ => format!("type 0x0806 ARP op {op}"),
            }
        }
        Protocol::EtherType(t) => format!("type {t:#06x}, {len} bytes: {}", head(p)),
        other => format!("PSP sub-protocol {other:?}, {len} bytes: {}", head(p)),
    }
}

fn ip_proto(p: u8) -> String {
    match p {
        1 => "ICMP".to_owned(),
        6 => "TCP".to_owned(),
        17 => "UDP".to_owned(),
        58 => "ICMPv6".to_owned(),
        n => format!("proto {n}"),
    }
}

fn head(p: &[u8]) -> String {
    let shown = &p[..p.len().min(16)];
    let dots = if p.len() > 16 { "..." } else { "" };
    format!("{}{dots}", hex::encode(shown))
}
