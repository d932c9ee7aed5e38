//! STUB bench: seal_open.
#![allow(missing_docs)]
fn main() {}
