//! The data caches of proftrust's cycle model: two set-associative LRU levels (an L1 data
//! cache and a last-level cache) in front of memory, simulated over guest virtual addresses.
//!
//! One implementation serves both places that simulate: `proftrust-vpmu`'s `InstrTimer`
//! (accesses traced out of QEMU with their addresses) and the QEMU plugin, which simulates
//! in its memory callback and ships each access's [`Level`] instead of its address (a word
//! per access instead of two, and no simulation on the host). Being the same code, the two
//! give the same levels for the same access sequence. The latencies and what the model
//! leaves out are documented on `proftrust_vpmu::CacheConfig`; this crate knows geometry
//! and LRU state only.
//!
//! The plugin is GPL-2.0-or-later and links this crate (MIT OR Apache-2.0); nothing here
//! depends on anything.

/// Where an access was served: [`L1`], [`LLC`] or [`MEMORY`] (its slowest line's level).
pub type Level = u8;
/// Served by the L1 data cache.
pub const L1: Level = 0;
/// Missed L1, served by the last-level cache.
pub const LLC: Level = 1;
/// Missed both, served by memory.
pub const MEMORY: Level = 2;

/// Geometry of the two levels. The defaults describe a common x86-64 core: 32 KiB 8-way
/// L1D, 8 MiB 16-way LLC, 64-byte lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Geometry {
    /// Line size in bytes (a power of two; rounded up to one otherwise).
    pub line_size: u32,
    /// L1D capacity in bytes.
    pub l1_size: u32,
    /// L1D associativity.
    pub l1_ways: u32,
    /// LLC capacity in bytes.
    pub llc_size: u32,
    /// LLC associativity.
    pub llc_ways: u32,
}

impl Default for Geometry {
    fn default() -> Self {
        Geometry {
            line_size: 64,
            l1_size: 32 * 1024,
            l1_ways: 8,
            llc_size: 8 * 1024 * 1024,
            llc_ways: 16,
        }
    }
}

impl Geometry {
    /// `line:l1_size:l1_ways:llc_size:llc_ways`, the form the plugin's `cache=` argument
    /// takes (no commas: QEMU's `-plugin` option splits on them).
    pub fn to_arg(&self) -> String {
        format!(
            "{}:{}:{}:{}:{}",
            self.line_size, self.l1_size, self.l1_ways, self.llc_size, self.llc_ways
        )
    }

    /// Parses [`Geometry::to_arg`]'s form; `None` unless it is five positive integers.
    pub fn from_arg(s: &str) -> Option<Geometry> {
        let mut it = s
            .split(':')
            .map(|x| x.parse::<u32>().ok().filter(|&v| v > 0));
        let g = Geometry {
            line_size: it.next()??,
            l1_size: it.next()??,
            l1_ways: it.next()??,
            llc_size: it.next()??,
            llc_ways: it.next()??,
        };
        it.next().is_none().then_some(g)
    }
}

/// One set-associative LRU level: per set, `ways` line numbers, most recent first.
#[derive(Debug, Clone)]
struct Way {
    sets: u64,
    /// `sets - 1` when `sets` is a power of two: the set is then a mask, not a 64-bit
    /// division per access.
    mask: Option<u64>,
    ways: usize,
    lines: Vec<u64>,
}

const EMPTY: u64 = u64::MAX;

impl Way {
    fn new(size: u32, ways: u32, line: u32) -> Way {
        let ways = ways.max(1) as usize;
        let sets = (size as u64 / (line as u64 * ways as u64)).max(1);
        Way {
            sets,
            mask: sets.is_power_of_two().then(|| sets - 1),
            ways,
            lines: vec![EMPTY; sets as usize * ways],
        }
    }

    /// Looks `line` up; on a miss it replaces the least recent line of its set. Either way
    /// `line` becomes the most recent. Returns whether it hit.
    #[inline]
    fn access(&mut self, line: u64) -> bool {
        let set = match self.mask {
            Some(m) => line & m,
            None => line % self.sets,
        } as usize;
        let at = set * self.ways;
        // Most accesses hit the most recent line of their set (the same line as the
        // access before, or a loop's working set): no search, no reordering.
        if self.lines.get(at) == Some(&line) {
            return true;
        }
        self.search(at, line)
    }

    /// [`Way::access`] past the most recent line of the set starting at `at`.
    #[inline(never)]
    fn search(&mut self, at: usize, line: u64) -> bool {
        let row = &mut self.lines[at..at + self.ways];
        match row.iter().position(|&l| l == line) {
            Some(p) => {
                row[..=p].rotate_right(1);
                true
            }
            None => {
                row.rotate_right(1);
                row[0] = line;
                false
            }
        }
    }
}

/// The two levels' LRU state.
///
/// An access touches every line its bytes cover (one crossing a line boundary touches two).
/// For each line: a hit in L1 makes it most recent there; else the LLC is looked up (a hit
/// makes it most recent there) and the line is filled into L1; else it is filled into both.
/// Loads and stores alike (write-allocate). An L1 eviction does not touch the LLC and an LLC
/// eviction does not remove the line from L1 (non-inclusive, no back-invalidation).
#[derive(Debug, Clone)]
pub struct Caches {
    line_shift: u32,
    l1: Way,
    llc: Way,
}

impl Caches {
    /// Empty caches of geometry `g` (a non-power-of-two line size is rounded up; zero sizes
    /// and ways give one set of one way).
    pub fn new(g: &Geometry) -> Caches {
        let line = g.line_size.max(1).next_power_of_two();
        Caches {
            line_shift: line.trailing_zeros(),
            l1: Way::new(g.l1_size, g.l1_ways, line),
            llc: Way::new(g.llc_size, g.llc_ways, line),
        }
    }

