//! psp-core on a Cortex-M4F (`thumbv7em-none-eabihf`, RustCrypto backend, no allocator), run
//! under `qemu-system-arm -machine mps2-an386`: psp-kat's known-answer checks (the scrambler, a
//! sealed and opened frame per suite, Ed25519, and a complete two-path handshake against
//! docs/SESSIONS.md's vector), then the cost of each and the memory used. Output goes through
//! semihosting; the exit status is 0 only if every check passed.
//!
//! Cost is counted in guest instructions: QEMU runs with `-icount shift=0`, one instruction per
//! virtual nanosecond, and SysTick counts the board's 25 MHz clock, so a tick is 40
//! instructions. The program checks that scale itself on a loop of known length. An
//! instruction count is not a cycle count on silicon (a Cortex-M4 takes one to a few cycles per
//! instruction, more with flash wait states), but it is deterministic and comparable across
//! suites. RAM is the static data (`.data` + `.bss`) plus the deepest stack seen, measured by
//! painting the free stack before the checks and finding the lowest word they overwrote.
#![no_std]
#![no_main]

use core::mem::size_of;
use core::panic::PanicInfo;
use core::sync::atomic::{AtomicU32, Ordering};

use cortex_m::peripheral::SYST;
use cortex_m::peripheral::syst::SystClkSource;
use cortex_m_rt::{entry, exception};
use cortex_m_semihosting::{debug, hprintln};
use psp_core::crypto::SuiteId;
use psp_core::handshake::{Handshake, KeyRing};
use psp_core::protect::{Opener, Sealer};
use psp_core::time::Instant;
use psp_kat::frames::SealOpen;

/// SysTick wraps after this many ticks (24-bit counter).
const RELOAD: u32 = 0x00ff_ffff;
/// The fill pattern of unused stack.
const PAINT: u32 = 0xa5a5_5a5a;

static WRAPS: AtomicU32 = AtomicU32::new(0);

#[exception]
fn SysTick() {
    WRAPS.fetch_add(1, Ordering::Relaxed);
}

#[panic_handler]
fn panic(info: &PanicInfo<'_>) -> ! {
    hprintln!("psp-cortex-m: panic: {}", info);
    debug::exit(debug::EXIT_FAILURE);
    loop {
        cortex_m::asm::wfi();
    }
}

unsafe extern "C" {
    static mut __sdata: u32;
    static mut __edata: u32;
    static mut __sbss: u32;
    static mut __ebss: u32;
    static __sidata: u32;
    static _stack_start: u32;
}

/// Addresses of linker symbols.
fn sym(p: *const u32) -> usize {
    p as usize
}

/// Fills the stack below this function's frame with [`PAINT`], down to the end of `.bss`.
#[inline(never)]
fn paint_stack() {
    let sp = cortex_m::register::msp::read() as usize;
    let low = sym(&raw const __ebss).next_multiple_of(4);
    let mut a = low;
    while a + 64 < sp {
        // SAFETY: [low, sp - 64) is RAM between the end of .bss and below the live stack: no
        // object lives there, and nothing runs concurrently (SysTick is not started yet).
        unsafe { core::ptr::write_volatile(a as *mut u32, PAINT) };
        a += 4;
    }
}

/// The deepest stack use since [`paint_stack`], in bytes.
fn stack_peak() -> usize {
    let top = sym(&raw const _stack_start);
    let mut a = sym(&raw const __ebss).next_multiple_of(4);
    // SAFETY: reads words of RAM between .bss and the stack top, all mapped.
    while a < top && unsafe { core::ptr::read_volatile(a as *const u32) } == PAINT {
        a += 4;
    }
    top - a
}

/// SysTick ticks since start (wraps counted).
fn ticks() -> u64 {
    loop {
        let w = WRAPS.load(Ordering::Relaxed);
        let v = SYST::get_current();
        if WRAPS.load(Ordering::Relaxed) == w {
            return u64::from(w) * u64::from(RELOAD + 1) + u64::from(RELOAD - v);
        }
    }
}

