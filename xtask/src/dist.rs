//! `cargo xtask dist` (being written).

/// Options of `cargo xtask dist`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Cross-builds and verifies the macOS artifacts.
pub fn run(_args: Args) -> anyhow::Result<()> {
    anyhow::bail!("cargo xtask dist is not written yet")
}
