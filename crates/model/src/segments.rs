//! The one address rule: file offset ↔ SVMA ↔ runtime address, through an object's
//! `PT_LOAD` segments and the mapping a profiler saw.
//!
//! A profiler sees an executable mapping `[start, end)` of file offset `pgoff` and a runtime
//! address `ip`:
//!
//! * **runtime → file offset**: `off = ip - start + pgoff` ([`Mapping::file_offset`]);
//! * **file offset → SVMA**: the `PT_LOAD` segment with `p_offset <= off < p_offset +
//!   p_filesz` states the byte at `svma = off - p_offset + p_vaddr`
//!   ([`SegmentTable::svma_of_offset`]); the inverse is [`SegmentTable::offset_of_svma`];
//! * **load bias** = runtime address − SVMA ([`SegmentTable::load_bias`]), 0 for a non-PIE
//!   executable loaded where it was linked.
//!
//! This is what `perf` does when it moves symbol values into file-offset space by the
//! section (`sh_addr - sh_offset`) holding them, and what `objdump`/`addr2line` expect.
//! When a file offset lies in no segment's file range, the answer is `None`, never a guess;
//! callers that have no segments at all (the object is missing) may fall back to
//! `svma = off`, which is exact for PIE executables and shared objects linked by the usual
//! linkers (`p_vaddr == p_offset`) and wrong for non-PIE executables; they must say so.
//!
//! Edge cases the rule handles (tests below, on segment tables of real binaries): non-PIE
//! (`p_vaddr = 0x400000 + p_offset`), PIE and shared objects (`p_vaddr == p_offset`), static
//! executables, read-only segments before text (`-z separate-code`: a page of the R segment
//! and the RX segment may share file bytes; the executable segment wins), prelinked shared
//! objects (`p_vaddr` far from `p_offset`), huge-page alignment (`-z max-page-size=0x200000`),
//! and segments whose file size is 0 (`.bss` only; they hold no file offset). All arithmetic
//! is checked: corrupt headers or mappings give `None`, not a wrapped address.

use crate::addr::{BuildId, Svma};

/// `PF_X` in `p_flags`.
pub const PF_X: u32 = 1;

/// One `PT_LOAD` program header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LoadSegment {
    /// `p_offset`: where the segment's bytes start in the file.
    pub offset: u64,
    /// `p_vaddr`: where the ELF file states them (SVMA).
    pub vaddr: u64,
    /// `p_filesz`: bytes taken from the file.
    pub filesz: u64,
    /// `p_memsz`: bytes in memory (≥ `filesz`; the rest is zero-filled).
    pub memsz: u64,
    /// `p_flags` (`PF_X` = 1, `PF_W` = 2, `PF_R` = 4).
    pub flags: u32,
}

impl LoadSegment {
    /// A segment with `memsz == filesz` and flags `R|X` (tests and simple callers).
    pub fn new(offset: u64, vaddr: u64, filesz: u64) -> LoadSegment {
        LoadSegment {
            offset,
            vaddr,
            filesz,
            memsz: filesz,
            flags: 4 | PF_X,
        }
    }

    /// Whether the segment is executable.
    pub fn is_executable(&self) -> bool {
        self.flags & PF_X != 0
    }

    fn holds_offset(&self, off: u64) -> bool {
        off >= self.offset && off - self.offset < self.filesz
    }

    fn holds_svma(&self, svma: u64) -> bool {
        svma >= self.vaddr && svma - self.vaddr < self.filesz
    }
}

/// The `PT_LOAD` segments of one object, in program-header order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct SegmentTable {
    segments: Vec<LoadSegment>,
}

impl SegmentTable {
    /// A table of these segments (any order; program-header order is kept).
    pub fn new(segments: Vec<LoadSegment>) -> SegmentTable {
        SegmentTable { segments }
    }

    /// The segments.
    pub fn segments(&self) -> &[LoadSegment] {
        &self.segments
    }

    /// True when the object has no loadable segment.
    pub fn is_empty(&self) -> bool {
        self.segments.is_empty()
    }

