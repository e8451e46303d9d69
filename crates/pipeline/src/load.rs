//! Loading profiles: every command reads a sample file or an exact-count file through
//! `proftrust_formats`' one loader (any format and compression, sniffed by content), with
//! the modules' binaries found by `proftrust_binary::BinaryLocator` as perf finds them
//! (`--binary`, `--symfs`, build-id caches, the recorded path).

use crate::error::{Context, Result};
use crate::Events;
use proftrust_binary::{BinaryLocator, LocateOptions};
use proftrust_formats::{Format, LoadOptions, Profile, Source};
use proftrust_model::{ExactProfile, SampleSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

static MAX_RATIO: AtomicU64 = AtomicU64::new(proftrust_formats::DEFAULT_MAX_RATIO);

/// Sets the largest decompression ratio every load of this process accepts
/// (`LoadOptions::max_ratio`; the CLI's `--max-decompression-ratio`, for a genuine profile
/// that compresses better than [`proftrust_formats::DEFAULT_MAX_RATIO`] times).
pub fn set_max_decompression_ratio(ratio: u64) {
    MAX_RATIO.store(ratio.max(1), Ordering::Relaxed);
}

/// The loader's options of every command: the binaries found by `locator`, the process's
/// decompression ratio.
pub fn options(locator: &BinaryLocator) -> LoadOptions<'_> {
    // DWARF user stacks (`--call-graph dwarf`) unwound over the same binaries.
    let mut o = LoadOptions::with_sources(locator, locator).unwinding(locator);
    o.max_ratio = MAX_RATIO.load(Ordering::Relaxed);
    o
}

/// The locator of a command's profiles: `binaries` (matched to modules by build-id, else
/// file name) and `symfs` (perf's `--symfs`) on top of the default places.
pub fn locator(binaries: &[PathBuf], symfs: Option<&Path>) -> BinaryLocator {
    BinaryLocator::new(LocateOptions::new(binaries, symfs))
}

/// `path` as the loader's source: `-` is standard input.
pub fn source(path: &Path) -> Source<'_> {
    if path.as_os_str() == "-" {
        Source::stdin()
    } else {
        Source::Path(path)
    }
}

/// The format of the file at `path`, sniffed from its content after undoing any gzip, zstd
/// or xz compression (`None`: unknown).
pub fn format_of(path: &Path) -> Result<Option<Format>> {
    match proftrust_formats::sniff_path(path) {
        Ok(f) => Ok(f),
        Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
    }
}

/// Reads a sample file of any supported format. `binaries` are the program's files (given
/// by the user), matched to the file's modules by build-id, else file name. Reader
/// warnings become notes.
pub fn samples(path: &Path, binaries: &[PathBuf], events: &dyn Events) -> Result<SampleSet> {
    samples_with(path, &locator(binaries, None), events)
}

/// [`samples`] with the binaries found by `locator`.
pub fn samples_with(
    path: &Path,
    locator: &BinaryLocator,
    events: &dyn Events,
) -> Result<SampleSet> {
    let r = proftrust_formats::load_samples(source(path), &options(locator));
    for line in locator.trace() {
        events.detail(&format!("binary lookup: {line}"));
    }
    let (s, info) = r.context("cannot read the samples")?;
    for w in &info.warnings {
        events.note(&format!("{}: {w}", info.name));
    }
    Ok(s)
}

/// Reads an exact-count file of any supported format, normalised (sorted, merged).
/// `binaries` as in [`samples`] (for a callgrind file's load biases).
pub fn exact(path: &Path, binaries: &[PathBuf]) -> Result<ExactProfile> {
    exact_with(path, &locator(binaries, None), &crate::Silent)
}

/// [`exact`] with the binaries found by `locator`; reader warnings become notes.
pub fn exact_with(
    path: &Path,
    locator: &BinaryLocator,
    events: &dyn Events,
) -> Result<ExactProfile> {
    let (mut e, info) = proftrust_formats::load_exact(source(path), &options(locator))
        .context("cannot read the exact counts")?;
    for w in &info.warnings {
        events.note(&format!("{}: {w}", info.name));
    }
    e.normalize();
    Ok(e)
}

/// A profile of either kind, as [`any`] reads it.
#[derive(Debug)]
pub enum AnyProfile {
    /// Samples (perf.data, perf script text, a proftrust sample file).
    Samples(SampleSet),
    /// Exact counts (a callgrind out file, a proftrust exact file), normalised.
    Exact(ExactProfile),
}

/// Reads whatever profile `path` holds (any format and compression, `-` for standard
/// input) in one pass: samples, or exact counts (a callgrind file converted with the
/// binaries `binaries` name, as [`exact`] does). Reader warnings become notes.
pub fn any(path: &Path, binaries: &[PathBuf], events: &dyn Events) -> Result<AnyProfile> {
    let locator = locator(binaries, None);
    let opts = options(&locator);
    let r = proftrust_formats::load(source(path), &opts);
    for line in locator.trace() {
        events.detail(&format!("binary lookup: {line}"));
    }
    let loaded = r.context("cannot read the profile")?;
    for w in &loaded.info.warnings {
        events.note(&format!("{}: {w}", loaded.info.name));
    }
    let name = loaded.info.name;
    Ok(match loaded.profile {
        Profile::Samples(s) => AnyProfile::Samples(s),
        Profile::Exact(mut e) => {
            e.normalize();
            AnyProfile::Exact(e)
        }
        Profile::Callgrind(p) => {
            let mut e = p
                .to_exact(opts.callgrind, opts.symbols)
                .map_err(|e| proftrust_formats::FormatError::File {
                    name: name.clone(),
                    error: Box::new(e),
                })
                .context("cannot read the exact counts")?;
            e.normalize();
            AnyProfile::Exact(e)
        }
        _ => crate::error::bail!("{name}: this build cannot export this kind of profile"),
    })
}
