//! Freestanding proof that psp-core is `no_std`: no std, no C runtime start files, our own
//! `_start`, panic handler and mem* functions. It runs known-answer checks against psp-core with
//! default features off and exits 0 only if all pass. If anything in the dependency graph links
//! `std`, this fails to build (duplicate `panic_impl` lang item).
//!
//! It builds once per psp-core crypto backend. The `ring` build names a global allocator that
//! refuses every allocation (ring links `alloc`). The `rustcrypto` build names none at all and
//! links no C library: it links only because nothing in its graph needs `alloc`, which the
//! `_no-allocator` feature's negative control (the ring build without the allocator fails to
//! link) shows is a real check.
#![no_std]
#![no_main]

use core::arch::{asm, global_asm};
use core::panic::PanicInfo;

use psp_core::crypto::sign::{SIGNATURE_LEN, SigningKey, VerifyingKey};
use psp_core::crypto::{SuiteId, SuiteKey};
use psp_core::replay::ReplayWindow;
use psp_core::scramble::{self, Descrambler, Kernel, Scrambler, Seed};
use psp_core::protect::{DropReason, Opener, OpenerConfig, Sealer, SealerConfig};
use psp_core::time::Instant;
use psp_core::wire::Seq;

// The kernel enters `_start` with a 16-byte aligned stack and no return address: align it and
// call into Rust.
global_asm!(
    ".globl _start",
    "_start:",
    "xor ebp, ebp",
    "and rsp, -16",
    "call {main}",
    "ud2",
    main = sym rust_main,
);

#[panic_handler]
fn panic(_info: &PanicInfo<'_>) -> ! {
    write(b"nostd-proof: panic\n");
    exit(101)
}

fn write(msg: &[u8]) {
    // SAFETY: write(2) on fd 1 with a valid buffer; clobbers are declared.
    unsafe {
        asm!("syscall", inlateout("rax") 1usize => _, in("rdi") 1usize, in("rsi") msg.as_ptr(),
             in("rdx") msg.len(), lateout("rcx") _, lateout("r11") _, options(nostack));
    }
}

fn exit(code: i32) -> ! {
    // SAFETY: exit_group(2) never returns.
    unsafe {
        asm!("syscall", in("rax") 231usize, in("rdi") code as isize, options(noreturn, nostack))
    }
}

fn check(ok: bool, what: &[u8]) -> bool {
    write(if ok { b"ok   " } else { b"FAIL " });
    write(what);
    write(b"\n");
    ok
}

extern "C" fn rust_main() -> ! {
    let mut all = true;
    write(if cfg!(feature = "ring") {
        b"nostd-proof: backend ring (refusing global allocator)\n"
    } else {
        b"nostd-proof: backend rustcrypto (no global allocator, no C library)\n"
    });

    // Scrambler: the three implementations agree and round-trip, on every available kernel.
    let seed = Seed::from_key(b"Jefe");
    let mut msg = [0u8; 300];
    for (i, b) in msg.iter_mut().enumerate() {
        *b = (i * 7 + 3) as u8;
    }
    let mut a = msg;
    scramble::straightforward::Scrambler::new(&seed).scramble_in_place(&mut a);
    let mut b = msg;
    scramble::revised::Scrambler::new(&seed).scramble_in_place(&mut b);
    all &= check(a == b && a != msg, b"scramble: straightforward == revised");
    for k in Kernel::ALL {
        if let Some(mut s) = Scrambler::with_kernel(&seed, *k) {
            let mut c = msg;
            s.scramble_in_place(&mut c[..100]);
            s.scramble_in_place(&mut c[100..]);
            let mut d = c;
            if let Some(mut r) = Descrambler::with_kernel(&seed, *k) {
                r.descramble_in_place(&mut d);
            }
            all &= check(c == a && d == msg, k.name().as_bytes());
        }
    }

    // Anti-replay window.
    let mut w = ReplayWindow::default();
    let replay_ok = w.commit(10).is_ok() && w.commit(10).is_err() && w.commit(9).is_ok();
    all &= check(replay_ok, b"replay window");

    // PSP seal/open against the checked-in vectors (crates/psp-core/tests/vectors/psp_frames.json).
    for (suite, name, key, sealed) in PSP_VECTORS {
        all &= check(psp_vector(*suite, key, sealed), name.as_bytes());
    }

    all &= check(ed25519_vector(), b"ed25519 rfc 8032 test 2");

    if all {
        write(b"nostd-proof: all checks passed\n");
        exit(0)
    }
    exit(1)
}

