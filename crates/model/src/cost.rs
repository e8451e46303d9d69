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
}
