//! The one loader: any profile file this crate reads, by content, compressed or not.
//!
//! ```text
//! Source (path | bytes | reader)
//!   -> bytes (a large file is mapped, not copied)
//!   -> decompress (gzip, zstd, xz: by magic, streaming into one buffer)
//!   -> sniff the format (or LoadOptions::format)
//!   -> the format's reader, with the caller's SymbolSource / SegmentSource
//!   -> SampleSet | SampleCounts | ExactProfile | CallgrindProfile, with a LoadInfo
//! ```
//!
//! Four entry points, one per thing a caller needs:
//!
//! * [`load_samples`] — a [`SampleSet`] from perf.data, `perf script` text or a proftrust
//!   sample file;
//! * [`load_counts`] — per-address [`SampleCounts`] of the same files (perf.data by the lean
//!   streaming pass: what a per-symbol table needs, several times faster);
//! * [`load_exact`] — an [`ExactProfile`] from a proftrust exact file or a callgrind out file
//!   (load biases given in [`LoadOptions::callgrind`] or inferred from the symbols);
//! * [`load`] — whatever the file holds ([`Profile`]), callgrind files as parsed.
//!
//! Every error is a [`FormatError::File`] naming the input once; a file of the other kind
//! (an exact profile where samples are wanted) is [`FormatError::WrongKind`].

use crate::callgrind::{self, CallgrindProfile, ExactOptions};
use crate::error::FormatError;
use crate::input::{self, Bytes, Compression};
use crate::segments::{ElfSegmentsFromDisk, SegmentSource};
use crate::{native, sniff, Format, PerfDataOptions, ReadNotes, SampleCounts};
use proftrust_model::symbols::{NoSymbols, SymbolSource};
use proftrust_model::unwind::UnwindSource;
use proftrust_model::{ExactProfile, SampleSet};
use std::io::Read;
use std::path::Path;

/// Where a profile comes from.
pub enum Source<'a> {
    /// A file (mapped when large). Its display form names it in messages.
    Path(&'a Path),
    /// Bytes in memory, with the name to use in messages.
    Bytes {
        /// The bytes (possibly compressed).
        bytes: &'a [u8],
        /// The name to use in messages (`<stdin>`, a URL, ...).
        name: &'a str,
    },
    /// Any reader (standard input, a socket), read to its end.
    Reader {
        /// The reader.
        reader: Box<dyn Read + 'a>,
        /// The name to use in messages.
        name: String,
    },
}

impl<'a> Source<'a> {
    /// Standard input, named `<stdin>`.
    pub fn stdin() -> Source<'static> {
        Source::Reader {
            reader: Box::new(std::io::stdin()),
            name: "<stdin>".into(),
        }
    }

    /// The name used in messages.
    pub fn name(&self) -> String {
        match self {
            Source::Path(p) => p.display().to_string(),
            Source::Bytes { name, .. } => name.to_string(),
            Source::Reader { name, .. } => name.clone(),
        }
    }
}

/// Options of the loader. Every field has a default (see [`LoadOptions::default`]).
#[derive(Clone, Copy)]
#[non_exhaustive]
pub struct LoadOptions<'a> {
    /// Read the input as this format instead of sniffing it. Default: `None` (sniff).
    pub format: Option<Format>,
    /// Function symbols of the objects a profile names (`perf script` `sym+off`, callgrind
    /// load-bias inference). Default: [`NoSymbols`]; the CLI passes
    /// `proftrust_binary::BinaryLocator`.
    pub symbols: &'a dyn SymbolSource,
    /// Load segments of the objects (perf.data and `perf script` mmap events). Default:
    /// [`ElfSegmentsFromDisk`] (program headers at the recorded paths); the CLI passes
    /// `proftrust_binary::BinaryLocator`.
    pub segments: &'a dyn SegmentSource,
    /// perf.data options. Default: [`PerfDataOptions::default`].
    pub perf: &'a PerfDataOptions,
    /// How callgrind files become exact profiles. Default: [`ExactOptions::default`].
    pub callgrind: &'a ExactOptions,
    /// Largest decompressed size accepted, and the most read from a pipe or device, bytes.
    /// Default: 32 GiB.
    pub max_decompressed: u64,
    /// Largest ratio of decompressed to compressed size (decompressions up to 64 MiB are
    /// allowed whatever the ratio): past it the input is refused as a likely decompression
    /// bomb. Real profiles compress 4x (callgrind) to about 260x (`perf script` text under
    /// `xz -9`). Default: [`DEFAULT_MAX_RATIO`] (the CLI's `--max-decompression-ratio`).
    pub max_ratio: u64,
    /// [`load`] gives sample files as per-address counts ([`Profile::Counts`]; perf.data
    /// by the lean streaming pass) instead of a [`SampleSet`]. Default: `false`.
    pub sample_counts: bool,
    /// Unwinds the user stacks of `perf record --call-graph dwarf` files. Default: `None`
    /// (their call chains keep the kernel part, with a warning); the CLI passes
    /// `proftrust_binary::BinaryLocator`.
    pub unwind: Option<&'a dyn UnwindSource>,
}

