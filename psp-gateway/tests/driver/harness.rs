#![allow(dead_code)]
//! Gateways in memory: configuration files and keys written to a temporary directory as
//! `testbed/lib.sh` writes them, [`MemGateway`]s on [`MemSegment`]s, and frames to send
//! through them. Everything runs under tokio's paused clock: `settle` lets virtual time pass.

use core::net::SocketAddr;
use core::time::Duration;
use std::fs;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use psp_gateway::config::Config;
use psp_gateway::io::mem::MemSegment;
use psp_gateway::testing::MemGateway;
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_psp-gateway");

/// How a test network is made.
#[derive(Clone, Debug)]
pub(crate) struct Opts {
    /// Gateways vm1..=vmN.
    pub(crate) hosts: u8,
    /// The suite of the group and `key_file` keys.
    pub(crate) suite: &'static str,
    /// Peers use sessions (`[session]`), else pairwise `key_file`s.
    pub(crate) session: bool,
    /// Each host has an identity; peers pin it (configured), or first use with `tofu`.
    pub(crate) identity: bool,
    /// `identity = "tofu"` instead of the configured public key.
    pub(crate) tofu: bool,
    /// Uplinks (paths): 1 or 2.
    pub(crate) paths: u8,
    /// UDP uplinks (addresses 10.9.P.N:5198) instead of raw Ethernet.
    pub(crate) udp: bool,
    /// Lines for `[session]`.
    pub(crate) session_extra: String,
    /// Lines for `[defaults]`.
    pub(crate) defaults_extra: String,
    /// Text appended to every configuration (a `[normalize]` section, say).
    pub(crate) extra: String,
}

impl Default for Opts {
    fn default() -> Self {
        Self {
            hosts: 2,
            suite: "aes128-gcm",
            session: false,
            identity: false,
            tofu: false,
            paths: 1,
            udp: false,
            session_extra: String::new(),
            defaults_extra: String::new(),
            extra: String::new(),
        }
    }
}

impl Opts {
    /// Two hosts with sessions (SMKEX over two paths when `paths` is 2).
    pub(crate) fn sessions() -> Self {
        Self {
            session: true,
            ..Self::default()
        }
    }
}

/// A test network: its directory, segments (one per path) and options.
pub(crate) struct Net {
    pub(crate) dir: PathBuf,
    pub(crate) segs: Vec<Arc<MemSegment>>,
    pub(crate) opts: Opts,
    pubs: Vec<String>,
    starts: core::sync::atomic::AtomicU32,
    /// Each running gateway's uplink send switches: (host, path, switch).
    switches: std::sync::Mutex<Vec<(u8, usize, Arc<core::sync::atomic::AtomicBool>)>>,
}

fn keygen(args: &[&str]) -> String {
    let out = Command::new(BIN)
        .arg("keygen")
        .args(args)
        .output()
        .expect("run psp-gateway keygen");
    assert!(
        out.status.success(),
        "keygen {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8")
}

fn write_secret(path: &Path, text: &str) {
    fs::write(path, text).expect("write key");
    fs::set_permissions(path, fs::Permissions::from_mode(0o600)).expect("chmod key");
}

/// vmN's MAC.
pub(crate) fn mac(n: u8) -> [u8; 6] {
    [0x02, 0x50, 0x53, 0, 0, n]
}

fn mac_str(n: u8) -> String {
    psp_gateway::config::format_mac(mac(n))
}

/// vmN's UDP address on path `p` (0 or 1).
pub(crate) fn udp_addr(p: u8, n: u8) -> SocketAddr {
    SocketAddr::from(([10, 9, p, n], 5198))
}

