//! Drops that are not about a received frame's protection: the protected side's own frames,
//! the I/O refusing, sequence numbers not reserved.
