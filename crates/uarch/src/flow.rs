//! The time model of a run: per-block costs computed once with the scheduler, in the
//! context the exact edge counts make most likely, times the exact counts.
//!
//! # Blocks and contexts
//!
//! From the exact profile (per-instruction counts and block-to-block edges, calls and
//! returns included, as the QEMU plugin counts them) and the code: a block starts at an
//! instruction that is an edge's target, that follows an edge's source, a control transfer
//! or a gap, and runs to the next start. Each block is timed once, by the scheduler
//! ([`crate::sched`]), at the end of its most likely history: walking back from the block
//! along the predecessor with the most executions (the edge with the largest count, or the
//! fall-through), until [`ModelOptions::context`] instructions precede it. A block in a loop
//! thus sees the loop's previous iterations (and their loop-carried dependencies), a return
//! site the callee's last block. Its instructions' costs are their TIP shares of the
//! retirement cycles after the context's last retirement ([`crate::sched::tip`]); an
//! instruction's cycles in the run are its cost times its exact count.
//!
//! # Shared retirement cycles
//!
//! TIP splits a cycle in which several instructions retire evenly among them. A block's
//! first instructions often retire in the same cycle as its history's last ones (they
//! completed while an older instruction held the head), and its last ones with its
//! successors' first. Charging the block only the cycles after the history's last
//! retirement gave such a shared cycle wholly to the history, and a short block that
//! retires within it (a call's argument moves, a `test; jne`, a tail-calling wrapper)
//! nothing at all: on the bundled lua workload `sort_comp`, 5.6% of the executed
//! instructions and 4.6% of native cpu-clock samples, had 0 modelled cycles. So the block is
//! timed between its history and its most likely successors (walked forward like the
//! history, `FUTURE` instructions), TIP runs over the whole sequence, and the block keeps
//! its part: its share of the cycles it shares at both ends, every stall before one of its
//! instructions, every cycle it retires in alone. Timed in their own contexts, two blocks
//! that share a cycle take complementary parts of it, so the blocks' costs still add up to
//! the run's time.
//!
//! # Branch mispredictions
//!
//! A simple predictor per branch: for a conditional branch taken with frequency `p` (from the
//! exact edge counts), a 2-bit saturating counter on independent outcomes mispredicts at the
//! stationary rate of its four-state chain, `m = ((1 + r) p + (r² + r³) q) / (1 + r + r² +
//! r³)` with `q = 1 - p`, `r = p / q` (the chain is a birth-death chain, so its stationary
//! distribution is proportional to `rᵏ`; `m = 1/2` at `p = 1/2`, `m ≈ q` for a biased
//! branch). Indirect jumps and calls predicted by their last target: `m = 1 - Σ pⱼ²` over
//! their targets' frequencies. Returns (return stack) and direct jumps: 0. Each
//! misprediction costs the branch's resolution time (from the dispatch of its block's first
//! instruction into a drained core to the branch's completion: the front end restarts at the
//! block after a misprediction) plus the core's `MispredictPenalty`, charged to the branch: the
//! first-order model of Eyerman, Eeckhout, Karkhanis and Smith, "A mechanistic performance
//! model for superscalar out-of-order processors" (ACM TOCS 27(2), 2009, §4.2: penalty =
//! branch resolution time + front-end refill).
//!
//! **Simulated mispredictions, where the profile has them.** An exact profile with the
//! column [`proftrust_model::BRANCH_MISSES_COLUMN`] (the QEMU plugin's `bpred=on`: every
//! executed branch run through `proftrust-bpred`'s TAGE, ITTAGE-like and return-stack
//! predictors on the run's actual outcome sequence) gives each branch its mispredictions
//! counted by that predictor, which sees patterns (an alternating branch, a loop's exit, an
//! interpreter's dispatch following its opcode sequence) where the estimates above see
//! frequencies only; they replace the estimates for every branch (returns included) and
//! cost the same resolution plus penalty each.
//!
//! # Cache misses (only where asked: [`model_run_with_misses`])
//!
//! The caller gives each instruction its mean load latency beyond an L1 hit, `m` cycles per
//! execution (from a simulation of the run's data accesses: accesses served by the outer
//! level times that level's latency beyond L1, over the instruction's executions). The
//! scheduler then decides what the miss costs, as it does for every latency: a load on a
//! dependency chain (a pointer chase, an index loaded and then used) delays everything that
//! waits for it by `m`; an independent load overlaps with the work around it up to the
//! reorder buffer's size. That is the mean-latency (average memory access time) reading of
//! misses, exact for a serial chain (the expected length of a chain is the sum of its mean
//! latencies) and first-order otherwise; it leaves out memory-level parallelism limits (fill
//! buffers), prefetchers (beyond what the simulated caches see) and the correlation of one
//! load's misses across iterations. The scheduler counts whole cycles, so a block whose
//! loads have misses is timed with every one of its loads at `⌊m⌋` (all instances in its
//! history too, the loop's earlier iterations), and once more per load with `⌊m⌋ + 1`; the
//! block's costs are the first timing plus, per load, `m − ⌊m⌋` times the difference the
//! extra cycle made (a linear interpolation per load, so a load missing 1% of the time
//! costs 1% of what one more cycle on its path costs, not a whole cycle or none).
//! Mispredicted branches keep their resolution time with L1 hits.

