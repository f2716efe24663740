//! What to do for common workloads, recognised by the program's name or place: which can be
//! injected and how (`capshim run`, `capshim agent`), and what decides their Metal paths.
//!
//! What capshim knows about Ollama and LM Studio lives in the shared pre-flight
//! (`launch::preflight`'s `App`), which `run`, `bench` and `agent` refuse them with; the
//! lines here reuse its words, so doctor and `run` say the same.

use std::path::Path;

use super::{Check, Status};
use crate::launch::preflight::{App, OLLAMA_CHILDREN, OLLAMA_WORKING_PATH};

/// `program.workload`, when the program is one capshim knows; `loads` is whether the
/// pre-flight found the shim can load into it (`None`: not checked).
pub fn advice(program: &Path, loads: Option<bool>) -> Option<Check> {
    const ID: &str = "program.workload";
    let name = program.file_name()?.to_string_lossy().to_lowercase();
    let path = program.display().to_string();
    let in_app = path.contains(".app/Contents/");
    let refused = loads == Some(false);
    let status = if refused { Status::Warn } else { Status::Ok };
    let check = |summary: String, detail: &str, fix: String| {
        Some(Check::with(ID, status, summary, detail, fix))
    };
    if name == "ollama" {
        let detail = format!(
            "Ollama runs each model in a child process: {OLLAMA_CHILDREN}, so keep --scope children (the default) for the shim to reach it. Ollama's own releases (the app, and its release archive) are signed with the hardened runtime and no entitlements, which macOS answers by ignoring DYLD_INSERT_LIBRARIES; `capshim run` and `agent` refuse them (the pre-flight line). Homebrew's `ollama` is built from source and not hardened."
        );
        return if in_app || refused {
            let summary = if in_app {
                "Ollama's app: signed with the hardened runtime, as Ollama ships it"
            } else {
                "Ollama: `capshim run` refuses this copy (program.preflight says why)"
            };
            check(
                summary.to_string(),
                &detail,
                OLLAMA_WORKING_PATH.to_string(),
            )
        } else {
            check(
                "Ollama's command-line server".to_string(),
                &detail,
                format!(
                    "`capshim run -- {path} serve`, or at login: `capshim agent --label com.example.ollama --install -- {path} serve` (stop `brew services` first: it starts Ollama without the shim)"
                ),
            )
        };
    }
    if path.contains("/LM Studio.app/") {
        return check(
            "LM Studio: its helpers validate libraries, so the shim cannot reach them".to_string(),
            &App::LmStudio.to_string(),
            App::LmStudio.working_path(),
        );
    }
    if name.starts_with("llama-") {
        return check(
            format!("llama.cpp's {name}"),
            "llama.cpp asks Metal once, in ggml_metal_device_init, and logs what it decided on stderr (GPU family, simdgroup reduction, simdgroup matrix mul., has bfloat): check those lines after a run; `capshim explain` predicts them. Builds from source (your own, Homebrew's) are usually not hardened.",
            format!(
                "`capshim run -- {path} -m MODEL …`; a server at login: `capshim agent --label com.example.{name} --install -- {path} -m /abs/MODEL.gguf`; on a macOS 14 guest add --no-mmap (known.stale-mmap-buffers)"
            ),
        );
    }
    if name.starts_with("whisper-") {
        return check(
            format!("whisper.cpp's {name}: the GPU only with Apple7 or later answered"),
            "whisper.cpp goes through ggml-metal with flash attention on by default, so without Apple7 its heavy ops run on the CPU (`capshim explain` shows whisper.cpp's decision)",
            format!(
                "`capshim run -- {path} …` with the native profile (the default where the chip is known)"
            ),
        );
    }
    if name.starts_with("python") {
        return check(
            "a Python interpreter: the framework it imports decides".to_string(),
            "MLX creates residency sets when Metal3 is answered (capshim never raises it) and routes kernels by the architecture name; PyTorch picks its MPS device by Mac2, which capshim does not change; `capshim explain` shows both. A framework Python (python.org, Homebrew) re-execs Python.app's interpreter in the same process (program.python).",
            format!(
                "`capshim run -- {path} SCRIPT.py`; add --scope process to keep the shim out of programs the script starts"
            ),
        );
    }
    if in_app {
        return check(
            "a program inside an app bundle: usually signed by its developer with the hardened runtime".to_string(),
            "the pre-flight line says whether macOS lets DYLD_INSERT_LIBRARIES reach it",
            if refused {
                "use a command-line build of the same tool (not hardened), or ask its developer for the com.apple.security.cs.allow-dyld-environment-variables entitlement".to_string()
            } else {
                format!("`capshim run -- {path}`")
            },
        );
    }
    None
}
