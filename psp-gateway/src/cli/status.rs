//! `psp-gateway status`: the running daemon's counters, as a table or JSON.

use std::path::PathBuf;

use super::Failure;
use crate::config::Config;
use crate::status;

/// Arguments of `status`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Find the status socket in this configuration file.
    #[arg(long, short, conflicts_with = "socket")]
    config: Option<PathBuf>,
    /// The status socket path (default: /run/psp-gateway/psp0.sock).
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
        (None, Some(c)) => {
            Config::load(c)
                .map_err(Failure::usage)?
                .daemon
                .status_socket
        }
        (None, None) => PathBuf::from("/run/psp-gateway/psp0.sock"),
    };
    let doc = status::fetch(&path).map_err(Failure::input)?;
    if args.json {
        println!("{doc}");
    } else {
        print!("{}", status::render(&doc));
    }
    Ok(())
}
