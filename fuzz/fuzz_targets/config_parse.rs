//! The config parser never panics: any text gives a Config or one one-line error naming the
//! file.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use psp_gateway::config::Config;

fuzz_target!(|input: &[u8]| {
    let Ok(text) = core::str::from_utf8(input) else {
        return;
    };
    let path = Path::new("/nonexistent-psp-fuzz/gw.toml");
    if let Err(e) = Config::parse(path, text) {
        let line = e.to_string();
        assert!(!line.contains('\n'), "multi-line error: {line:?}");
        assert!(line.starts_with("/nonexistent-psp-fuzz/gw.toml"), "{line}");
    }
});
