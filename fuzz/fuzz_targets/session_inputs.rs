//! The session driver's own parsers never panic: the known-peers (TOFU) state file, and the
//! address taken from the first frame that waits for a session. (Handshake messages have their
//! own target, `handshake_messages`; `[session]` and `[[uplink]]` are in `config_parse`.)
#![no_main]

use libfuzzer_sys::fuzz_target;
use psp_gateway::fuzzing::{known_peers, peer_addr_from_frame};

fuzz_target!(|input: &[u8]| {
    let _ = peer_addr_from_frame(input);
    if let Ok(text) = core::str::from_utf8(input) {
        let (pins, bad) = known_peers(text);
        assert!(pins + bad.len() <= text.lines().count());
    }
});
