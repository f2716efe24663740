//! The base: the reference's logits as llama-perplexity saves them (`--kl-divergence-base`),
//! and the small description capshim writes beside it (`FILE.capshim.json`) so that a base
//! made on another machine (the bare-metal host) can be checked and compared with later.
//!
//! The file is perplexity.cpp's: `_logits_`, then the context (u32), the vocabulary size and
//! the number of chunks (i32 each), the text's tokens (i32 × context × chunks), then per chunk
//! the log-probabilities of its scored tokens, `context − 1 − context/2` of them, as
//! `2·⌈vocabulary/2⌉ + 4` u16 values each: about 2 bytes × vocabulary × scored tokens, so
//! gigabytes for large vocabularies. It is never copied into a bundle.

use std::io::Read;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::bundle::identity::FileId;
use crate::llama::backend_ops::KernelTests;

/// The bytes a base file starts with.
pub const MAGIC: &[u8; 8] = b"_logits_";

/// What `FILE.capshim.json` says it is.
pub const SIDECAR_FORMAT: &str = "capshim-verify-base";

/// A base file's header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Header {
    /// Tokens per chunk (llama-perplexity's context).
    pub ctx: u32,
    /// The model's vocabulary size.
    pub vocab: u32,
    /// Chunks scored.
    pub chunks: u32,
}

impl Header {
    /// The size, in bytes, a complete base with this header has.
    pub fn expected_bytes(&self) -> u64 {
        let (ctx, vocab, chunks) = (
            u64::from(self.ctx),
            u64::from(self.vocab),
            u64::from(self.chunks),
        );
        let per_token = 2 * (vocab.div_ceil(2) * 2 + 4);
        let scored = ctx.saturating_sub(1 + ctx / 2);
        8 + 12 + 4 * ctx * chunks + chunks * scored * per_token
    }
}

/// A base file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum BaseError {
    /// It cannot be read.
    #[error(
        "cannot read the base {path}: {source}; give the file `capshim verify --save-base` wrote"
    )]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// It is not llama-perplexity's logits.
    #[error(
        "{path} is not a base: it does not start with llama-perplexity's `_logits_` header; give the \
         file `capshim verify --save-base` (or llama-perplexity --kl-divergence-base) wrote"
    )]
    NotABase {
        /// The file.
        path: PathBuf,
    },
    /// It is shorter or longer than its header says.
    #[error(
        "the base {path} has {actual} bytes but its header ({ctx} tokens per chunk, {chunks} chunks, \
         a vocabulary of {vocab}) needs {expected}: it was cut short or changed; save it again with \
         `capshim verify --save-base`"
    )]
    WrongSize {
        /// The file.
        path: PathBuf,
        /// Its size.
        actual: u64,
        /// The size its header needs.
        expected: u64,
        /// Header: context.
        ctx: u32,
        /// Header: chunks.
        chunks: u32,
        /// Header: vocabulary.
        vocab: u32,
    },
    /// The sidecar is unreadable.
    #[error("{path} is not a capshim base description ({why}); remove it or save the base again")]
    Sidecar {
        /// The sidecar file.
        path: PathBuf,
        /// What is wrong.
        why: String,
    },
}

/// Reads and checks a base file's header and size.
///
/// # Errors
/// [`BaseError`] when it cannot be read, is not a base, or its size does not match.
pub fn read_header(path: &Path) -> Result<Header, BaseError> {
    let read = |source| BaseError::Read {
        path: path.to_path_buf(),
        source,
    };
    let mut file = std::fs::File::open(path).map_err(read)?;
    let actual = file.metadata().map_err(read)?.len();
    let mut head = [0u8; 20];
    if actual < 20 {
        return Err(BaseError::NotABase {
            path: path.to_path_buf(),
        });
    }
    file.read_exact(&mut head).map_err(read)?;
    if &head[..8] != MAGIC {
        return Err(BaseError::NotABase {
            path: path.to_path_buf(),
        });
    }
    let word = |i: usize| u32::from_le_bytes(head[i..i + 4].try_into().expect("4 bytes"));
    let header = Header {
        ctx: word(8),
        vocab: word(12),
        chunks: word(16),
    };
    let expected = header.expected_bytes();
    if expected != actual {
        return Err(BaseError::WrongSize {
            path: path.to_path_buf(),
            actual,
            expected,
            ctx: header.ctx,
            chunks: header.chunks,
            vocab: header.vocab,
        });
    }
    Ok(header)
}

