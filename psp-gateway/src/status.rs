//! The status socket: a unix stream socket the daemon owns; each connection receives one JSON
//! document (the counters) and is closed. `psp-gateway status` is the client and renders it as a
//! table or passes the JSON through.

use core::fmt::Write as _;
use std::io::Read as _;
use std::os::unix::net::UnixStream;
use std::path::Path;

use serde_json::{Map, Value, json};
use tokio::io::AsyncWriteExt as _;
use tokio::net::UnixListener;

use psp_core::host::{Counter, Counters, NormCounters, SessionStatus};
use psp_core::time::Instant;
use tokio::sync::{mpsc, oneshot};

use crate::config::{UplinkConfig, format_mac};
use crate::driver::Control;
use crate::driver::snapshot::Snapshot;

/// Static facts about the running daemon, for the status document.
#[derive(Debug, Clone)]
pub(crate) struct Info {
    /// TAP name.
    pub(crate) interface: String,
    /// Every uplink's description (`raw:eth0`, `udp:0.0.0.0:5198`), path 1 first.
    pub(crate) uplinks: Vec<String>,
    /// TAP MTU.
    pub(crate) mtu: usize,
    /// The TAP's MAC.
    pub(crate) mac: [u8; 6],
    /// The uplinks, path 1 first.
    pub(crate) paths: Vec<PathInfo>,
    /// This host's identity (its Ed25519 public key), with `[session] identity_file`.
    pub(crate) public_key: Option<[u8; 32]>,
}

/// One uplink (path) for the status document.
#[derive(Debug, Clone)]
pub(crate) struct PathInfo {
    /// `raw:eth1` or `udp:0.0.0.0:5198`, as configured.
    describe: String,
    /// The interface of a raw uplink, whose link state the document reports.
    interface: Option<String>,
}

impl PathInfo {
    /// The path of an uplink's configuration.
    pub(crate) fn of(config: &UplinkConfig) -> Self {
        match config {
            UplinkConfig::Raw { interface, .. } => Self {
                describe: format!("raw:{interface}"),
                interface: Some(interface.clone()),
            },
            UplinkConfig::Udp { listen } => Self {
                describe: format!("udp:{listen}"),
                interface: None,
            },
        }
    }
}

/// The paths as JSON: `[{"path": 1, "uplink": "raw:eth1", "link": "up"}, ...]`; `link` (raw
/// uplinks only) is `up` (administratively up with carrier), `no-carrier` or `down`, read now.
fn paths_json(paths: &[PathInfo]) -> Value {
    let ifs = crate::io::sys::interfaces().unwrap_or_default();
    let list: Vec<Value> = paths
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let mut m = Map::new();
            m.insert("path".into(), (i + 1).into());
            m.insert("uplink".into(), p.describe.clone().into());
            if let Some(name) = &p.interface {
                let flags = ifs.iter().find(|e| &e.name == name).map_or(0, |e| e.flags);
                let link = if flags & libc::IFF_UP as u32 == 0 {
                    "down"
                } else if flags & libc::IFF_RUNNING as u32 == 0 {
                    "no-carrier"
                } else {
                    "up"
                };
                m.insert("link".into(), link.into());
            }
            Value::Object(m)
        })
        .collect();
    Value::Array(list)
}

/// What `suite` does not protect, for the status and the start-up log; `None` for a suite that
/// keeps frames confidential and authentic. `scramble-hmac-sha1` and `null-hmac-sha1` give
/// integrity only, `none` nothing (writing either in the config is the permission they need).
pub(crate) fn protection_gap(suite: psp_core::SuiteId) -> Option<&'static str> {
    use psp_core::SuiteId;
    match suite {
        SuiteId::None => Some("no confidentiality, no integrity"),
        SuiteId::ScrambleHmacSha1 => Some(
            "no confidentiality (integrity only: the scrambler is read from the ciphertext \
             alone, docs/SCRAMBLER.md)",
        ),
        s if !s.is_confidential() => Some("no confidentiality (integrity only)"),
        _ => None,
    }
}

/// The counters of a peer that belong in its `session` object (the rest are at the peer's
/// level). Every counter is declared once, in psp-core's `host::counters`.
const SESSION_COUNTERS: [&str; 9] = [
    "sessions",
    "rekeys",
    "initiated",
    "no_session",
    "unknown_key",
    "group_unicast",
    "messages_limited",
    "stale_requests",
    "handshake_failures",
];

/// Where a counter not tied to a peer is shown: `status`' `drops`, `ignored` or `group`
/// objects, the metrics' `psp_drops_total{reason}`, `psp_ignored_frames_total{reason}` and
/// `psp_group_*` families.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Section {
    /// A frame dropped (counted in `drops_total`).
    Drops,
    /// A frame ignored as not ours (not an attack signal).
    Ignored,
    /// Traffic under the group key.
    Group,
    /// Membership messages (`[pki]`).
    Membership,
}

/// What the group's `tx_frames` counts. The host counts every frame sealed under the group key
/// there, the handshake messages to a peer without a session and the `[pki]` announcements
/// included, but only the broadcasts' inner bytes in `tx_bytes` (those messages carry no inner
/// frame): so the frames can rise while the bytes stay.
const GROUP_TX_FRAMES_HELP: &str = "Frames sealed under the group key: broadcasts and \
    multicasts, and handshake and membership messages (these carry no inner frame, so their \
    bytes are not in group tx_bytes).";

