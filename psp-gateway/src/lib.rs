//! # psp-gateway
//!
//! The psp gateway: the tokio daemon wiring a TAP interface and a raw-Ethernet or UDP uplink to
//! `psp-core` (`run`, `status`), and the command-line tools (`keygen`, `scramble`, `inspect`).
//! This crate does I/O; all protocol logic lives in `psp-core`.

pub mod cli;
pub mod config;
pub mod daemon;
pub mod dataplane;
pub mod hexin;
pub mod io;
pub mod pcap;
pub mod status;
