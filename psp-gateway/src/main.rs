//! psp-gateway: command-line entry point. STUB.

fn main() {}