/// The default of [`LoadOptions::max_ratio`]: four times the most a real profile was seen
/// to compress (`perf script` text, 260x under `xz -9`); a 394 KB zstd file of 4 GB of text
/// (10,000x) is refused after 394 MB.
pub const DEFAULT_MAX_RATIO: u64 = 1000;

static DEFAULT_PERF: PerfDataOptions = PerfDataOptions { keep_kernel: true };
static DEFAULT_CALLGRIND: ExactOptions = ExactOptions {
    biases: Vec::new(),
    infer_biases: true,
};

impl Default for LoadOptions<'_> {
    fn default() -> Self {
        LoadOptions {
            format: None,
            symbols: &NoSymbols,
            segments: &ElfSegmentsFromDisk,
            perf: &DEFAULT_PERF,
            callgrind: &DEFAULT_CALLGRIND,
            max_decompressed: 32 << 30,
            max_ratio: DEFAULT_MAX_RATIO,
            sample_counts: false,
            unwind: None,
        }
    }
}

impl<'a> LoadOptions<'a> {
    /// Default options with these symbol and segment sources (often the same object).
    pub fn with_sources(
        symbols: &'a dyn SymbolSource,
        segments: &'a dyn SegmentSource,
    ) -> LoadOptions<'a> {
        LoadOptions {
            symbols,
            segments,
            ..LoadOptions::default()
        }
    }

    /// These options, unwinding `--call-graph dwarf` stacks with `unwind`.
    pub fn unwinding(mut self, unwind: &'a dyn UnwindSource) -> LoadOptions<'a> {
        self.unwind = Some(unwind);
        self
    }
}

/// What the loader found out about an input besides its content.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LoadInfo {
    /// The input's name as given (path, `<stdin>`).
    pub name: String,
    /// The format read.
    pub format: Format,
    /// The compression undone, if any.
    pub compression: Option<Compression>,
    /// What the reader could do only approximately, one sentence each.
    pub warnings: Vec<String>,
}

/// The content of a profile file, as [`load`] returns it.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Profile {
    /// Samples (perf.data, `perf script`, proftrust sample files).
    Samples(SampleSet),
    /// Per-address sample counts of the same files, when [`LoadOptions::sample_counts`].
    Counts(SampleCounts),
    /// A proftrust exact file.
    Exact(ExactProfile),
    /// A callgrind out file as parsed (turn it into an [`ExactProfile`] with
    /// [`CallgrindProfile::to_exact`], or call [`load_exact`]).
    Callgrind(Box<CallgrindProfile>),
}

/// A loaded profile: its content and how it was read.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// The content.
    pub profile: Profile,
    /// Format, compression, warnings.
    pub info: LoadInfo,
}

/// Reads whatever profile `src` holds.
pub fn load(src: Source<'_>, opts: &LoadOptions<'_>) -> Result<Loaded, FormatError> {
    with_bytes(src, opts, |b, format, info| {
        let profile = match format {
            Format::PerfData | Format::PerfScript | Format::NativeSamples if opts.sample_counts => {
                Profile::Counts(counts_of(b, format, opts, info)?)
            }
            Format::PerfData | Format::PerfScript | Format::NativeSamples => {
                Profile::Samples(samples_of(b, format, opts, info)?)
            }
            Format::NativeExact => Profile::Exact(native::read_exact(b)?),
            Format::Callgrind => {
                let p = callgrind::parse(&text(b, info)?)?;
                info.warnings.extend(p.warnings.iter().cloned());
                Profile::Callgrind(Box::new(p))
            }
        };
        Ok(profile)
    })
    .map(|(profile, info)| Loaded { profile, info })
}

