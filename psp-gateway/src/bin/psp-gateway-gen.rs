//! `psp-gateway-gen DIR`: writes the man pages (`DIR/man/*.1` from the clap definitions of
//! `psp-gateway`, `DIR/man/psp-gateway.toml.5` from docs/CONFIG.md) and the bash, zsh and fish
//! completions (`DIR/completions/`). An argument starting with `-` is an option, never a
//! directory (`--help` prints the usage).
//!
//! A build tool, not shipped: testbed/package.sh runs it before `cargo deb`. It is a separate
//! binary rather than a hidden `psp-gateway` subcommand so that the installed command line is
//! exactly the documented one (a hidden subcommand would still be accepted, and would ship the
//! generators in the daemon's binary).

use std::path::PathBuf;
use std::process::ExitCode;

const USAGE: &str = "usage: psp-gateway-gen DIR\n\
                     writes DIR/man/*.1, DIR/man/psp-gateway.toml.5 and DIR/completions/*";

fn main() -> ExitCode {
    let mut args = std::env::args_os().skip(1);
    let (Some(dir), None) = (args.next(), args.next()) else {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    };
    // An option is never a directory name: `--help` must not create `./--help`.
    match dir.to_str() {
        Some("-h" | "--help") => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Some(s) if s.starts_with('-') => {
            eprintln!("psp-gateway-gen: error: unknown option {s} (try --help)\n{USAGE}");
            return ExitCode::from(2);
        }
        _ => {}
    }
    let dir = PathBuf::from(dir);
    match psp_gateway::cli::generate::write_all(&dir) {
        Ok(files) => {
            for f in files {
                println!("{}", f.display());
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("psp-gateway-gen: error: {}: {e}", dir.display());
            ExitCode::from(1)
        }
    }
}
