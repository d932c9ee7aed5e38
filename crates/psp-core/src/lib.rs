//! # psp-core
//!
//! The sans-I/O, `no_std` core of psp: every piece of protocol logic, with no sockets, threads,
//! clock reads or global RNG. Callers pass bytes, the current [`time::Instant`] and randomness in;
//! they get bytes and events out.
//!
//! | module | what it holds |
//! |---|---|
//! | [`scramble`] | the "not-every-not-any" byte scrambler (three implementations, SIMD dispatch) |
//! | [`wire`] | the PSP layer-2 wire format: zero-copy views and value types |
//! | [`crypto`] | cipher suites, keys, the ICV, signatures |
//! | [`replay`] | the RFC 6479-style anti-replay bitmap window |
//! | [`session`] | seal/open of whole layer-2 frames with sequence numbers and replay checks |
//! | [`normalize`] | traffic normalization (seed 003): the Algorithm 1 rate controller, pacer, packing, endpoint |
//! | [`time`] | injected time (`Instant`, `Duration`, microseconds) |
//!
//! It does *not* do I/O (the `psp-gateway` crate drives it) or key exchange transport.
//!
//! ## Features
//!
//! | feature | default | effect |
//! |---|---|---|
//! | `std` | yes | `From<std::time::Instant>`-style conveniences |
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

pub mod crypto;
pub mod normalize;
pub mod replay;
pub mod scramble;
pub mod session;
pub mod time;
pub mod wire;