/// Instructions per tick, measured on a loop of `2 * n` instructions (`subs` + `bne`).
fn instructions_per_tick() -> u64 {
    let n: u32 = 4_000_000;
    let t0 = ticks();
    // SAFETY: a register-only countdown loop; it touches no memory.
    unsafe {
        core::arch::asm!(
            "2:",
            "subs {0}, {0}, #1",
            "bne 2b",
            inout(reg) n => _,
            options(nomem, nostack),
        );
    }
    let t = ticks() - t0;
    (2 * u64::from(n) + t / 2) / t.max(1)
}

/// Instructions one call of `f` costs, averaged over `n` calls.
fn cost(per_tick: u64, n: u32, mut f: impl FnMut() -> bool) -> (u64, bool) {
    let t0 = ticks();
    let mut ok = true;
    for _ in 0..n {
        ok &= f();
    }
    ((ticks() - t0) * per_tick / u64::from(n), ok)
}

#[entry]
fn main() -> ! {
    paint_stack();
    let mut p = cortex_m::Peripherals::take().expect("taken once");
    p.SYST.set_clock_source(SystClkSource::Core);
    p.SYST.set_reload(RELOAD);
    p.SYST.clear_current();
    p.SYST.enable_interrupt();
    p.SYST.enable_counter();

    hprintln!(
        "psp-cortex-m: Cortex-M4F (thumbv7em-none-eabihf), psp-core rustcrypto, no allocator"
    );
    let per_tick = instructions_per_tick();
    let mut all = true;
    let t0 = ticks();
    all &= psp_kat::run(&mut |ok, what| {
        hprintln!("{} {}", if ok { "ok  " } else { "FAIL" }, what);
    });
    let kat = (ticks() - t0) * per_tick;
    let kat_stack = stack_peak();

    hprintln!(
        "cost (guest instructions, QEMU -icount; {} per SysTick tick):",
        per_tick
    );
    hprintln!("  all known-answer checks: {}", kat);
    let now = Instant::from_secs(1);
    for suite in [
        SuiteId::Aes128Gcm,
        SuiteId::ChaCha20Poly1305,
        SuiteId::BfCbcHmacSha1,
    ] {
        for len in [64usize, 1514] {
            let Some(mut pair) = SealOpen::new(suite, len) else {
                hprintln!("FAIL {}: no sealer", suite.name());
                all = false;
                continue;
            };
            let (c, ok) = cost(per_tick, 20, || pair.round(now));
            all &= ok;
            hprintln!(
                "  seal+open {} {}-byte frame: {} ({} per byte)",
                suite.name(),
                len,
                c,
                c / len as u64
            );
        }
    }
    let seed = psp_core::scramble::Seed::from_key(b"cortex-m");
    let mut scrambler = psp_core::scramble::Scrambler::new(&seed);
    let mut block = [0x5au8; 1280];
    let (c, _) = cost(per_tick, 20, || {
        scrambler.scramble_in_place(&mut block);
        true
    });
    hprintln!(
        "  scramble 1280 bytes (portable kernel): {} ({} per byte)",
        c,
        c / 1280
    );
    let (c, ok) = cost(per_tick, 1, || {
        let mut passed = true;
        psp_kat::session::check(&mut |ok, _| passed &= ok);
        passed
    });
    all &= ok;
    hprintln!("  two-path handshake, both sides, with identities: {}", c);

    let data = sym(&raw const __edata) - sym(&raw const __sdata);
    let bss = sym(&raw const __ebss) - sym(&raw const __sbss);
    let flash = sym(&raw const __sidata) + data;
    let stack = stack_peak();
    hprintln!(
        "memory: flash {} B, static RAM {} B (.data {} + .bss {}), stack peak {} B (known-answer checks {} B)",
        flash,
        data + bss,
        data,
        bss,
        stack,
        kat_stack
    );
    hprintln!(
        "state sizes: Handshake {} B, KeyRing {} B (3 key slots), Sealer {} B, Opener {} B",
        size_of::<Handshake>(),
        size_of::<KeyRing>(),
        size_of::<Sealer>(),
        size_of::<Opener>()
    );
    if all {
        hprintln!("psp-cortex-m: all checks passed");
        debug::exit(debug::EXIT_SUCCESS);
    } else {
        hprintln!("psp-cortex-m: FAILED");
        debug::exit(debug::EXIT_FAILURE);
    }
    loop {
        cortex_m::asm::wfi();
    }
}
