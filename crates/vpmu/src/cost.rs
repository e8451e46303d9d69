//! The virtual PMU's timing as a [`CostModel`]: what path profiles (`proftrust-paths`) and
//! timed paths (`proftrust-vpp`) charge to each traced instruction.

use crate::{CacheConfig, CacheStats, CycleModel, InstrTimer, InstrTiming};
use proftrust_model::{CostModel, InstrCost, Module, ModuleIdx, TraceBlock};
use rustc_hash::FxHashMap;

/// Per-instruction cycles and cache misses of a traced run: the static cycles of a
/// [`CycleModel`] (its tables for the modules they name, its default elsewhere) plus, with a
/// cache, the latency of each data access in the simulated L1D + LLC ([`InstrTimer`]). The
/// same timing as [`InstrTimer`] with that model, but the static cycles are looked up once
/// per distinct trace block, not per executed instruction.
#[derive(Debug, Clone)]
pub struct TraceCost {
    model: CycleModel,
    /// Cache simulation (with a zero static model: it adds the cache part only).
    timer: Option<InstrTimer>,
    /// Per trace module index: the model's table for it.
    tables: Vec<Option<usize>>,
    /// Static cycles per keyed trace block ([`TraceBlock::key`]), as prefix sums (entry
    /// `i` = cycles of the first `i` instructions, so a run's sum is one subtraction): a
    /// flat array by key.
    keyed: Vec<Option<Box<[u64]>>>,
    /// Static cycles per trace block without a key: (module, first SVMA, length) -> cycles.
    blocks: FxHashMap<(u32, u64, usize), Box<[u32]>>,
    buf: Vec<InstrTiming>,
    /// Scratch per-instruction costs of [`CostModel::range_costs`]' slow path.
    each: Vec<InstrCost>,
    /// A cache whose latencies are all at most 2^24 cycles: blocks of at most 255 accesses
    /// with given levels can then be charged without per-instruction saturation.
    levels_direct: bool,
}

impl TraceCost {
    /// Timing by `model`, with the caches of `cache` (check the geometry with
    /// [`CacheConfig::check`] first) or none.
    pub fn new(model: CycleModel, cache: Option<CacheConfig>) -> TraceCost {
        let levels_direct = cache.as_ref().is_some_and(|c| {
            [
                c.l1_latency,
                c.llc_latency,
                c.memory_latency,
                c.store_latency,
            ]
            .iter()
            .all(|&l| l <= 1 << 24)
        });
        TraceCost {
            model,
            levels_direct,
            timer: cache.map(|c| InstrTimer::new(CycleModel::flat(0), Some(c))),
            tables: Vec::new(),
            keyed: Vec::new(),
            blocks: FxHashMap::default(),
            buf: Vec::new(),
            each: Vec::new(),
        }
    }

    /// Totals of the cache simulation (`None` without a cache).
    pub fn cache_stats(&self) -> Option<CacheStats> {
        self.timer.as_ref().and_then(InstrTimer::cache_stats)
    }
}

impl CostModel for TraceCost {
    fn module(&mut self, idx: ModuleIdx, module: &Module) {
        if let Some(t) = self.timer.as_mut() {
            t.module(idx, module);
        }
        let i = idx.0 as usize;
        if self.tables.len() <= i {
            self.tables.resize(i + 1, None);
        }
        self.tables[i] = self.model.table_for(module);
    }

