//! STUB bench: scramble.
#![allow(missing_docs)]
fn main() {}
