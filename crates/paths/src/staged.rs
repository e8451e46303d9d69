//! The [`Profiler`] on two threads: the trace's producer (the caller's thread, which also
//! decodes the trace) runs the cost model, a second thread the path and CCT bookkeeping.
//!
//! The cost model (e.g. the virtual PMU's cache simulation) and the profiler's shadow stacks
//! and path registers are about equal shares of the analysis of a block trace, and neither
//! needs the other's results: the cost of a block is a function of the block, its data
//! accesses and the cost model's own state, and the profiler charges per static-block run
//! sums of those costs. So the producer computes each block's run sums ([`BlockCosts`]) and
//! sends the blocks and sums in batches, in trace order, through a bounded channel to the
//! thread that runs [`Profiler::block_costed`]. The profile and CCT are the ones the same
//! profiler gives on one thread ([`BlockVisitor::block`]): the same blocks in the same order
//! with the same sums.

use crate::funcs::ProgramCfgs;
use crate::profile::{Plans, Profiler, ProfilerOptions};
use crate::{Cct, PathProfile};
use proftrust_model::{
    BlockVisitor, CostModel, InstrCost, Module, ModuleIdx, RunOutcome, Svma, TraceBlock, TraceEnd,
};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};

/// The costs [`Profiler::block_costed`] takes for each block, computed by a [`CostModel`]:
/// for a block of the program's main binary one sum per static-block run (the runs the
/// profiler steps its path registers by), else one sum for the whole block.
pub struct BlockCosts<'a, C: CostModel> {
    cfgs: &'a ProgramCfgs,
    cost: C,
    plans: Plans,
    main: Option<ModuleIdx>,
}

impl<'a, C: CostModel> BlockCosts<'a, C> {
    /// Costs by `cost` for the blocks of a program with the CFGs `cfgs`.
    pub fn new(cfgs: &'a ProgramCfgs, cost: C) -> Self {
        BlockCosts {
            cfgs,
            cost,
            plans: Plans::default(),
            main: None,
        }
    }

    /// A module of the trace became known (as [`BlockVisitor::module`]).
    pub fn module(&mut self, idx: ModuleIdx, module: &Module) {
        self.cost.module(idx, module);
        if self.main.is_none() && module.same_binary(self.cfgs.module()) {
            self.main = Some(idx);
        }
    }

    /// The costs of `b` into `out` (empty for a block without instructions).
    pub fn costs(&mut self, b: &TraceBlock<'_>, out: &mut Vec<InstrCost>) {
        out.clear();
        let n = b.instructions.len();
        if n == 0 {
            return;
        }
        let in_main = b.module.is_some() && b.module == self.main;
        let plan = in_main.then(|| self.plans.plan(self.cfgs, b));
        let ends = self.plans.ends_or_whole(plan, n);
        self.cost.range_costs(b, ends, out);
    }

    /// The cost model (e.g. to read its cache statistics after the run).
    pub fn cost_model(&self) -> &C {
        &self.cost
    }

    /// The cost model, taken back.
    pub fn into_cost_model(self) -> C {
        self.cost
    }
}

/// Blocks per batch sent to the profiler's thread.
const BATCH_BLOCKS: usize = 2048;
/// Batches in flight at most (the producer waits when the profiler is this far behind).
const BATCHES_IN_FLIGHT: usize = 4;
/// [`Blk::key`] of a block without a key: its content is the next of [`Batch::loose`].
const LOOSE: u32 = u32::MAX;

/// One block of a batch.
#[derive(Debug, Clone, Copy)]
struct Blk {
    tid: u32,
    /// The trace block key ([`Event::Def`] gave its content before), or [`LOOSE`].
    key: u32,
    /// End of its costs in [`Batch::costs`] (they start where the previous block's end).
    cost_end: u32,
}

/// What happens between blocks.
#[derive(Debug)]
enum Event {
    Module(ModuleIdx, Module),
    /// The content of a trace block key (sent once, before its first block).
    Def(u32, Content),
    End(RunOutcome),
}

/// A block's content, as the profiler needs it (data accesses are the cost model's).
#[derive(Debug)]
struct Content {
    module: Option<ModuleIdx>,
    instructions: Box<[Svma]>,
    end: TraceEnd,
}

impl Content {
    fn of(b: &TraceBlock<'_>) -> Content {
        Content {
            module: b.module,
            instructions: b.instructions.into(),
            end: b.end,
        }
    }

