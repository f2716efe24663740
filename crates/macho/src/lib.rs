//! capshim's one Mach-O reader, built on the `object` crate, for the `capshim` CLI and for
//! `cargo xtask dist`. It reads; it decides nothing: the CLI's pre-flight warnings and dist's
//! pass/fail rules live with them.
//!
//! - [`inspect`] / [`inspect_file`] ([`binary`], [`file`](mod@file)): what a file is as far as
//!   injection cares: format, each slice's [`Arch`], whether it is a library, and what its
//!   code signature says; from a file only the headers, load commands and signature are read.
//! - [`Facts::read`] ([`facts`]): everything dist checks in a thin 64-bit Mach-O.
//! - [`signature`]: embedded code signatures, read one way for both: [`Signature`] (hardened
//!   runtime, entitlements) and [`CodeDirectory`] (how it was signed, page hashes checked).
//! - [`read_export_trie`] ([`exports`]): the names an image exports.
//! - [`hide_unlisted`] ([`symbols`]): applies an export list to an object file.
//! - [`interpose_tuples`] ([`interpose`]): dyld's interposing tuples, by the symbols they
//!   replace.
//! - [`record`]: capshim's version record in libcapshim, read without loading it.
//! - [`patch`]: sets the SDK version and the signature's identifier of a linked ad-hoc signed
//!   file, its page hashes kept valid.
//! - `testdata` (feature `testdata`): small hand-made Mach-O files and two linked ones
//!   (`fixtures/`) for tests.
//!
//! Pure Rust and no `unsafe`: every rule is tested on any platform with hand-made files and
//! two small linked ones.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod arch;
pub mod binary;
mod bytes;
pub mod exports;
pub mod facts;
pub mod file;
pub mod interpose;
pub mod patch;
pub mod record;
pub mod signature;
pub mod symbols;
#[cfg(any(test, feature = "testdata"))]
pub mod testdata;

pub use arch::Arch;
pub use binary::{Binary, Format, Slice, inspect};
pub use exports::read_export_trie;
pub use facts::{Dependency, Facts, Import, InspectError, SectionFact};
pub use file::{MAX_READ, OpenError, file_kind, inspect_file, require_regular};
pub use interpose::{Tuple, interpose_tuples};
pub use signature::{CodeDirectory, Signature};
pub use symbols::{HideError, hide_unlisted};
