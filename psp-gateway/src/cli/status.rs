//! `psp-gateway status`: the running daemon's counters, as a table or JSON.

use std::path::PathBuf;

use super::Failure;
use crate::config;
use crate::status;

/// Arguments of `status`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Find the status socket in this configuration file (only `interface.name` and
    /// `daemon.status_socket` are read: no key file).
    #[arg(long, short, conflicts_with = "socket")]
    config: Option<PathBuf>,
    /// The status socket path (default: /run/psp-gateway/psp0.sock, or
    /// /run/psp-gateway/psp0@NETNS.sock in a named network namespace).
    #[arg(long)]
    socket: Option<PathBuf>,
    /// Print the JSON document instead of a table.
    #[arg(long)]
    json: bool,
}

/// Runs `status`.
pub(crate) fn run(args: &Args) -> Result<(), Failure> {
    let path = match (&args.socket, &args.config) {
        (Some(s), _) => s.clone(),
        (None, Some(c)) => config::status_socket_of(c).map_err(Failure::usage)?,
        (None, None) => config::default_status_socket("psp0"),
    };
    let doc = status::fetch(&path).map_err(Failure::input)?;
    if args.json {
        println!("{doc}");
    } else {
        print!("{}", status::render(&doc));
    }
    Ok(())
}
