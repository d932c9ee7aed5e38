//! STUB: sessions (being written).
