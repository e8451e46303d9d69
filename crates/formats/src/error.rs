//! The one error type of this crate.

use std::path::PathBuf;

/// Everything that can go wrong reading or writing a profile file.
///
/// Every variant names what was being read and where, so that the CLI can print a message
/// that tells the user which file is bad and why.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FormatError {
    /// The input is empty.
    #[error("{what} is empty")]
    Empty {
        /// What was expected (`perf.data file`, `callgrind file`, ...).
        what: &'static str,
    },
    /// The input ends before a structure it announces.
    #[error("{what} is truncated at byte {offset}: expected {expected}")]
    Truncated {
        /// Which format.
        what: &'static str,
        /// Byte offset where more data was expected.
        offset: u64,
        /// What was expected there.
        expected: String,
    },
    /// A file of a known format whose version this build does not read.
    #[error("{what} version {found:?} is not supported (this build reads {supported}); {hint}")]
    UnsupportedVersion {
        /// Which format.
        what: &'static str,
        /// The version found in the file.
        found: String,
        /// The versions this build reads.
        supported: &'static str,
        /// What to do about it.
        hint: &'static str,
    },
    /// Structurally invalid binary data.
    #[error("{what} is corrupt at byte {offset}: {detail}")]
    Corrupt {
        /// Which format.
        what: &'static str,
        /// Byte offset of the bad structure.
        offset: u64,
        /// What is wrong.
        detail: String,
    },
    /// A text format line that cannot be parsed.
    #[error("{what} line {line}: {detail}")]
    Syntax {
        /// Which format.
        what: &'static str,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        detail: String,
    },
    /// The input is not of the expected format at all.
    #[error("not a {what}: {detail}")]
    NotThisFormat {
        /// The expected format.
        what: &'static str,
        /// What was found instead.
        detail: String,
    },
    /// A perf.data file recorded on another architecture.
    #[error("{path}: perf.data was recorded on {arch}; proftrust reads x86-64 profiles only (re-record on an x86-64 machine)")]
    WrongArchitecture {
        /// The file.
        path: PathBuf,
        /// The architecture the file states.
        arch: String,
    },
    /// The perf.data parser failed.
    #[error("{path}: cannot read perf.data: {detail}")]
    PerfData {
        /// The file.
        path: PathBuf,
        /// The parser's message.
        detail: String,
    },
    /// Inferring a module's load bias failed (callgrind import).
    #[error("cannot map {module}: {detail}")]
    Bias {
        /// The module path as the profile names it.
        module: String,
        /// Why.
        detail: String,
    },
    /// JSON header of a native file could not be (de)serialised.
    #[error("{what}: bad header: {source}")]
    Header {
        /// Which format.
        what: &'static str,
        /// The serde_json error.
        #[source]
        source: serde_json::Error,
    },
    /// A write failed.
    #[error("cannot write {what}: {source}")]
    Io {
        /// What was being written.
        what: &'static str,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}
