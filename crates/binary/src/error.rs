//! The one error type of this crate.

use std::path::PathBuf;

/// Everything that can go wrong while reading a binary or analysing its code.
///
/// Every variant names the file (or function) it is about and, where there is one, the fix.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BinaryError {
    /// The file could not be read at all.
    #[error("cannot read {}: {err}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What the OS said (in the message, not chained: it would be printed twice).
        err: std::io::Error,
    },
    /// The file has no bytes.
    #[error("{} is empty (0 bytes): expected an ELF executable or shared object", path.display())]
    Empty {
        /// The file.
        path: PathBuf,
    },
    /// The file does not start with the ELF magic.
    #[error("{} is not an ELF file ({what}): expected a Linux executable or shared object", path.display())]
    NotElf {
        /// The file.
        path: PathBuf,
        /// What it looks like instead.
        what: String,
    },
    /// The file ends before a structure its headers promise.
    #[error("{} is truncated: {what} extends to byte {needed} but the file has only {len} bytes (copy the file again)", path.display())]
    Truncated {
        /// The file.
        path: PathBuf,
        /// Which structure is cut.
        what: String,
        /// Bytes the structure needs (end offset).
        needed: u64,
        /// Actual file size.
        len: u64,
    },
    /// Machine-code decoding (instructions, CFG, skid correction, paths) asked of a binary
    /// of another architecture: symbols, inline frames and lines work for every
    /// architecture, decoding only for x86-64.
    #[error("{} is an {arch} binary: {what} need x86-64 machine code; its functions, inline frames and source lines are named all the same (`proftrust read`)", path.display())]
    NotX86_64 {
        /// The file.
        path: PathBuf,
        /// Its architecture as the ELF header states it (`AArch64 (EM_AARCH64)`).
        arch: String,
        /// What needed the decoding (`the control-flow graph`, `skid correction`).
        what: String,
    },
    /// The ELF structures are inconsistent.
    #[error("{} is a malformed ELF file: {what}", path.display())]
    Malformed {
        /// The file.
        path: PathBuf,
        /// What the parser rejected.
        what: String,
    },
    /// A function's bytes are not in any section with file contents.
    #[error("function {function} at {address:#x} in {} has no code bytes in the file (is it in a NOBITS section, or is the symbol table wrong?)", path.display())]
    NoCode {
        /// The file.
        path: PathBuf,
        /// The function.
        function: String,
        /// Its start address.
        address: u64,
    },
    /// Simple-loop enumeration hit its cap.
    #[error("loop with header {header:#x} in {function} has more than {cap} simple loops (elementary cycles through the header); raise the cap (e.g. --simple-loop-cap) or analyse an inner loop")]
    CapExceeded {
        /// Function name.
        function: String,
        /// Address of the loop header block.
        header: u64,
        /// The cap that was hit.
        cap: usize,
    },
    /// A loop that does not belong to the CFG it was given with.
    #[error("loop {loop_id} does not belong to the CFG of {function}: {what}")]
    ForeignLoop {
        /// Function name.
        function: String,
        /// Loop id.
        loop_id: u32,
        /// What is inconsistent.
        what: String,
    },
}
