//! Loading profiles: the one place every command reads a sample file or an exact-count file
//! through, whatever its format (sniffed from its first bytes).
//!
//! Samples: proftrust's own sample file, perf.data, `perf script` text (with `sym+off`
//! resolved through the binaries' symbols). Exact counts: proftrust's exact file, or a
//! callgrind out file (`--dump-instr=yes`; load biases inferred from the binaries' symbols).

use crate::error::{bail, Context, Result};
use crate::Events;
use proftrust_formats::Format;
use proftrust_model::{ExactProfile, SampleSet};
use std::path::{Path, PathBuf};

/// The format of the file at `path`, sniffed from its first bytes (`None`: unknown).
pub fn format_of(path: &Path) -> Result<Option<Format>> {
    use std::io::Read;
    let mut head = Vec::with_capacity(4096);
    std::fs::File::open(path)
        .and_then(|f| f.take(4096).read_to_end(&mut head))
        .with_context(|| format!("cannot read {}", path.display()))?;
    Ok(proftrust_formats::sniff(&head))
}

/// Reads a sample file of any supported format. `binaries` are the program's files (given
/// by the user), matched by file name to the objects a `perf script` text names; other
/// objects are read from the path the text gives. Reader warnings become notes.
pub fn samples(path: &Path, binaries: &[PathBuf], events: &dyn Events) -> Result<SampleSet> {
    let bytes =
        std::fs::read(path).with_context(|| format!("cannot read samples {}", path.display()))?;
    let s = match proftrust_formats::sniff(&bytes[..bytes.len().min(4096)]) {
        Some(Format::NativeSamples) => proftrust_formats::native::read_samples(&bytes)
            .with_context(|| format!("cannot read {}", path.display()))?,
        Some(Format::PerfData) => proftrust_formats::read_perf_data(&bytes, path)
            .with_context(|| format!("cannot read {}", path.display()))?,
        Some(Format::PerfScript) => {
            let text = std::str::from_utf8(&bytes)
                .with_context(|| format!("{} is not UTF-8 text", path.display()))?;
            let segs = proftrust_formats::segments::ElfSegmentsFromDisk::default();
            let (s, notes) = proftrust_formats::read_perf_script(
                text,
                &DiskSymbols { binaries },
                &segs,
            )
            .with_context(|| format!("cannot read {}", path.display()))?;
            for w in notes.warnings {
                events.note(&format!("{}: {w}", path.display()));
            }
            s
        }
        Some(other) => bail!(
            "{} is a {} file, not samples (expected perf.data, `perf script` output or a proftrust sample file)",
            path.display(),
            other.name()
        ),
        None => bail!(
            "{}: unknown sample format (expected perf.data, `perf script` output or a proftrust sample file)",
            path.display()
        ),
    };
    Ok(s)
}

/// Reads an exact-count file of any supported format, normalised (sorted, merged).
/// `binaries` as in [`samples`] (for a callgrind file's load biases).
pub fn exact(path: &Path, binaries: &[PathBuf]) -> Result<ExactProfile> {
    let bytes =
        std::fs::read(path).with_context(|| format!("cannot read truth {}", path.display()))?;
    let mut e = match proftrust_formats::sniff(&bytes[..bytes.len().min(4096)]) {
        Some(Format::NativeExact) => proftrust_formats::native::read_exact(&bytes)
            .with_context(|| format!("cannot read {}", path.display()))?,
        Some(Format::Callgrind) => {
            let text = std::str::from_utf8(&bytes)
                .with_context(|| format!("{} is not UTF-8 text", path.display()))?;
            let p = proftrust_formats::callgrind::parse(text)
                .with_context(|| format!("cannot parse {}", path.display()))?;
            p.to_exact(
                &proftrust_formats::callgrind::ExactOptions::default(),
                &DiskSymbols { binaries },
            )
            .with_context(|| format!("cannot import {}", path.display()))?
        }
        Some(other) => bail!(
            "{} is a {} file, not exact counts (expected a callgrind.out file or a proftrust exact file)",
            path.display(),
            other.name()
        ),
        None => bail!(
            "{}: unknown exact-count format (expected a callgrind.out file or a proftrust exact file)",
            path.display()
        ),
    };
    e.normalize();
    Ok(e)
}

/// Function symbols of the objects a `perf script` or callgrind file names, from their ELF
/// files: the program's binaries given by the user first (matched by file name), else the
/// path the file names. Raw (mangled) names, and the demangled ones too, as `perf script`
/// prints demangled names by default.
struct DiskSymbols<'a> {
    binaries: &'a [PathBuf],
}

impl proftrust_formats::SymbolSource for DiskSymbols<'_> {
    fn symbols(&self, path: &str) -> Option<proftrust_formats::ObjectSymbols> {
        let name = path.rsplit('/').next().unwrap_or(path);
        let file = self
            .binaries
            .iter()
            .find(|p| p.file_name().and_then(|n| n.to_str()) == Some(name))
            .cloned()
            .or_else(|| {
                let p = PathBuf::from(path);
                p.is_file().then_some(p)
            })?;
        let b = proftrust_binary::Binary::open(&file).ok()?;
        let mut functions = Vec::new();
        for f in b.functions() {
            functions.push(proftrust_formats::FunctionSymbol {
                name: f.raw_name.clone(),
                start: f.start.0,
                size: f.size,
            });
            if f.name != f.raw_name {
                functions.push(proftrust_formats::FunctionSymbol {
                    name: f.name.clone(),
                    start: f.start.0,
                    size: f.size,
                });
            }
        }
        Some(proftrust_formats::ObjectSymbols {
            build_id: b.build_id().cloned(),
            functions,
        })
    }
}
