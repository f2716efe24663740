//! Signing a sealed bundle with OpenSSH's file signatures (the SSHSIG format `git` uses for
//! commits): `SHA256SUMS.sig` signs `SHA256SUMS` in the namespace [`NAMESPACE`], made and
//! checked by OpenSSH's own `ssh-keygen -Y sign` / `-Y verify`, found on `PATH`.
//!
//! `SHA256SUMS` alone proves only that the files are those its lines list; whoever can edit
//! the files can write new lines. The signature proves who sealed the list: a key the reader
//! trusts, named in an OpenSSH allowed-signers file (ssh-keygen(1), ALLOWED SIGNERS).

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::{SIG_FILE, SUMS_FILE};

/// The signature namespace: a signature made for another purpose (a git commit, a file
/// signed with `-n file`) never passes as a bundle's.
pub const NAMESPACE: &str = "capshim-bundle";

/// The program that signs and checks.
const SSH_KEYGEN: &str = "ssh-keygen";

/// Why a bundle cannot be signed, or its signature does not hold.
#[derive(Debug, thiserror::Error)]
pub enum SignError {
    /// ssh-keygen is not installed.
    #[error(
        "cannot run {SSH_KEYGEN}: {source}; signatures are made and checked by OpenSSH's ssh-keygen \
         (-Y sign / -Y verify, OpenSSH 8.1 or later): install the OpenSSH client (Debian and Ubuntu: \
         apt install openssh-client; macOS ships it) and make sure it is on PATH"
    )]
    NoSshKeygen {
        /// Why it could not be started.
        source: std::io::Error,
    },
    /// The key file is not a key ssh-keygen can use.
    #[error(
        "{path} is not an OpenSSH key ssh-keygen can read ({said}); give an OpenSSH private key \
         (e.g. ~/.ssh/id_ed25519), or the public key (.pub) of a key held by ssh-agent"
    )]
    BadKey {
        /// The key file.
        path: PathBuf,
        /// What ssh-keygen said.
        said: String,
    },
    /// A file given to sign or check with is not a readable regular file.
    #[error("{what} {path}: {why}")]
    Unreadable {
        /// `the key` or `the allowed signers file`.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// What is wrong.
        why: String,
    },
    /// ssh-keygen did not sign.
    #[error(
        "ssh-keygen could not sign {sums} with {key}: {said}; with the public key of an agent's key, \
         check that ssh-agent holds it (ssh-add -l)"
    )]
    SignFailed {
        /// The key file.
        key: PathBuf,
        /// The file being signed.
        sums: PathBuf,
        /// What ssh-keygen said.
        said: String,
    },
    /// The key cannot sign without a passphrase being typed, and no terminal can ask for one.
    #[error(
        "the key {key} cannot sign unattended ({said}): it needs a passphrase and capshim's stdin \
         is not a terminal to ask for it, or it is a public key ssh-agent does not hold; nothing \
         was run. Load the private key into ssh-agent (ssh-add) and give its public key (.pub) to \
         --sign, run from a terminal, or leave --sign out and sign the bundle afterwards with \
         `capshim sign BUNDLE_DIR --key KEYFILE`"
    )]
    CannotSignUnattended {
        /// The key file.
        key: PathBuf,
        /// What ssh-keygen said.
        said: String,
    },
    /// A signature exists and replacing it was not asked for.
    #[error(
        "{0} already exists: a signature is never replaced unless asked; pass --replace to sign the \
         bundle again with this key"
    )]
    Exists(PathBuf),
    /// The bundle has no signature, and one was asked for.
    #[error(
        "{dir} has no {SIG_FILE}: it was never signed, so who sealed it cannot be checked; ask its \
         author for a signed copy (they sign it with `capshim sign {dir} --key KEY`), or leave out \
         --allowed-signers to check only its checksums"
    )]
    Missing {
        /// The bundle.
        dir: PathBuf,
    },
    /// The signature does not hold.
    #[error(
        "{dir}: {SIG_FILE} is not a good signature of {SUMS_FILE} by {identity} in {allowed} \
         (namespace {NAMESPACE}): {said}; the checksums were changed after they were signed, or \
         the bundle was signed by another key: do not trust it"
    )]
    Bad {
        /// The bundle.
        dir: PathBuf,
        /// The signer asked for.
        identity: String,
        /// The allowed signers file.
        allowed: PathBuf,
        /// What ssh-keygen said.
        said: String,
    },
    /// A file operation failed.
    #[error("{action} {path}: {source}")]
    Io {
        /// What was being done.
        action: &'static str,
        /// On which path.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
}

