//! What `bench` and `verify` (and every experiment command to come) share on the command
//! line and at the end: `--keep-going`, `--json`, `--sign`; the signing key checked before the
//! first run; a stopped run's exit; a sealed one presented.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context as _, bail};
use clap::Args;

use super::{UsageError, sign, stopped};
use crate::experiment::ExperimentError;
use crate::experiment::seal::{Sealed, check_signing_key};
use crate::launch::{Os, dylib};
use capshim_macho::Arch;

/// The arms every experiment compares, and the shim they use.
#[derive(Debug, Args)]
pub struct ArmArgs {
    /// An arm besides stock: [LABEL=]ITEM[,ITEM...], an item being a named profile (`capshim
    /// profiles` lists them), file=PROFILE.toml, family-max=N, threadgroup-memory=BYTES,
    /// working-set=BYTES, or a llama.cpp variable for this arm (GGML_METAL_BF16_DISABLE=1).
    /// Repeat for several arms [default: native where the host chip is known, else apple9-64k;
    /// none for verify --save-base].
    #[arg(long = "arm", visible_alias = "profile", value_name = "[LABEL=]SPEC")]
    pub arms: Vec<String>,

    #[command(flatten)]
    pub shim: ShimArgs,
}

impl ArmArgs {
    /// The arms, resolved: stock, and one per --arm (`default_arm`: a default arm when none is
    /// given); `reserved` labels refused with their reason. Notes go to stderr.
    ///
    /// # Errors
    /// A usage error (exit code 2) for a bad arm; any other resolution error.
    pub fn resolve(
        &self,
        default_arm: bool,
        reserved: &[(&str, &'static str)],
    ) -> anyhow::Result<Vec<crate::arms::Arm>> {
        self.shim.resolve(&self.arms, default_arm, reserved)
    }

    /// The shim library the arms with a profile inject (`needed`): [`ShimArgs::shim_library`].
    ///
    /// # Errors
    /// When it is not found, not a file, or not a library this platform's loader takes.
    pub fn shim_library(&self, needed: bool) -> anyhow::Result<Option<(PathBuf, Vec<Arch>)>> {
        self.shim.shim_library(needed)
    }
}

/// How arms are resolved and run with the shim: what every experiment with arms shares,
/// whether its arms come from --arm (bench, verify) or from a search (tune).
#[derive(Debug, Args)]
pub struct ShimArgs {
    /// The host chip's CPU brand, instead of this machine's (e.g. "Apple M1 Ultra (Virtual)"):
    /// what `native` arms use, e.g. to run native off a macOS guest or for another chip.
    #[arg(long = "cpu-brand", value_name = "STRING")]
    pub cpu_brand: Option<String>,

    /// Accept arm values beyond any known Apple GPU: a family above Apple10 (1010),
    /// threadgroup memory above 65536 bytes, a working set above this machine's memory.
    #[arg(long)]
    pub allow_beyond_hardware: bool,

    /// The shim library [default: libcapshim.dylib (macOS) or libcapshim.so (Linux), searched
    /// where `capshim run` looks: next to the capshim executable, ../lib/capshim/ beside it,
    /// /usr/local/lib/capshim/, /opt/homebrew/lib/capshim/ (macOS), ~/.local/lib/capshim/].
    #[arg(long = "dylib", value_name = "PATH")]
    pub dylib: Option<PathBuf>,

    /// Run and compare arms with a profile even when the shim did not activate in them (the
    /// report says so).
    #[arg(long = "allow-inactive")]
    pub allow_inactive: bool,
}

impl ShimArgs {
    /// The arms of `specs`, resolved: stock, and one per spec (`default_arm`: a default arm
    /// when none is given); `reserved` labels refused with their reason. Notes go to stderr.
    ///
    /// # Errors
    /// A usage error (exit code 2) for a bad arm; any other resolution error.
    pub fn resolve(
        &self,
        specs: &[String],
        default_arm: bool,
        reserved: &[(&str, &'static str)],
    ) -> anyhow::Result<Vec<crate::arms::Arm>> {
        let resolution = crate::arms::resolve(
            specs,
            crate::arms::Options {
                default_arm,
                reserved,
                cpu_brand: self.cpu_brand.as_deref(),
                allow_beyond_hardware: self.allow_beyond_hardware,
            },
            &crate::platform::facts::Real::default(),
        )
        .map_err(|e| {
            if e.is_usage() {
                anyhow::Error::new(UsageError(e.to_string()))
            } else {
                e.into()
            }
        })?;
        for note in &resolution.notes {
            crate::term::note(note);
        }
        Ok(resolution.arms)
    }

    /// The shim library the arms with a profile inject (`needed`), found and checked (its
    /// format and architectures, [`dylib::check`]): its path and architectures.
    ///
    /// # Errors
    /// When it is not found, not a file, or not a library this platform's loader takes.
    pub fn shim_library(&self, needed: bool) -> anyhow::Result<Option<(PathBuf, Vec<Arch>)>> {
        if !needed {
            return Ok(None);
        }
        let os = Os::current();
        let path = dylib::locate_here(self.dylib.as_deref(), os)?;
        let path = existing_file(
            &path,
            "shim library",
            &format!(
                "build the shim (crates/shim: `cargo build` puts {} in target/<profile>/, next to \
                 capshim) or give it with --dylib PATH; it is injected with {}",
                os.library_name(),
                os.injection_var()
            ),
        )?;
        // The real file: what the loader opens, and where a space or colon would matter.
        let arches = dylib::check(&path, os)?;
        Ok(Some((path, arches)))
    }
}

/// Where llama-bench and llama.cpp's other tools are: what `bench` and `tune` share.
#[derive(Debug, Args)]
pub struct LlamaBenchArgs {
    /// llama-bench executable [default: `llama-bench` in --llama-dir, else on PATH, else in the
    /// setup cache of scripts/llama/build.sh].
    #[arg(
        long = "llama-bench",
        value_name = "PATH",
        conflicts_with = "llama_dir"
    )]
    pub llama_bench: Option<PathBuf>,

    /// The folder of llama.cpp's tools (llama-bench, llama-perplexity, llama-completion,
    /// test-backend-ops), e.g. a llama.cpp build's build/bin.
    #[arg(long = "llama-dir", value_name = "DIR")]
    pub llama_dir: Option<PathBuf>,
}

impl LlamaBenchArgs {
    /// The llama-bench executable: --llama-bench, else found as its default says.
    ///
    /// # Errors
    /// When the file given is not an executable file, or none is found.
    pub fn llama_bench(&self) -> anyhow::Result<PathBuf> {
        match &self.llama_bench {
            Some(p) => existing_file(
                p,
                "llama-bench",
                "give the llama-bench executable with --llama-bench",
            ),
            None => Ok(crate::llama::tools::find(
                "llama-bench",
                self.llama_dir.as_deref(),
            )?),
        }
    }
}

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
    /// error; a sealed one is signed (with --sign), its report printed, and `judge` gives its
    /// exit code.
    ///
    /// # Errors
    /// The run's error; signing or printing failing.
    pub fn finish<S: Sealed>(
        &self,
        result: Result<S, ExperimentError>,
        judge: impl FnOnce(S) -> ExitCode,
    ) -> anyhow::Result<ExitCode> {
        let sealed = match result {
            Ok(sealed) => sealed,
            Err(e) => return stopped(e.interrupted_by(), e),
        };
        let key: Option<&Path> = self.sign.as_deref();
        let bundle = sealed.bundle();
        sign::present(&bundle.dir, key, bundle.report(self.json))?;
        Ok(judge(sealed))
    }
}

/// An input file named on the command line, which must exist, be a regular file and hold
/// something: its absolute path, or an error naming `what`, what is wrong and the `fix`.
///
/// # Errors
/// When it does not exist, cannot be read, is not a regular file (a directory, a device such
/// as `/dev/null`, a FIFO), is empty, or cannot be resolved.
pub fn existing_file(path: &Path, what: &str, fix: &str) -> anyhow::Result<PathBuf> {
    use std::os::unix::fs::FileTypeExt;
    let shown = path.display();
    let meta = match std::fs::metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            bail!("{what} {shown} does not exist; {fix}")
        }
        Err(e) => bail!("{what} {shown} cannot be read ({e}); {fix}"),
    };
    let kind = meta.file_type();
    let not_regular = if kind.is_dir() {
        Some("a directory")
    } else if kind.is_char_device() || kind.is_block_device() {
        Some("a device")
    } else if kind.is_fifo() {
        Some("a FIFO or pipe")
    } else if kind.is_socket() {
        Some("a socket")
    } else {
        None
    };
    if let Some(it_is) = not_regular {
        bail!("{what} {shown} is not a regular file (it is {it_is}); {fix}");
    }
    if meta.len() == 0 {
        bail!("{what} {shown} is empty; {fix}");
    }
    std::fs::canonicalize(path).with_context(|| format!("cannot resolve {what} {shown}"))
}

/// The exit of a run that sealed its bundle and still failed (`--keep-going`): says `why`.
pub fn sealed_failure(why: String) -> ExitCode {
    crate::term::error(format!("{why}; the bundle is sealed"));
    ExitCode::FAILURE
}
