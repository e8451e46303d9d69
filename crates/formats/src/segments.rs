//! Runtime address → SVMA through an object's `PT_LOAD` segments.
//!
//! A profiler sees a mapping `[start, end)` of file offset `pgoff` and a runtime `ip`; the
//! file offset of `ip` is `ip - start + pgoff`, and the SVMA is that offset moved into the
//! `PT_LOAD` segment that contains it: `svma = off - p_offset + p_vaddr`. For PIE executables
//! and shared objects built by the usual linkers `p_vaddr == p_offset` and the SVMA equals
//! the file offset; for non-PIE executables (`p_vaddr = 0x401000`, `p_offset = 0x1000`) it
//! does not, which is why the segments are needed. When the object cannot be read, the
//! readers fall back to `svma = off` and say so in [`crate::ReadNotes`].

use std::collections::HashMap;
use std::sync::Mutex;

/// One `PT_LOAD` program header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoadSegment {
    /// `p_offset`.
    pub offset: u64,
    /// `p_vaddr`.
    pub vaddr: u64,
    /// `p_filesz`.
    pub filesz: u64,
}

/// SVMA of file offset `off` given the object's load segments; `None` when no segment holds it.
pub fn svma_of_offset(segs: &[LoadSegment], off: u64) -> Option<u64> {
    segs.iter()
        .find(|s| off >= s.offset && off - s.offset < s.filesz.max(1))
        .and_then(|s| (off - s.offset).checked_add(s.vaddr))
}

/// Supplies the load segments of objects named by a profile.
pub trait SegmentSource {
    /// `PT_LOAD` segments of the object at `path`, or `None` when it cannot be read.
    fn load_segments(&self, path: &str) -> Option<Vec<LoadSegment>>;
}

/// A [`SegmentSource`] that knows no object: every SVMA is taken to equal the file offset.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoSegments;

impl SegmentSource for NoSegments {
    fn load_segments(&self, _path: &str) -> Option<Vec<LoadSegment>> {
        None
    }
}

/// Reads program headers of ELF files from the local disk, once per path.
#[derive(Debug, Default)]
pub struct ElfSegmentsFromDisk {
    cache: Mutex<HashMap<String, Option<Vec<LoadSegment>>>>,
}

impl SegmentSource for ElfSegmentsFromDisk {
    fn load_segments(&self, path: &str) -> Option<Vec<LoadSegment>> {
        let mut c = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        c.entry(path.to_string())
            .or_insert_with(|| read_elf_head(path).and_then(|b| parse_elf_load_segments(&b)))
            .clone()
    }
}

/// Reads the first 64 KiB of a file (ELF and program headers live there in practice), or
/// the program header table wherever it is.
fn read_elf_head(path: &str) -> Option<Vec<u8>> {
    use std::io::{Read, Seek, SeekFrom};
    if !path.starts_with('/') {
        return None;
    }
    let mut f = std::fs::File::open(path).ok()?;
    let mut head = vec![0u8; 64];
    f.read_exact(&mut head).ok()?;
    if &head[..4] != b"\x7fELF" || head[4] != 2 || head[5] != 1 {
        return None;
    }
    let phoff = u64::from_le_bytes(head[32..40].try_into().ok()?);
    let phentsize = u64::from(u16::from_le_bytes(head[54..56].try_into().ok()?));
    let phnum = u64::from(u16::from_le_bytes(head[56..58].try_into().ok()?));
    let end = phoff.checked_add(phentsize.checked_mul(phnum)?)?;
    if end > 1 << 24 {
        return None;
    }
    let mut all = vec![0u8; end as usize];
    f.seek(SeekFrom::Start(0)).ok()?;
    f.read_exact(&mut all).ok()?;
    Some(all)
}

/// Parses the `PT_LOAD` program headers of a 64-bit little-endian ELF image (only the
/// header and the program header table need to be present).
pub fn parse_elf_load_segments(b: &[u8]) -> Option<Vec<LoadSegment>> {
    if b.len() < 64 || &b[..4] != b"\x7fELF" || b[4] != 2 || b[5] != 1 {
        return None;
    }
    let u16_at = |o: usize| -> Option<u64> {
        Some(u64::from(u16::from_le_bytes(
            b.get(o..o + 2)?.try_into().ok()?,
        )))
    };
    let u32_at =
        |o: usize| -> Option<u32> { Some(u32::from_le_bytes(b.get(o..o + 4)?.try_into().ok()?)) };
    let u64_at =
        |o: usize| -> Option<u64> { Some(u64::from_le_bytes(b.get(o..o + 8)?.try_into().ok()?)) };
    let phoff = usize::try_from(u64_at(32)?).ok()?;
    let phentsize = usize::try_from(u16_at(54)?).ok()?;
    let phnum = usize::try_from(u16_at(56)?).ok()?;
    if phentsize < 56 {
        return None;
    }
    let mut out = Vec::new();
    for i in 0..phnum {
        let p = phoff.checked_add(i.checked_mul(phentsize)?)?;
        if u32_at(p)? == 1 {
            out.push(LoadSegment {
                offset: u64_at(p + 8)?,
                vaddr: u64_at(p + 16)?,
                filesz: u64_at(p + 32)?,
            });
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn non_pie_and_pie_offsets() {
        let non_pie = [
            LoadSegment {
                offset: 0,
                vaddr: 0x400000,
                filesz: 0x600,
            },
            LoadSegment {
                offset: 0x1000,
                vaddr: 0x401000,
                filesz: 0x200,
            },
        ];
        assert_eq!(svma_of_offset(&non_pie, 0x1010), Some(0x401010));
        assert_eq!(svma_of_offset(&non_pie, 0x1300), None);
        let pie = [LoadSegment {
            offset: 0x1000,
            vaddr: 0x1000,
            filesz: 0x500,
        }];
        assert_eq!(svma_of_offset(&pie, 0x1130), Some(0x1130));
    }

    #[test]
    fn reads_own_test_binary() {
        let exe = std::env::current_exe().unwrap();
        let segs = ElfSegmentsFromDisk::default()
            .load_segments(exe.to_str().unwrap())
            .unwrap();
        assert!(segs.iter().any(|s| s.filesz > 0));
        assert_eq!(parse_elf_load_segments(b"not elf"), None);
    }
}
