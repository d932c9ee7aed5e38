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

extern "C" fn rust_main() -> ! {
    write(if cfg!(feature = "ring") {
        b"nostd-proof: backend ring (refusing global allocator)\n"
    } else {
        b"nostd-proof: backend rustcrypto (no global allocator, no C library)\n"
    });
    // psp-kat: the scrambler on every kernel this CPU has, the anti-replay window, a PSP frame
    // per suite against the checked-in vectors, Ed25519, and docs/SESSIONS.md's two-path
    // handshake vector.
    let all = psp_kat::run(&mut |ok, what| {
        write(if ok { b"ok   " } else { b"FAIL " });
        write(what.as_bytes());
        write(b"\n");
    });
    if all {
        write(b"nostd-proof: all checks passed\n");
        exit(0)
    }
    exit(1)
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
