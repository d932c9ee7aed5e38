//! STUB bench: replay.
#![allow(missing_docs)]
fn main() {}
