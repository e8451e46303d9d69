//! Exact path profiles and the exact CCT from the block trace, in one pass.
//!
//! Per thread a shadow stack of activations follows calls and returns ([`TraceEnd`]). Each
//! activation of a function with a numbered CFG carries the Ball-Larus path register `r`
//! (seed 003 §2 instrumentation, simulated): `r = Val(ENTRY→entry block)` on entry,
//! `r += Val(e)` on each edge, on a backedge `t→h` `count[r + Val(t→EXIT)]++` and
//! `r = Val(ENTRY→h)`, on return `count[r + Val(b→EXIT)]++`.
//!
//! Metrics per path (seed 003 §3): instructions, and cycles and L1 / last-level data-cache
//! misses from a [`CostModel`] (the virtual PMU's cycle model and cache simulation),
//! accumulated while the activation is current. Seed 003 §3 saves the
//! hardware counter at procedure entry and restores it at exit so that a caller's path does
//! not include its callees' events; here, likewise, a path's metrics are *exclusive* of the
//! calls made on it.
//!
//! Trace blocks are dynamic runs (they may span several static blocks or end early), so
//! each instruction is mapped onto its static block: a transition happens when an
//! instruction lies in another static block than the current one, or is the first
//! instruction of the current one again (a one-block loop).

use crate::cct::{Cct, NodeId};
use crate::funcs::{FuncIdx, ProgramCfgs};
use crate::numbering::{PathNumbering, Step};
use proftrust_model::{
    BlockId, BlockVisitor, Location, Module, ModuleIdx, RunOutcome, Svma, TraceBlock, TraceEnd,
};
pub use proftrust_model::{CostModel, InstrCost};
use rustc_hash::FxHashMap;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};

/// A flat model: every instruction costs `cycles_per_instruction` cycles and misses no
/// cache (the default when no timing model is wanted).
#[derive(Debug, Clone, Copy)]
pub struct FlatCpi {
    /// Cycles per instruction. Default 1.
    pub cycles_per_instruction: u64,
}

impl Default for FlatCpi {
    fn default() -> Self {
        FlatCpi {
            cycles_per_instruction: 1,
        }
    }
}

impl CostModel for FlatCpi {
    fn block_costs(&mut self, b: &TraceBlock<'_>, out: &mut Vec<InstrCost>) {
        out.clear();
        out.resize(
            b.instructions.len(),
            InstrCost {
                cycles: self.cycles_per_instruction,
                ..Default::default()
            },
        );
    }

    fn range_costs(&mut self, _: &TraceBlock<'_>, ends: &[u32], out: &mut Vec<InstrCost>) {
        out.clear();
        let mut from = 0;
        out.extend(ends.iter().map(|&e| {
            let n = u64::from(e - from);
            from = e;
            InstrCost {
                cycles: self.cycles_per_instruction * n,
                ..Default::default()
            }
        }));
    }

    fn is_static(&self) -> bool {
        true
    }
}

/// A model from a per-instruction function of the module and address (e.g. a latency
/// table); data accesses are ignored.
pub struct PerInstruction<F>(pub F);

impl<F: FnMut(Option<ModuleIdx>, Svma) -> InstrCost> CostModel for PerInstruction<F> {
    fn block_costs(&mut self, b: &TraceBlock<'_>, out: &mut Vec<InstrCost>) {
        out.clear();
        out.extend(b.instructions.iter().map(|&a| (self.0)(b.module, a)));
    }
}

/// What the profiler builds.
#[derive(Debug, Clone, Copy)]
pub struct ProfilerOptions {
    /// Build path profiles. Default true.
    pub paths: bool,
    /// Build the CCT. Default true.
    pub cct: bool,
}

impl Default for ProfilerOptions {
    fn default() -> Self {
        ProfilerOptions {
            paths: true,
            cct: true,
        }
    }
}

/// A path: function and Ball-Larus id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct PathKey {
    /// Function.
    pub func: FuncIdx,
    /// Path id in `[0, NumPaths)`.
    pub id: u128,
}

/// Frequency and metrics of one path.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct PathMetrics {
    /// Times the path completed.
    pub count: u64,
    /// Instructions executed on it (exclusive of callees).
    pub instructions: u64,
    /// Modelled cycles (exclusive of callees).
    pub cycles: u64,
    /// Modelled L1 data-cache misses (exclusive of callees).
    pub l1_misses: u64,
    /// Modelled last-level cache misses (exclusive of callees).
    pub llc_misses: u64,
}

impl PathMetrics {
    /// Adds `o` to `self`, field by field.
    pub fn add(&mut self, o: &PathMetrics) {
        self.count += o.count;
        self.instructions += o.instructions;
        self.cycles += o.cycles;
        self.l1_misses += o.l1_misses;
        self.llc_misses += o.llc_misses;
    }

    /// Adds a run of `n` instructions costing `c` in all.
    fn charge(&mut self, c: &InstrCost, n: u64) {
        self.instructions += n;
        self.cycles += c.cycles;
        self.l1_misses += c.l1_misses;
        self.llc_misses += c.llc_misses;
    }
}

