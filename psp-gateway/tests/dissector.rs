//! The Wireshark dissector (`psp-gateway/contrib/wireshark/psp.lua`) under Debian's `tshark`,
//! checked field by field, frame by frame against `psp-gateway inspect` on the same frames.
//!
//! * Real captures: two real gateways in the netns testbed (`tests/common`), `tcpdump` in eve
//!   (on the hub, so both directions) while pinging through the tunnel: the raw uplink with
//!   `null-hmac-sha1` (section in clear, so the sub-header is compared too) plus a security
//!   number and timestamps, the raw uplink with `aes128-gcm`, and the UDP uplink with the
//!   default `bf-cbc-hmac-sha1`.
//! * The known-answer frames of `docs/PROTOCOL.md` (every suite, signatures, padding), and
//!   session-establishment / key-exchange frames sealed here with `psp-core`.
//! * Malformed and truncated frames: tshark must exit 0 with an expert-info mark, no Lua error.
//!
//! tshark is run as a user runs it: `tshark -X lua_script:psp.lua -o psp.suite:NAME -r FILE`,
//! as root (CI runs as root; Debian's `/etc/wireshark/init.lua` sets
//! `run_user_scripts_when_superuser = true`, and the test fails if the script did not load).
//! When tshark is missing the test runs `testbed/install-deps.sh` (which installs it) and fails
//! loudly if that does not help; it never skips.

mod common;

use core::time::Duration;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::thread::sleep;
use std::time::Instant as StdInstant;

use psp_core::protect::{Sealer, SealerConfig};
use psp_core::{Instant, Protocol, SecurityNumber, Seq, SigningKey, SuiteId, SuiteKey};

use common::{BIN, Testbed, TestbedOptions, Uplink, ensure_tools, output_within, repo_root};

/// The fields the test reads, in this order (`-e` arguments).
const FIELDS: &[&str] = &[
    "frame.number",
    "psp.version",
    "psp.flags",
    "psp.flags.secnum",
    "psp.flags.ts",
    "psp.flags.reserved",
    "psp.flags.sig",
    "psp.flags.enc",
    "psp.seq",
    "psp.secnum",
    "psp.timestamp",
    "psp.section_len",
    "psp.encrypted",
    "psp.icv",
    "psp.signature",
    "psp.proto",
    "psp.pad",
    "psp.data_len",
    "psp.sep.type",
    "_ws.col.Info",
    // Last: a Lua runtime error shows up here (as "Lua Error: ..."), nowhere else in -T fields.
    "_ws.expert.message",
];

static TSHARK: OnceLock<()> = OnceLock::new();

fn dissector() -> PathBuf {
    repo_root().join("psp-gateway/contrib/wireshark/psp.lua")
}

/// Installs tshark with `testbed/install-deps.sh` when it is missing; panics if that fails.
fn ensure_tshark() {
    TSHARK.get_or_init(|| ensure_tools(&["tshark", "tcpdump"]));
}

/// What one frame's clear header, section and trailer hold, as either tool reports it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Decoded {
    version: u8,
    flags: u8,
    seq: u32,
    secnum: Option<u32>,
    timestamp: Option<u32>,
    section_len: usize,
    encrypted: bool,
    icv: String,
    signature: Option<String>,
    /// Protocol type, pad size and data length of a clear section (none when encrypted: the
    /// dissector has no key).
    sub: Option<(u16, usize, usize)>,
}

/// One tshark row: the decode plus the handshake type and the Info column.
#[derive(Clone, Debug)]
struct Row {
    decoded: Decoded,
    sep_type: Option<u8>,
    info: String,
}

fn num(s: &str) -> u64 {
    let s = s.trim();
    let r = match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16),
        None => s.parse(),
    };
    r.unwrap_or_else(|e| panic!("not a number: {s:?}: {e}"))
}

fn opt_num(s: &str) -> Option<u64> {
    (!s.is_empty()).then(|| num(s))
}

fn bytes_field(s: &str) -> String {
    s.replace(':', "").to_ascii_lowercase()
}