const INNER: &str = "02000000000202000000000108004500002a1c46400040010a8b0a0000010a00000208005a45123400017073702d746573742d7665633031";
const KEY16: &str = "000102030405060708090a0b0c0d0e0f";
const KEY32: &str = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";
const PSP_VECTORS: &[(SuiteId, &str, &str, &str)] = &[
    (
        SuiteId::BfCbcHmacSha1,
        "psp vector bf-cbc-hmac-sha1",
        KEY32,
        "020000000002020000000001198201123456780d6756f1c97ded2a14d2327aff0eb752c9ba1d3aceb05519df1e279d80a5e605f7cce3c9773aef76e8fe842a8632051680b9cc21e3237f855272931f64944849ac3855e5",
    ),
    (
        SuiteId::Aes128Gcm,
        "psp vector aes128-gcm",
        KEY16,
        "0200000000020200000000011982011234567881c9018dc837beab562340307610c1d41ea656550d0a7b94b87ed5c320680ce72776d5a5bc7453abd4f8beec8d0f5004aec395b26e881a6a990aaa3314",
    ),
    (
        SuiteId::ChaCha20Poly1305,
        "psp vector chacha20-poly1305",
        KEY32,
        "02000000000202000000000119820112345678a1469935ab863e36c3689f9718e638f07415bb6860db990637ec8da1a9d671d48faf5b2987e928a90609fdbbf8876c17dab69047b993c61bf04c2cef8e",
    ),
];

/// Decodes lowercase hex into `out`; returns the length.
fn unhex(s: &str, out: &mut [u8]) -> usize {
    let b = s.as_bytes();
    let nib = |c: u8| if c <= b'9' { c - b'0' } else { c - b'a' + 10 };
    let n = b.len() / 2;
    for i in 0..n {
        out[i] = nib(b[2 * i]) << 4 | nib(b[2 * i + 1]);
    }
    n
}

/// Seals the vector's inner frame, compares with the expected bytes, opens it back, and checks
/// that a replay and a flipped bit are refused.
fn psp_vector(suite: SuiteId, key_hex: &str, sealed_hex: &str) -> bool {
    let (mut key_buf, mut inner_buf, mut expect_buf, mut out) =
        ([0u8; 32], [0u8; 128], [0u8; 256], [0u8; 256]);
    let key_len = unhex(key_hex, &mut key_buf);
    let inner_len = unhex(INNER, &mut inner_buf);
    let expect_len = unhex(sealed_hex, &mut expect_buf);
    let (key, inner, expect) = (
        &key_buf[..key_len],
        &inner_buf[..inner_len],
        &expect_buf[..expect_len],
    );
    let now = Instant::from_millis(1_700_000_000_123);
    let (Ok(ks), Ok(ko)) = (SuiteKey::new(suite, key), SuiteKey::new(suite, key)) else {
        return false;
    };
    let Ok(mut sealer) = Sealer::new(ks, Seq(0x1234_5678), SealerConfig::default()) else {
        return false;
    };
    let Ok(mut opener) = Opener::new(ko, OpenerConfig::default()) else {
        return false;
    };
    let Ok(sealed) = sealer.seal(now, inner, &mut out) else {
        return false;
    };
    if sealed != expect {
        return false;
    }
    let len = sealed.len();
    let mut wire = [0u8; 256];
    wire[..len].copy_from_slice(expect);
    let mut replay = wire;
    let mut flipped = wire;
    flipped[20] ^= 1;
    // A flipped bit first (the replay check runs before the ICV, so it must be a fresh SN), then
    // the genuine frame, then its replay.
    let flip_refused = matches!(opener.open(now, &mut flipped[..len]),
        Err(e) if e.reason() == DropReason::BadIcv);
    let opened_ok = matches!(opener.open(now, &mut wire[..len]), Ok(o) if o.frame() == inner);
    let replay_refused = matches!(opener.open(now, &mut replay[..len]),
        Err(e) if e.reason() == DropReason::Replay);
    opened_ok && replay_refused && flip_refused
}

