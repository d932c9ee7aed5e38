//! What the host asks the driver to persist and to log ([`Event`]): sequence-number
//! reservations and the Request clock's floor go to the state directory, first-use pins to
//! `known_peers`, sessions and failures and runtime mismatches to the log (the mismatches at
//! most once a minute per source, by the host).

use psp_core::host::{Claim, Fingerprint, HostEvent, ReplayFloor};
use psp_core::time::Instant;
use psp_core::wire::Seq;

use super::Driver;
use crate::config::format_mac;
use crate::io::{TapIo, UplinkIo};
use crate::state::{GROUP_BLOCK, REVOCATION_FILE, UNICAST_BLOCK, seq_file};

impl<T: TapIo, U: UplinkIo> Driver<T, U> {
    /// Handles every event the host has; `true` if there was one.
    pub(super) fn events(&mut self, now: Instant) -> bool {
        let mut any = false;
        while let Some(e) = self.host.poll_event() {
            any = true;
            match e {
                HostEvent::Reserve { key, group, next } => self.reserve(key, group, next),
                HostEvent::ClockFloor(floor) => {
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
                HostEvent::PinLearned { peer, key } => {
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
                HostEvent::SessionUp { peer, info } => {
                    let name = self.name(peer.0);
                    let paths = if info.two_path {
                        "two-path"
                    } else {
                        "single-path"
                    };
                    let ms = info.handshake_us as f64 / 1000.0;
                    if info.rekey {
                        tracing::debug!(peer = %name, suite = info.suite.name(), paths, kem = info.kem, role = ?info.role, handshake_ms = ms, "session rekeyed");
                    } else {
                        tracing::info!(peer = %name, suite = info.suite.name(), paths, kem = info.kem, role = ?info.role, handshake_ms = ms, "session established");
                    }
                }
                HostEvent::HandshakeStarted { peer, why } => {
                    let name = self.name(peer.0);
                    tracing::debug!(peer = %name, why, "session handshake started");
                }
                HostEvent::HandshakeFailed {
                    peer,
                    reason,
                    retry_in,
                    dropped,
                } => {
                    let name = self.name(peer.0);
                    tracing::warn!(peer = %name, reason, retry_in_ms = retry_in.total_micros() / 1000, dropped, "session handshake failed");
                }
                HostEvent::UnknownSource(mac) => {
                    tracing::warn!(
                        mac = %format_mac(mac),
                        "PSP frames from a MAC that is no [[peer]]'s: a peer's `mac =` may be wrong (status: drops.unknown_peer, the last few MACs in unknown_sources; logged once a minute per MAC)"
                    );
                }
                HostEvent::UnknownSources { count, last } => {
                    tracing::warn!(
                        count,
                        last = %format_mac(last),
                        "PSP frames from more unknown MACs than are logged one by one (64 a minute): a flood of forged sources, or a misconfigured segment (status: drops.unknown_peer; this summary at most once a minute)"
                    );
                }
                HostEvent::SessionDown { peer, silent } => {
                    let name = self.name(peer.0);
                    tracing::warn!(
                        peer = %name,
                        silent_s = silent.total_micros() / 1_000_000,
                        "session down: no frame from {name} for {} s while frames were sent to it (the peer stopped, or the path failed); frames to it wait, a new handshake starts",
                        silent.total_micros() / 1_000_000
                    );
                }
                HostEvent::ReplayFloors(floors) => self.save_floors(&floors),
                HostEvent::RevocationList { number } => {
                    let text = format!("{}\n", hex::encode(self.host.revocation_list().as_bytes()));
                    let saved = self.state.as_ref().map(|s| s.write(REVOCATION_FILE, &text));
                    if let Some(Err(e)) = saved {
                        tracing::warn!(error = %e, "revocation list not saved: a restart goes back to the configured one until a peer hands it on again");
                    }
                    tracing::info!(number, "revocation list in force (handed on to every peer)");
                }
                HostEvent::Revoked { peer, serial } => {
                    let name = self.name(peer.0);
                    tracing::warn!(peer = %name, serial, "certificate revoked: its sessions ended, its frames are dropped, no session starts again");
                }
                HostEvent::BadSignature(peer) => {
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

    /// Makes a reservation durable and tells the host. A failed write is asked for again by the
    /// host a second later ([`psp_core::host::RESERVE_RETRY`]; meanwhile the sealer stops at its old limit, frames counted
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
                    let now = self.clock.now();
                    self.host.handle_reserve_failed(now, key, group, next);
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
        self.host.handle_reserved(key, claim);
    }

    /// Writes the replay floors to the state directory (`replay-floors`); a failure is logged
    /// (the next start then refuses fewer replays).
    pub(super) fn save_floors(&self, floors: &[ReplayFloor]) {
        let Some(s) = &self.state else {
            return;
        };
        if let Err(e) = s.write("replay-floors", &crate::state::format_floors(floors)) {
            tracing::warn!(error = %e, "replay floors not saved: after a crash, frames captured since the last save could open once more");
        }
    }

    fn name(&self, i: usize) -> String {
        // A peer learnt from a certificate came after the names were taken.
        self.names
            .get(i)
            .cloned()
            .or_else(|| self.host.peers().nth(i).map(|(_, s)| s.name.clone()))
            .unwrap_or_default()
    }
}