    fn block_costs(&mut self, b: &TraceBlock<'_>, out: &mut Vec<InstrCost>) {
        out.clear();
        let Some(&first) = b.instructions.first() else {
            return;
        };
        let m = b.module.map_or(u32::MAX, |m| m.0);
        let table = b
            .module
            .and_then(|m| self.tables.get(m.0 as usize).copied().flatten())
            .map(|t| &self.model.tables[t]);
        let default = self.model.default_cycles;
        let compute = || -> Box<[u32]> {
            b.instructions
                .iter()
                .map(|a| {
                    table
                        .and_then(|t| t.costs.get(&a.0))
                        .map_or(default, |c| c.cycles)
                })
                .collect()
        };
        let stat = match b.key {
            Some(k) => {
                let k = k as usize;
                if self.keyed.len() <= k {
                    self.keyed.resize(k + 1, None);
                }
                let pre = self.keyed[k].get_or_insert_with(|| prefix_sums(&compute()));
                out.extend(pre.windows(2).map(|w| InstrCost {
                    cycles: w[1] - w[0],
                    l1_misses: 0,
                    llc_misses: 0,
                }));
                None
            }
            None => Some(
                self.blocks
                    .entry((m, first.0, b.instructions.len()))
                    .or_insert_with(compute),
            ),
        };
        if let Some(stat) = stat {
            out.extend(stat.iter().map(|&c| InstrCost {
                cycles: u64::from(c),
                l1_misses: 0,
                llc_misses: 0,
            }));
        }
        if let Some(t) = self.timer.as_mut() {
            t.time_block(b, &mut self.buf);
            for (o, x) in out.iter_mut().zip(&self.buf) {
                o.cycles += u64::from(x.cycles);
                o.l1_misses = u64::from(x.l1_misses);
                o.llc_misses = u64::from(x.llc_misses);
            }
        }
    }

    /// Without a cache the costs are the static cycles of the block's instructions: a
    /// function of the keyed block alone.
    fn is_static(&self) -> bool {
        self.timer.is_none()
    }

    /// The sums of [`CostModel::block_costs`] per range without the per-instruction vector:
    /// static cycles from the keyed prefix sums, then each data access added to its range
    /// (with [`InstrTimer`]'s per-instruction saturation: an instruction's cache cycles
    /// saturate at `u32::MAX` and its misses at 255).
    fn range_costs(&mut self, b: &TraceBlock<'_>, ends: &[u32], out: &mut Vec<InstrCost>) {
        let (Some(k), Some(&last)) = (b.key, ends.last()) else {
            let mut each = std::mem::take(&mut self.each);
            self.block_costs(b, &mut each);
            proftrust_model::sum_ranges(&each, ends, out);
            self.each = each;
            return;
        };
        let k = k as usize;
        if self.keyed.get(k).is_none_or(Option::is_none) || last as usize != b.instructions.len() {
            // First sight of this key (or ranges that do not cover the block).
            let mut each = std::mem::take(&mut self.each);
            self.block_costs(b, &mut each);
            proftrust_model::sum_ranges(&each, ends, out);
            self.each = each;
            return;
        }
        out.clear();
        let pre = self.keyed[k].as_deref().expect("keyed");
        let mut from = 0usize;
        out.extend(ends.iter().map(|&e| {
            let c = pre[e as usize] - pre[from];
            from = e as usize;
            InstrCost {
                cycles: c,
                l1_misses: 0,
                llc_misses: 0,
            }
        }));
        let Some(t) = self.timer.as_mut() else {
            return;
        };
        if b.mem.is_empty() {
            return;
        }
        let n = b.instructions.len();
        let mut r = 0usize;
        if self.levels_direct && b.mem.len() <= 255 && b.mem.iter().all(|a| a.level.is_some()) {
            // Levels known (the plugin simulated the caches): nothing to simulate, and with
            // at most 255 accesses of at most 2^24 cycles (`levels_direct`) no instruction
            // reaches the saturation below, so each access is added to its range directly,
            // the current range's sums kept in registers until the range changes.
            let (mut cy, mut m1, mut m2) = (0u64, 0u64, 0u64);
            let mut all = CacheStats::default();
            let cfg = t.cache_config().expect("levels_direct implies a cache");
            for a in b.mem {
                let l = a.level.unwrap_or(0).min(2);
                // What `time_block` counts: every access, out-of-block ones included.
                all.count(l, a.store);
                let i = u32::from(a.insn);
                if i as usize >= n {
                    continue;
                }
                if ends[r] <= i {
                    let o = &mut out[r];
                    (o.cycles, o.l1_misses, o.llc_misses) =
                        (o.cycles + cy, o.l1_misses + m1, o.llc_misses + m2);
                    (cy, m1, m2) = (0, 0, 0);
                    while ends[r] <= i {
                        r += 1;
                    }
                }
                cy += u64::from(cfg.latency(l, a.store));
                m1 += u64::from(l >= 1);
                m2 += u64::from(l == 2);
            }
            let o = &mut out[r];
            (o.cycles, o.l1_misses, o.llc_misses) =
                (o.cycles + cy, o.l1_misses + m1, o.llc_misses + m2);
            t.add_stats(&all);
            return;
        }
        // The instruction being charged and its cache totals so far (for the saturation).
        let mut cur: (u32, u32, u8, u8) = (u32::MAX, 0, 0, 0);
        t.simulate_accesses(b.mem, |insn, lat, m1, m2, _| {
            let i = u32::from(insn);
            if i as usize >= n {
                return;
            }
            while ends[r] <= i {
                r += 1;
            }
            if cur.0 != i {
                cur = (i, 0, 0, 0);
            }
            let o = &mut out[r];
            let c = cur.1.saturating_add(lat);
            o.cycles += u64::from(c - cur.1);
            let l1 = cur.2.saturating_add(m1 as u8);
            o.l1_misses += u64::from(l1 - cur.2);
            let llc = cur.3.saturating_add(m2 as u8);
            o.llc_misses += u64::from(llc - cur.3);
            cur = (i, c, l1, llc);
        });
    }
}

