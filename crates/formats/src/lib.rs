//! # proftrust-formats
//!
//! Readers and writers of the profile files proftrust meets, all producing the nouns of
//! `proftrust-model` with **module-relative** addresses.
//!
//! ## Entry point: the loader
//!
//! [`load_samples`], [`load_counts`], [`load_exact`] and [`load`] read any supported file —
//! perf.data (file or pipe mode), `perf script` text, callgrind out files, proftrust sample
//! and exact files — from a [`Source`] (path, bytes or reader), undo gzip/zstd/xz
//! compression by content, sniff the format by content, and return the model's
//! `SampleSet` / `ExactProfile` with a [`LoadInfo`] (format, compression, warnings). Objects
//! the profile names are looked up through the [`SymbolSource`] and
//! [`segments::SegmentSource`] in [`LoadOptions`] (the CLI passes
//! `proftrust_binary::BinaryLocator`). Keep this API stable: `check`, exports and fleet
//! build on it.
//!
//! ```
//! use proftrust_formats::{load_exact, LoadOptions, Source};
//! let text = "version: 1\npositions: instr\nevents: Ir\nob=/bin/prog\nfn=main\n0x1000 3\n";
//! let (exact, info) = load_exact(
//!     Source::Bytes { bytes: text.as_bytes(), name: "callgrind.out.1" },
//!     &LoadOptions::default(),
//! )
//! .unwrap();
//! assert_eq!(exact.total_instructions, 3);
//! assert_eq!(info.format.name(), "callgrind");
//! ```
//!
//! ## The readers behind it
//!
//! * [`native`] — proftrust's own versioned files: samples (`PTSAMP01`) and exact profiles
//!   (`PTEXACT1`); compact little-endian records behind a JSON header.
//! * [`read_perf_data`] / [`read_perf_data_with`] — perf.data (file and pipe mode, zstd
//!   records) with mmap-based module-relative addresses, call chains, branch stacks.
//! * [`count_perf_data`] — sample counts per (event, module-relative address) of a
//!   perf.data file by a lean streaming pass (no sorting, no per-sample allocation): what a
//!   per-symbol table needs. [`SampleCounts::from_samples`] gives the same from any
//!   [`proftrust_model::SampleSet`].
//! * [`perf_record`] — raw perf records through `linux-perf-event-reader` with the repairs
//!   its 0.10 needs, shared by the perf.data reader and the recorder's ring buffer.
//! * [`read_perf_script`] / [`write_perf_script`] — `perf script` text in and out.
//! * [`callgrind`] — callgrind out files, per-function totals, conversion to an
//!   `ExactProfile` with inferred load biases ([`SymbolSource`]).
//! * [`segments`] — runtime address → SVMA through an object's `PT_LOAD` segments.
//! * [`sniff`] — tells which [`Format`] a file holds from its first bytes.
//!
//! The formats, layouts and the choices made are described in `docs/file-formats.md`.
//!
//! Parsers take byte slices or `&str`; writers take `Write`. Only the loader opens the file
//! it is given (mapping large files read-only: the crate's one `unsafe`, in `sys.rs`), and
//! [`segments::ElfSegmentsFromDisk`] reads program headers; nothing spawns processes.
//! Every failure is a [`FormatError`] naming the format, the offset or line, and what is
//! wrong; no input makes a reader panic (see the mutation tests and the fuzz targets).
#![warn(missing_docs)]
#![deny(unsafe_code)]

pub mod callgrind;
mod error;
mod input;
mod load;
pub mod native;
mod perf_counts;
mod perf_data;
mod perf_names;
pub mod perf_record;
mod perf_script;
pub mod segments;
mod stacks;
mod sys;

pub use callgrind::{FunctionSymbol, NoSymbols, ObjectSymbols, SymbolSource};
pub use input::Compression;
pub use load::{
    load, load_counts, load_exact, load_samples, sniff_path, LoadInfo, LoadOptions, Loaded,
    Profile, Source, DEFAULT_MAX_RATIO, SNIFF_BYTES,
};
pub use perf_counts::{count_perf_data, LocationCount, SampleBranches, SampleCounts};
pub use perf_data::{
    read_perf_data, read_perf_data_unwinding, read_perf_data_with, PerfDataOptions,
};
pub use perf_script::{read_perf_script, write_perf_script};

pub use error::FormatError;

/// Things a reader could do only approximately (shown to the user as warnings).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReadNotes {
    /// One sentence each.
    pub warnings: Vec<String>,
}

/// The file formats proftrust reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Format {
    /// `perf.data` written by `perf record` (file or pipe mode).
    PerfData,
    /// Text printed by `perf script`.
    PerfScript,
    /// A `callgrind.out.PID` file written by valgrind's callgrind.
    Callgrind,
    /// proftrust's own sample file (`PTSAMP..`).
    NativeSamples,
    /// proftrust's own exact file (`PTEXACT.`).
    NativeExact,
}

