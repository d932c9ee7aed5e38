//! `psp-gateway scramble`: stdin → stdout through the byte scrambler, streaming, constant memory.

use std::io::{self, Read, Write};

use psp_core::scramble::{Descrambler, Scrambler, Seed};

use super::{Failure, KeyArgs};

const CHUNK: usize = 64 * 1024;

/// Arguments of `scramble`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The key (`--key-hex HEX` or `--key-file PATH`); the window starts from HMAC-SHA1 of it.
    #[command(flatten)]
    key: KeyArgs,
    /// Descramble instead of scramble.
    #[arg(long)]
    descramble: bool,
}

enum Direction {
    Scramble(Scrambler),
    Descramble(Descrambler),
}

/// Runs `scramble`.
pub(crate) fn run(args: &Args) -> Result<(), Failure> {
    let key = args.key.load()?;
    let seed = Seed::from_key(&key);
    crate::kernels::calibrate_scrambler();
    let mut dir = if args.descramble {
        Direction::Descramble(Descrambler::new(&seed))
    } else {
        Direction::Scramble(Scrambler::new(&seed))
    };
    let mut input = io::stdin().lock();
    let mut output = io::stdout().lock();
    let mut buf = vec![0u8; CHUNK];
    loop {
        let n = match input.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(Failure::input(format_args!("reading stdin: {e}"))),
        };
        match &mut dir {
            Direction::Scramble(s) => s.scramble_in_place(&mut buf[..n]),
            Direction::Descramble(d) => d.descramble_in_place(&mut buf[..n]),
        }
        write_out(&mut output, &buf[..n])?;
    }
    output
        .flush()
        .map_err(|e| Failure::input(format_args!("writing stdout: {e}")))
}

fn write_out(out: &mut impl Write, data: &[u8]) -> Result<(), Failure> {
    match out.write_all(data) {
        Ok(()) => Ok(()),
        // The reader went away (`| head`): stop quietly, as a SIGPIPE'd tool would.
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => std::process::exit(141),
        Err(e) => Err(Failure::input(format_args!("writing stdout: {e}"))),
    }
}
