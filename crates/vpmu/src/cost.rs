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
    /// Static cycles per keyed trace block ([`TraceBlock::key`]): a flat array by key.
    keyed: Vec<Option<Box<[u32]>>>,
    /// Static cycles per trace block without a key: (module, first SVMA, length) -> cycles.
    blocks: FxHashMap<(u32, u64, usize), Box<[u32]>>,
    buf: Vec<InstrTiming>,
}

impl TraceCost {
    /// Timing by `model`, with the caches of `cache` (check the geometry with
    /// [`CacheConfig::check`] first) or none.
    pub fn new(model: CycleModel, cache: Option<CacheConfig>) -> TraceCost {
        TraceCost {
            model,
            timer: cache.map(|c| InstrTimer::new(CycleModel::flat(0), Some(c))),
            tables: Vec::new(),
            keyed: Vec::new(),
            blocks: FxHashMap::default(),
            buf: Vec::new(),
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
                self.keyed[k].get_or_insert_with(compute)
            }
            None => self
                .blocks
                .entry((m, first.0, b.instructions.len()))
                .or_insert_with(compute),
        };
        out.extend(stat.iter().map(|&c| InstrCost {
            cycles: u64::from(c),
            l1_misses: 0,
            llc_misses: 0,
        }));
        if let Some(t) = self.timer.as_mut() {
            t.time_block(b, &mut self.buf);
            for (o, x) in out.iter_mut().zip(&self.buf) {
                o.cycles += u64::from(x.cycles);
                o.l1_misses = u64::from(x.l1_misses);
                o.llc_misses = u64::from(x.llc_misses);
            }
        }
    }
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
            },
            MemAccess {
                insn: 1,
                addr: 0x1000,
                size: 8,
                store: true,
            },
            MemAccess {
                insn: 2,
                addr: 0x9000,
                size: 8,
                store: false,
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
}