/// RFC 8032 §7.1 test 2: public key, signature, verification, and a refused altered message.
fn ed25519_vector() -> bool {
    let (mut seed, mut public, mut sig_want) = ([0u8; 32], [0u8; 32], [0u8; SIGNATURE_LEN]);
    unhex(
        "4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb",
        &mut seed,
    );
    unhex(
        "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c",
        &mut public,
    );
    unhex(
        "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00",
        &mut sig_want,
    );
    let Ok(key) = SigningKey::from_seed(&seed) else {
        return false;
    };
    let mut sig = [0u8; SIGNATURE_LEN];
    key.sign(&[0x72], &mut sig);
    let vk = VerifyingKey::from_bytes(public);
    key.public_key() == vk
        && sig == sig_want
        && vk.verify(&[0x72], &sig).is_ok()
        && vk.verify(&[0x73], &sig).is_err()
}

/// ring 0.17 links `alloc` unconditionally (its test utilities), so the ring build must name a
/// global allocator. This one refuses every allocation: should anything on the paths checked
/// here try to allocate, the binary aborts with exit 102. The checks therefore also prove that
/// psp-core seals, opens and scrambles with no heap at all. The rustcrypto build has none.
#[cfg(all(feature = "ring", not(feature = "_no-allocator")))]
mod no_heap {
    use super::{exit, write};

    struct NoHeap;

    // SAFETY: `alloc` never returns (it exits the process), so no pointer is ever handed out;
    // `dealloc` is never reached because nothing was ever allocated.
    unsafe impl core::alloc::GlobalAlloc for NoHeap {
        unsafe fn alloc(&self, _layout: core::alloc::Layout) -> *mut u8 {
            write(b"nostd-proof: heap allocation attempted\n");
            exit(102)
        }

        unsafe fn dealloc(&self, _ptr: *mut u8, _layout: core::alloc::Layout) {}
    }

    #[global_allocator]
    static HEAP: NoHeap = NoHeap;
}

// The precompiled `core` carries unwind tables that name this symbol; with panic = "abort"
// nothing ever unwinds, so an empty definition satisfies the linker.
#[unsafe(no_mangle)]
extern "C" fn rust_eh_personality() {}

// The C library is linked statically but never started, so its IFUNC-resolved string functions
// cannot be used; these plain versions are what core and ring's C code call (the rustcrypto
// build links no C library, so they are the only ones there).

/// # Safety
/// Standard `memcpy` contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memcpy(dst: *mut u8, src: *const u8, n: usize) -> *mut u8 {
    let mut i = 0;
    while i < n {
        // SAFETY: caller guarantees both ranges are valid for n bytes.
        unsafe { *dst.add(i) = *src.add(i) };
        i += 1;
    }
    dst
}

/// # Safety
/// Standard `memmove` contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memmove(dst: *mut u8, src: *const u8, n: usize) -> *mut u8 {
    if (dst as usize) < (src as usize) {
        let mut i = 0;
        while i < n {
            // SAFETY: caller guarantees both ranges are valid for n bytes.
            unsafe { *dst.add(i) = *src.add(i) };
            i += 1;
        }
    } else {
        let mut i = n;
        while i > 0 {
            i -= 1;
            // SAFETY: as above.
            unsafe { *dst.add(i) = *src.add(i) };
        }
    }
    dst
}

/// # Safety
/// Standard `memset` contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memset(dst: *mut u8, c: i32, n: usize) -> *mut u8 {
    let mut i = 0;
    while i < n {
        // SAFETY: caller guarantees the range is valid for n bytes.
        unsafe { *dst.add(i) = c as u8 };
        i += 1;
    }
    dst
}

/// # Safety
/// Standard `memcmp` contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memcmp(a: *const u8, b: *const u8, n: usize) -> i32 {
    let mut i = 0;
    while i < n {
        // SAFETY: caller guarantees both ranges are valid for n bytes.
        let (x, y) = unsafe { (*a.add(i), *b.add(i)) };
        if x != y {
            return i32::from(x) - i32::from(y);
        }
        i += 1;
    }
    0
}

/// # Safety
/// Standard `bcmp` contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn bcmp(a: *const u8, b: *const u8, n: usize) -> i32 {
    // SAFETY: same contract as memcmp.
    unsafe { memcmp(a, b, n) }
}
