//! From (file, file offset) to module-relative address, with the ELF program headers.

use proftrust_model::segments::{Mapping, SegmentTable};

/// The loadable segments and build-id of one ELF file. The address arithmetic is the one
/// rule of [`proftrust_model::segments`].
#[derive(Debug, Clone, Default)]
pub struct ElfInfo {
    /// The `PT_LOAD` segments.
    segments: SegmentTable,
    /// GNU build-id, when the file has one.
    pub build_id: Option<Vec<u8>>,
}

impl ElfInfo {
    /// Reads `path`; `None` when it is unreadable or not an object file.
    pub fn load(path: &str) -> Option<ElfInfo> {
        let h = proftrust_binary::LoadHeaders::read(std::path::Path::new(path))?;
        Some(ElfInfo {
            segments: h.segments,
            build_id: h.build_id.map(|b| b.0),
        })
    }

    /// The SVMA of file offset `fo`: `fo - p_offset + p_vaddr` of the segment holding it.
    pub fn svma(&self, fo: u64) -> Option<u64> {
        self.segments.svma_of_offset(fo).map(|s| s.0)
    }

    /// Load bias (runtime address minus SVMA) given the runtime address of file offset 0.
    pub fn bias(&self, base: u64) -> u64 {
        self.segments
            .load_bias(&Mapping {
                start: base,
                end: u64::MAX,
                pgoff: 0,
            })
            .unwrap_or(base)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proftrust_model::segments::LoadSegment;

    #[test]
    fn maps_offsets_through_segments() {
        let e = ElfInfo {
            segments: SegmentTable::new(vec![
                LoadSegment::new(0, 0, 0x600),
                LoadSegment::new(0x1000, 0x401000, 0x200),
            ]),
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
        assert!(e.segments.segments().iter().any(|s| s.is_executable()));
    }
}