/// Reads the samples of `src`: perf.data, `perf script` text or a proftrust sample file.
pub fn load_samples(
    src: Source<'_>,
    opts: &LoadOptions<'_>,
) -> Result<(SampleSet, LoadInfo), FormatError> {
    with_bytes(src, opts, |b, format, info| {
        samples_of(b, format, opts, info)
    })
}

/// Per-(event, address) sample counts of `src` (see [`crate::count_perf_data`]).
pub fn load_counts(
    src: Source<'_>,
    opts: &LoadOptions<'_>,
) -> Result<(SampleCounts, LoadInfo), FormatError> {
    with_bytes(src, opts, |b, format, info| {
        counts_of(b, format, opts, info)
    })
}

fn counts_of(
    b: &[u8],
    format: Format,
    opts: &LoadOptions<'_>,
    info: &mut LoadInfo,
) -> Result<SampleCounts, FormatError> {
    if format == Format::PerfData {
        let (c, notes) =
            crate::count_perf_data(b, Path::new(&info.name), opts.perf, opts.segments)?;
        info.warnings.extend(notes.warnings);
        return Ok(c);
    }
    Ok(SampleCounts::from_samples(&samples_of(
        b, format, opts, info,
    )?))
}

/// The exact profile of `src`: a proftrust exact file, or a callgrind out file converted
/// with [`LoadOptions::callgrind`] and [`LoadOptions::symbols`].
pub fn load_exact(
    src: Source<'_>,
    opts: &LoadOptions<'_>,
) -> Result<(ExactProfile, LoadInfo), FormatError> {
    with_bytes(src, opts, |b, format, info| {
        match format {
        Format::NativeExact => native::read_exact(b),
        Format::Callgrind => {
            let p = callgrind::parse(&text(b, info)?)?;
            info.warnings.extend(p.warnings.iter().cloned());
            p.to_exact(opts.callgrind, opts.symbols)
        }
        other => Err(FormatError::WrongKind {
            found: other.noun(),
            wanted: "exact counts",
            hint: "; give a proftrust exact file (`proftrust truth`) or a callgrind out file (`valgrind --tool=callgrind --dump-instr=yes`)",
        }),
    }
    })
}

fn samples_of(
    b: &[u8],
    format: Format,
    opts: &LoadOptions<'_>,
    info: &mut LoadInfo,
) -> Result<SampleSet, FormatError> {
    let (s, notes) = match format {
        Format::PerfData => crate::read_perf_data_unwinding(
            b,
            Path::new(&info.name),
            opts.perf,
            opts.segments,
            opts.unwind,
        )?,
        Format::PerfScript => {
            crate::read_perf_script(&text(b, info)?, opts.symbols, opts.segments)?
        }
        Format::NativeSamples => (native::read_samples(b)?, ReadNotes::default()),
        other => {
            return Err(FormatError::WrongKind {
                found: other.noun(),
                wanted: "samples",
                hint: "; give perf.data, `perf script` text or a proftrust sample file",
            })
        }
    };
    info.warnings.extend(notes.warnings);
    Ok(s)
}

/// The text of a text format; bytes that are not UTF-8 (a symbol name in another encoding)
/// are replaced, with a warning.
fn text<'b>(b: &'b [u8], info: &mut LoadInfo) -> Result<std::borrow::Cow<'b, str>, FormatError> {
    match std::str::from_utf8(b) {
        Ok(t) => Ok(t.into()),
        Err(e) => {
            info.warnings.push(format!(
                "the text is not UTF-8 from byte {}; invalid bytes were replaced by U+FFFD",
                e.valid_up_to()
            ));
            Ok(String::from_utf8_lossy(b))
        }
    }
}