use crate::op::{op_of, Flow, Op};
use crate::sched::{tip, Sched};
use crate::table::Core;
use iced_x86::{Decoder, DecoderOptions, InstructionInfoFactory};
use proftrust_model::{ExactProfile, InstrCount};

/// The executable code of one module: (SVMA of a section, its bytes).
#[derive(Debug, Clone, Default)]
pub struct ModuleCode {
    sections: Vec<(u64, Vec<u8>)>,
}

impl ModuleCode {
    /// Code from executable sections (start SVMA, bytes).
    pub fn new(mut sections: Vec<(u64, Vec<u8>)>) -> ModuleCode {
        sections.sort_by_key(|s| s.0);
        ModuleCode { sections }
    }

    /// The bytes from `svma` to the end of its section.
    pub fn at(&self, svma: u64) -> Option<&[u8]> {
        let k = self
            .sections
            .partition_point(|s| s.0 <= svma)
            .checked_sub(1)?;
        let (start, bytes) = &self.sections[k];
        bytes
            .get((svma - start) as usize..)
            .filter(|b| !b.is_empty())
    }
}

/// Instructions of most likely successors simulated after a block, for the cycles it
/// shares with them (module documentation, "Shared retirement cycles"): more than the
/// instructions one cycle retires (at most the dispatch width of the modelled cores, 6).
const FUTURE: usize = 16;

/// Settings of [`model_run`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ModelOptions {
    /// Instructions of history simulated before a hot block. Default 400.
    pub context: usize,
    /// History of the other (cold) blocks. Default 40.
    pub cold_context: usize,
    /// Share of the run's executed instructions, hottest blocks first, timed with the long
    /// history. Default 0.999.
    pub hot_share: f64,
}

impl Default for ModelOptions {
    fn default() -> Self {
        ModelOptions {
            context: 400,
            cold_context: 40,
            hot_share: 0.999,
        }
    }
}

/// The modelled time of a run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ModelledRun {
    /// Cycles per instruction of the exact profile (parallel to its `instructions`): its
    /// cost per execution times its count, mispredictions included.
    pub cycles: Vec<f64>,
    /// Expected mispredictions per instruction (parallel likewise).
    pub mispredicts: Vec<f64>,
    /// Blocks timed.
    pub blocks: usize,
    /// Instructions the scheduler stepped (contexts included).
    pub steps: u64,
    /// Executed instructions whose form the core's table lacks (1 micro-op, latency 1).
    pub unknown_executions: u64,
    /// Executed instructions of modules without code (charged 1 cycle each).
    pub uncoded_executions: u64,
    /// Cycles the cache misses added ([`model_run_with_misses`]; 0 without).
    pub miss_cycles: f64,
    /// The mispredictions are the simulated ones of the profile's
    /// [`proftrust_model::BRANCH_MISSES_COLUMN`], not estimates from branch frequencies
    /// (module documentation, "Branch mispredictions").
    pub simulated_branches: bool,
}

/// The stationary misprediction rate of a 2-bit saturating counter on independent outcomes
/// taken with probability `p` (module documentation).
pub fn two_bit_mispredict_rate(p: f64) -> f64 {
    let p = p.clamp(0.0, 1.0);
    let q = 1.0 - p;
    if q <= 0.0 || p <= 0.0 {
        return 0.0;
    }
    let r = p / q;
    ((1.0 + r) * p + (r * r + r * r * r) * q) / (1.0 + r + r * r + r * r * r)
}

