//! Prints the Table II reproduction. STUB.
fn main() {}
