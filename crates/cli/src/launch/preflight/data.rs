//! Files that are not programs: the kernel executes only native binaries (Mach-O on macOS,
//! ELF on Linux) and scripts whose first line starts with `#!`; anything else fails with
//! "exec format error". A model file given as the command is the usual case, so the format
//! is named from the file's first bytes and the refusal says what to run instead.

use std::path::Path;

use super::PreflightError;
use crate::platform::facts::SystemFacts;

/// What a file's first bytes say it is, as far as running it goes.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Content {
    /// A native binary's or a script's signature: the system decides.
    Program,
    /// Text without a `#!` line (or nothing at all): the kernel refuses it, and only a
    /// shell's fallback (`execvp` on ENOEXEC) runs it, with `/bin/sh`.
    Text,
    /// A data format capshim recognises.
    Data {
        /// E.g. "a GGUF model file (llama.cpp's format)".
        what: &'static str,
        /// What to run instead; `FILE` stands for the file.
        instead: &'static str,
    },
    /// Binary bytes of no format capshim knows.
    Unknown,
}

const MODEL: &str = "give the program that loads it, e.g. `capshim run -- llama-server -m FILE`";

/// Reads `head` (a file's first bytes).
pub(super) fn content(head: &[u8]) -> Content {
    const PROGRAMS: [&[u8]; 9] = [
        b"#!",
        b"\x7fELF",
        b"\xfe\xed\xfa\xce",
        b"\xfe\xed\xfa\xcf",
        b"\xce\xfa\xed\xfe",
        b"\xcf\xfa\xed\xfe",
        b"\xca\xfe\xba\xbe",
        b"\xca\xfe\xba\xbf",
        b"\xbe\xba\xfe\xca",
    ];
    if PROGRAMS.iter().any(|magic| head.starts_with(magic)) {
        return Content::Program;
    }
    let data = |what, instead| Content::Data { what, instead };
    if head.starts_with(b"GGUF") {
        return data("a GGUF model file (llama.cpp's format)", MODEL);
    }
    if head.starts_with(b"GGML") || head.starts_with(b"ggjt") || head.starts_with(b"ggla") {
        return data("a model file in an older llama.cpp format", MODEL);
    }
    // safetensors: an 8-byte little-endian header length, then the JSON header.
    if head.len() > 9 && head[8] == b'{' && head[9] == b'"' {
        return data(
            "a safetensors model file",
            "give the program that loads it (a Python script with MLX or PyTorch, for example)",
        );
    }
    if head.starts_with(b"PK\x03\x04") {
        return data(
            "a ZIP archive (a PyTorch .pt checkpoint is one)",
            "give the program that reads it, or unpack it",
        );
    }
    if head.starts_with(b"\x1f\x8b") || head.starts_with(b"\x28\xb5\x2f\xfd") {
        return data("a compressed archive (gzip or zstd)", "unpack it first");
    }
    // Text, allowing a character cut off at the end of the head.
    let text = std::str::from_utf8(head).map_or_else(|e| e.error_len().is_none(), |_| true);
    if text && !head.contains(&0) {
        Content::Text
    } else {
        Content::Unknown
    }
}

/// The refusal for `program` when its first bytes are a data format capshim recognises (a
/// model file, an archive). `None` when it may be a program or cannot be read.
pub fn not_a_program(facts: &dyn SystemFacts, program: &Path) -> Option<PreflightError> {
    let head = facts.file_head(program).ok()?;
    let Content::Data { what, instead } = content(&head) else {
        return None;
    };
    Some(PreflightError::NotAProgram {
        path: program.to_path_buf(),
        what: what.to_string(),
        instead: instead.replace("FILE", &program.display().to_string()),
    })
}

/// For a file that is no native binary or `#!` script: the refusal of a recognised data
/// format, or a warning when it is text without `#!` or bytes of no known format (the
/// system may still run it, through a shell or a handler capshim cannot see).
pub(super) fn check(
    facts: &dyn SystemFacts,
    program: &Path,
) -> Result<Vec<String>, PreflightError> {
    if let Some(refusal) = not_a_program(facts, program) {
        return Err(refusal);
    }
    let shown = program.display();
    let warning = match facts.file_head(program).map(|head| content(&head)) {
        Ok(Content::Text) => format!(
            "{shown} is text without a #! line: the system does not execute it itself, and only a shell's fallback runs it, with /bin/sh; if it is a script, make its first line name its interpreter"
        ),
        Ok(Content::Unknown) => format!(
            "{shown} is neither a native executable nor a #! script, as far as capshim can read it; if it is not a program, the system will refuse to run it"
        ),
        _ => return Ok(Vec::new()),
    };
    Ok(vec![warning])
}
