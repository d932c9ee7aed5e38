//! Example: the quick path ([`psp_core::tunnel`]), in 30 lines. Two hosts with identities set up
//! a two-path session (SEP + SMKEX over both paths) and exchange a frame each way, in memory:
//! the caller only moves frames. `cargo run -p psp-examples --bin session` (exit 0: it worked).
use psp_core::handshake::{Identity, rand_core::OsRng};
use psp_core::tunnel::{Output, Sealed, Tunnel, TunnelConfig};

// Time is an argument: a real program passes its clock. Host n is 02:00:00:00:00:n, 10.0.0.n/24.
const T0: psp_core::Instant = psp_core::Instant::ZERO;
const MAC: fn(usize) -> [u8; 6] = |n| [2, 0, 0, 0, 0, n as u8];

/// Host `me` with identity `ids[me - 1]`, on two paths to `peer`, whose identity it pins. All
/// hosts of the LAN share the group key ([7; 16] here; from a key file in practice).
fn host(me: usize, peer: usize, ids: &[Identity]) -> Tunnel<OsRng> {
    let ip = |n: usize| [10, 0, 0, n as u8].into();
    let cfg = TunnelConfig::new(MAC(me), ip(me), 24, [7; 16]).two_paths();
    let cfg = cfg.identity(&ids[me - 1]);
    let cfg = cfg.pinned_peer(MAC(peer), ip(peer), ids[peer - 1].public_key());
    Tunnel::new(T0, cfg, OsRng).expect("a valid configuration")
}

/// Moves every frame `from` has for `to`, and the answers back; returns what was delivered.
fn carry(from: &mut Tunnel<OsRng>, to: &mut Tunnel<OsRng>) -> Vec<Vec<u8>> {
    let (mut got, mut buf) = (Vec::new(), [0u8; 2048]);
    while let Some(Output::Send { path, len }) = from.poll(T0, &mut buf) {
        got.extend(to.receive(T0, path, &mut buf[..len]).map(<[u8]>::to_vec));
        got.extend(carry(to, from));
    }
    got
}

fn main() {
    let ids = [(); 2].map(|()| Identity::random(&mut OsRng).expect("an OS RNG")); // Ed25519
    let (mut a, mut b) = (host(1, 2, &ids), host(2, 1, &ids));
    let ping = [&MAC(2)[..], &MAC(1), &[0x88, 0xb5], b"ping"].concat(); // dst, src, type, data
    let pong = [&MAC(1)[..], &MAC(2), &[0x88, 0xb5], b"pong"].concat();
    let mut buf = [0u8; 2048];
    assert!(a.send(T0, &ping, &mut buf).is_none()); // it waits for the session
    assert_eq!(carry(&mut a, &mut b), [ping]); // the handshake, then the ping
    let Sealed { path, len } = b.send(T0, &pong, &mut buf).expect("b holds the session");
    assert_eq!(a.receive(T0, path, &mut buf[..len]), Some(&pong[..]));
}
