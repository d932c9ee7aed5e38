//! Freestanding proof that psp-core is `no_std`: no std, no C runtime start files, our own
//! `_start`, panic handler and mem* functions. It runs known-answer checks against psp-core with
//! default features off and exits 0 only if all pass. If anything in the dependency graph links
//! `std`, this fails to build (duplicate `panic_impl` lang item).
#![no_std]
#![no_main]

use core::arch::{asm, global_asm};
use core::panic::PanicInfo;

use psp_core::replay::ReplayWindow;
use psp_core::scramble::{self, Descrambler, Kernel, Scrambler, Seed};

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

    if all {
        write(b"nostd-proof: all checks passed\n");
        exit(0)
    }
    exit(1)
}

// The precompiled `core` carries unwind tables that name this symbol; with panic = "abort"
// nothing ever unwinds, so an empty definition satisfies the linker.
#[unsafe(no_mangle)]
extern "C" fn rust_eh_personality() {}

// The C library is linked statically but never started, so its IFUNC-resolved string functions
// cannot be used; these plain versions are what core and ring's C code call.

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