/// The status table's note on the group row, shown where handshake or membership messages go
/// under the group key (sessions, `[pki]`).
const GROUP_ROW_NOTE: &str = "(group) TX-FRAMES counts the handshake and membership messages \
    sealed under the group key too; TX-BYTES only the inner bytes of broadcast and multicast \
    frames";

/// Every counter of the host and the driver not tied to a peer, with where it is shown and its
/// name there (the one placement `status` and the metrics share).
pub(crate) fn host_counters(snap: &Snapshot, f: &mut dyn FnMut(Section, Counter)) {
    snap.host.visit(&mut |mut k: Counter| {
        let section = match k.name {
            "group_tx_frames" | "group_tx_bytes" | "group_copies" => {
                k.name = &k.name["group_".len()..];
                if k.name == "tx_frames" {
                    k.help = GROUP_TX_FRAMES_HELP;
                }
                Section::Group
            }
            "not_for_us" => Section::Ignored,
            "announces" | "revocations_adopted" | "rotations" | "keys_taken" => Section::Membership,
            "path2_ignored" => {
                k.name = "path2_not_handshake";
                Section::Ignored
            }
            "path2_drops" => {
                k.name = "path2";
                Section::Drops
            }
            _ => Section::Drops,
        };
        f(section, k);
    });
    snap.io.visit(&mut |k: Counter| f(Section::Drops, k));
}

/// Puts every counter `c` visits into `peer` (by name, a labelled one into an object of its
/// labels), the session ones into `session`.
fn put_counters(
    c: &dyn Counters,
    top: &mut Map<String, Value>,
    session: Option<&mut Map<String, Value>>,
) {
    let mut session = session;
    c.visit(&mut |k: Counter| {
        let m: &mut Map<String, Value> = match (&mut session, SESSION_COUNTERS.contains(&k.name)) {
            (Some(s), true) => s,
            _ => top,
        };
        match k.label {
            None => {
                m.insert(k.name.into(), k.value.into());
            }
            Some(l) => {
                let e = m.entry(k.name).or_insert_with(|| Value::Object(Map::new()));
                if let Some(o) = e.as_object_mut() {
                    o.insert(l.into(), k.value.into());
                }
            }
        }
    });
}

/// A session peer's state.
fn session_json(st: &SessionStatus, now: Instant) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("state".into(), if st.up { "up" } else { "down" }.into());
    if let Some((at, info)) = st.last {
        m.insert(
            "age_s".into(),
            (now.saturating_since(at).total_micros() / 1_000_000).into(),
        );
        m.insert("suite".into(), info.suite.name().into());
        m.insert(
            "confidentiality".into(),
            info.suite.is_confidential().into(),
        );
        let paths = if info.two_path {
            "two-path"
        } else {
            "single-path"
        };
        m.insert("paths".into(), paths.into());
        m.insert("kem".into(), info.kem.into());
        m.insert(
            "handshake_ms".into(),
            (info.handshake_us as f64 / 1000.0).into(),
        );
        // Rekeys since the last new session (a restarted peer starts a new one).
        m.insert("session_rekeys".into(), info.rekeys.into());
    }
    let secs = |d: psp_core::time::Duration| d.total_micros() / 1_000_000;
    if let Some(down) = st.down {
        m.insert(
            "down_s".into(),
            secs(now.saturating_since(down.since)).into(),
        );
        m.insert("silent_s".into(), secs(down.silent).into());
    }
    if let Some(t) = st.last_heard {
        m.insert("heard_s_ago".into(), secs(now.saturating_since(t)).into());
    }
    if let Some((key_id, next_seq)) = st.current {
        m.insert("key_id".into(), key_id.into());
        m.insert("next_seq".into(), next_seq.into());
    }
    if st.handshaking {
        m.insert("handshaking".into(), true.into());
    }
    if let Some(pin) = st.pin {
        m.insert("identity".into(), hex::encode(pin).into());
    }
    if st.paths[1].is_some() {
        m.insert("path_mode".into(), st.path_mode.name().into());
        let links: Vec<Value> = st
            .paths
            .iter()
            .flatten()
            .map(|p| {
                json!({
                    "state": if p.up { "up" } else { "down" },
                    "since_s": secs(now.saturating_since(p.since)),
                    "heard_ms_ago": p.last_heard.map(|t| now.saturating_since(t).total_micros() / 1000),
                    "downs": p.downs,
                })
            })
            .collect();
        m.insert("links".into(), links.into());
    }
    m
}

/// A normalized peer's stream.
pub(crate) fn normalize_json(
    s: &psp_core::normalize::Stats,
    c: &NormCounters,
    frame: usize,
) -> Value {
    json!({
        "frame_bytes": frame,
        "s_current_kbps": s.s_current.kbps(),
        "s_goal_kbps": s.s_goal.kbps(),
        "peer_suggested_kbps": s.peer_suggested.kbps(),
        "s_suggested_kbps": s.s_suggested.kbps(),
        "round": s.round,
        "r_recent": s.r_recent,
        "last_loss_ppm": s.last_loss.ppm(),
        "rtt_estimate_us": s.rtt_estimate.total_micros(),
        "last_rtt_sample_us": s.last_rtt_sample.total_micros(),
        "rate_decisions": s.rate_decisions,
        "frames_sent": s.frames_sent,
        "real_frames_sent": s.frames_sent - s.dummy_frames_sent,
        "dummy_frames_sent": s.dummy_frames_sent,
        "frames_received": s.frames_received,
        "inner_queued": s.inner_queued,
        "inner_queue_frames": s.inner_queue_frames,
        "inner_queue_bytes": s.inner_queue_bytes,
        "inner_drops": s.inner_drops,
        "aqm_drops": s.aqm_drops,
        "aqm_marks": s.aqm_marks,
        "inner_delivered": s.inner_delivered,
        "delivery_drops": s.delivery_drops,
        "reassembly_drops": s.reassembly_drops,
        "malformed": s.malformed,
        "pacer_skipped": s.pacer_skipped,
        "seal_error": c.seal_error,
        "group_ignored": c.group_ignored,
        "rx_short": c.rx_short,
        "rx_not_for_us": c.rx_not_for_us,
        "rx_foreign_src": c.rx_foreign_src,
    })
}

