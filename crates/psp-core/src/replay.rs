//! STUB: anti-replay window (being written).
