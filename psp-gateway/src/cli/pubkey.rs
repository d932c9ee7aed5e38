//! `psp-gateway pubkey`: the public key of a host identity (`keygen --identity`), from its file
//! or from a config's `[session] identity_file`: what the peers write as `identity = "..."`.

use std::path::PathBuf;

use psp_core::handshake::Identity;

use super::Failure;

/// Arguments of `pubkey`.
#[derive(Debug, clap::Args)]
#[group(required = true, multiple = false)]
pub(crate) struct Args {
    /// The identity file (as `keygen --identity FILE` wrote it; the key-file rules apply:
    /// mode 0600 or stricter, owned by root or by you).
    #[arg(value_name = "IDENTITY_FILE")]
    file: Option<PathBuf>,
    /// Take the identity file from this configuration's `[session] identity_file` instead.
    #[arg(long, short, value_name = "FILE")]
    config: Option<PathBuf>,
}

/// Runs `pubkey`.
pub(crate) fn run(args: &Args) -> Result<(), Failure> {
    let path = match (&args.file, &args.config) {
        (Some(f), _) => f.clone(),
        (None, Some(c)) => {
            let config = crate::config::Config::load(c).map_err(Failure::usage)?;
            let Some(id) = config.session.and_then(|s| s.identity) else {
                return Err(Failure::usage(format_args!(
                    "{}: no [session] identity_file; make one with `psp-gateway keygen \
                     --identity FILE` and name it there",
                    c.display()
                )));
            };
            println!("{}", hex::encode(id.public_key));
            return Ok(());
        }
        (None, None) => return Err(Failure::usage("give an identity file or --config")),
    };
    let shown = path.display();
    let bytes = crate::config::read_key_file(&path).map_err(Failure::input)?;
    let seed: [u8; 32] = bytes.as_slice().try_into().map_err(|_| {
        Failure::input(format_args!(
            "{shown} holds {} bytes; an identity is 32 (psp-gateway keygen --identity)",
            bytes.len()
        ))
    })?;
    let id = Identity::from_seed(seed).map_err(|e| Failure::input(format_args!("{shown}: {e}")))?;
    println!("{}", hex::encode(id.public_key()));
    Ok(())
}
