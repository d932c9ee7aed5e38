//! The membership messages (PSP sub-protocol 0x0007, docs/MEMBERSHIP.md): one type byte, then
//! the body.
//!
//! ```text
//! 0x01 announce     (group key, signed)  flags(1: 0x01 answer wanted) | list number(8)
//!                                        | key server MAC(6) | key epoch(4) | length(2) | certificate
//! 0x02 revocation   (session key)        the revocation list's bytes
//! 0x03 state        (session key)        list number(8) | key server MAC(6) | key epoch(4)
//! 0x04 broadcast key (session key)       key server MAC(6) | priority(1) | epoch(4) | key id(3)
//!                                        | suite(1) | use in ms(4) | length(1) | key | signature(64)
//! ```
//!
//! A broadcast key's signature is the key server's (its certificate's key) over
//! SHA-256("psp-bkey-v1" || every byte of the body before `use in ms` || the key): any member
//! may hand it on, none can forge it.
//!
//! [`Message::parse`] never panics and checks every length; [`Message::emit`] writes exactly
//! [`Message::buffer_len`] bytes.

use super::{MAX_CERT_LEN, MAX_CRL_LEN, PkiError};

/// The longest membership message (an announce with the longest certificate).
pub const MAX_MESSAGE_LEN: usize = 1 + 1 + 8 + 6 + 4 + 2 + MAX_CERT_LEN;

const ANNOUNCE: u8 = 1;
const REVOCATION: u8 = 2;
const STATE: u8 = 3;
const BROADCAST_KEY: u8 = 4;
/// The longest broadcast key.
pub const MAX_KEY_LEN: usize = 32;
const ANSWER: u8 = 0x01;

/// What a member holds: its revocation list's number and its broadcast key (the key server's
/// MAC and the key's epoch; zeros for none).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Holding {
    /// The number of the revocation list in force (0: none).
    pub list: u64,
    /// The MAC of the key server whose broadcast key it holds (zeros: none).
    pub key_server: [u8; 6],
    /// That key's epoch.
    pub key_epoch: u32,
}

/// One membership message (borrowing the bytes it carries).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Message<'a> {
    /// A host's certificate and what it holds, to every host (broadcast) or one (an answer).
    Announce {
        /// The sender asks every host that did not know it to announce itself to it.
        answer_wanted: bool,
        /// What the sender holds.
        holding: Holding,
        /// Its certificate.
        cert: &'a [u8],
    },
    /// A revocation list, handed on over a session.
    Revocation(&'a [u8]),
    /// What the sender holds, over a session (sent when one is established).
    State(Holding),
    /// A broadcast key from the key server, over a session.
    BroadcastKey(KeyMessage<'a>),
}

/// A broadcast key as the key server made it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyMessage<'a> {
    /// The key server's MAC.
    pub server: [u8; 6],
    /// Its key-server priority (its certificate's).
    pub priority: u8,
    /// The key's epoch (the server's clock, in seconds, when it made it; increasing).
    pub epoch: u32,
    /// The key id its frames carry in the security-number field (24 bits, non-zero).
    pub key_id: u32,
    /// The suite's wire code.
    pub suite: u8,
    /// Members start sealing under it this long after they received it.
    pub use_in_ms: u32,
    /// The key.
    pub key: &'a [u8],
    /// The key server's signature.
    pub sig: [u8; 64],
}

impl KeyMessage<'_> {
    /// What the key server signs.
    pub fn signed_digest(&self) -> [u8; 32] {
        use sha2::Digest as _;
        let mut h = sha2::Sha256::new();
        h.update(b"psp-bkey-v1");
        h.update(self.server);
        h.update([self.priority]);
        h.update(self.epoch.to_be_bytes());
        h.update(&self.key_id.to_be_bytes()[1..]);
        h.update([self.suite]);
        h.update(self.key);
        h.finalize().into()
    }
}

