//! The stock / unlocked / host experiment: plan, run, measure.
//!
//! - [`schedule`]: the ABBA order of arms over rounds.
//! - [`runner`]: one llama-bench process per arm and round, with or without the shim.
//! - [`results`]: merging rows and comparing arms (shared with `capshim report`).
//! - [`stats`]: medians, ranges, variation, drift, bootstrap intervals.
//! - [`environment`]: what machine and which files the run used.

pub mod environment;
pub mod results;
pub mod runner;
pub mod schedule;
pub mod stats;
