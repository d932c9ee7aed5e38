//! A snapshot of the host's counters and states, taken by the driver between batches for
//! `status` and the metrics endpoint (they render the same snapshot, and every counter in it is
//! declared once, in [`psp_core::host::counters`](psp_core::host)).

use core::net::SocketAddr;

use psp_core::crypto::SuiteId;
use psp_core::host::{
    Counter, Counters, HostCounters, Keying, NormCounters, PeerCounters, SessionStatus,
};
use psp_core::normalize;
use psp_core::time::Instant;

use super::unknown::UnknownSources;
use super::{Driver, IoCounters};
use crate::io::{TapIo, UplinkIo};

/// One peer.
#[derive(Debug, Clone)]
pub(crate) struct PeerSnap {
    pub(crate) name: String,
    pub(crate) macs: Vec<[u8; 6]>,
    pub(crate) endpoint: Option<SocketAddr>,
    /// `session`, `static-key` or `group-key`.
    pub(crate) keying: &'static str,
    /// The suite of a static key (the group's for a group-key peer).
    pub(crate) suite: SuiteId,
    pub(crate) counters: PeerCounters,
    pub(crate) session: Option<SessionStatus>,
    /// The stream's statistics and counters, and its frame size.
    pub(crate) norm: Option<(normalize::Stats, NormCounters, usize)>,
}

/// Everything `status` and the metrics show, at one instant.
#[derive(Debug, Clone)]
pub(crate) struct Snapshot {
    pub(crate) now: Instant,
    pub(crate) uptime_ms: u64,
    pub(crate) host: HostCounters,
    pub(crate) io: IoCounters,
    /// The last source MACs of frames counted `unknown_peer`.
    pub(crate) unknown: UnknownSources,
    pub(crate) group_suite: SuiteId,
    pub(crate) peers: Vec<PeerSnap>,
    /// Whether the pacer thread runs at real-time priority (`None`: no normalized peer).
    pub(crate) pacer_realtime: Option<bool>,
    /// Frames that reached the pacer thread after their slot and left late (`None`: no
    /// normalized peer).
    pub(crate) pacer_late: Option<u64>,
    /// `[pki]`: this host's certificate and the membership it knows.
    pub(crate) pki: Option<PkiSnap>,
}

/// What `status` shows of `[pki]`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PkiSnap {
    /// This host's certificate's serial.
    pub(crate) serial: u64,
    /// When it expires (Unix seconds).
    pub(crate) not_after: u64,
    /// The revocation list in force (0: none).
    pub(crate) list: u64,
    /// Peers learnt from certificates.
    pub(crate) certified: usize,
    /// The broadcast key in use: its key server, epoch and age in ms.
    pub(crate) key: Option<([u8; 6], u32, u64)>,
}

impl Counters for IoCounters {
    fn visit(&self, f: &mut dyn FnMut(Counter)) {
        for (name, help, value) in [
            (
                "tx_error",
                "Sealed frames the uplink refused to send.",
                self.tx_error,
            ),
            (
                "rx_tap_error",
                "Opened frames the TAP refused (each loses a frame, or one coalesced group).",
                self.rx_tap_error,
            ),
            (
                "io_dropped",
                "Frames the TAP reader or an uplink dropped before the host saw them (bad offload headers, datagrams longer than a slot).",
                self.io_dropped,
            ),
            (
                "pacer_dropped",
                "Frames the pacer thread's queue had no room for.",
                self.pacer_dropped,
            ),
        ] {
            f(Counter {
                name,
                label: None,
                help,
                value,
            });
        }
    }
}

impl IoCounters {
    /// Drops among these (all of them are).
    pub(crate) fn drops_total(&self) -> u64 {
        self.tx_error + self.rx_tap_error + self.io_dropped + self.pacer_dropped
    }
}

impl<T: TapIo, U: UplinkIo> Driver<T, U> {
    /// The snapshot now.
    pub(crate) fn snapshot(&self) -> Snapshot {
        let now = self.clock.now();
        let peers = self
            .host
            .peers()
            .map(|(id, spec)| {
                let (keying, suite) = match &spec.keying {
                    Keying::Session { .. } => ("session", self.host.group_suite()),
                    Keying::Static(k) => ("static-key", k.suite),
                    _ => ("group-key", self.host.group_suite()),
                };
                PeerSnap {
                    name: spec.name.clone(),
                    macs: spec.macs.clone(),
                    endpoint: self.endpoints.get(id.0).and_then(|e| e.path1),
                    keying,
                    suite,
                    counters: self.host.peer_counters(id).cloned().unwrap_or_default(),
                    session: self.host.session_status(id, now),
                    norm: self.host.norm_status(id).map(|(s, c, f)| (s, c.clone(), f)),
                }
            })
            .collect();
        Snapshot {
            now,
            uptime_ms: self.clock.uptime_ms(),
            host: self.host.counters().clone(),
            io: self.io.clone(),
            unknown: self.unknown,
            group_suite: self.host.group_suite(),
            peers,
            pacer_realtime: self.pacer_realtime(),
            pacer_late: self.pacer_late(),
            pki: self.host.config().pki.as_ref().map(|p| PkiSnap {
                serial: p.certificate.fields().serial,
                not_after: p.certificate.fields().not_after,
                list: self.host.revocation_list().number(),
                certified: self.host.certified_peers(),
                key: self
                    .host
                    .broadcast_key(now)
                    .map(|(s, e, got)| (s, e, now.saturating_since(got).total_millis())),
            }),
        }
    }
}