/// Times a run: every instruction of `exact` with code from `code` (indexed by the exact
/// profile's module index; `None` for a module without code) on `core`. Every load hits L1.
pub fn model_run(
    exact: &ExactProfile,
    code: &[Option<ModuleCode>],
    core: &Core,
    opts: &ModelOptions,
) -> ModelledRun {
    model_run_with_misses(exact, code, core, opts, &[])
}

/// [`model_run`] with data-cache misses: `miss[i]` is instruction `i`'s mean load latency
/// beyond an L1 hit, in cycles per execution (its accesses served by the outer levels times
/// their latencies beyond L1, over its executions; parallel to `exact.instructions`, empty
/// for none). How the scheduler charges it: module documentation, "Cache misses".
pub fn model_run_with_misses(
    exact: &ExactProfile,
    code: &[Option<ModuleCode>],
    core: &Core,
    opts: &ModelOptions,
    miss: &[f64],
) -> ModelledRun {
    let ops = decode(exact, code, core);
    let g = RunGraph::new(exact, ops, opts.hot_share);
    let n = g.ins.len();
    let mut t = Timing {
        g: &g,
        core,
        sched: Sched::new(core),
        chain: Vec::new(),
        next: Vec::new(),
        out: ModelledRun {
            cycles: vec![0.0; n],
            mispredicts: vec![0.0; n],
            blocks: g.blocks.len(),
            simulated_branches: g.simulated.is_some(),
            ..ModelledRun::default()
        },
    };
    for (b, &(s, e)) in g.blocks.iter().enumerate() {
        if g.ops[s].is_none() {
            for (c, ic) in t.out.cycles[s..e].iter_mut().zip(&g.ins[s..e]) {
                *c = ic.count as f64;
                t.out.uncoded_executions += ic.count;
            }
            continue;
        }
        let want = if g.hot[b] {
            opts.context
        } else {
            opts.cold_context
        };
        // The history, newest first, and the successors that share the block's last
        // retirement cycles, in order (module documentation, "Shared retirement cycles").
        g.walk(b, &g.best_pred, want, &mut t.chain);
        g.walk(b, &g.best_succ, FUTURE, &mut t.next);
        let costs = t.block_costs((s, e), miss);
        for (k, i) in (s..e).enumerate() {
            let c = g.ins[i].count as f64;
            t.out.cycles[i] = costs[k] * c;
            if g.ops[i].as_ref().is_some_and(|o| !o.known) {
                t.out.unknown_executions += g.ins[i].count;
            }
        }
        t.mispredictions((s, e));
    }
    t.out
}

/// Every executed instruction of `exact` decoded (`None` without code or when invalid).
fn decode(exact: &ExactProfile, code: &[Option<ModuleCode>], core: &Core) -> Vec<Option<Op>> {
    let mut factory = InstructionInfoFactory::new();
    exact
        .instructions
        .iter()
        .map(|ic| {
            let m = ic.loc.module?;
            let bytes = code.get(m.0 as usize)?.as_ref()?.at(ic.loc.svma.0)?;
            let mut dec = Decoder::with_ip(
                64,
                &bytes[..bytes.len().min(15)],
                ic.loc.svma.0,
                DecoderOptions::NONE,
            );
            let i = dec.decode();
            (!i.is_invalid()).then(|| op_of(&i, core, &mut factory))
        })
        .collect()
}

/// The most likely neighbour block: the block of the heaviest of `edges` (instruction,
/// count; the first of equals), or `fall` (count, block: the fall-through) when heavier
/// still.
fn most_likely(
    edges: &[(usize, u64)],
    block_of: &[usize],
    fall: Option<(u64, usize)>,
) -> Option<usize> {
    let mut best: Option<(u64, usize)> = None;
    for &(x, c) in edges {
        if best.is_none_or(|(bc, _)| c > bc) {
            best = Some((c, block_of[x]));
        }
    }
    if let Some((c, b)) = fall {
        if c > 0 && best.is_none_or(|(bc, _)| c > bc) {
            best = Some((c, b));
        }
    }
    best.map(|b| b.1)
}