    /// The segment holding file offset `off`: an executable one when several hold it
    /// (pages shared between a read-only segment and text), else the first.
    pub fn segment_of_offset(&self, off: u64) -> Option<&LoadSegment> {
        let mut found = None;
        for s in self.segments.iter().filter(|s| s.holds_offset(off)) {
            if s.is_executable() {
                return Some(s);
            }
            found.get_or_insert(s);
        }
        found
    }

    /// SVMA of file offset `off`; `None` when no segment's file range holds it or the sum
    /// overflows.
    pub fn svma_of_offset(&self, off: u64) -> Option<Svma> {
        let s = self.segment_of_offset(off)?;
        (off - s.offset).checked_add(s.vaddr).map(Svma)
    }

    /// File offset of `svma`; `None` when no segment's file bytes hold it.
    pub fn offset_of_svma(&self, svma: Svma) -> Option<u64> {
        let mut found = None;
        for s in self.segments.iter().filter(|s| s.holds_svma(svma.0)) {
            if s.is_executable() {
                found = Some(s);
                break;
            }
            found.get_or_insert(s);
        }
        let s = found?;
        (svma.0 - s.vaddr).checked_add(s.offset)
    }

    /// SVMA of runtime address `ip` inside mapping `m`; `None` when `ip` is outside the
    /// mapping or its file offset in no segment.
    pub fn svma_of_runtime(&self, m: &Mapping, ip: u64) -> Option<Svma> {
        self.svma_of_offset(m.file_offset(ip)?)
    }

    /// Runtime address of `svma` inside mapping `m`; `None` when the mapping does not hold
    /// it.
    pub fn runtime_of_svma(&self, m: &Mapping, svma: Svma) -> Option<u64> {
        m.runtime_of_offset(self.offset_of_svma(svma)?)
    }

    /// Load bias (runtime − SVMA, modulo 2^64: a prelinked object loaded below its stated
    /// address has a "negative" bias) of the object mapped by `m`, from the segment holding
    /// the mapping's first byte, else from the first segment.
    pub fn load_bias(&self, m: &Mapping) -> Option<u64> {
        let s = self
            .segment_of_offset(m.pgoff)
            .or_else(|| self.segments.first())?;
        // runtime(off) = start + off - pgoff; svma(off) = off - p_offset + p_vaddr.
        Some(
            m.start
                .wrapping_sub(m.pgoff)
                .wrapping_add(s.offset)
                .wrapping_sub(s.vaddr),
        )
    }
}

/// An executable mapping as a profiler saw it (`mmap` record, `/proc/PID/maps` line).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Mapping {
    /// First runtime address.
    pub start: u64,
    /// One past the last runtime address.
    pub end: u64,
    /// File offset mapped at `start`.
    pub pgoff: u64,
}

impl Mapping {
    /// A mapping of `len` bytes at `start` from file offset `pgoff` (the end saturates).
    pub fn new(start: u64, len: u64, pgoff: u64) -> Mapping {
        Mapping {
            start,
            end: start.saturating_add(len),
            pgoff,
        }
    }

    /// Whether runtime address `ip` lies in the mapping.
    pub fn contains(&self, ip: u64) -> bool {
        ip >= self.start && ip < self.end
    }

    /// File offset of runtime address `ip`; `None` outside the mapping or on overflow (a
    /// corrupt page offset).
    pub fn file_offset(&self, ip: u64) -> Option<u64> {
        if !self.contains(ip) {
            return None;
        }
        (ip - self.start).checked_add(self.pgoff)
    }

    /// Runtime address of file offset `off`; `None` when the mapping does not hold it.
    pub fn runtime_of_offset(&self, off: u64) -> Option<u64> {
        let ip = off.checked_sub(self.pgoff)?.checked_add(self.start)?;
        self.contains(ip).then_some(ip)
    }
}

/// Supplies the load segments of the objects a profile names.
pub trait SegmentSource {
    /// `PT_LOAD` segments of the object recorded at `path` (with `build_id` when the
    /// profile states one), or `None` when no matching file is available.
    fn load_segments(&self, path: &str, build_id: Option<&BuildId>) -> Option<SegmentTable>;
}

/// A [`SegmentSource`] that knows no object: callers fall back to `svma = file offset`.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoSegments;

