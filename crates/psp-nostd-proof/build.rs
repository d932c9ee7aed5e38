//! Link flags for the freestanding proof binary: static, no C start files.
//!
//! ring depends on getrandom, which depends on the `libc` crate, so the static C library is on
//! the link line; the linker may resolve a shared generic symbol from getrandom's object and pull
//! libc's stdio in with it, whose cold paths name libgcc's unwinder. Linking `gcc_eh` satisfies
//! those references. Nothing from the C library runs: there is no C runtime start-up at all.
fn main() {
    println!("cargo:rustc-link-arg-bins=-nostartfiles");
    println!("cargo:rustc-link-arg-bins=-static");
    println!("cargo:rustc-link-arg-bins=-Wl,--start-group");
    println!("cargo:rustc-link-arg-bins=-lc");
    println!("cargo:rustc-link-arg-bins=-lgcc");
    println!("cargo:rustc-link-arg-bins=-lgcc_eh");
    println!("cargo:rustc-link-arg-bins=-Wl,--end-group");
}
