//! `psp-gateway`: the psp command line. Parsing and error reporting live in [`psp_gateway::cli`].

use std::process::ExitCode;

fn main() -> ExitCode {
    psp_gateway::cli::main()
}
