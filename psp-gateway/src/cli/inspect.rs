//! `psp-gateway inspect`: decode PSP frames given as hex lines on stdin or from a pcap file.
//!
//! For each frame it prints the Ethernet and PSP clear-header fields (the signature too when
//! flagged), the ICV verdict under the given keys, the signature verdict under the given public
//! keys, the opened section's sub-header (protocol type, pad size, data length) and the inner
//! EtherType with a one-line payload summary. `contrib/wireshark/psp.lua` is tested against
//! this output (`tests/dissector.rs`). The replay and timestamp checks are switched off (an
//! offline capture has no clock and may repeat frames); the security number is reported, not
//! checked.
//!
//! Keys come from `--key-hex`/`--key-file` (with `--suite`), or from a gateway's `--config`
//! (its group key and static peer keys, each with its suite; its peers' and its own identities
//! as public keys). Frames under session keys cannot be opened: those keys live only in the
//! daemons' memory. They are reported with their key id and are not an error, and neither is
//! a signed frame whose signer's public key was not given (its ICV is still checked).
//! Exit status: 0 when every frame opened or was one of those two, 1 when any frame did not
//! verify (or the input was bad), 2 for bad arguments.

use core::net::{Ipv4Addr, Ipv6Addr};
use std::io::{self, Read};
use std::path::PathBuf;

use psp_core::crypto::sign::{VerifyingKey, signed_digest};
use psp_core::crypto::{SuiteId, SuiteKey};
use psp_core::protect::{DropReason, Opener, OpenerConfig};
use psp_core::time::{Duration, Instant};
use psp_core::wire::{ETHERTYPE_PSP, Flags, Frame, Protocol};
use zeroize::Zeroizing;

use super::pcap::{Capture, LINKTYPE_ETHERNET};
use super::{Failure, KeyArgs, decode_hex};
use crate::config::{Config, format_mac};

/// The suite `inspect` assumes without `--suite` (the one the docs recommend).
const DEFAULT_SUITE: &str = "aes128-gcm";

/// Arguments of `inspect`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Where the keys come from: exactly one of --key-hex, --key-file and --config.
    #[command(flatten)]
    keys: KeySource,
    /// The suite the frames were sealed with (not with --config: each key has its suite there).
    #[arg(long, value_name = "NAME", conflicts_with = "config")]
    suite: Option<String>,
    /// Read frames from this pcap file instead of hex lines on stdin.
    #[arg(long)]
    pcap: Option<PathBuf>,
    /// An Ed25519 public key (64 hex digits, as `keygen --identity` and `pubkey` print it) to
    /// verify signed frames with (the group frames of a host with an identity). Repeat it, or
    /// separate keys with commas, for several hosts; each signed frame is checked against all.
    #[arg(long, value_name = "HEX", value_delimiter = ',')]
    public_key_hex: Vec<String>,
}

/// `--key-hex`, `--key-file` or `--config`.
#[derive(Debug, clap::Args)]
#[group(required = true, multiple = false)]
struct KeySource {
    /// The key as hex. Other local users can read it in /proc/PID/cmdline: prefer --key-file.
    #[arg(long, value_name = "HEX")]
    key_hex: Option<String>,
    /// A file holding the key as hex (as `keygen` prints it), the daemon's key-file rules:
    /// mode 0600 or stricter, owned by root or by you.
    #[arg(long, value_name = "PATH")]
    key_file: Option<PathBuf>,
    /// A gateway's configuration: its group key and static peer keys (each with its suite),
    /// its peers' `identity` and its own identity as public keys, and which MACs use sessions.
    #[arg(long, short, value_name = "FILE")]
    config: Option<PathBuf>,
}

/// A key to try, with its suite and where it came from.
struct Candidate {
    label: String,
    suite: SuiteId,
    key: Zeroizing<Vec<u8>>,
}

/// A public key to verify signatures with.
struct Signer {
    label: String,
    key: VerifyingKey,
    /// The MACs the signer sends from, when known (from a config); empty: try on any frame.
    macs: Vec<[u8; 6]>,
}

/// Everything a frame is checked against.
struct Keys {
    candidates: Vec<Candidate>,
    signers: Vec<Signer>,
    /// MACs whose unicast frames travel under session keys (from a config), if known.
    session_macs: Option<Vec<[u8; 6]>>,
}

/// How one frame ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    /// Opened (ICV, and the signature when a key for it was given).
    Opened,
    /// Under a session key: cannot be opened offline (expected).
    Session,
    /// Did not verify, or is not a PSP frame.
    Failed,
}