/// The greedy text the reference produced, and how.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GreedyText {
    /// The prompt.
    pub prompt: String,
    /// Tokens generated at most.
    pub n_predict: u32,
    /// The seed.
    pub seed: u32,
    /// llama-completion's output (the generated text; the prompt is not echoed).
    pub text: String,
}

/// `FILE.capshim.json`: what the base in `FILE` was made from.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Sidecar {
    /// [`SIDECAR_FORMAT`].
    pub format: String,
    /// Version of this layout: 1.
    pub schema_version: u32,
    /// The capshim that wrote it.
    pub capshim_version: String,
    /// When, UTC.
    pub created_utc: String,
    /// The model the logits are from.
    pub model: FileId,
    /// The base itself: path when written, size and SHA-256.
    pub base: FileId,
    /// Its header.
    pub header: Header,
    /// The text scored: `built-in` or the file's name, with its SHA-256.
    pub text: String,
    /// The text's SHA-256.
    pub text_sha256: String,
    /// The arm that made it (`stock` on a bare-metal host).
    pub arm: String,
    /// The machine (`environment.json`'s `machine`).
    pub machine: serde_json::Value,
    /// The reference's greedy text, when it ran.
    pub greedy: Option<GreedyText>,
    /// The reference's kernel tests, when they ran on a device.
    pub kernel_tests: Option<KernelTests>,
}

/// Where the description of the base `path` is: `path` with `.capshim.json` appended.
pub fn sidecar_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_os_string();
    name.push(".capshim.json");
    PathBuf::from(name)
}

/// Reads the description beside the base `path`; `None` when there is none.
///
/// # Errors
/// [`BaseError::Sidecar`] when it exists but is not one.
pub fn read_sidecar(path: &Path) -> Result<Option<(PathBuf, Sidecar)>, BaseError> {
    let sidecar = sidecar_path(path);
    let text = match std::fs::read_to_string(&sidecar) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(BaseError::Sidecar {
                path: sidecar,
                why: e.to_string(),
            });
        }
    };
    let parsed: Sidecar = serde_json::from_str(&text).map_err(|e| BaseError::Sidecar {
        path: sidecar.clone(),
        why: e.to_string(),
    })?;
    if parsed.format != SIDECAR_FORMAT {
        return Err(BaseError::Sidecar {
            path: sidecar,
            why: format!("its format is {:?}, not {SIDECAR_FORMAT:?}", parsed.format),
        });
    }
    Ok(Some((sidecar, parsed)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base(dir: &Path, header: Header, extra: i64) -> PathBuf {
        let mut bytes = MAGIC.to_vec();
        for w in [header.ctx, header.vocab, header.chunks] {
            bytes.extend(w.to_le_bytes());
        }
        let len = (header.expected_bytes() as i64 + extra) as usize;
        bytes.resize(len, 0);
        let path = dir.join("b.kld");
        std::fs::write(&path, bytes).unwrap();
        path
    }

    #[test]
    fn headers_and_sizes_are_checked() {
        let tmp = tempfile::tempdir().unwrap();
        // The tiny model's: 32000 tokens of vocabulary, 4 chunks of 128 (measured: 16,132,084
        // bytes, written by llama-perplexity here).
        let h = Header {
            ctx: 128,
            vocab: 32000,
            chunks: 4,
        };
        assert_eq!(h.expected_bytes(), 16_132_084);
        assert_eq!(read_header(&base(tmp.path(), h, 0)).unwrap(), h);
        let e = read_header(&base(tmp.path(), h, -2))
            .unwrap_err()
            .to_string();
        assert!(e.contains("cut short or changed"), "{e}");
        std::fs::write(tmp.path().join("b.kld"), b"not logits at all, sorry").unwrap();
        let e = read_header(&tmp.path().join("b.kld")).unwrap_err();
        assert!(matches!(e, BaseError::NotABase { .. }), "{e}");
        assert!(matches!(
            read_header(&tmp.path().join("none.kld")),
            Err(BaseError::Read { .. })
        ));
    }

    #[test]
    fn the_sidecar_sits_beside_the_base() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("host.kld");
        assert_eq!(
            sidecar_path(&path),
            tmp.path().join("host.kld.capshim.json")
        );
        assert!(read_sidecar(&path).unwrap().is_none());
        std::fs::write(sidecar_path(&path), "{}").unwrap();
        let e = read_sidecar(&path).unwrap_err().to_string();
        assert!(e.contains("is not a capshim base description"), "{e}");
    }
}
