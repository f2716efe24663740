//! The selftest's checks from injected evidence.
