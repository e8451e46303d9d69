//! Per-instruction timing of a traced run: the static [`CycleModel`] plus, when a cache is
//! configured and the trace carries data accesses ([`TraceBlock::mem`]), a simulation of
//! set-associative LRU data caches.
//!
//! The cache model and what it leaves out are documented on [`CacheConfig`].

use super::cycles::{CostTable, CycleModel};
use crate::VpmuError;
use proftrust_cachesim::{Caches, Geometry};
use proftrust_model::{MemAccess, Module, ModuleIdx, TraceBlock};

/// Set-associative LRU data caches (L1D, last level) in front of memory. The defaults
/// describe a common x86-64 core (32 KiB 8-way L1D, an 8 MiB 16-way LLC, 64-byte lines); the
/// latencies are load-to-use cycles of each level as commonly measured on such cores, a
/// documented approximation (fidelity to a particular CPU needs a hardware PMU).
///
/// # The model
///
/// Two levels in front of memory: an L1 data
/// cache and a last-level cache (LLC), each `size / (line * ways)` sets of `ways` lines with
/// exact LRU replacement. Addresses are guest virtual addresses (user mode: the program's
/// own pointers); a line is `addr / line_size` and its set is `line % sets`.
///
/// An access touches every line its bytes cover (an access crossing a line boundary touches
/// two). For each line: a hit in L1 makes it most recent there; else the LLC is looked up
/// (a hit makes it most recent there) and the line is filled into L1; else it is filled into
/// both from memory. Writes allocate like reads (write-allocate); write-backs of dirty lines
/// cost nothing. An L1 eviction does not touch the LLC and an LLC eviction does not remove the
/// line from L1 (non-inclusive, no back-invalidation). One cache serves the whole process:
/// threads share it in the order their accesses happen when the QEMU plugin simulates it
/// (`proftrust_exact::QemuOptions::cache`: the accesses then arrive with their
/// [`MemAccess::level`]), in the order their blocks arrive when this timer simulates the
/// traced addresses. Both run the same code, `proftrust_cachesim::Caches`.
///
/// The latency of an access is its slowest line's level: [`CacheConfig::l1_latency`],
/// [`CacheConfig::llc_latency`] or [`CacheConfig::memory_latency`] for a load, and
/// [`CacheConfig::store_latency`] for a store whatever the level (a store retires into the
/// store buffer; its miss is still counted and its line still allocated). An instruction's
/// cycles are its static cost plus the latency of each of its accesses, one after the other.
/// With a cache, the static model should therefore leave memory latency out
/// ([`ClassCycles`](super::ClassCycles) with `load = 0` and `store = 0`), or loads pay twice.
///
/// **Left out**: hardware prefetchers (a sequential walk misses on every new line), memory-
/// level parallelism (misses never overlap; an out-of-order core overlaps independent misses,
/// so memory-bound code is modelled slower than it runs), intermediate levels (L2), TLBs,
/// bank conflicts, coherence between cores, and the instruction cache. Software prefetches
/// are invisible: QEMU executes them as no-ops and reports no access. What QEMU reports is
/// what its x86 front end emits: a 16-byte SSE access arrives as two 8-byte accesses (same
/// line unless the access is misaligned), which is two accesses here.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CacheConfig {
    /// Line size in bytes, a power of two. Default 64.
    pub line_size: u32,
    /// L1D capacity in bytes (a multiple of `line_size * l1_ways`). Default 32768.
    pub l1_size: u32,
    /// L1D associativity. Default 8.
    pub l1_ways: u32,
    /// Cycles of a load that hits L1D. Default 4.
    pub l1_latency: u32,
    /// Last-level cache capacity in bytes (a multiple of `line_size * llc_ways`). Default
    /// 8388608 (8 MiB).
    pub llc_size: u32,
    /// LLC associativity. Default 16.
    pub llc_ways: u32,
    /// Cycles of a load that misses L1D and hits the LLC. Default 40.
    pub llc_latency: u32,
    /// Cycles of a load that misses the LLC (goes to memory). Default 200.
    pub memory_latency: u32,
    /// Cycles of a store, wherever its line is. Default 1.
    pub store_latency: u32,
}

