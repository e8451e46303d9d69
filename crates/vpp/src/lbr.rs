//! Source (b): timed paths from LBR branch stacks with cycle counts.
//!
//! Intel's LBR records, per taken branch, the cycles since the previous recorded branch
//! (`perf record -b`, `perf script -F brstack`: the last field of `0xFROM/0xTO/P/-/-/CYCLES`;
//! the virtual PMU's `--lbr` stacks carry the same). Between two consecutive entries the
//! program ran straight from the older entry's target to the newer entry's branch, so that
//! count is the time of this fall-through range *and* of its branch. `proftrust-paths`
//! ([`lbr_timed_paths`]) walks the ranges over the CFG, cuts complete Ball-Larus paths at
//! function entries, backedges and returns, and sums the counts of the ranges each path
//! instance is made of (ranges inside callees go to the callees' paths). A path's time is
//! therefore measured the same way as by the trace source, which the tests use as the
//! oracle: times from virtual-PMU stacks are times the trace source also saw.

use crate::signatures::SignatureMap;
use crate::timings::{PathTimings, TimeUnit};
use proftrust_model::SampleSet;
use proftrust_paths::{lbr_timed_paths, ProgramCfgs};
use serde::Serialize;

/// Bookkeeping of the LBR source.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct LbrSourceStats {
    /// Samples with a branch stack.
    pub stacks: u64,
    /// Complete path instances timed.
    pub timed: u64,
    /// Complete instances without cycle counts (left out).
    pub untimed: u64,
    /// Walks broken by a range or branch that does not match the CFG.
    pub broken: u64,
    /// Distinct paths whose signature another path already had (merged; expected 0).
    pub collisions: u64,
}

/// Timed paths of the program whose CFGs are `cfgs` from the branch stacks of `set`.
pub fn lbr_timings(set: &SampleSet, cfgs: &ProgramCfgs) -> (PathTimings, LbrSourceStats) {
    let l = lbr_timed_paths(set, cfgs);
    let mut sigs = SignatureMap::new(cfgs);
    let mut t = PathTimings::new(TimeUnit::Cycles);
    for (k, cycles) in &l.timed {
        if let Some((s, info)) = sigs.get(*k).cloned() {
            t.add(s.clone(), *cycles);
            t.info.entry(s).or_insert(info);
        }
    }
    let stats = LbrSourceStats {
        stacks: l.paths.samples,
        timed: l.timed.len() as u64,
        untimed: l.untimed,
        broken: l.paths.broken,
        collisions: sigs.collisions(),
    };
    (t, stats)
}
