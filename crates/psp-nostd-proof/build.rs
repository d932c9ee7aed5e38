//! Link flags for the freestanding proof binary: static, no C start files.
//!
//! With the ring backend, ring depends on getrandom, which depends on the `libc` crate, so the
//! static C library is on the link line; the linker may resolve a shared generic symbol from
//! getrandom's object and pull libc's stdio in with it, whose cold paths name libgcc's unwinder.
//! Linking `gcc_eh` satisfies those references. Nothing from the C library runs: there is no C
//! runtime start-up at all.
//!
//! The rustcrypto backend needs no C at all, so that build links with `-nostdlib`: no C
//! library, no libgcc, nothing but the Rust crates and this binary's own `mem*` functions.
fn main() {
    println!("cargo:rustc-link-arg-bins=-nostartfiles");
    println!("cargo:rustc-link-arg-bins=-static");
    if std::env::var_os("CARGO_FEATURE_RING").is_some() {
        println!("cargo:rustc-link-arg-bins=-Wl,--start-group");
        println!("cargo:rustc-link-arg-bins=-lc");
        println!("cargo:rustc-link-arg-bins=-lgcc");
        println!("cargo:rustc-link-arg-bins=-lgcc_eh");
        println!("cargo:rustc-link-arg-bins=-Wl,--end-group");
    } else {
        println!("cargo:rustc-link-arg-bins=-nostdlib");
    }
}