/// Bytes of `src`, decompressed and sniffed, handed to `f`; every error names the input.
fn with_bytes<T>(
    src: Source<'_>,
    opts: &LoadOptions<'_>,
    f: impl FnOnce(&[u8], Format, &mut LoadInfo) -> Result<T, FormatError>,
) -> Result<(T, LoadInfo), FormatError> {
    let name = src.name();
    let named = |e: FormatError| match e {
        FormatError::File { .. } => e,
        e => FormatError::File {
            name: name.clone(),
            error: Box::new(e),
        },
    };
    // The start of the input is looked at before the rest is read or mapped: an unknown
    // format is refused at once, whatever the input's size.
    let check_head = |head: &[u8]| -> Result<(), FormatError> {
        input::refuse_compression(head)?;
        if opts.format.is_some() || Compression::sniff(head).is_some() {
            return Ok(());
        }
        match sniff(&head[..head.len().min(SNIFF_BYTES)]) {
            Some(_) => Ok(()),
            None => Err(unknown_format(head)),
        }
    };
    let raw: Bytes<'_> = match src {
        Source::Path(p) => {
            input::read_path(p, &check_head, opts.max_decompressed).map_err(named)?
        }
        Source::Bytes { bytes, .. } => Bytes::Borrowed(bytes),
        Source::Reader { reader, .. } => Bytes::Owned(
            input::read_all(reader, &check_head, opts.max_decompressed).map_err(named)?,
        ),
    };
    let (bytes, compression) =
        input::decompress(&raw, opts.max_decompressed, opts.max_ratio).map_err(named)?;
    if bytes.is_empty() {
        return Err(named(FormatError::Empty {
            what: if compression.is_some() {
                "the decompressed profile"
            } else {
                "the profile file"
            },
        }));
    }
    let format = match opts.format {
        Some(f) => f,
        None => sniff(&bytes[..bytes.len().min(SNIFF_BYTES)])
            .ok_or_else(|| named(unknown_format(&bytes)))?,
    };
    let mut info = LoadInfo {
        name: name.clone(),
        format,
        compression,
        warnings: Vec::new(),
    };
    let out = f(&bytes, format, &mut info).map_err(named)?;
    Ok((out, info))
}

fn unknown_format(bytes: &[u8]) -> FormatError {
    FormatError::UnknownFormat {
        start: format!(
            "{:?}",
            String::from_utf8_lossy(&bytes[..bytes.len().min(16)])
        ),
    }
}

/// The format of the file at `path`, from its first [`SNIFF_BYTES`] bytes after undoing
/// gzip, zstd or xz compression (only that much is decompressed). `None`: no format fits.
pub fn sniff_path(path: &Path) -> Result<Option<Format>, FormatError> {
    let named = |e: FormatError| FormatError::File {
        name: path.display().to_string(),
        error: Box::new(e),
    };
    let io = |e: std::io::Error| {
        named(FormatError::Read {
            detail: e.to_string(),
        })
    };
    if std::fs::metadata(path).map_err(io)?.is_dir() {
        return Err(named(FormatError::Read {
            detail: "is a directory; give a profile file".into(),
        }));
    }
    let file = std::fs::File::open(path).map_err(io)?;
    let head = input::head_decompressed(file, SNIFF_BYTES).map_err(io)?;
    Ok(sniff(&head))
}

/// How much of the start of a file the format sniffer sees.
pub const SNIFF_BYTES: usize = 1 << 16;

#[cfg(test)]
mod tests {
    use super::*;

    const CG: &str = "version: 1\ncreator: hand\npositions: instr\nevents: Ir\nob=/x/prog\nfn=main\n0x1000 5\n0x1004 7\n";

