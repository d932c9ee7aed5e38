//! The Prometheus endpoint of a running gateway (root-only; CI runs it): two gateways in
//! namespaces, `[metrics]` on vm1 only, traffic through the tunnel, then scrapes over HTTP from
//! inside vm1's namespace. The per-peer counters must be nonzero and agree with `status
//! --json` taken just before and just after the scrape, and `promtool check metrics` (Debian's
//! `prometheus` package, installed by `testbed/install-deps.sh` when missing) must accept the
//! text format.

mod common;

use core::time::Duration;
use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::process::{Command, Stdio};

use common::{Testbed, TestbedOptions, counter, ensure_tools};

const PORT: u16 = 9582;

/// One HTTP request to `addr` from inside namespace `ns`; the whole answer (head and body).
fn http(ns: &str, addr: &str, request: &str) -> Result<String, String> {
    let (ns, addr, request) = (ns.to_owned(), addr.to_owned(), request.to_owned());
    // setns moves only the calling thread: do it on a thread of its own.
    std::thread::spawn(move || {
        psp_gateway::io::sys::enter_netns(&ns).map_err(|e| format!("enter {ns}: {e}"))?;
        let sa = addr.parse().map_err(|e| format!("{addr}: {e}"))?;
        let mut s = TcpStream::connect_timeout(&sa, Duration::from_secs(5))
            .map_err(|e| format!("connect {addr}: {e}"))?;
        s.set_read_timeout(Some(Duration::from_secs(10)))
            .map_err(|e| e.to_string())?;
        s.write_all(request.as_bytes())
            .map_err(|e| format!("send: {e}"))?;
        let mut out = Vec::new();
        s.read_to_end(&mut out)
            .map_err(|e| format!("receive: {e}"))?;
        String::from_utf8(out).map_err(|e| format!("not UTF-8: {e}"))
    })
    .join()
    .expect("scrape thread")
}

/// Splits an answer into (status line, headers, body).
fn split(answer: &str) -> (&str, &str, &str) {
    let (head, body) = answer
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("no end of head in {answer:?}"));
    let (status, headers) = head.split_once("\r\n").unwrap_or((head, ""));
    (status, headers, body)
}

/// The value of the sample `name` (with its labels, as written) in `text`.
fn sample(text: &str, name: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("no sample {name} in:\n{text}"))
        .parse()
        .unwrap_or_else(|e| panic!("sample {name}: {e}"))
}

/// Makes sure `promtool` is there (Debian's `prometheus` package, from install-deps.sh).
fn ensure_promtool() {
    ensure_tools(&["promtool"]);
}

