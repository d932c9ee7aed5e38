//! # psp-core
//!
//! The sans-I/O, `no_std` core of psp, a layer-2 encryptor for networks its users do not trust:
//! the PSP frame format (EtherType 0x1982), sessions set up over one or two paths (SEP with
//! SMKEX), membership by certificate, traffic normalization and the papers' byte scrambler.
//! It does no I/O, reads no clock and owns no global RNG: callers pass bytes, the current
//! [`Instant`] and randomness in, and get bytes and events out. `psp-gateway` drives it with a
//! TAP and raw sockets; psp-test's simulator drives the same code with a virtual clock.
//!
//! ## Quick start: a session in a few lines
//!
//! [`tunnel`] is the quick path: a [`tunnel::Tunnel`] per host, configured with its MAC,
//! address, the LAN's group key and its peers; [`send`](tunnel::Tunnel::send) frames from the
//! protected side, [`receive`](tunnel::Tunnel::receive) frames from an uplink, and drain
//! [`poll`](tunnel::Tunnel::poll). The handshake, rekeys and keepalives happen inside.
//!
//! ```
//! use psp_core::handshake::{Identity, rand_core::OsRng};
//! use psp_core::tunnel::{Output, Tunnel, TunnelConfig};
//! use psp_core::Instant;
//!
//! let (a, b) = ([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]); // protected MACs
//! let (a_id, b_id) = (Identity::random(&mut OsRng)?, Identity::random(&mut OsRng)?);
//! let group_key = [7u8; 16]; // in practice from a key file (`psp-gateway keygen`)
//! let a_cfg = TunnelConfig::new(a, [10, 0, 0, 1].into(), 24, group_key).identity(&a_id);
//! let b_cfg = TunnelConfig::new(b, [10, 0, 0, 2].into(), 24, group_key).identity(&b_id);
//! // Each pins the other's Ed25519 public key (what `psp-gateway identity` prints).
//! let mut x = Tunnel::new(Instant::ZERO, a_cfg.pinned_peer(b, [10, 0, 0, 2].into(), b_id.public_key()), OsRng)?;
//! let mut y = Tunnel::new(Instant::ZERO, b_cfg.pinned_peer(a, [10, 0, 0, 1].into(), a_id.public_key()), OsRng)?;
//!
//! let hello = [&b[..], &a, &[0x88, 0xb5], b"hello"].concat(); // dst, src, EtherType, data
//! let mut buf = [0u8; 2048];
//! assert!(x.send(Instant::ZERO, &hello, &mut buf).is_none()); // waits for the session
//! let mut delivered = Vec::new();
//! for _ in 0..8 {
//!     // Carry frames both ways (a real program: sockets, and its clock for `now`).
//!     while let Some(Output::Send { path, len }) = x.poll(Instant::ZERO, &mut buf) {
//!         let _ = y.receive(Instant::ZERO, path, &mut buf[..len]);
//!     }
//!     while let Some(Output::Send { path, len }) = y.poll(Instant::ZERO, &mut buf) {
//!         delivered.extend(x.receive(Instant::ZERO, path, &mut buf[..len]).map(<[u8]>::to_vec));
//!     }
//! }
//! # let _ = delivered;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! `examples/` (crate `psp-examples`) has runnable programs for each use: `session` (the quick
//! path with two paths, 30 lines), `loopback` (sealed frames), `scramble_pair` (the
//! scrambler), `normalized` (a normalized stream).
//!
//! ## Seal and open a frame
//!
//! ```
//! use psp_core::{Instant, Opener, OpenerConfig, Sealer, SealerConfig, Seq, SuiteId, SuiteKey};
//!
//! let key = [0x42; 16]; // in practice from a key file or a key exchange
//! let suite = SuiteId::Aes128Gcm;
//! let mut sealer = Sealer::new(SuiteKey::new(suite, &key)?, Seq(1), SealerConfig::new())?;
//! let mut opener = Opener::new(SuiteKey::new(suite, &key)?, OpenerConfig::new())?;
//!
//! // An Ethernet II frame: destination MAC, source MAC, EtherType (IPv4), payload.
//! let inner = [&[2, 0, 0, 0, 0, 2][..], &[2, 0, 0, 0, 0, 1], &[0x08, 0x00], b"hello"].concat();
//! let mut out = [0u8; 1600];
//! let mut frame = sealer.seal(Instant::ZERO, &inner, &mut out)?.to_vec(); // EtherType 0x1982
//! let opened = opener.open(Instant::ZERO, &mut frame)?;
//! assert_eq!(opened.frame(), &inner[..]);
//! assert!(opener.open(Instant::ZERO, &mut frame.clone()).is_err()); // a replay is dropped
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## Layers
//!
//! From the most to the least assembled; the types above are re-exported at the crate root.
//!
//! | module | what it holds |
//! |---|---|
//! | [`tunnel`] (feature `alloc`) | the quick path: a host with sessions whose durable state is kept in memory |
//! | [`host`] (feature `alloc`) | a whole gateway without I/O: which peer a frame is for or from, sealing and opening under the group, static and session keys, when to handshake and rekey, budgets, pins, certificates, normalized streams; `handle_*` in, `poll_*` out |
//! | [`handshake`] | session establishment (SEP + SMKEX two-path key exchange), [`handshake::KeyRing`] for rekeys, [`handshake::Identity`] |
//! | [`protect`] | [`Sealer`] / [`Opener`]: whole layer-2 frames with sequence numbers, padding, replay checks |
//! | [`crypto`] | [`SuiteId`], [`SuiteKey`] (the keyed suite, batching), Ed25519 signing keys |
//! | [`wire`] | the PSP layer-2 wire format: zero-copy views (`Frame`, `Section`) and value types |
//! | [`pki`] | membership by certificate: host certificates and revocation lists signed by a network CA |
//! | [`normalize`] | traffic normalization (seed 003): rate controller, pacer, packing, endpoint |
//! | [`scramble`] | the "not-every-not-any" byte scrambler (the papers' two versions and the SIMD one) |
//! | [`replay`] | the RFC 6479-style anti-replay bitmap window |
//! | [`time`] | injected time ([`Instant`], [`Duration`], microseconds) |
//! | [`primitives`] | raw Blowfish, HMAC-SHA1 and AEAD, for benches and fuzzing only |
//!
//! Words used throughout: a *session* is the keys one handshake established between two hosts
//! (kept in a [`handshake::KeyRing`]); a *static key* is the group key or a configured pair key;
//! [`protect`] seals and opens frames under either. A session's frames carry its *key id* in
//! the thesis' security-number field (docs/SESSIONS.md).
//!
//! ## Identity keys: one kind in the API
//!
//! A host's long-term identity is an Ed25519 key, [`handshake::Identity`]: it signs group
//! frames, and [`Identity::public_key`](handshake::Identity::public_key) is what peers pin and
//! what `psp-gateway identity` prints. The handshake uses the same key's X25519 form
//! ([`Identity::static_key`](handshake::Identity::static_key)); every field that holds that
//! form says so in its name ([`handshake::Peer::pinned_x25519`]), and
//! [`handshake::Peer::pin_identity`] converts an Ed25519 public key for it.
//!
//! ## Randomness
//!
//! Every constructor that needs randomness takes a `&mut dyn rand_core::CryptoRngCore` (or an
//! owned one, [`tunnel::Tunnel`]) from **`rand_core` 0.6**, re-exported as
//! [`rand_core`] (and [`handshake::rand_core`]) so callers need not match its version. With the
//! `std` feature, `rand_core::OsRng` (the operating system's generator, through `getrandom`)
//! is available there. psp-core draws ephemeral keys, nonces, handshake ids, sequence-number
//! starts and jitter from it; nothing is drawn behind the caller's back. On a microcontroller,
//! pass the chip's TRNG (or a DRBG seeded from it) wrapped as a `CryptoRngCore`.
//!
//! ## Features
//!
//! | feature | default | effect |
//! |---|---|---|
//! | `std` | yes | implies `alloc`; [`Instant::from_std`], `rand_core::OsRng`, the system wall clock in [`tunnel::TunnelConfig::new`] |
//! | `alloc` | with `std` | [`host`] and [`tunnel`] (per-peer tables and queues need an allocator) |
//! | `ring` | yes | AES-GCM, ChaCha20-Poly1305 and Ed25519 through ring (faster on x86-64; links `alloc`; hosted targets only) |
//! | `rustcrypto` | no | the same through RustCrypto (pure Rust, no `alloc`, every target); if `ring` is also on, ring is used |
//! | `_plant`, `_fuzz` | no | private: planted bugs for the simulator's tests, a seal hook for the fuzz targets |
//!
//! At least one of `ring` and `rustcrypto` must be on (a `compile_error!` says so otherwise).
//! Both backends pass the same vectors and property tests.
//!
//! ## no_std and targets
//!
//! With `default-features = false` and one backend feature the crate is `#![no_std]` and
//! allocation-free; with `rustcrypto` alone it does not even link `alloc`, so a freestanding user
//! needs no global allocator. It builds with `rustcrypto` for `thumbv7em-none-eabihf`,
//! `thumbv6m-none-eabi`, `riscv32imac-unknown-none-elf` and `aarch64-unknown-none` (the
//! scrambler's SIMD kernels and their CPU detection exist on x86-64 only; elsewhere the portable
//! kernel runs), and its known-answer checks (crate `psp-kat`: the scrambler, a frame per suite,
//! Ed25519, a complete two-path handshake against docs/SESSIONS.md's vector) run on a Cortex-M4F
//! under QEMU and in a freestanding x86-64 binary. docs/TARGETS.md has what builds, what runs,
//! and the memory it needs.
//!
//! MSRV: 1.89 (edition 2024; AVX-512 intrinsics are stable since 1.89).
#![cfg_attr(not(feature = "std"), no_std)]

#[cfg(feature = "alloc")]
extern crate alloc;

pub mod crypto;
pub mod handshake;
#[cfg(feature = "alloc")]
pub mod host;
pub mod normalize;
pub mod pki;
pub mod plant;
pub mod primitives;
pub mod protect;
pub mod replay;
pub mod scramble;
pub mod time;
#[cfg(feature = "alloc")]
pub mod tunnel;
pub mod wire;

pub use crypto::{CryptoError, KeyError, SigningKey, SuiteId, SuiteKey, VerifyingKey};
/// The RNG traits every constructor takes (`rand_core` 0.6; see "Randomness" above).
pub use handshake::rand_core;
pub use protect::{
    ConfigError, DropReason, OpenError, Opened, Opener, OpenerConfig, SealError, SealJob, Sealer,
    SealerConfig,
};
pub use time::{Duration, Instant};
pub use wire::{Protocol, SecurityNumber, Seq};