/// The status document.
pub(crate) fn document(info: &Info, snap: &Snapshot) -> Value {
    let mut total = snap.host.drops_total() + snap.io.drops_total();
    let session_host = snap.peers.iter().any(|p| p.keying == "session");
    let peers: Vec<Value> = snap
        .peers
        .iter()
        .map(|p| {
            let c = &p.counters;
            total += c.drops_total() + c.no_session + c.group_unicast;
            let mut m = Map::new();
            m.insert("name".into(), p.name.clone().into());
            m.insert(
                "macs".into(),
                p.macs.iter().map(|m| format_mac(*m)).collect(),
            );
            m.insert("suite".into(), p.suite.name().into());
            if p.keying != "session" {
                m.insert("confidentiality".into(), p.suite.is_confidential().into());
            }
            if let Some(ep) = p.endpoint {
                m.insert("endpoint".into(), ep.to_string().into());
            }
            m.insert("drops_total".into(), c.drops_total().into());
            match &p.session {
                Some(st) => {
                    let mut sm = session_json(st, snap.now);
                    put_counters(c, &mut m, Some(&mut sm));
                    m.insert("session".into(), Value::Object(sm));
                }
                None => {
                    put_counters(c, &mut m, None);
                    if session_host {
                        m.insert("session".into(), json!({ "state": p.keying }));
                    }
                }
            }
            if let Some((s, nc, frame)) = &p.norm {
                total += nc.rx_short + nc.rx_not_for_us + nc.rx_foreign_src;
                m.insert("normalize".into(), normalize_json(s, nc, *frame));
            }
            Value::Object(m)
        })
        .collect();
    let (mut drops, mut ignored) = (Map::new(), Map::new());
    host_counters(snap, &mut |section, k| {
        let m = match section {
            Section::Drops => &mut drops,
            Section::Ignored => &mut ignored,
            Section::Group | Section::Membership => return,
        };
        m.insert(k.name.into(), k.value.into());
    });
    let unknown_sources: Vec<Value> = snap
        .unknown
        .newest_first()
        .map(|u| {
            json!({
                "mac": format_mac(u.mac),
                "frames": u.frames,
                "last_s_ago": snap.now.saturating_since(u.last).total_micros() / 1_000_000,
            })
        })
        .collect();
    let h = &snap.host;
    let mut doc = json!({
        "interface": info.interface,
        "mac": format_mac(info.mac),
        // Path 1 (as before there were two), and every uplink.
        "uplink": info.uplinks.first(),
        "uplinks": info.uplinks,
        "mtu": info.mtu,
        "paths": paths_json(&info.paths),
        "public_key": info.public_key.map(hex::encode),
        "uptime_ms": snap.uptime_ms,
        "group": {
            "suite": snap.group_suite.name(),
            "confidentiality": snap.group_suite.is_confidential(),
            "tx_frames": h.group_tx_frames,
            "tx_bytes": h.group_tx_bytes,
            "copies": h.group_copies,
        },
        "peers": peers,
        "drops": drops,
        "unknown_sources": unknown_sources,
        "ignored": ignored,
        "drops_total": total,
    });
    if let Some(rt) = snap.pacer_realtime {
        doc["pacer_realtime"] = rt.into();
    }
    if let Some(late) = snap.pacer_late {
        doc["pacer_late"] = late.into();
    }
    if let Some(p) = snap.pki {
        let now = crate::civil::now();
        doc["membership"] = json!({
            "serial": p.serial,
            "not_after": p.not_after,
            "not_after_utc": crate::civil::utc(p.not_after),
            "expires_in_s": p.not_after.saturating_sub(now),
            "revocation_list": p.list,
            "certified_peers": p.certified,
            "announces": h.announces,
            "revocations_adopted": h.revocations_adopted,
            "rotations": h.rotations,
            "keys_taken": h.keys_taken,
        });
        if let Some((server, epoch, age_ms)) = p.key {
            doc["membership"]["broadcast_key"] = json!({
                "server": format_mac(server),
                "epoch": epoch,
                "age_s": age_ms / 1000,
            });
        }
    }
    doc
}

/// Serves the status socket until the task is aborted: one JSON document per connection, from
/// a snapshot the driver takes for it.
pub(crate) async fn serve(listener: UnixListener, info: Info, ctl: mpsc::Sender<Control>) {
    loop {
        let Ok((mut conn, _)) = listener.accept().await else {
            continue;
        };
        let (tx, rx) = oneshot::channel();
        if ctl.send(Control::Snapshot(tx)).await.is_err() {
            return;
        }
        let Ok(snap) = rx.await else {
            return;
        };
        let mut text = document(&info, &snap).to_string();
        text.push('\n');
        // A client that goes away early is its own problem; the daemon carries on.
        let _ = conn.write_all(text.as_bytes()).await;
    }
}

