//! Platform-specific facts: `sysctl` values, user defaults, System Integrity Protection,
//! files' extended attributes and the Metal device ([`facts`], [`sip`]; Metal through
//! `metal`, macOS only).
//!
//! Everything here runs programs or calls Metal; the rest of the CLI takes the facts through
//! the [`facts::SystemFacts`] trait, so it can be tested anywhere with injected facts.

#[cfg(target_os = "macos")]
pub mod metal;

pub mod facts;
pub mod sip;