impl SignError {
    /// Whether the bundle is not to be trusted (exit code 3), rather than the check unable to
    /// run.
    pub fn untrusted(&self) -> bool {
        matches!(self, SignError::Missing { .. } | SignError::Bad { .. })
    }
}

/// Checks that `path` is a regular file, without opening anything else.
fn require_file(what: &'static str, path: &Path) -> Result<(), SignError> {
    let unreadable = |why: String| SignError::Unreadable {
        what,
        path: path.to_path_buf(),
        why,
    };
    capshim_macho::require_regular(path).map_err(|e| unreadable(e.to_string()))?;
    std::fs::File::open(path)
        .map(drop)
        .map_err(|e| unreadable(e.to_string()))
}

/// Runs ssh-keygen with `args`, `input` on its stdin (without, capshim's own stdin: where
/// ssh-keygen reads a key's passphrase when there is no terminal); returns whether it
/// succeeded, its stdout as written and its stderr on one line.
fn ssh_keygen(
    args: &[&std::ffi::OsStr],
    input: Option<&[u8]>,
) -> Result<(bool, String, String), SignError> {
    let mut child = Command::new(SSH_KEYGEN)
        .args(args)
        .stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::inherit()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| SignError::NoSshKeygen { source })?;
    if let (Some(mut stdin), Some(input)) = (child.stdin.take(), input) {
        // A closed stdin (ssh-keygen exited early) shows in its status and stderr.
        let _ = stdin.write_all(input);
    }
    let out = child.wait_with_output().map_err(|source| SignError::Io {
        action: "cannot wait for",
        path: PathBuf::from(SSH_KEYGEN),
        source,
    })?;
    let stderr = String::from_utf8_lossy(&out.stderr)
        .trim()
        .replace('\n', " ");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    Ok((out.status.success(), stdout, stderr))
}

/// Checks that `key` is a key ssh-keygen can read, before anything runs; returns its
/// fingerprint line (`256 SHA256:… comment (ED25519)`).
///
/// # Errors
/// [`SignError::NoSshKeygen`], [`SignError::Unreadable`] or [`SignError::BadKey`].
pub fn check_key(key: &Path) -> Result<String, SignError> {
    require_file("the key", key)?;
    let (ok, out, err) = ssh_keygen(&["-l".as_ref(), "-f".as_ref(), key.as_os_str()], Some(b""))?;
    if !ok {
        return Err(SignError::BadKey {
            path: key.to_path_buf(),
            said: if err.is_empty() {
                out.trim().to_string()
            } else {
                err
            },
        });
    }
    Ok(out.trim().to_string())
}

/// `ssh-keygen`'s arguments to sign `file` with `key` in capshim's namespace.
fn sign_args<'a>(key: &'a Path, file: &'a Path) -> [&'a std::ffi::OsStr; 7] {
    [
        "-Y".as_ref(),
        "sign".as_ref(),
        "-f".as_ref(),
        key.as_os_str(),
        "-n".as_ref(),
        NAMESPACE.as_ref(),
        file.as_os_str(),
    ]
}

/// Signs a scratch file with `key`, ssh-keygen's stdin empty: whether the key signs without a
/// passphrase being typed (it has none, or ssh-agent holds it), as it must where no terminal
/// can ask for one.
///
/// # Errors
/// [`SignError::CannotSignUnattended`] with what ssh-keygen said; [`SignError::NoSshKeygen`];
/// [`SignError::Io`] when the scratch file cannot be written.
pub fn try_sign_unattended(key: &Path) -> Result<(), SignError> {
    let work = tempfile::Builder::new()
        .prefix("capshim-keycheck-")
        .tempdir()
        .map_err(|source| SignError::Io {
            action: "cannot create a temporary directory in",
            path: std::env::temp_dir(),
            source,
        })?;
    let scratch = work.path().join("check");
    std::fs::write(&scratch, "capshim signing-key check\n").map_err(|source| SignError::Io {
        action: "cannot write",
        path: scratch.clone(),
        source,
    })?;
    let (ok, _, said) = ssh_keygen(&sign_args(key, &scratch), Some(b""))?;
    if ok && work.path().join("check.sig").is_file() {
        Ok(())
    } else {
        Err(SignError::CannotSignUnattended {
            key: key.to_path_buf(),
            said,
        })
    }
}