impl<'a> Message<'a> {
    /// Parses a message.
    ///
    /// # Errors
    /// [`PkiError::Length`] for a short or long message or a certificate length out of range,
    /// [`PkiError::Kind`] for an unknown type, [`PkiError::Field`] for unknown flags.
    pub fn parse(b: &'a [u8]) -> Result<Self, PkiError> {
        let (&ty, body) = b.split_first().ok_or(PkiError::Length)?;
        match ty {
            ANNOUNCE => {
                if body.len() < 21 {
                    return Err(PkiError::Length);
                }
                let flags = body[0];
                if flags & !ANSWER != 0 {
                    return Err(PkiError::Field);
                }
                let holding = holding(&body[1..19]);
                let n = usize::from(u16::from_be_bytes([body[19], body[20]]));
                let cert = &body[21..];
                if n == 0 || n > MAX_CERT_LEN || cert.len() != n {
                    return Err(PkiError::Length);
                }
                Ok(Self::Announce {
                    answer_wanted: flags & ANSWER != 0,
                    holding,
                    cert,
                })
            }
            REVOCATION => {
                if body.is_empty() || body.len() > MAX_CRL_LEN {
                    return Err(PkiError::Length);
                }
                Ok(Self::Revocation(body))
            }
            STATE => {
                if body.len() != 18 {
                    return Err(PkiError::Length);
                }
                Ok(Self::State(holding(body)))
            }
            BROADCAST_KEY => {
                if body.len() < 20 {
                    return Err(PkiError::Length);
                }
                let n = usize::from(body[19]);
                if n == 0 || n > MAX_KEY_LEN || body.len() != 20 + n + 64 {
                    return Err(PkiError::Length);
                }
                let key_id = u32::from_be_bytes([0, body[11], body[12], body[13]]);
                if key_id == 0 {
                    return Err(PkiError::Field);
                }
                let mut server = [0u8; 6];
                server.copy_from_slice(&body[..6]);
                let mut sig = [0u8; 64];
                sig.copy_from_slice(&body[20 + n..]);
                Ok(Self::BroadcastKey(KeyMessage {
                    server,
                    priority: body[6],
                    epoch: u32::from_be_bytes([body[7], body[8], body[9], body[10]]),
                    key_id,
                    suite: body[14],
                    use_in_ms: u32::from_be_bytes([body[15], body[16], body[17], body[18]]),
                    key: &body[20..20 + n],
                    sig,
                }))
            }
            _ => Err(PkiError::Kind),
        }
    }

    /// The encoded length.
    pub fn buffer_len(&self) -> usize {
        1 + match self {
            Self::Announce { cert, .. } => 21 + cert.len(),
            Self::Revocation(l) => l.len(),
            Self::State(_) => 18,
            Self::BroadcastKey(k) => 20 + k.key.len() + 64,
        }
    }

    /// Writes the message at the start of `buf`; its length.
    ///
    /// # Panics
    /// If `buf` is shorter than [`buffer_len`](Self::buffer_len).
    pub fn emit(&self, buf: &mut [u8]) -> usize {
        let n = self.buffer_len();
        let out = &mut buf[..n];
        match self {
            Self::Announce {
                answer_wanted,
                holding: h,
                cert,
            } => {
                out[0] = ANNOUNCE;
                out[1] = if *answer_wanted { ANSWER } else { 0 };
                put_holding(&mut out[2..20], h);
                out[20..22].copy_from_slice(&(cert.len() as u16).to_be_bytes());
                out[22..].copy_from_slice(cert);
            }
            Self::Revocation(l) => {
                out[0] = REVOCATION;
                out[1..].copy_from_slice(l);
            }
            Self::State(h) => {
                out[0] = STATE;
                put_holding(&mut out[1..], h);
            }
            Self::BroadcastKey(k) => {
                out[0] = BROADCAST_KEY;
                out[1..7].copy_from_slice(&k.server);
                out[7] = k.priority;
                out[8..12].copy_from_slice(&k.epoch.to_be_bytes());
                out[12..15].copy_from_slice(&k.key_id.to_be_bytes()[1..]);
                out[15] = k.suite;
                out[16..20].copy_from_slice(&k.use_in_ms.to_be_bytes());
                out[20] = k.key.len() as u8;
                let n = k.key.len();
                out[21..21 + n].copy_from_slice(k.key);
                out[21 + n..].copy_from_slice(&k.sig);
            }
        }
        n
    }
}

