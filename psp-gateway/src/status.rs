//! The status socket: a unix stream socket the daemon owns; each connection receives one JSON
//! document (the counters) and is closed. `psp-gateway status` is the client and renders it as a
//! table or passes the JSON through.

use core::fmt::Write as _;
use std::io::Read as _;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::Arc;

use serde_json::{Map, Value, json};
use tokio::io::AsyncWriteExt as _;
use tokio::net::UnixListener;
use tokio::sync::watch;

use crate::config::format_mac;
use crate::dataplane::Shared;
use crate::dataplane::set::PeerSet;

/// Static facts about the running daemon, for the status document.
#[derive(Debug, Clone)]
pub(crate) struct Info {
    /// TAP name.
    pub(crate) interface: String,
    /// Uplink description (`raw:eth0`, `udp:0.0.0.0:5198`).
    pub(crate) uplink: String,
    /// TAP MTU.
    pub(crate) mtu: usize,
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

/// The status document.
pub(crate) fn document(info: &Info, shared: &Shared, set: &PeerSet) -> Value {
    let cfg = &set.config;
    let mut total = shared.global.drops_total();
    let peers: Vec<Value> = cfg
        .peers
        .iter()
        .zip(&set.counters)
        .enumerate()
        .map(|(i, (p, c))| {
            total += c.drops_total();
            let mut m = Map::new();
            m.insert("name".into(), p.name.clone().into());
            m.insert(
                "macs".into(),
                p.macs.iter().map(|m| format_mac(*m)).collect(),
            );
            m.insert("suite".into(), p.security.suite.name().into());
            m.insert(
                "confidentiality".into(),
                p.security.suite.is_confidential().into(),
            );
            if let Some(ep) = p.endpoint {
                m.insert("endpoint".into(), ep.to_string().into());
            }
            m.extend(c.to_json());
            if let Some(sp) = set.sessions.get(i).and_then(Option::as_deref) {
                let now_us = shared
                    .now()
                    .saturating_since(psp_core::time::Instant::ZERO)
                    .total_micros();
                total += sp.stats.no_session.get() + sp.stats.group_unicast.get();
                m.insert("session".into(), Value::Object(sp.to_json(now_us)));
            } else if set.config.session.is_some() {
                m.insert("session".into(), json!({ "state": "static-key" }));
            }
            if let Some(np) = set.norm.get(i).and_then(Option::as_deref) {
                total += np.counters.rx_drops_total();
                m.insert("normalize".into(), np.to_json());
            }
            Value::Object(m)
        })
        .collect();
    let (drops, ignored) = shared.global.to_json();
    json!({
        "interface": info.interface,
        "mac": format_mac(shared.mac),
        "uplink": info.uplink,
        "mtu": info.mtu,
        "uptime_ms": u64::try_from(shared.origin.elapsed().as_millis()).unwrap_or(u64::MAX),
        "group": {
            "suite": cfg.group.suite.name(),
            "confidentiality": cfg.group.suite.is_confidential(),
            "tx_frames": shared.global.group_tx_frames.get(),
            "tx_bytes": shared.global.group_tx_bytes.get(),
        },
        "peers": peers,
        "sessions": shared.sessions.as_ref().map(|l| json!({ "driver_dropped": l.dropped.get() })),
        "pacer_realtime": shared.pacing.is_realtime(),
        "drops": drops,
        "ignored": ignored,
        "drops_total": total,
    })
}

/// Serves the status socket until the task is aborted: one JSON document per connection.
pub(crate) async fn serve(
    listener: UnixListener,
    info: Info,
    shared: Arc<Shared>,
    set: watch::Receiver<Arc<PeerSet>>,
) {
    loop {
        let Ok((mut conn, _)) = listener.accept().await else {
            continue;
        };
        let doc = {
            let set = Arc::clone(&set.borrow());
            document(&info, &shared, &set)
        };
        let mut text = doc.to_string();
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
    let mut s = UnixStream::connect(path).map_err(|e| {
        format!(
            "status socket {}: {e} (is the daemon running?)",
            path.display()
        )
    })?;
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

/// Renders the status document as a human table.
pub(crate) fn render(doc: &Value) -> String {
    let mut s = String::new();
    let u = |v: &Value| v.as_u64().unwrap_or(0);
    let _ = writeln!(
        s,
        "interface {} ({})  uplink {}  mtu {}  up {:.1} s",
        doc["interface"].as_str().unwrap_or("?"),
        doc["mac"].as_str().unwrap_or("?"),
        doc["uplink"].as_str().unwrap_or("?"),
        u(&doc["mtu"]),
        u(&doc["uptime_ms"]) as f64 / 1000.0
    );
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
    let d = nonzero(&doc["drops"]);
    let _ = writeln!(
        s,
        "drops total {}{}{}",
        u(&doc["drops_total"]),
        if d.is_empty() { "" } else { "; other: " },
        d
    );
    let _ = writeln!(
        s,
        "ignored (not for us): {}",
        u(&doc["ignored"]["not_for_us"])
    );
    s
}

/// The normalization lines of the human table (only when a peer is normalized).
/// The session table: per session peer its state, age, suite, paths, rekeys and failures.
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
        "{:<16} {:<6} {:>8} {:<20} {:<12} {:>7} {:>9} {:>10}  FAILURES",
        "SESSION", "STATE", "AGE-s", "SUITE", "PATHS", "REKEYS", "HS-ms", "NO-SESSION"
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
            "{:<16} {:<6} {:>8} {:<20} {:<12} {:>7} {:>9.2} {:>10}  {}",
            p["name"].as_str().unwrap_or("?"),
            x["state"].as_str().unwrap_or("?"),
            x["age_s"]
                .as_u64()
                .map_or_else(|| "-".into(), |a| a.to_string()),
            x["suite"].as_str().unwrap_or("-"),
            x["paths"].as_str().unwrap_or("-"),
            u(&x["rekeys"]),
            x["handshake_ms"].as_f64().unwrap_or(0.0),
            u(&x["no_session"]),
            if fails.is_empty() { "-" } else { &fails }
        );
    }
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

    /// Issue 19: `scramble-hmac-sha1` (like `null-hmac-sha1` and `none`) is shown as giving no
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
}
