//! `cargo xtask <task>`: capshim's developer tasks.

mod demo;
mod dist;

use clap::{Parser, Subcommand};

/// capshim's developer tasks.
#[derive(Debug, Parser)]
#[command(name = "cargo xtask")]
struct Cli {
    #[command(subcommand)]
    task: Task,
}

#[derive(Debug, Subcommand)]
enum Task {
    /// Build the shim and show it in the simulated guest: stock and unlocked answers side by
    /// side, with the decisions llama.cpp derives from them.
    Demo(demo::Args),
    /// Cross-build libcapshim.dylib (and the capshim CLI) for aarch64-apple-darwin into
    /// dist/, and verify the Mach-O files.
    Dist(dist::Args),
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().task {
        Task::Demo(args) => demo::run(args),
        Task::Dist(args) => dist::run(args),
    }
}
