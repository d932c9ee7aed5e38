//! Example: scramble a message on one side and descramble it on the other. STUB.

fn main() {}