    /// Where an access of `size` bytes (at least one) at `addr` is served: the slowest of
    /// the levels of the lines it touches, each line made most recent as described on
    /// [`Caches`].
    #[inline]
    pub fn access(&mut self, addr: u64, size: u32) -> Level {
        let first = addr >> self.line_shift;
        let last = addr.saturating_add(u64::from(size.max(1)) - 1) >> self.line_shift;
        if first == last {
            return self.line(first);
        }
        self.split(first, last)
    }

    /// An access crossing lines `first..=last`.
    #[cold]
    #[inline(never)]
    fn split(&mut self, first: u64, last: u64) -> Level {
        (first..=last).map(|l| self.line(l)).max().unwrap_or(L1)
    }

    #[inline]
    fn line(&mut self, line: u64) -> Level {
        if self.l1.access(line) {
            L1
        } else if self.llc.access(line) {
            LLC
        } else {
            MEMORY
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 64-byte lines, L1 2 sets x 2 ways (256 B), LLC 4 sets x 2 ways (512 B).
    fn tiny() -> Geometry {
        Geometry {
            line_size: 64,
            l1_size: 256,
            l1_ways: 2,
            llc_size: 512,
            llc_ways: 2,
        }
    }

    /// Hand-traced LRU on the tiny cache. Lines 0, 2, 4 all map to L1 set 0 (2 ways) and
    /// lines 0, 4, 8 to LLC set 0 (line 2 to LLC set 2).
    ///   0: miss both (mem)      L1 s0 = [0]       LLC s0 = [0]
    ///   0: L1 hit (same line as the access before)
    ///   2: miss both (mem)      L1 s0 = [2,0]     LLC s2 = [2]
    ///   0: L1 hit               L1 s0 = [0,2]
    ///   4: miss both (mem)      L1 s0 = [4,0] (2 evicted)   LLC s0 = [4,0]
    ///   2: L1 miss, LLC hit     L1 s0 = [2,4] (0 evicted)
    ///   0: L1 miss, LLC hit     L1 s0 = [0,2]  LLC s0 = [0,4]
    ///   8: miss both            L1 s0 = [8,0]  LLC s0 = [8,0] (4 evicted)
    ///   4: miss both            (4 was evicted from the LLC)
    #[test]
    fn lru_by_hand() {
        let mut c = Caches::new(&tiny());
        let got: Vec<Level> = [0u64, 0, 2, 0, 4, 2, 0, 8, 4]
            .iter()
            .map(|&l| c.access(l * 64 + 8, 8))
            .collect();
        assert_eq!(
            got,
            vec![MEMORY, L1, MEMORY, L1, MEMORY, LLC, LLC, MEMORY, MEMORY]
        );
    }

    /// Line-crossing accesses update every line they touch: line 0, then line 2 through a
    /// split access (lines 1 and 2), then line 0 again is an L1 hit only if it was kept.
    /// With 2 ways per set, 0 and 2 share set 0, so 0 stays; after 4 (set 0) it is gone.
    #[test]
    fn split_accesses_update_every_line() {
        let mut c = Caches::new(&tiny());
        assert_eq!(c.access(0, 8), MEMORY);
        assert_eq!(c.access(120, 16), MEMORY); // lines 1 and 2
        assert_eq!(c.access(0, 8), L1);
        assert_eq!(c.access(4 * 64, 8), MEMORY); // set 0 = [4, 0]: 2 evicted
        assert_eq!(c.access(2 * 64, 8), LLC); // set 0 = [2, 4]: 0 evicted
        assert_eq!(c.access(0, 8), LLC);
        // L1 set 1 = [1]; lines 3 and 5 push line 1 out of it (LLC set 1 = [5, 1] keeps it).
        assert_eq!(c.access(3 * 64, 8), MEMORY);
        assert_eq!(c.access(5 * 64, 8), MEMORY);
        // A split access whose slower line decides: line 0 hits L1, line 1 the LLC.
        assert_eq!(c.access(60, 8), LLC);
    }

    /// `access` is the slowest of its lines' levels, each line simulated in turn, on a long
    /// pseudo-random sequence (repeats of the line just used, line-crossing accesses).
    #[test]
    fn access_is_its_lines_simulated_in_turn() {
        let g = tiny();
        let mut fast = Caches::new(&g);
        let mut slow = Caches::new(&g);
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for i in 0..200_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // Mostly a few hot lines, some repeats of the line just used, some splits.
            let addr = if i % 3 == 0 { i * 8 % 4096 } else { x % 2048 };
            let size = [1, 4, 8, 16][(x >> 60) as usize % 4];
            let want = {
                let first = addr >> slow.line_shift;
                let last = (addr + u64::from(size) - 1) >> slow.line_shift;
                (first..=last).map(|l| slow.line(l)).max().unwrap()
            };
            assert_eq!(fast.access(addr, size), want, "access {i}");
        }
    }

    #[test]
    fn plugin_argument_round_trips() {
        let g = Geometry::default();
        assert_eq!(g.to_arg(), "64:32768:8:8388608:16");
        assert_eq!(Geometry::from_arg(&g.to_arg()), Some(g));
        assert_eq!(Geometry::from_arg(&tiny().to_arg()), Some(tiny()));
        for bad in [
            "",
            "64:32768:8:8388608",
            "64:32768:8:8388608:16:1",
            "64:0:8:1:1",
            "a:1:1:1:1",
        ] {
            assert_eq!(Geometry::from_arg(bad), None, "{bad:?}");
        }
    }
}
