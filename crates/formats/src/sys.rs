//! The one `unsafe` operation of this crate: mapping a large input file read-only, so that
//! reading a profile of hundreds of megabytes costs no copy (see `docs/file-formats.md`,
//! benchmark).

#![allow(unsafe_code)]

use std::fs::File;

/// A read-only mapping of a whole file.
pub(crate) type Mapped = memmap2::Mmap;

/// Files at least this large are mapped instead of read.
const MAP_FROM: u64 = 4 << 20;

/// The bytes of `file`: mapped (pages populated up front) when it is a regular file of at
/// least 4 MiB, else read.
pub(crate) fn file_bytes(
    mut file: File,
    meta: &std::fs::Metadata,
) -> std::io::Result<crate::input::Bytes<'static>> {
    if meta.is_file() && meta.len() >= MAP_FROM {
        // SAFETY: the mapping is private and read-only, and proftrust never writes the
        // file. What `Mmap` cannot rule out is another process truncating or rewriting the
        // file while it is mapped: the bytes could then change under the reader (which
        // only ever bounds-checks them, so at worst it reads garbage and reports a corrupt
        // file) or a read past the new end raises SIGBUS. perf report has the same exposure;
        // a profile being rewritten while it is read is a user error we accept here.
        if let Ok(m) = unsafe { memmap2::MmapOptions::new().populate().map(&file) } {
            return Ok(crate::input::Bytes::Mapped(m));
        }
    }
    let mut v = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    std::io::Read::read_to_end(&mut file, &mut v)?;
    Ok(crate::input::Bytes::Owned(v))
}