impl Default for CacheConfig {
    fn default() -> Self {
        CacheConfig {
            line_size: 64,
            l1_size: 32 * 1024,
            l1_ways: 8,
            l1_latency: 4,
            llc_size: 8 * 1024 * 1024,
            llc_ways: 16,
            llc_latency: 40,
            memory_latency: 200,
            store_latency: 1,
        }
    }
}

impl CacheConfig {
    /// Cycles of an access served at `level` (0 L1D, 1 LLC, 2 memory; above 2 counts as
    /// memory): the level's load latency, or the store latency wherever the line was.
    #[inline]
    pub fn latency(&self, level: u8, store: bool) -> u32 {
        if store {
            self.store_latency
        } else {
            [self.l1_latency, self.llc_latency, self.memory_latency][usize::from(level.min(2))]
        }
    }

    /// The geometry alone (what the QEMU plugin needs to simulate the caches itself).
    pub fn geometry(&self) -> Geometry {
        Geometry {
            line_size: self.line_size,
            l1_size: self.l1_size,
            l1_ways: self.l1_ways,
            llc_size: self.llc_size,
            llc_ways: self.llc_ways,
        }
    }

    /// Checks the geometry: a power-of-two line size, at least one way, and each capacity a
    /// non-zero multiple of `line_size * ways`.
    pub fn check(&self) -> Result<(), VpmuError> {
        let bad = |what: String| {
            Err(VpmuError::InvalidOptions {
                what,
                fix: "use a power-of-two line size and capacities that are multiples of line size x ways",
            })
        };
        if self.line_size == 0 || !self.line_size.is_power_of_two() {
            return bad(format!("cache line size {}", self.line_size));
        }
        for (name, size, ways) in [
            ("L1D", self.l1_size, self.l1_ways),
            ("LLC", self.llc_size, self.llc_ways),
        ] {
            let way_bytes = self.line_size as u64 * ways as u64;
            if ways == 0 || size == 0 || size as u64 % way_bytes != 0 {
                return bad(format!(
                    "{name} of {size} bytes, {ways} ways, {}-byte lines",
                    self.line_size
                ));
            }
        }
        Ok(())
    }
}

/// Timing of one executed instruction.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct InstrTiming {
    /// Cycles the instruction took.
    pub cycles: u32,
    /// Its data accesses that missed L1D.
    pub l1_misses: u8,
    /// Its data accesses that missed the last-level cache (went to memory).
    pub llc_misses: u8,
    /// Its address depends on a loaded register ([`CostTable::dependent`]).
    pub dependent: bool,
    /// It read memory (a traced load; known with a cache only).
    pub loads: bool,
}

/// Totals of the cache simulation so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Data accesses simulated.
    pub accesses: u64,
    /// Of which loads.
    pub loads: u64,
    /// Accesses that missed L1D.
    pub l1_misses: u64,
    /// Accesses that missed the LLC.
    pub llc_misses: u64,
}

impl CacheStats {
    /// Counts one access served at `level` (0 L1D, 1 LLC, 2 memory).
    #[inline]
    pub fn count(&mut self, level: u8, store: bool) {
        self.accesses += 1;
        self.loads += u64::from(!store);
        self.l1_misses += u64::from(level >= 1);
        self.llc_misses += u64::from(level == 2);
    }
}

/// The two levels ([`proftrust_cachesim::Caches`]) and their latencies.
#[derive(Debug, Clone)]
struct Cache {
    cfg: CacheConfig,
    caches: Caches,
    stats: CacheStats,
}

impl Cache {
    fn new(cfg: CacheConfig) -> Cache {
        // A non-power-of-two line size (refused by `check`) is rounded up by `Caches`.
        Cache {
            caches: Caches::new(&cfg.geometry()),
            cfg,
            stats: CacheStats::default(),
        }
    }

    /// (latency, missed L1, missed LLC) of one access: simulated from its address, or from
    /// the level the tracer simulated it at ([`MemAccess::level`], the same [`Caches`] run
    /// where the access happened).
    #[inline]
    fn access(&mut self, a: &MemAccess) -> (u32, bool, bool) {
        let level = match a.level {
            Some(l) => l.min(proftrust_cachesim::MEMORY),
            None => self.caches.access(a.addr, u32::from(a.size)),
        };
        self.stats.count(level, a.store);
        (self.cfg.latency(level, a.store), level >= 1, level == 2)
    }
}

