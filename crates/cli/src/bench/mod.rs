//! The stock / unlocked / host experiment: plan, run, measure.
//!
//! The steps of a run, in order (hyperfine's benchmark/):
//!
//! bench is an experiment of [`crate::experiment`], which runs its rounds in random order,
//! forwards signals, applies the one rule for failed runs, leaves the INCOMPLETE note and
//! reports errors; what is bench's own:
//!
//! - [`baseline`]: the host's processes (`--baseline` files and host bench bundles), checked.
//! - [`plan`]: the arms and llama-bench arguments, checked before anything runs.
//! - [`command`]: `bench --command`, any workload in place of llama-bench (its own plan,
//!   process and experiment; the same derivation, bundle and report).
//! - [`runner`]: the experiment: files identified, every slot of the rounds, then the seal.
//! - [`executor`]: one llama-bench process, with or without the shim.
//! - [`seal`]: the derived files ([`derive`]), `environment.json` and `SHA256SUMS`.
//! - [`check`]: `capshim report` on a bench bundle: every derived file derived again.
//! - [`environment`]: what files and processes the run used.
//!
//! The comparison itself is [`crate::analysis`], shared with `capshim report`.

pub mod baseline;
pub mod check;
pub mod command;
pub mod derive;
pub mod environment;
pub mod executor;
pub mod plan;
pub mod runner;
mod seal;
