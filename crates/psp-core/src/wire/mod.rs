//! STUB: wire (being written).