/// `tshark -X lua_script:psp.lua -o psp.suite:SUITE -r PCAP -T fields ...`: one row per frame.
fn tshark_rows(pcap: &Path, suite: &str) -> Vec<Row> {
    let mut args = vec!["-T", "fields", "-E", "separator=/t", "-E", "aggregator=;"];
    for f in FIELDS {
        args.extend(["-e", f]);
    }
    let out = tshark(pcap, suite, &args);
    let text = String::from_utf8_lossy(&out);
    text.lines()
        .enumerate()
        .map(|(i, line)| {
            let v: Vec<&str> = line.split('\t').collect();
            assert_eq!(v.len(), FIELDS.len(), "tshark row {}: {line:?}", i + 1);
            assert_eq!(num(v[0]), i as u64 + 1, "tshark rows out of order");
            assert!(!v[20].contains("Lua Error"), "frame {}: {}", i + 1, v[20]);
            let flags = u8::try_from(num(v[2])).expect("flags fit a byte");
            // Each flag bit is its own field; they must add up to psp.flags.
            let bits = [0x10u8, 0x08, 0x04, 0x02, 0x01];
            let from_bits = bits
                .iter()
                .zip(&v[3..8])
                .filter(|(_, f)| num(f) == 1)
                .fold(0u8, |acc, (b, _)| acc | b);
            assert_eq!(from_bits, flags, "frame {}: flag bits vs psp.flags", i + 1);
            let encrypted = num(v[12]) == 1;
            assert_eq!(encrypted, flags & 0x01 != 0, "frame {}", i + 1);
            let sub = opt_num(v[15]).map(|proto| {
                (
                    u16::try_from(proto).expect("u16"),
                    usize::try_from(num(v[16])).expect("usize"),
                    usize::try_from(num(v[17])).expect("usize"),
                )
            });
            Row {
                decoded: Decoded {
                    version: u8::try_from(num(v[1])).expect("u8"),
                    flags,
                    seq: u32::try_from(num(v[8])).expect("u32"),
                    secnum: opt_num(v[9]).map(|x| u32::try_from(x).expect("u32")),
                    timestamp: opt_num(v[10]).map(|x| u32::try_from(x).expect("u32")),
                    section_len: usize::try_from(num(v[11])).expect("usize"),
                    encrypted,
                    icv: bytes_field(v[13]),
                    signature: (!v[14].is_empty()).then(|| bytes_field(v[14])),
                    sub,
                },
                sep_type: opt_num(v[18]).map(|x| u8::try_from(x).expect("u8")),
                info: v[19].to_owned(),
            }
        })
        .collect()
}

/// Runs tshark with the dissector and `extra` arguments; asserts exit 0 and no Lua error;
/// returns stdout.
fn tshark(pcap: &Path, suite: &str, extra: &[&str]) -> Vec<u8> {
    ensure_tshark();
    let script = format!("lua_script:{}", dissector().display());
    let suite_pref = format!("psp.suite:{suite}");
    let mut cmd = Command::new("tshark");
    cmd.args(["-n", "-X", &script, "-o", &suite_pref, "-r"])
        .arg(pcap)
        .args(extra);
    let out = output_within(&mut cmd, Duration::from_secs(120), "tshark");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "tshark failed ({}){}\n{stdout}{stderr}",
        out.status,
        if stderr.contains("Some fields aren't valid") {
            ": psp.lua did not load. As root, Wireshark runs -X lua_script only when its \
             init.lua (Debian: /etc/wireshark/init.lua) sets run_user_scripts_when_superuser \
             = true (README, \"Wireshark dissector\")"
        } else {
            ""
        }
    );
    assert!(
        !stdout.contains("Lua Error"),
        "the dissector raised a Lua error:\n{stdout}{stderr}"
    );
    // tshark exits 0 even when the script is missing or fails to load; it says so on stderr.
    // The only line allowed there is the warning every run as root prints.
    let unexpected: Vec<&str> = stderr
        .lines()
        .filter(|l| !l.starts_with("Running as user \"root\"") && !l.trim().is_empty())
        .collect();
    assert!(unexpected.is_empty(), "tshark complained:\n{stderr}");
    out.stdout
}