fn holding(b: &[u8]) -> Holding {
    let mut list = [0u8; 8];
    list.copy_from_slice(&b[..8]);
    let mut key_server = [0u8; 6];
    key_server.copy_from_slice(&b[8..14]);
    Holding {
        list: u64::from_be_bytes(list),
        key_server,
        key_epoch: u32::from_be_bytes([b[14], b[15], b[16], b[17]]),
    }
}

fn put_holding(out: &mut [u8], h: &Holding) {
    out[..8].copy_from_slice(&h.list.to_be_bytes());
    out[8..14].copy_from_slice(&h.key_server);
    out[14..18].copy_from_slice(&h.key_epoch.to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    const H: Holding = Holding {
        list: 0x0102_0304_0506_0708,
        key_server: [2, 0, 0, 0, 0, 9],
        key_epoch: 0x0a0b_0c0d,
    };

    /// The vectors docs/MEMBERSHIP.md prints.
    #[test]
    fn known_answers_and_round_trips() {
        let cert = [0xc0, 0xc1, 0xc2];
        let key = [0x11u8; 16];
        let bk = KeyMessage {
            server: [2, 0, 0, 0, 0, 1],
            priority: 7,
            epoch: 0x6b49_d200,
            key_id: 0x0a_0b0c,
            suite: 3,
            use_in_ms: 2000,
            key: &key,
            sig: [0x5a; 64],
        };
        let cases: [(Message<'_>, &str); 4] = [
            (
                Message::Announce {
                    answer_wanted: true,
                    holding: H,
                    cert: &cert,
                },
                "01010102030405060708020000000009 0a0b0c0d0003c0c1c2",
            ),
            (Message::Revocation(&[7, 8]), "020708"),
            (Message::State(H), "030102030405060708020000000009 0a0b0c0d"),
            (
                Message::BroadcastKey(bk),
                "04020000000001076b49d2000a0b0c03000007d010 11111111111111111111111111111111 SIG",
            ),
        ];
        for (m, hex_text) in cases {
            let mut buf = [0u8; MAX_MESSAGE_LEN];
            let n = m.emit(&mut buf);
            let sig = hex::encode([0x5a; 64]);
            assert_eq!(
                hex::encode(&buf[..n]),
                hex_text.replace(' ', "").replace("SIG", &sig)
            );
            assert_eq!(Message::parse(&buf[..n]), Ok(m));
            // Every cut is refused (a list's length is its message's: only the empty one is).
            let cuts = if matches!(m, Message::Revocation(_)) {
                0..2
            } else {
                0..n
            };
            for cut in cuts {
                assert!(Message::parse(&buf[..cut]).is_err(), "{cut}");
            }
        }
    }

    #[test]
    fn refuses_what_is_not_a_message() {
        assert_eq!(Message::parse(&[]), Err(PkiError::Length));
        assert_eq!(Message::parse(&[9]), Err(PkiError::Kind));
        assert_eq!(Message::parse(&[2]), Err(PkiError::Length));
        let mut state = [0u8; 20];
        state[0] = 3;
        assert_eq!(Message::parse(&state), Err(PkiError::Length));
        let mut ann = [0u8; 23];
        ann[0] = 1;
        ann[1] = 2;
        assert_eq!(Message::parse(&ann), Err(PkiError::Field));
        ann[1] = 0;
        ann[21] = 0;
        ann[22] = 0;
        assert_eq!(Message::parse(&ann[..22]), Err(PkiError::Length));
        ann[22] = 2;
        assert_eq!(Message::parse(&ann), Err(PkiError::Length));
        let long = [2u8; MAX_CRL_LEN + 2];
        assert_eq!(Message::parse(&long), Err(PkiError::Length));
    }
}