    fn block(&self, tid: u32, key: Option<u32>) -> TraceBlock<'_> {
        TraceBlock {
            tid,
            module: self.module,
            instructions: &self.instructions,
            end: self.end,
            mem: &[],
            key,
        }
    }
}

#[derive(Debug, Default)]
struct Batch {
    blocks: Vec<Blk>,
    costs: Vec<InstrCost>,
    /// (index of the block it comes before, event), in order.
    events: Vec<(u32, Event)>,
    /// Contents of the [`LOOSE`] blocks, in order.
    loose: Vec<Content>,
}

impl Batch {
    fn clear(&mut self) {
        self.blocks.clear();
        self.costs.clear();
        self.events.clear();
        self.loose.clear();
    }
}

/// The producer's side: a [`BlockVisitor`] that costs each block and ships it.
struct Front<'a, 'c, C: CostModel> {
    costs: &'c mut BlockCosts<'a, C>,
    batch: Batch,
    tx: Option<SyncSender<Batch>>,
    /// Emptied batches coming back for reuse.
    back: Receiver<Batch>,
    /// Per key: its content was sent.
    sent: Vec<bool>,
    scratch: Vec<InstrCost>,
}

impl<C: CostModel> Front<'_, '_, C> {
    fn flush(&mut self) {
        if self.batch.blocks.is_empty() && self.batch.events.is_empty() {
            return;
        }
        let next = self.back.try_recv().unwrap_or_default();
        let full = std::mem::replace(&mut self.batch, next);
        // A send fails only when the profiler's thread ended early (it panicked): the rest
        // of the trace is dropped and the panic surfaces when it is joined.
        if self.tx.as_ref().is_some_and(|tx| tx.send(full).is_err()) {
            self.tx = None;
        }
    }

    fn at(&self) -> u32 {
        self.batch.blocks.len() as u32
    }
}

impl<C: CostModel> BlockVisitor for Front<'_, '_, C> {
    fn module(&mut self, idx: ModuleIdx, module: &Module) {
        self.costs.module(idx, module);
        let at = self.at();
        self.batch
            .events
            .push((at, Event::Module(idx, module.clone())));
    }

    fn block(&mut self, b: &TraceBlock<'_>) {
        if b.instructions.is_empty() {
            // The profiler ignores it too.
            return;
        }
        self.costs.costs(b, &mut self.scratch);
        self.batch.costs.extend_from_slice(&self.scratch);
        let key = match b.key {
            Some(k) if k != LOOSE => {
                let i = k as usize;
                if self.sent.len() <= i {
                    self.sent.resize(i + 1, false);
                }
                if !self.sent[i] {
                    self.sent[i] = true;
                    let at = self.at();
                    self.batch.events.push((at, Event::Def(k, Content::of(b))));
                }
                k
            }
            _ => {
                self.batch.loose.push(Content::of(b));
                LOOSE
            }
        };
        self.batch.blocks.push(Blk {
            tid: b.tid,
            key,
            cost_end: self.batch.costs.len() as u32,
        });
        if self.batch.blocks.len() >= BATCH_BLOCKS {
            self.flush();
        }
    }

    fn end(&mut self, outcome: &RunOutcome) {
        let at = self.at();
        self.batch.events.push((at, Event::End(outcome.clone())));
        self.flush();
    }
}

/// Both sides on one thread (when no thread can be started).
struct Inline<'a, 'c, C: CostModel> {
    costs: &'c mut BlockCosts<'a, C>,
    prof: Profiler<'a>,
    scratch: Vec<InstrCost>,
}

impl<C: CostModel> BlockVisitor for Inline<'_, '_, C> {
    fn module(&mut self, idx: ModuleIdx, module: &Module) {
        self.costs.module(idx, module);
        self.prof.module(idx, module);
    }

    fn block(&mut self, b: &TraceBlock<'_>) {
        self.costs.costs(b, &mut self.scratch);
        self.prof.block_costed(b, &self.scratch);
    }

    fn end(&mut self, outcome: &RunOutcome) {
        self.prof.end(outcome);
    }
}