/// One frame of `inspect` output.
#[derive(Clone, Debug)]
struct Inspected {
    decoded: Decoded,
    verified: bool,
}

/// Parses `psp-gateway inspect` output (frame blocks). The sub-header is kept only for clear
/// sections, as the dissector sees them.
fn parse_inspect(text: &str) -> Vec<Inspected> {
    let mut frames = Vec::new();
    let mut cur: Option<Inspected> = None;
    for line in text.lines() {
        if line.starts_with("frame ") {
            frames.extend(cur.take());
            cur = Some(Inspected {
                decoded: Decoded::default(),
                verified: false,
            });
            continue;
        }
        let Some(f) = cur.as_mut() else { continue };
        let d = &mut f.decoded;
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.first().copied() {
            Some("psp") => {
                // psp version 0  flags 0x19 [SECNUM,TS,ENC]  seq 0x2b644e2c (727993900)
                d.version = u8::try_from(num(words[2])).expect("u8");
                d.flags = u8::try_from(num(words[4])).expect("u8");
                d.seq = u32::try_from(num(words[7])).expect("u32");
            }
            Some("secnum") => d.secnum = Some(u32::try_from(num(words[1])).expect("u32")),
            Some("timestamp") => d.timestamp = Some(u32::try_from(num(words[1])).expect("u32")),
            Some("section") => {
                // section 88 bytes (encrypted)  icv 9537...
                d.section_len = usize::try_from(num(words[1])).expect("usize");
                d.encrypted = words[3] == "(encrypted)";
                d.icv = words.get(5).copied().unwrap_or("").to_owned();
            }
            Some("signature") => d.signature = Some(words[1].to_owned()),
            // "verdict icv ok[, signature ok]" or "verdict icv none (suite `none`)"; a drop
            // says "verdict DROP: reason", a bad frame "verdict malformed: ...".
            Some("verdict") => f.verified = words[1] == "icv",
            // subheader protocol 0x0800  pad 1  data 84 bytes
            Some("subheader") if !d.encrypted => {
                d.sub = Some((
                    u16::try_from(num(words[2])).expect("u16"),
                    usize::try_from(num(words[4])).expect("usize"),
                    usize::try_from(num(words[6])).expect("usize"),
                ));
            }
            _ => {}
        }
    }
    frames.extend(cur);
    frames
}

/// `psp-gateway inspect --suite SUITE --key-file KEY` on a pcap (`Some`) or hex lines.
fn inspect(suite: &str, key: &Path, pcap: Option<&Path>, hex_lines: &str) -> Vec<Inspected> {
    let mut cmd = Command::new(BIN);
    cmd.args(["inspect", "--suite", suite, "--key-file"])
        .arg(key);
    if let Some(p) = pcap {
        cmd.arg("--pcap").arg(p);
    }
    inspect_cmd(cmd, hex_lines)
}

fn inspect_cmd(mut cmd: Command, hex_lines: &str) -> Vec<Inspected> {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn psp-gateway inspect");
    {
        use std::io::Write as _;
        let mut stdin = child.stdin.take().expect("stdin");
        let _ = stdin.write_all(hex_lines.as_bytes());
    }
    let out = child.wait_with_output().expect("wait for inspect");
    // 0: every frame verified; 1: some did not (e.g. broadcast frames under the pairwise key).
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "inspect failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    parse_inspect(&String::from_utf8_lossy(&out.stdout))
}

/// For each frame, the decode of the first key under which it verified.
fn merge_verified(runs: &[Vec<Inspected>]) -> Vec<Decoded> {
    let n = runs[0].len();
    (0..n)
        .map(|i| {
            runs.iter()
                .map(|r| &r[i])
                .find(|f| f.verified)
                .unwrap_or_else(|| panic!("frame {} verified under none of the keys", i + 1))
                .decoded
                .clone()
        })
        .collect()
}

