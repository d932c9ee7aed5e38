//! What the host asks the driver to persist and to log ([`Event`]): sequence-number
//! reservations and the Request clock's floor go to the state directory, first-use pins to
//! `known_peers`, sessions and failures and runtime mismatches to the log (the mismatches at
//! most once a minute per source, by the host).

use psp_core::host::{Claim, Event, Fingerprint};
use psp_core::time::Instant;
use psp_core::wire::Seq;

use super::Driver;
use crate::config::format_mac;
use crate::io::{TapIo, UplinkIo};
use crate::state::{GROUP_BLOCK, UNICAST_BLOCK, seq_file};

/// How often a reservation the state directory refused is tried again.
pub(super) const RESERVE_RETRY: psp_core::time::Duration = psp_core::time::Duration::from_secs(1);

impl<T: TapIo, U: UplinkIo> Driver<T, U> {
    /// Handles every event the host has; `true` if there was one.
    pub(super) fn events(&mut self, now: Instant) -> bool {
        let mut any = false;
        while let Some(e) = self.host.poll_event() {
            any = true;
            match e {
                Event::Reserve { key, group, next } => self.reserve(key, group, next),
                Event::ClockFloor(floor) => {
                    let saved = match &self.state {
                        Some(s) => s
                            .write("request-clock", &format!("{}\n", hex::encode(floor.0)))
                            .map_err(
                                |e| tracing::warn!(error = %e, "request clock: floor not saved"),
                            )
                            .is_ok(),
                        None => true,
                    };
                    self.host.handle_clock_floor_saved(floor, saved);
                }
                Event::PinLearned { peer, key } => {
                    let name = self.name(peer.0);
                    let saved = match self.tofu.as_mut() {
                        Some(t) => t.pin(&name, key).map_err(|e| {
                            tracing::error!(peer = %name, error = %e, "known_peers: cannot write the first-use pin; session refused");
                        }),
                        None => Err(()),
                    };
                    if saved.is_ok() {
                        tracing::info!(peer = %name, identity = %hex::encode(key), "peer identity pinned (first use)");
                    }
                    self.host
                        .handle_pin_saved(now, peer, saved.is_ok(), &mut *self.rng);
                }
                Event::SessionUp { peer, info } => {
                    let name = self.name(peer.0);
                    let paths = if info.two_path {
                        "two-path"
                    } else {
                        "single-path"
                    };
                    let ms = info.handshake_us as f64 / 1000.0;
                    if info.rekey {
                        tracing::debug!(peer = %name, suite = info.suite.name(), paths, role = ?info.role, handshake_ms = ms, "session rekeyed");
                    } else {
                        tracing::info!(peer = %name, suite = info.suite.name(), paths, role = ?info.role, handshake_ms = ms, "session established");
                    }
                }
                Event::HandshakeStarted { peer, why } => {
                    let name = self.name(peer.0);
                    tracing::debug!(peer = %name, why, "session handshake started");
                }
                Event::HandshakeFailed {
                    peer,
                    reason,
                    retry_in,
                    dropped,
                } => {
                    let name = self.name(peer.0);
                    tracing::warn!(peer = %name, reason, retry_in_ms = retry_in.total_micros() / 1000, dropped, "session handshake failed");
                }
                Event::UnknownSource(mac) => {
                    tracing::warn!(
                        mac = %format_mac(mac),
                        "PSP frames from a MAC that is no [[peer]]'s: a peer's `mac =` may be wrong (status: drops.unknown_peer; logged once a minute per MAC)"
                    );
                }
                Event::BadSignature(peer) => {
                    let name = self.name(peer.0);
                    tracing::warn!(
                        peer = %name,
                        "the peer's frames fail their signature check: its `identity =` may be wrong (`psp-gateway pubkey` on it prints the right one), or someone forges frames in its name (logged once a minute)"
                    );
                }
                _ => {}
            }
        }
        any
    }

    /// Makes a reservation durable and tells the host. A failed write is tried again every
    /// [`RESERVE_RETRY`] (meanwhile the sealer stops at its old limit, frames counted
    /// `tx_unreserved`); it is logged once per key when it starts failing, and once when it
    /// succeeds again ([`StateDir::set_refused`](crate::state::StateDir::set_refused)), not at
    /// every retry.
    pub(super) fn reserve(&mut self, key: Fingerprint, group: bool, next: Option<Seq>) {
        let block = if group { GROUP_BLOCK } else { UNICAST_BLOCK };
        let claim = match &self.state {
            Some(s) => match s.claim(key, block, next) {
                Ok(c) => {
                    if s.set_refused(key, false) {
                        tracing::info!(file = %seq_file(key), "sequence numbers reserved again: frames under this key go on");
                    }
                    c
                }
                Err(e) => {
                    if s.set_refused(key, true) {
                        tracing::error!(error = %e, "sequence numbers not reserved: frames under this key stop until the state directory is writable (tried again every second; logged again when it works)");
                    }
                    if !self.unreserved.iter().any(|u| u.0 == key) {
                        self.unreserved.push((key, group, next));
                    }
                    return;
                }
            },
            // Tests without a state directory: numbers from 0, never persisted.
            None => {
                let from = next.map_or(0, |n| n.0);
                Claim {
                    from: Seq(from),
                    limit: Seq(from.saturating_add(block)),
                }
            }
        };
        self.unreserved.retain(|u| u.0 != key);
        self.host.handle_reserved(key, claim);
    }

    fn name(&self, i: usize) -> String {
        self.names.get(i).cloned().unwrap_or_default()
    }
}
