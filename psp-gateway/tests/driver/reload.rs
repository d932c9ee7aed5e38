//! SIGHUP: what a reload changes, and what it must not touch.