/// `promtool check metrics` on `text`: (exit code, output).
fn promtool_check(text: &str) -> (Option<i32>, String) {
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn promtool");
    child
        .stdin
        .take()
        .expect("piped stdin")
        .write_all(text.as_bytes())
        .expect("feed promtool");
    let out = child.wait_with_output().expect("promtool output");
    (
        out.status.code(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

/// A two-host testbed with `[metrics]` added to vm1's config only.
fn testbed(opts: TestbedOptions) -> Testbed {
    ensure_promtool();
    let tb = Testbed::up(opts);
    let mut cfg = std::fs::read_to_string(tb.config_path(1)).expect("read vm1.toml");
    cfg.push_str(&format!("\n[metrics]\nlisten = \"127.0.0.1:{PORT}\"\n"));
    std::fs::write(tb.config_path(1), cfg).expect("write vm1.toml");
    tb
}

/// Asserts that `promtool check metrics` accepts `text` (exit 0), printing what it said.
fn assert_promtool_accepts(text: &str) {
    let (code, out) = promtool_check(text);
    println!("promtool check metrics: exit {code:?}, output {out:?}");
    assert_eq!(
        code,
        Some(0),
        "promtool check metrics refused the scrape:\n{out}\n{text}"
    );
}

#[test]
fn root_scrape_a_running_gateway() {
    let tb = testbed(TestbedOptions::default());
    let vm1 = tb.start(1);
    let _vm2 = tb.start(2);
    tb.ping_until_up(1, 2, Duration::from_secs(5));
    let p = tb.ping(1, 2, 10);
    assert_eq!(p.received, 10, "{p:?}");

    let ns = tb.ns("vm1");
    let local = format!("127.0.0.1:{PORT}");
    let get = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    // The network is quiet between the two status reads (IPv6 off, no pings), so the scrape's
    // values lie between them; any stray frame would too.
    let before = vm1.status_json();
    let answer = http(&ns, &local, get).unwrap_or_else(|e| panic!("scrape: {e}"));
    let after = vm1.status_json();

    let (status, headers, text) = split(&answer);
    assert_eq!(status, "HTTP/1.1 200 OK", "{answer}");
    assert!(
        headers.contains("Content-Type: text/plain; version=0.0.4; charset=utf-8"),
        "{headers}"
    );
    for key in ["tx_frames", "tx_bytes", "rx_frames", "rx_bytes"] {
        let m = sample(text, &format!("psp_peer_{key}_total{{peer=\"vm2\"}}"));
        let (lo, hi) = (
            counter(&before, &format!("peer:vm2.{key}")),
            counter(&after, &format!("peer:vm2.{key}")),
        );
        assert!(m > 0, "{key} is zero after 10 pings:\n{text}");
        assert!(
            lo <= m && m <= hi,
            "{key}: metrics say {m}, status said {lo} before and {hi} after"
        );
    }
    assert_eq!(
        sample(
            text,
            "psp_peer_drops_total{peer=\"vm2\",reason=\"bad-icv\"}"
        ),
        0
    );
    assert_eq!(sample(text, "psp_drops_total{reason=\"unknown_peer\"}"), 0);
    assert_eq!(sample(text, "psp_peers"), 1);
    assert!(
        text.contains(&format!(
            "psp_build_info{{version=\"{}\"}} 1\n",
            env!("CARGO_PKG_VERSION")
        )),
        "{text}"
    );

    assert_promtool_accepts(text);

    // Prometheus' own scraper asks for OpenMetrics.
    let answer = http(
        &ns,
        &local,
        "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\
         Accept: application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5\r\n\r\n",
    )
    .unwrap_or_else(|e| panic!("scrape: {e}"));
    let (status, headers, om) = split(&answer);
    assert_eq!(status, "HTTP/1.1 200 OK", "{answer}");
    assert!(
        headers
            .contains("Content-Type: application/openmetrics-text; version=1.0.0; charset=utf-8"),
        "{headers}"
    );
    assert!(om.contains("# TYPE psp_peer_rx_bytes counter\n"), "{om}");
    assert!(om.ends_with("# EOF\n"), "{om}");
    assert!(
        sample(om, "psp_peer_rx_frames_total{peer=\"vm2\"}")
            >= counter(&after, "peer:vm2.rx_frames")
    );

    // Anything else: 404; garbage: 400; the daemon carries on.
    let answer = http(&ns, &local, "GET / HTTP/1.1\r\n\r\n").expect("404 answer");
    assert!(answer.starts_with("HTTP/1.1 404 "), "{answer}");
    let answer = http(&ns, &local, "\u{1}\u{2} garbage\r\n\r\n").expect("400 answer");
    assert!(answer.starts_with("HTTP/1.1 400 "), "{answer}");
    // Loopback only: nothing listens on the namespace's other addresses.
    let tap = format!("{}:{PORT}", Testbed::ip(1));
    let e = http(&ns, &tap, get).expect_err("metrics must not answer on the TAP address");
    assert!(e.contains("refused"), "{e}");
    assert_eq!(tb.ping(1, 2, 3).received, 3, "the tunnel still works");

    // SIGHUP with another port: reported, and the running endpoint stays until a restart.
    let cfg = std::fs::read_to_string(tb.config_path(1)).expect("read vm1.toml");
    let moved = cfg.replace(&format!(":{PORT}\""), &format!(":{}\"", PORT + 1));
    assert_ne!(cfg, moved);
    std::fs::write(tb.config_path(1), moved).expect("write vm1.toml");
    vm1.reload();
    let start = std::time::Instant::now();
    while !vm1.log().contains("[metrics] changes need a restart") {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "no reload warning in the log:\n{}",
            vm1.log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let answer = http(&ns, &local, get).expect("the old endpoint still answers");
    assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer}");
    let moved = format!("127.0.0.1:{}", PORT + 1);
    assert!(
        http(&ns, &moved, get).is_err(),
        "nothing listens on {moved}"
    );
}

/// Every series in `names` has a sample for peer vm2 in `text`.
fn assert_vm2_series(text: &str, names: &[&str]) {
    for name in names {
        assert!(
            text.contains(&format!("\n{name}{{peer=\"vm2\"}} ")),
            "no {name}:\n{text}"
        );
    }
}

/// vm1's `/metrics` in the text format (the answer must be `200 OK`).
fn scrape_vm1(tb: &Testbed) -> String {
    let answer = http(
        &tb.ns("vm1"),
        &format!("127.0.0.1:{PORT}"),
        "GET /metrics HTTP/1.1\r\n\r\n",
    )
    .unwrap_or_else(|e| panic!("scrape: {e}"));
    let (status, _, text) = split(&answer);
    assert_eq!(status, "HTTP/1.1 200 OK", "{answer}");
    text.to_owned()
}

#[test]
fn root_scrape_normalizer_metrics() {
    const S_GOAL_KBPS: u64 = 2000;
    let tb = testbed(TestbedOptions {
        suite: "aes128-gcm".into(),
        config_extra: format!("[normalize]\nenabled = true\ns_goal_kbps = {S_GOAL_KBPS}\n"),
        ..TestbedOptions::default()
    });
    let vm1 = tb.start(1);
    let _vm2 = tb.start(2);
    tb.ping_until_up(1, 2, Duration::from_secs(10));
    let body = scrape_vm1(&tb);
    let text = body.as_str();
    assert_eq!(
        sample(text, "psp_peer_norm_goal_bytes_per_second{peer=\"vm2\"}"),
        S_GOAL_KBPS * 125
    );
    let s = vm1.status_json();
    assert_eq!(
        counter(&s, "peer:vm2.normalize.s_goal_kbps"),
        S_GOAL_KBPS,
        "{s}"
    );
    // A normalized tunnel sends all the time: these only grow.
    assert!(sample(text, "psp_peer_norm_frames_sent_total{peer=\"vm2\"}") > 0);
    assert_vm2_series(
        text,
        &[
            "psp_peer_norm_rate_bytes_per_second",
            "psp_peer_norm_loss_ratio",
            "psp_peer_norm_rtt_seconds",
            "psp_peer_norm_rounds_total",
            "psp_peer_norm_inner_drops_total",
            "psp_peer_norm_aqm_drops_total",
            "psp_peer_norm_aqm_marks_total",
        ],
    );
    assert_promtool_accepts(text);
}

#[test]
fn root_scrape_session_metrics() {
    let tb = testbed(TestbedOptions {
        suite: "aes128-gcm".into(),
        session: true,
        ..TestbedOptions::default()
    });
    let _vm1 = tb.start(1);
    let _vm2 = tb.start(2);
    tb.ping_until_up(1, 2, Duration::from_secs(10));
    let body = scrape_vm1(&tb);
    let text = body.as_str();
    assert_eq!(
        sample(text, "psp_peer_session_up{peer=\"vm2\"}"),
        1,
        "{text}"
    );
    assert_eq!(
        sample(text, "psp_peer_sessions_total{peer=\"vm2\"}"),
        1,
        "{text}"
    );
    assert_eq!(
        sample(text, "psp_peer_session_two_path{peer=\"vm2\"}"),
        0,
        "one path: {text}"
    );
    assert!(
        text.contains(
            "\npsp_peer_handshake_failures_total{peer=\"vm2\",reason=\"smkex_mismatch\"} 0"
        ),
        "{text}"
    );
    assert_vm2_series(
        text,
        &[
            "psp_peer_session_age_seconds",
            "psp_peer_handshake_seconds",
            "psp_peer_rekeys_total",
        ],
    );
    assert_promtool_accepts(text);
}
