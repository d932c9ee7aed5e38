//! # psp-core
//!
//! The sans-I/O, `no_std` core of psp: every piece of protocol logic, with no sockets, threads,
//! clock reads or global RNG. Callers pass bytes, the current [`time::Instant`] and randomness in;
//! they get bytes and events out.
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
//! The types above are re-exported at the crate root; the modules hold the rest:
//!
//! | module | what it holds |
//! |---|---|
//! | [`protect`] | [`Sealer`] / [`Opener`]: whole layer-2 frames with sequence numbers, padding, replay checks |
//! | [`handshake`] | session establishment (SEP + SMKEX two-path key exchange), [`handshake::KeyRing`] for rekeys |
//! | [`host`] (feature `alloc`) | a whole gateway without I/O: which peer a frame is for or from, sealing and opening under the group, static and session keys, when to handshake and rekey, budgets, pins, normalized streams; `handle_*` in, `poll_*` out |
//! | [`crypto`] | [`SuiteId`], [`SuiteKey`] (the keyed suite, batching), Ed25519 signing keys |
//! | [`wire`] | the PSP layer-2 wire format: zero-copy views (`Frame`, `Section`) and value types |
//! | [`replay`] | the RFC 6479-style anti-replay bitmap window |
//! | [`scramble`] | the "not-every-not-any" byte scrambler (the papers' two versions and the SIMD one) |
//! | [`normalize`] | traffic normalization (seed 003): rate controller, pacer, packing, endpoint |
//! | [`pki`] | membership by certificate: host certificates and revocation lists signed by a network CA |
//! | [`time`] | injected time ([`Instant`], [`Duration`], microseconds) |
//! | [`primitives`] | raw Blowfish, HMAC-SHA1 and AEAD, for benches and fuzzing only |
//!
//! It does *not* do I/O (the `psp-gateway` crate drives [`host`]) or key exchange transport.
//!
//! Words used throughout: a *session* is the keys one handshake established between two hosts
//! (kept in a [`handshake::KeyRing`]); a *static key* is the group key or a configured pair key;
//! [`protect`] seals and opens frames under either. A session's frames carry its *key id* in
//! the thesis' security-number field (docs/SESSIONS.md).
//!
//! ## Features
//!
//! | feature | default | effect |
//! |---|---|---|
//! | `std` | yes | [`Instant::from_std`] (a `std::time::Instant` measured from an origin) |
//! | `ring` | yes | AES-GCM, ChaCha20-Poly1305 and Ed25519 through ring (faster; links `alloc`) |
//! | `rustcrypto` | no | the same through RustCrypto (pure Rust, no `alloc`); if `ring` is also on, ring is used |
//!
//! At least one of `ring` and `rustcrypto` must be on (a `compile_error!` says so otherwise).
//! Both backends pass the same vectors and property tests.
//!
//! ## no_std
//!
//! With `default-features = false` and one backend feature the crate is `#![no_std]` and
//! allocation-free; with `rustcrypto` alone it does not even link `alloc`, so a freestanding user
//! needs no global allocator. CI proves this by linking a freestanding `#![no_std] #![no_main]`
//! static binary (`crates/psp-nostd-proof`) once per backend (the rustcrypto one with no
//! allocator at all) that runs known-answer checks; it fails to link if anything pulls in `std`.
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
pub use protect::{
    ConfigError, DropReason, OpenError, Opened, Opener, OpenerConfig, SealError, SealJob, Sealer,
    SealerConfig,
};
pub use time::{Duration, Instant};
pub use wire::{Protocol, SecurityNumber, Seq};