impl SegmentSource for NoSegments {
    fn load_segments(&self, _path: &str, _build_id: Option<&BuildId>) -> Option<SegmentTable> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(offset: u64, vaddr: u64, filesz: u64, memsz: u64, flags: u32) -> LoadSegment {
        LoadSegment {
            offset,
            vaddr,
            filesz,
            memsz,
            flags,
        }
    }

    /// Named segment tables: the first ones copied from `readelf -lW` of real binaries built
    /// here (Debian 12, gcc 12, binutils 2.40; the commands are in the comments), the
    /// prelinked ones written by hand; and what the rule must give for a file offset in their text.
    struct Case {
        name: &'static str,
        segs: Vec<LoadSegment>,
        /// (file offset, expected SVMA).
        offsets: Vec<(u64, Option<u64>)>,
        /// (mapping start, pgoff, expected bias).
        bias: (u64, u64, u64),
    }

    fn cases() -> Vec<Case> {
        vec![
            Case {
                // gcc -O2 -no-pie: R, RX, R, RW (separate-code).
                name: "non-PIE executable",
                segs: vec![
                    seg(0, 0x400000, 0x498, 0x498, 4),
                    seg(0x1000, 0x401000, 0x121, 0x121, 5),
                    seg(0x2000, 0x402000, 0x98, 0x98, 4),
                    seg(0x2e38, 0x403e38, 0x1d8, 0x1e0, 6),
                ],
                offsets: vec![
                    (0x1040, Some(0x401040)),
                    (0x1120, Some(0x401120)),
                    (0x1121, None),
                    (0x2e40, Some(0x403e40)),
                    (0x498, None),
                ],
                bias: (0x401000, 0x1000, 0),
            },
            Case {
                // gcc -O2 (PIE): p_vaddr == p_offset except for the RW segment.
                name: "PIE executable",
                segs: vec![
                    seg(0, 0, 0x5e0, 0x5e0, 4),
                    seg(0x1000, 0x1000, 0x145, 0x145, 5),
                    seg(0x2000, 0x2000, 0xd0, 0xd0, 4),
                    seg(0x2e00, 0x3e00, 0x210, 0x218, 6),
                ],
                offsets: vec![(0x1130, Some(0x1130)), (0x2e08, Some(0x3e08))],
                bias: (0x5555_5555_5000, 0x1000, 0x5555_5555_4000),
            },
            Case {
                // gcc -static -O2: non-PIE, big RW with .bss.
                name: "static executable",
                segs: vec![
                    seg(0, 0x400000, 0x518, 0x518, 4),
                    seg(0x1000, 0x401000, 0x77b01, 0x77b01, 5),
                    seg(0x79000, 0x479000, 0x26f3e, 0x26f3e, 4),
                    seg(0xa06d8, 0x4a06d8, 0x5b98, 0xb3c8, 6),
                ],
                offsets: vec![(0x1234, Some(0x401234)), (0x78b00, Some(0x478b00))],
                bias: (0x401000, 0x1000, 0),
            },
            Case {
                // Debian 12 libc.so.6: RO segment before text, RW at a non-page offset.
                name: "shared object",
                segs: vec![
                    seg(0, 0, 0x25388, 0x25388, 4),
                    seg(0x26000, 0x26000, 0x1550fc, 0x1550fc, 5),
                    seg(0x17c000, 0x17c000, 0x52c31, 0x52c31, 4),
                    seg(0x1cf8d0, 0x1cf8d0, 0x4f98, 0x12680, 6),
                ],
                offsets: vec![(0x26000, Some(0x26000)), (0x1cf8e0, Some(0x1cf8e0))],
                bias: (0x7f00_0002_6000, 0x26000, 0x7f00_0000_0000),
            },
            Case {
                // A shared object prelinked at 0x3000000000: p_vaddr far above p_offset.
                name: "prelinked shared object",
                segs: vec![
                    seg(0, 0x30_0000_0000, 0x1000, 0x1000, 4),
                    seg(0x1000, 0x30_0000_1000, 0x2000, 0x2000, 5),
                ],
                offsets: vec![(0x1800, Some(0x30_0000_1800)), (0x3000, None)],
                bias: (0x7f00_0000_1000, 0x1000, 0x7f00_0000_0000 - 0x30_0000_0000),
            },
            Case {
                // Prelinked above where it is loaded: the bias is "negative" (wraps).
                name: "prelinked, loaded below its stated address",
                segs: vec![seg(0x1000, 0x7f00_0000_1000, 0x2000, 0x2000, 5)],
                offsets: vec![(0x1800, Some(0x7f00_0000_1800))],
                bias: (
                    0x30_0000_1000,
                    0x1000,
                    0x30_0000_0000u64.wrapping_sub(0x7f00_0000_0000),
                ),
            },
            Case {
                // gcc -no-pie -Wl,-z,max-page-size=0x200000 -Wl,-z,separate-code (huge pages).
                name: "huge-page aligned",
                segs: vec![
                    seg(0, 0x400000, 0x498, 0x498, 4),
                    seg(0x200000, 0x600000, 0x121, 0x121, 5),
                    seg(0x400000, 0x800000, 0x98, 0x98, 4),
                    seg(0x5ffe38, 0xbffe38, 0x1d8, 0x1e0, 6),
                ],
                offsets: vec![(0x200100, Some(0x600100)), (0x100000, None)],
                bias: (0x600000, 0x200000, 0),
            },
            Case {
                // gcc -no-pie -Wl,-z,noseparate-code: text and read-only data in one RX
                // segment from offset 0; plus a bss-only segment that holds no file byte.
                name: "text from offset 0, bss-only segment",
                segs: vec![
                    seg(0, 0x400000, 0x5e0, 0x5e0, 5),
                    seg(0xe38, 0x401e38, 0x1d8, 0x1e0, 6),
                    seg(0x1010, 0x402010, 0, 0x10, 6),
                ],
                offsets: vec![(0x4f0, Some(0x4004f0)), (0x1010, None)],
                bias: (0x400000, 0, 0),
            },
            Case {
                // Two segments covering the same file page (R then RX): text wins.
                name: "shared page, executable wins",
                segs: vec![
                    seg(0, 0x10000, 0x1800, 0x1800, 4),
                    seg(0x1000, 0x21000, 0x800, 0x800, 5),
                ],
                offsets: vec![(0x1100, Some(0x21100)), (0x900, Some(0x10900))],
                bias: (0x21000, 0x1000, 0),
            },
        ]
    }

