//! Apps capshim knows cannot be injected as they ship, recognised by place and signature,
//! each refused with the reason and the way that works.
//!
//! - **Ollama.** Its releases (`Ollama.app`, and the `ollama-darwin.tgz` made from the same
//!   files) are signed by Ollama with the hardened runtime and no entitlements (ollama
//!   `scripts/build_darwin.sh`: `codesign … --options=runtime` for `ollama`, `llama-server`
//!   and every library), so macOS ignores `DYLD_INSERT_LIBRARIES` for the server and its
//!   children. Homebrew's `ollama` is built from source and not hardened. Since ollama pull
//!   request 16031 (2026-05-29) the server runs each GGUF model in upstream llama.cpp's
//!   `llama-server` (`llm/llama_server.go`, `startLlamaServer`: `exec.Command` with
//!   `os.Environ()`), found beside `ollama` or in `lib/ollama`, and each MLX model in
//!   `ollama runner --mlx-engine` (`x/mlxrunner/client.go`), again with `os.Environ()`: the
//!   children inherit the shim under `--scope children`.
//! - **LM Studio.** Signed by its developer (team `D65G88RHWN`, lmstudio-bug-tracker issues
//!   1494 and 2290) and notarized; its helper processes use the hardened runtime with library
//!   validation (issue 1494: the Plugin Helper lacks `disable-library-validation`), so an
//!   ad-hoc signed libcapshim cannot load into them whatever the app itself accepts.

use std::fmt;
use std::path::{Path, PathBuf};

use super::PreflightError;
use crate::platform::facts::SystemFacts;
use capshim_macho::Binary;

/// The processes Ollama starts for models, as its current source starts them.
pub const OLLAMA_CHILDREN: &str = "upstream llama.cpp's `llama-server` for GGUF models and `ollama runner --mlx-engine` for MLX models, each started with Ollama's own environment";

/// The way to run Ollama with the shim.
pub const OLLAMA_WORKING_PATH: &str = "quit the Ollama app, install the command-line server with Homebrew (`brew install ollama`: built from source, not hardened), check it with `capshim doctor -- $(command -v ollama)`, then `capshim run -- ollama serve`, or at login `capshim agent --label com.example.ollama --install -- /opt/homebrew/bin/ollama serve` (stop `brew services` first: it starts Ollama without the shim)";

/// LM Studio's signing team.
pub const LM_STUDIO_TEAM: &str = "D65G88RHWN";

/// An app capshim knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum App {
    /// Ollama's own release: `Ollama.app`, or an `ollama` the pre-flight refused.
    Ollama,
    /// LM Studio: inside `LM Studio.app`, or signed by its team.
    LmStudio,
}

impl fmt::Display for App {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            App::Ollama => f.write_str(
                "Ollama signed with the hardened runtime, as Ollama ships it (its app and its release archive carry no entitlements)",
            ),
            App::LmStudio => write!(
                f,
                "part of LM Studio, signed by its developer (team {LM_STUDIO_TEAM}) with the hardened runtime; the helper processes it starts validate libraries, so an ad-hoc signed libcapshim cannot load into them"
            ),
        }
    }
}

impl App {
    /// What works instead.
    pub fn working_path(self) -> String {
        match self {
            App::Ollama => format!(
                "{OLLAMA_WORKING_PATH}. Its children ({OLLAMA_CHILDREN}) then inherit the shim under --scope children, the default"
            ),
            App::LmStudio => "run the model with a program that accepts the shim instead: llama.cpp's own `llama-server -m MODEL.gguf` (`brew install llama.cpp`) under `capshim run`, or Homebrew's `ollama` with `capshim run -- ollama serve` or `capshim agent`; LM Studio's downloaded models are GGUF files either can load".to_string(),
        }
    }
}

/// The app `program` belongs to, when capshim knows it: by the real path (an app bundle,
/// or the name `ollama`) or by the signing team.
fn recognise(facts: &dyn SystemFacts, program: &Path) -> Option<App> {
    let real = program
        .canonicalize()
        .unwrap_or_else(|_| program.to_path_buf());
    let path = real.to_string_lossy();
    let team = match facts.binary(program) {
        Ok(Binary::Native { slices, .. }) => slices
            .iter()
            .find_map(|s| s.signature.as_ref().and_then(|sig| sig.team_id.clone())),
        _ => None,
    };
    if path.contains("/LM Studio.app/") || team.as_deref() == Some(LM_STUDIO_TEAM) {
        Some(App::LmStudio)
    } else if path.contains("/Ollama.app/") || real.file_name().is_some_and(|n| n == "ollama") {
        Some(App::Ollama)
    } else {
        None
    }
}

/// Where Ollama on macOS looks for the `llama-server` it starts, relative to its real
/// executable (ollama `llm/llama_binary.go`, `llamaCppBinaryCandidates`, darwin): beside it,
/// in `lib/ollama` under its folder, and in `../lib/ollama` (a Homebrew or CMake install).
/// Ollama also looks in its build and working folders; those are not followed here.
fn ollama_llama_servers(program: &Path) -> Vec<PathBuf> {
    let real = program
        .canonicalize()
        .unwrap_or_else(|_| program.to_path_buf());
    let Some(folder) = real.parent() else {
        return Vec::new();
    };
    let mut found = vec![
        folder.join("llama-server"),
        folder.join("lib/ollama/llama-server"),
    ];
    found.extend(folder.parent().map(|up| up.join("lib/ollama/llama-server")));
    found
}

/// Turns the outcome of the program's own checks into a refusal naming the app, its reason
/// and the way that works, for a known app: LM Studio always (its helpers refuse the
/// library whatever the program says), Ollama when its checks refused it (a copy re-signed
/// without the hardened runtime, or built from source, is let through). An Ollama that is
/// let through gets a warning for each `llama-server` where it looks for one that
/// `check_child` refuses: the GGUF models would then run without the shim.
pub(super) fn check(
    facts: &dyn SystemFacts,
    program: &Path,
    outcome: Result<Vec<String>, PreflightError>,
    check_child: &dyn Fn(&Path) -> Result<Vec<String>, PreflightError>,
) -> Result<Vec<String>, PreflightError> {
    let Some(app) = recognise(facts, program) else {
        return outcome;
    };
    let known = |restriction| PreflightError::KnownApp {
        program: program.to_path_buf(),
        app,
        restriction,
    };
    match (app, outcome) {
        (_, Err(PreflightError::WillNotLoad { restriction, .. })) => Err(known(Some(restriction))),
        (App::LmStudio, Ok(_)) => Err(known(None)),
        (App::Ollama, Ok(mut warnings)) => {
            for child in ollama_llama_servers(program) {
                if facts.file_mode(&child).is_err() {
                    continue;
                }
                if let Err(refusal) = check_child(&child) {
                    warnings.push(format!(
                        "{} starts {} for GGUF models, and the shim will not load there, so those models run without it: {refusal}",
                        program.display(),
                        child.display()
                    ));
                }
            }
            Ok(warnings)
        }
        (_, outcome) => outcome,
    }
}
