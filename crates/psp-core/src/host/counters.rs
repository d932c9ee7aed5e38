//! The host's counters, declared once: each is a field with its doc comment, and
//! [`Counters::visit`] hands every one (name, label, help, value) to a renderer, so `status` and
//! the metrics endpoint list the same counters by construction.

use crate::protect::DropReason;

/// One counter as a renderer sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Counter {
    /// The counter's name (`snake_case`).
    pub name: &'static str,
    /// The label value, for a counter split by reason (`drops`, `handshake_failures`).
    pub label: Option<&'static str>,
    /// What it counts (one sentence).
    pub help: &'static str,
    /// The value.
    pub value: u64,
}

/// Something whose counters can be listed.
pub trait Counters {
    /// Calls `f` with every counter, in declaration order.
    fn visit(&self, f: &mut dyn FnMut(Counter));
}

/// Declares a counters struct: `u64` fields with their help text, and [`Counters`].
macro_rules! declare {
    ($(#[$meta:meta])* pub struct $name:ident {
        $( #[doc = $doc:literal] pub $field:ident: u64, )*
        $( [$arr_doc:literal] pub $arr:ident: [u64; $labels:expr], )*
    }) => {
        $(#[$meta])*
        #[derive(Clone, Debug, Default, PartialEq, Eq)]
        #[non_exhaustive]
        pub struct $name {
            $( #[doc = $doc] pub $field: u64, )*
            $( #[doc = $arr_doc] pub $arr: [u64; $labels.len()], )*
        }

        impl Counters for $name {
            fn visit(&self, f: &mut dyn FnMut(Counter)) {
                $( f(Counter { name: stringify!($field), label: None, help: $doc.trim_start(), value: self.$field }); )*
                $(
                    for (label, value) in $labels.iter().zip(&self.$arr) {
                        f(Counter { name: stringify!($arr), label: Some(label), help: $arr_doc, value: *value });
                    }
                )*
            }
        }
    };
}

/// Every drop reason of an opener, in counter order.
pub const DROP_REASONS: [DropReason; 14] = [
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

const DROP_LABELS: [&str; 14] = {
    let mut l = [""; 14];
    let mut i = 0;
    while i < 14 {
        l[i] = DROP_REASONS[i].as_str();
        i += 1;
    }
    l
};

/// Every handshake failure counted, in counter order: the core's [`FailReason`]s, then
/// `pin_unsaved` (a first-use pin could not be stored, so the session was refused) and
/// `install` (the key ring refused the keys).
///
/// [`FailReason`]: crate::handshake::FailReason
pub const FAIL_REASONS: [&str; 15] = [
    "smkex_mismatch",
    "confirm_mismatch",
    "timeout",
    "no_common_suite",
    "too_few_paths",
    "bad_message",
    "identity_mismatch",
    "rate_limited",
    "expiry_refused",
    "bad_share",
    "not_for_us",
    "pin_unsaved",
    "install",
    "bad_certificate",
    "kem_required",
];

declare! {
    /// Counters of one peer.
    pub struct PeerCounters {
        /// Frames sealed for the peer.
        pub tx_frames: u64,
        /// Inner bytes of those frames.
        pub tx_bytes: u64,
        /// Frames from the peer delivered to the protected side.
        pub rx_frames: u64,
        /// Inner bytes of those frames.
        pub rx_bytes: u64,
        /// Authentic sub-protocol frames (dummy, control) received and consumed.
        pub rx_sub: u64,
        /// Sessions established.
        pub sessions: u64,
        /// Sessions established while another was current (rekeys).
        pub rekeys: u64,
        /// Handshakes this host started.
        pub initiated: u64,
        /// Frames to the peer dropped for want of a session (queue full, or the handshake failed).
        pub no_session: u64,
        /// Frames from the peer under a key id of no live session.
        pub unknown_key: u64,
        /// Data under the group key that is not a genuine group payload (a session peer's data travels under session keys).
        pub group_unicast: u64,
        /// Handshake messages over the peer's budget (a flood), dropped unread.
        pub messages_limited: u64,
        /// Requests not newer than one already accepted from the peer (a replay, or a clock that went back).
        pub stale_requests: u64,
        /// Frames for the peer not sealed: the next sequence numbers of its static key were not reserved.
        pub tx_unreserved: u64,
        /// Frames from a certified peer whose source address its certificate does not name (dropped).
        pub spoofed_addr: u64,
        /// Frames from a peer whose certificate is revoked (dropped).
        pub revoked: u64,
        /// Frames of the peer that overtook an earlier one on the other path and waited for it (`paths = "both"`).
        pub reorder_held: u64,
        /// Sequence numbers the reorder buffer gave up (lost on their path, or waited for too long).
        pub reorder_gaps: u64,
        /// Frames that came after the reorder buffer gave their place up, delivered at once.
        pub reorder_late: u64,
        /// Frames delivered out of order because the reorder buffer was full.
        pub reorder_overflow: u64,
        ["Frames from the peer dropped, by reason."]
        pub drops: [u64; DROP_LABELS],
        ["Handshakes with the peer that failed, by reason."]
        pub handshake_failures: [u64; FAIL_REASONS],
    }
}

impl PeerCounters {
    /// Counts a dropped frame.
    pub fn drop_frame(&mut self, reason: DropReason) {
        // A reason added later is counted as malformed rather than lost.
        let i = DROP_REASONS.iter().position(|r| *r == reason).unwrap_or(1);
        self.drops[i] += 1;
    }

    /// Counts a handshake failure by name (an unknown name as `bad_message`).
    pub fn fail(&mut self, reason: &str) {
        let i = FAIL_REASONS.iter().position(|r| *r == reason).unwrap_or(5);
        self.handshake_failures[i] += 1;
    }

    /// All dropped frames.
    pub fn drops_total(&self) -> u64 {
        self.drops.iter().sum::<u64>() + self.spoofed_addr + self.revoked
    }
}

declare! {
    /// Counters not tied to a configured peer.
    pub struct HostCounters {
        /// Broadcast/multicast frames sealed under the group key (the caller may send several copies).
        pub group_tx_frames: u64,
        /// Inner bytes of those frames.
        pub group_tx_bytes: u64,
        /// Broadcast/multicast frames too large to go signed under the group key, sent as group copies (one per peer, counted in its tx_frames).
        pub group_copies: u64,
        /// Received PSP frames whose source MAC is no configured peer (or is our own).
        pub unknown_peer: u64,
        /// Frames too short to carry an Ethernet header, received or from the protected side.
        pub malformed: u64,
        /// Frames from the protected side to a unicast MAC that is no peer's (never sent).
        pub no_route: u64,
        /// Frames from the protected side that cannot be sealed (802.3 length frames, oversize).
        pub tx_unsupported: u64,
        /// Frames not sealed: the next sequence numbers of the group key were not reserved.
        pub tx_unreserved: u64,
        /// Frames from the protected side whose source MAC is not this host's (never sealed).
        pub spoofed_src: u64,
        /// Received PSP frames addressed to another unicast MAC on the segment (ignored).
        pub not_for_us: u64,
        /// Authentic frames on path 2 that are not handshake messages (data travels on path 1).
        pub path2_ignored: u64,
        /// Frames on path 2 a peer's opener refused.
        pub path2_drops: u64,
        /// Requests from unknown MACs whose certificate was refused (`[pki]`).
        pub cert_refused: u64,
        /// Hosts with a valid certificate not taken: `max_certified` peers learnt already.
        pub certified_full: u64,
        /// Announcements of this host's certificate sent (broadcast, or to one host that asked).
        pub announces: u64,
        /// Newer revocation lists put in force.
        pub revocations_adopted: u64,
        /// Revocation lists refused: not signed by the CA (an older or equal one is ignored, not counted).
        pub revocations_refused: u64,
        /// Broadcast keys this host made as key server.
        pub rotations: u64,
        /// Broadcast keys taken from peers.
        pub keys_taken: u64,
        /// Broadcast keys refused: not signed by a key server this host knows, or not for the group's suite.
        pub keys_refused: u64,
    }
}

impl HostCounters {
    /// Drops (not `not_for_us`, which is not an attack signal, nor the ignored path-2 frames).
    pub fn drops_total(&self) -> u64 {
        self.unknown_peer
            + self.malformed
            + self.no_route
            + self.tx_unsupported
            + self.tx_unreserved
            + self.spoofed_src
            + self.path2_drops
            + self.cert_refused
            + self.certified_full
            + self.revocations_refused
            + self.keys_refused
    }
}

#[cfg(test)]
mod tests {
    use alloc::vec::Vec;

    use super::*;

    #[test]
    fn the_drops_total_adds_every_attack_signal_and_nothing_else() {
        let c = HostCounters {
            unknown_peer: 1,
            malformed: 2,
            no_route: 4,
            tx_unsupported: 8,
            tx_unreserved: 16,
            spoofed_src: 32,
            path2_drops: 64,
            cert_refused: 128,
            certified_full: 256,
            not_for_us: 1000,
            ..HostCounters::default()
        };
        assert_eq!(c.drops_total(), 511);
    }

    #[test]
    fn every_counter_is_visited_once_with_its_help() {
        let mut c = PeerCounters::default();
        c.drop_frame(DropReason::BadIcv);
        c.fail("timeout");
        c.tx_frames = 3;
        let mut seen = Vec::new();
        c.visit(&mut |k| seen.push(k));
        assert_eq!(seen.len(), 20 + DROP_LABELS.len() + FAIL_REASONS.len());
        assert!(seen.iter().all(|k| !k.help.is_empty()));
        assert!(seen.contains(&Counter {
            name: "drops",
            label: Some("bad-icv"),
            help: "Frames from the peer dropped, by reason.",
            value: 1
        }));
        assert!(
            seen.iter().any(|k| k.name == "handshake_failures"
                && k.label == Some("timeout")
                && k.value == 1)
        );
        assert!(seen.iter().any(|k| k.name == "tx_frames" && k.value == 3));
        let mut h = Vec::new();
        HostCounters::default().visit(&mut |k| h.push(k.name));
        assert_eq!(h.len(), 20);
    }
}