    #[test]
    fn loads_callgrind_plain_and_gzip_and_names_errors() {
        let (e, info) = load_exact(
            Source::Bytes {
                bytes: CG.as_bytes(),
                name: "cg.out",
            },
            &LoadOptions::default(),
        )
        .unwrap();
        assert_eq!(e.total_instructions, 12);
        assert_eq!(info.format, Format::Callgrind);
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut gz, CG.as_bytes()).unwrap();
        let gz = gz.finish().unwrap();
        let l = load(
            Source::Reader {
                reader: Box::new(&gz[..]),
                name: "cg.out.gz".into(),
            },
            &LoadOptions::default(),
        )
        .unwrap();
        assert_eq!(l.info.compression, Some(Compression::Gzip));
        let Profile::Callgrind(p) = l.profile else {
            panic!("callgrind expected")
        };
        assert_eq!(p.totals(), vec![12]);
        let err = load_samples(
            Source::Bytes {
                bytes: CG.as_bytes(),
                name: "cg.out",
            },
            &LoadOptions::default(),
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "cg.out: this is a callgrind out file, and samples are needed here; give perf.data, `perf script` text or a proftrust sample file"
        );
    }

    const ZST: [u8; 91] = [
        0x28, 0xb5, 0x2f, 0xfd, 0x24, 0x5a, 0x75, 0x02, 0x00, 0x42, 0x45, 0x11, 0x11, 0xa0, 0x6f,
        0xe0, 0x64, 0xcd, 0xae, 0xb8, 0x0b, 0x4d, 0x89, 0x4b, 0xe6, 0x83, 0x51, 0x15, 0x47, 0x08,
        0x5d, 0x7c, 0x10, 0x0f, 0x21, 0x88, 0x1c, 0xfa, 0x63, 0x92, 0xe7, 0x5d, 0xbf, 0x59, 0x29,
        0xc8, 0xe0, 0xa8, 0xd9, 0x15, 0xb9, 0xb1, 0xf7, 0x1b, 0x6e, 0x5d, 0xaf, 0xfd, 0xe8, 0xc6,
        0xfe, 0x8c, 0x37, 0xda, 0x49, 0x9b, 0x7d, 0x82, 0x6e, 0xea, 0xbc, 0xa9, 0xd5, 0xd5, 0xc2,
        0xcd, 0xcf, 0x68, 0x6b, 0xc3, 0x01, 0x01, 0x00, 0x10, 0x87, 0x12, 0x05, 0x05, 0xa7, 0x4d,
        0x1a,
    ];
    const XZ: [u8; 144] = [
        0xfd, 0x37, 0x7a, 0x58, 0x5a, 0x00, 0x00, 0x04, 0xe6, 0xd6, 0xb4, 0x46, 0x02, 0x00, 0x21,
        0x01, 0x16, 0x00, 0x00, 0x00, 0x74, 0x2f, 0xe5, 0xa3, 0xe0, 0x00, 0x59, 0x00, 0x54, 0x5d,
        0x00, 0x3b, 0x19, 0x4a, 0xac, 0x0b, 0xd2, 0xbe, 0x58, 0xcf, 0x63, 0xfa, 0xd8, 0xdd, 0x6a,
        0xa0, 0xb3, 0x4b, 0xcb, 0x0f, 0x18, 0x23, 0x8f, 0x4c, 0xf5, 0x88, 0x00, 0xb7, 0x25, 0x24,
        0x62, 0x75, 0xf5, 0x87, 0x31, 0x40, 0x46, 0x76, 0x43, 0x2d, 0xeb, 0xf8, 0x3d, 0x90, 0x95,
        0xba, 0x07, 0xc2, 0x2c, 0xd4, 0x02, 0x56, 0x72, 0xea, 0x57, 0xff, 0x92, 0x5f, 0x7c, 0x62,
        0x70, 0x62, 0x99, 0xa0, 0x78, 0x4f, 0x9e, 0x71, 0x88, 0xc9, 0x1f, 0xbf, 0x82, 0xa7, 0x90,
        0x9f, 0x93, 0xc4, 0x36, 0x52, 0xbf, 0x79, 0x1e, 0x1a, 0xc0, 0x00, 0xb5, 0x03, 0xdd, 0xb5,
        0xb1, 0x7b, 0xa6, 0xfc, 0x00, 0x01, 0x70, 0x5a, 0x37, 0x74, 0x07, 0x84, 0x1f, 0xb6, 0xf3,
        0x7d, 0x01, 0x00, 0x00, 0x00, 0x00, 0x04, 0x59, 0x5a,
    ];

    #[test]
    fn zstd_and_xz_by_content() {
        // `zstd -19 cg.txt` and `xz cg.txt` (zstd 1.5.4, xz 5.4.1) of the text CG.
        let z: &[u8] = &ZST;
        let xz: &[u8] = &XZ;
        for (bytes, c) in [(z, Compression::Zstd), (xz, Compression::Xz)] {
            let (e, info) =
                load_exact(Source::Bytes { bytes, name: "x" }, &LoadOptions::default()).unwrap();
            assert_eq!((e.total_instructions, info.compression), (12, Some(c)));
        }
    }

    #[test]
    fn unreadable_inputs_say_what_once() {
        let dir = std::env::temp_dir();
        let e = load(Source::Path(&dir), &LoadOptions::default()).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("is a directory"), "{msg}");
        assert_eq!(msg.matches("directory").count(), 1, "{msg}");
        let e = load(
            Source::Path(Path::new("/nonexistent/p.data")),
            &LoadOptions::default(),
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "/nonexistent/p.data: cannot read it: No such file or directory (os error 2)"
        );
        let e = load(
            Source::Bytes {
                bytes: b"",
                name: "e",
            },
            &LoadOptions::default(),
        )
        .unwrap_err();
        assert_eq!(e.to_string(), "e: the profile file is empty");
    }
}
