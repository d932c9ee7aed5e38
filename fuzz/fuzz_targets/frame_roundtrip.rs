//! Seal then open returns the inner frame for every suite, with random options; a second open
//! of the same frame is refused as a replay.
#![no_main]

use libfuzzer_sys::fuzz_target;
use psp_core::crypto::{SuiteId, SuiteKey};
use psp_core::protect::{DropReason, Opener, OpenerConfig, Sealer, SealerConfig};
use psp_core::time::Instant;
use psp_core::wire::{SecurityNumber, Seq};

fuzz_target!(|input: &[u8]| {
    let Some((head, rest)) = input.split_first_chunk::<6>() else {
        return;
    };
    let suite = SuiteId::ALL[usize::from(head[0]) % SuiteId::ALL.len()];
    let key: Vec<u8> = (0..suite.key_len()).map(|i| head[1] ^ i as u8).collect();
    let seq = u32::from_le_bytes([head[2], head[3], head[4], 0]);
    let sn = (head[5] & 2 != 0)
        .then(|| SecurityNumber::new(0x00ab_cdef).ok())
        .flatten();
    let scfg = SealerConfig::new()
        .with_allow_none(true)
        .with_timestamps(head[5] & 1 != 0)
        .with_security_number(sn)
        .with_pad_to([0u8, 8, 16, 64][usize::from(head[5] >> 2) % 4]);
    let ocfg = OpenerConfig::new()
        .with_allow_none(true)
        .with_security_number(sn);
    let (Ok(ks), Ok(ko)) = (SuiteKey::new(suite, &key), SuiteKey::new(suite, &key)) else {
        return;
    };
    let Ok(mut sealer) = Sealer::new(ks, Seq(seq), scfg) else {
        return;
    };
    let Ok(mut opener) = Opener::new(ko, ocfg) else {
        return;
    };
    // The inner frame: MACs + an EtherType >= 0x0600 + the fuzz payload.
    let mut inner = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00];
    inner.extend_from_slice(rest);
    let now = Instant::from_secs(1_700_000_000);
    let mut out = vec![0u8; inner.len() + 256];
    let Ok(sealed) = sealer.seal(now, &inner, &mut out) else {
        return;
    };
    let mut wire = sealed.to_vec();
    let mut again = wire.clone();
    let opened = opener.open(now, &mut wire).expect("a sealed frame opens");
    // Short frames are padded to the Ethernet minimum; the data is a prefix of what comes back.
    assert_eq!(&opened.frame()[..inner.len()], &inner[..]);
    let err = opener.open(now, &mut again).expect_err("replay refused");
    assert_eq!(err.reason(), DropReason::Replay);
});
