//! # psp-gateway
//!
//! The psp gateway: the command-line tools (`keygen`, `scramble`, `inspect`) and, later, the
//! tokio daemon wiring TAP interfaces and raw Ethernet/UDP sockets to `psp-core`. This crate does
//! I/O; all protocol logic lives in `psp-core`.

pub mod cli;
pub mod hexin;
pub mod pcap;
