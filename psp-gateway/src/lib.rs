//! # psp-gateway
//!
//! The psp gateway: the tokio daemon wiring a TAP interface and a raw-Ethernet or UDP uplink to
//! `psp-core` (`run`, `status`), and the command-line tools (`keygen`, `scramble`, `inspect`).
//! This crate does I/O; all protocol logic lives in `psp-core`.
//!
//! The library exists for the binary and for the tests: its public items are what
//! `src/main.rs`, the integration tests (`tests/`) and the fuzz targets use; the rest is
//! `pub(crate)`, so the dead-code lints see it.

pub mod cli;
pub mod config;
pub(crate) mod daemon;
pub(crate) mod dataplane;
pub mod io;
pub(crate) mod kernels;
pub(crate) mod metrics;
pub(crate) mod offload;
pub(crate) mod sessions;
pub(crate) mod status;
