//! The stock / unlocked / host experiment: plan, run, measure.
//!
//! The steps of a run, in order (hyperfine's benchmark/):
//!
//! - [`plan`]: the arms and llama-bench arguments, checked before anything runs.
//! - [`runner`]: the run itself: every slot of the [`schedule`], then the seal.
//! - [`schedule`]: the order of arms in each round (drawn at random, round by round).
//! - [`executor`]: one llama-bench process, with or without the shim.
//! - [`seal`]: the derived files ([`derive`]), `environment.json` and `SHA256SUMS`.
//! - [`check`]: `capshim report` on a bench bundle: every derived file derived again.
//! - [`incomplete`]: the note a stopped run leaves instead of a seal.
//! - [`environment`]: what machine, files and processes the run used.
//! - [`error`]: why a run stopped.
//!
//! The comparison itself is [`crate::analysis`], shared with `capshim report`.

pub mod check;
pub mod derive;
pub mod environment;
mod error;
mod executor;
mod incomplete;
pub mod plan;
pub mod runner;
pub mod schedule;
mod seal;