/// Per-function bookkeeping: what could not be attributed to complete paths, and why.
#[derive(Debug, Clone, Default, Serialize)]
pub struct FunctionPathStats {
    /// Function name.
    pub function: String,
    /// `NumPaths(ENTRY)`, `None` when the function is not numbered.
    pub num_paths: Option<u128>,
    /// Why paths are not numbered (too many paths), or a warning (unresolved indirect jump).
    pub degraded: Option<String>,
    /// Activations entered.
    pub activations: u64,
    /// Transitions with no edge in the CFG (unknown indirect jumps, CFG gaps): the path
    /// in progress is dropped and recording resumes at the next backedge or activation.
    pub lost_transfers: u64,
    /// Paths abandoned by non-local exits (longjmp, exceptions).
    pub unwound: u64,
    /// Paths still open when the run ended (e.g. `exit()` called below `main`).
    pub unfinished: u64,
    /// Instructions executed in the function that belong to no complete path.
    pub lost_instructions: u64,
    /// Instructions executed in the function on complete paths.
    pub path_instructions: u64,
}

/// An exact path profile.
#[derive(Debug, Clone, Default, Serialize)]
pub struct PathProfile {
    /// Per path, sorted by key.
    pub paths: BTreeMap<PathKey, PathMetrics>,
    /// Per function, indexed by [`FuncIdx`].
    pub functions: Vec<FunctionPathStats>,
    /// All instructions in the trace.
    pub total_instructions: u64,
    /// All modelled cycles.
    pub total_cycles: u64,
    /// All modelled L1 data-cache misses.
    pub total_l1_misses: u64,
    /// All modelled last-level cache misses.
    pub total_llc_misses: u64,
}

#[derive(Debug, Clone, Copy)]
enum PathState {
    /// Not a numbered function.
    None,
    /// Activation created, first instruction not seen yet.
    Fresh,
    /// Recording.
    Active {
        reg: u128,
        cur: BlockId,
        m: PathMetrics,
    },
    /// Lost; waiting for a backedge to restart. `cur` keeps tracking blocks.
    Lost { cur: Option<BlockId>, instr: u64 },
}

#[derive(Debug, Clone, Copy)]
struct Frame {
    node: NodeId,
    func: Option<FuncIdx>,
    site: Option<Location>,
    path: PathState,
}

#[derive(Debug, Default)]
struct Thread {
    stack: Vec<Frame>,
    pending: Option<(TraceEnd, Location)>,
}

/// Functions with at most this many paths keep their path metrics in an array indexed by
/// path id ([`Profiler::complete`] adds to it without hashing).
const DENSE_PATHS: u128 = 256;

/// Longest x86-64 instruction: a return lands within this many bytes after its call.
const MAX_INSN: u64 = 15;

/// Called for every completed path instance: thread id, path, metrics of that one
/// instance (`count` = 1).
type PathObserver<'a> = Box<dyn FnMut(u32, PathKey, &PathMetrics) + 'a>;

/// Builds the exact path profile and CCT from a block trace (a [`BlockVisitor`]).
pub struct Profiler<'a, C: CostModel = FlatCpi> {
    cfgs: &'a ProgramCfgs,
    observer: Option<PathObserver<'a>>,
    cur_tid: u32,
    opts: ProfilerOptions,
    cost: C,
    threads: HashMap<u32, Box<Thread>>,
    /// The thread of the previous block, kept out of `threads` (blocks come in long runs
    /// of one thread); boxed, so that taking it and putting it back per block moves a
    /// pointer, not the thread's state.
    cur: Option<(u32, Box<Thread>)>,
    main: Option<ModuleIdx>,
    /// Trace module index -> index in the CCT's module table.
    module_map: Vec<Option<ModuleIdx>>,
    profile: PathProfile,
    cct: Cct,
    outcome: Option<RunOutcome>,
    costs: Vec<InstrCost>,
    /// Path metrics as paths complete, of functions with more than [`DENSE_PATHS`] paths
    /// (hashed; [`Profiler::finish`] sorts them into [`PathProfile::paths`]).
    paths: FxHashMap<PathKey, PathMetrics>,
    /// Per function ([`FuncIdx`]) with at most [`DENSE_PATHS`] paths: its path metrics
    /// indexed by path id (made at the function's first completed path, empty for a
    /// function with more paths; a path that never completed has count 0).
    dense: Vec<Option<Box<[PathMetrics]>>>,
    /// The static-block runs of main-binary trace blocks.
    plans: Plans,
    /// Per function: its numbering when paths are built and it has one.
    numbered: Vec<Option<&'a PathNumbering>>,
}