/// The executed instructions as blocks, with the edges between them, each block's most
/// likely predecessor and successor and the hot blocks.
struct RunGraph<'a> {
    ins: &'a [InstrCount],
    ops: Vec<Option<Op>>,
    /// Each instruction's successors by edge, with counts.
    succs: Vec<Vec<(usize, u64)>>,
    /// Blocks as instruction index ranges.
    blocks: Vec<(usize, usize)>,
    /// Each block's most likely predecessor block.
    best_pred: Vec<Option<usize>>,
    /// Each block's most likely successor block.
    best_succ: Vec<Option<usize>>,
    hot: Vec<bool>,
    /// The mispredictions a predictor simulated on the actual outcomes, per instruction:
    /// the profile's extra cost rows (parallel to `ins`) and the index of their column
    /// [`proftrust_model::BRANCH_MISSES_COLUMN`] (module documentation); `None` without
    /// that column.
    simulated: Option<(&'a [Vec<u64>], usize)>,
}

impl<'a> RunGraph<'a> {
    fn new(exact: &'a ExactProfile, ops: Vec<Option<Op>>, hot_share: f64) -> Self {
        let ins = &exact.instructions[..];
        let n = ins.len();
        let index = |l: proftrust_model::Location| ins.binary_search_by_key(&l, |i| i.loc).ok();
        let mut in_sum = vec![0u64; n];
        let mut preds: Vec<Vec<(usize, u64)>> = vec![Vec::new(); n];
        let mut succs: Vec<Vec<(usize, u64)>> = vec![Vec::new(); n];
        for e in &exact.edges {
            let (Some(f), Some(t)) = (index(e.from), index(e.to)) else {
                continue;
            };
            in_sum[t] += e.count;
            preds[t].push((f, e.count));
            succs[f].push((t, e.count));
        }
        let mut g = RunGraph {
            ins,
            ops,
            succs,
            blocks: Vec::new(),
            best_pred: Vec::new(),
            best_succ: Vec::new(),
            hot: Vec::new(),
            simulated: exact
                .extra_cost_names
                .iter()
                .position(|c| c == proftrust_model::BRANCH_MISSES_COLUMN)
                .map(|k| (&exact.extra_costs[..], k)),
        };
        let block_of = g.split_blocks(&in_sum);
        g.best_pred = g.best_preds(&in_sum, &preds, &block_of);
        g.best_succ = g.best_succs(&block_of);
        g.hot = g.hot_blocks(hot_share);
        g
    }

    /// Whether instruction `i` follows `i - 1` in memory (same module, no gap).
    fn contiguous(&self, i: usize) -> bool {
        let (ins, ops) = (self.ins, &self.ops);
        i > 0
            && ins[i - 1].loc.module == ins[i].loc.module
            && ops[i - 1]
                .as_ref()
                .is_some_and(|o| ins[i - 1].loc.svma.0 + u64::from(o.len) == ins[i].loc.svma.0)
    }

    /// Whether control goes from instruction `from` to instruction `to` by a taken branch:
    /// a jump, call or return always, a conditional branch when `to` is its target.
    fn taken(&self, from: usize, to: usize) -> bool {
        match self.ops[from].as_ref().map(|o| o.flow) {
            Some(Flow::Conditional(target)) => self.ins[to].loc.svma.0 == target,
            Some(Flow::Next | Flow::Other) | None => false,
            Some(_) => true,
        }
    }

    /// The blocks: a new one at an edge target, after a gap, after an edge source or a
    /// control-flow instruction. Returns each instruction's block.
    fn split_blocks(&mut self, in_sum: &[u64]) -> Vec<usize> {
        let n = self.ins.len();
        let mut block_of = vec![0usize; n];
        for i in 0..n {
            let start = i == 0
                || in_sum[i] > 0
                || !self.contiguous(i)
                || !self.succs[i - 1].is_empty()
                || self.ops[i - 1]
                    .as_ref()
                    .is_none_or(|o| o.flow != Flow::Next);
            if start {
                self.blocks.push((i, i + 1));
            } else if let Some(b) = self.blocks.last_mut() {
                b.1 = i + 1;
            }
            block_of[i] = self.blocks.len() - 1;
        }
        block_of
    }

