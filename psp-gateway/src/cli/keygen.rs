//! `psp-gateway keygen`: a random key from the OS RNG, as hex; or, with `--identity FILE`, a
//! host identity (an Ed25519 seed, docs/SESSIONS.md) written to FILE (mode 0600) with its
//! public key printed for the peers to pin.

use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::PathBuf;

use psp_core::handshake::Identity;

use psp_core::crypto::SuiteId;
use zeroize::Zeroize;

use super::Failure;

/// Arguments of `keygen`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Size the key for this suite: aes128-gcm (the default, the suite the docs recommend)
    /// takes 16 bytes, every other suite 32. The daemon's built-in `defaults.suite` is the
    /// thesis' bf-cbc-hmac-sha1: write `suite = "aes128-gcm"` in the config, or give
    /// `--suite bf-cbc-hmac-sha1` here.
    #[arg(long, default_value = "aes128-gcm")]
    suite: String,
    /// Key length in bytes, overriding the suite's (1..=1024).
    #[arg(long)]
    bytes: Option<usize>,
    /// Write a new host identity (for `[session] identity_file`) to this file, mode 0600, and
    /// print its public key (for the peers' `identity = "..."`). Refuses an existing file.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["suite", "bytes"])]
    identity: Option<PathBuf>,
}

/// Runs `keygen`.
pub(crate) fn run(args: &Args) -> Result<(), Failure> {
    if let Some(path) = &args.identity {
        return identity(path);
    }
    let suite = SuiteId::from_name(&args.suite).ok_or_else(|| {
        Failure::usage(format_args!(
            "--suite: unknown suite `{}`; want one of {}",
            args.suite,
            crate::config::suite_names()
        ))
    })?;
    let len = match args.bytes {
        Some(n @ 1..=1024) => n,
        Some(n) => {
            return Err(Failure::usage(format_args!(
                "--bytes: {n} is not in 1..=1024"
            )));
        }
        None => suite.key_len().max(16),
    };
    let mut key = vec![0u8; len];
    getrandom::fill(&mut key).map_err(|e| Failure::input(format_args!("OS RNG: {e}")))?;
    println!("{}", hex::encode(&key));
    key.zeroize();
    Ok(())
}

fn identity(path: &std::path::Path) -> Result<(), Failure> {
    let mut failed = None;
    let id = Identity::generate(|seed| {
        if let Err(e) = getrandom::fill(seed) {
            failed = Some(e);
        }
    })
    .map_err(|e| Failure::input(format_args!("identity: {e}")))?;
    if let Some(e) = failed {
        return Err(Failure::input(format_args!("OS RNG: {e}")));
    }
    let shown = path.display();
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| Failure::input(format_args!("{shown}: {e}")))?;
    let mut text = zeroize::Zeroizing::new(hex::encode(id.seed()));
    text.push('\n');
    file.write_all(text.as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(|e| Failure::input(format_args!("{shown}: {e}")))?;
    println!("{}", hex::encode(id.public_key()));
    Ok(())
}