/// Asserts that tshark and inspect agree on every frame; returns the number of frames.
fn assert_same(rows: &[Row], inspected: &[Decoded]) -> usize {
    assert_eq!(rows.len(), inspected.len(), "frame counts differ");
    for (i, (row, ins)) in rows.iter().zip(inspected).enumerate() {
        assert_eq!(
            row.decoded,
            *ins,
            "frame {}: tshark (left) and inspect (right) disagree",
            i + 1
        );
    }
    eprintln!("tshark and inspect agree on {} frames", rows.len());
    rows.len()
}

// ---- pcap files ----------------------------------------------------------------------------

const LINKTYPE_ETHERNET: u32 = 1;

fn write_pcap(path: &Path, frames: &[Vec<u8>]) {
    let mut b = Vec::new();
    b.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
    b.extend_from_slice(&2u16.to_le_bytes());
    b.extend_from_slice(&4u16.to_le_bytes());
    b.extend_from_slice(&[0; 8]);
    b.extend_from_slice(&65_535u32.to_le_bytes());
    b.extend_from_slice(&LINKTYPE_ETHERNET.to_le_bytes());
    for (i, f) in frames.iter().enumerate() {
        let len = u32::try_from(f.len()).expect("small frame");
        b.extend_from_slice(&u32::try_from(i).expect("few frames").to_le_bytes());
        b.extend_from_slice(&0u32.to_le_bytes());
        b.extend_from_slice(&len.to_le_bytes());
        b.extend_from_slice(&len.to_le_bytes());
        b.extend_from_slice(f);
    }
    fs::write(path, b).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
}

