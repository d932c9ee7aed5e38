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
//! | `std` | yes | `From<std::time::Instant>`-style conveniences; implies `alloc` |
//! | `alloc` | via `std` | nothing on the hot path needs it |
//! | `arbitrary` | no | exposes fuzzing helpers |
//!
//! ## no_std
//!
//! With `default-features = false` the crate is `#![no_std]` and allocation-free. CI proves this
//! by linking a freestanding `#![no_std] #![no_main]` static binary (`crates/psp-nostd-proof`)
//! that runs known-answer checks; it fails to link if anything pulls in `std`.
//!
//! MSRV: 1.89 (edition 2024; AVX-512 intrinsics are stable since 1.89).
#![cfg_attr(not(feature = "std"), no_std)]

#[cfg(feature = "alloc")]
extern crate alloc;

pub mod crypto;
pub mod normalize;
pub mod replay;
pub mod scramble;
pub mod session;
pub mod time;
pub mod wire;
