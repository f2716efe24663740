//! What `bench` and `verify` (and every experiment command to come) share on the command
//! line and at the end: `--keep-going`, `--json`, `--sign`; the signing key checked before the
//! first run; a stopped run's exit; a sealed one presented.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;

use super::{sign, stopped};
use crate::experiment::ExperimentError;
use crate::experiment::seal::{Sealed, check_signing_key};

/// The options every experiment command takes.
#[derive(Debug, Args)]
pub struct ExperimentArgs {
    /// Record a run whose tool fails (exits non-zero or is killed) as failed, with its reason,
    /// and go on with the other runs, instead of stopping at the first. Exit code 1 when an
    /// arm (other than a failed reference) has no result at all.
    #[arg(long = "keep-going")]
    pub keep_going: bool,

    /// Print summary.json instead of the Markdown report.
    #[arg(long = "json")]
    pub json: bool,

    /// Sign the bundle when sealing it: SHA256SUMS.sig, an OpenSSH signature (ssh-keygen -Y
    /// sign, namespace capshim-bundle) with this private key, or the public key (.pub) of a key
    /// held by ssh-agent. Checked before the first run: without a terminal, the key must sign
    /// without a passphrase (none, or held by ssh-agent).
    #[arg(long = "sign", value_name = "KEYFILE")]
    pub sign: Option<PathBuf>,
}

impl ExperimentArgs {
    /// Checks the signing key, if any, before anything runs.
    ///
    /// # Errors
    /// When the key cannot be read or cannot sign here ([`check_signing_key`]).
    pub fn check(&self) -> anyhow::Result<()> {
        if let Some(key) = &self.sign {
            check_signing_key(key)?;
        }
        Ok(())
    }

    /// The end of an experiment command: a stopped run exits 128 + its signal, or with its
    /// error; a sealed one is signed (with --sign) and its report printed.
    ///
    /// # Errors
    /// The run's error; signing or printing failing.
    pub fn finish<S: Sealed>(
        &self,
        result: Result<S, ExperimentError>,
    ) -> anyhow::Result<Result<S, ExitCode>> {
        let sealed = match result {
            Ok(sealed) => sealed,
            Err(e) => return stopped(e.interrupted_by(), e).map(Err),
        };
        let key: Option<&Path> = self.sign.as_deref();
        let bundle = sealed.bundle();
        sign::present(&bundle.dir, key, bundle.report(self.json))?;
        Ok(Ok(sealed))
    }
}
