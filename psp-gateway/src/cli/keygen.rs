//! `psp-gateway keygen`: a random key from the OS RNG, as hex.

use psp_core::crypto::SuiteId;
use zeroize::Zeroize;

use super::Failure;

/// Arguments of `keygen`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Size the key for this suite (the key length differs: aes128-gcm takes 16 bytes).
    #[arg(long, default_value = "bf-cbc-hmac-sha1")]
    suite: String,
    /// Key length in bytes, overriding the suite's (1..=1024).
    #[arg(long)]
    bytes: Option<usize>,
}

/// Runs `keygen`.
pub(crate) fn run(args: &Args) -> Result<(), Failure> {
    let suite = SuiteId::from_name(&args.suite)
        .ok_or_else(|| Failure::usage(format_args!("--suite: unknown suite `{}`", args.suite)))?;
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
