//! Peers learnt from certificates (`[pki]`): a Request from an unknown MAC whose certificate
//! is valid makes that host a peer ([`Host::admit`]); a frame from the protected side to an
//! unknown unicast MAC makes a peer whose certificate its Accept must bring
//! ([`Host::provisional`]). Both are bounded by [`Pki::max_certified`](super::Pki).

use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use super::membership::check;
use super::{Host, Keying, Mac, Peer, PeerId, PeerSpec, Pin};
use crate::handshake::messages::{Body, CertBytes, Repr};
use crate::pki::Certificate;
use crate::pki::message::Message;
use crate::time::Instant;
use crate::wire::Protocol;

impl Host {
    /// Peers learnt from certificates now.
    pub fn certified_peers(&self) -> usize {
        self.peers.iter().filter(|p| is_certified(&p.spec)).count()
    }

    /// A frame on path 1 from `src`, which is no peer: if it is a Request or an announcement
    /// under the group key with a certificate this host takes, the host becomes a peer. `None`:
    /// not admitted (counted when a certificate was refused or the table is full).
    pub(super) fn admit(&mut self, now: Instant, src: Mac, frame: &[u8]) -> Option<PeerId> {
        let pki = self.shared.cfg.pki.as_ref()?;
        let max = pki.max_certified;
        // A full table refuses before any signature is checked (a flood of announcements
        // costs no public-key operation).
        if self.certified_peers() >= max {
            self.shared.counters.certified_full += 1;
            return None;
        }
        let (cert, addr) = self.certificate_in(now, src, frame)?;
        let f = cert.fields();
        let name_taken = self.peers.iter().any(|p| p.spec.name == f.name());
        if name_taken
            || f.macs()
                .iter()
                .any(|m| self.by_mac.contains_key(m) || *m == self.shared.cfg.mac)
        {
            self.shared.counters.cert_refused += 1;
            return None;
        }
        if self.certified_peers() >= max {
            self.shared.counters.certified_full += 1;
            return None;
        }
        let spec = PeerSpec {
            name: f.name().into(),
            macs: f.macs().to_vec(),
            keying: Keying::Session {
                pin: Pin::Certified(Some(f.public_key)),
                address: addr.or_else(|| f.addrs().first().map(|(a, _)| *a)),
            },
            paths: self.shared.cfg.paths,
            normalize: None,
        };
        let id = self.add_peer(now, spec)?;
        if let Some(s) = self.peers[id.0].session.as_deref_mut() {
            // Its frames' sources are checked against it from the first one on.
            s.cert = Some(cert);
        }
        Some(id)
    }

    /// The certificate a Request or an announcement from `src` carries, if this host takes it
    /// (valid, not revoked, naming `src`, the claimed address and the announced key) and the
    /// frame is signed by its key; and the address a Request claims. Counted `cert_refused`
    /// when a certificate was refused.
    fn certificate_in(
        &mut self,
        now: Instant,
        src: Mac,
        frame: &[u8],
    ) -> Option<(Certificate, Option<core::net::IpAddr>)> {
        let pki = self.shared.cfg.pki.as_ref()?;
        if self.shared.cfg.session.is_none() || frame.len() > self.shared.cfg.max_frame {
            return None;
        }
        // Opened on a copy, by one opener whose window starts again each time: the frame
        // itself is opened again by the peer's own opener, with its window and the signature
        // checked against the certificate's key.
        if self.admission.is_none() {
            self.admission = self
                .shared
                .group
                .spec()
                .opener("admission", self.shared.cfg.max_frame)
                .ok()
                .map(|mut o| {
                    o.set_accept_unverified(true);
                    o
                });
        }
        let opener = self.admission.as_mut()?;
        opener.restart_replay_window(0);
        self.scratch.clear();
        self.scratch.extend_from_slice(frame);
        let opened = opener.open(now, &mut self.scratch).ok()?;
        // A Request, or an announcement: the certificate, the key it must name, the address
        // the sender claims.
        let (cert, key, addr) = match opened.protocol() {
            Protocol::SessionEstablishment => {
                let repr = Repr::parse_bytes(opened.payload()).ok()?;
                match repr.body {
                    Body::Request(req) => {
                        let key = req.static_key.filter(|_| req.initiator_mac == src);
                        (req.cert, key, Some(req.initiator_addr))
                    }
                    // An Accept to a host that knows the sender only by its MAC so far.
                    Body::Accept(a) => (a.cert, a.static_key, None),
                    _ => return None,
                }
            }
            Protocol::Membership => {
                let Ok(Message::Announce { cert, .. }) = Message::parse(opened.payload()) else {
                    return None;
                };
                let key = Certificate::parse(cert).ok().and_then(|c| c.x25519());
                (CertBytes::new(cert), key, None)
            }
            _ => return None,
        };
        let unix = self.shared.wall(now).to_unix().0;
        let checked = check(
            pki,
            &self.shared.revoked,
            unix,
            cert.as_ref().map(CertBytes::as_bytes),
            &src,
            key,
            addr,
        );
        // The frame must be signed by the key the certificate names (else anyone with the
        // group key could make a peer of a certificate it copied): opened again, verified.
        let signed = checked.ok().filter(|c| {
            let Some(opener) = self.admission.as_mut() else {
                return false;
            };
            opener.restart_replay_window(0);
            opener.set_verifier(Some(crate::VerifyingKey::from_bytes(c.fields().public_key)));
            self.scratch.clear();
            self.scratch.extend_from_slice(frame);
            let ok = opener
                .open(now, &mut self.scratch)
                .is_ok_and(|o| o.signed());
            opener.set_verifier(None);
            ok
        });
        match signed {
            Some(c) => Some((c, addr)),
            None => {
                self.shared.counters.cert_refused += 1;
                None
            }
        }
    }