/// Reads the status document from the socket at `path`.
///
/// # Errors
/// One line: the socket cannot be reached or does not answer with JSON.
pub(crate) fn fetch(path: &Path) -> Result<Value, String> {
    let mut s = UnixStream::connect(path)
        .map_err(|e| format!("status socket {}: {e}{}", path.display(), connect_hint(&e)))?;
    let mut text = String::new();
    s.read_to_string(&mut text)
        .map_err(|e| format!("status socket {}: {e}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| {
        format!(
            "status socket {}: not a status document: {e}",
            path.display()
        )
    })
}

/// What a failed connection to the status socket most likely means.
fn connect_hint(e: &std::io::Error) -> &'static str {
    match e.raw_os_error() {
        Some(libc::ENOENT) => {
            " (no daemon has created it: is the daemon running, in this network namespace? \
             Give its config with --config or the path with --socket)"
        }
        Some(libc::ECONNREFUSED) => " (nothing listens on it: the daemon that made it has stopped)",
        Some(libc::EACCES | libc::EPERM) => {
            " (the daemon is running, but the socket (mode 0660) or its directory is not open \
             to this user: run as root, as the daemon's user, or as a member of its group \
             (the packaged unit: psp-gateway))"
        }
        _ => "",
    }
}

/// Renders the status document as a human table.
pub(crate) fn render(doc: &Value) -> String {
    let mut s = String::new();
    let u = |v: &Value| v.as_u64().unwrap_or(0);
    // Every uplink (a daemon of before `uplinks` has `uplink` only).
    let uplinks: Vec<&str> = doc["uplinks"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let uplinks = match uplinks.as_slice() {
        [] => format!("uplink {}", doc["uplink"].as_str().unwrap_or("?")),
        [one] => format!("uplink {one}"),
        all => format!("uplinks {}", all.join(", ")),
    };
    let _ = writeln!(
        s,
        "interface {} ({})  {uplinks}  mtu {}  up {:.1} s",
        doc["interface"].as_str().unwrap_or("?"),
        doc["mac"].as_str().unwrap_or("?"),
        u(&doc["mtu"]),
        u(&doc["uptime_ms"]) as f64 / 1000.0
    );
    if let Some(pk) = doc["public_key"].as_str() {
        let _ = writeln!(s, "public key {pk}");
    }
    let m = &doc["membership"];
    if m.is_object() {
        let _ = writeln!(
            s,
            "certificate serial {} valid until {} ({} d left)  revocation list {}  {} peers from certificates",
            u(&m["serial"]),
            m["not_after_utc"].as_str().unwrap_or("?"),
            u(&m["expires_in_s"]) / 86_400,
            u(&m["revocation_list"]),
            u(&m["certified_peers"])
        );
        let k = &m["broadcast_key"];
        let _ = if k.is_object() {
            writeln!(
                s,
                "broadcast key from {} epoch {} ({} s old), {} made here, {} taken",
                k["server"].as_str().unwrap_or("?"),
                u(&k["epoch"]),
                u(&k["age_s"]),
                u(&m["rotations"]),
                u(&m["keys_taken"])
            )
        } else {
            writeln!(
                s,
                "broadcast key: none yet (broadcasts go under the group key)"
            )
        };
    }
    if let Some(paths) = doc["paths"].as_array().filter(|p| !p.is_empty()) {
        let shown: Vec<String> = paths
            .iter()
            .map(|p| {
                let link = p["link"]
                    .as_str()
                    .map_or_else(String::new, |l| format!(" (link {l})"));
                format!(
                    "path {} {}{link}",
                    u(&p["path"]),
                    p["uplink"].as_str().unwrap_or("?")
                )
            })
            .collect();
        let _ = writeln!(s, "{}", shown.join(", "));
    }
    let _ = writeln!(
        s,
        "{:<16} {:<20} {:>10} {:>14} {:>10} {:>14} {:>8}",
        "PEER", "SUITE", "TX-FRAMES", "TX-BYTES", "RX-FRAMES", "RX-BYTES", "DROPS"
    );
    let g = &doc["group"];
    let _ = writeln!(
        s,
        "{:<16} {:<20} {:>10} {:>14} {:>10} {:>14} {:>8}",
        "(group)",
        g["suite"].as_str().unwrap_or("?"),
        u(&g["tx_frames"]),
        u(&g["tx_bytes"]),
        "-",
        "-",
        "-"
    );
    let empty = Vec::new();
    let peers = doc["peers"].as_array().unwrap_or(&empty);
    for p in peers {
        let _ = writeln!(
            s,
            "{:<16} {:<20} {:>10} {:>14} {:>10} {:>14} {:>8}",
            p["name"].as_str().unwrap_or("?"),
            p["suite"].as_str().unwrap_or("?"),
            u(&p["tx_frames"]),
            u(&p["tx_bytes"]),
            u(&p["rx_frames"]),
            u(&p["rx_bytes"]),
            u(&p["drops_total"])
        );
    }
    let sessions = peers.iter().any(|p| p["session"]["sessions"].is_u64());
    if sessions || doc["membership"].is_object() {
        let _ = writeln!(s, "{GROUP_ROW_NOTE}");
    }
    let nonzero = |obj: &Value| -> String {
        obj.as_object()
            .map(|m| {
                m.iter()
                    .filter(|(_, v)| u(v) > 0)
                    .map(|(k, v)| format!("{k}={}", u(v)))
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .unwrap_or_default()
    };
    let gap = |suite: &Value| {
        suite
            .as_str()
            .and_then(psp_core::SuiteId::from_name)
            .and_then(protection_gap)
    };
    if let Some(why) = gap(&g["suite"]) {
        let _ = writeln!(
            s,
            "(group): suite {}: {why}",
            g["suite"].as_str().unwrap_or("?")
        );
    }
    for p in peers {
        for suite in [&p["suite"], &p["session"]["suite"]] {
            if let Some(why) = gap(suite) {
                let (name, suite) = (p["name"].as_str(), suite.as_str());
                let _ = writeln!(
                    s,
                    "{}: suite {}: {why}",
                    name.unwrap_or("?"),
                    suite.unwrap_or("?")
                );
            }
        }
    }
    for p in peers {
        let d = nonzero(&p["drops"]);
        if !d.is_empty() {
            let _ = writeln!(s, "drops from {}: {d}", p["name"].as_str().unwrap_or("?"));
        }
    }
    render_sessions(&mut s, peers);
    render_normalized(&mut s, peers);
    for p in peers {
        if let Some(why) = diagnose(p, doc) {
            let _ = writeln!(s, "hint {}: {why}", p["name"].as_str().unwrap_or("?"));
        }
    }
    let d = nonzero(&doc["drops"]);
    let _ = writeln!(
        s,
        "drops total {}{}{}",
        u(&doc["drops_total"]),
        if d.is_empty() { "" } else { "; other: " },
        d
    );
    if let Some(line) = unknown_sources(doc) {
        let _ = writeln!(s, "unknown sources (unknown_peer, newest first): {line}");
    }
    let _ = writeln!(
        s,
        "ignored (not for us): {}",
        u(&doc["ignored"]["not_for_us"])
    );
    s
}

/// The last unknown sources, `MAC xFRAMES (N s ago), ...`, or `None` when there are none.
fn unknown_sources(doc: &Value) -> Option<String> {
    let list = doc["unknown_sources"]
        .as_array()
        .filter(|l| !l.is_empty())?;
    let shown: Vec<String> = list
        .iter()
        .map(|u| {
            format!(
                "{} x{} ({} s ago)",
                u["mac"].as_str().unwrap_or("?"),
                u["frames"].as_u64().unwrap_or(0),
                u["last_s_ago"].as_u64().unwrap_or(0)
            )
        })
        .collect();
    Some(shown.join(", "))
}

/// The session table: per session peer its state, when its newest handshake completed (the
/// newest session's age), suite, paths, rekeys since its last new session, and failures.
fn render_sessions(s: &mut String, peers: &[Value]) {
    let u = |v: &Value| v.as_u64().unwrap_or(0);
    let sess: Vec<_> = peers
        .iter()
        .filter(|p| p["session"]["sessions"].is_u64())
        .collect();
    if sess.is_empty() {
        return;
    }
    let _ = writeln!(
        s,
        "{:<16} {:<6} {:>9} {:<20} {:<12} {:>7} {:>9} {:>10}  FAILURES",
        "SESSION", "STATE", "LAST-HS", "SUITE", "PATHS", "REKEYS", "HS-ms", "NO-SESSION"
    );
    for p in sess {
        let x = &p["session"];
        let fails = x["handshake_failures"]
            .as_object()
            .map(|m| {
                m.iter()
                    .filter(|(_, v)| u(v) > 0)
                    .map(|(k, v)| format!("{k}={}", u(v)))
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .unwrap_or_default();
        let _ = writeln!(
            s,
            "{:<16} {:<6} {:>9} {:<20} {:<12} {:>7} {:>9.2} {:>10}  {}",
            p["name"].as_str().unwrap_or("?"),
            x["state"].as_str().unwrap_or("?"),
            x["age_s"]
                .as_u64()
                .map_or_else(|| "never".into(), |a| format!("{a}s ago")),
            x["suite"].as_str().unwrap_or("-"),
            match (x["paths"].as_str(), x["kem"].as_bool()) {
                (Some(p), Some(true)) => format!("{p},kem"),
                (p, _) => p.unwrap_or("-").to_string(),
            },
            u(&x["session_rekeys"]),
            x["handshake_ms"].as_f64().unwrap_or(0.0),
            u(&x["no_session"]),
            if fails.is_empty() { "-" } else { &fails }
        );
        // Two uplinks: each path's state and when it last changed.
        if let Some(links) = x["links"].as_array() {
            let line: Vec<String> = links
                .iter()
                .enumerate()
                .map(|(i, l)| {
                    format!(
                        "path {} {} for {}s ({} downs)",
                        i + 1,
                        l["state"].as_str().unwrap_or("?"),
                        u(&l["since_s"]),
                        u(&l["downs"])
                    )
                })
                .collect();
            let _ = writeln!(
                s,
                "{:<16} {} ({})",
                "",
                line.join(", "),
                x["path_mode"].as_str().unwrap_or("?")
            );
        }
    }
}

/// Why a peer may not be talking, from its counters (one line), or `None` when nothing points
/// at a problem. The likely cause and the config line to check, most specific first: a failed
/// handshake by its most frequent reason, then drops by reason, then no session yet, then
/// silence.
pub(crate) fn diagnose(peer: &Value, doc: &Value) -> Option<String> {
    let u = |v: &Value| v.as_u64().unwrap_or(0);
    let x = &peer["session"];
    let session = x["sessions"].is_u64();
    if session && x["state"] == "down" && x["silent_s"].is_u64() {
        return Some(format!(
            "session down {} s ago: no frame from {} for {} s while this host sent to it: it \
             stopped, or the path between the hosts failed; frames to it wait for the next \
             session and a handshake runs",
            u(&x["down_s"]),
            peer["name"].as_str().unwrap_or("it"),
            u(&x["silent_s"])
        ));
    }
    if session && x["state"] == "down" {
        let worst = x["handshake_failures"].as_object().and_then(|m| {
            m.iter()
                .filter(|(_, v)| u(v) > 0)
                .max_by_key(|(_, v)| u(v))
                .map(|(k, v)| (k.clone(), u(v)))
        });
        if let Some((reason, n)) = worst {
            let why = match reason.as_str() {
                "timeout" => {
                    "the peer does not answer: is it running, does its config list this host's \
                     MAC as a [[peer]] mac, and do both hosts have the same [group] key and suite?"
                }
                "too_few_paths" => {
                    "one host requires two paths (smkex = \"require\") and the other has one \
                     uplink, or path 2 does not connect them"
                }
                "kem_required" => {
                    "one host requires ML-KEM-768 (kem = \"require\") and the other has it off \
                     (or runs a version without it): set kem the same on both"
                }
                "smkex_mismatch" => {
                    "the two paths carried different handshakes: a message was changed on one \
                     path (an active attacker), or the uplinks are crossed between the hosts"
                }
                "identity_mismatch" => {
                    "its identity is not the one pinned here ([[peer]] identity or known_peers): \
                     compare with `psp-gateway pubkey` on the peer"
                }
                "no_common_suite" => "the two hosts' [session] suites have no suite in common",
                "expiry_refused" => "the session lifetimes do not fit ([session] lifetime_s)",
                "rate_limited" => "it sent more handshake requests than the rate limit allows",
                "confirm_mismatch" => {
                    "key confirmation failed: the hosts derived different keys (a man in the \
                     middle?)"
                }
                _ => "its handshake messages were refused",
            };
            return Some(format!(
                "no session: {n} handshake(s) failed with {reason}: {why}"
            ));
        }
    }
    let drops = &peer["drops"];
    let reasons: [(&str, &str); 8] = [
        (
            "bad-icv",
            "its frames fail the ICV: the two ends use different keys or suites (key_file, \
             [group] key_file, suite)",
        ),
        (
            "bad-signature",
            "its signed frames fail the signature: the identity pinned here is not the key of \
             its identity_file (compare with `psp-gateway pubkey` on it)",
        ),
        (
            "unsupported",
            "it signs its frames and this host has no key to check them: pin its identity \
             ([[peer]] identity = \"...\", from `psp-gateway pubkey` on it)",
        ),
        (
            "wrong-suite",
            "it uses another suite (suite in [defaults], [group] or [[peer]])",
        ),
        (
            "security-number",
            "security_number differs between the two ends",
        ),
        (
            "timestamp",
            "timestamps are on at one end only, or the clocks differ by more than max_skew_ms",
        ),
        (
            "too-old",
            "its sequence numbers are behind the replay window: it restarted with a static \
             key (restart both, or use [session])",
        ),
        (
            "replay",
            "frames seen before arrive again (a replay, or a loop on the segment)",
        ),
    ];
    if let Some((r, why)) = reasons.iter().find(|(r, _)| u(&drops[*r]) > 0) {
        return Some(format!("{} frame(s) dropped as {r}: {why}", u(&drops[*r])));
    }
    if session
        && x["state"] == "down"
        && x["sessions"] == 0
        && u(&peer["tx_frames"]) == 0
        && u(&x["no_session"]) == 0
    {
        // Broadcasts (ARP) go under the group key to every peer, this one included, without a
        // session: "nothing was sent" is true only if none went out. (The group's bytes are
        // those of broadcasts only; its frames also count handshake messages to other peers.)
        let group = u(&doc["group"]["tx_frames"]);
        let rx = u(&peer["rx_frames"]);
        return Some(if u(&doc["group"]["tx_bytes"]) == 0 {
            "no session yet: nothing was sent to it so far (the first unicast frame to its MAC \
             starts the handshake)"
                .to_owned()
        } else if rx == 0 {
            format!(
                "no session yet, and nothing heard from it: {group} frame(s) went out under the \
                 group key (broadcasts such as ARP reach every peer) and it never answered; no \
                 unicast frame to it so far (the first one starts the handshake): is it running, \
                 with the same [group] key, and does its config name this host's MAC ({}) as a \
                 [[peer]] mac?",
                doc["mac"].as_str().unwrap_or("?")
            )
        } else {
            format!(
                "no session yet: {rx} frame(s) came from it and {group} went out under the group \
                 key (broadcasts), but no unicast frame to it so far (the first one starts the \
                 handshake)"
            )
        });
    }
    if u(&peer["rx_frames"]) == 0 && (u(&peer["tx_frames"]) > 0 || x["state"] == "up") {
        let unknown = u(&doc["drops"]["unknown_peer"]);
        let mut why = format!(
            "nothing received from it: is it running, and does its config name this host's MAC \
             ({}) as a [[peer]] mac?",
            doc["mac"].as_str().unwrap_or("?")
        );
        if unknown > 0 {
            let macs: Vec<&str> = doc["unknown_sources"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|u| u["mac"].as_str())
                .collect();
            let macs = if macs.is_empty() {
                String::new()
            } else {
                format!(": {}", macs.join(", "))
            };
            why.push_str(&format!(
                " {unknown} frame(s) came from MACs no [[peer]] here lists (unknown_peer{macs}): \
                 check this peer's mac"
            ));
        }
        return Some(why);
    }
    None
}

fn render_normalized(s: &mut String, peers: &[Value]) {
    let u = |v: &Value| v.as_u64().unwrap_or(0);
    let norm: Vec<_> = peers
        .iter()
        .filter(|p| p["normalize"].is_object())
        .collect();
    if norm.is_empty() {
        return;
    }
    let _ = writeln!(
        s,
        "{:<16} {:>6} {:>9} {:>9} {:>9} {:>8} {:>8} {:>6} {:>10} {:>10} {:>7} {:>7}",
        "NORMALIZED",
        "FRAME",
        "S-CUR",
        "S-PEER",
        "S-SUGG",
        "LOSS%",
        "RTT-ms",
        "ROUND",
        "REAL",
        "DUMMY",
        "QUEUE",
        "QDROPS"
    );
    for p in norm {
        let n = &p["normalize"];
        let _ = writeln!(
            s,
            "{:<16} {:>6} {:>9} {:>9} {:>9} {:>8.3} {:>8.1} {:>6} {:>10} {:>10} {:>7} {:>7}",
            p["name"].as_str().unwrap_or("?"),
            u(&n["frame_bytes"]),
            u(&n["s_current_kbps"]),
            u(&n["peer_suggested_kbps"]),
            u(&n["s_suggested_kbps"]),
            u(&n["last_loss_ppm"]) as f64 / 10_000.0,
            u(&n["rtt_estimate_us"]) as f64 / 1000.0,
            u(&n["round"]),
            u(&n["real_frames_sent"]),
            u(&n["dummy_frames_sent"]),
            u(&n["inner_queue_frames"]),
            u(&n["inner_drops"])
        );
    }
}

#[cfg(test)]
mod tests {
    use psp_core::SuiteId;

    use super::*;

    fn peer(extra: Value) -> Value {
        let mut p = json!({
            "name": "b", "suite": "aes128-gcm", "tx_frames": 5, "tx_bytes": 500,
            "rx_frames": 5, "rx_bytes": 500, "drops": {"bad-icv": 0}, "drops_total": 0
        });
        if let (Some(p), Some(e)) = (p.as_object_mut(), extra.as_object()) {
            p.extend(e.clone());
        }
        p
    }

    fn doc(peers: &[Value]) -> Value {
        json!({
            "interface": "psp0", "mac": "02:00:00:00:00:01", "uplink": "raw:eth1",
            "uplinks": ["raw:eth1", "raw:eth2"], "mtu": 1465,
            "paths": [{"path": 1, "uplink": "raw:eth1", "link": "up"},
                      {"path": 2, "uplink": "raw:eth2", "link": "down"}],
            "public_key": "ab".repeat(32), "uptime_ms": 1500,
            "group": {"suite": "aes128-gcm", "tx_frames": 1, "tx_bytes": 42},
            "peers": peers, "drops": {"unknown_peer": 6}, "ignored": {"not_for_us": 0},
            "drops_total": 6
        })
    }

    #[test]
    fn a_talking_peer_needs_no_hint() {
        let p = peer(json!({}));
        assert_eq!(diagnose(&p, &doc(&[])), None);
    }

    #[test]
    fn hints_name_the_likely_cause() {
        let silent = peer(json!({"rx_frames": 0}));
        let d = doc(&[]);
        let why = diagnose(&silent, &d).unwrap();
        assert!(why.starts_with("nothing received from it"), "{why}");
        assert!(
            why.contains("02:00:00:00:00:01") && why.contains("6 frame(s) came from MACs"),
            "{why}"
        );

        let icv = peer(json!({"drops": {"bad-icv": 3}}));
        assert!(
            diagnose(&icv, &d)
                .unwrap()
                .starts_with("3 frame(s) dropped as bad-icv: ")
        );

        let failing = peer(json!({"session": {
            "state": "down", "sessions": 0, "no_session": 4,
            "handshake_failures": {"timeout": 2, "too_few_paths": 0}
        }}));
        let why = diagnose(&failing, &d).unwrap();
        assert!(
            why.starts_with(
                "no session: 2 handshake(s) failed with timeout: the peer does not answer"
            ),
            "{why}"
        );

        let idle = peer(json!({"tx_frames": 0, "rx_frames": 0, "session": {
            "state": "down", "sessions": 0, "no_session": 0, "handshake_failures": {}
        }}));
        let quiet = doc(&[]);
        let mut quiet = quiet;
        quiet["group"]["tx_bytes"] = 0.into();
        assert!(
            diagnose(&idle, &quiet)
                .unwrap()
                .starts_with("no session yet: nothing was sent to it so far")
        );
        // Broadcasts went out under the group key: something was sent, and it never answered.
        let why = diagnose(&idle, &d).unwrap();
        assert!(
            why.starts_with(
                "no session yet, and nothing heard from it: 1 frame(s) went out under the group \
                 key"
            ),
            "{why}"
        );
        let heard = peer(json!({"tx_frames": 0, "rx_frames": 3, "session": {
            "state": "down", "sessions": 0, "no_session": 0, "handshake_failures": {}
        }}));
        let why = diagnose(&heard, &d).unwrap();
        assert!(
            why.starts_with("no session yet: 3 frame(s) came from it and 1 went out"),
            "{why}"
        );

        let gone = peer(json!({"name": "b", "session": {
            "state": "down", "sessions": 1, "down_s": 4, "silent_s": 25,
            "handshake_failures": {"timeout": 1}
        }}));
        assert!(
            diagnose(&gone, &d)
                .unwrap()
                .starts_with("session down 4 s ago: no frame from b for 25 s"),
            "{:?}",
            diagnose(&gone, &d)
        );
    }

    #[test]
    fn the_table_answers_the_usual_questions() {
        let up = peer(json!({"session": {
            "state": "up", "age_s": 42, "suite": "aes128-gcm", "paths": "two-path",
            "sessions": 1, "rekeys": 0, "handshake_ms": 2.5, "no_session": 0,
            "handshake_failures": {}
        }}));
        let table = render(&doc(&[up]));
        assert!(
            table.contains(&format!("public key {}\n", "ab".repeat(32))),
            "{table}"
        );
        assert!(
            table.contains("path 1 raw:eth1 (link up), path 2 raw:eth2 (link down)"),
            "{table}"
        );
        assert!(
            table.starts_with("interface psp0 (02:00:00:00:00:01)  uplinks raw:eth1, raw:eth2  "),
            "{table}"
        );
        assert!(
            table.contains("LAST-HS") && table.contains("42s ago"),
            "{table}"
        );
        assert!(!table.contains("hint b:"), "{table}");
    }

    /// The group's frames count handshake and membership messages, its bytes do not: said in
    /// the metrics' help and, with sessions, under the table.
    #[test]
    fn the_group_row_says_what_its_frames_count() {
        let snap = Snapshot {
            now: Instant::ZERO,
            uptime_ms: 0,
            host: psp_core::host::HostCounters::default(),
            io: crate::driver::IoCounters::default(),
            unknown: crate::driver::unknown::UnknownSources::default(),
            group_suite: SuiteId::Aes128Gcm,
            peers: Vec::new(),
            pacer_realtime: None,
            pacer_late: None,
            pki: None,
        };
        let mut help = None;
        host_counters(&snap, &mut |section, k| {
            if section == Section::Group && k.name == "tx_frames" {
                help = Some(k.help);
            }
        });
        assert!(
            help.is_some_and(|h| h.contains("handshake and membership messages")),
            "{help:?}"
        );
        let static_keys = render(&doc(&[peer(json!({}))]));
        assert!(!static_keys.contains(GROUP_ROW_NOTE), "{static_keys}");
        let up = peer(json!({"session": {"state": "up", "sessions": 1}}));
        let sessions = render(&doc(&[up]));
        assert!(sessions.contains(GROUP_ROW_NOTE), "{sessions}");
    }

    /// `scramble-hmac-sha1` (like `null-hmac-sha1` and `none`) is shown as giving no
    /// confidentiality, for the group, a peer and a session's negotiated suite.
    #[test]
    fn integrity_only_suites_say_no_confidentiality() {
        for id in SuiteId::ALL {
            assert_eq!(protection_gap(*id).is_some(), !id.is_confidential(), "{id}");
        }
        assert!(protection_gap(SuiteId::ScrambleHmacSha1).is_some());
        assert_eq!(protection_gap(SuiteId::Aes128Gcm), None);
        let doc = json!({
            "group": { "suite": "scramble-hmac-sha1" },
            "peers": [
                { "name": "vm2", "suite": "scramble-hmac-sha1", "drops": {} },
                { "name": "vm3", "suite": "aes128-gcm", "drops": {},
                  "session": { "suite": "null-hmac-sha1" } },
                { "name": "vm4", "suite": "aes128-gcm", "drops": {} },
            ],
            "drops": {}, "ignored": {},
        });
        let table = render(&doc);
        assert!(
            table.contains(
                "(group): suite scramble-hmac-sha1: no confidentiality (integrity only: the \
                 scrambler is read from the ciphertext alone, docs/SCRAMBLER.md)"
            ),
            "{table}"
        );
        assert!(table.contains("vm2: suite scramble-hmac-sha1: no confidentiality"));
        assert!(table.contains("vm3: suite null-hmac-sha1: no confidentiality (integrity only)"));
        assert!(!table.contains("vm4: suite"), "{table}");
    }

    #[test]
    fn each_path_shows_its_state_and_when_it_last_changed() {
        use psp_core::host::{PathMode, PathState, SessionStatus};
        let now = Instant::from_secs(100);
        let path = |up, since, downs| {
            Some(PathState {
                up,
                since: Instant::from_secs(since),
                last_heard: Some(Instant::from_secs(since)),
                downs,
            })
        };
        let st = SessionStatus {
            up: true,
            last: None,
            current: None,
            pin: None,
            handshaking: false,
            pending: 0,
            down: None,
            last_heard: None,
            paths: [path(false, 90, 2), path(true, 10, 0)],
            path_mode: PathMode::Failover,
        };
        let j = Value::Object(session_json(&st, now));
        assert_eq!(j["path_mode"], "failover");
        assert_eq!(j["links"][0]["state"], "down");
        assert_eq!(j["links"][0]["since_s"], 10);
        assert_eq!(j["links"][0]["downs"], 2);
        assert_eq!(j["links"][1]["state"], "up");
        let mut session = j.clone();
        session["sessions"] = 1.into();
        let mut out = String::new();
        render_sessions(&mut out, &[peer(json!({ "session": session }))]);
        assert!(
            out.contains("path 1 down for 10s (2 downs), path 2 up for 90s (0 downs) (failover)"),
            "{out}"
        );
        // One path: no path lines.
        let one = SessionStatus {
            paths: [path(true, 10, 0), None],
            ..st
        };
        assert!(session_json(&one, now).get("links").is_none());
    }
}