/// Runs `inspect`.
pub(crate) fn run(args: &Args) -> Result<(), Failure> {
    let keys = load_keys(args)?;
    let frames = read_frames(args.pcap.as_ref())?;
    if frames.is_empty() {
        return Err(Failure::input("no frames in the input"));
    }
    let (mut opened, mut session, mut failed) = (0usize, 0usize, 0usize);
    for (i, frame) in frames.into_iter().enumerate() {
        match inspect_one(i + 1, frame, &keys) {
            Outcome::Opened => opened += 1,
            Outcome::Session => session += 1,
            Outcome::Failed => failed += 1,
        }
        println!();
    }
    let mut summary = format!("{} frame(s): {opened} opened", opened + session + failed);
    if session > 0 {
        summary.push_str(&format!(
            ", {session} under session keys (never stored: not opened)"
        ));
    }
    if failed > 0 {
        summary.push_str(&format!(", {failed} did not verify"));
    }
    println!("{summary}");
    if failed > 0 {
        return Err(Failure::input(format_args!(
            "{failed} frame(s) did not verify"
        )));
    }
    Ok(())
}

fn parse_suite(name: &str) -> Result<SuiteId, Failure> {
    SuiteId::from_name(name).ok_or_else(|| {
        Failure::usage(format_args!(
            "--suite: unknown suite `{name}`; want one of {}",
            crate::config::suite_names()
        ))
    })
}