impl Net {
    /// Writes the keys (and identities) of `opts.hosts` gateways to a new directory.
    pub(crate) fn new(opts: Opts) -> Self {
        let dir = std::env::temp_dir().join(format!(
            "psp-mem-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, core::sync::atomic::Ordering::Relaxed)
        ));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).expect("test directory");
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o700)).expect("chmod dir");
        write_secret(&dir.join("group.key"), &keygen(&["--suite", opts.suite]));
        for a in 1..=opts.hosts {
            for b in a + 1..=opts.hosts {
                write_secret(
                    &dir.join(format!("vm{a}-vm{b}.key")),
                    &keygen(&["--suite", opts.suite]),
                );
            }
        }
        let mut pubs = vec![String::new()];
        for n in 1..=opts.hosts {
            if opts.identity {
                let path = dir.join(format!("vm{n}.id"));
                let p = keygen(&["--identity", path.to_str().expect("UTF-8")]);
                pubs.push(p.trim().to_owned());
            } else {
                pubs.push(String::new());
            }
        }
        let segs = (0..opts.paths).map(|_| MemSegment::new()).collect();
        Self {
            dir,
            segs,
            opts,
            pubs,
            starts: core::sync::atomic::AtomicU32::new(0),
            switches: std::sync::Mutex::new(Vec::new()),
        }
    }

    /// vmN's configuration file's text.
    pub(crate) fn config_text(&self, n: u8) -> String {
        let o = &self.opts;
        let mut t = format!(
            "[interface]\nname = \"psp0\"\nmac = \"{}\"\naddresses = [\"10.0.0.{n}/24\"]\n\n",
            mac_str(n)
        );
        for p in 0..o.paths {
            let head = if o.paths == 2 {
                "[[uplink]]"
            } else {
                "[uplink]"
            };
            if o.udp {
                t += &format!(
                    "{head}\nkind = \"udp\"\nlisten = \"{}\"\n\n",
                    udp_addr(p, n)
                );
            } else {
                t += &format!("{head}\nkind = \"raw\"\ninterface = \"up{p}\"\n\n");
            }
        }
        if o.session {
            t += "[session]\n";
            if o.identity {
                t += &format!("identity_file = \"vm{n}.id\"\n");
            }
            t += &o.session_extra;
            t += "\n\n";
        }
        t += &format!(
            "[daemon]\nstatus_socket = \"{0}/vm{n}.sock\"\nstate_directory = \"{0}/vm{n}.state\"\n\n",
            self.dir.display()
        );
        t += &format!(
            "[defaults]\nsuite = \"{}\"\n{}\n\n",
            o.suite, o.defaults_extra
        );
        t += "[group]\nkey_file = \"group.key\"\n";
        for j in 1..=o.hosts {
            if j == n {
                continue;
            }
            let (a, b) = (n.min(j), n.max(j));
            t += &format!("\n[[peer]]\nname = \"vm{j}\"\nmac = \"{}\"\n", mac_str(j));
            if o.session {
                t += &format!("address = \"10.0.0.{j}\"\n");
                if o.identity && o.tofu {
                    t += "identity = \"tofu\"\n";
                } else if o.identity {
                    t += &format!("identity = \"{}\"\n", self.pubs[usize::from(j)]);
                }
            } else {
                t += &format!("key_file = \"vm{a}-vm{b}.key\"\n");
            }
            if o.udp {
                t += &format!("endpoint = \"{}\"\n", udp_addr(0, j));
                if o.paths == 2 {
                    t += &format!("endpoint2 = \"{}\"\n", udp_addr(1, j));
                }
            }
        }
        t += "\n";
        t += &o.extra;
        t
    }

    /// vmN's configuration, parsed as the daemon parses it.
    pub(crate) fn config(&self, n: u8) -> Config {
        self.parse(n, &self.config_text(n))
    }

    /// `text` parsed as vmN's configuration file.
    pub(crate) fn parse(&self, n: u8, text: &str) -> Config {
        let path = self.dir.join(format!("vm{n}.toml"));
        fs::write(&path, text).expect("write config");
        Config::parse(&path, text).unwrap_or_else(|e| panic!("vm{n}'s config: {e}\n{text}"))
    }

    /// Starts vmN on this network's segments.
    pub(crate) fn start(&self, n: u8) -> MemGateway {
        self.start_with(n, &self.config(n))
    }

    /// Starts vmN with `config`.
    pub(crate) fn start_with(&self, n: u8, config: &Config) -> MemGateway {
        self.start_opts(n, config, &psp_gateway::testing::MemOptions::default())
    }

    /// Starts vmN with `config` under test-only conditions; the uplinks' send switches are
    /// kept in [`Net::switches`].
    pub(crate) fn start_opts(
        &self,
        n: u8,
        config: &Config,
        opts: &psp_gateway::testing::MemOptions,
    ) -> MemGateway {
        let uplinks: Vec<_> = self
            .segs
            .iter()
            .enumerate()
            .map(|(p, s)| s.port(self.opts.udp.then(|| udp_addr(p as u8, n))))
            .collect();
        {
            let mut sw = self.switches.lock().expect("switches");
            sw.retain(|(m, ..)| *m != n);
            for (p, u) in uplinks.iter().enumerate() {
                sw.push((n, p, u.send_switch()));
            }
        }
        // A restarted gateway draws new random numbers, as a real one does.
        let starts = self
            .starts
            .fetch_add(1, core::sync::atomic::Ordering::Relaxed);
        MemGateway::start_with(
            config,
            uplinks,
            0x5eed_0000 + u64::from(n) * 1000 + u64::from(starts),
            opts,
        )
        .unwrap_or_else(|e| panic!("vm{n}: {e}"))
    }

    /// Makes vmN's sends on path `p` fail (`true`: its link is down) or work again.
    pub(crate) fn set_send_fails(&self, n: u8, p: usize, fail: bool) {
        for (m, q, sw) in self.switches.lock().expect("switches").iter() {
            if *m == n && *q == p {
                sw.store(fail, core::sync::atomic::Ordering::Relaxed);
            }
        }
    }

    /// The PSP frames that crossed path `p` since the last call.
    pub(crate) fn capture(&self, p: usize) -> Vec<Vec<u8>> {
        self.segs[p].take_capture()
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.dir);
    }
}