/// The profiler's side: replays batches into `prof`.
fn replay(prof: &mut Profiler<'_>, rx: Receiver<Batch>, back: SyncSender<Batch>) {
    let mut defs: Vec<Option<Content>> = Vec::new();
    for mut batch in rx {
        let mut events = std::mem::take(&mut batch.events).into_iter().peekable();
        let mut loose = std::mem::take(&mut batch.loose).into_iter();
        let mut from = 0usize;
        for (i, blk) in batch.blocks.iter().enumerate() {
            while let Some((_, ev)) = events.next_if(|(at, _)| *at as usize == i) {
                apply(prof, &mut defs, ev);
            }
            let to = blk.cost_end as usize;
            let costs = &batch.costs[from..to];
            from = to;
            if blk.key == LOOSE {
                let c = loose.next().expect("a loose block's content");
                prof.block_costed(&c.block(blk.tid, None), costs);
            } else {
                let c = defs[blk.key as usize]
                    .as_ref()
                    .expect("a key's content before its first block");
                prof.block_costed(&c.block(blk.tid, Some(blk.key)), costs);
            }
        }
        for (_, ev) in events {
            apply(prof, &mut defs, ev);
        }
        batch.clear();
        // The producer may be gone, or have enough spare batches: then this one is dropped.
        let _ = back.try_send(batch);
    }
}

fn apply(prof: &mut Profiler<'_>, defs: &mut Vec<Option<Content>>, ev: Event) {
    match ev {
        Event::Module(idx, m) => prof.module(idx, &m),
        Event::Def(k, c) => {
            let k = k as usize;
            if defs.len() <= k {
                defs.resize_with(k + 1, || None);
            }
            defs[k] = Some(c);
        }
        Event::End(o) => prof.end(&o),
    }
}

/// What [`profile_staged`] returns.
pub struct Staged<R, C> {
    /// What the trace's producer returned.
    pub result: R,
    /// The exact path profile.
    pub profile: PathProfile,
    /// The exact calling context tree.
    pub cct: Cct,
    /// The cost model after the run (e.g. its cache statistics).
    pub cost: C,
}

/// Profiles the block trace `trace` produces (it is handed the visitor to feed, e.g.
/// `|v| trace_qemu(cmd, opts, v)`) with the timing of `cost`, on two threads: `trace` and
/// the cost model run on the calling thread, the [`Profiler`] on another (see the module
/// documentation). A static cost model ([`CostModel::is_static`]: no cache simulation) is
/// priced once per block key by the profiler itself: then everything runs on the calling
/// thread. The profile and CCT are those of
/// `Profiler::with_cost_model(cfgs, opts, cost)` fed the same trace.
pub fn profile_staged<C: CostModel, R>(
    cfgs: &ProgramCfgs,
    opts: ProfilerOptions,
    cost: C,
    trace: impl FnOnce(&mut dyn BlockVisitor) -> R,
) -> Staged<R, C> {
    if cost.is_static() {
        // The profiler asks a static model once per trace block key (`Plans::static_cost`):
        // costing every block on the trace's thread and shipping the sums would be the
        // larger part of the work (on sort, `paths --cpi-model flat` took 60% more CPU
        // time on two threads than on one, and no less wall time).
        let mut prof = Profiler::with_cost_model(cfgs, opts, cost);
        let result = trace(&mut prof);
        let (profile, cct, cost) = prof.finish_with_cost();
        return Staged {
            result,
            profile,
            cct,
            cost,
        };
    }
    let mut costs = BlockCosts::new(cfgs, cost);
    let (tx, rx) = sync_channel::<Batch>(BATCHES_IN_FLIGHT);
    let (back_tx, back_rx) = sync_channel::<Batch>(BATCHES_IN_FLIGHT + 2);
    let (result, (profile, cct)) = std::thread::scope(|s| {
        let spawned = std::thread::Builder::new()
            .name("proftrust-profiler".into())
            .spawn_scoped(s, move || {
                let mut prof = Profiler::new(cfgs, opts);
                replay(&mut prof, rx, back_tx);
                prof.finish()
            });
        let Ok(profiler) = spawned else {
            // No second thread to be had: the same work on this one.
            let mut one = Inline {
                costs: &mut costs,
                prof: Profiler::new(cfgs, opts),
                scratch: Vec::new(),
            };
            let result = trace(&mut one);
            return (result, one.prof.finish());
        };
        let mut front = Front {
            costs: &mut costs,
            batch: Batch::default(),
            tx: Some(tx),
            back: back_rx,
            sent: Vec::new(),
            scratch: Vec::new(),
        };
        let result = trace(&mut front);
        // Blocks after the last `end` (a producer that never calls it) go too.
        front.flush();
        // Closes the channel: the profiler's thread finishes.
        drop(front);
        let out = match profiler.join() {
            Ok(out) => out,
            Err(panic) => std::panic::resume_unwind(panic),
        };
        (result, out)
    });
    Staged {
        result,
        profile,
        cct,
        cost: costs.into_cost_model(),
    }
}