fn load_keys(args: &Args) -> Result<Keys, Failure> {
    let mut signers = Vec::new();
    for (i, h) in args.public_key_hex.iter().enumerate() {
        let bytes =
            decode_hex(h).map_err(|e| Failure::usage(format_args!("--public-key-hex: {e}")))?;
        let arr: [u8; 32] = bytes.try_into().map_err(|_| {
            Failure::usage("--public-key-hex: an Ed25519 public key is 32 bytes (64 hex digits)")
        })?;
        signers.push(Signer {
            label: format!("public key {}", i + 1),
            key: VerifyingKey::from_bytes(arr),
            macs: Vec::new(),
        });
    }
    let Some(path) = &args.keys.config else {
        let suite = parse_suite(args.suite.as_deref().unwrap_or(DEFAULT_SUITE))?;
        let source = KeyArgs {
            key_hex: args.keys.key_hex.clone(),
            key_file: args.keys.key_file.clone(),
        };
        let key = source.load()?;
        SuiteKey::new(suite, &key)
            .map_err(|e| Failure::usage(format_args!("{}: {e}", source.flag())))?;
        return Ok(Keys {
            candidates: vec![Candidate {
                label: "the given key".to_owned(),
                suite,
                key,
            }],
            signers,
            session_macs: None,
        });
    };
    let config = Config::load(path).map_err(|e| Failure::usage(format_args!("--config: {e}")))?;
    let mut candidates = vec![Candidate {
        label: "the group key".to_owned(),
        suite: config.group.suite,
        key: config.group.key.bytes.clone(),
    }];
    let mut session_macs: Vec<[u8; 6]> = config.interface.mac.into_iter().collect();
    for p in &config.peers {
        if p.session {
            session_macs.extend(&p.macs);
        } else if !candidates
            .iter()
            .any(|c| c.suite == p.security.suite && *c.key == *p.security.key.bytes)
        {
            candidates.push(Candidate {
                label: format!("peer {}'s key", p.name),
                suite: p.security.suite,
                key: p.security.key.bytes.clone(),
            });
        }
        if let Some(id) = p.identity {
            signers.push(Signer {
                label: format!("peer {}", p.name),
                key: VerifyingKey::from_bytes(id),
                macs: p.macs.clone(),
            });
        }
    }
    if let Some(id) = config.session.as_ref().and_then(|s| s.identity.as_ref()) {
        signers.push(Signer {
            label: "this host".to_owned(),
            key: VerifyingKey::from_bytes(id.public_key),
            macs: config.interface.mac.into_iter().collect(),
        });
    }
    Ok(Keys {
        candidates,
        signers,
        session_macs: config.session.is_some().then_some(session_macs),
    })
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

/// Opens `buf` (a copy) under `c`, offline: no replay window or clock, the frame's own
/// security number accepted, a signature not checked here.
fn try_open(
    c: &Candidate,
    buf: &[u8],
    secnum: Option<psp_core::wire::SecurityNumber>,
    ts: Option<u32>,
) -> Result<Vec<u8>, DropReason> {
    let cfg = OpenerConfig::new()
        .with_allow_none(c.suite == SuiteId::None)
        .with_security_number(secnum)
        .with_max_skew(Duration::from_secs(1));
    let now = Instant::from_millis(ts.map_or(0, u64::from));
    let mut opener = SuiteKey::new(c.suite, &c.key)
        .ok()
        .and_then(|k| Opener::new(k, cfg).ok())
        .ok_or(DropReason::WrongSuite)?;
    opener.set_accept_unverified(true);
    let mut copy = buf.to_vec();
    let opened = opener.open(now, &mut copy).map_err(|e| e.reason())?;
    // The section as opened: 3-byte sub-header and data; keep protocol and data.
    let mut out = u16::from(opened.protocol()).to_be_bytes().to_vec();
    out.extend_from_slice(opened.payload());
    Ok(out)
}

/// Prints one frame's decode; returns how it ended.
fn inspect_one(n: usize, buf: Vec<u8>, keys: &Keys) -> Outcome {
    println!("frame {n}: {} bytes", buf.len());
    if buf.len() < 14 {
        println!("  error      too short for an Ethernet header");
        return Outcome::Failed;
    }
    let ethertype = u16::from_be_bytes([buf[12], buf[13]]);
    let (dst, src) = (mac6(&buf[0..6]), mac6(&buf[6..12]));
    println!(
        "  ethernet   dst {}  src {}  type {:#06x}{}",
        format_mac(dst),
        format_mac(src),
        ethertype,
        if ethertype == ETHERTYPE_PSP {
            " (PSP)"
        } else {
            ""
        }
    );
    if ethertype != ETHERTYPE_PSP {
        println!("  verdict    not PSP: this frame would travel in clear");
        return Outcome::Failed;
    }
    // The clear header does not depend on the key; the ICV length does (the suite).
    let icv_len = keys.candidates.first().map_or(16, |c| c.suite.icv_len());
    let view = match Frame::new_checked(&buf[..], icv_len) {
        Ok(v) => v,
        Err(e) => {
            println!("  verdict    malformed: {e}");
            return Outcome::Failed;
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

    // The first key whose suite fits the frame and under which the ICV verifies.
    let mut first_error = None;
    let mut opened = None;
    for c in &keys.candidates {
        let Ok(v) = Frame::new_checked(&buf[..], c.suite.icv_len()) else {
            continue;
        };
        match try_open(c, &buf, secnum, ts) {
            Ok(inner) => {
                opened = Some((
                    c,
                    v.signature()
                        .map(|s| (v.signed_part().to_vec(), s.to_vec())),
                    inner,
                ));
                break;
            }
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    let Some((key, signed, inner)) = opened else {
        return not_opened(dst, src, secnum, keys, first_error);
    };
    let icv = if key.suite == SuiteId::None {
        "none (suite `none`)".to_owned()
    } else if keys.candidates.len() > 1 {
        format!("ok ({}, {})", key.label, key.suite)
    } else {
        "ok".to_owned()
    };
    let signature = match &signed {
        None => String::new(),
        Some(_) if keys.signers.is_empty() => {
            ", signature not checked (signed; give --public-key-hex)".to_owned()
        }
        Some((part, sig)) => {
            // Signers known to send from this MAC first, then everyone else.
            let mut order: Vec<&Signer> = keys
                .signers
                .iter()
                .filter(|s| s.macs.contains(&src))
                .collect();
            order.extend(keys.signers.iter().filter(|s| !s.macs.contains(&src)));
            // The signature covers a digest of the signed part (PROTOCOL.md).
            let digest = signed_digest(part);
            match order.iter().find(|s| s.key.verify(&digest, sig).is_ok()) {
                Some(s) if keys.signers.len() > 1 => format!(", signature ok ({})", s.label),
                Some(_) => ", signature ok".to_owned(),
                None => {
                    println!(
                        "  verdict    DROP: {} (the ICV verified; no given public key made this signature)",
                        DropReason::BadSignature.as_str()
                    );
                    return Outcome::Failed;
                }
            }
        }
    };
    println!("  verdict    icv {icv}{signature}");
    let (proto, data) = inner.split_at(2);
    let protocol = Protocol::from(u16::from_be_bytes([proto[0], proto[1]]));
    println!(
        "  subheader  protocol {:#06x}  pad {}  data {} bytes",
        u16::from(protocol),
        section_len.saturating_sub(3 + data.len()),
        data.len()
    );
    println!("  inner      {}", summary(protocol, data));
    Outcome::Opened
}

/// The verdict of a frame no key opened: a session frame (expected), or a failure.
fn not_opened(
    dst: [u8; 6],
    src: [u8; 6],
    secnum: Option<psp_core::wire::SecurityNumber>,
    keys: &Keys,
    error: Option<DropReason>,
) -> Outcome {
    let unicast = dst[0] & 1 == 0;
    let session_peer = keys
        .session_macs
        .as_ref()
        .map(|m| m.contains(&src) || m.contains(&dst));
    if let (Some(id), true, Some(true) | None) = (secnum, unicast, session_peer) {
        // A session frame carries its session's key id in the security-number field.
        println!(
            "  verdict    session key id {:#08x}; session keys are never stored, so it cannot be opened offline{}",
            id.get(),
            if session_peer.is_none() {
                " (or it is sealed under a key not given here)"
            } else {
                ""
            }
        );
        return Outcome::Session;
    }
    let reason = error.map_or("wrong-suite", DropReason::as_str);
    println!("  verdict    DROP: {reason}");
    Outcome::Failed
}

fn mac6(b: &[u8]) -> [u8; 6] {
    let mut m = [0; 6];
    m.copy_from_slice(&b[..6]);
    m
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
                2 => format!(
                    "type 0x0806 ARP reply: {spa} is at {}",
                    format_mac(mac6(&p[8..14]))
                ),
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
