//! What one executed instruction costs under a timing model, and the trait of such models.

use crate::{Module, ModuleIdx, TraceBlock};
use serde::Serialize;

/// Cost of one executed instruction under a cycle model.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct InstrCost {
    /// Cycles.
    pub cycles: u64,
    /// Its data accesses that missed the L1 data cache (seed 003's data-cache misses).
    pub l1_misses: u64,
    /// Its data accesses that missed the last-level cache (went to memory).
    pub llc_misses: u64,
}

impl std::ops::AddAssign for InstrCost {
    fn add_assign(&mut self, o: InstrCost) {
        self.cycles += o.cycles;
        self.l1_misses += o.l1_misses;
        self.llc_misses += o.llc_misses;
    }
}

impl std::iter::Sum for InstrCost {
    fn sum<I: Iterator<Item = InstrCost>>(it: I) -> InstrCost {
        it.fold(InstrCost::default(), |mut a, c| {
            a += c;
            a
        })
    }
}

/// A per-instruction timing model of a traced run: the virtual PMU's cycle model and cache
/// simulation (`proftrust_vpmu::TraceCost`), or `proftrust-paths`' `FlatCpi` (a flat CPI) and
/// `PerInstruction` (a per-address function). Path profiles (`proftrust-paths`) and timed
/// paths (`proftrust-vpp`) take one.
pub trait CostModel {
    /// A module of the trace became known (from [`crate::BlockVisitor::module`]).
    fn module(&mut self, _idx: ModuleIdx, _module: &Module) {}
    /// Cost of each instruction of `b`, in execution order (`out` is cleared first). The
    /// block's data accesses ([`TraceBlock::mem`]) are what a cache model times.
    fn block_costs(&mut self, b: &TraceBlock<'_>, out: &mut Vec<InstrCost>);

    /// The costs of `b`'s instructions summed over consecutive ranges: range `k` holds the
    /// instructions `ends[k - 1]..ends[k]` (range 0 starts at 0; `ends` rises and its last
    /// entry is the block's length). `out` is cleared and gets one sum per range, exactly
    /// the sums of [`CostModel::block_costs`] (the same state changes: a cache model
    /// simulates the block's accesses once). Consumers that charge whole runs of
    /// instructions at once (a path profiler between block transitions) call this; the
    /// default sums `block_costs`, models override it to skip the per-instruction vector.
    fn range_costs(&mut self, b: &TraceBlock<'_>, ends: &[u32], out: &mut Vec<InstrCost>) {
        let mut each = Vec::new();
        self.block_costs(b, &mut each);
        sum_ranges(&each, ends, out);
    }

    /// True when the costs of a block with a key ([`TraceBlock::key`]) depend on nothing but
    /// its key and the ranges asked for: no state carried from block to block (no cache
    /// simulation) and no data accesses. A consumer may then ask once per key and reuse the
    /// sums (the path profiler does). Default false.
    fn is_static(&self) -> bool {
        false
    }
}

/// Sums `costs` over the consecutive ranges ending at `ends` (as [`CostModel::range_costs`]
/// takes them) into `out` (cleared first); instructions past `costs` cost nothing.
pub fn sum_ranges(costs: &[InstrCost], ends: &[u32], out: &mut Vec<InstrCost>) {
    out.clear();
    let mut from = 0usize;
    for &e in ends {
        let to = e as usize;
        let run = costs
            .get(from.min(costs.len())..to.min(costs.len()))
            .unwrap_or(&[]);
        out.push(run.iter().copied().sum());
        from = to;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Three instructions (cycles 1, 2, 4; one L1 miss on the second) summed over the ranges
    /// ending at 1 and 3: (1) and (2 + 4 with the miss); ranges past the costs are empty.
    #[test]
    fn ranges_are_summed_by_hand() {
        let c = |cycles, l1_misses| InstrCost {
            cycles,
            l1_misses,
            llc_misses: 0,
        };
        let mut out = vec![c(9, 9)];
        sum_ranges(&[c(1, 0), c(2, 1), c(4, 0)], &[1, 3, 5], &mut out);
        assert_eq!(out, vec![c(1, 0), c(6, 1), c(0, 0)]);
    }
}