static NEXT: core::sync::atomic::AtomicU32 = core::sync::atomic::AtomicU32::new(0);

/// Lets `d` of virtual time pass (every gateway runs meanwhile).
pub(crate) async fn settle(d: Duration) {
    tokio::time::sleep(d).await;
}

/// An IPv4 frame from vmA to vmB (an arbitrary UDP datagram) whose payload starts with `id`.
pub(crate) fn frame(from: u8, to: u8, id: u32, len: usize) -> Vec<u8> {
    let mut f = Vec::with_capacity(len.max(64));
    f.extend_from_slice(&mac(to));
    f.extend_from_slice(&mac(from));
    f.extend_from_slice(&[0x08, 0x00]);
    let ip_len = (len.max(60) - 14) as u16;
    f.extend_from_slice(&[
        0x45,
        0,
        (ip_len >> 8) as u8,
        ip_len as u8,
        0,
        0,
        0x40,
        0,
        64,
        17,
        0,
        0,
    ]);
    f.extend_from_slice(&[10, 0, 0, from, 10, 0, 0, to]);
    f.extend_from_slice(&[0x30, 0x39, 0x30, 0x39]);
    let udp_len = ip_len - 20;
    f.extend_from_slice(&[(udp_len >> 8) as u8, udp_len as u8, 0, 0]);
    f.extend_from_slice(&id.to_be_bytes());
    while f.len() < len.max(60) {
        f.push((f.len() % 251) as u8);
    }
    f
}

/// A broadcast (ARP-sized) frame from vmA carrying `id`.
pub(crate) fn broadcast(from: u8, id: u32) -> Vec<u8> {
    let mut f = frame(from, 0, id, 60);
    f[..6].copy_from_slice(&[0xff; 6]);
    f
}

/// The ids of the frames in `frames` sent with [`frame`] (other frames are left out).
pub(crate) fn ids(frames: &[Vec<u8>]) -> Vec<u32> {
    frames
        .iter()
        .filter(|f| f.len() >= 46 && f[12..14] == [0x08, 0x00] && f[23] == 17)
        .map(|f| u32::from_be_bytes([f[42], f[43], f[44], f[45]]))
        .collect()
}

/// Sends frames `ids` from vmA's host through `a` and returns the ids that reached `b`'s host
/// within `wait`.
pub(crate) async fn exchange(
    a: &MemGateway,
    b: &MemGateway,
    (from, to): (u8, u8),
    ids_sent: core::ops::Range<u32>,
    wait: Duration,
) -> Vec<u32> {
    let _ = b.tap.take();
    for id in ids_sent {
        a.tap.inject(&frame(from, to, id, 200));
    }
    settle(wait).await;
    ids(&b.tap.take())
}

