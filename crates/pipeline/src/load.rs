//! Loading profiles: every command reads a sample file or an exact-count file through
//! `proftrust_formats`' one loader (any format and compression, sniffed by content), with
//! the modules' binaries found by `proftrust_binary::BinaryLocator` as perf finds them
//! (`--binary`, `--symfs`, build-id caches, the recorded path).

use crate::error::{Context, Result};
use crate::Events;
use proftrust_binary::{BinaryLocator, LocateOptions};
use proftrust_formats::{LoadOptions, Source};
use proftrust_model::{ExactProfile, SampleSet};
use std::path::{Path, PathBuf};

/// The locator of a command's profiles: `binaries` (matched to modules by build-id, else
/// file name) and `symfs` (perf's `--symfs`) on top of the default places.
pub fn locator(binaries: &[PathBuf], symfs: Option<&Path>) -> BinaryLocator {
    BinaryLocator::new(LocateOptions::new(binaries, symfs))
}

fn source(path: &Path) -> Source<'_> {
    if path.as_os_str() == "-" {
        Source::stdin()
    } else {
        Source::Path(path)
    }
}

/// Reads a sample file of any supported format; reader warnings become notes.
pub fn samples(path: &Path, locator: &BinaryLocator, events: &dyn Events) -> Result<SampleSet> {
    let (s, info) =
        proftrust_formats::load_samples(source(path), &LoadOptions::with_sources(locator, locator))
            .context("cannot read the samples")?;
    for w in &info.warnings {
        events.note(&format!("{}: {w}", info.name));
    }
    Ok(s)
}

/// Reads an exact-count file of any supported format, normalised (sorted, merged); a
/// callgrind file's load biases are inferred from the binaries `locator` finds.
pub fn exact(path: &Path, locator: &BinaryLocator, events: &dyn Events) -> Result<ExactProfile> {
    let (mut e, info) =
        proftrust_formats::load_exact(source(path), &LoadOptions::with_sources(locator, locator))
            .context("cannot read the exact counts")?;
    for w in &info.warnings {
        events.note(&format!("{}: {w}", info.name));
    }
    e.normalize();
    Ok(e)
}
