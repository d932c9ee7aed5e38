//! The Prometheus endpoint (`[metrics] listen`): a minimal HTTP/1.1 server answering
//! `GET /metrics` with the daemon's counters: each scrape asks the driver for a snapshot (the
//! hot path counts nothing extra).
//!
//! One scrape builds a [`Family`] list from the snapshot (the counters `status` renders,
//! declared once in psp-core's `host::counters` and placed by `status::host_counters`), then
//! encodes it in one of two formats:
//!
//! * OpenMetrics 1.0.0 through `prometheus-client`'s [`Collector`], when the request's `Accept`
//!   names `application/openmetrics-text` (Prometheus' own scraper does);
//! * the Prometheus text format 0.0.4 otherwise (curl, `promtool check metrics`, which in
//!   Debian 12's Prometheus 2.42 parses only this format).
//!
//! The server is bounded: a request head of at most [`Limits::max_request`] bytes, read within
//! [`Limits::read_timeout`], at most [`Limits::max_connections`] connections at once (more are
//! closed at once), one request per connection. Bad input gets a 4xx answer, never a panic.
//! It does not do TLS, authentication, keep-alive or request bodies; see docs/GATEWAY.md.

use core::fmt::{self, Write as _};
use core::future::Future;
use core::time::Duration;
use std::sync::Arc;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use psp_core::host::{Counter, Counters};
use tokio::sync::{mpsc, oneshot};

use crate::driver::Control;
use crate::driver::snapshot::Snapshot;

/// The content type of the OpenMetrics answer.
const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// The content type of the text-format answer.
const TEXT_004: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The exposition format of one answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Format {
    /// OpenMetrics 1.0.0 text (counter families named without `_total`, `# EOF`).
    OpenMetrics,
    /// Prometheus text format 0.0.4.
    Text,
}

/// What a metric family is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Monotonic; samples end in `_total`.
    Counter,
    /// A current value.
    Gauge,
    /// Constant labels with the value 1; the sample ends in `_info`.
    Info,
}

/// A sample value: counters are integers, rates and ratios are not.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Num {
    Int(u64),
    Float(f64),
}

impl fmt::Display for Num {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Int(v) => write!(f, "{v}"),
            Self::Float(v) if v.is_finite() => write!(f, "{v}"),
            Self::Float(v) if v.is_nan() => f.write_str("NaN"),
            Self::Float(v) if *v > 0.0 => f.write_str("+Inf"),
            Self::Float(_) => f.write_str("-Inf"),
        }
    }
}

/// One sample of a family: its labels and value.
#[derive(Debug, Clone, PartialEq)]
struct Sample {
    labels: Vec<(&'static str, String)>,
    value: Num,
}

/// One metric family: `name` is the base name (without `_total` or `_info`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Family {
    name: String,
    help: &'static str,
    kind: Kind,
    samples: Vec<Sample>,
}

impl Family {
    fn new(name: impl Into<String>, kind: Kind, help: &'static str) -> Self {
        Self {
            name: name.into(),
            help,
            kind,
            samples: Vec::new(),
        }
    }

