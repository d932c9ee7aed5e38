//! `psp-gateway run`: the daemon in the foreground.

use std::path::PathBuf;

use super::Failure;
use crate::config::LogFormat;
use crate::daemon::{self, DaemonError, Options};

/// Arguments of `run`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The configuration file (TOML; see psp-gateway.toml(5)).
    #[arg(long, short)]
    config: PathBuf,
    /// Drop privileges to this user once the TAP and sockets are open.
    #[arg(long)]
    user: Option<String>,
    /// Log format: human or json (overrides the config file).
    #[arg(long, value_parser = ["human", "json"])]
    log_format: Option<String>,
    /// Log filter, e.g. `debug` or `psp_gateway=debug` (overrides the config file).
    #[arg(long)]
    log_level: Option<String>,
}

/// Runs `run`.
pub(crate) fn run(args: &Args) -> Result<(), Failure> {
    let opts = Options {
        config: args.config.clone(),
        user: args.user.clone(),
        log_format: args.log_format.as_deref().map(|f| match f {
            "json" => LogFormat::Json,
            _ => LogFormat::Human,
        }),
        log_level: args.log_level.clone(),
    };
    daemon::run(&opts).map_err(|e| match e {
        DaemonError::Config(e) => Failure::usage(e),
        DaemonError::Runtime(e) => Failure::input(e),
    })
}