/// `p[i]` = the sum of the first `i` entries of `c` (`p` is one longer than `c`).
fn prefix_sums(c: &[u32]) -> Box<[u64]> {
    let mut s = 0u64;
    std::iter::once(0)
        .chain(c.iter().map(|&x| {
            s += u64::from(x);
            s
        }))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CostTable, StaticCost};
    use proftrust_model::{MemAccess, Svma, TraceEnd};

    /// The same costs as [`InstrTimer`] with the same model, instruction by instruction,
    /// with and without a cache, in the table's module and elsewhere.
    #[test]
    fn equals_the_instruction_timer() {
        let mut table = CostTable::new("prog");
        table.costs.insert(0x10, StaticCost { cycles: 3, len: 4 });
        table.costs.insert(0x14, StaticCost { cycles: 7, len: 4 });
        let mut model = CycleModel::flat(2);
        model.tables.push(table);
        let prog = Module::new("/bin/prog");
        let lib = Module::new("/lib/other.so");
        let mem = [
            MemAccess {
                insn: 0,
                addr: 0x1000,
                size: 8,
                store: false,
                level: None,
            },
            MemAccess {
                insn: 1,
                addr: 0x1000,
                size: 8,
                store: true,
                level: None,
            },
            MemAccess {
                insn: 2,
                addr: 0x9000,
                size: 8,
                store: false,
                level: None,
            },
        ];
        for cache in [None, Some(CacheConfig::default())] {
            let mut a = TraceCost::new(model.clone(), cache.clone());
            let mut b = InstrTimer::new(model.clone(), cache);
            for (i, m) in [&prog, &lib].into_iter().enumerate() {
                a.module(ModuleIdx(i as u32), m);
                b.module(ModuleIdx(i as u32), m);
            }
            let instrs = [Svma(0x10), Svma(0x14), Svma(0x18)];
            let (mut x, mut y) = (Vec::new(), Vec::new());
            for round in 0..3 {
                for module in [ModuleIdx(0), ModuleIdx(1)] {
                    let blk = TraceBlock {
                        tid: 1,
                        module: Some(module),
                        instructions: &instrs,
                        end: TraceEnd::Other,
                        mem: &mem,
                        key: None,
                    };
                    a.block_costs(&blk, &mut x);
                    b.time_block(&blk, &mut y);
                    let y: Vec<InstrCost> = y
                        .iter()
                        .map(|t| InstrCost {
                            cycles: u64::from(t.cycles),
                            l1_misses: u64::from(t.l1_misses),
                            llc_misses: u64::from(t.llc_misses),
                        })
                        .collect();
                    assert_eq!(x, y, "round {round}, module {module:?}");
                }
            }
            assert_eq!(a.cache_stats(), b.cache_stats());
        }
    }

    /// `range_costs` on keyed blocks (prefix sums, accesses added to their range) gives the
    /// sums of `block_costs` over the same ranges, cache state included, also for an
    /// instruction whose 600 accesses saturate its per-instruction miss count at 255.
    #[test]
    fn range_costs_are_the_summed_block_costs() {
        let mut table = CostTable::new("prog");
        for (k, c) in [3u32, 7, 1, 9, 2].into_iter().enumerate() {
            table
                .costs
                .insert(0x10 + 4 * k as u64, StaticCost { cycles: c, len: 4 });
        }
        let mut model = CycleModel::flat(2);
        model.tables.push(table);
        let prog = Module::new("/bin/prog");
        let instrs: Vec<Svma> = (0..5).map(|k| Svma(0x10 + 4 * k)).collect();
        let access = |insn: u16, addr: u64, store: bool| MemAccess {
            insn,
            addr,
            size: 8,
            store,
            level: None,
        };
        // Instruction 1: 600 loads of distinct lines, more than the L1's 512 (all miss L1 in
        // every round); 3: a load and a store; 4: a load crossing a line.
        let mut mem: Vec<MemAccess> = (0..600)
            .map(|j| access(1, 0x10_0000 + 64 * j, false))
            .collect();
        mem.extend([
            access(3, 0x2000, false),
            access(3, 0x2000, true),
            access(4, 0x203c, false),
        ]);
        for ends in [
            vec![5u32],
            vec![1, 2, 5],
            vec![2, 4, 5],
            vec![1, 2, 3, 4, 5],
        ] {
            let mut a = TraceCost::new(model.clone(), Some(CacheConfig::default()));
            let mut b = TraceCost::new(model.clone(), Some(CacheConfig::default()));
            a.module(ModuleIdx(0), &prog);
            b.module(ModuleIdx(0), &prog);
            let (mut got, mut each, mut want) = (Vec::new(), Vec::new(), Vec::new());
            for round in 0..3 {
                let blk = TraceBlock {
                    tid: 1,
                    module: Some(ModuleIdx(0)),
                    instructions: &instrs,
                    end: TraceEnd::Other,
                    mem: &mem[..mem.len() - round],
                    key: Some(4),
                };
                a.range_costs(&blk, &ends, &mut got);
                b.block_costs(&blk, &mut each);
                proftrust_model::sum_ranges(&each, &ends, &mut want);
                assert_eq!(got, want, "ends {ends:?}, round {round}");
                assert_eq!(each[1].l1_misses, 255, "saturated");
            }
            assert_eq!(a.cache_stats(), b.cache_stats());
            // Static 3+7+1+9+2 = 22; in the last round the 600 lines hit the LLC (40 each).
            let total: u64 = got.iter().map(|c| c.cycles).sum();
            assert!(total >= 22 + 600 * 40, "{total}");
        }
        // Levels given (the plugin simulated the caches): the direct path for blocks of at
        // most 255 accesses, the per-instruction one above that; both the summed block costs.
        let given: Vec<MemAccess> = mem
            .iter()
            .enumerate()
            .map(|(j, a)| MemAccess {
                addr: 0,
                size: 0,
                level: Some((j * 7 % 5 % 3) as u8),
                ..*a
            })
            .collect();
        for len in [given.len(), 200, 3] {
            for ends in [vec![5u32], vec![1, 2, 5], vec![1, 2, 3, 4, 5]] {
                let mut a = TraceCost::new(model.clone(), Some(CacheConfig::default()));
                let mut b = TraceCost::new(model.clone(), Some(CacheConfig::default()));
                a.module(ModuleIdx(0), &prog);
                b.module(ModuleIdx(0), &prog);
                let (mut got, mut each, mut want) = (Vec::new(), Vec::new(), Vec::new());
                let blk = TraceBlock {
                    tid: 1,
                    module: Some(ModuleIdx(0)),
                    instructions: &instrs,
                    end: TraceEnd::Other,
                    mem: &given[given.len() - len..],
                    key: Some(4),
                };
                for _ in 0..2 {
                    a.range_costs(&blk, &ends, &mut got);
                    b.block_costs(&blk, &mut each);
                    proftrust_model::sum_ranges(&each, &ends, &mut want);
                    assert_eq!(got, want, "{len} accesses, ends {ends:?}");
                }
                assert_eq!(a.cache_stats(), b.cache_stats());
                let st = a.cache_stats().unwrap();
                assert_eq!(st.accesses, 2 * len as u64);
                assert!(st.l1_misses > 0 && st.llc_misses > 0, "{st:?}");
            }
        }
    }
}