/// The static-block runs ([`Seg`]s) of main-binary trace blocks: computed once per trace
/// block key, or per block for blocks without a key.
#[derive(Debug, Default)]
pub(crate) struct Plans {
    /// Per trace block key ([`TraceBlock::key`]): its plan.
    plans: Vec<KeyPlan>,
    /// The static-block runs of planned trace blocks, back to back.
    segs: Vec<Seg>,
    /// `segs[i].to`, in a slice of its own for [`CostModel::range_costs`].
    seg_ends: Vec<u32>,
    /// Scratch plan of a block without a key.
    scratch: Vec<Seg>,
    /// `scratch[i].to`.
    scratch_ends: Vec<u32>,
    /// A block's length alone: the one range of a block charged as a whole.
    whole: [u32; 1],
}

/// What is kept per trace block key.
#[derive(Debug, Clone, Copy)]
struct KeyPlan {
    /// Its range in [`Plans::segs`] (`from == u32::MAX`: not yet computed).
    from: u32,
    to: u32,
    /// With a static cost model ([`CostModel::is_static`]): the block's cost, once asked
    /// (its runs' costs are then in their [`Seg::cost`]).
    total: Option<InstrCost>,
    /// The runs' [`Seg::cost`]s are set.
    runs_priced: bool,
    /// The block's first and last instructions (read here with the plan, not from the
    /// block's own instruction list).
    first: Svma,
    last: Svma,
}

impl Default for KeyPlan {
    fn default() -> Self {
        KeyPlan {
            from: u32::MAX,
            to: 0,
            total: None,
            runs_priced: false,
            first: Svma(0),
            last: Svma(0),
        }
    }
}

/// Where [`Plans::plan`] put a block's runs.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Plan {
    from: usize,
    to: usize,
    keyed: bool,
    /// The block's first instruction.
    first: Svma,
    /// The block's last instruction.
    last: Svma,
}

impl Plans {
    /// Plans `b` (a main-binary block with instructions).
    #[inline]
    pub(crate) fn plan(&mut self, cfgs: &ProgramCfgs, b: &TraceBlock<'_>) -> Plan {
        if let Some(kp) = b.key.and_then(|k| self.plans.get(k as usize)) {
            if kp.from != u32::MAX {
                return Plan {
                    from: kp.from as usize,
                    to: kp.to as usize,
                    keyed: true,
                    first: kp.first,
                    last: kp.last,
                };
            }
        }
        self.plan_new(cfgs, b)
    }

    /// [`Plans::plan`] of a block without a key, or of a key's first block.
    #[cold]
    #[inline(never)]
    fn plan_new(&mut self, cfgs: &ProgramCfgs, b: &TraceBlock<'_>) -> Plan {
        let (first, last) = match (b.instructions.first(), b.instructions.last()) {
            (Some(&f), Some(&l)) => (f, l),
            _ => (Svma(0), Svma(0)),
        };
        match b.key {
            Some(k) => {
                let k = k as usize;
                if self.plans.len() <= k {
                    self.plans.resize(k + 1, KeyPlan::default());
                }
                let from = self.segs.len();
                plan_block(cfgs, b.instructions, &mut self.segs);
                self.seg_ends.extend(self.segs[from..].iter().map(|s| s.to));
                let kp = &mut self.plans[k];
                kp.from = from as u32;
                kp.to = self.segs.len() as u32;
                kp.first = first;
                kp.last = last;
                Plan {
                    from,
                    to: self.segs.len(),
                    keyed: true,
                    first,
                    last,
                }
            }
            None => {
                self.scratch.clear();
                plan_block(cfgs, b.instructions, &mut self.scratch);
                self.scratch_ends.clear();
                self.scratch_ends.extend(self.scratch.iter().map(|s| s.to));
                Plan {
                    from: 0,
                    to: self.scratch.len(),
                    keyed: false,
                    first,
                    last,
                }
            }
        }
    }

    /// The runs of a plan.
    #[inline]
    pub(crate) fn segs(&self, p: Plan) -> &[Seg] {
        if p.keyed {
            &self.segs[p.from..p.to]
        } else {
            &self.scratch
        }
    }

    /// The ranges [`CostModel::range_costs`] is asked for: the ends of a plan's runs, or
    /// without a plan the block's `n` instructions as one range.
    #[inline]
    pub(crate) fn ends_or_whole(&mut self, p: Option<Plan>, n: usize) -> &[u32] {
        match p {
            Some(p) => self.ends(p),
            None => {
                self.whole[0] = n as u32;
                &self.whole
            }
        }
    }

