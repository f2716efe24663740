//! `capshim tune`: the fastest correct settings for this guest, found by a budgeted search.
//!
//! - [`knobs`]: the catalogue of settings worth trying (a data file in the repository), and
//!   which of them exist on this platform and llama.cpp build.
//! - [`search`]: successive halving over the candidates against the reference arm, in
//!   random-order rounds, and the rule for declaring a winner.

// Until the `capshim tune` command (branch t-tune) drives them; remove with its merge.
#![allow(dead_code)]

pub mod knobs;
pub mod search;

#[cfg(test)]
mod calibration;
#[cfg(test)]
mod knobs_tests;
