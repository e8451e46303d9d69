//! Source (a): timed paths from the exact block trace and the virtual PMU's timing.
//!
//! A [`TracePathTimer`] is a [`BlockVisitor`]: for each trace block it asks a
//! [`CostModel`] (the virtual PMU's cache-aware `proftrust_vpmu::TraceCost`, or a hand-made
//! model such as `proftrust_paths::PerInstruction` in tests) for the cycles of every
//! instruction, and feeds the block to the
//! `proftrust-paths` [`Profiler`], which cuts the execution into Ball-Larus paths (function
//! entry to exit, loop header to loop header; seed 003 §2, seed 004 §4.2) and reports every
//! completed instance with its cycles ([`Profiler::on_path`]). A path's time is the sum of
//! the cycles of its own instructions, **exclusive of the callees** it calls (their paths
//! are timed on their own, as the profiler's metrics are; seed 003 §3).
//!
//! Timing: `proftrust_vpmu::TraceCost` is the virtual PMU's timing: the static
//! class cost of each instruction plus, with a cache configured and a trace that carries
//! data accesses (`QemuOptions::trace_memory`), the latency of each access in a simulated
//! L1D + LLC. That is what makes one path's executions differ: the same loads hit or miss.
//!
//! Sampling: every completed path is a dispatch check of a [`Bursty`] counter (seed 004
//! §4.1); only the instances it picks are timed. The default times every instance (a
//! simulation has no probe overhead to save); `n_check > 0` reproduces the paper's
//! sampling on the exact trace.

use crate::signatures::SignatureMap;
use crate::timings::{PathTimes, PathTimings, TimeUnit};
use proftrust_model::{BlockVisitor, Module, ModuleIdx, RunOutcome, TraceBlock};
use proftrust_paths::{
    CostModel, PathKey, PathMetrics, PathProfile, Profiler, ProfilerOptions, ProgramCfgs,
};
use proftrust_probe::{Bursty, BurstyOptions};
use rustc_hash::FxHashMap;
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

/// Settings of the trace source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceSourceOptions {
    /// Which path instances are timed. Default: every one (`n_check` 0).
    pub bursty: BurstyOptions,
}

impl Default for TraceSourceOptions {
    fn default() -> Self {
        TraceSourceOptions {
            bursty: BurstyOptions {
                n_check: 0,
                ..BurstyOptions::default()
            },
        }
    }
}

#[derive(Debug)]
struct Collected {
    bursty: Bursty,
    /// Per path: its timed instances. Added to at every timed path instance, hence
    /// `FxHashMap` (SipHash was ~4% of a `vpp` run on sort); read in sorted key order.
    times: FxHashMap<PathKey, PathTimes>,
    completed: u64,
    timed: u64,
}

/// Times Ball-Larus path instances of a traced run (a [`BlockVisitor`]).
pub struct TracePathTimer<'a, T: CostModel> {
    profiler: Profiler<'a, T>,
    collected: Rc<RefCell<Collected>>,
    cfgs: &'a ProgramCfgs,
}

/// What the trace source found.
#[derive(Debug, Clone)]
pub struct TraceTimings {
    /// Timed instances per signature; `program_time` = all modelled cycles of the run.
    pub timings: PathTimings,
    /// Exact totals per signature over *all* instances (count, instructions, cycles, memory
    /// events), timed or not.
    pub exact: HashMap<crate::PathSignature, PathMetrics>,
    /// The exact path profile (per Ball-Larus path, with the per-function bookkeeping).
    pub profile: PathProfile,
    /// Path instances completed.
    pub completed: u64,
    /// Path instances timed.
    pub timed: u64,
    /// Distinct paths whose signature another path already had (merged; expected 0).
    pub collisions: u64,
    /// How the run ended.
    pub outcome: Option<RunOutcome>,
}

impl<'a, T: CostModel> TracePathTimer<'a, T> {
    /// A timer for the paths of `cfgs` (the program's main executable).
    pub fn new(cfgs: &'a ProgramCfgs, timer: T, opts: TraceSourceOptions) -> Self {
        let mut bursty = Bursty::new(opts.bursty);
        // The run's start is the boundary where the first path starts.
        bursty.boundary();
        let collected = Rc::new(RefCell::new(Collected {
            bursty,
            times: FxHashMap::default(),
            completed: 0,
            timed: 0,
        }));
        let col = Rc::clone(&collected);
        let profiler = Profiler::with_cost_model(
            cfgs,
            ProfilerOptions {
                paths: true,
                cct: false,
            },
            timer,
        )
        .on_path(move |_tid, key, m| {
            let mut c = col.borrow_mut();
            c.completed += 1;
            if c.bursty.boundary().ends_timed {
                c.timed += 1;
                c.times.entry(key).or_default().add(m.cycles);
            }
        });
        TracePathTimer {
            profiler,
            collected,
            cfgs,
        }
    }

    /// The timer (for its statistics).
    pub fn timer(&self) -> &T {
        self.profiler.cost_model()
    }

    /// Ends the run: signatures for the timed paths and the totals.
    pub fn finish(self) -> TraceTimings {
        let outcome = self.profiler.outcome().cloned();
        let (profile, _) = self.profiler.finish();
        let col = Rc::try_unwrap(self.collected)
            .map(RefCell::into_inner)
            .unwrap_or_else(|rc| {
                let c = rc.borrow();
                Collected {
                    bursty: c.bursty.clone(),
                    times: c.times.clone(),
                    completed: c.completed,
                    timed: c.timed,
                }
            });
        let mut sigs = SignatureMap::new(self.cfgs);
        let mut timings = PathTimings::new(TimeUnit::Cycles);
        timings.program_time = Some(profile.total_cycles);
        timings.executions_per_sample = if col.timed > 0 {
            col.completed as f64 / col.timed as f64
        } else {
            1.0
        };
        let mut keys: Vec<&PathKey> = col.times.keys().collect();
        keys.sort();
        for k in keys {
            if let Some((s, info)) = sigs.get(*k).cloned() {
                timings.add_times(s.clone(), &col.times[k]);
                timings.info.entry(s).or_insert(info);
            }
        }
        let mut exact: HashMap<crate::PathSignature, PathMetrics> = HashMap::new();
        for (k, m) in &profile.paths {
            if let Some((s, _)) = sigs.get(*k) {
                let e = exact.entry(s.clone()).or_default();
                e.count += m.count;
                e.instructions += m.instructions;
                e.cycles += m.cycles;
                e.l1_misses += m.l1_misses;
                e.llc_misses += m.llc_misses;
            }
        }
        TraceTimings {
            timings,
            exact,
            profile,
            completed: col.completed,
            timed: col.timed,
            collisions: sigs.collisions(),
            outcome,
        }
    }
}

impl<T: CostModel> BlockVisitor for TracePathTimer<'_, T> {
    fn module(&mut self, idx: ModuleIdx, module: &Module) {
        self.profiler.module(idx, module);
    }

    fn block(&mut self, b: &TraceBlock<'_>) {
        self.profiler.block(b);
    }

    fn end(&mut self, outcome: &RunOutcome) {
        self.profiler.end(outcome);
    }
}