    /// The cost of keyed block `b` (key `k`, planned as `plan` when in the main binary)
    /// under a static cost model ([`CostModel::is_static`]): asked of `cost` once per key
    /// (per run of the plan, each run's sum kept in its [`Seg::cost`]), then remembered.
    #[inline]
    pub(crate) fn static_cost<C: CostModel>(
        &mut self,
        cost: &mut C,
        b: &TraceBlock<'_>,
        k: u32,
        plan: Option<Plan>,
        scratch: &mut Vec<InstrCost>,
    ) -> InstrCost {
        let k = k as usize;
        if self.plans.len() <= k {
            self.plans.resize(k + 1, KeyPlan::default());
        }
        let kp = self.plans[k];
        let want_runs = plan.is_some_and(|p| p.keyed);
        if let Some(t) = kp.total.filter(|_| kp.runs_priced || !want_runs) {
            return t;
        }
        let ends = self.ends_or_whole(plan, b.instructions.len());
        cost.range_costs(b, ends, scratch);
        let total: InstrCost = scratch.iter().copied().sum();
        if let Some(p) = plan.filter(|p| p.keyed) {
            debug_assert_eq!(scratch.len(), p.to - p.from, "one cost per run");
            for (s, &c) in self.segs[p.from..p.to].iter_mut().zip(scratch.iter()) {
                s.cost = c;
            }
            self.plans[k].runs_priced = true;
        }
        self.plans[k].total = Some(total);
        total
    }

    /// The ends of a plan's runs (the ranges [`CostModel::range_costs`] is asked for).
    #[inline]
    pub(crate) fn ends(&self, p: Plan) -> &[u32] {
        if p.keyed {
            &self.seg_ends[p.from..p.to]
        } else {
            &self.scratch_ends
        }
    }
}

/// A run of a trace block's instructions that causes at most one block transition: the
/// instructions `[from, to)`, the first of which lies in static block `hit` (or in none),
/// the others strictly inside that block. Depends only on the instructions and the CFGs, so
/// it is computed once per trace block key.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Seg {
    from: u32,
    to: u32,
    hit: Option<(FuncIdx, BlockId)>,
    /// The first instruction is the start of `hit`'s block (entering the block afresh).
    start: bool,
    /// The run's cost under a static cost model, once its key was priced
    /// ([`Plans::static_cost`]).
    cost: InstrCost,
}

/// Splits `ins` into [`Seg`]s: a run starts at each instruction that is not strictly inside
/// the static block of the run before it (a new block, or the first instruction of the same
/// block again: a one-block loop).
fn plan_block(cfgs: &ProgramCfgs, ins: &[Svma], out: &mut Vec<Seg>) {
    let n = ins.len();
    let mut i = 0;
    while i < n {
        let hit = cfgs.lookup(ins[i]);
        let mut j = i + 1;
        let mut start = false;
        if let Some((f, bb)) = hit {
            let blk = cfgs.cfg(f).block(bb);
            let (s, e) = (blk.start.0, blk.end.0);
            start = ins[i].0 == s;
            while j < n && ins[j].0 > s && ins[j].0 < e {
                j += 1;
            }
        }
        out.push(Seg {
            from: i as u32,
            to: j as u32,
            hit,
            start,
            cost: InstrCost::default(),
        });
        i = j;
    }
}

impl<'a> Profiler<'a, FlatCpi> {
    /// A profiler with the flat CPI model.
    pub fn new(cfgs: &'a ProgramCfgs, opts: ProfilerOptions) -> Self {
        Profiler::with_cost_model(cfgs, opts, FlatCpi::default())
    }
}

impl<'a, C: CostModel> Profiler<'a, C> {
    /// A profiler with a cycle model.
    pub fn with_cost_model(cfgs: &'a ProgramCfgs, opts: ProfilerOptions, cost: C) -> Self {
        let functions = cfgs
            .iter()
            .map(|(f, c)| {
                let (num_paths, degraded) = match cfgs.numbering(f) {
                    Ok(n) => (
                        Some(n.num_paths()),
                        n.is_incomplete().then(|| {
                            "unresolved indirect jump: paths through it are cut and counted as lost"
                                .to_string()
                        }),
                    ),
                    Err(e) => (None, Some(e.to_string())),
                };
                FunctionPathStats {
                    function: c.function.clone(),
                    num_paths,
                    degraded,
                    ..Default::default()
                }
            })
            .collect();
        Profiler {
            cfgs,
            observer: None,
            cur_tid: 0,
            opts,
            cost,
            threads: HashMap::new(),
            cur: None,
            main: None,
            module_map: Vec::new(),
            profile: PathProfile {
                functions,
                ..Default::default()
            },
            cct: Cct::new(),
            outcome: None,
            costs: Vec::new(),
            paths: FxHashMap::default(),
            dense: Vec::new(),
            plans: Plans::default(),
            numbered: cfgs
                .iter()
                .map(|(f, _)| cfgs.numbering(f).ok().filter(|_| opts.paths))
                .collect(),
        }
    }

    /// Calls `f(tid, path, metrics)` for every path instance as it completes, in trace
    /// order, with the metrics of that one instance (`count` = 1, instructions and cost
    /// exclusive of callees, as in the profile). Variational path profiling (seed 004) needs
    /// the time of each instance, not only the sums the profile keeps.
    pub fn on_path(mut self, f: impl FnMut(u32, PathKey, &PathMetrics) + 'a) -> Self {
        self.observer = Some(Box::new(f));
        self
    }

    /// The cost model (e.g. to read its cache statistics after the run).
    pub fn cost_model(&self) -> &C {
        &self.cost
    }