/// The frames of a little-endian microsecond pcap (what tcpdump writes).
fn read_pcap(path: &Path) -> Vec<Vec<u8>> {
    let b = fs::read(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    assert!(b.len() >= 24, "{}: no pcap header", path.display());
    assert_eq!(b[0..4], 0xa1b2_c3d4u32.to_le_bytes(), "not a LE pcap");
    assert_eq!(
        u32::from_le_bytes([b[20], b[21], b[22], b[23]]),
        LINKTYPE_ETHERNET
    );
    let mut frames = Vec::new();
    let mut at = 24;
    while at + 16 <= b.len() {
        let cap = u32::from_le_bytes([b[at + 8], b[at + 9], b[at + 10], b[at + 11]]) as usize;
        let orig = u32::from_le_bytes([b[at + 12], b[at + 13], b[at + 14], b[at + 15]]) as usize;
        assert_eq!(cap, orig, "a frame was cut by the snap length");
        frames.push(b[at + 16..at + 16 + cap].to_vec());
        at += 16 + cap;
    }
    frames
}

/// The UDP payload of an Ethernet/IPv4/UDP frame.
fn udp_payload(frame: &[u8]) -> &[u8] {
    assert_eq!(frame[12..14], [0x08, 0x00], "not IPv4");
    let ihl = usize::from(frame[14] & 0x0f) * 4;
    assert_eq!(frame[14 + 9], 17, "not UDP");
    &frame[14 + ihl + 8..]
}

// ---- captures with the real daemon -----------------------------------------------------------

/// A tcpdump in eve (on the hub, she sees every frame) writing `pcap`; stopped with SIGINT.
struct Capture {
    child: Child,
}

impl Capture {
    fn start(tb: &Testbed, pcap: &Path, filter: &str) -> Self {
        let log = tb.dir().join("tcpdump.log");
        let pcap_s = pcap.to_string_lossy().into_owned();
        let child = tb
            .ns_cmd(
                "eve",
                // -Z root: keep writing into the testbed's 0700 dir (tcpdump drops to its own
                // user by default). --immediate-mode: without it frames wait in the kernel's
                // ring for a block timeout, and a SIGINT before that loses them; -U: flush
                // every packet to the file.
                &[
                    "tcpdump",
                    "-i",
                    "up0",
                    "-n",
                    "-s",
                    "0",
                    "-B",
                    "65536",
                    "-U",
                    "--immediate-mode",
                    "-Z",
                    "root",
                    "-w",
                    &pcap_s,
                    filter,
                ],
            )
            .stdout(Stdio::null())
            .stderr(fs::File::create(&log).expect("tcpdump log"))
            .spawn()
            .expect("spawn tcpdump");
        let start = StdInstant::now();
        while !fs::read_to_string(&log)
            .unwrap_or_default()
            .contains("listening on")
        {
            assert!(
                start.elapsed() < Duration::from_secs(15),
                "tcpdump did not start: {}",
                fs::read_to_string(&log).unwrap_or_default()
            );
            sleep(Duration::from_millis(50));
        }
        Self { child }
    }

    fn stop(mut self) {
        let pid = self.child.id().to_string();
        let _ = Command::new("kill").args(["-INT", &pid]).status();
        let start = StdInstant::now();
        while self.child.try_wait().ok().flatten().is_none() {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "tcpdump ignored SIGINT"
            );
            sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Two gateways, a capture on the uplink segment during pings both ways; returns the testbed (keep
/// it alive for its key files) and the pcap path.
fn capture(opts: TestbedOptions) -> (Testbed, PathBuf) {
    let uplink = opts.uplink;
    let tb = Testbed::up(opts);
    ensure_tshark();
    let _vm1 = tb.start(1);
    let _vm2 = tb.start(2);
    let pcap = tb.dir().join("psp.pcap");
    let filter = match uplink {
        Uplink::Raw => "ether proto 0x1982",
        Uplink::Udp => "udp port 5198",
    };
    let cap = Capture::start(&tb, &pcap, filter);
    tb.ping_until_up(1, 2, Duration::from_secs(10));
    assert_eq!(tb.ping(1, 2, 5).received, 5);
    assert_eq!(tb.ping(2, 1, 3).received, 3);
    // Let the last frames reach the file.
    sleep(Duration::from_millis(200));
    cap.stop();
    (tb, pcap)
}

/// tshark vs inspect (pairwise and group key) on a raw-uplink capture; returns the rows.
fn compare_raw(tb: &Testbed, pcap: &Path, suite: &str) -> Vec<Row> {
    let rows = tshark_rows(pcap, suite);
    let runs: Vec<Vec<Inspected>> = ["vm1-vm2", "group"]
        .iter()
        .map(|k| inspect(suite, &tb.dir().join(format!("{k}.key")), Some(pcap), ""))
        .collect();
    let n = assert_same(&rows, &merge_verified(&runs));
    // Echo requests and replies, and at least one ARP exchange.
    assert!(n >= 16 + 2, "only {n} frames captured");
    rows
}

#[test]
fn root_raw_uplink_null_hmac_sha1_security_number_timestamps() {
    let (tb, pcap) = capture(TestbedOptions {
        suite: "null-hmac-sha1".into(),
        defaults_extra: "security_number = 0xabcdef\ntimestamps = true".into(),
        ..TestbedOptions::default()
    });
    let rows = compare_raw(&tb, &pcap, "null-hmac-sha1");
    for r in &rows {
        let d = &r.decoded;
        assert_eq!(d.flags, 0x18, "{r:?}");
        assert_eq!(d.secnum, Some(0xab_cdef));
        assert!(d.timestamp.is_some() && !d.encrypted && d.icv.len() == 40);
        assert!(d.sub.is_some(), "clear section without a sub-header: {r:?}");
    }
    let protos: Vec<u16> = rows
        .iter()
        .filter_map(|r| r.decoded.sub.map(|s| s.0))
        .collect();
    assert!(
        protos.contains(&0x0800) && protos.contains(&0x0806),
        "{protos:x?}"
    );
    // The inner frames go on to Wireshark's own dissectors (ICMP inside the clear section).
    let text = String::from_utf8_lossy(&tshark(&pcap, "null-hmac-sha1", &["-V"])).into_owned();
    assert!(text.contains("Internet Control Message Protocol"), "{text}");
}

#[test]
fn root_raw_uplink_aes128_gcm() {
    let (tb, pcap) = capture(TestbedOptions {
        suite: "aes128-gcm".into(),
        ..TestbedOptions::default()
    });
    let rows = compare_raw(&tb, &pcap, "aes128-gcm");
    for r in &rows {
        let d = &r.decoded;
        assert_eq!(d.flags, 0x01, "{r:?}");
        assert!(d.encrypted && d.sub.is_none() && d.icv.len() == 32, "{r:?}");
        assert!(d.secnum.is_none() && d.timestamp.is_none());
    }
}

#[test]
fn root_udp_uplink_default_suite() {
    let (tb, pcap) = capture(TestbedOptions {
        uplink: Uplink::Udp,
        ..TestbedOptions::default()
    });
    // The default preference is the gateway's default suite: no -o needed, but pass the name
    // anyway so the comparison says what it assumes.
    let rows = tshark_rows(&pcap, "bf-cbc-hmac-sha1");
    let hex_lines: String = read_pcap(&pcap)
        .iter()
        .map(|f| format!("{}\n", hex::encode(udp_payload(f))))
        .collect();
    let runs: Vec<Vec<Inspected>> = ["vm1-vm2", "group"]
        .iter()
        .map(|k| {
            inspect(
                "bf-cbc-hmac-sha1",
                &tb.dir().join(format!("{k}.key")),
                None,
                &hex_lines,
            )
        })
        .collect();
    let n = assert_same(&rows, &merge_verified(&runs));
    assert!(n >= 16, "only {n} frames captured");
    for r in &rows {
        assert_eq!(
            r.decoded.section_len % 8,
            0,
            "Blowfish sections are 8-byte blocks: {r:?}"
        );
    }
}

// ---- frames built here -------------------------------------------------------------------------

/// The known answers of docs/PROTOCOL.md, one tshark run per suite.
#[test]
fn protocol_test_vectors() {
    let path = repo_root().join("crates/psp-core/tests/vectors/psp_frames.json");
    let json: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(&path).expect("read the vectors")).expect("json");
    let vectors = json["vectors"].as_array().expect("vectors");
    let dir = tempdir("vectors");
    let mut compared = 0;
    for suite in SuiteId::ALL.iter().map(|s| s.name()) {
        let mine: Vec<&serde_json::Value> =
            vectors.iter().filter(|v| v["suite"] == suite).collect();
        if mine.is_empty() {
            continue;
        }
        let frames: Vec<Vec<u8>> = mine
            .iter()
            .map(|v| hex::decode(v["sealed"].as_str().expect("sealed")).expect("hex"))
            .collect();
        let pcap = dir.join(&format!("{suite}.pcap"));
        write_pcap(&pcap, &frames);
        let rows = tshark_rows(&pcap, suite);
        let inspected: Vec<Decoded> = mine
            .iter()
            .zip(&frames)
            .map(|(v, frame)| {
                let mut cmd = Command::new(BIN);
                let key = v["key"].as_str().expect("key");
                let key = if key.is_empty() { "00" } else { key };
                cmd.args(["inspect", "--suite", suite, "--key-hex", key]);
                if let Some(seed) = v["signer_seed"].as_str() {
                    let seed: [u8; 32] = hex::decode(seed).expect("hex").try_into().expect("32");
                    let pk = SigningKey::from_seed(&seed).expect("seed").public_key();
                    cmd.args(["--public-key-hex", &hex::encode(pk.as_bytes())]);
                }
                let mut got = inspect_cmd(cmd, &format!("{}\n", hex::encode(frame)));
                assert_eq!(got.len(), 1);
                let f = got.remove(0);
                assert!(f.verified, "vector {} did not verify", v["name"]);
                f.decoded
            })
            .collect();
        compared += assert_same(&rows, &inspected);
        for (row, v) in rows.iter().zip(&mine) {
            let signed = v["signer_seed"].is_string();
            assert_eq!(row.decoded.signature.is_some(), signed, "{}", v["name"]);
        }
    }
    assert_eq!(compared, vectors.len());
}

/// Session establishment (0x0001) and key exchange (0x0004) frames sealed with null-hmac-sha1:
/// the sub-protocol and the handshake message type are named.
#[test]
fn handshake_sub_protocols_are_named() {
    let key = [7u8; 32];
    let suite = SuiteId::NullHmacSha1;
    let cfg = SealerConfig::new().with_security_number(Some(SecurityNumber::new(42).expect("24")));
    let mut sealer =
        Sealer::new(SuiteKey::new(suite, &key).expect("key"), Seq(1000), cfg).expect("sealer");
    let (dst, src) = ([0x02, 0, 0, 0, 0, 2], [0x02, 0, 0, 0, 0, 1]);
    let header = |ty: u8, responder: u8| {
        let mut h = vec![psp_core::handshake::messages::VERSION, ty];
        h.extend_from_slice(&[0x11; 8]);
        h.extend_from_slice(&[responder; 8]);
        h
    };
    let mut reject = header(0x03, 0x22);
    reject.push(1);
    let mut nonce = header(0x06, 0x22);
    nonce.extend_from_slice(&[0x5a; 32]);
    let mut confirm_ack = header(0x09, 0x22);
    confirm_ack.extend_from_slice(&[0xa5; 32]);
    let msgs = [
        (Protocol::SessionEstablishment, reject, 0x03, "Reject"),
        (Protocol::KeyExchange, nonce, 0x06, "Nonce"),
        (
            Protocol::SessionEstablishment,
            confirm_ack,
            0x09,
            "ConfirmAck",
        ),
    ];
    let now = Instant::from_millis(1_700_000_000_000);
    let frames: Vec<Vec<u8>> = msgs
        .iter()
        .map(|(proto, payload, _, _)| {
            let mut out = vec![0u8; 256];
            let f = sealer
                .seal_sub(now, dst, src, *proto, payload, &mut out)
                .expect("seal_sub");
            f.to_vec()
        })
        .collect();
    let dir = tempdir("handshake");
    let pcap = dir.join("sep.pcap");
    write_pcap(&pcap, &frames);
    let key_file = dir.join("key");
    fs::write(&key_file, hex::encode(key)).expect("key file");
    set_mode_600(&key_file);
    let rows = tshark_rows(&pcap, suite.name());
    let runs = [inspect(suite.name(), &key_file, Some(&pcap), "")];
    assert_same(&rows, &merge_verified(&runs));
    for (row, (proto, _, ty, name)) in rows.iter().zip(&msgs) {
        assert_eq!(row.decoded.sub.map(|s| s.0), Some(u16::from(*proto)));
        assert_eq!(row.sep_type, Some(*ty));
        assert!(
            row.info.contains(name),
            "Info column {:?} lacks {name}",
            row.info
        );
    }
}

/// Truncated and malformed frames: tshark exits 0, no Lua error, an expert-info mark.
#[test]
fn malformed_frames_do_not_break_the_dissector() {
    let eth = |rest: &[u8]| {
        let mut f = vec![0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1, 0x19, 0x82];
        f.extend_from_slice(rest);
        f
    };
    let udp = |payload: &[u8]| {
        let mut f = vec![0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1, 0x08, 0x00];
        let total = u16::try_from(20 + 8 + payload.len()).expect("small");
        f.extend_from_slice(&[0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 17, 0, 0]);
        f[16..18].copy_from_slice(&total.to_be_bytes());
        f.extend_from_slice(&[192, 168, 50, 1, 192, 168, 50, 2]);
        let ulen = u16::try_from(8 + payload.len()).expect("small");
        f.extend_from_slice(&5198u16.to_be_bytes());
        f.extend_from_slice(&5198u16.to_be_bytes());
        f.extend_from_slice(&ulen.to_be_bytes());
        f.extend_from_slice(&[0, 0]);
        f.extend_from_slice(payload);
        f
    };
    let clear_hdr = [0x00, 0, 0, 0, 1];
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (eth(&[]), "psp.truncated"),
        (eth(&[0x01]), "psp.truncated"),
        (eth(&[0x01, 0, 0, 0]), "psp.truncated"),
        (eth(&[0x11, 0, 0, 0, 1, 0xab]), "psp.truncated"),
        (
            eth(&[0x19, 0, 0, 0, 1, 0xab, 0xcd, 0xef, 0, 0]),
            "psp.truncated",
        ),
        (
            eth(&[&clear_hdr[..], &[0x08, 0x00]].concat()),
            "psp.truncated",
        ),
        (
            eth(&[&[0x02u8, 0, 0, 0, 1][..], &[0u8; 40]].concat()),
            "psp.truncated",
        ),
        (
            eth(&[&[0xe4u8, 0, 0, 0, 1][..], &[0x08, 0x00, 0], &[0u8; 30]].concat()),
            "psp.bad_version",
        ),
        (
            eth(&[&clear_hdr[..], &[0x08, 0x00, 200], &[0u8; 30]].concat()),
            "psp.bad_padding",
        ),
        (
            eth(&[&clear_hdr[..], &[0x08, 0x00, 40], &[0u8; 30]].concat()),
            "psp.bad_padding",
        ),
        (
            eth(&[&clear_hdr[..], &[0x00, 0x01, 0], &[0x01]].concat()),
            "psp.truncated",
        ),
        (
            eth(&[&clear_hdr[..], &[0x00, 0x04, 0], &[0x01, 0x06, 0, 0]].concat()),
            "psp.truncated",
        ),
        (udp(&[0x02, 0, 0]), "psp.truncated"),
        (udp(&eth(&[0x01])), "psp.truncated"),
        (
            udp(&[&[0u8; 12][..], &[0x08, 0x00, 0x45]].concat()),
            "psp.not_psp",
        ),
    ];
    let dir = tempdir("malformed");
    let pcap = dir.join("malformed.pcap");
    let frames: Vec<Vec<u8>> = cases.iter().map(|(f, _)| f.clone()).collect();
    write_pcap(&pcap, &frames);
    // Expert infos are fields too: each column is non-empty when the frame carries that mark.
    let experts = [
        "psp.truncated",
        "psp.bad_version",
        "psp.bad_padding",
        "psp.not_psp",
        "psp.reserved_flag",
    ];
    let mut args = vec!["-T", "fields", "-E", "separator=/t", "-e", "frame.number"];
    for e in experts {
        args.extend(["-e", e]);
    }
    args.extend(["-e", "_ws.expert.message"]);
    for suite in ["none", "null-hmac-sha1", "aes128-gcm"] {
        let text = String::from_utf8_lossy(&tshark(&pcap, suite, &args)).into_owned();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), cases.len(), "{text}");
        for (line, (frame, expert)) in lines.iter().zip(&cases) {
            assert!(!line.contains("Lua Error"), "suite {suite}: {line}");
            let marks: Vec<&str> = line
                .split('\t')
                .skip(1)
                .zip(experts)
                .filter(|(v, _)| !v.is_empty())
                .map(|(_, e)| e)
                .collect();
            // With a 16- or 20-byte ICV the short frames are all truncated; the padding and
            // version cases are reached only when the section fits (`none`).
            let ok = if suite == "none" {
                marks.contains(expert)
            } else {
                !marks.is_empty()
            };
            assert!(
                ok,
                "suite {suite}, frame {}: expected {expert}, got {marks:?}",
                hex::encode(frame)
            );
        }
    }
}

/// A temporary directory, removed on drop (also when the test panics).
struct TempDir(PathBuf);

impl TempDir {
    fn join(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn tempdir(name: &str) -> TempDir {
    let dir = std::env::temp_dir().join(format!("psp-dissector-{name}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).expect("create a temp dir");
    TempDir(dir)
}

fn set_mode_600(path: &Path) {
    use std::os::unix::fs::PermissionsExt as _;
    fs::set_permissions(path, fs::Permissions::from_mode(0o600)).expect("chmod 600");
}
