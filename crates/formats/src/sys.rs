//! The one `unsafe` operation of this crate: mapping a large input file read-only, so that
//! reading a profile of hundreds of megabytes costs no copy (see `docs/file-formats.md`,
//! benchmark).

#![allow(unsafe_code)]

use crate::error::FormatError;
use std::fs::File;

/// A read-only mapping of a whole file.
pub(crate) type Mapped = memmap2::Mmap;

/// Files at least this large are mapped instead of read.
const MAP_FROM: u64 = 4 << 20;

/// Mappings up to this size have their pages read up front (`MAP_POPULATE`: faster to
/// parse); larger ones are paged in as the reader goes, so that mapping a huge file costs
/// nothing before its format is read.
const POPULATE_UP_TO: u64 = 1 << 30;

/// The bytes of the regular file `file` of `len` bytes, whose first bytes `head` were read
/// already: mapped when at least 4 MiB, else read (with fallible allocation). A file that
/// cannot be mapped (an address-space limit, `ulimit -v`) is an error naming its size, not
/// read into memory instead.
pub(crate) fn file_bytes(
    mut file: File,
    len: u64,
    mut head: Vec<u8>,
) -> Result<crate::input::Bytes<'static>, FormatError> {
    if len >= MAP_FROM {
        let mut opts = memmap2::MmapOptions::new();
        if len <= POPULATE_UP_TO {
            opts.populate();
        }
        // SAFETY: the mapping is private and read-only, and proftrust never writes the
        // file. What `Mmap` cannot rule out is another process truncating or rewriting the
        // file while it is mapped: the bytes could then change under the reader (which
        // only ever bounds-checks them, so at worst it reads garbage and reports a corrupt
        // file) or a read past the new end raises SIGBUS. perf report has the same exposure;
        // a profile being rewritten while it is read is a user error we accept here.
        return match unsafe { opts.map(&file) } {
            Ok(m) => Ok(crate::input::Bytes::Mapped(m)),
            Err(e) => Err(FormatError::TooLarge {
                what: "the file",
                detail: format!(
                    "its {len} bytes cannot be mapped into memory: {e} (an address-space limit, `ulimit -v`, smaller than the file?); raise the limit or read a smaller file"
                ),
            }),
        };
    }
    let len = usize::try_from(len).unwrap_or(usize::MAX);
    let rest = len.saturating_sub(head.len());
    crate::input::reserve(&mut head, rest, "the file")?;
    std::io::Read::read_to_end(&mut file, &mut head).map_err(|e| FormatError::Read {
        detail: e.to_string(),
    })?;
    Ok(crate::input::Bytes::Owned(head))
}