/// Per-instruction timing of a traced run: the static cost of the [`CycleModel`] plus, when a
/// cache is configured and the block carries memory accesses, the latency of each access
/// (model and omissions: [`CacheConfig`]).
#[derive(Debug, Clone)]
pub struct InstrTimer {
    model: CycleModel,
    cache: Option<Cache>,
    /// Per trace module index: the cost table that matched its file name.
    tables: Vec<Option<usize>>,
    /// Per keyed trace block ([`TraceBlock::key`]): the static timing of its instructions
    /// and their summed cycles, looked up in the cost table once instead of per execution (a
    /// flat array by key).
    keyed: Vec<Option<(Box<[InstrTiming]>, u64)>>,
}

impl InstrTimer {
    /// A timer with the static model and, optionally, a cache. A geometry that
    /// [`CacheConfig::check`] refuses is made usable (line size rounded up to a power of two,
    /// at least one set and one way); check it first to report the problem.
    pub fn new(model: CycleModel, cache: Option<CacheConfig>) -> InstrTimer {
        InstrTimer {
            model,
            cache: cache.map(Cache::new),
            tables: Vec::new(),
            keyed: Vec::new(),
        }
    }

    /// Call from `BlockVisitor::module` (matches cost tables to modules by file name).
    pub fn module(&mut self, idx: ModuleIdx, module: &Module) {
        let i = idx.0 as usize;
        if self.tables.len() <= i {
            self.tables.resize(i + 1, None);
        }
        self.tables[i] = self.model.table_for(module);
    }

    /// The summed cycles of block `b` (what [`InstrTimer::time_block`]'s instructions add up
    /// to) when they need no simulation: a keyed block timed before, without a cache or with
    /// every access carrying the level it was served at (the plugin simulated the caches);
    /// with them, the cache totals its accesses add. Changes nothing: a caller that takes
    /// this instead of timing the block adds the totals ([`InstrTimer::add_stats`]). `None`:
    /// time the block.
    #[inline]
    pub fn block_cycles(&self, b: &TraceBlock<'_>) -> Option<(u64, CacheStats)> {
        let (_, total) = self.keyed.get(b.key? as usize)?.as_ref()?;
        let mut st = CacheStats::default();
        let Some(c) = &self.cache else {
            return Some((*total, st));
        };
        let mut sum = *total;
        for a in b.mem {
            let l = a.level?.min(proftrust_cachesim::MEMORY);
            sum += u64::from(c.cfg.latency(l, a.store));
            st.count(l, a.store);
        }
        // `time_block` saturates an instruction's cycles at u32::MAX: below that in total,
        // no instruction reached it and the sums agree.
        (sum < u64::from(u32::MAX)).then_some((sum, st))
    }

    /// The cache configuration, when a cache is simulated.
    pub fn cache_config(&self) -> Option<&CacheConfig> {
        self.cache.as_ref().map(|c| &c.cfg)
    }

    /// Adds totals counted elsewhere (accesses whose levels were given, summed by the
    /// caller as [`InstrTimer::time_block`] would count them). Nothing without a cache.
    pub fn add_stats(&mut self, s: &CacheStats) {
        if let Some(c) = self.cache.as_mut() {
            c.stats.accesses += s.accesses;
            c.stats.loads += s.loads;
            c.stats.l1_misses += s.l1_misses;
            c.stats.llc_misses += s.llc_misses;
        }
    }