impl Format {
    /// The name used in JSON output and messages.
    pub fn name(self) -> &'static str {
        match self {
            Format::PerfData => "perf.data",
            Format::PerfScript => "perf-script",
            Format::Callgrind => "callgrind",
            Format::NativeSamples => "samples",
            Format::NativeExact => "exact",
        }
    }

    /// The format as a noun for messages (`a perf.data file`, `perf script text`).
    pub fn noun(self) -> &'static str {
        match self {
            Format::PerfData => "a perf.data file",
            Format::PerfScript => "perf script text",
            Format::Callgrind => "a callgrind out file",
            Format::NativeSamples => "a proftrust sample file",
            Format::NativeExact => "a proftrust exact file",
        }
    }
}

/// The formats by the names `proftrust read --format` takes (`perf-data`; [`Format::name`]
/// is the name in JSON and messages, `perf.data`). No descriptions: the names say it.
impl proftrust_model::named::Named for Format {
    const ALL: &'static [(Self, &'static str, &'static str)] = &[
        (Format::PerfData, "perf-data", ""),
        (Format::PerfScript, "perf-script", ""),
        (Format::Callgrind, "callgrind", ""),
        (Format::NativeSamples, "samples", ""),
        (Format::NativeExact, "exact", ""),
    ];
}

impl std::str::FromStr for Format {
    type Err = String;
    /// The format by its `--format` name.
    fn from_str(s: &str) -> Result<Format, String> {
        <Format as proftrust_model::named::Named>::from_name(s)
    }
}

/// Guesses the format from the first bytes of a file (4 KiB are plenty).
///
/// Binary formats are recognised by their magic (`PERFILE2` in either byte order,
/// `PTSAMP`, `PTEXACT`); callgrind by its first meaningful line (`# callgrind format`,
/// `version:`, `creator:`, `events:` and the other header keys); `perf script` text by a line
/// shaped like a sample header or an indented frame. `None` when nothing fits.
pub fn sniff(head: &[u8]) -> Option<Format> {
    if head.starts_with(b"PERFILE2")
        || head.starts_with(b"2ELIFREP")
        || head.starts_with(b"PERFFILE")
    {
        return Some(Format::PerfData);
    }
    if head.starts_with(b"PTSAMP") {
        return Some(Format::NativeSamples);
    }
    if head.starts_with(b"PTEXACT") {
        return Some(Format::NativeExact);
    }
    // Text: tolerate a multi-byte character cut at the end of `head`.
    let text = match std::str::from_utf8(head) {
        Ok(t) => t,
        Err(e) if e.error_len().is_none() => std::str::from_utf8(&head[..e.valid_up_to()]).ok()?,
        Err(_) => return None,
    };
    sniff_text(text)
}

fn sniff_text(text: &str) -> Option<Format> {
    const CALLGRIND_KEYS: &[&str] = &[
        "version:",
        "creator:",
        "pid:",
        "cmd:",
        "part:",
        "thread:",
        "desc:",
        "positions:",
        "events:",
    ];
    for line in text.lines().take(50) {
        let t = line.trim();
        if t.is_empty() {
            continue;
        }
        if t.starts_with("# callgrind format") {
            return Some(Format::Callgrind);
        }
        if t.starts_with('#') {
            continue;
        }
        if CALLGRIND_KEYS.iter().any(|k| t.starts_with(k)) {
            return Some(Format::Callgrind);
        }
        break;
    }
    if perf_script::looks_like_perf_script(text) {
        return Some(Format::PerfScript);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sniff_magics_and_text() {
        assert_eq!(sniff(b"PERFILE2\x68\0\0\0"), Some(Format::PerfData));
        assert_eq!(sniff(b"PTSAMP01...."), Some(Format::NativeSamples));
        assert_eq!(sniff(b"PTEXACT1...."), Some(Format::NativeExact));
        assert_eq!(
            sniff(b"# callgrind format\nversion: 1\n"),
            Some(Format::Callgrind)
        );
        assert_eq!(
            sniff(b"\nversion: 1\ncreator: x\n"),
            Some(Format::Callgrind)
        );
        assert_eq!(sniff(b""), None);
        assert_eq!(sniff(b"\xff\xfe\x00garbage"), None);
        assert_eq!(sniff(b"hello world\n"), None);
        assert_eq!(
            sniff(
                b"  hot 23174  3233.481746:     100000 cpu-clock:  ffffffff81d7fadd f+0x6d ([k])\n"
            ),
            Some(Format::PerfScript)
        );
        assert_eq!(
            sniff(b"   5560a69e91ed fa (/tmp/fmt/hot)\n"),
            Some(Format::PerfScript)
        );
    }
}