/// Signs `dir/SHA256SUMS` with `key` into `dir/SHA256SUMS.sig`; an existing signature is
/// replaced only with `replace`. Returns the signature's path.
///
/// # Errors
/// [`SignError`]: no ssh-keygen, a bad key, a signature that exists, ssh-keygen failing.
pub fn sign(dir: &Path, key: &Path, replace: bool) -> Result<PathBuf, SignError> {
    let sums = dir.join(SUMS_FILE);
    let sig = dir.join(SIG_FILE);
    if !replace && std::fs::symlink_metadata(&sig).is_ok() {
        return Err(SignError::Exists(sig));
    }
    require_file("the key", key)?;
    // ssh-keygen signs a copy and writes its signature beside it: its stdin stays free for a
    // passphrase, and nothing is written into the bundle but by capshim, below.
    let work = tempfile::Builder::new()
        .prefix("capshim-sign-")
        .tempdir()
        .map_err(|source| SignError::Io {
            action: "cannot create a temporary directory in",
            path: std::env::temp_dir(),
            source,
        })?;
    let copy = work.path().join(SUMS_FILE);
    std::fs::copy(&sums, &copy).map_err(|source| SignError::Io {
        action: "cannot read",
        path: sums.clone(),
        source,
    })?;
    let (ok, _, err) = ssh_keygen(&sign_args(key, &copy), None)?;
    let text = std::fs::read_to_string(work.path().join(SIG_FILE)).unwrap_or_default();
    if !ok || !text.starts_with("-----BEGIN SSH SIGNATURE-----") {
        return Err(SignError::SignFailed {
            key: key.to_path_buf(),
            sums,
            said: err,
        });
    }
    let io = |action| {
        let path = sig.clone();
        move |source| SignError::Io {
            action,
            path,
            source,
        }
    };
    if replace {
        let tmp = dir.join(format!(".{SIG_FILE}.new"));
        std::fs::write(&tmp, &text).map_err(io("cannot write"))?;
        std::fs::rename(&tmp, &sig).map_err(io("cannot replace"))?;
    } else {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&sig)
            .map_err(io("cannot create"))?;
        file.write_all(text.as_bytes())
            .map_err(io("cannot write"))?;
    }
    Ok(sig)
}

/// Checks `dir/SHA256SUMS.sig` as a signature of `dir/SHA256SUMS` by `identity`, as
/// `allowed_signers` (an OpenSSH allowed-signers file) allows; returns what ssh-keygen said
/// (`Good "capshim-bundle" signature for ID with ED25519 key SHA256:…`).
///
/// # Errors
/// [`SignError::Missing`] or [`SignError::Bad`] (untrusted); [`SignError::NoSshKeygen`] or
/// [`SignError::Unreadable`] when the check cannot run.
pub fn verify(dir: &Path, allowed_signers: &Path, identity: &str) -> Result<String, SignError> {
    require_file("the allowed signers file", allowed_signers)?;
    let sig = dir.join(SIG_FILE);
    match std::fs::symlink_metadata(&sig) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(SignError::Missing {
                dir: dir.to_path_buf(),
            });
        }
        Err(source) => {
            return Err(SignError::Io {
                action: "cannot read",
                path: sig,
                source,
            });
        }
        Ok(m) if !m.is_file() => {
            return Err(SignError::Bad {
                dir: dir.to_path_buf(),
                identity: identity.to_string(),
                allowed: allowed_signers.to_path_buf(),
                said: format!("{SIG_FILE} is not a regular file"),
            });
        }
        Ok(_) => {}
    }
    let sums = dir.join(SUMS_FILE);
    let data = std::fs::read(&sums).map_err(|source| SignError::Io {
        action: "cannot read",
        path: sums,
        source,
    })?;
    let args = [
        "-Y".as_ref(),
        "verify".as_ref(),
        "-f".as_ref(),
        allowed_signers.as_os_str(),
        "-I".as_ref(),
        identity.as_ref(),
        "-n".as_ref(),
        NAMESPACE.as_ref(),
        "-s".as_ref(),
        sig.as_os_str(),
    ];
    let (ok, out, err) = ssh_keygen(&args, Some(&data))?;
    let said = [out.trim().replace('\n', " "), err]
        .into_iter()
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    if ok {
        Ok(said)
    } else {
        Err(SignError::Bad {
            dir: dir.to_path_buf(),
            identity: identity.to_string(),
            allowed: allowed_signers.to_path_buf(),
            said,
        })
    }
}
