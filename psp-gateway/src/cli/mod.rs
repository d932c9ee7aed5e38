//! The command line: argument parsing, one-line errors, exit codes.
//!
//! Every failure prints exactly one line `psp-gateway: error: ...` to stderr and exits non-zero
//! (2 for bad arguments, 1 for bad input or I/O); nothing here panics on user input.

use std::fmt;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod inspect;
mod keygen;
mod run;
mod scramble;
mod status;

/// psp: layer-2 packet security, a byte scrambler and tools.
#[derive(Debug, Parser)]
#[command(name = "psp-gateway", version, about)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print a fresh random key as hex.
    Keygen(keygen::Args),
    /// Scramble (or descramble) stdin to stdout with the byte scrambler.
    Scramble(scramble::Args),
    /// Decode PSP frames given as hex on stdin (one per line) or from a pcap file.
    Inspect(inspect::Args),
    /// Run the gateway daemon in the foreground (TAP <-> PSP over a raw or UDP uplink).
    Run(run::Args),
    /// Show a running daemon's per-peer counters and drops.
    Status(status::Args),
}

/// A failed command: the one line to print and the exit code.
#[derive(Debug)]
pub struct Failure {
    /// The message (one line).
    pub message: String,
    /// The process exit code.
    pub code: u8,
}

impl Failure {
    /// Bad arguments (exit 2).
    pub fn usage(message: impl fmt::Display) -> Self {
        Self {
            message: message.to_string(),
            code: 2,
        }
    }

    /// Bad input or an I/O failure (exit 1).
    pub fn input(message: impl fmt::Display) -> Self {
        Self {
            message: message.to_string(),
            code: 1,
        }
    }
}

/// Parses `--key-hex` values.
pub(crate) fn parse_key(hex: &str) -> Result<Vec<u8>, Failure> {
    crate::hexin::decode(hex).map_err(|e| Failure::usage(format_args!("--key-hex: {e}")))
}

/// Runs the command line and returns the process exit code.
pub fn main() -> ExitCode {
    // A safety net: should anything ever panic, say one line, not a backtrace.
    std::panic::set_hook(Box::new(|info| {
        let at = info
            .location()
            .map(|l| format!(" at {}:{}", l.file(), l.line()));
        eprintln!("psp-gateway: internal error{}", at.unwrap_or_default());
    }));
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return clap_failure(&e),
    };
    let result = match cli.command {
        Command::Keygen(a) => keygen::run(&a),
        Command::Scramble(a) => scramble::run(&a),
        Command::Inspect(a) => inspect::run(&a),
        Command::Run(a) => run::run(&a),
        Command::Status(a) => status::run(&a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
            eprintln!("psp-gateway: error: {}", f.message);
            ExitCode::from(f.code)
        }
    }
}

fn clap_failure(e: &clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion)
        || e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    {
        // Help and version are not errors; clap prints them in full.
        let _ = e.print();
        return if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
            ExitCode::from(2)
        } else {
            ExitCode::SUCCESS
        };
    }
    // clap's message spans lines (e.g. the missing argument's name on the next line); keep the
    // part before the usage/tip block and fold it into one line.
    let rendered = e.to_string();
    let message: Vec<&str> = rendered
        .lines()
        .map(str::trim)
        .take_while(|l| {
            !l.starts_with("Usage:") && !l.starts_with("tip:") && !l.starts_with("For more")
        })
        .filter(|l| !l.is_empty())
        .collect();
    let message = message.join(" ");
    let message = message.strip_prefix("error: ").unwrap_or(&message);
    eprintln!("psp-gateway: error: {message} (try --help)");
    ExitCode::from(2)
}
