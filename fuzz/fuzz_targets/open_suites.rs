//! Opening arbitrary bytes with every suite never panics, and garbage is never accepted by a
//! suite with an ICV. With the `none` suite (no ICV) the fuzzer reaches the post-decrypt parsing.
#![no_main]

use libfuzzer_sys::fuzz_target;
use psp_core::crypto::{SuiteId, SuiteKey};
use psp_core::protect::{Opener, OpenerConfig};
use psp_core::time::Instant;

fuzz_target!(|input: &[u8]| {
    let Some((&sel, bytes)) = input.split_first() else {
        return;
    };
    let suite = SuiteId::ALL[usize::from(sel) % SuiteId::ALL.len()];
    let key = vec![0x42u8; suite.key_len()];
    let Ok(k) = SuiteKey::new(suite, &key) else {
        return;
    };
    let cfg = OpenerConfig::new().with_allow_none(true);
    let Ok(mut opener) = Opener::new(k, cfg) else {
        return;
    };
    let mut buf = bytes.to_vec();
    let result = opener.open(Instant::from_secs(1_700_000_000), &mut buf);
    if suite != SuiteId::None {
        assert!(
            result.is_err(),
            "random bytes passed the {} ICV",
            suite.name()
        );
    }
});