    /// Timing of each instruction of `b`, in order (`out` is cleared first).
    pub fn time_block(&mut self, b: &TraceBlock<'_>, out: &mut Vec<InstrTiming>) {
        out.clear();
        let table: Option<&CostTable> = b
            .module
            .and_then(|m| self.tables.get(m.0 as usize).copied().flatten())
            .map(|t| &self.model.tables[t]);
        let default = self.model.default_cycles;
        let static_timing = |s: &proftrust_model::Svma| InstrTiming {
            cycles: table
                .and_then(|t| t.costs.get(&s.0))
                .map_or(default, |c| c.cycles),
            l1_misses: 0,
            llc_misses: 0,
            dependent: table.is_some_and(|t| t.dependent.contains(&s.0)),
            loads: false,
        };
        match b.key {
            Some(k) => {
                let k = k as usize;
                if self.keyed.len() <= k {
                    self.keyed.resize(k + 1, None);
                }
                let (stat, _) = self.keyed[k].get_or_insert_with(|| {
                    let t: Box<[InstrTiming]> = b.instructions.iter().map(static_timing).collect();
                    let total = t.iter().map(|t| t.cycles as u64).sum();
                    (t, total)
                });
                out.extend_from_slice(stat);
            }
            None => out.extend(b.instructions.iter().map(static_timing)),
        }
        self.simulate_accesses(b.mem, |insn, lat, m1, m2, store| {
            if let Some(t) = out.get_mut(insn as usize) {
                t.cycles = t.cycles.saturating_add(lat);
                t.l1_misses = t.l1_misses.saturating_add(m1 as u8);
                t.llc_misses = t.llc_misses.saturating_add(m2 as u8);
                t.loads |= !store;
            }
        });
    }

    /// Runs the data accesses `mem` (of one block, in order) through the cache alone, no
    /// static cost: `f(insn, latency, missed L1, missed LLC, store)` per access, in order.
    /// Nothing happens without a cache. [`InstrTimer::time_block`] is the static timing
    /// plus this.
    #[inline]
    pub fn simulate_accesses(
        &mut self,
        mem: &[MemAccess],
        mut f: impl FnMut(u16, u32, bool, bool, bool),
    ) {
        let Some(cache) = self.cache.as_mut() else {
            return;
        };
        for a in mem {
            let (lat, m1, m2) = cache.access(a);
            f(a.insn, lat, m1, m2, a.store);
        }
    }

    /// Whether a cache is simulated.
    pub fn has_cache(&self) -> bool {
        self.cache.is_some()
    }