    /// Each block's most likely predecessor block: the edge, or the fall-through, that
    /// enters it most often.
    fn best_preds(
        &self,
        in_sum: &[u64],
        preds: &[Vec<(usize, u64)>],
        block_of: &[usize],
    ) -> Vec<Option<usize>> {
        self.blocks
            .iter()
            .map(|&(s, _)| {
                let fall = self.contiguous(s).then(|| {
                    let c = self.ins[s].count.saturating_sub(in_sum[s]);
                    (c, block_of[s - 1])
                });
                most_likely(&preds[s], block_of, fall)
            })
            .collect()
    }

    /// Each block's most likely successor block: the edge, or the fall-through, that
    /// leaves it most often (the mirror of [`RunGraph::best_preds`]).
    fn best_succs(&self, block_of: &[usize]) -> Vec<Option<usize>> {
        let n = self.ins.len();
        self.blocks
            .iter()
            .map(|&(_, e)| {
                let last = e - 1;
                let fall = (e < n && self.contiguous(e)).then(|| {
                    let out: u64 = self.succs[last].iter().map(|&(_, c)| c).sum();
                    (self.ins[last].count.saturating_sub(out), block_of[e])
                });
                most_likely(&self.succs[last], block_of, fall)
            })
            .collect()
    }

    /// The blocks reached from block `b` by following `link` ([`RunGraph::best_pred`] or
    /// [`RunGraph::best_succ`]) into `out`, in order, up to `limit` instructions (stopping at
    /// a block without code).
    fn walk(&self, b: usize, link: &[Option<usize>], limit: usize, out: &mut Vec<usize>) {
        out.clear();
        let mut have = 0usize;
        let mut cur = b;
        while have < limit {
            let Some(p) = link[cur] else { break };
            let (ps, pe) = self.blocks[p];
            if self.ops[ps..pe].iter().any(Option::is_none) {
                break;
            }
            out.push(p);
            have += pe - ps;
            cur = p;
        }
    }

    /// Hot blocks: the largest shares of executed instructions up to `hot_share`.
    fn hot_blocks(&self, hot_share: f64) -> Vec<bool> {
        let weight =
            |b: &(usize, usize)| -> u64 { self.ins[b.0..b.1].iter().map(|i| i.count).sum() };
        let total: u64 = self.blocks.iter().map(weight).sum();
        let mut order: Vec<usize> = (0..self.blocks.len()).collect();
        order.sort_by_key(|&b| std::cmp::Reverse(weight(&self.blocks[b])));
        let mut hot = vec![false; self.blocks.len()];
        let mut acc = 0u64;
        for &b in &order {
            if (acc as f64) >= hot_share * total as f64 {
                break;
            }
            hot[b] = true;
            acc += weight(&self.blocks[b]);
        }
        hot
    }
}

/// The timing of the blocks of a [`RunGraph`], one after the other, on one scheduler.
struct Timing<'a> {
    g: &'a RunGraph<'a>,
    core: &'a Core,
    sched: Sched<'a>,
    /// The current block's history: its most likely predecessors, newest first.
    chain: Vec<usize>,
    /// The current block's most likely successors, in order.
    next: Vec<usize>,
    out: ModelledRun,
}

