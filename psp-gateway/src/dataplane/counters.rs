//! Per-peer and global counters: plain relaxed atomics, each written by one task, read by
//! `status`. Counters live as long as the peer's name stays in the configuration (a reload that
//! keeps the name keeps its counters).

use core::sync::atomic::{AtomicU64, Ordering};

use psp_core::session::DropReason;
use serde_json::{Map, Value, json};

/// Every drop reason the opener reports, in a fixed order (the counter index).
pub(crate) const REASONS: [DropReason; 14] = [
    DropReason::Truncated,
    DropReason::Malformed,
    DropReason::BadVersion,
    DropReason::ReservedFlag,
    DropReason::Oversized,
    DropReason::WrongSuite,
    DropReason::Unsupported,
    DropReason::BadIcv,
    DropReason::BadSignature,
    DropReason::Replay,
    DropReason::TooOld,
    DropReason::SecurityNumber,
    DropReason::Timestamp,
    DropReason::BadPadding,
];

/// One counter, incremented by a single writer.
#[derive(Debug, Default)]
pub(crate) struct Counter(AtomicU64);

impl Counter {
    /// Adds `n`.
    #[inline]
    pub(crate) fn add(&self, n: u64) {
        self.0.fetch_add(n, Ordering::Relaxed);
    }

    /// The current value.
    pub(crate) fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// Counters of one peer (frames it sent us, frames we sent it, drops by reason).
#[derive(Debug, Default)]
pub(crate) struct PeerCounters {
    /// Frames sealed and queued for the peer.
    pub(crate) tx_frames: Counter,
    /// Inner bytes of those frames.
    pub(crate) tx_bytes: Counter,
    /// Frames from the peer delivered to the TAP.
    pub(crate) rx_frames: Counter,
    /// Inner bytes of those frames.
    pub(crate) rx_bytes: Counter,
    /// Authentic PSP sub-protocol frames (dummy, control) received and consumed.
    pub(crate) rx_sub: Counter,
    drops: [Counter; REASONS.len()],
}

impl PeerCounters {
    /// Counts a dropped frame.
    #[inline]
    pub(crate) fn drop_frame(&self, reason: DropReason) {
        // An unknown (future) reason is counted as malformed rather than lost.
        let i = REASONS.iter().position(|r| *r == reason).unwrap_or(1);
        self.drops[i].add(1);
    }

    /// Drops counted for `reason`.
    #[cfg(test)]
    pub(crate) fn drops(&self, reason: DropReason) -> u64 {
        REASONS
            .iter()
            .position(|r| *r == reason)
            .map_or(0, |i| self.drops[i].get())
    }

    /// All drops.
    pub(crate) fn drops_total(&self) -> u64 {
        self.drops.iter().map(Counter::get).sum()
    }

    /// The counters as a JSON object (`tx_frames`, …, `drops`, `drops_total`).
    pub(crate) fn to_json(&self) -> Map<String, Value> {
        let mut drops = Map::new();
        for (r, c) in REASONS.iter().zip(&self.drops) {
            drops.insert(r.as_str().into(), c.get().into());
        }
        let mut m = Map::new();
        m.insert("tx_frames".into(), self.tx_frames.get().into());
        m.insert("tx_bytes".into(), self.tx_bytes.get().into());
        m.insert("rx_frames".into(), self.rx_frames.get().into());
        m.insert("rx_bytes".into(), self.rx_bytes.get().into());
        m.insert("rx_sub".into(), self.rx_sub.get().into());
        m.insert("drops".into(), Value::Object(drops));
        m.insert("drops_total".into(), self.drops_total().into());
        m
    }
}

/// Counters not attributable to a configured peer.
#[derive(Debug, Default)]
pub(crate) struct GlobalCounters {
    /// Broadcast/multicast frames sealed under the group key (UDP: once per copy).
    pub(crate) group_tx_frames: Counter,
    /// Inner bytes of those frames.
    pub(crate) group_tx_bytes: Counter,
    /// Received PSP frames whose source MAC is no configured peer (or is our own).
    pub(crate) unknown_peer: Counter,
    /// Received frames too short to carry an Ethernet header, and TAP frames too short to seal.
    pub(crate) malformed: Counter,
    /// TAP frames to a unicast MAC that is no peer's (never sent, never in clear).
    pub(crate) no_route: Counter,
    /// TAP frames that cannot be sealed (802.3 length frames such as STP, oversize).
    pub(crate) tx_unsupported: Counter,
    /// Frames not sealed because the next sequence numbers of a static key could not be
    /// reserved in the state directory (a write failed; the sealer never repeats a number).
    pub(crate) tx_unreserved: Counter,
    /// Sealed frames the uplink refused to send.
    pub(crate) tx_error: Counter,
    /// TAP frames whose source MAC is not this host's (dropped before sealing).
    pub(crate) spoofed_src: Counter,
    /// Writes to the TAP that failed on the receive path; each loses one opened frame (or one
    /// coalesced group with offloads), and the receive task goes on.
    pub(crate) rx_tap_error: Counter,
    /// Received PSP frames addressed to another unicast MAC on the segment (ignored).
    pub(crate) not_for_us: Counter,
    /// Authentic frames on path 2 that are not handshake messages (data travels on path 1).
    pub(crate) path2_ignored: Counter,
    /// Frames on path 2 the group opener refused.
    pub(crate) path2_drops: Counter,
}

impl GlobalCounters {
    /// Receive-side and transmit-side drops (not `not_for_us`, which is not an attack signal).
    pub(crate) fn drops_total(&self) -> u64 {
        self.unknown_peer.get()
            + self.malformed.get()
            + self.no_route.get()
            + self.tx_unsupported.get()
            + self.tx_unreserved.get()
            + self.tx_error.get()
            + self.spoofed_src.get()
            + self.rx_tap_error.get()
            + self.path2_drops.get()
    }

    /// `drops` and `ignored` objects for the status JSON.
    pub(crate) fn to_json(&self) -> (Value, Value) {
        (
            json!({
                "unknown_peer": self.unknown_peer.get(),
                "malformed": self.malformed.get(),
                "no_route": self.no_route.get(),
                "tx_unsupported": self.tx_unsupported.get(),
                "tx_unreserved": self.tx_unreserved.get(),
                "tx_error": self.tx_error.get(),
                "spoofed_src": self.spoofed_src.get(),
                "rx_tap_error": self.rx_tap_error.get(),
                "path2": self.path2_drops.get(),
            }),
            json!({ "not_for_us": self.not_for_us.get(), "path2_not_handshake": self.path2_ignored.get() }),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reason_has_its_own_slot() {
        let c = PeerCounters::default();
        for (i, r) in REASONS.iter().enumerate() {
            for _ in 0..=i {
                c.drop_frame(*r);
            }
        }
        for (i, r) in REASONS.iter().enumerate() {
            assert_eq!(c.drops(*r), i as u64 + 1, "{}", r.as_str());
        }
        let j = c.to_json();
        assert_eq!(j["drops"]["bad-icv"], 8);
        assert_eq!(j["drops_total"], (1..=14).sum::<u64>());
    }
}
