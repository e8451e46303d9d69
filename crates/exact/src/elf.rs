//! From (file, file offset) to module-relative address, with the ELF program headers.

use object::{Object, ObjectSegment};

/// The loadable segments and build-id of one ELF file.
#[derive(Debug, Clone, Default)]
pub struct ElfInfo {
    /// (file offset, file size, virtual address) of each loadable segment.
    segments: Vec<(u64, u64, u64)>,
    /// GNU build-id, when the file has one.
    pub build_id: Option<Vec<u8>>,
}

impl ElfInfo {
    /// Reads `path`; `None` when it is unreadable or not an object file.
    pub fn load(path: &str) -> Option<ElfInfo> {
        let data = std::fs::read(path).ok()?;
        let file = object::File::parse(&*data).ok()?;
        let segments = file
            .segments()
            .map(|s| {
                let (off, size) = s.file_range();
                (off, size, s.address())
            })
            .collect();
        let build_id = file.build_id().ok().flatten().map(|b| b.to_vec());
        Some(ElfInfo { segments, build_id })
    }

    /// The SVMA of file offset `fo`: `fo - p_offset + p_vaddr` of the segment holding it.
    pub fn svma(&self, fo: u64) -> Option<u64> {
        self.segments
            .iter()
            .find(|&&(off, size, _)| fo >= off && fo < off + size)
            .map(|&(off, _, vaddr)| fo - off + vaddr)
    }

    /// Load bias (runtime address minus SVMA) given the runtime address of file offset 0.
    pub fn bias(&self, base: u64) -> u64 {
        match self.segments.first() {
            Some(&(off, _, vaddr)) => base.wrapping_add(off).wrapping_sub(vaddr),
            None => base,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_offsets_through_segments() {
        let e = ElfInfo {
            segments: vec![(0, 0x600, 0), (0x1000, 0x200, 0x401000)],
            build_id: None,
        };
        assert_eq!(e.svma(0x1010), Some(0x401010));
        assert_eq!(e.svma(0x10), Some(0x10));
        assert_eq!(e.svma(0x1200), None);
        assert_eq!(e.bias(0x7f00_0000_0000), 0x7f00_0000_0000);
    }

    #[test]
    fn reads_own_executable() {
        let exe = std::env::current_exe().unwrap();
        let e = ElfInfo::load(exe.to_str().unwrap()).unwrap();
        assert!(!e.segments.is_empty());
    }
}
