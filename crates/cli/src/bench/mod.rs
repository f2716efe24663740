//! The stock / unlocked / host experiment: plan, run, measure.
//!
//! - [`schedule`]: the ABBA order of arms over rounds.
//! - [`runner`]: one llama-bench process per arm and round, with or without the shim.
//! - [`environment`]: what machine and which files the run used.

pub mod environment;
pub mod runner;
pub mod schedule;
