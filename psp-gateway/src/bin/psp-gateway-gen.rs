//! `psp-gateway-gen DIR`: writes the man pages (`DIR/man/*.1`) and the bash, zsh and fish
//! completions (`DIR/completions/`) generated from the clap definitions of `psp-gateway`.
//!
//! A build tool, not shipped: testbed/package.sh runs it before `cargo deb`. It is a separate
//! binary rather than a hidden `psp-gateway` subcommand so that the installed command line is
//! exactly the documented one (a hidden subcommand would still be accepted, and would ship the
//! generators in the daemon's binary).

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let mut args = std::env::args_os().skip(1);
    let (Some(dir), None) = (args.next(), args.next()) else {
        eprintln!("usage: psp-gateway-gen DIR");
        return ExitCode::from(2);
    };
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
