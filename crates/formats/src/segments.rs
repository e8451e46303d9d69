//! Load segments of the objects a profile names: the address rule of
//! [`proftrust_model::segments`] (re-exported here) and [`ElfSegmentsFromDisk`], a
//! [`SegmentSource`] that reads program headers at the recorded paths.
//!
//! A profiler sees a mapping `[start, end)` of file offset `pgoff` and a runtime `ip`; the
//! file offset of `ip` is `ip - start + pgoff`, and the SVMA is that offset moved into the
//! `PT_LOAD` segment that contains it. When the object cannot be found, the readers fall
//! back to `svma = off` and say so in [`crate::ReadNotes`]. The pipeline passes
//! `proftrust_binary::BinaryLocator` instead, which finds objects the way perf does
//! (`--binary`, `--symfs`, build-id caches, the recorded path).

pub use proftrust_model::segments::{
    LoadSegment, Mapping, NoSegments, SegmentSource, SegmentTable, PF_X,
};
use proftrust_model::BuildId;

/// Reads the program headers of ELF files at the recorded paths (the readers cache the
/// answer per object). It does not check build-ids (it reads no notes): use
/// `proftrust_binary::BinaryLocator` for that.
#[derive(Debug, Default, Clone, Copy)]
pub struct ElfSegmentsFromDisk;

impl SegmentSource for ElfSegmentsFromDisk {
    fn load_segments(&self, path: &str, _build_id: Option<&BuildId>) -> Option<SegmentTable> {
        read_elf_head(path).and_then(|b| parse_elf_load_segments(&b))
    }
}

/// Reads the ELF header and the program header table of a file.
fn read_elf_head(path: &str) -> Option<Vec<u8>> {
    use std::io::{Read, Seek, SeekFrom};
    if !path.starts_with('/') {
        return None;
    }
    let mut f = std::fs::File::open(path).ok()?;
    let mut head = vec![0u8; 64];
    let n = f.read(&mut head).ok()?;
    head.truncate(n);
    let h = ElfHead::parse(&head)?;
    let end = h.phoff.checked_add(h.phentsize.checked_mul(h.phnum)?)?;
    if end > 1 << 24 {
        return None;
    }
    let mut all = vec![0u8; usize::try_from(end).ok()?];
    f.seek(SeekFrom::Start(0)).ok()?;
    f.read_exact(&mut all).ok()?;
    Some(all)
}

/// The fields of an ELF header that locate the program headers.
struct ElfHead {
    class64: bool,
    big: bool,
    phoff: u64,
    phentsize: u64,
    phnum: u64,
}

impl ElfHead {
    fn parse(b: &[u8]) -> Option<ElfHead> {
        if b.len() < 52 || &b[..4] != b"\x7fELF" {
            return None;
        }
        let class64 = match b[4] {
            1 => false,
            2 => true,
            _ => return None,
        };
        let big = match b[5] {
            1 => false,
            2 => true,
            _ => return None,
        };
        let r = Reader { b, big };
        let (phoff, phentsize, phnum) = if class64 {
            (r.u64(32)?, r.u16(54)?, r.u16(56)?)
        } else {
            (r.u32(28)?, r.u16(42)?, r.u16(44)?)
        };
        Some(ElfHead {
            class64,
            big,
            phoff,
            phentsize,
            phnum,
        })
    }
}

struct Reader<'a> {
    b: &'a [u8],
    big: bool,
}

impl Reader<'_> {
    fn bytes<const N: usize>(&self, o: u64) -> Option<[u8; N]> {
        let o = usize::try_from(o).ok()?;
        self.b.get(o..o.checked_add(N)?)?.try_into().ok()
    }
    fn u16(&self, o: u64) -> Option<u64> {
        let a = self.bytes::<2>(o)?;
        Some(u64::from(if self.big {
            u16::from_be_bytes(a)
        } else {
            u16::from_le_bytes(a)
        }))
    }
    fn u32(&self, o: u64) -> Option<u64> {
        let a = self.bytes::<4>(o)?;
        Some(u64::from(if self.big {
            u32::from_be_bytes(a)
        } else {
            u32::from_le_bytes(a)
        }))
    }
    fn u64(&self, o: u64) -> Option<u64> {
        let a = self.bytes::<8>(o)?;
        Some(if self.big {
            u64::from_be_bytes(a)
        } else {
            u64::from_le_bytes(a)
        })
    }
}

/// Parses the `PT_LOAD` program headers of an ELF image, 32- or 64-bit, either byte order
/// (only the header and the program header table need to be present).
pub fn parse_elf_load_segments(b: &[u8]) -> Option<SegmentTable> {
    let h = ElfHead::parse(b)?;
    let r = Reader { b, big: h.big };
    let min = if h.class64 { 56 } else { 32 };
    if h.phentsize < min {
        return None;
    }
    let mut out = Vec::new();
    for i in 0..h.phnum {
        let p = h.phoff.checked_add(i.checked_mul(h.phentsize)?)?;
        if r.u32(p)? != 1 {
            continue;
        }
        out.push(if h.class64 {
            LoadSegment {
                flags: r.u32(p + 4)? as u32,
                offset: r.u64(p + 8)?,
                vaddr: r.u64(p + 16)?,
                filesz: r.u64(p + 32)?,
                memsz: r.u64(p + 40)?,
            }
        } else {
            LoadSegment {
                offset: r.u32(p + 4)?,
                vaddr: r.u32(p + 8)?,
                filesz: r.u32(p + 16)?,
                memsz: r.u32(p + 20)?,
                flags: r.u32(p + 24)? as u32,
            }
        });
    }
    Some(SegmentTable::new(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_own_test_binary() {
        let exe = std::env::current_exe().unwrap();
        let segs = ElfSegmentsFromDisk
            .load_segments(exe.to_str().unwrap(), None)
            .unwrap();
        assert!(segs
            .segments()
            .iter()
            .any(|s| s.filesz > 0 && s.is_executable()));
        assert_eq!(parse_elf_load_segments(b"not elf"), None);
    }

    #[test]
    fn parses_32_bit_program_headers() {
        // A hand-built ELF32 little-endian header with one PT_LOAD at phoff 52.
        let mut b = vec![0u8; 52 + 32];
        b[..4].copy_from_slice(b"\x7fELF");
        b[4] = 1;
        b[5] = 1;
        b[28..32].copy_from_slice(&52u32.to_le_bytes());
        b[42..44].copy_from_slice(&32u16.to_le_bytes());
        b[44..46].copy_from_slice(&1u16.to_le_bytes());
        let p = 52;
        b[p..p + 4].copy_from_slice(&1u32.to_le_bytes());
        b[p + 4..p + 8].copy_from_slice(&0x1000u32.to_le_bytes());
        b[p + 8..p + 12].copy_from_slice(&0x8049000u32.to_le_bytes());
        b[p + 16..p + 20].copy_from_slice(&0x200u32.to_le_bytes());
        b[p + 20..p + 24].copy_from_slice(&0x200u32.to_le_bytes());
        b[p + 24..p + 28].copy_from_slice(&5u32.to_le_bytes());
        let t = parse_elf_load_segments(&b).unwrap();
        assert_eq!(t.segments(), &[LoadSegment::new(0x1000, 0x8049000, 0x200)]);
    }
}
