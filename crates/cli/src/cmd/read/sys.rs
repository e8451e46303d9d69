//! The one `unsafe` operation of `proftrust read`: mapping a large input file read-only.

use std::fs::File;
use std::ops::Deref;

/// A file's bytes: mapped when large, read when small (or when mapping fails).
pub enum FileBytes {
    /// Read into memory.
    Owned(Vec<u8>),
    /// Mapped read-only.
    Mapped(memmap2::Mmap),
}

impl Deref for FileBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            FileBytes::Owned(v) => v,
            FileBytes::Mapped(m) => m,
        }
    }
}

/// Files at least this large are mapped instead of read (a copy of tens of MB costs more
/// than the reader itself; see `docs/file-formats.md`, benchmark).
const MAP_FROM: u64 = 4 << 20;

/// The bytes of `file`: mapped (with the pages populated up front) when it is a regular
/// file of at least 4 MiB, else read.
pub fn file_bytes(mut file: File) -> std::io::Result<FileBytes> {
    let meta = file.metadata()?;
    if meta.is_file() && meta.len() >= MAP_FROM {
        // SAFETY: the mapping is private and read-only, and proftrust never writes the
        // file. What `Mmap` cannot rule out is another process truncating or rewriting the
        // file while it is mapped: the bytes could then change under the reader (which
        // only ever bounds-checks them, so at worst it reads garbage and reports a corrupt
        // file) or a read past the new end raises SIGBUS. perf report has the same exposure;
        // a profile being rewritten while it is read is a user error we accept here.
        if let Ok(m) = unsafe { memmap2::MmapOptions::new().populate().map(&file) } {
            return Ok(FileBytes::Mapped(m));
        }
    }
    let mut v = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    std::io::Read::read_to_end(&mut file, &mut v)?;
    Ok(FileBytes::Owned(v))
}