    /// Totals of the cache simulation (`None` without a cache).
    pub fn cache_stats(&self) -> Option<CacheStats> {
        self.cache.as_ref().map(|c| c.stats)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::StaticCost;
    use proftrust_model::{Svma, TraceEnd};

    fn load(insn: u16, addr: u64) -> MemAccess {
        MemAccess {
            insn,
            addr,
            size: 8,
            store: false,
            level: None,
        }
    }

    /// A tiny cache: 64-byte lines, L1 2 sets x 2 ways (256 B), LLC 4 sets x 2 ways (512 B).
    fn tiny() -> CacheConfig {
        CacheConfig {
            line_size: 64,
            l1_size: 256,
            l1_ways: 2,
            l1_latency: 3,
            llc_size: 512,
            llc_ways: 2,
            llc_latency: 30,
            memory_latency: 300,
            store_latency: 1,
        }
    }

    /// Hand-traced LRU on the tiny cache. Lines 0, 2, 4 all map to L1 set 0 (2 ways) and
    /// lines 0, 4 to LLC set 0 (line 2 to LLC set 2).
    ///   0: miss both (mem)      L1 s0 = [0]       LLC s0 = [0]
    ///   2: miss both (mem)      L1 s0 = [2,0]     LLC s2 = [2]
    ///   0: L1 hit               L1 s0 = [0,2]
    ///   4: miss both (mem)      L1 s0 = [4,0] (2 evicted)   LLC s0 = [4,0]
    ///   2: L1 miss, LLC hit     L1 s0 = [2,4] (0 evicted)
    ///   0: L1 miss, LLC hit     L1 s0 = [0,2]  LLC s0 = [0,4]
    ///   8: miss both            L1 s0 = [8,0]  LLC s0 = [8,0] (4 evicted)
    ///   4: miss both            (4 was evicted from the LLC)
    #[test]
    fn lru_by_hand() {
        let mut c = Cache::new(tiny());
        let got: Vec<(u32, bool, bool)> = [0u64, 2, 0, 4, 2, 0, 8, 4]
            .iter()
            .map(|&l| c.access(&load(0, l * 64 + 8)))
            .collect();
        let mem = (300, true, true);
        let llc = (30, true, false);
        let l1 = (3, false, false);
        assert_eq!(got, vec![mem, mem, l1, mem, llc, llc, mem, mem]);
        assert_eq!(
            c.stats,
            CacheStats {
                accesses: 8,
                loads: 8,
                l1_misses: 7,
                llc_misses: 5
            }
        );
    }

    /// A load crossing a line boundary touches both lines; the slower decides. A store pays
    /// the store latency but allocates and counts its miss.
    #[test]
    fn split_accesses_and_stores() {
        let mut c = Cache::new(tiny());
        assert_eq!(c.access(&load(0, 60)), (300, true, true)); // lines 0 and 1
        assert_eq!(c.access(&load(0, 0)), (3, false, false));
        assert_eq!(c.access(&load(0, 64)), (3, false, false));
        let st = MemAccess {
            insn: 0,
            addr: 128,
            size: 4,
            store: true,
            level: None,
        };
        assert_eq!(c.access(&st), (1, true, true));
        assert_eq!(c.access(&load(0, 130)), (3, false, false));
    }

    /// Sequential walks: over 2x the L1 capacity every access misses L1 (LRU cycling); within
    /// the LLC only the first pass goes to memory; within L1 only the first pass misses.
    #[test]
    fn walks_larger_and_smaller_than_the_cache() {
        for (lines, passes, want_l1, want_llc) in [
            (8u64, 5u64, 8 * 5, 8),  // 2x L1, = LLC capacity
            (4, 5, 4, 4),            // = L1 capacity
            (16, 3, 16 * 3, 16 * 3), // 2x LLC
        ] {
            let mut c = Cache::new(tiny());
            for _ in 0..passes {
                for l in 0..lines {
                    c.access(&load(0, l * 64));
                }
            }
            assert_eq!(
                (c.stats.l1_misses, c.stats.llc_misses),
                (want_l1, want_llc),
                "{lines} lines"
            );
        }
    }

    #[test]
    fn timer_adds_access_latency_to_static_cost() {
        let mut t = CostTable::new("prog");
        t.costs.insert(0x10, StaticCost { cycles: 1, len: 4 });
        t.costs.insert(0x14, StaticCost { cycles: 2, len: 4 });
        let model = CycleModel {
            default_cycles: 7,
            tables: vec![t],
        };
        let mut timer = InstrTimer::new(model.clone(), Some(tiny()));
        timer.module(ModuleIdx(3), &Module::new("/bin/prog"));
        let ins = [Svma(0x10), Svma(0x14), Svma(0x18)];
        let mem = [load(1, 0), load(1, 64), load(2, 0)];
        let b = TraceBlock {
            tid: 1,
            module: Some(ModuleIdx(3)),
            instructions: &ins,
            end: TraceEnd::Other,
            mem: &mem,
            key: None,
        };
        let mut out = vec![InstrTiming::default(); 9];
        timer.time_block(&b, &mut out);
        let t = |cycles, l1_misses, llc_misses, loads| InstrTiming {
            cycles,
            l1_misses,
            llc_misses,
            dependent: false,
            loads,
        };
        // 0x18 is in no table: default 7, plus an L1 hit on line 0.
        assert_eq!(
            out,
            vec![
                t(1, 0, 0, false),
                t(2 + 600, 2, 2, true),
                t(7 + 3, 0, 0, true)
            ]
        );
        // Without a cache: static costs only; an unknown module gets the default.
        let mut plain = InstrTimer::new(model, None);
        plain.time_block(&b, &mut out);
        assert_eq!(out, vec![t(7, 0, 0, false); 3]);
        assert!(plain.cache_stats().is_none());
        assert_eq!(timer.cache_stats().unwrap().accesses, 3);
    }

    #[test]
    fn geometry_is_checked() {
        assert!(CacheConfig::default().check().is_ok());
        assert!(tiny().check().is_ok());
        let mut c = tiny();
        c.line_size = 48;
        assert!(c.check().is_err());
        let mut c = tiny();
        c.l1_size = 200;
        assert!(c.check().is_err());
        let mut c = tiny();
        c.llc_ways = 0;
        assert!(c.check().is_err());
    }
}
