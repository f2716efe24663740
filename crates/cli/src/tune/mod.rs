//! `capshim tune`: the fastest correct settings for this guest, found by a budgeted search.
//!
//! - [`knobs`]: the catalogue of settings worth trying (a data file in the repository), and
//!   which of them exist on this platform and llama.cpp build.
//! - [`search`]: successive halving over the candidates against the reference arm, in
//!   random-order rounds, and the rule for declaring a winner.
//!
//! The command's own parts (the experiment of [`crate::experiment`]):
//!
//! - [`plan`]: the reference, the candidates as arms, bench's llama-bench plan, the budget;
//!   [`probe`]: the llama.cpp build and whether the CPU works, which choose the knobs.
//! - [`runner`]: the experiment: stages of random-order rounds, the combinations after the
//!   first stage, the winner verified ([`verifier`]: `capshim verify` into the bundle), the
//!   seal.
//! - [`compose`]: a candidate's arm, the reference's settings with its knobs changed.
//! - [`figure`]: a candidate's figure in one round, its log throughput ratio to the reference.
//! - [`manifest`]: what the derived files come from; [`derive`]: the search replayed, the
//!   winner decided into [`summary`]; [`render`]: `report.md` and the recommendation profile
//!   file; [`check`]: `capshim report` on a tune bundle, and [`consistency`]: what it asks of
//!   the manifest's candidates beyond the replay.

pub mod check;
pub mod compose;
pub mod consistency;
pub mod derive;
pub mod figure;
pub mod knobs;
pub mod manifest;
pub mod plan;
pub mod probe;
pub mod render;
pub mod runner;
pub mod search;
pub mod summary;
pub mod verifier;

#[cfg(test)]
mod calibration;
#[cfg(test)]
mod knobs_tests;