/// A counter of the status document: `path` is `a.b.c` from the top, or `peer:NAME.a.b` in a
/// peer's object.
pub(crate) fn counter(status: &Value, path: &str) -> u64 {
    let (mut v, rest) = match path.strip_prefix("peer:") {
        Some(p) => {
            let (name, rest) = p.split_once('.').expect("peer:NAME.counter");
            let peer = status["peers"]
                .as_array()
                .and_then(|ps| ps.iter().find(|x| x["name"] == name))
                .unwrap_or_else(|| panic!("no peer {name} in {status}"));
            (peer, rest)
        }
        None => (status, path),
    };
    for key in rest.split('.') {
        v = &v[key];
    }
    v.as_u64()
        .unwrap_or_else(|| panic!("no counter {path} in {status}"))
}

/// A peer's session state (`"up"`, `"down"`), or `""` without a session.
pub(crate) fn session_state(status: &Value, peer: &str) -> String {
    status["peers"]
        .as_array()
        .and_then(|ps| ps.iter().find(|x| x["name"] == peer))
        .and_then(|p| p["session"]["state"].as_str())
        .unwrap_or("")
        .to_owned()
}

/// Every nonzero drop counter of `status`, by path (top-level `drops.*`, per peer `drops.*`,
/// `no_session`, `group_unicast`, normalized `rx_*`).
pub(crate) fn drops(status: &Value) -> Vec<(String, u64)> {
    let mut out = Vec::new();
    if let Some(m) = status["drops"].as_object() {
        for (k, v) in m {
            if v.as_u64().unwrap_or(0) > 0 {
                out.push((format!("drops.{k}"), v.as_u64().unwrap_or(0)));
            }
        }
    }
    for p in status["peers"].as_array().into_iter().flatten() {
        let name = p["name"].as_str().unwrap_or("?");
        if let Some(m) = p["drops"].as_object() {
            for (k, v) in m {
                if v.as_u64().unwrap_or(0) > 0 {
                    out.push((format!("peer:{name}.drops.{k}"), v.as_u64().unwrap_or(0)));
                }
            }
        }
    }
    out
}

/// A key file's bytes (`"group"`, `"vm1-vm2"`).
impl Net {
    pub(crate) fn key(&self, name: &str) -> Vec<u8> {
        let text = fs::read_to_string(self.dir.join(format!("{name}.key"))).expect("key file");
        hex::decode(text.trim()).expect("hex key")
    }
}

/// Every counter of `after - before` that moved (numbers only, recursively; peers by name).
pub(crate) fn delta(before: &Value, after: &Value) -> std::collections::BTreeMap<String, i64> {
    fn walk(prefix: &str, b: &Value, a: &Value, out: &mut std::collections::BTreeMap<String, i64>) {
        match a {
            Value::Number(n) => {
                let (x, y) = (b.as_i64().unwrap_or(0), n.as_i64().unwrap_or(0));
                if x != y {
                    out.insert(prefix.to_owned(), y - x);
                }
            }
            Value::Object(m) => {
                for (k, v) in m {
                    let p = if prefix.is_empty() {
                        k.clone()
                    } else {
                        format!("{prefix}.{k}")
                    };
                    walk(&p, &b[k], v, out);
                }
            }
            Value::Array(list) => {
                for (i, v) in list.iter().enumerate() {
                    let name = v["name"].as_str().map_or(i.to_string(), ToOwned::to_owned);
                    let bv = b
                        .as_array()
                        .and_then(|l| l.iter().find(|x| x["name"] == v["name"]))
                        .cloned()
                        .unwrap_or(Value::Null);
                    walk(&format!("{prefix}.{name}"), &bv, v, out);
                }
            }
            _ => {}
        }
    }
    let mut out = std::collections::BTreeMap::new();
    walk("", before, after, &mut out);
    out
}

/// The drop and ignore counters of a [`delta`] (`drops.*`, `ignored.*`, a peer's `drops.*`,
/// `no_session`, `group_unicast` and its normalized stream's `rx_*`), totals left out.
pub(crate) fn drop_delta(before: &Value, after: &Value) -> std::collections::BTreeMap<String, i64> {
    delta(before, after)
        .into_iter()
        .filter(|(k, _)| {
            !k.ends_with("drops_total")
                && (k.starts_with("drops.")
                    || k.starts_with("ignored.")
                    || k.contains(".drops.")
                    || k.ends_with(".no_session")
                    || k.ends_with(".group_unicast")
                    || k.ends_with(".unknown_key")
                    || k.ends_with(".messages_limited")
                    || k.ends_with(".stale_requests")
                    || k.contains(".normalize.rx_"))
        })
        .collect()
}