    /// How the run ended, once [`BlockVisitor::end`] was seen.
    pub fn outcome(&self) -> Option<&RunOutcome> {
        self.outcome.as_ref()
    }

    /// Closes open activations (counted as unfinished) and returns the results.
    pub fn finish(self) -> (PathProfile, Cct) {
        let (profile, cct, _) = self.finish_with_cost();
        (profile, cct)
    }

    /// [`Profiler::finish`], with the cost model taken back.
    pub(crate) fn finish_with_cost(mut self) -> (PathProfile, Cct, C) {
        if let Some((t, th)) = self.cur.take() {
            self.threads.insert(t, th);
        }
        let mut tids: Vec<u32> = self.threads.keys().copied().collect();
        tids.sort_unstable();
        for t in tids {
            let frames = std::mem::take(&mut self.threads.get_mut(&t).expect("tid").stack);
            for fr in frames {
                self.drop_path(&fr, Drop::Unfinished);
            }
        }
        let mut paths: BTreeMap<PathKey, PathMetrics> = self.paths.into_iter().collect();
        for (f, d) in self.dense.into_iter().enumerate() {
            let Some(d) = d else { continue };
            let func = FuncIdx(f as u32);
            paths.extend(
                d.iter()
                    .enumerate()
                    .filter(|(_, m)| m.count > 0)
                    .map(|(id, m)| {
                        (
                            PathKey {
                                func,
                                id: id as u128,
                            },
                            *m,
                        )
                    }),
            );
        }
        // Each function's instructions on complete paths: the sum over its paths.
        for (k, m) in &paths {
            self.profile.functions[k.func.0 as usize].path_instructions += m.instructions;
        }
        self.profile.paths = paths;
        (self.profile, self.cct, self.cost)
    }

