//! The command line: argument parsing, one-line errors, exit codes.
//!
//! Every failure prints exactly one line `psp-gateway: error: ...` to stderr and exits non-zero
//! (2 for bad arguments, 1 for bad input or I/O); nothing here panics on user input.

use std::fmt;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use zeroize::Zeroizing;

mod ca;
mod cert;
pub mod generate;
mod inspect;
mod keygen;
pub mod pcap;
mod pubkey;
mod run;
mod scramble;
mod status;

/// psp: layer-2 packet security, a byte scrambler and tools.
#[derive(Debug, Parser)]
#[command(name = "psp-gateway", version, about)]
pub(crate) struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
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
    /// Print a host's public key (what its peers pin as `identity`) from its identity file.
    Pubkey(pubkey::Args),
    /// The network CA: create it, sign host certificates, revoke them (keep its directory
    /// offline: gateways need only its certificate).
    Ca(ca::Args),
    /// Show a certificate or revocation list, or verify a host certificate against the CA.
    Cert(cert::Args),
}

/// A failed command: the one line to print and the exit code.
#[derive(Debug)]
pub(crate) struct Failure {
    /// The message (one line).
    pub(crate) message: String,
    /// The process exit code.
    pub(crate) code: u8,
}

impl Failure {
    /// Bad arguments (exit 2).
    pub(crate) fn usage(message: impl fmt::Display) -> Self {
        Self {
            message: message.to_string(),
            code: 2,
        }
    }

    /// Bad input or an I/O failure (exit 1).
    pub(crate) fn input(message: impl fmt::Display) -> Self {
        Self {
            message: message.to_string(),
            code: 1,
        }
    }
}

/// The key of `scramble` and `inspect`: exactly one of `--key-hex` and `--key-file`.
#[derive(Debug, clap::Args)]
#[group(required = true, multiple = false)]
pub(crate) struct KeyArgs {
    /// The key as hex. Other local users can read it in /proc/PID/cmdline: prefer --key-file.
    #[arg(long, value_name = "HEX")]
    key_hex: Option<String>,
    /// A file holding the key as hex (as `keygen` prints it), the daemon's key-file rules:
    /// mode 0600 or stricter, owned by root or by you.
    #[arg(long, value_name = "PATH")]
    key_file: Option<PathBuf>,
}

impl KeyArgs {
    /// The flag the key came from, for messages.
    pub(crate) fn flag(&self) -> &'static str {
        if self.key_file.is_some() {
            "--key-file"
        } else {
            "--key-hex"
        }
    }

    /// Reads the key: `--key-hex` decoded leniently ([`decode_hex`]), `--key-file` through
    /// the daemon's key-file loader.
    ///
    /// # Errors
    /// A usage failure (exit 2) naming the flag and the problem, never the key.
    pub(crate) fn load(&self) -> Result<Zeroizing<Vec<u8>>, Failure> {
        match (&self.key_hex, &self.key_file) {
            (_, Some(path)) => crate::config::read_key_file(path)
                .map_err(|p| Failure::usage(format_args!("--key-file: {p}"))),
            (Some(hex), None) => decode_hex(hex)
                .map(Zeroizing::new)
                .map_err(|e| Failure::usage(format_args!("--key-hex: {e}"))),
            // clap's group makes one of them required.
            (None, None) => Err(Failure::usage(
                "one of --key-hex and --key-file is required",
            )),
        }
    }
}

/// Decodes hex leniently, as people paste it: separators (whitespace, `:`, `-`) and a leading
/// `0x` are ignored.
///
/// # Errors
/// A one-line reason: a character that is no hex digit, an odd digit count, no digits.
pub(crate) fn decode_hex(s: &str) -> Result<Vec<u8>, String> {
    let t = s.trim();
    let t = t
        .strip_prefix("0x")
        .or_else(|| t.strip_prefix("0X"))
        .unwrap_or(t);
    let digits: String = t
        .chars()
        .filter(|c| !matches!(c, ' ' | '\t' | '\r' | '\n' | ':' | '-'))
        .collect();
    if digits.is_empty() {
        return Err("no hex digits".to_owned());
    }
    hex::decode(&digits).map_err(|e| match e {
        hex::FromHexError::InvalidHexCharacter { c, .. } => format!("not a hex digit: {c:?}"),
        hex::FromHexError::OddLength | hex::FromHexError::InvalidStringLength => {
            "odd number of hex digits".to_owned()
        }
    })
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
        Command::Pubkey(a) => pubkey::run(&a),
        Command::Ca(a) => ca::run(&a),
        Command::Cert(a) => cert::run(&a),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_with_separators() {
        assert_eq!(decode_hex("0x01:02 0a-FF\n").unwrap(), vec![1, 2, 10, 255]);
        assert_eq!(decode_hex("  abcd").unwrap(), vec![0xab, 0xcd]);
        assert_eq!(decode_hex("0XAB").unwrap(), vec![0xab]);
    }

    #[test]
    fn bad_hex() {
        assert_eq!(decode_hex("abc").unwrap_err(), "odd number of hex digits");
        assert_eq!(decode_hex("   ").unwrap_err(), "no hex digits");
        assert_eq!(decode_hex("0x").unwrap_err(), "no hex digits");
        assert_eq!(decode_hex("zz").unwrap_err(), "not a hex digit: 'z'");
        assert_eq!(decode_hex("  0g").unwrap_err(), "not a hex digit: 'g'");
    }
}