    #[test]
    fn real_segment_tables() {
        for c in cases() {
            let t = SegmentTable::new(c.segs.clone());
            for &(off, want) in &c.offsets {
                assert_eq!(
                    t.svma_of_offset(off).map(|s| s.0),
                    want,
                    "{}: offset {off:#x}",
                    c.name
                );
                if let Some(svma) = want {
                    assert_eq!(
                        t.offset_of_svma(Svma(svma)),
                        Some(off),
                        "{}: round trip of {svma:#x}",
                        c.name
                    );
                }
            }
            let (start, pgoff, bias) = c.bias;
            let m = Mapping::new(start, 0x10_0000, pgoff);
            assert_eq!(t.load_bias(&m), Some(bias), "{}: bias", c.name);
            // runtime = svma + bias for the first text byte.
            let svma = t.svma_of_runtime(&m, start).expect(c.name);
            assert_eq!(svma.0.wrapping_add(bias), start, "{}: runtime", c.name);
            assert_eq!(t.runtime_of_svma(&m, svma), Some(start), "{}", c.name);
        }
    }

    #[test]
    fn overflow_is_none_not_wrapped() {
        let m = Mapping::new(0x1000, 0x1000, u64::MAX - 4);
        assert_eq!(m.file_offset(0x1010), None);
        assert_eq!(m.file_offset(0x0fff), None);
        assert_eq!(m.file_offset(0x2000), None);
        let t = SegmentTable::new(vec![seg(u64::MAX - 8, u64::MAX - 2, 8, 8, 5)]);
        assert_eq!(t.svma_of_offset(u64::MAX - 1), None);
        let full = Mapping::new(u64::MAX - 1, 10, 0);
        assert_eq!(full.end, u64::MAX);
        assert_eq!(full.runtime_of_offset(u64::MAX), None);
        let t = SegmentTable::new(vec![seg(0, 0, u64::MAX, u64::MAX, 5)]);
        assert_eq!(t.svma_of_offset(u64::MAX - 1), Some(Svma(u64::MAX - 1)));
        assert_eq!(SegmentTable::default().load_bias(&full), None);
    }
}
