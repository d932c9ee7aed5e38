//! psp-mp
fn main() {}