impl Timing<'_> {
    /// The TIP costs of the instructions of block `body` (a range of the ops), scheduled
    /// after `chain` (its history, newest first) and followed by `next` (its most likely
    /// successors, in order) on an empty core; instruction `i`'s load takes `extra(i)`
    /// cycles more than an L1 hit. TIP runs over the whole sequence and the body's part is
    /// returned: a cycle in which the history's last instructions or the successors' first
    /// retire together with the body's is split among all of them (module documentation,
    /// "Shared retirement cycles").
    fn time(&mut self, body: (usize, usize), extra: &dyn Fn(usize) -> u32) -> Vec<f64> {
        let (g, sched, steps) = (self.g, &mut self.sched, &mut self.out.steps);
        sched.reset();
        let mut retire: Vec<u64> = Vec::new();
        // The last instruction timed and its dispatch cycle, for the front end's
        // one-taken-branch-per-cycle bound between blocks.
        let mut last: Option<(usize, u64)> = None;
        let mut push = |range: (usize, usize), retire: &mut Vec<u64>| {
            if let Some((b, d)) = last {
                if g.taken(b, range.0) {
                    sched.taken_branch(d);
                }
            }
            for (i, op) in g.ops.iter().enumerate().take(range.1).skip(range.0) {
                match op {
                    Some(o) => {
                        let t = sched.push_with(o, extra(i));
                        retire.push(t.retire);
                        last = Some((i, t.dispatch));
                        *steps += 1;
                    }
                    None => retire.push(retire.last().copied().unwrap_or(0)),
                }
            }
        };
        for &p in self.chain.iter().rev() {
            push(g.blocks[p], &mut retire);
        }
        let first = retire.len();
        push(body, &mut retire);
        let last = retire.len();
        for &q in &self.next {
            push(g.blocks[q], &mut retire);
        }
        tip(&retire, 0)[first..last].to_vec()
    }

    /// Cycles per execution of each instruction of `(s, e)`, with the data-cache misses
    /// `miss` when given (module documentation, "Cache misses"): the block again with its
    /// loads at the whole cycles of their mean miss latency, then each load with a
    /// fractional part one cycle more, interpolated.
    fn block_costs(&mut self, (s, e): (usize, usize), miss: &[f64]) -> Vec<f64> {
        let costs = self.time((s, e), &|_| 0);
        if miss.is_empty() {
            return costs;
        }
        let whole = |i: usize| miss.get(i).map_or(0, |m| m.max(0.0).floor() as u32);
        let loads: Vec<(usize, f64)> = (s..e)
            .filter_map(|i| {
                let m = *miss.get(i)?;
                (m > 0.0).then(|| (i, m - m.floor()))
            })
            .collect();
        if loads.is_empty() {
            return costs;
        }
        let blocks = &self.g.blocks;
        let history = self.chain.iter().flat_map(|&p| blocks[p].0..blocks[p].1);
        let base = if history.chain(s..e).any(|i| whole(i) > 0) {
            self.time((s, e), &whole)
        } else {
            costs.clone()
        };
        let mut with = base.clone();
        for &(j, frac) in &loads {
            if frac <= 0.0 {
                continue;
            }
            let up = |i: usize| whole(i) + u32::from(i == j);
            let c = self.time((s, e), &up);
            for ((w, &u), &b) in with.iter_mut().zip(&c).zip(&base) {
                *w += frac * (u - b);
            }
        }
        for (k, i) in (s..e).enumerate() {
            self.out.miss_cycles += (with[k] - costs[k]) * self.g.ins[i].count as f64;
        }
        with
    }

    /// The mispredictions of the branch that ends block `(s, e)` and their cycles.
    fn mispredictions(&mut self, (s, e): (usize, usize)) {
        let g = self.g;
        let Some(o) = g.ops[e - 1].as_ref() else {
            return;
        };
        let count = g.ins[e - 1].count;
        if count == 0 {
            return;
        }
        let succs = &g.succs[e - 1];
        let rate = match o.flow {
            Flow::Conditional(target) => {
                let taken: u64 = succs
                    .iter()
                    .filter(|&&(t, _)| g.ins[t].loc.svma.0 == target)
                    .map(|&(_, c)| c)
                    .sum();
                two_bit_mispredict_rate(taken as f64 / count as f64)
            }
            Flow::IndirectJump | Flow::IndirectCall => {
                let all: u64 = succs.iter().map(|&(_, c)| c).sum();
                if all == 0 {
                    0.0
                } else {
                    1.0 - succs
                        .iter()
                        .map(|&(_, c)| (c as f64 / all as f64).powi(2))
                        .sum::<f64>()
                }
            }
            _ => 0.0,
        };
        let m = match g.simulated {
            Some((rows, k)) => rows
                .get(e - 1)
                .and_then(|r| r.get(k))
                .map_or(0.0, |&x| x as f64),
            None => rate * count as f64,
        };
        if m > 0.0 {
            // Resolution time: after a misprediction the front end restarts at the block,
            // so the branch resolves when the block, dispatched into a drained core,
            // computes its condition (in the history above the front end runs far ahead of
            // a dependency chain, which a core that mispredicts never does).
            self.sched.reset();
            let mut first = None;
            let mut end = 0;
            for o in g.ops[s..e].iter().flatten() {
                let x = self.sched.push(o);
                first.get_or_insert(x.dispatch);
                end = x.complete;
                self.out.steps += 1;
            }
            let resolution = end.saturating_sub(first.unwrap_or(0)) as f64;
            self.out.mispredicts[e - 1] = m;
            self.out.cycles[e - 1] += m * (resolution + f64::from(self.core.mispredict_penalty));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_bit_counter_by_hand() {
        assert!((two_bit_mispredict_rate(0.5) - 0.5).abs() < 1e-12);
        // p = 0.9: r = 9, (10 * 0.9 + (81 + 729) * 0.1) / (1 + 9 + 81 + 729) = 90 / 820.
        assert!((two_bit_mispredict_rate(0.9) - 90.0 / 820.0).abs() < 1e-12);
        assert!((two_bit_mispredict_rate(0.1) - 90.0 / 820.0).abs() < 1e-12);
        assert_eq!(two_bit_mispredict_rate(1.0), 0.0);
        assert_eq!(two_bit_mispredict_rate(0.0), 0.0);
    }

    /// Two loops of 1000 iterations, each `load; dec rcx; jnz`: at 0x1000 a pointer chase
    /// (`mov rax, [rax]`: the next address is the loaded value), at 0x2000 an independent
    /// load (`mov rdx, [rsi]`). Returns the cycles per iteration of each.
    fn two_loops(miss: f64) -> (f64, f64, f64) {
        use proftrust_model::{EdgeCount, InstrCount, Location, Module};
        let chase = [0x48, 0x8b, 0x00, 0x48, 0xff, 0xc9, 0x75, 0xf8];
        let indep = [0x48, 0x8b, 0x16, 0x48, 0xff, 0xc9, 0x75, 0xf8];
        let mut e = ExactProfile::default();
        let m = e.modules.intern(Module::new("/loops"));
        for base in [0x1000u64, 0x2000] {
            for off in [0, 3, 6] {
                e.instructions.push(InstrCount {
                    loc: Location::new(m, base + off),
                    count: 1000,
                });
            }
            e.edges.push(EdgeCount {
                from: Location::new(m, base + 6),
                to: Location::new(m, base),
                count: 999,
            });
        }
        e.normalize();
        let code = [Some(ModuleCode::new(vec![
            (0x1000, chase.to_vec()),
            (0x2000, indep.to_vec()),
        ]))];
        let core = Core::new(crate::CoreKind::GoldenCove);
        let loads = if miss > 0.0 {
            vec![miss, 0.0, 0.0, miss, 0.0, 0.0]
        } else {
            Vec::new()
        };
        let r = model_run_with_misses(&e, &code, &core, &ModelOptions::default(), &loads);
        let per = |k: usize| r.cycles[k..k + 3].iter().sum::<f64>() / 1000.0;
        (per(0), per(3), r.miss_cycles)
    }

    #[test]
    fn misses_on_a_chain_add_their_latency_and_overlap_when_independent() {
        let (chase0, indep0, none) = two_loops(0.0);
        assert_eq!(none, 0.0);
        // L1 hits: the chase is bound by the load latency (LLVM's 5 cycles on Golden Cove),
        // the independent loop by its dispatch (well under a cycle... plus the taken branch).
        assert!((chase0 - 5.0).abs() < 0.5, "chase {chase0}");
        assert!(indep0 < 2.0, "independent {indep0}");
        // 100 cycles more per load: on the chain every cycle shows (105 per iteration)...
        let (chase, indep, added) = two_loops(100.0);
        assert!(
            (chase - chase0 - 100.0).abs() < 1.0,
            "chase {chase0} -> {chase}"
        );
        // ...the independent loads overlap (the reorder buffer holds 170 iterations, more
        // than the 105 cycles of one load): a few cycles per iteration at most.
        assert!(indep - indep0 < 5.0, "independent {indep0} -> {indep}");
        assert!((added - 1000.0 * (chase - chase0 + indep - indep0)).abs() < 1.0);
        // Half a cycle on average: half of what one more cycle costs, on the chain.
        let (half, _, _) = two_loops(0.5);
        assert!(
            (half - chase0 - 0.5).abs() < 0.05,
            "chase {chase0} -> {half}"
        );
    }
    /// The front end follows one taken branch per cycle (`Core::taken_branch_cycles`): a
    /// loop of 4 jumps to the next instruction, 4 adds in two chains of 2 and `dec; jnz`
    /// takes 5 taken branches, so 5 cycles per iteration, where the adds alone need 2 and
    /// the 10 instructions' micro-ops 2 (6 per cycle). The shape of `workloads/chains.c`'s
    /// `jumps` kernel (docs/audit.md, "The front end").
    #[test]
    fn one_taken_branch_per_cycle() {
        use proftrust_model::{EdgeCount, InstrCount, Location, Module};
        let (jmp, add_a, add_b) = (
            &[0xeb, 0x00][..],
            &[0x48, 0x01, 0xd0][..],
            &[0x48, 0x01, 0xd3][..],
        );
        let mut code = Vec::new();
        for k in 0..4 {
            code.extend_from_slice(jmp);
            code.extend_from_slice(if k % 2 == 0 { add_a } else { add_b });
        }
        code.extend_from_slice(&[0x48, 0xff, 0xc9, 0x75, 0xe7]); // dec rcx; jnz 0x3000
        let mut e = ExactProfile::default();
        let m = e.modules.intern(Module::new("/jumps"));
        let starts = [0u64, 2, 5, 7, 10, 12, 15, 17, 20, 23];
        for off in starts {
            e.instructions.push(InstrCount {
                loc: Location::new(m, 0x3000 + off),
                count: 1000,
            });
        }
        e.edges.push(EdgeCount {
            from: Location::new(m, 0x3017),
            to: Location::new(m, 0x3000),
            count: 999,
        });
        e.normalize();
        let code = [Some(ModuleCode::new(vec![(0x3000, code)]))];
        let core = Core::new(crate::CoreKind::GoldenCove);
        let r = model_run(&e, &code, &core, &ModelOptions::default());
        let per = r.cycles.iter().sum::<f64>() / 1000.0;
        assert!((per - 5.0).abs() < 0.05, "{per} cycles per iteration");
    }

    /// A column of simulated mispredictions replaces the frequency estimate: a loop branch
    /// (`mov rdx,[rsi]; dec rcx; jnz`) taken 500 of 1000 times is charged 500 by the 2-bit
    /// formula (`p = 1/2`: rate 1/2) and exactly the 3 of the column with it, each at the
    /// same resolution plus MispredictPenalty (14 on Golden Cove); the other instructions'
    /// cycles do not change.
    #[test]
    fn simulated_mispredictions_replace_the_estimate() {
        use proftrust_model::{EdgeCount, InstrCount, Location, Module};
        let mut e = ExactProfile::default();
        let m = e.modules.intern(Module::new("/loop"));
        for off in [0, 3, 6] {
            e.instructions.push(InstrCount {
                loc: Location::new(m, 0x2000 + off),
                count: 1000,
            });
        }
        e.edges.push(EdgeCount {
            from: Location::new(m, 0x2006),
            to: Location::new(m, 0x2000),
            count: 500,
        });
        e.normalize();
        let code = [Some(ModuleCode::new(vec![(
            0x2000,
            vec![0x48, 0x8b, 0x16, 0x48, 0xff, 0xc9, 0x75, 0xf8],
        )]))];
        let core = Core::new(crate::CoreKind::GoldenCove);
        let estimated = model_run(&e, &code, &core, &ModelOptions::default());
        assert_eq!(estimated.mispredicts, vec![0.0, 0.0, 500.0]);
        e.extra_cost_names = vec![proftrust_model::BRANCH_MISSES_COLUMN.into()];
        e.extra_costs = vec![vec![0], vec![0], vec![3]];
        let simulated = model_run(&e, &code, &core, &ModelOptions::default());
        assert_eq!(simulated.mispredicts, vec![0.0, 0.0, 3.0]);
        assert_eq!(estimated.cycles[..2], simulated.cycles[..2]);
        let per_miss = (estimated.cycles[2] - simulated.cycles[2]) / 497.0;
        assert!((14.0..30.0).contains(&per_miss), "{per_miss}");
        // None simulated: no misprediction cycles at all.
        e.extra_costs = vec![vec![0], vec![0], vec![0]];
        let none = model_run(&e, &code, &core, &ModelOptions::default());
        assert_eq!(none.mispredicts.iter().sum::<f64>(), 0.0);
        assert!(
            (simulated.cycles[2] - none.cycles[2] - 3.0 * per_miss).abs() < 1e-6,
            "{} {}",
            simulated.cycles[2],
            none.cycles[2]
        );
    }
}
