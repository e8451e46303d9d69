//! Load segments of the objects a profile names: the address rule of
//! [`proftrust_model::segments`] (re-exported here) and [`ElfSegmentsFromDisk`], a
//! [`SegmentSource`] that reads program headers at the recorded paths (with `object`).
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
        if !path.starts_with('/') {
            return None;
        }
        // Only the ELF header and the program header table are read, not the whole file.
        let cache = object::ReadCache::new(std::fs::File::open(path).ok()?);
        load_segments_of(&cache)
    }
}

/// Parses the `PT_LOAD` program headers of an ELF image, 32- or 64-bit, either byte order
/// (only the header and the program header table need to be present), with `object`.
pub fn parse_elf_load_segments(b: &[u8]) -> Option<SegmentTable> {
    load_segments_of(b)
}

fn load_segments_of<'d, R: object::ReadRef<'d>>(data: R) -> Option<SegmentTable> {
    use object::elf::{FileHeader32, FileHeader64};
    match object::FileKind::parse(data).ok()? {
        object::FileKind::Elf32 => program_headers::<FileHeader32<object::Endianness>, R>(data),
        object::FileKind::Elf64 => program_headers::<FileHeader64<object::Endianness>, R>(data),
        _ => None,
    }
}

fn program_headers<'d, H, R>(data: R) -> Option<SegmentTable>
where
    H: object::read::elf::FileHeader<Endian = object::Endianness>,
    R: object::ReadRef<'d>,
{
    use object::read::elf::ProgramHeader;
    let h = H::parse(data).ok()?;
    let e = h.endian().ok()?;
    let phs = h.program_headers(e, data).ok()?;
    let load = phs.iter().filter(|p| p.p_type(e) == object::elf::PT_LOAD);
    Some(SegmentTable::new(
        load.map(|p| LoadSegment {
            offset: p.p_offset(e).into(),
            vaddr: p.p_vaddr(e).into(),
            filesz: p.p_filesz(e).into(),
            memsz: p.p_memsz(e).into(),
            flags: p.p_flags(e),
        })
        .collect(),
    ))
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
        b[4] = 1; // ELFCLASS32
        b[5] = 1; // ELFDATA2LSB
        b[6] = 1; // EV_CURRENT
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