    /// A frame from certified peer `pid` that its pin cannot vouch for (it failed its
    /// signature check, or the peer has no pin yet): if it carries a certificate for the
    /// peer's MAC that this host takes (a renewed identity's, or the first seen), signed by
    /// that certificate's key, the peer's pin becomes that key. `true`: (re-)pinned.
    pub(super) fn recertify(&mut self, now: Instant, pid: PeerId, frame: &[u8]) -> bool {
        let Some(src) = self
            .peers
            .get(pid.0)
            .and_then(|p| p.spec.macs.first().copied())
        else {
            return false;
        };
        let Some((cert, _)) = self.certificate_in(now, src, frame) else {
            return false;
        };
        let macs_same = self.peers[pid.0]
            .spec
            .macs
            .iter()
            .all(|m| cert.fields().names_mac(m));
        match self.peers[pid.0].session.as_deref_mut() {
            Some(s) if macs_same && !s.revoked => {
                s.recertify(cert);
                true
            }
            _ => false,
        }
    }

    /// A unicast frame from the protected side to `dst`, which is no peer: with `[pki]`, `dst`
    /// becomes a peer whose Accept must bring a certificate naming it.
    pub(super) fn provisional(&mut self, now: Instant, dst: Mac) -> Option<PeerId> {
        let pki = self.shared.cfg.pki.as_ref()?;
        if self.shared.cfg.session.is_none() || dst == self.shared.cfg.mac {
            return None;
        }
        if self.certified_peers() >= pki.max_certified {
            self.shared.counters.certified_full += 1;
            return None;
        }
        let spec = PeerSpec {
            name: mac_name(&dst),
            macs: alloc::vec![dst],
            keying: Keying::Session {
                pin: Pin::Certified(None),
                address: None,
            },
            paths: self.shared.cfg.paths,
            normalize: None,
        };
        self.add_peer(now, spec)
    }

    fn add_peer(&mut self, now: Instant, spec: PeerSpec) -> Option<PeerId> {
        let id = PeerId(self.peers.len());
        let group = self.shared.group.spec().clone();
        let statics = &self.shared.statics;
        let g = &self.shared.group;
        let peer = Peer::new(id, spec, &self.shared.cfg, &group, statics, now, |k| {
            statics.overhead_of(k, g)
        })
        .ok()?;
        for m in &peer.spec.macs {
            self.by_mac.insert(*m, id);
        }
        self.peers.push(peer);
        Some(id)
    }

    /// The peers learnt from certificates, kept across a reload that leaves the group key as it
    /// was (a configured peer with one of their MACs or their name replaces them).
    pub(super) fn certified_to_keep(
        old: &mut BTreeMap<String, Peer>,
        specs: &[PeerSpec],
    ) -> Vec<Peer> {
        let names: Vec<_> = old
            .iter()
            .filter(|(_, p)| is_certified(&p.spec))
            .map(|(n, _)| n.clone())
            .collect();
        let mut kept = Vec::new();
        for n in names {
            let clash = specs.iter().any(|s| {
                s.name == n
                    || old
                        .get(&n)
                        .is_some_and(|p| p.spec.macs.iter().any(|m| s.macs.contains(m)))
            });
            if let Some(p) = old.remove(&n)
                && !clash
            {
                kept.push(p);
            }
        }
        kept
    }
}

/// Whether a peer was learnt from a certificate (it has no `[[peer]]` block).
pub(super) fn is_certified(spec: &PeerSpec) -> bool {
    matches!(
        spec.keying,
        Keying::Session {
            pin: Pin::Certified(_),
            ..
        }
    )
}

fn mac_name(m: &Mac) -> String {
    format!(
        "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
        m[0], m[1], m[2], m[3], m[4], m[5]
    )
}
