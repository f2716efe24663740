//! `cargo xtask <task>`: capshim's developer tasks.

mod aa_study;
mod checks;
mod demo;
mod dist;
mod link;
mod man;
mod matrix_bench;
mod reproduce;
mod sdk;

use std::process::ExitCode;

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
    /// Build dist twice from clean clones of HEAD in two different folders and check that the
    /// artifacts are byte-identical (the same SHA256SUMS).
    Reproduce(reproduce::Args),
    /// Write the capshim(1) man pages (one per subcommand) into target/man.
    Man(man::Args),
    /// Run K A/A benches of `capshim bench` at its defaults with the real llama-bench, and
    /// print how often the interval excluded 1.00 and how wide it was (docs/bench.md).
    AaStudy(aa_study::Args),
    /// Seal a bench bundle with a stand-in llama-bench, copy it N times (1,000 by default), and
    /// time `capshim report --matrix --csv` over all of them (docs/report.md).
    MatrixBench(matrix_bench::Args),
}

fn main() -> ExitCode {
    // `cargo xtask dist` also runs this executable as rustc's linker (see `link`).
    if let Some(target) = std::env::var_os(link::ENV_TARGET) {
        return link::main(
            &target.to_string_lossy(),
            std::env::args_os().skip(1).collect(),
        );
    }
    let result = match Cli::parse().task {
        Task::Demo(args) => demo::run(args),
        Task::Dist(args) => dist::run(args),
        Task::Man(args) => man::run(args),
        Task::Reproduce(args) => reproduce::run(args),
        Task::AaStudy(args) => aa_study::run(args),
        Task::MatrixBench(args) => matrix_bench::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}
