//! STUB bench: primitives.
#![allow(missing_docs)]
fn main() {}
