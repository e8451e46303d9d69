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
    /// A perf.data file recorded on an architecture this build cannot read.
    #[error("perf.data was recorded on {arch}, which this build cannot read")]
    WrongArchitecture {
        /// The file.
        path: PathBuf,
        /// The architecture the file states.
        arch: String,
    },
    /// The perf.data parser failed.
    #[error("cannot read perf.data: {detail}")]
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
    #[error("{what}: bad header: {err}")]
    Header {
        /// Which format.
        what: &'static str,
        /// The serde_json error (in the message, not chained: it would be printed twice).
        err: serde_json::Error,
    },
    /// A write failed.
    #[error("cannot write {what}: {err}")]
    Io {
        /// What was being written.
        what: &'static str,
        /// The I/O error (in the message, not chained).
        err: std::io::Error,
    },
    /// The input could not be read (missing file, a directory, permission, I/O error).
    #[error("cannot read it: {detail}")]
    Read {
        /// The operating system's words, or what is wrong.
        detail: String,
    },
    /// The totals a file states (`summary:`/`totals:`, a header's sample count) disagree
    /// with what its records add up to: a cut or edited file, not to be taken as the truth.
    #[error("{what}: {stated_as} states {stated} {unit}, but its records add up to {read}{hint}")]
    TotalsMismatch {
        /// Which format.
        what: &'static str,
        /// Where the stated total is (`its summary: line`).
        stated_as: String,
        /// The stated total.
        stated: u64,
        /// What the records add up to.
        read: u64,
        /// The unit (`Ir`, `instructions`).
        unit: String,
        /// What it likely means and what to do.
        hint: String,
    },
    /// The input would need more memory than allowed.
    #[error("{what} is too large: {detail}")]
    TooLarge {
        /// What.
        what: &'static str,
        /// By how much, and what to do.
        detail: String,
    },
    /// The file holds another kind of profile than the command needs (an exact profile where
    /// samples are wanted, or the reverse).
    #[error("this is {found}, and {wanted} are needed here{hint}")]
    WrongKind {
        /// What the file is (`a callgrind out file`).
        found: &'static str,
        /// What is needed (`samples`).
        wanted: &'static str,
        /// `; ...` advice, or empty.
        hint: &'static str,
    },
    /// The loader recognised no format it reads.
    #[error("unknown file format (it starts with {start}); expected perf.data, perf script text, a callgrind out file or a proftrust sample/exact file, compressed with gzip, zstd or xz or not (--format forces one)")]
    UnknownFormat {
        /// The first bytes, escaped.
        start: String,
    },
    /// An error of the file named `name` (the loader's errors name their input once).
    #[error("{name}: {error}")]
    File {
        /// The input's name as the user gave it (`p.data`, `<stdin>`).
        name: String,
        /// What went wrong (in the message, not chained: anyhow would print it twice).
        error: Box<FormatError>,
    },
}
