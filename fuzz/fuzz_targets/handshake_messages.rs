//! Handshake messages: parsing never panics, and whatever parses re-emits to the same bytes
//! (one encoding per message, which the transcript hash relies on). The bytes are also fed to a
//! responder (stage 1) and to an initiator waiting for its peer, which must never panic either.
#![no_main]

use libfuzzer_sys::fuzz_target;
use psp_core::handshake::messages::{MAX_MESSAGE_LEN, Message, Repr};
use psp_core::handshake::rand_core::{self, CryptoRng, RngCore};
use psp_core::handshake::{Config, Handshake, PathId, Peer};
use psp_core::time::Instant;

struct CountingRng(u64);

impl RngCore for CountingRng {
    fn next_u32(&mut self) -> u32 {
        self.next_u64() as u32
    }
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        self.0
    }
    fn fill_bytes(&mut self, dest: &mut [u8]) {
        for b in dest {
            *b = self.next_u64() as u8;
        }
    }
    fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), rand_core::Error> {
        self.fill_bytes(dest);
        Ok(())
    }
}
impl CryptoRng for CountingRng {}

fuzz_target!(|data: &[u8]| {
    if let Ok(m) = Message::new_checked(data) {
        let _ = (
            m.version(),
            m.message_type(),
            m.initiator_id(),
            m.responder_id(),
            m.body(),
        );
    }
    if let Ok(repr) = Repr::parse_bytes(data) {
        let mut buf = [0u8; MAX_MESSAGE_LEN];
        let n = repr.emit(&mut buf);
        assert_eq!(&buf[..n], data, "parse/emit is not canonical");
    }
    let ip = |x| core::net::IpAddr::V4(core::net::Ipv4Addr::new(10, 0, 0, x));
    let mut rng = CountingRng(1);
    let peer = Peer {
        mac: [2, 0, 0, 0, 0, 1],
        addr: ip(1),
        pinned_x25519: None,
    };
    let path = PathId(data.first().copied().unwrap_or(0) & 1);
    if let Ok(mut hs) = Handshake::respond(
        Instant::ZERO,
        Config::new([2, 0, 0, 0, 0, 2], ip(2), 24),
        peer,
        path,
        data,
        &mut rng,
    ) {
        let mut buf = [0u8; MAX_MESSAGE_LEN];
        while hs.poll_transmit(Instant::ZERO, &mut buf).is_some() {}
        let _ = hs.handle_message(Instant::ZERO, path, data);
    }
    let peer_b = Peer {
        mac: [2, 0, 0, 0, 0, 2],
        addr: ip(2),
        pinned_x25519: None,
    };
    let mut init = Handshake::initiate(
        Instant::ZERO,
        Config::new([2, 0, 0, 0, 0, 1], ip(1), 24),
        peer_b,
        psp_core::handshake::Tai64n::from_unix(1, 0),
        &mut rng,
    );
    let _ = init.handle_message(Instant::ZERO, path, data);
    init.handle_timeout(Instant::from_secs(100));
    let _ = init.poll_event();
});
