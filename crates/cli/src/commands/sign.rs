//! `capshim sign`: an OpenSSH signature over a sealed bundle's `SHA256SUMS`, added to it.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::bail;
use clap::Args;

use super::out;
use super::report::EXIT_TAMPERED;
use super::report::open::{Opened, open};
use crate::bundle::sign::{self, NAMESPACE, SignError};
use crate::bundle::{SIG_FILE, SUMS_FILE};

const AFTER_HELP: &str = "\
Adds SHA256SUMS.sig to a sealed evidence bundle (written by `capshim bench` or `capshim verify`)
and changes nothing else: an OpenSSH signature (the SSHSIG format git uses for commits) of
SHA256SUMS in the namespace capshim-bundle, made by OpenSSH's `ssh-keygen -Y sign` (on PATH).
The bundle is checked first as `capshim report` checks it (checksums, a layout this capshim
derives, derived files); a bundle that is not trustworthy, or whose kind or schema_version this
capshim does not derive again, is never signed. `capshim bench --sign KEYFILE` and `capshim
verify --sign KEYFILE` sign when they seal.

KEYFILE is an OpenSSH private key (ssh-keygen asks for its passphrase, if any), or the public key
(.pub) of a key held by ssh-agent. Readers check the signature with `capshim report
--allowed-signers FILE --identity ID BUNDLE_DIR`, FILE holding lines `ID KEYTYPE KEY` (for
example `me@example.com ssh-ed25519 AAAA...`, the public key's text). What a signature proves,
and what it cannot: docs/bundles.md.

Exit codes:
  0  the bundle was signed
  1  error (ssh-keygen missing, not a key, the bundle already signed without --replace,
     ssh-keygen could not sign, unreadable files)
  2  bad command line
  3  the bundle is not trustworthy (changed, unfinished, derived files that do not match, a
     kind or schema_version this capshim does not derive again): not signed

Examples:
  capshim sign capshim-bench-20261130-210000 --key ~/.ssh/id_ed25519
  capshim sign capshim-verify-20261130-210000 --key ~/.ssh/id_ed25519.pub   # a key in ssh-agent
  capshim sign evidence-m1 --key ~/.ssh/id_ed25519 --replace
";

/// Arguments of `capshim sign`.
#[derive(Debug, Args)]
#[command(after_help = AFTER_HELP)]
pub struct SignArgs {
    /// The sealed bundle directory.
    #[arg(value_name = "BUNDLE_DIR")]
    pub bundle: PathBuf,

    /// An OpenSSH private key, or the public key (.pub) of a key held by ssh-agent.
    #[arg(long, value_name = "KEYFILE")]
    pub key: PathBuf,

    /// Replace an existing SHA256SUMS.sig (it is never replaced otherwise).
    #[arg(long)]
    pub replace: bool,
}

/// After `bench` or `verify` sealed the bundle `dir`: names it, signs it with `key` when
/// given, and prints the run's `report` on stdout (also when signing failed: the results hold).
///
/// # Errors
/// When signing fails (the bundle stays sealed and unsigned, and the error says how to sign
/// it later), or stdout cannot be written.
pub fn present(
    dir: &std::path::Path,
    key: Option<&std::path::Path>,
    report: &str,
) -> anyhow::Result<()> {
    crate::term::line(format!("capshim: evidence bundle: {}", dir.display()));
    let signed = key.map(|key| sign_sealed(dir, key));
    out(report)?;
    signed.transpose().map(drop)
}

/// Signs the bundle `dir` a run just sealed with `key`.
fn sign_sealed(dir: &std::path::Path, key: &std::path::Path) -> anyhow::Result<()> {
    let sig = sign::sign(dir, key, false).map_err(|e| {
        anyhow::anyhow!(
            "{}; the bundle {} is sealed but NOT signed: sign it with `capshim sign {} --key KEYFILE`",
            crate::format::chain(&e),
            dir.display(),
            dir.display()
        )
    })?;
    crate::term::line(format!("capshim: signed: {}", sig.display()));
    Ok(())
}

/// Runs `capshim sign`.
pub fn execute(args: SignArgs) -> anyhow::Result<ExitCode> {
    let dir = &args.bundle;
    if !dir.is_dir() {
        bail!(
            "{} is not a directory: give the bundle directory `capshim bench` or `capshim verify` wrote",
            dir.display()
        );
    }
    if !args.replace && std::fs::symlink_metadata(dir.join(SIG_FILE)).is_ok() {
        return Err(SignError::Exists(dir.join(SIG_FILE)).into());
    }
    let fingerprint = sign::check_key(&args.key)?;
    // The check `report` makes, without --as-written: a bundle whose derived files cannot be
    // derived again is refused like a changed one.
    match open(dir, None, false) {
        Ok(Opened::AsWritten { .. }) => unreachable!("opened without as_written"),
        Ok(_) => {}
        Err(e) if e.untrusted() => {
            crate::term::line(format!(
                "capshim: error: {}; it was not signed",
                crate::format::chain(&e)
            ));
            return Ok(ExitCode::from(EXIT_TAMPERED));
        }
        Err(e) => return Err(e.into()),
    }
    let sig = sign::sign(dir, &args.key, args.replace)?;
    out(&format!(
        "signed {} (namespace {NAMESPACE}) with {} ({fingerprint}): wrote {}\n",
        dir.join(SUMS_FILE).display(),
        args.key.display(),
        sig.display()
    ))?;
    Ok(ExitCode::SUCCESS)
}