    fn push(&mut self, labels: Vec<(&'static str, String)>, value: Num) {
        self.samples.push(Sample { labels, value });
    }

    fn with(mut self, labels: Vec<(&'static str, String)>, value: Num) -> Self {
        self.push(labels, value);
        self
    }
}

/// What a scrape reads: a snapshot the driver takes for it.
#[derive(Debug, Clone)]
pub(crate) struct Source {
    ctl: mpsc::Sender<Control>,
}

impl Source {
    /// A source asking the driver on `ctl`.
    pub(crate) fn new(ctl: mpsc::Sender<Control>) -> Self {
        Self { ctl }
    }

    /// Every family, now (none if the driver is gone).
    async fn families(&self) -> Vec<Family> {
        let (tx, rx) = oneshot::channel();
        if self.ctl.send(Control::Snapshot(tx)).await.is_err() {
            return Vec::new();
        }
        rx.await.map(|s| families(&s)).unwrap_or_default()
    }
}

/// A family per counter `c` visits, named `prefix` + its name (a labelled counter: one
/// sample per label, as `reason`), with `labels` on every sample.
fn counter_families(
    out: &mut Vec<Family>,
    prefix: &str,
    c: &dyn Counters,
    labels: &[(&'static str, String)],
) {
    c.visit(&mut |k: Counter| {
        let name = format!("{prefix}{}", k.name);
        let mut l = labels.to_vec();
        if let Some(r) = k.label {
            l.push(("reason", r.into()));
        }
        match out.iter_mut().find(|f| f.name == name) {
            Some(f) => f.push(l, Num::Int(k.value)),
            None => out.push(Family::new(name, Kind::Counter, k.help).with(l, Num::Int(k.value))),
        }
    });
}

/// Reads the snapshot into families. Every counter is declared once (psp-core's
/// `host::counters`, the driver's I/O counters) and named here after its declaration:
/// `psp_<name>` for the host's and the driver's, `psp_peer_<name>{peer}` for a peer's (with
/// `reason` for one split by reason). docs/GATEWAY.md ("Metrics") lists them.
fn families(snap: &Snapshot) -> Vec<Family> {
    use Kind::{Gauge, Info};
    let int = Num::Int;
    let mut out = vec![
        Family::new("psp_build", Info, "Build of the running psp-gateway.")
            .with(vec![("version", env!("CARGO_PKG_VERSION").into())], int(1)),
        Family::new(
            "psp_uptime_seconds",
            Gauge,
            "Seconds since the daemon started.",
        )
        .with(Vec::new(), Num::Float(snap.uptime_ms as f64 / 1000.0)),
        Family::new("psp_peers", Gauge, "Configured peers.")
            .with(Vec::new(), int(snap.peers.len() as u64)),
    ];
    crate::status::host_counters(snap, &mut |section, k| {
        use crate::status::Section;
        let (name, help, label) = match section {
            Section::Drops => (
                "psp_drops".into(),
                "Frames dropped, by reason.",
                Some(k.name),
            ),
            Section::Ignored => (
                "psp_ignored_frames".into(),
                "Frames ignored as not for this host, by reason.",
                Some(k.name),
            ),
            Section::Group => (format!("psp_group_{}", k.name), k.help, None),
            Section::Membership => (format!("psp_membership_{}", k.name), k.help, None),
        };
        let labels = label
            .map(|r| vec![("reason", r.to_string())])
            .unwrap_or_default();
        match out.iter_mut().find(|f| f.name == name) {
            Some(f) => f.push(labels, Num::Int(k.value)),
            None => {
                out.push(Family::new(name, Kind::Counter, help).with(labels, Num::Int(k.value)))
            }
        }
    });
    for p in &snap.peers {
        counter_families(
            &mut out,
            "psp_peer_",
            &p.counters,
            &[("peer", p.name.clone())],
        );
    }
    if let Some(p) = snap.pki {
        let now = crate::civil::now();
        out.push(
            Family::new(
                "psp_certificate_expiry_seconds",
                Gauge,
                "Seconds until this host's certificate expires ([pki]).",
            )
            .with(Vec::new(), int(p.not_after.saturating_sub(now))),
        );
        out.push(
            Family::new(
                "psp_revocation_list_number",
                Gauge,
                "The number of the revocation list in force (0: none).",
            )
            .with(Vec::new(), int(p.list)),
        );
        out.push(
            Family::new(
                "psp_certified_peers",
                Gauge,
                "Peers learnt from certificates ([pki]).",
            )
            .with(Vec::new(), int(p.certified as u64)),
        );
    }
    out.extend(sessions(snap));
    out.extend(normalizer(snap));
    out
}

/// The gauges of session peers (left out without any).
fn sessions(snap: &Snapshot) -> Vec<Family> {
    use Kind::Gauge;
    let mut up = Family::new(
        "psp_peer_session_up",
        Gauge,
        "1 while the peer has a session that seals.",
    );
    let mut age = Family::new(
        "psp_peer_session_age_seconds",
        Gauge,
        "Age of the newest session key.",
    );
    let mut two = Family::new(
        "psp_peer_session_two_path",
        Gauge,
        "1 if the newest session ran SMKEX over two paths, 0 if single-path SEP.",
    );
    let mut kem = Family::new(
        "psp_peer_session_kem",
        Gauge,
        "1 if the newest session's keys hold an ML-KEM-768 secret beside X25519 ([session] kem).",
    );
    let mut hs = Family::new(
        "psp_peer_handshake_seconds",
        Gauge,
        "Duration of the newest handshake.",
    );
    let mut path_up = Family::new(
        "psp_peer_path_up",
        Gauge,
        "1 while frames of the peer open on this path (two uplinks; [session] paths).",
    );
    let mut path_since = Family::new(
        "psp_peer_path_state_seconds",
        Gauge,
        "Time since the path last went up or down (or its session started).",
    );
    let mut path_downs = Family::new(
        "psp_peer_path_downs_total",
        Kind::Counter,
        "Times the path went down.",
    );
    for p in &snap.peers {
        let Some(st) = &p.session else {
            continue;
        };
        let peer = || vec![("peer", p.name.clone())];
        up.push(peer(), Num::Int(u64::from(st.up)));
        if let Some((at, info)) = st.last {
            let secs = snap.now.saturating_since(at).total_micros() as f64 / 1e6;
            age.push(peer(), Num::Float(secs));
            two.push(peer(), Num::Int(u64::from(info.two_path)));
            kem.push(peer(), Num::Int(u64::from(info.kem)));
            hs.push(peer(), Num::Float(info.handshake_us as f64 / 1e6));
        }
        if st.paths[1].is_some() {
            let name = p.name.clone();
            for (i, p) in st.paths.iter().flatten().enumerate() {
                let labels = || vec![("peer", name.clone()), ("path", (i + 1).to_string())];
                path_up.push(labels(), Num::Int(u64::from(p.up)));
                let secs = snap.now.saturating_since(p.since).total_micros() as f64 / 1e6;
                path_since.push(labels(), Num::Float(secs));
                path_downs.push(labels(), Num::Int(p.downs));
            }
        }
    }
    [up, age, two, kem, hs, path_up, path_since, path_downs]
        .into_iter()
        .filter(|f| !f.samples.is_empty())
        .collect()
}

/// The families of normalized peers (empty families are left out).
fn normalizer(snap: &Snapshot) -> Vec<Family> {
    use Kind::{Counter, Gauge};
    // (name, kind, help, status key, scale into the metric's unit: kbit/s to bytes/s is 125,
    // as promtool wants base units)
    const GAUGES: [(&str, Kind, &str, &str, f64); 6] = [
        (
            "psp_peer_norm_rate_bytes_per_second",
            Gauge,
            "Normalized sending rate S_current (outer frame bytes per second).",
            "s_current_kbps",
            125.0,
        ),
        (
            "psp_peer_norm_goal_bytes_per_second",
            Gauge,
            "Configured normalization goal S_goal (bytes per second).",
            "s_goal_kbps",
            125.0,
        ),
        (
            "psp_peer_norm_peer_suggested_bytes_per_second",
            Gauge,
            "Rate the peer last suggested to us (bytes per second).",
            "peer_suggested_kbps",
            125.0,
        ),
        (
            "psp_peer_norm_loss_ratio",
            Gauge,
            "Loss of the last measured round (0 to 1).",
            "last_loss_ppm",
            1e-6,
        ),
        (
            "psp_peer_norm_rtt_seconds",
            Gauge,
            "Smoothed round-trip time estimate.",
            "rtt_estimate_us",
            1e-6,
        ),
        (
            "psp_peer_norm_inner_queue_frames",
            Gauge,
            "Inner frames waiting in the normalizer's queue.",
            "inner_queue_frames",
            1.0,
        ),
    ];
    const COUNTERS: [(&str, Kind, &str, &str); 6] = [
        (
            "psp_peer_norm_rounds",
            Counter,
            "Measurement rounds of the rate controller.",
            "round",
        ),
        (
            "psp_peer_norm_inner_drops",
            Counter,
            "Inner frames dropped because the normalizer's queue was full.",
            "inner_drops",
        ),
        (
            "psp_peer_norm_aqm_drops",
            Counter,
            "Inner frames dropped by the normalizer queue's AQM (CoDel).",
            "aqm_drops",
        ),
        (
            "psp_peer_norm_aqm_marks",
            Counter,
            "Inner frames the normalizer queue's AQM marked ECN CE instead of dropping them.",
            "aqm_marks",
        ),
        (
            "psp_peer_norm_frames_received",
            Counter,
            "Normalized frames received from the peer.",
            "frames_received",
        ),
        (
            "psp_peer_norm_dummy_frames_sent",
            Counter,
            "Dummy frames sent to keep the normalized rate.",
            "dummy_frames_sent",
        ),
    ];
    let mut gauges: Vec<Family> = GAUGES
        .iter()
        .map(|(n, k, h, _, _)| Family::new(*n, *k, h))
        .collect();
    let mut counters: Vec<Family> = COUNTERS
        .iter()
        .map(|(n, k, h, _)| Family::new(*n, *k, h))
        .collect();
    let mut sent = Family::new(
        "psp_peer_norm_frames_sent",
        Counter,
        "Normalized frames sent to the peer (real and dummy).",
    );
    let mut rx_drops = Family::new(
        "psp_peer_norm_rx_drops",
        Counter,
        "Reassembled inner frames from the peer dropped before the TAP, by reason.",
    );
    for (p, (stats, c, frame)) in snap
        .peers
        .iter()
        .filter_map(|p| p.norm.as_ref().map(|n| (p, n)))
    {
        let j = crate::status::normalize_json(stats, c, *frame);
        let peer = || vec![("peer", p.name.clone())];
        for (fam, (_, _, _, key, scale)) in gauges.iter_mut().zip(&GAUGES) {
            if let Some(v) = j[*key].as_u64() {
                fam.push(peer(), Num::Float(v as f64 * scale));
            }
        }
        for (fam, (_, _, _, key)) in counters.iter_mut().zip(&COUNTERS) {
            if let Some(v) = j[*key].as_u64() {
                fam.push(peer(), Num::Int(v));
            }
        }
        if let Some(v) = j["frames_sent"].as_u64() {
            sent.push(peer(), Num::Int(v));
        }
        for reason in ["rx_short", "rx_not_for_us", "rx_foreign_src"] {
            if let Some(v) = j[reason].as_u64() {
                let mut labels = peer();
                labels.push(("reason", reason.trim_start_matches("rx_").into()));
                rx_drops.push(labels, Num::Int(v));
            }
        }
    }
    gauges
        .into_iter()
        .chain(counters)
        .chain([sent, rx_drops])
        .filter(|f| !f.samples.is_empty())
        .collect()
}

/// Where a scrape's families come from: the driver ([`Source`]), or fixed ones in tests.
pub(crate) trait Provide: Send + Sync + 'static {
    /// The families, now.
    fn families(&self) -> impl Future<Output = Vec<Family>> + Send;
}

impl Provide for Source {
    fn families(&self) -> impl Future<Output = Vec<Family>> + Send {
        Self::families(self)
    }
}

/// Families as a `prometheus-client` collector.
#[derive(Debug)]
struct Fams(Vec<Family>);

impl Collector for Fams {
    fn encode(&self, encoder: DescriptorEncoder<'_>) -> Result<(), fmt::Error> {
        encode_openmetrics(&self.0, encoder)
    }
}

/// `families` in `format`.
fn encode(format: Format, families: Vec<Family>) -> String {
    match format {
        Format::OpenMetrics => {
            let mut registry = Registry::default();
            registry.register_collector(Box::new(Fams(families)));
            let mut s = String::new();
            // Writing into a String only fails if a collector fails, and ours do not.
            if let Err(e) = prometheus_client::encoding::text::encode(&mut s, &registry) {
                tracing::warn!(error = %e, "metrics encoding failed");
            }
            s
        }
        Format::Text => encode_text(&families),
    }
}

/// Encodes `families` through `prometheus-client` (OpenMetrics).
fn encode_openmetrics(
    families: &[Family],
    mut encoder: DescriptorEncoder<'_>,
) -> Result<(), fmt::Error> {
    for f in families {
        let ty = match f.kind {
            Kind::Counter => MetricType::Counter,
            Kind::Gauge => MetricType::Gauge,
            Kind::Info => MetricType::Info,
        };
        let mut m = encoder.encode_descriptor(&f.name, f.help, None, ty)?;
        for s in &f.samples {
            let labels: Vec<(&str, &str)> =
                s.labels.iter().map(|(k, v)| (*k, v.as_str())).collect();
            if f.kind == Kind::Info {
                m.encode_info(&labels)?;
            } else if labels.is_empty() {
                encode_value(&mut m, f.kind, s.value)?;
            } else {
                encode_value(&mut m.encode_family(&labels)?, f.kind, s.value)?;
            }
        }
    }
    Ok(())
}

/// Encodes one counter or gauge value.
fn encode_value(m: &mut MetricEncoder<'_>, kind: Kind, value: Num) -> Result<(), fmt::Error> {
    match (kind, value) {
        (Kind::Counter, Num::Int(v)) => m.encode_counter::<NoLabelSet, _, u64>(&v, None),
        (Kind::Counter, Num::Float(v)) => m.encode_counter::<NoLabelSet, _, f64>(&v, None),
        (_, Num::Int(v)) => m.encode_gauge(&v),
        (_, Num::Float(v)) => m.encode_gauge(&v),
    }
}

/// Encodes `families` in the Prometheus text format 0.0.4.
fn encode_text(families: &[Family]) -> String {
    let mut s = String::new();
    for f in families {
        let (suffix, ty) = match f.kind {
            Kind::Counter => ("_total", "counter"),
            Kind::Gauge => ("", "gauge"),
            // 0.0.4 has no info type: the usual `_info` gauge with the value 1.
            Kind::Info => ("_info", "gauge"),
        };
        let _ = writeln!(s, "# HELP {}{suffix} {}", f.name, f.help);
        let _ = writeln!(s, "# TYPE {}{suffix} {ty}", f.name);
        for sample in &f.samples {
            s.push_str(&f.name);
            s.push_str(suffix);
            if !sample.labels.is_empty() {
                s.push('{');
                for (i, (k, v)) in sample.labels.iter().enumerate() {
                    if i > 0 {
                        s.push(',');
                    }
                    s.push_str(k);
                    s.push_str("=\"");
                    for c in v.chars() {
                        match c {
                            '\\' => s.push_str("\\\\"),
                            '"' => s.push_str("\\\""),
                            '\n' => s.push_str("\\n"),
                            c => s.push(c),
                        }
                    }
                    s.push('"');
                }
                s.push('}');
            }
            let _ = writeln!(s, " {}", sample.value);
        }
    }
    s
}

/// The server's bounds.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// The largest request head (request line and headers) read; larger gets 431.
    pub(crate) max_request: usize,
    /// Time allowed for the whole request head to arrive; slower gets 408.
    pub(crate) read_timeout: Duration,
    /// Time allowed for the answer to be taken by the client.
    pub(crate) write_timeout: Duration,
    /// Connections served at once; more are closed unanswered.
    pub(crate) max_connections: usize,
}

impl Limits {
    /// The daemon's limits: a scraper's request is a few hundred bytes and takes milliseconds.
    pub(crate) const DEFAULT: Self = Self {
        max_request: 8 * 1024,
        read_timeout: Duration::from_secs(5),
        write_timeout: Duration::from_secs(10),
        max_connections: 8,
    };
}

/// Serves `listener` until the task is aborted.
pub(crate) async fn serve<P: Provide>(listener: TcpListener, provider: Arc<P>, limits: Limits) {
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    loop {
        let conn = match listener.accept().await {
            Ok((conn, _)) => conn,
            Err(e) => {
                // Out of descriptors and the like: wait a little rather than spin.
                tracing::debug!(error = %e, "metrics accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let Ok(slot) = Arc::clone(&slots).try_acquire_owned() else {
            tracing::debug!("metrics: connection limit reached; closing a new connection");
            continue;
        };
        let provider = Arc::clone(&provider);
        tokio::spawn(async move {
            handle(conn, &*provider, &limits).await;
            drop(slot);
        });
    }
}

/// Why a request head could not be read.
#[derive(Debug, PartialEq, Eq)]
enum HeadError {
    /// Longer than the limit.
    TooLarge,
    /// The connection closed or failed first.
    Closed,
}

/// Answers one request on `conn` and closes it.
async fn handle<S: AsyncRead + AsyncWrite + Unpin, P: Provide>(
    mut conn: S,
    provider: &P,
    limits: &Limits,
) {
    let answer = match tokio::time::timeout(
        limits.read_timeout,
        read_head(&mut conn, limits.max_request),
    )
    .await
    {
        Ok(Ok(head)) => {
            let families = provider.families().await;
            answer(&head, move |f| encode(f, families))
        }
        Ok(Err(HeadError::TooLarge)) => plain(431, "Request Header Fields Too Large"),
        Ok(Err(HeadError::Closed)) => return,
        Err(_) => plain(408, "Request Timeout"),
    };
    let _ = tokio::time::timeout(limits.write_timeout, async {
        conn.write_all(&answer).await?;
        conn.shutdown().await
    })
    .await;
}

/// Reads up to the blank line ending the request head; never buffers more than `max` bytes.
async fn read_head<S: AsyncRead + Unpin>(conn: &mut S, max: usize) -> Result<Vec<u8>, HeadError> {
    let mut head = Vec::with_capacity(max.min(1024));
    let mut chunk = [0u8; 1024];
    loop {
        let room = (max + 1).saturating_sub(head.len()).min(chunk.len());
        let n = conn
            .read(&mut chunk[..room])
            .await
            .map_err(|_| HeadError::Closed)?;
        if n == 0 {
            return Err(HeadError::Closed);
        }
        // Search only where the new bytes can complete the terminator.
        let from = head.len().saturating_sub(3);
        head.extend_from_slice(&chunk[..n]);
        if let Some(end) = find_end(&head[from..]) {
            head.truncate(from + end);
            return Ok(head);
        }
        if head.len() > max {
            return Err(HeadError::TooLarge);
        }
    }
}

/// The end of the head (`\r\n\r\n`, or `\n\n` from lax clients) in `buf`, if there.
fn find_end(buf: &[u8]) -> Option<usize> {
    let crlf = buf.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4);
    let lf = buf.windows(2).position(|w| w == b"\n\n").map(|i| i + 2);
    match (crlf, lf) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// The full HTTP answer to the request head `head`.
fn answer(head: &[u8], render: impl FnOnce(Format) -> String) -> Vec<u8> {
    let Ok(text) = core::str::from_utf8(head) else {
        return plain(400, "Bad Request");
    };
    let mut lines = text.lines();
    let mut parts = lines.next().unwrap_or_default().split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return plain(400, "Bad Request");
    };
    if !version.starts_with("HTTP/1.") || !target.starts_with('/') {
        return plain(400, "Bad Request");
    }
    let path = target.split_once('?').map_or(target, |(p, _)| p);
    if path != "/metrics" {
        return plain(404, "Not Found");
    }
    let head_only = match method {
        "GET" => false,
        "HEAD" => true,
        _ => return plain(405, "Method Not Allowed"),
    };
    let openmetrics = lines.any(|l| {
        l.split_once(':').is_some_and(|(k, v)| {
            k.trim().eq_ignore_ascii_case("accept") && v.contains("application/openmetrics-text")
        })
    });
    let (format, ctype) = if openmetrics {
        (Format::OpenMetrics, OPENMETRICS)
    } else {
        (Format::Text, TEXT_004)
    };
    let body = render(format);
    let mut out = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    if !head_only {
        out.extend_from_slice(body.as_bytes());
    }
    out
}

/// A short plain-text answer with `code`.
fn plain(code: u16, reason: &str) -> Vec<u8> {
    let body = format!("{code} {reason}\n");
    let allow = if code == 405 {
        "Allow: GET, HEAD\r\n"
    } else {
        ""
    };
    format!(
        "HTTP/1.1 {code} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\n{allow}\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn families() -> Vec<Family> {
        vec![
            Family::new("psp_build", Kind::Info, "Build.")
                .with(vec![("version", "0.1.0".into())], Num::Int(1)),
            Family::new("psp_peer_rx_bytes", Kind::Counter, "Bytes.")
                .with(vec![("peer", "b\"\\\n".into())], Num::Int(7)),
            Family::new("psp_uptime_seconds", Kind::Gauge, "Up.").with(Vec::new(), Num::Float(1.5)),
        ]
    }

    /// Fixed families, served as the daemon's are.
    struct Fixed;

    impl Provide for Fixed {
        async fn families(&self) -> Vec<Family> {
            families()
        }
    }

    fn render() -> impl Fn(Format) -> String {
        |format| encode(format, families())
    }

    #[test]
    fn openmetrics_names_families_without_suffixes() {
        assert_eq!(
            render()(Format::OpenMetrics),
            "# HELP psp_build Build.\n# TYPE psp_build info\n\
             psp_build_info{version=\"0.1.0\"} 1\n\
             # HELP psp_peer_rx_bytes Bytes.\n# TYPE psp_peer_rx_bytes counter\n\
             psp_peer_rx_bytes_total{peer=\"b\\\"\\\\\\n\"} 7\n\
             # HELP psp_uptime_seconds Up.\n# TYPE psp_uptime_seconds gauge\n\
             psp_uptime_seconds 1.5\n# EOF\n"
        );
    }

    const TEST_LIMITS: Limits = Limits {
        max_request: 256,
        read_timeout: Duration::from_millis(200),
        write_timeout: Duration::from_millis(200),
        max_connections: 2,
    };

    /// Sends `request` (then keeps the connection open unless `close`) and returns the answer.
    async fn exchange(request: &[u8], close: bool) -> String {
        let (mut client, server) = tokio::io::duplex(64 * 1024);
        let server = tokio::spawn(async move { handle(server, &Fixed, &TEST_LIMITS).await });
        client.write_all(request).await.unwrap();
        if close {
            client.shutdown().await.unwrap();
        }
        let mut out = Vec::new();
        tokio::time::timeout(Duration::from_secs(5), client.read_to_end(&mut out))
            .await
            .expect("the handler answers within its limits")
            .unwrap();
        server.await.unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn text_format_escapes_labels_and_names_counters_total() {
        let t = render()(Format::Text);
        assert_eq!(
            t,
            "# HELP psp_build_info Build.\n# TYPE psp_build_info gauge\n\
             psp_build_info{version=\"0.1.0\"} 1\n\
             # HELP psp_peer_rx_bytes_total Bytes.\n# TYPE psp_peer_rx_bytes_total counter\n\
             psp_peer_rx_bytes_total{peer=\"b\\\"\\\\\\n\"} 7\n\
             # HELP psp_uptime_seconds Up.\n# TYPE psp_uptime_seconds gauge\n\
             psp_uptime_seconds 1.5\n"
        );
    }

    #[tokio::test]
    async fn get_metrics_answers_in_the_requested_format() {
        let a = exchange(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", false).await;
        assert!(a.starts_with("HTTP/1.1 200 OK\r\n"), "{a}");
        assert!(a.contains(&format!("Content-Type: {TEXT_004}\r\n")), "{a}");
        assert!(a.ends_with("psp_uptime_seconds 1.5\n"), "{a}");
        let a = exchange(
            b"GET /metrics?x=1 HTTP/1.1\r\nACCEPT: application/openmetrics-text;version=1.0.0\r\n\r\n",
            false,
        )
        .await;
        assert!(
            a.contains(&format!("Content-Type: {OPENMETRICS}\r\n")),
            "{a}"
        );
        assert!(a.ends_with("psp_uptime_seconds 1.5\n# EOF\n"), "{a}");
        let a = exchange(b"HEAD /metrics HTTP/1.0\n\n", false).await;
        assert!(
            a.starts_with("HTTP/1.1 200 OK\r\n") && a.ends_with("\r\n\r\n"),
            "{a}"
        );
    }

    #[tokio::test]
    async fn other_paths_methods_and_garbage_get_4xx() {
        let status = |a: String| a.lines().next().unwrap_or_default().to_string();
        assert_eq!(
            status(exchange(b"GET / HTTP/1.1\r\n\r\n", false).await),
            "HTTP/1.1 404 Not Found"
        );
        assert_eq!(
            status(exchange(b"POST /metrics HTTP/1.1\r\n\r\n", false).await),
            "HTTP/1.1 405 Method Not Allowed"
        );
        for garbage in [
            &b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n"[..],
            b"GET\r\n\r\n",
            b"GET /metrics\r\n\r\n",
            b"GET /metrics HTTP/1.1 extra\r\n\r\n",
            b"GET metrics HTTP/1.1\r\n\r\n",
            b"\r\n\r\n",
            b"GET /metrics SMTP/1.1\r\n\r\n",
        ] {
            assert_eq!(
                status(exchange(garbage, false).await),
                "HTTP/1.1 400 Bad Request",
                "{garbage:?}"
            );
        }
        // Closed before the head ended: nothing to answer.
        assert_eq!(exchange(b"GET /metrics HTTP/1.1\r\n", true).await, "");
    }

    #[tokio::test]
    async fn oversized_request_is_refused_without_reading_it_all() {
        // 1 MiB of header without an end: refused once the limit is passed; the rest unread.
        let mut big = b"GET /metrics HTTP/1.1\r\nX: ".to_vec();
        big.resize(1 << 20, b'a');
        let (mut client, server) = tokio::io::duplex(4096);
        let server = tokio::spawn(async move { handle(server, &Fixed, &TEST_LIMITS).await });
        // The writer blocks once the handler stops reading: write what fits, then read.
        let _ = tokio::time::timeout(Duration::from_millis(300), client.write_all(&big)).await;
        let mut out = Vec::new();
        tokio::time::timeout(Duration::from_secs(5), client.read_to_end(&mut out))
            .await
            .expect("answered")
            .unwrap();
        server.await.unwrap();
        let out = String::from_utf8(out).unwrap();
        assert!(
            out.starts_with("HTTP/1.1 431 Request Header Fields Too Large\r\n"),
            "{out}"
        );
    }

    #[tokio::test]
    async fn slow_client_times_out() {
        // Half a request, then silence (slowloris): 408 after the read timeout.
        let a = exchange(b"GET /metrics HTTP/1.1\r\nHost:", false).await;
        assert!(a.starts_with("HTTP/1.1 408 Request Timeout\r\n"), "{a}");
    }

    #[tokio::test]
    async fn connections_beyond_the_cap_are_closed_unanswered() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        // A read timeout far above the wait for the third client's close, so a loaded machine
        // cannot free a slot in between.
        let limits = Limits {
            read_timeout: Duration::from_secs(3),
            ..TEST_LIMITS
        };
        let server = tokio::spawn(serve(listener, Arc::new(Fixed), limits));
        let connect = || tokio::net::TcpStream::connect(addr);
        // Two silent clients take both slots until the read timeout answers them (408).
        let mut idle = [connect().await.unwrap(), connect().await.unwrap()];
        tokio::time::sleep(Duration::from_millis(50)).await;
        let mut third = connect().await.unwrap();
        let mut out = Vec::new();
        let n = tokio::time::timeout(Duration::from_secs(1), third.read_to_end(&mut out))
            .await
            .expect("closed at once, before the idle ones time out");
        assert!(n.is_err() || out.is_empty(), "{out:?}");
        for c in &mut idle {
            let mut out = Vec::new();
            c.read_to_end(&mut out).await.unwrap();
            assert!(out.starts_with(b"HTTP/1.1 408 "), "{out:?}");
        }
        // Slots free again: a real scrape is served.
        let mut c = connect().await.unwrap();
        c.write_all(b"GET /metrics HTTP/1.1\r\n\r\n").await.unwrap();
        let mut out = Vec::new();
        c.read_to_end(&mut out).await.unwrap();
        assert!(out.starts_with(b"HTTP/1.1 200 OK\r\n"), "{out:?}");
        server.abort();
    }

    #[test]
    fn head_end_is_found_in_either_style() {
        assert_eq!(find_end(b"GET / HTTP/1.1\r\n\r\nrest"), Some(18));
        assert_eq!(find_end(b"GET / HTTP/1.1\n\n"), Some(16));
        assert_eq!(find_end(b"GET / HTTP/1.1\r\n"), None);
    }
}
