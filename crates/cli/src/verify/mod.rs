//! `capshim verify`: does a profile keep llama.cpp's results right, not only fast?
//!
//! Every arm (stock, and one per profile) runs llama.cpp's own tools on one model: the
//! reference arm's llama-perplexity saves its logits over a text (the base); every other arm's
//! is compared with them (KL divergence, top-1 agreement, perplexity change); llama-completion
//! decodes a prompt greedily; test-backend-ops runs every op on the Metal device against the
//! CPU. Each arm gets a verdict: `equivalent`, `different` (naming each threshold crossed) or
//! `not run`. The steps of a run, in order:
//!
//! verify is an experiment of [`crate::experiment`], which forwards signals, applies the one
//! rule for failed runs, leaves the INCOMPLETE note and reports errors; what is verify's own:
//!
//! - [`plan`]: the tools, arms, reference, text and each tool's arguments, checked first.
//! - [`runner`]: the experiment: the steps of every arm, the reference first.
//! - [`derive`]: each step's output read back, and the verdicts ([`thresholds`]).
//! - [`seal`]: `summary.json` ([`summary`]), `report.md` ([`render`]), `environment.json`
//!   ([`record`]) and `SHA256SUMS`.
//! - [`base`]: the saved logits and the description capshim writes beside them.
//! - [`manifest`]: what a bundle's derived files come from; [`check`]: `capshim report` on it,
//!   and [`consistency`]: what it asks of the manifest beyond the derivation.

pub mod base;
pub mod check;
pub mod consistency;
pub mod derive;
pub mod manifest;
pub mod plan;
mod record;
mod render;
pub mod runner;
mod seal;
pub mod summary;
pub mod thresholds;
