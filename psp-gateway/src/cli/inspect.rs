//! `psp-gateway inspect`: decode PSP frames. STUB until the session API lands.

use super::Failure;

/// Arguments of `inspect`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The key as hex.
    #[arg(long)]
    key_hex: String,
    /// The suite the frames were sealed with.
    #[arg(long, default_value = "bf-cbc-hmac-sha1")]
    suite: String,
    /// Read frames from this pcap file instead of hex lines on stdin.
    #[arg(long)]
    pcap: Option<std::path::PathBuf>,
}

/// Runs `inspect`.
pub(crate) fn run(_args: &Args) -> Result<(), Failure> {
    Err(Failure::input("inspect: not implemented yet"))
}