/// `pairs` as the map [`drop_delta`] returns.
pub(crate) fn want(pairs: &[(&str, i64)]) -> std::collections::BTreeMap<String, i64> {
    let mut m = std::collections::BTreeMap::new();
    for (k, v) in pairs {
        *m.entry((*k).to_owned()).or_insert(0) += v;
    }
    m
}

/// The handshake messages among `frames` (from the segment's capture) from vmA to vmB, by
/// kind (`Request`, `Accept`, ...), opened with the group key of `net` (signatures not checked).
pub(crate) fn handshake_kinds(net: &Net, frames: &[Vec<u8>], from: u8, to: u8) -> Vec<String> {
    use psp_core::crypto::{SuiteId, SuiteKey};
    use psp_core::handshake::messages::Repr;
    use psp_core::protect::{Opener, OpenerConfig};
    use psp_core::wire::Protocol;
    let suite = SuiteId::from_name(net.opts.suite).expect("suite");
    let key = net.key("group");
    frames
        .iter()
        .filter(|f| f.len() > 14 && f[..6] == mac(to) && f[6..12] == mac(from))
        .filter_map(|f| {
            let mut o = Opener::new(
                SuiteKey::new(suite, &key).ok()?,
                OpenerConfig::new().with_max_frame_len(2048),
            )
            .ok()?;
            o.set_accept_unverified(true);
            let mut f = f.clone();
            let opened = o.open(psp_core::time::Instant::ZERO, &mut f).ok()?;
            if opened.protocol() != Protocol::SessionEstablishment {
                return None;
            }
            let repr = Repr::parse_bytes(opened.payload()).ok()?;
            let kind = format!("{:?}", repr.body);
            Some(kind.split(['(', ' ', '{']).next().unwrap_or("").to_owned())
        })
        .collect()
}

/// An ARP request from vmA for vmB's address (10.0.0.B), broadcast.
pub(crate) fn arp_request(from: u8, to: u8) -> Vec<u8> {
    let mut f = vec![0xff; 6];
    f.extend_from_slice(&mac(from));
    f.extend_from_slice(&[0x08, 0x06, 0, 1, 0x08, 0x00, 6, 4, 0, 1]);
    f.extend_from_slice(&mac(from));
    f.extend_from_slice(&[10, 0, 0, from]);
    f.extend_from_slice(&[0; 6]);
    f.extend_from_slice(&[10, 0, 0, to]);
    f.resize(60, 0);
    f
}

/// The log lines of the gateways running on this thread, while the guard lives (tokio's
/// current-thread runtime runs them here).
#[derive(Clone, Default)]
pub(crate) struct Logs(Arc<std::sync::Mutex<Vec<u8>>>);

impl Logs {
    /// Captures the log (level `info` and up) until the guard drops.
    pub(crate) fn capture() -> (Self, tracing::subscriber::DefaultGuard) {
        let logs = Self::default();
        let w = logs.clone();
        let sub = tracing_subscriber::fmt()
            .with_ansi(false)
            .with_max_level(tracing::Level::INFO)
            .with_writer(move || LogWriter(w.clone()))
            .finish();
        (logs, tracing::subscriber::set_default(sub))
    }

    /// The lines that contain `needle`.
    pub(crate) fn lines(&self, needle: &str) -> Vec<String> {
        String::from_utf8_lossy(&self.0.lock().expect("logs"))
            .lines()
            .filter(|l| l.contains(needle))
            .map(ToOwned::to_owned)
            .collect()
    }
}

struct LogWriter(Logs);

impl std::io::Write for LogWriter {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.0.lock().expect("logs").extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Asserts that every frame of `ids_sent` from vmA's host reaches vmB's host, in order, within
/// `wait` ([`exchange`]).
pub(crate) async fn flows(
    a: &MemGateway,
    b: &MemGateway,
    dir: (u8, u8),
    ids_sent: core::ops::Range<u32>,
    wait: Duration,
) {
    let want: Vec<u32> = ids_sent.clone().collect();
    let got = exchange(a, b, dir, ids_sent, wait).await;
    assert_eq!(got, want, "vm{} -> vm{}", dir.0, dir.1);
}