    #[inline]
    fn numbering(&self, f: FuncIdx) -> Option<&'a PathNumbering> {
        self.numbered[f.0 as usize]
    }

    fn loc(&self, module: Option<ModuleIdx>, a: Svma) -> Location {
        Location {
            module: module.and_then(|m| self.module_map.get(m.0 as usize).copied().flatten()),
            svma: a,
        }
    }

    fn new_frame(&mut self, parent: NodeId, site: Option<Location>, callee: Location) -> Frame {
        let node = if self.opts.cct {
            self.cct.call(parent, site, callee)
        } else {
            Cct::ROOT
        };
        let func = if callee.module.is_some() && self.in_main(callee) {
            self.cfgs.function_at_entry(callee.svma)
        } else {
            None
        };
        let path = match func {
            Some(f) => {
                self.profile.functions[f.0 as usize].activations += 1;
                if self.numbering(f).is_some() {
                    PathState::Fresh
                } else {
                    PathState::None
                }
            }
            None => PathState::None,
        };
        Frame {
            node,
            func,
            site,
            path,
        }
    }

    fn in_main(&self, l: Location) -> bool {
        match (l.module, self.main) {
            (Some(m), Some(mm)) => self.module_map.get(mm.0 as usize) == Some(&Some(m)),
            _ => false,
        }
    }

    fn complete(&mut self, f: FuncIdx, id: u128, m: PathMetrics) {
        let mut m = m;
        m.count = 1;
        if let Some(obs) = self.observer.as_mut() {
            obs(self.cur_tid, PathKey { func: f, id }, &m);
        }
        let fi = f.0 as usize;
        if self.dense.len() <= fi {
            self.dense.resize(fi + 1, None);
        }
        if self.dense[fi].is_none() {
            // An empty array: the function has too many paths, they are hashed.
            let n = self.cfgs.numbering(f).map_or(0, |n| n.num_paths());
            let n = if n <= DENSE_PATHS { n as usize } else { 0 };
            self.dense[fi] = Some(vec![PathMetrics::default(); n].into());
        }
        match self.dense[fi]
            .as_deref_mut()
            .and_then(|d| d.get_mut(id as usize))
        {
            Some(slot) if id < DENSE_PATHS => slot.add(&m),
            _ => self
                .paths
                .entry(PathKey { func: f, id })
                .or_default()
                .add(&m),
        }
    }

    /// Ends a frame's path by leaving the function.
    fn leave(&mut self, fr: &Frame) {
        if let (Some(f), PathState::Active { reg, cur, m }) = (fr.func, fr.path) {
            if let Some(v) = self.numbering(f).and_then(|n| n.leave_val(cur)) {
                self.complete(f, reg + v, m);
                return;
            }
            let s = &mut self.profile.functions[f.0 as usize];
            s.lost_transfers += 1;
            s.lost_instructions += m.instructions;
            return;
        }
        self.drop_path(fr, Drop::Lost);
    }

    fn drop_path(&mut self, fr: &Frame, why: Drop) {
        let Some(f) = fr.func else { return };
        let s = &mut self.profile.functions[f.0 as usize];
        let ins = match fr.path {
            PathState::Active { m, .. } => {
                match why {
                    Drop::Unwound => s.unwound += 1,
                    Drop::Unfinished => s.unfinished += 1,
                    Drop::Lost => {}
                }
                m.instructions
            }
            PathState::Lost { instr, .. } => instr,
            _ => 0,
        };
        s.lost_instructions += ins;
    }

    /// Resolves what the previous block's end means for this block's first instruction.
    fn transfer(&mut self, th: &mut Thread, first: Location, first_in: Option<(FuncIdx, BlockId)>) {
        if th.stack.is_empty() {
            let fr = self.new_frame(Cct::ROOT, None, first);
            th.stack.push(fr);
            th.pending = None;
        }
        match th.pending.take() {
            Some((TraceEnd::Call, site)) => {
                let parent = th.stack.last().map_or(Cct::ROOT, |f| f.node);
                let fr = self.new_frame(parent, Some(site), first);
                th.stack.push(fr);
            }
            Some((TraceEnd::Return, _)) => {
                let hit = th.stack.iter().rposition(|fr| {
                    fr.site.is_some_and(|s| {
                        s.module == first.module
                            && first.svma.0 > s.svma.0
                            && first.svma.0 <= s.svma.0 + MAX_INSN
                    })
                });
                match hit {
                    Some(k) if k >= 1 => {
                        while th.stack.len() > k + 1 {
                            let fr = th.stack.pop().expect("non-empty");
                            self.cct.unwound_frames += 1;
                            self.drop_path(&fr, Drop::Unwound);
                        }
                        let fr = th.stack.pop().expect("non-empty");
                        self.leave(&fr);
                    }
                    _ => {
                        self.cct.unmatched_returns += 1;
                        // The thread's outermost activation returned to code the trace
                        // never saw call it: it ends, and what follows is a new outermost
                        // activation. Deeper unmatched returns leave the stack alone.
                        if th.stack.len() == 1 {
                            let fr = th.stack.pop().expect("one frame");
                            self.leave(&fr);
                            let nf = self.new_frame(Cct::ROOT, None, first);
                            th.stack.push(nf);
                        }
                    }
                }
            }
            Some((TraceEnd::Other, site)) if site.module != first.module && first_in.is_none() => {
                // A jump from one module into another outside the main binary's functions:
                // no function jumps within itself across modules, so this is a tail call
                // (the dynamic linker's resolver jumping to the resolved function, a PLT
                // stub of a library). The callee replaces the frame under the same parent.
                if th.stack.last().is_some_and(|f| f.func.is_none()) {
                    self.replace_top(th, first, true);
                } else {
                    self.resync(th, first, first_in);
                }
            }
            _ => self.resync(th, first, first_in),
        }
    }

    /// After a jump: detects tail calls and non-local returns into known functions.
    fn resync(&mut self, th: &mut Thread, first: Location, first_in: Option<(FuncIdx, BlockId)>) {
        let Some(top_func) = th.stack.last().map(|f| f.func) else {
            return;
        };
        let at_entry = |s: &Self| {
            first_in.is_some_and(|(f, _)| s.cfgs.cfg(f).entry == first.svma) && s.in_main(first)
        };
        match (first_in, top_func) {
            (Some((f, _)), tf) if tf != Some(f) => {
                let cfgs = self.cfgs;
                let family = |g: Option<FuncIdx>| g.is_some_and(|g| cfgs.same_function(g, f));
                if family(tf) {
                    // A jump between the hot and cold parts of one function (GCC's
                    // `f.cold`): the same activation and record continue in the other part.
                    if let Some(fr) = th.stack.last_mut() {
                        self.switch_fragment(fr, f, first);
                    }
                    return;
                }
                let lower = th.stack[..th.stack.len() - 1]
                    .iter()
                    .rposition(|fr| family(fr.func));
                if let (Some(k), false) = (lower, at_entry(self)) {
                    while th.stack.len() > k + 1 {
                        let fr = th.stack.pop().expect("non-empty");
                        self.cct.unwound_frames += 1;
                        self.drop_path(&fr, Drop::Unwound);
                    }
                    if let Some(fr) = th.stack.last_mut() {
                        if fr.func != Some(f) {
                            // A landing pad in the other part of the function (exceptions
                            // usually land in `f.cold`).
                            self.switch_fragment(fr, f, first);
                        } else if let PathState::Active { cur, m, .. } = fr.path {
                            // Resume: the target activation's path continues from the
                            // landing block.
                            if let Some(ff) = fr.func {
                                let s = &mut self.profile.functions[ff.0 as usize];
                                s.lost_transfers += 1;
                                s.lost_instructions += m.instructions;
                            }
                            fr.path = PathState::Lost {
                                cur: Some(cur),
                                instr: 0,
                            };
                        }
                    }
                } else {
                    let entry = at_entry(self);
                    self.replace_top(th, first, entry);
                }
            }
            (None, Some(_)) if first.module.is_some() || self.main.is_some() => {
                // A jump out of a known function into code without a CFG: a tail call.
                self.replace_top(th, first, true);
            }
            _ => {}
        }
    }

    /// Moves an activation from one part of a function to another (hot/cold split): the
    /// path in progress ends as if it left the function (the jump is an exit edge of its
    /// CFG), and the new part's path starts at its entry, or waits for a backedge when the
    /// jump lands elsewhere in it.
    fn switch_fragment(&mut self, fr: &mut Frame, f: FuncIdx, first: Location) {
        self.leave(fr);
        fr.func = Some(f);
        self.profile.functions[f.0 as usize].activations += 1;
        fr.path = match self.numbering(f) {
            Some(_) if self.cfgs.cfg(f).entry == first.svma => PathState::Fresh,
            Some(_) => PathState::Lost {
                cur: None,
                instr: 0,
            },
            None => PathState::None,
        };
    }

    fn replace_top(&mut self, th: &mut Thread, first: Location, at_entry: bool) {
        let Some(top) = th.stack.pop() else { return };
        if at_entry {
            self.cct.tail_calls += 1;
            self.leave(&top);
        } else {
            self.cct.unexplained_transfers += 1;
            if let Some(f) = top.func {
                self.profile.functions[f.0 as usize].lost_transfers += 1;
            }
            self.drop_path(&top, Drop::Lost);
        }
        // The callee's context is its caller's record (the frame below), at the same site;
        // with recursion folded this is the caller activation's record, not the tree parent
        // of the replaced record.
        let parent = th.stack.last().map_or(Cct::ROOT, |f| f.node);
        let mut fr = self.new_frame(parent, top.site, first);
        if !at_entry {
            if let PathState::Fresh = fr.path {
                fr.path = PathState::Lost {
                    cur: None,
                    instr: 0,
                };
            }
        }
        th.stack.push(fr);
    }

    /// Steps `fr`'s path to the run of `len` instructions in block `b` of `f` (`start`: the
    /// run begins at the block's first instruction), costing `c` in all, and charges the
    /// run. The path state changes in place; the transition is one lookup in the
    /// numbering's table ([`PathNumbering::step`]).
    #[inline]
    fn step_path(
        &mut self,
        fr: &mut Frame,
        f: FuncIdx,
        b: BlockId,
        start: bool,
        c: InstrCost,
        len: u64,
    ) {
        let Some(n) = self.numbering(f) else { return };
        match &mut fr.path {
            PathState::None => {}
            PathState::Fresh => {
                fr.path = if b.0 == 0 && start {
                    PathState::Active {
                        reg: n.start_val(),
                        cur: b,
                        m: PathMetrics::default(),
                    }
                } else {
                    PathState::Lost {
                        cur: Some(b),
                        instr: 0,
                    }
                };
            }
            PathState::Active { reg, cur, m } => {
                if *cur != b || start {
                    match n.step(*cur, b) {
                        Step::Real(v) => {
                            *reg += v;
                            *cur = b;
                        }
                        Step::Back {
                            end,
                            start: Some(s),
                        } => {
                            let (id, done) = (*reg + end, *m);
                            *reg = s;
                            *cur = b;
                            *m = PathMetrics::default();
                            self.complete(f, id, done);
                        }
                        Step::Back { start: None, .. } | Step::None => {
                            let lost = m.instructions;
                            fr.path = self.lose(f, b, lost);
                        }
                    }
                }
            }
            PathState::Lost { cur, instr } => {
                let restart = match *cur {
                    Some(c) if c != b || start => match n.step(c, b) {
                        Step::Back { start, .. } => start,
                        _ => None,
                    },
                    _ => None,
                };
                match restart {
                    Some(s) => {
                        self.profile.functions[f.0 as usize].lost_instructions += *instr;
                        fr.path = PathState::Active {
                            reg: s,
                            cur: b,
                            m: PathMetrics::default(),
                        };
                    }
                    None => *cur = Some(b),
                }
            }
        }
        match &mut fr.path {
            PathState::Active { m, .. } => m.charge(&c, len),
            PathState::Lost { instr, .. } => *instr += len,
            _ => {}
        }
    }

    /// [`BlockVisitor::block`] with the block's costs computed elsewhere (on another
    /// thread, see [`crate::profile_staged`]): `costs` are what [`crate::BlockCosts::costs`] gives
    /// for `b`, one sum per static-block run of a main-binary block, else one for the whole
    /// block. The cost model is not asked. The profile and CCT are the same as from
    /// [`BlockVisitor::block`] with that model.
    pub fn block_costed(&mut self, b: &TraceBlock<'_>, costs: &[InstrCost]) {
        self.visit_block(b, Some(costs));
    }

    fn visit_block(&mut self, b: &TraceBlock<'_>, pre: Option<&[InstrCost]>) {
        if b.instructions.is_empty() {
            return;
        }
        let in_main = b.module.is_some() && b.module == self.main;
        // The block's static-block runs: once per key, else computed into scratch.
        let plan = in_main.then(|| self.plans.plan(self.cfgs, b));
        let (first, last) = match plan {
            Some(p) => (p.first, p.last),
            None => (b.instructions[0], b.instructions[b.instructions.len() - 1]),
        };
        let first_loc = self.loc(b.module, first);
        let first_in = plan.and_then(|p| self.plans.segs(p)[0].hit);
        self.cur_tid = b.tid;
        let mut th = match self.cur.take() {
            Some((t, th)) if t == b.tid => th,
            other => {
                if let Some((t, th)) = other {
                    self.threads.insert(t, th);
                }
                self.threads.remove(&b.tid).unwrap_or_default()
            }
        };
        self.transfer(&mut th, first_loc, first_in);
        // The current activation, stepped in place.
        let Some(fr) = th.stack.last_mut() else {
            self.cur = Some((b.tid, th));
            return;
        };
        let mut node = PathMetrics::default();
        let n = b.instructions.len();
        // Runs of instructions strictly inside one static block (after its first
        // instruction) cause no transition: the first instruction of a run goes through the
        // path state machine, then the run's summed cost is charged. Outside the path state
        // machine the block is one run.
        let by_segment = plan.filter(|_| !matches!(fr.path, PathState::None));
        let mut costs = std::mem::take(&mut self.costs);
        // A keyed block under a static cost model: its cost and its runs' costs were asked
        // once (per run of the plan, in each `Seg::cost`). Otherwise per run of a
        // main-binary block, else (from `pre`, or without a plan) the block as a whole or
        // per run: summed alike (a run's cost is the sum of its instructions').
        let priced = match (pre, b.key) {
            (None, Some(k)) if self.cost.is_static() => {
                Some(
                    self.plans
                        .static_cost(&mut self.cost, b, k, plan, &mut costs),
                )
            }
            _ => None,
        };
        let runs: &[InstrCost] = match (pre, priced) {
            (Some(pre), _) => pre,
            (None, Some(_)) => &[],
            (None, None) => {
                let ends = self.plans.ends_or_whole(by_segment, n);
                self.cost.range_costs(b, ends, &mut costs);
                &costs
            }
        };
        node.instructions = n as u64;
        if let Some(t) = priced {
            node.cycles = t.cycles;
            node.l1_misses = t.l1_misses;
            node.llc_misses = t.llc_misses;
        } else {
            for c in runs {
                node.cycles += c.cycles;
                node.l1_misses += c.l1_misses;
                node.llc_misses += c.llc_misses;
            }
        }
        if let Some(p) = by_segment {
            debug_assert!(
                priced.is_some() || runs.len() == p.to - p.from,
                "one cost per run"
            );
            for k in 0..p.to - p.from {
                let seg = self.plans.segs(p)[k];
                // Priced: `runs` is empty and the run's cost is in its plan.
                let c = runs.get(k).copied().unwrap_or(seg.cost);
                let len = u64::from(seg.to - seg.from);
                match seg.hit {
                    Some((f, bb)) if Some(f) == fr.func => {
                        self.step_path(fr, f, bb, seg.start, c, len);
                    }
                    _ => {
                        if let Some(f) = fr.func {
                            self.profile.functions[f.0 as usize].lost_instructions += len;
                        }
                    }
                }
            }
        }
        self.costs = costs;
        self.profile.total_instructions += node.instructions;
        self.profile.total_cycles += node.cycles;
        self.profile.total_l1_misses += node.l1_misses;
        self.profile.total_llc_misses += node.llc_misses;
        if self.opts.cct {
            let n = self.cct.node_mut(fr.node);
            n.instructions += node.instructions;
            n.cycles += node.cycles;
            n.l1_misses += node.l1_misses;
            n.llc_misses += node.llc_misses;
        }
        th.pending = Some((b.end, self.loc(b.module, last)));
        self.cur = Some((b.tid, th));
    }

    fn lose(&mut self, f: FuncIdx, b: BlockId, ins: u64) -> PathState {
        let s = &mut self.profile.functions[f.0 as usize];
        s.lost_transfers += 1;
        s.lost_instructions += ins;
        PathState::Lost {
            cur: Some(b),
            instr: 0,
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum Drop {
    Lost,
    Unwound,
    Unfinished,
}

impl<C: CostModel> BlockVisitor for Profiler<'_, C> {
    fn module(&mut self, idx: ModuleIdx, module: &Module) {
        self.cost.module(idx, module);
        let mine = self.cct.modules.intern(module.clone());
        let i = idx.0 as usize;
        if self.module_map.len() <= i {
            self.module_map.resize(i + 1, None);
        }
        self.module_map[i] = Some(mine);
        if self.main.is_none() && module.same_binary(self.cfgs.module()) {
            self.main = Some(idx);
        }
    }

    fn block(&mut self, b: &TraceBlock<'_>) {
        self.visit_block(b, None);
    }

    fn end(&mut self, outcome: &RunOutcome) {
        self.outcome = Some(outcome.clone());
    }
}
