//! Example: two hosts share a key; A scrambles a stream, B descrambles it, in arbitrary chunks.
//!
//! ```sh
//! cargo run -p psp-examples --bin scramble_pair
//! ```
//!
//! The scrambler is obfuscation for multipath transport, not encryption: see docs/SCRAMBLER.md.

use psp_core::scramble::{Descrambler, Kernel, Scrambler, Seed};

fn main() {
    let key = b"example key shared by A and B";
    let seed = Seed::from_key(key);
    let mut a_send = Scrambler::new(&seed);
    let mut b_recv = Descrambler::new(&seed);

    let message = b"GET /index.html HTTP/1.1\r\nHost: example.org\r\n\r\n".repeat(3);
    let mut wire = message.clone();
    // Any split of the stream gives the same bytes on the wire.
    let (first, rest) = wire.split_at_mut(17);
    a_send.scramble_in_place(first);
    a_send.scramble_in_place(rest);

    let mut received = wire.clone();
    b_recv.descramble_in_place(&mut received);

    println!("kernel:     {}", Kernel::detect().name());
    println!("plain:      {}", hex::encode(&message[..32]));
    println!("scrambled:  {}", hex::encode(&wire[..32]));
    println!("recovered:  {}", hex::encode(&received[..32]));
    assert_eq!(received, message);
    println!("round trip ok ({} bytes)", message.len());
}
