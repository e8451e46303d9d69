//! # proftrust-vpmu
//!
//! The virtual PMU: replays an exact block trace with a per-instruction cycle model and emits
//! the samples a hardware PMU with counter skid would (seed 000 §1).
//!
//! Per thread it keeps two counters, retired instructions and cycles. Instruction `I_k`
//! occupies the cycles `(t_{k-1}, t_k]`, `t_k - t_{k-1} = c_k` from the [`CycleModel`], plus,
//! with [`VpmuOptions::cache`] and a trace carrying data accesses, the latency of its accesses
//! in a simulated L1D + LLC ([`InstrTimer`], model in [`timer`](InstrTimer)).
//!
//! * **Instruction event**: the counter overflows when the `T`-th instruction `I_m` retires
//!   (at `t_m`). The sample is attributed to the first later instruction `I_{m'}` with
//!   `t_{m'} >= t_m + S`, i.e. `sum_{n=m+1}^{m'-1} c_n < S <= sum_{n=m+1}^{m'} c_n` — exactly
//!   the range of seed 000 §1.2 before eq. 1. `S = 0` keeps the sample on `I_m`.
//! * **Cycle event**: the counter overflows in cycle `t_o` (the `T`-th cycle); the sample goes
//!   to the first instruction with `t_k >= t_o + S` (with `S = 0`, the instruction executing
//!   in cycle `t_o`, so cycle samples are proportional to CPI).
//!
//! After each overflow the next period is `T`, or `T + U(0, T/8)` with randomisation (seed 001
//! §4). `S` is a constant or drawn per sample from a [`SkidDist`]; all random draws come from
//! one ChaCha8 generator seeded with [`VpmuOptions::seed`]. Optionally every sample carries an
//! LBR-like stack of the last 32 taken branches, most recent first, each with the cycles since
//! the previous taken branch.
//!
//! A taken branch is recognised between two consecutive instructions of a thread when the
//! first ends a trace block and either the block ended in a call / return / syscall or the
//! next instruction is not the fall-through (`next = last + len(last)`; when the length is
//! unknown, fall-through is assumed for `0 < next - last <= 15` in the same module).
//!
//! Output ([`Vpmu::finish`]): a [`SampleSet`] with events `instructions` and `cycles` (kinds
//! [`EventKind::Instructions`] / [`EventKind::Cycles`], name suffixed `:vpmu`); sample times are
//! the cycle counter read as nanoseconds of a 1 GHz clock; and the exact per-instruction
//! counts with their modelled cycles as an [`ExactProfile`] (extra cost `cycles`, and with a
//! cache `l1d_misses` and `llc_misses`).
//!
//! Entry points: [`Vpmu`] (a `BlockVisitor` that samples a block trace) and [`TraceCost`]
//! (the same timing as a cost model for path profiles):
//!
//! ```
//! use proftrust_model::{CostModel, Module, ModuleIdx, Svma, TraceBlock, TraceEnd};
//! use proftrust_vpmu::{CycleModel, TraceCost};
//!
//! let mut cost = TraceCost::new(CycleModel::flat(2), None); // 2 cycles each, no cache
//! cost.module(ModuleIdx(0), &Module::new("/bin/prog"));
//! let block = TraceBlock {
//!     tid: 1,
//!     module: Some(ModuleIdx(0)),
//!     instructions: &[Svma(0x10), Svma(0x14)],
//!     end: TraceEnd::Other,
//!     mem: &[],
//!     key: None,
//! };
//! let mut out = Vec::new();
//! cost.block_costs(&block, &mut out);
//! assert_eq!(out.iter().map(|c| c.cycles).sum::<u64>(), 4);
//! ```
#![warn(missing_docs)]
#![forbid(unsafe_code)]

mod cost;
mod cycles;
mod error;
mod ooo;
mod timer;

pub use error::VpmuError;

pub use cost::TraceCost;
pub use cycles::{
    class_costs, class_cycles, is_div_or_sqrt, ClassCycles, CostTable, CycleModel, StaticCost,
};
pub use ooo::{Rob, RobConfig, RobTiming, TipAttribution};
/// The cache geometry alone ([`CacheConfig::geometry`]), as the QEMU plugin takes it.
pub use proftrust_cachesim::Geometry as CacheGeometry;
pub use timer::{CacheConfig, CacheStats, InstrTimer, InstrTiming};

use proftrust_model::{
    Branch, EventDesc, EventKind, ExactProfile, InstrCount, Location, Module, ModuleIdx,
    ModuleTable, PeriodMode, RunOutcome, Sample, SampleSet, SamplingConfig, Svma, TraceBlock,
    TraceEnd,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rustc_hash::FxHashMap;
use std::collections::VecDeque;

/// How the skid of each sample is chosen, in cycles.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SkidDist {
    /// Always `S`.
    Constant(u64),
    /// Uniform integer in `[lo, hi]`.
    Uniform {
        /// Smallest skid.
        lo: u64,
        /// Largest skid.
        hi: u64,
    },
    /// Normal with this mean and standard deviation, rounded, negative values clamped to 0.
    Normal {
        /// Mean.
        mean: f64,
        /// Standard deviation.
        sd: f64,
    },
}

impl SkidDist {
    /// The mean skid in cycles (what `correct --skid` should be given).
    pub fn mean(&self) -> f64 {
        match *self {
            SkidDist::Constant(s) => s as f64,
            SkidDist::Uniform { lo, hi } => (lo + hi) as f64 / 2.0,
            SkidDist::Normal { mean, .. } => mean.max(0.0),
        }
    }
    fn draw(&self, rng: &mut ChaCha8Rng) -> u64 {
        match *self {
            SkidDist::Constant(s) => s,
            SkidDist::Uniform { lo, hi } => rng.gen_range(lo..=hi),
            SkidDist::Normal { mean, sd } => {
                let z: f64 = rng.sample(rand_distr::StandardNormal);
                (mean + sd * z).round().max(0.0) as u64
            }
        }
    }
}

/// How the virtual PMU times instructions and attributes a sample (docs/skid.md, "PMU
/// modes"). [`PmuMode::InOrder`] is the original model; the other four run on the
/// out-of-order approximation of [`Rob`] (commit cycles `c_k`, dispatch cycles `d_k`) and
/// follow the published semantics of four kinds of hardware sampling:
///
/// | mode | instruction event (overflow when `I_m` commits) | cycle event (overflow in cycle `t_o`) |
/// |---|---|---|
/// | `Interrupt` | the head of the ROB `S` cycles after `c_m`: the first `k > m` with `c_k >= c_m + S` (`S = 0`: `I_m`) | the head at `t_o + S`: the first `k` with `c_k >= t_o + S` |
/// | `Pebs` | `I_{m+1}` | `I_{h+1}`, `h` the head at `t_o` (first `k` with `c_k >= t_o`) |
/// | `Ibs` | `I_m`, the tagged op, exactly | the first instruction dispatched at or after `t_o` (`d_k >= t_o`) |
/// | `Tip` | `I_m` (no skid) | the instruction(s) committing in `t_o` (one drawn uniformly), else the head |
///
/// Sources: interrupt skid — the sample is taken where the program is interrupted, after the
/// overflow (seed 000 §1.2: "If the instruction counter overflow happens at `I_m`, and the
/// attributed instruction is `I_{m'}`, we can guarantee `m' > m`", skid `S` in cycles, "can
/// be measured for a specific machine" §2.1, no value given); `S` is drawn from
/// [`VpmuOptions::skid`]. PEBS — Intel SDM Vol. 3B §18 (precise event-based sampling): the
/// record is written after the overflowing instruction retires and holds the architectural
/// state, so its IP is that of the *next* instruction (the well-known off-by-one; the
/// `EventingIP` of later cores corrects it). IBS — AMD's instruction-based sampling tags
/// one op after a programmed count (ops or cycles) and records that op's own address when it
/// retires (AMD Family 10h BKDG, "Instruction Based Sampling"; Drongowski, AMD 2007); the
/// count is randomised so tags do not alias with loops: here every period is drawn uniformly
/// from `[T - T/2, T + T/2]` (mean `T`; the range is our choice). TIP — Gottschall, Eeckhout,
/// Jahre, MICRO 2021 ([`TipAttribution`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PmuMode {
    /// The original model: in-order timing (instruction `k` occupies `(t_{k-1}, t_k]`), the
    /// sample lands `S` cycles after the overflow (module documentation). Default.
    #[default]
    InOrder,
    /// Interrupt-based sampling with skid on the out-of-order model.
    Interrupt,
    /// Precise sampling (PEBS): the instruction after the overflowing one.
    Pebs,
    /// Tagged-op sampling (IBS-like): a random op every `T` on average, attributed exactly.
    Ibs,
    /// The time-proportional oracle (TIP).
    Tip,
}

impl proftrust_model::named::Named for PmuMode {
    const ALL: &'static [(Self, &'static str, &'static str)] = &[
        (PmuMode::InOrder, "in-order", "The original model: in-order timing, the sample lands --skid cycles after the overflow"),
        (PmuMode::Interrupt, "interrupt", "Interrupt-based sampling on the out-of-order model: the sample names the instruction at the head of the reorder buffer --skid cycles after the overflow"),
        (PmuMode::Pebs, "pebs", "Precise sampling (PEBS): the instruction after the overflowing one"),
        (PmuMode::Ibs, "ibs", "Tagged-op sampling (IBS-like): one op every --period on average (randomised), its own address"),
        (PmuMode::Tip, "tip", "Time-proportional oracle (TIP): each sampled cycle goes to the instruction committing in it, else to the head of the reorder buffer; --exact then carries `tip_cycles`"),
    ];
}
proftrust_model::named_from_str!(PmuMode);

impl PmuMode {
    /// Whether the mode runs on the out-of-order model.
    pub fn out_of_order(self) -> bool {
        self != PmuMode::InOrder
    }
}

/// Which events the virtual PMU samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VpmuEvents {
    /// Sample retired instructions.
    pub instructions: bool,
    /// Sample cycles.
    pub cycles: bool,
}

/// Options of the virtual PMU.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct VpmuOptions {
    /// Instruction-event period `T`. Default 10007 (a prime, so samples spread evenly over a
    /// loop, seed 000 §1.1).
    pub instruction_period: u64,
    /// Cycle-event period. Default 10007.
    pub cycle_period: u64,
    /// Add `U(0, T/8)` to every period (seed 001 §4). Default false.
    pub randomize: bool,
    /// Skid in cycles. Default constant 0.
    pub skid: SkidDist,
    /// Skid of the cycle event; `None` = the same as `skid`. Default `None`.
    pub cycle_skid: Option<SkidDist>,
    /// Seed of every random draw. Default 0.
    pub seed: u64,
    /// Events sampled. Default both. Neither is allowed with [`VpmuOptions::exact`]: the
    /// replay then only counts and times (the time truth of `audit --truth-weight
    /// time-model`).
    pub events: VpmuEvents,
    /// Timing model and attribution rule. Default [`PmuMode::InOrder`].
    pub mode: PmuMode,
    /// The out-of-order model's geometry (modes other than [`PmuMode::InOrder`]). Default
    /// [`RobConfig::default`].
    pub rob: RobConfig,
    /// Record LBR stacks (last 32 taken branches). Default false.
    pub lbr: bool,
    /// Collect exact per-instruction counts and cycles. Default true.
    pub exact: bool,
    /// Simulate L1D and LLC on the trace's data accesses (the trace must carry them:
    /// `QemuOptions::trace_memory`); each access adds its latency to its instruction's
    /// cycles. Default `None`: static costs only.
    pub cache: Option<CacheConfig>,
    /// Keep at most this many samples; later ones are counted ([`Vpmu::dropped_samples`])
    /// but not kept, so a tiny period on a long run cannot exhaust memory. Default `None`:
    /// no limit.
    pub max_samples: Option<u64>,
}

impl Default for VpmuOptions {
    fn default() -> Self {
        VpmuOptions {
            instruction_period: 10007,
            cycle_period: 10007,
            randomize: false,
            skid: SkidDist::Constant(0),
            cycle_skid: None,
            seed: 0,
            events: VpmuEvents {
                instructions: true,
                cycles: true,
            },
            mode: PmuMode::InOrder,
            rob: RobConfig::default(),
            lbr: false,
            exact: true,
            cache: None,
            max_samples: None,
        }
    }
}

/// LBR depth.
pub const LBR_DEPTH: usize = 32;

/// Name of the exact profile's extra cost holding each instruction's TIP cycles under the
/// out-of-order modes ([`TipAttribution`], rounded per instruction): the time truth of
/// `audit --truth-weight time-model`.
pub const TIP_CYCLES: &str = "tip_cycles";

#[derive(Debug, Clone, Copy, Default)]
struct Slot {
    len: u8,
    count: u64,
    total_cycles: u64,
    l1_misses: u64,
    llc_misses: u64,
    /// TIP cycles (out-of-order modes).
    tip_cycles: f64,
}

/// Where a sample of the out-of-order modes lands (see [`PmuMode`]).
#[derive(Debug, Clone, Copy)]
enum Land {
    /// The first instruction committing at or after this cycle.
    Commit(u64),
    /// The next instruction.
    Next,
    /// The first instruction dispatched at or after this cycle.
    Dispatch(u64),
    /// One of the instructions committing in this cycle, drawn uniformly.
    TipGroup(u64),
}

#[derive(Debug)]
struct OooPending {
    event: u16,
    period: u64,
    land: Land,
}

#[derive(Debug)]
struct Pending {
    event: u16,
    land_at: u64,
    period: u64,
}

#[derive(Debug)]
struct Thread {
    instr_left: u64,
    instr_period: u64,
    cycle_left: u64,
    cycle_period: u64,
    now: u64,
    pending: Vec<Pending>,
    lbr: VecDeque<Branch>,
    last_branch_cycle: u64,
    prev: Option<(Location, u8, bool, TraceEnd)>,
    /// Out-of-order modes: the ROB, the TIP attribution, samples not yet landed, how many of
    /// them wait for a commit group, the previous commit cycle.
    rob: Rob,
    tip: TipAttribution<Location>,
    ooo_pending: Vec<OooPending>,
    tip_waiting: usize,
    prev_commit: u64,
    /// Completion cycle of the latest traced load (dependent loads wait for it).
    last_load_done: u64,
}

/// The virtual PMU, a [`proftrust_model::BlockVisitor`].
#[derive(Debug)]
pub struct Vpmu {
    opts: VpmuOptions,
    model: CycleModel,
    timer: InstrTimer,
    timing: Vec<InstrTiming>,
    rng: ChaCha8Rng,
    modules: ModuleTable,
    /// Trace module index -> our index (a flat array: looked up once per executed block).
    module_map: Vec<Option<ModuleIdx>>,
    /// Per (our) module: the cost table, when one matched.
    module_costs: FxHashMap<ModuleIdx, usize>,
    /// Per instruction seen (only kept with `--exact` or LBR, the two uses of a slot): its
    /// static length and counts, indexed by [`Vpmu::slot_of`].
    slots: Vec<(Location, Slot)>,
    /// Instruction -> index in `slots`.
    slot_of: FxHashMap<Location, u32>,
    /// Per trace block key ([`TraceBlock::key`]): the slot of each of its instructions, so
    /// a keyed block's instructions are charged by index, not by one hash lookup each
    /// (that lookup was ~half of a replay).
    keyed_slots: Vec<Option<Box<[u32]>>>,
    /// Scratch: the slots of an unkeyed block.
    block_slots: Vec<u32>,
    /// Per thread id, but for the current thread, kept in `cur` (blocks come in long runs
    /// of one thread); boxed, so switching threads moves a pointer, not the ROB and its
    /// queues.
    threads: FxHashMap<u32, Box<Thread>>,
    cur: Option<(u32, Box<Thread>)>,
    /// Step every instruction even where a block could be stepped whole (tests compare the
    /// two).
    per_instruction: bool,
    samples: Vec<Sample>,
    dropped: u64,
    pid: Option<u32>,
    outcome: Option<RunOutcome>,
    ev_instr: Option<u16>,
    ev_cycles: Option<u16>,
    /// Scratch: samples landed by one instruction; a commit group.
    landed: Vec<(u16, u64, Location)>,
    group_buf: Vec<Location>,
}

impl Vpmu {
    /// A virtual PMU with options and cycle model.
    pub fn new(opts: VpmuOptions, model: CycleModel) -> Result<Vpmu, VpmuError> {
        if opts.events.instructions && opts.instruction_period == 0
            || opts.events.cycles && opts.cycle_period == 0
        {
            return Err(VpmuError::InvalidOptions {
                what: "a virtual PMU period of 0".into(),
                fix: "give a period >= 1 (a prime such as 10007 is best)",
            });
        }
        if !opts.events.instructions && !opts.events.cycles && !opts.exact {
            return Err(VpmuError::InvalidOptions {
                what: "no event to sample and no exact profile to collect".into(),
                fix: "enable the instruction event, the cycle event, or the exact profile",
            });
        }
        if opts.rob.entries == 0 || opts.rob.width == 0 {
            return Err(VpmuError::InvalidOptions {
                what: format!(
                    "a reorder buffer of {} entries and width {}",
                    opts.rob.entries, opts.rob.width
                ),
                fix: "give at least 1 entry and a width of at least 1",
            });
        }
        if let Some(c) = &opts.cache {
            c.check()?;
        }
        for d in [Some(opts.skid), opts.cycle_skid].into_iter().flatten() {
            let bad = match d {
                SkidDist::Uniform { lo, hi } => lo > hi,
                SkidDist::Normal { mean, sd } => !(mean.is_finite() && sd.is_finite() && sd >= 0.0),
                SkidDist::Constant(_) => false,
            };
            if bad {
                return Err(VpmuError::InvalidOptions {
                    what: format!("skid distribution {d:?}"),
                    fix: "use lo <= hi for uniform, a finite mean and sd >= 0 for normal",
                });
            }
        }
        let mut n = 0u16;
        let mut next = |on: bool| {
            on.then(|| {
                n += 1;
                n - 1
            })
        };
        let ev_instr = next(opts.events.instructions);
        let ev_cycles = next(opts.events.cycles);
        Ok(Vpmu {
            rng: ChaCha8Rng::seed_from_u64(opts.seed),
            timer: InstrTimer::new(model.clone(), opts.cache.clone()),
            timing: Vec::new(),
            opts,
            model,
            modules: ModuleTable::default(),
            module_map: Vec::new(),
            module_costs: FxHashMap::default(),
            slots: Vec::new(),
            slot_of: FxHashMap::default(),
            keyed_slots: Vec::new(),
            block_slots: Vec::new(),
            threads: FxHashMap::default(),
            cur: None,
            per_instruction: false,
            samples: Vec::new(),
            dropped: 0,
            pid: None,
            outcome: None,
            ev_instr,
            ev_cycles,
            landed: Vec::new(),
            group_buf: Vec::new(),
        })
    }

    /// The next period: under [`PmuMode::Ibs`] uniform in `[T - T/2, T + T/2]`, else `T`
    /// or, randomised, `T + U(0, T/8)`.
    fn period(&mut self, t: u64) -> u64 {
        if self.opts.mode == PmuMode::Ibs && t >= 2 {
            return self.rng.gen_range(t - t / 2..=t + t / 2);
        }
        Self::next_period(&mut self.rng, t, self.opts.randomize)
    }

    fn next_period(rng: &mut ChaCha8Rng, t: u64, randomize: bool) -> u64 {
        if randomize && t >= 8 {
            t + rng.gen_range(0..=t / 8)
        } else {
            t
        }
    }

    /// The slot of instruction `loc`, created on first sight with its static length.
    fn slot_index(&mut self, loc: Location) -> u32 {
        if let Some(&i) = self.slot_of.get(&loc) {
            return i;
        }
        let cost = loc
            .module
            .and_then(|m| self.module_costs.get(&m))
            .and_then(|&t| self.model.tables[t].costs.get(&loc.svma.0))
            .copied()
            .unwrap_or(StaticCost {
                cycles: self.model.default_cycles,
                len: 0,
            });
        let i = self.slots.len() as u32;
        self.slots.push((
            loc,
            Slot {
                len: cost.len,
                ..Slot::default()
            },
        ));
        self.slot_of.insert(loc, i);
        i
    }

    /// The instruction's length from its slot (0 without one: neither `--exact` nor LBR
    /// asked for slots), and with `--exact` its execution charged to the slot.
    #[inline]
    fn slot_step(&mut self, slot: Option<u32>, timing: &InstrTiming) -> u8 {
        let Some(i) = slot else { return 0 };
        let s = &mut self.slots[i as usize].1;
        if self.opts.exact {
            s.count += 1;
            s.total_cycles += timing.cycles as u64;
            s.l1_misses += timing.l1_misses as u64;
            s.llc_misses += timing.llc_misses as u64;
        }
        s.len
    }

    /// Fills `self.block_slots` with the slots of `b`'s instructions (unkeyed blocks), or
    /// makes sure the key's slots exist (keyed blocks). False when no slots are kept.
    fn prepare_slots(&mut self, b: &TraceBlock<'_>, module: Option<ModuleIdx>) -> bool {
        if !(self.opts.exact || self.opts.lbr) {
            return false;
        }
        let loc = |a: Svma| Location { module, svma: a };
        match b.key {
            Some(k) => {
                let k = k as usize;
                if self.keyed_slots.len() <= k {
                    self.keyed_slots.resize(k + 1, None);
                }
                if self.keyed_slots[k].is_none() {
                    let v: Box<[u32]> = b
                        .instructions
                        .iter()
                        .map(|&a| self.slot_index(loc(a)))
                        .collect();
                    self.keyed_slots[k] = Some(v);
                }
            }
            None => {
                let mut v = std::mem::take(&mut self.block_slots);
                v.clear();
                v.extend(b.instructions.iter().map(|&a| self.slot_index(loc(a))));
                self.block_slots = v;
            }
        }
        true
    }

    /// Whether no counter of `th` overflows inside a block of `n` instructions and `total`
    /// cycles: the instruction counter (at least 1 left) overflows on the instruction that
    /// brings it to 0, the cycle counter (at least 1 left) when the block's running cycle sum
    /// reaches it ([`Vpmu::step`]'s rules, summed over the block).
    #[inline]
    fn counters_quiet(&self, th: &Thread, n: usize, total: u64) -> bool {
        (self.ev_instr.is_none() || (n as u64) < th.instr_left)
            && (self.ev_cycles.is_none() || total < th.cycle_left)
    }

    /// A block stepped whole: its cycles added, the counters counted down.
    #[inline]
    fn advance_whole(&self, th: &mut Thread, n: usize, total: u64) {
        th.now += total;
        if self.ev_cycles.is_some() {
            th.cycle_left -= total;
        }
        if self.ev_instr.is_some() {
            th.instr_left -= n as u64;
        }
    }

    /// A block stepped whole under LBR: its first and last instructions (of lengths
    /// `lens`) go through [`Vpmu::track_branch`], as the per-instruction steps would pass
    /// them (the ones between record nothing and are overwritten as the previous one).
    fn feed_lbr(
        &self,
        th: &mut Thread,
        b: &TraceBlock<'_>,
        module: Option<ModuleIdx>,
        lens: (u8, u8),
    ) {
        let n = b.instructions.len();
        let at = |a: Svma| Location { module, svma: a };
        self.track_branch(th, at(b.instructions[0]), lens.0, (n == 1).then_some(b.end));
        if n > 1 {
            self.track_branch(th, at(b.instructions[n - 1]), lens.1, Some(b.end));
        }
    }

    /// Puts the current thread back among the others.
    fn park_current(&mut self) {
        if let Some((t, th)) = self.cur.take() {
            self.threads.insert(t, th);
        }
    }

    fn new_thread(&mut self) -> Thread {
        let ip = self.period(self.opts.instruction_period);
        let cp = self.period(self.opts.cycle_period);
        Thread {
            instr_left: ip,
            instr_period: ip,
            cycle_left: cp,
            cycle_period: cp,
            now: 0,
            pending: Vec::new(),
            lbr: VecDeque::with_capacity(LBR_DEPTH),
            last_branch_cycle: 0,
            prev: None,
            rob: Rob::new(self.opts.rob),
            tip: TipAttribution::default(),
            ooo_pending: Vec::new(),
            tip_waiting: 0,
            prev_commit: 0,
            last_load_done: 0,
        }
    }

    fn emit(&mut self, th: &Thread, tid: u32, event: u16, period: u64, ip: Location) {
        if self
            .opts
            .max_samples
            .is_some_and(|m| self.samples.len() as u64 >= m)
        {
            self.dropped += 1;
            return;
        }
        self.samples.push(Sample {
            event,
            pid: self.pid.unwrap_or(tid),
            tid,
            time: th.now,
            cpu: 0,
            period,
            ip,
            callchain: Vec::new(),
            branches: if self.opts.lbr {
                th.lbr.iter().copied().collect()
            } else {
                Vec::new()
            },
        });
    }

    /// LBR: records a taken branch into `loc` (see the module documentation).
    fn track_branch(
        &self,
        th: &mut Thread,
        loc: Location,
        len: u8,
        end_of_block: Option<TraceEnd>,
    ) {
        if !self.opts.lbr {
            return;
        }
        if let Some((from, len, was_end, how)) = th.prev {
            if was_end {
                let fall = if len > 0 {
                    from.module == loc.module && loc.svma.0 == from.svma.0 + len as u64
                } else {
                    from.module == loc.module
                        && loc.svma.0 > from.svma.0
                        && loc.svma.0 - from.svma.0 <= 15
                };
                let taken = !matches!(how, TraceEnd::Other) || !fall;
                if taken {
                    if th.lbr.len() == LBR_DEPTH {
                        th.lbr.pop_back();
                    }
                    th.lbr.push_front(Branch {
                        from,
                        to: loc,
                        mispredicted: false,
                        predicted_known: false,
                        cycles: (th.now - th.last_branch_cycle).min(u32::MAX as u64) as u32,
                    });
                    th.last_branch_cycle = th.now;
                }
            }
        }
        th.prev = Some((
            loc,
            len,
            end_of_block.is_some(),
            end_of_block.unwrap_or(TraceEnd::Other),
        ));
    }

    /// One instruction under an out-of-order mode ([`PmuMode`]): times it in the thread's
    /// ROB, charges the TIP cycles made final, lands waiting samples, counts both events.
    fn step_ooo(
        &mut self,
        th: &mut Thread,
        tid: u32,
        loc: Location,
        slot: Option<u32>,
        timing: InstrTiming,
        end_of_block: Option<TraceEnd>,
    ) {
        let len = self.slot_step(slot, &timing);
        self.track_branch(th, loc, len, end_of_block);
        let lat = timing.cycles as u64;
        let ready = if timing.dependent {
            th.last_load_done
        } else {
            0
        };
        let rt = th.rob.push_after(lat, ready);
        if timing.loads {
            th.last_load_done = rt.complete;
        }
        let c = rt.commit;
        th.now = c;
        let mut landed = std::mem::take(&mut self.landed);
        landed.clear();
        // Samples waiting for a later instruction.
        let mut k = 0;
        while k < th.ooo_pending.len() {
            let hit = match th.ooo_pending[k].land {
                Land::Next => true,
                Land::Commit(t) => c >= t,
                Land::Dispatch(t) => rt.dispatch >= t,
                Land::TipGroup(_) => false,
            };
            if hit {
                let p = th.ooo_pending.swap_remove(k);
                landed.push((p.event, p.period, loc));
            } else {
                k += 1;
            }
        }
        // TIP: the cycles this commit makes final; a commit group that ended lands the
        // cycle samples taken in its cycle.
        if let Some(cyc) = self.tip_advance(th, Some((loc, c))) {
            self.land_group(th, cyc, &mut landed);
        }
        let mode = self.opts.mode;
        // Cycle counter over the cycles (prev_commit, c].
        if let Some(ev) = self.ev_cycles {
            let elapsed = c - th.prev_commit;
            let mut consumed = 0u64;
            while elapsed > 0 && elapsed - consumed >= th.cycle_left {
                consumed += th.cycle_left;
                let t_o = th.prev_commit + consumed;
                let period = th.cycle_period;
                let mut wait = |land| {
                    th.ooo_pending.push(OooPending {
                        event: ev,
                        period,
                        land,
                    })
                };
                match mode {
                    PmuMode::Interrupt => {
                        let s = self
                            .opts
                            .cycle_skid
                            .unwrap_or(self.opts.skid)
                            .draw(&mut self.rng);
                        if c >= t_o + s {
                            landed.push((ev, period, loc));
                        } else {
                            wait(Land::Commit(t_o + s));
                        }
                    }
                    // This instruction is the head at t_o; the sample names the next one.
                    PmuMode::Pebs => wait(Land::Next),
                    PmuMode::Ibs => {
                        if rt.dispatch >= t_o {
                            landed.push((ev, period, loc));
                        } else {
                            wait(Land::Dispatch(t_o));
                        }
                    }
                    PmuMode::Tip | PmuMode::InOrder => {
                        if t_o < c {
                            landed.push((ev, period, loc));
                        } else {
                            wait(Land::TipGroup(c));
                            th.tip_waiting += 1;
                        }
                    }
                }
                th.cycle_period = self.period(self.opts.cycle_period);
                th.cycle_left = th.cycle_period;
            }
            th.cycle_left -= elapsed - consumed;
        }
        // Instruction counter: overflows when this instruction commits.
        if let Some(ev) = self.ev_instr {
            th.instr_left -= 1;
            if th.instr_left == 0 {
                let period = th.instr_period;
                match mode {
                    PmuMode::Interrupt => {
                        let s = self.opts.skid.draw(&mut self.rng);
                        if s == 0 {
                            landed.push((ev, period, loc));
                        } else {
                            th.ooo_pending.push(OooPending {
                                event: ev,
                                period,
                                land: Land::Commit(c + s),
                            });
                        }
                    }
                    PmuMode::Pebs => th.ooo_pending.push(OooPending {
                        event: ev,
                        period,
                        land: Land::Next,
                    }),
                    PmuMode::Ibs | PmuMode::Tip | PmuMode::InOrder => {
                        landed.push((ev, period, loc))
                    }
                }
                th.instr_period = self.period(self.opts.instruction_period);
                th.instr_left = th.instr_period;
            }
        }
        th.prev_commit = c;
        for &(ev, period, l) in &landed {
            self.emit(th, tid, ev, period, l);
        }
        self.landed = landed;
    }

    /// Lands the cycle samples waiting for the commit group of cycle `cyc` (in
    /// `self.group_buf`) on members drawn uniformly.
    fn land_group(&mut self, th: &mut Thread, cyc: u64, landed: &mut Vec<(u16, u64, Location)>) {
        let mut k = 0;
        while k < th.ooo_pending.len() {
            if matches!(th.ooo_pending[k].land, Land::TipGroup(t) if t <= cyc) {
                let p = th.ooo_pending.swap_remove(k);
                th.tip_waiting -= 1;
                let n = self.group_buf.len();
                let at = if n > 1 { self.rng.gen_range(0..n) } else { 0 };
                if let Some(&l) = self.group_buf.get(at) {
                    landed.push((p.event, p.period, l));
                }
            } else {
                k += 1;
            }
        }
    }

    /// Feeds the thread's TIP attribution one commit (`Some((instruction, cycle))`) or the end
    /// of the run (`None`): the cycles it makes final go to the instructions' `tip_cycles`
    /// (with `--exact`); when samples wait for a commit group, returns the cycle of the group
    /// that ended, its instructions left in `group_buf`.
    fn tip_advance(&mut self, th: &mut Thread, commit: Option<(Location, u64)>) -> Option<u64> {
        let want_group = th.tip_waiting > 0;
        let exact = self.opts.exact;
        let (slots, slot_of) = (&mut self.slots, &self.slot_of);
        let group_buf = &mut self.group_buf;
        let mut ended = None;
        let mut charge = |l: Location, x: f64| {
            if exact {
                if let Some(&i) = slot_of.get(&l) {
                    slots[i as usize].1.tip_cycles += x;
                }
            }
        };
        let mut on_group_end = |cyc: u64, g: &[Location]| {
            if want_group {
                ended = Some(cyc);
                group_buf.clear();
                group_buf.extend_from_slice(g);
            }
        };
        match commit {
            Some((loc, c)) => th.tip.push(loc, c, &mut charge, &mut on_group_end),
            None => th.tip.flush(&mut charge, &mut on_group_end),
        }
        ended
    }

    /// Out-of-order modes, end of the replay: charges each thread's last commit group and
    /// lands the samples taken in its cycle.
    fn end_threads(&mut self) {
        if !self.opts.mode.out_of_order() {
            return;
        }
        self.park_current();
        let mut tids: Vec<u32> = self.threads.keys().copied().collect();
        tids.sort_unstable();
        for tid in tids {
            let Some(mut th) = self.threads.remove(&tid) else {
                continue;
            };
            if let Some(cyc) = self.tip_advance(&mut th, None) {
                let mut landed = Vec::new();
                self.land_group(&mut th, cyc, &mut landed);
                for (ev, period, l) in landed {
                    self.emit(&th, tid, ev, period, l);
                }
            }
            self.threads.insert(tid, th);
        }
    }

    fn step(
        &mut self,
        th: &mut Thread,
        tid: u32,
        loc: Location,
        slot: Option<u32>,
        timing: InstrTiming,
        end_of_block: Option<TraceEnd>,
    ) {
        let len = self.slot_step(slot, &timing);
        let c = timing.cycles as u64;
        self.track_branch(th, loc, len, end_of_block);
        let start = th.now;
        let end = start + c;
        th.now = end;
        // Samples whose skid expires by this instruction's retirement land on it.
        if !th.pending.is_empty() {
            let mut k = 0;
            while k < th.pending.len() {
                if th.pending[k].land_at <= end {
                    let p = th.pending.swap_remove(k);
                    self.emit(th, tid, p.event, p.period, loc);
                } else {
                    k += 1;
                }
            }
        }
        // Cycle counter: possibly several overflows inside one long instruction.
        if let Some(ev) = self.ev_cycles {
            let mut consumed = 0u64;
            while c - consumed >= th.cycle_left && c > 0 {
                consumed += th.cycle_left;
                let t_o = start + consumed;
                let s = self
                    .opts
                    .cycle_skid
                    .unwrap_or(self.opts.skid)
                    .draw(&mut self.rng);
                let period = th.cycle_period;
                if t_o + s <= end {
                    self.emit(th, tid, ev, period, loc);
                } else {
                    th.pending.push(Pending {
                        event: ev,
                        land_at: t_o + s,
                        period,
                    });
                }
                th.cycle_period = self.period(self.opts.cycle_period);
                th.cycle_left = th.cycle_period;
            }
            th.cycle_left -= c - consumed;
        }
        // Instruction counter.
        if let Some(ev) = self.ev_instr {
            th.instr_left -= 1;
            if th.instr_left == 0 {
                let s = self.opts.skid.draw(&mut self.rng);
                let period = th.instr_period;
                if s == 0 {
                    self.emit(th, tid, ev, period, loc);
                } else {
                    th.pending.push(Pending {
                        event: ev,
                        land_at: end + s,
                        period,
                    });
                }
                th.instr_period = self.period(self.opts.instruction_period);
                th.instr_left = th.instr_period;
            }
        }
    }

    /// Samples taken so far.
    pub fn sample_count(&self) -> usize {
        self.samples.len()
    }

    /// Samples taken beyond [`VpmuOptions::max_samples`] and not kept.
    pub fn dropped_samples(&self) -> u64 {
        self.dropped
    }

    /// Totals of the cache simulation so far (`None` without [`VpmuOptions::cache`]).
    pub fn cache_stats(&self) -> Option<CacheStats> {
        self.timer.cache_stats()
    }

    /// Ends the replay: the sample set (pending samples of a thread that ended are dropped,
    /// as a PMI after exit would be) and, when [`VpmuOptions::exact`], the exact profile.
    pub fn finish(mut self) -> (SampleSet, Option<ExactProfile>) {
        self.end_threads();
        let mode = self.opts.mode;
        let cfg = |t: u64| SamplingConfig {
            period: PeriodMode::Fixed(t),
            randomize_max: if mode == PmuMode::Ibs {
                Some(t / 2)
            } else {
                self.opts.randomize.then_some(t / 8)
            },
            precise: match mode {
                PmuMode::Pebs | PmuMode::Ibs => 2,
                PmuMode::Tip => 3,
                PmuMode::InOrder | PmuMode::Interrupt => 0,
            },
            seed: Some(self.opts.seed),
            user_only: true,
            callchain: false,
            branch_stack: self.opts.lbr,
        };
        let mut events = Vec::new();
        if self.ev_instr.is_some() {
            events.push(EventDesc {
                name: "instructions:vpmu".into(),
                kind: EventKind::Instructions,
                config: cfg(self.opts.instruction_period),
            });
        }
        if self.ev_cycles.is_some() {
            events.push(EventDesc {
                name: "cycles:vpmu".into(),
                kind: EventKind::Cycles,
                config: cfg(self.opts.cycle_period),
            });
        }
        let cache = self.timer.has_cache();
        let ooo = mode.out_of_order();
        let exact = self.opts.exact.then(|| {
            let mut v: Vec<(Location, Slot)> = self
                .slots
                .iter()
                .filter(|(_, s)| s.count > 0)
                .copied()
                .collect();
            v.sort_by_key(|(l, _)| *l);
            let mut e = ExactProfile {
                modules: self.modules.clone(),
                instructions: v
                    .iter()
                    .map(|(l, s)| InstrCount {
                        loc: *l,
                        count: s.count,
                    })
                    .collect(),
                extra_costs: v
                    .iter()
                    .map(|(_, s)| {
                        let mut v = vec![s.total_cycles];
                        if cache {
                            v.extend([s.l1_misses, s.llc_misses]);
                        }
                        if ooo {
                            v.push(s.tip_cycles.round() as u64);
                        }
                        v
                    })
                    .collect(),
                extra_cost_names: {
                    let mut v = vec!["cycles".to_string()];
                    if cache {
                        v.extend(["l1d_misses".into(), "llc_misses".into()]);
                    }
                    if ooo {
                        v.push(TIP_CYCLES.into());
                    }
                    v
                },
                backend: "vpmu".into(),
                backend_detail: "virtual PMU replay of an exact block trace".into(),
                outcome: self.outcome.clone(),
                ..ExactProfile::default()
            };
            e.total_instructions = e.instructions.iter().map(|i| i.count).sum();
            e
        });
        let set = SampleSet {
            modules: self.modules,
            events,
            samples: self.samples,
            lost: 0,
            command: Vec::new(),
            outcome: self.outcome,
            // The virtual counters count every instruction of the run: never throttled or
            // multiplexed, nothing to report.
            health: proftrust_model::RecordingHealth::default(),
            threads: Vec::new(),
            forks: Vec::new(),
            kernel_symbols: Vec::new(),
        };
        (set, exact)
    }
}

impl proftrust_model::BlockVisitor for Vpmu {
    fn module(&mut self, idx: ModuleIdx, module: &Module) {
        self.timer.module(idx, module);
        let ours = self.modules.intern(module.clone());
        let i = idx.0 as usize;
        if self.module_map.len() <= i {
            self.module_map.resize(i + 1, None);
        }
        self.module_map[i] = Some(ours);
        if let Some(t) = self.model.table_for(module) {
            self.module_costs.insert(ours, t);
        }
    }

    fn block(&mut self, b: &TraceBlock<'_>) {
        if self.pid.is_none() {
            self.pid = Some(b.tid);
        }
        let module = b.module.map(|m| {
            self.module_map
                .get(m.0 as usize)
                .copied()
                .flatten()
                .unwrap_or(m)
        });
        let mut th = match self.cur.take() {
            Some((t, th)) if t == b.tid => th,
            other => {
                if let Some((t, th)) = other {
                    self.threads.insert(t, th);
                }
                match self.threads.remove(&b.tid) {
                    Some(t) => t,
                    None => Box::new(self.new_thread()),
                }
            }
        };
        let n = b.instructions.len();
        let ooo = self.opts.mode.out_of_order();
        let whole = !ooo && !self.per_instruction && th.pending.is_empty();
        // A keyed block's cycles are its per-key static total plus, with a cache, the
        // latencies of the levels its accesses were served at (known when the plugin
        // simulated the caches): a block stepped whole without `--exact` then needs no
        // timing of its instructions.
        let fixed = b
            .key
            .filter(|_| whole && !self.opts.exact)
            .and_then(|k| Some((k as usize, self.timer.block_cycles(b)?)));
        if let Some((k, (total, stats))) = fixed {
            if self.counters_quiet(&th, n, total) {
                self.timer.add_stats(&stats);
                if self.opts.lbr && self.prepare_slots(b, module) {
                    let ks = self.keyed_slots[k].as_deref().expect("prepared above");
                    let lens = (
                        self.slots[ks[0] as usize].1.len,
                        self.slots[ks[n - 1] as usize].1.len,
                    );
                    self.feed_lbr(&mut th, b, module, lens);
                }
                self.advance_whole(&mut th, n, total);
                self.cur = Some((b.tid, th));
                return;
            }
        }
        let mut timing = std::mem::take(&mut self.timing);
        self.timer.time_block(b, &mut timing);
        let total: u64 = timing.iter().map(|t| t.cycles as u64).sum();
        let with_slots = self.prepare_slots(b, module);
        let (keyed, unkeyed) = (
            std::mem::take(&mut self.keyed_slots),
            std::mem::take(&mut self.block_slots),
        );
        let slots: &[u32] = match b.key {
            _ if !with_slots => &[],
            Some(k) => keyed[k as usize].as_deref().expect("prepared above"),
            None => &unkeyed,
        };
        if whole && self.counters_quiet(&th, n, total) {
            // In order, nothing waiting to land and no counter overflowing inside the block:
            // the per-instruction steps would only add up the cycles, count down the counters,
            // charge `--exact`'s slots and pass the block's first and last instructions to the
            // LBR (only a block's first instruction can follow a taken branch; the last one is
            // what the next block's first compares with), so do that per block.
            let mut lens = (0u8, 0u8);
            for (k, (&i, t)) in slots.iter().zip(&timing).enumerate() {
                let len = self.slot_step(Some(i), t);
                if k == 0 {
                    lens.0 = len;
                }
                lens.1 = len;
            }
            if self.opts.lbr {
                self.feed_lbr(&mut th, b, module, lens);
            }
            self.advance_whole(&mut th, n, total);
        } else {
            for (k, (&Svma(a), &t)) in b.instructions.iter().zip(&timing).enumerate() {
                let loc = Location {
                    module,
                    svma: Svma(a),
                };
                let slot = slots.get(k).copied();
                let end = (k + 1 == n).then_some(b.end);
                if ooo {
                    self.step_ooo(&mut th, b.tid, loc, slot, t, end);
                } else {
                    self.step(&mut th, b.tid, loc, slot, t, end);
                }
            }
        }
        self.block_slots = unkeyed;
        self.keyed_slots = keyed;
        self.timing = timing;
        self.cur = Some((b.tid, th));
    }

    fn end(&mut self, outcome: &RunOutcome) {
        self.outcome = Some(outcome.clone());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proftrust_model::{BlockVisitor, TraceEvent};

    /// Replays `reps` passes of a one-block loop at 0x100, 0x104, ... (4-byte instructions)
    /// with the given CPIs.
    fn run_loop(cpi: &[u32], reps: usize, opts: VpmuOptions) -> (SampleSet, ExactProfile) {
        let mut table = CostTable::new("loop");
        for (k, &c) in cpi.iter().enumerate() {
            table
                .costs
                .insert(0x100 + 4 * k as u64, StaticCost { cycles: c, len: 4 });
        }
        let model = CycleModel {
            default_cycles: 1,
            tables: vec![table],
        };
        let mut v = Vpmu::new(opts, model).unwrap();
        let m = Module::new("/t/loop");
        v.visit(&TraceEvent::Module {
            idx: ModuleIdx(7),
            module: &m,
        });
        let ins: Vec<Svma> = (0..cpi.len()).map(|k| Svma(0x100 + 4 * k as u64)).collect();
        for _ in 0..reps {
            v.visit(&TraceEvent::Block(TraceBlock {
                tid: 42,
                module: Some(ModuleIdx(7)),
                instructions: &ins,
                end: TraceEnd::Other,
                mem: &[],
                key: None,
            }));
        }
        v.visit(&TraceEvent::End(&RunOutcome::Exited { code: 0 }));
        let (s, e) = v.finish();
        (s, e.unwrap())
    }

    fn hist(s: &SampleSet, ev: u16, n: usize) -> Vec<u64> {
        let mut h = vec![0; n];
        for x in s.samples.iter().filter(|x| x.event == ev) {
            h[((x.ip.svma.0 - 0x100) / 4) as usize] += 1;
        }
        h
    }

    /// c = (1, 1, 10, 1), S = 3: seed 000 eq. 2 gives D = (0, 1, 3, 0) per pass (worked in
    /// proftrust-skid's model tests). With T = 101 (prime, coprime with 4) and 4 * 101 * 50
    /// instructions, each position overflows 50 times: D * 50.
    #[test]
    fn instruction_samples_follow_eq2() {
        let opts = VpmuOptions {
            instruction_period: 101,
            cycle_period: 13,
            skid: SkidDist::Constant(3),
            ..VpmuOptions::default()
        };
        let (s, e) = run_loop(&[1, 1, 10, 1], 101 * 50 + 1, opts);
        assert_eq!(hist(&s, 0, 4), vec![0, 50, 150, 0]);
        // Exact counts and cycles.
        assert_eq!(e.total_instructions, 4 * (101 * 50 + 1));
        assert_eq!(e.extra_costs[2], vec![10 * (101 * 50 + 1)]);
        assert_eq!(s.modules.get(ModuleIdx(0)).unwrap().path, "/t/loop");
        let first = s.samples.iter().find(|x| x.event == 0).unwrap();
        assert_eq!(first.ip.module, Some(ModuleIdx(0)));
        assert_eq!(first.period, 101);
        assert_eq!(s.events[0].config.seed, Some(0));
    }

    /// Cycle samples: 13 cycles per pass, period 13 * 7 + 1 = 92 cycles is coprime with 13
    /// so over 13 * 92 cycles each cycle offset overflows once: each instruction gets samples
    /// in proportion to its CPI, whatever the (constant) skid: (1, 1, 10, 1) per 13 samples.
    #[test]
    fn cycle_samples_are_proportional_to_cpi() {
        for skid in [0, 5, 40] {
            let opts = VpmuOptions {
                cycle_period: 92,
                skid: SkidDist::Constant(skid),
                events: VpmuEvents {
                    instructions: false,
                    cycles: true,
                },
                ..VpmuOptions::default()
            };
            // 924 passes = 12012 cycles: overflows at 92 k for k <= 130 (11960 + 40 of slack
            // for the largest skid), the 131st would be at 12052 > 12012. 130 overflows =
            // 10 of each residue mod 13.
            let (s, _) = run_loop(&[1, 1, 10, 1], 924, opts);
            let h = hist(&s, 0, 4);
            assert_eq!(h, vec![10, 10, 100, 10], "skid {skid}");
        }
    }

    #[test]
    fn randomized_periods_are_seeded_and_bounded() {
        let opts = VpmuOptions {
            instruction_period: 97,
            randomize: true,
            seed: 9,
            events: VpmuEvents {
                instructions: true,
                cycles: false,
            },
            ..VpmuOptions::default()
        };
        let (a, _) = run_loop(&[1, 2, 3], 2000, opts.clone());
        let (b, _) = run_loop(&[1, 2, 3], 2000, opts);
        assert_eq!(a.samples, b.samples);
        assert!(a.samples.iter().all(|s| (97..=97 + 12).contains(&s.period)));
        assert!(a.samples.iter().any(|s| s.period != 97));
        assert_eq!(a.events[0].config.randomize_max, Some(12));
    }

    #[test]
    fn lbr_records_taken_back_edges() {
        let opts = VpmuOptions {
            instruction_period: 7,
            lbr: true,
            events: VpmuEvents {
                instructions: true,
                cycles: false,
            },
            ..VpmuOptions::default()
        };
        let (s, _) = run_loop(&[2, 3], 100, opts);
        let last = s.samples.last().unwrap();
        assert_eq!(last.branches.len(), LBR_DEPTH);
        // Every taken branch is the back edge 0x104 -> 0x100, one pass (5 cycles) apart.
        for b in &last.branches {
            assert_eq!((b.from.svma.0, b.to.svma.0, b.cycles), (0x104, 0x100, 5));
        }
    }

    /// With a cache, access latencies add to the static cost and the exact profile carries
    /// the misses: one 1-cycle instruction loading line 0 then line 64 (tiny L1 of one line)
    /// alternately misses L1 every time and memory only the first two times.
    #[test]
    fn cache_latency_reaches_cycles_and_exact_costs() {
        let cache = CacheConfig {
            l1_size: 64,
            l1_ways: 1,
            llc_size: 128,
            llc_ways: 2,
            ..CacheConfig::default()
        };
        let opts = VpmuOptions {
            cache: Some(cache),
            events: VpmuEvents {
                instructions: true,
                cycles: false,
            },
            ..VpmuOptions::default()
        };
        let mut v = Vpmu::new(opts, CycleModel::flat(1)).unwrap();
        let m = Module::new("/t/x");
        v.module(ModuleIdx(0), &m);
        let ins = [Svma(0x100)];
        for k in 0..4u64 {
            let mem = [proftrust_model::MemAccess {
                insn: 0,
                addr: 64 * (k % 2),
                size: 8,
                store: false,
                level: None,
            }];
            v.block(&TraceBlock {
                tid: 1,
                module: Some(ModuleIdx(0)),
                instructions: &ins,
                end: TraceEnd::Other,
                mem: &mem,
                key: None,
            });
        }
        let st = v.cache_stats().unwrap();
        assert_eq!((st.accesses, st.l1_misses, st.llc_misses), (4, 4, 2));
        let (_, e) = v.finish();
        let e = e.unwrap();
        assert_eq!(
            e.extra_cost_names,
            vec!["cycles", "l1d_misses", "llc_misses"]
        );
        assert_eq!(e.extra_costs, vec![vec![4 + 2 * 200 + 2 * 40, 4, 2]]);
        let bad = VpmuOptions {
            cache: Some(CacheConfig {
                line_size: 60,
                ..CacheConfig::default()
            }),
            ..VpmuOptions::default()
        };
        assert!(Vpmu::new(bad, CycleModel::flat(1)).is_err());
    }

    /// Replays blocks `(tid, first address, CPIs)` (4-byte instructions at `first`,
    /// `first + 4`, ...), each `reps` times in turn, under `opts`.
    fn replay(
        blocks: &[(u32, u64, Vec<u32>)],
        reps: usize,
        opts: VpmuOptions,
    ) -> (SampleSet, ExactProfile) {
        let mut table = CostTable::new("prog");
        for (_, first, cpi) in blocks {
            for (k, &c) in cpi.iter().enumerate() {
                table
                    .costs
                    .insert(first + 4 * k as u64, StaticCost { cycles: c, len: 4 });
            }
        }
        let model = CycleModel {
            default_cycles: 1,
            tables: vec![table],
        };
        let mut v = Vpmu::new(opts, model).unwrap();
        v.module(ModuleIdx(0), &Module::new("/t/prog"));
        let ins: Vec<Vec<Svma>> = blocks
            .iter()
            .map(|(_, first, cpi)| (0..cpi.len()).map(|k| Svma(first + 4 * k as u64)).collect())
            .collect();
        for _ in 0..reps {
            for ((tid, _, _), ins) in blocks.iter().zip(&ins) {
                v.block(&TraceBlock {
                    tid: *tid,
                    module: Some(ModuleIdx(0)),
                    instructions: ins,
                    end: TraceEnd::Other,
                    mem: &[],
                    key: None,
                });
            }
        }
        v.end(&RunOutcome::Exited { code: 0 });
        let (s, e) = v.finish();
        (s, e.unwrap())
    }

    fn ooo(mode: PmuMode, ev: (bool, bool), period: u64, rob: (u32, u32)) -> VpmuOptions {
        VpmuOptions {
            mode,
            instruction_period: period,
            cycle_period: period,
            events: VpmuEvents {
                instructions: ev.0,
                cycles: ev.1,
            },
            rob: RobConfig {
                entries: rob.0,
                width: rob.1,
            },
            ..VpmuOptions::default()
        }
    }

    /// Samples per instruction of a block at 0x100 with `n` instructions.
    fn per_position(s: &SampleSet, n: usize) -> Vec<u64> {
        let mut h = vec![0; n];
        for x in &s.samples {
            h[((x.ip.svma.0 - 0x100) / 4) as usize] += 1;
        }
        h
    }

    /// The 5-instruction trace of `ooo::tests::head_of_rob_by_hand` (latencies 1, 10, 1,
    /// 1, 1 on a ROB of 4 entries and width 2: commits at 2, 11, 11, 12, 12), replayed once
    /// in each of two threads (each its own ROB), every cycle sampled (period 1).
    ///
    /// * TIP: cycles 1-2 -> I0, 3-10 -> I1 (head, stalled), 11 -> I1 or I2 (both commit),
    ///   12 -> I3 or I4; the exact `tip_cycles` column is (2, 8.5, 0.5, 0.5, 0.5) per
    ///   thread, (4, 17, 1, 1, 1) for two.
    /// * PEBS: the instruction after the head: cycles 1-2 -> I1, 3-11 -> I2, 12 -> I4.
    /// * Interrupt, skid 3: the head at t + 3: t = 1..8 -> I1 (c = 11 >= t + 3), t = 9 ->
    ///   I3 (first c >= 12); t = 10..12 land after the end and are dropped.
    /// * IBS (cycles): the first instruction dispatched at or after t (dispatch cycles 1, 1,
    ///   2, 2, 3): t = 1 -> I0, t = 2 -> I2, t = 3 -> I4; later cycles dispatch nothing.
    #[test]
    fn cycle_samples_follow_each_mode_on_a_hand_trace() {
        let blocks = vec![
            (1, 0x100, vec![1, 10, 1, 1, 1]),
            (2, 0x100, vec![1, 10, 1, 1, 1]),
        ];
        let run = |mode, skid| {
            let mut o = ooo(mode, (false, true), 1, (4, 2));
            o.skid = SkidDist::Constant(skid);
            replay(&blocks, 1, o)
        };
        let (s, e) = run(PmuMode::Tip, 0);
        let h = per_position(&s, 5);
        assert_eq!(s.samples.len(), 24);
        assert_eq!(h[0], 4);
        assert_eq!(h[1] + h[2], 18);
        assert!(h[1] >= 16, "{h:?}");
        assert_eq!(h[3] + h[4], 2);
        assert_eq!(e.extra_cost_names, vec!["cycles", TIP_CYCLES]);
        let tip: Vec<u64> = e.extra_costs.iter().map(|c| c[1]).collect();
        assert_eq!(tip, vec![4, 17, 1, 1, 1]);
        let own: Vec<u64> = e.extra_costs.iter().map(|c| c[0]).collect();
        assert_eq!(own, vec![2, 20, 2, 2, 2]);
        assert_eq!(s.events[0].config.precise, 3);

        let (s, _) = run(PmuMode::Pebs, 0);
        assert_eq!(per_position(&s, 5), vec![0, 4, 18, 0, 2]);
        let (s, _) = run(PmuMode::Interrupt, 3);
        assert_eq!(per_position(&s, 5), vec![0, 16, 0, 2, 0]);
        let (s, _) = run(PmuMode::Ibs, 0);
        assert_eq!(per_position(&s, 5), vec![2, 0, 2, 0, 2]);
    }

    /// PEBS off-by-one: whatever the latencies and ROB, every instruction sample names the
    /// instruction after the overflowing one. A block of 61 distinct instructions with
    /// irregular latencies (misses of 200 cycles among 1-cycle ones), period 997 (prime): the
    /// j-th overflow is at global instruction j * 997 - 1, the sample at j * 997.
    #[test]
    fn pebs_names_the_next_instruction() {
        let cpi: Vec<u32> = (0..61)
            .map(|k| if k % 7 == 3 { 200 } else { 1 + k % 3 })
            .collect();
        let (s, _) = replay(
            &[(1, 0x100, cpi)],
            61 * 997 / 61 * 40,
            ooo(PmuMode::Pebs, (true, false), 997, (224, 4)),
        );
        assert!(s.samples.len() > 30);
        for (j, x) in s.samples.iter().enumerate() {
            let want = ((j as u64 + 1) * 997) % 61;
            assert_eq!((x.ip.svma.0 - 0x100) / 4, want, "sample {j}");
        }
        assert_eq!(s.events[0].config.precise, 2);
    }

    /// Upper-tail probability of the normal distribution (Abramowitz & Stegun 7.1.26 for
    /// erf, absolute error < 1.5e-7).
    fn phi(x: f64) -> f64 {
        let z = x.abs() / std::f64::consts::SQRT_2;
        let t = 1.0 / (1.0 + 0.3275911 * z);
        let poly = t
            * (0.254829592
                + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))));
        let erf = 1.0 - poly * (-z * z).exp();
        if x >= 0.0 {
            0.5 * (1.0 + erf)
        } else {
            0.5 * (1.0 - erf)
        }
    }

    /// Pearson's chi-square of observed counts against probabilities, bins merged left to
    /// right until each expects at least 5; returns (statistic, degrees of freedom).
    fn chi_square(obs: &[u64], p: &[f64]) -> (f64, usize) {
        let n: u64 = obs.iter().sum();
        let (mut stat, mut bins) = (0.0, 0);
        let (mut o, mut e) = (0.0, 0.0);
        for (k, (&ok, &pk)) in obs.iter().zip(p).enumerate() {
            o += ok as f64;
            e += pk * n as f64;
            if e >= 5.0 || k + 1 == obs.len() {
                stat += (o - e) * (o - e) / e.max(1e-9);
                bins += 1;
                o = 0.0;
                e = 0.0;
            }
        }
        (stat, bins - 1)
    }

    /// The chi-square critical value at p = 0.001 (Wilson–Hilferty, z = 3.09).
    fn chi_crit(df: usize) -> f64 {
        let d = df as f64;
        let a = 2.0 / (9.0 * d);
        d * (1.0 - a + 3.09 * a.sqrt()).powi(3)
    }

    /// Interrupt mode: the distance from the overflowing instruction to the sampled one
    /// follows the configured skid distribution. A straight block of 4096 distinct 1-cycle
    /// instructions on a width-1 ROB commits one instruction per cycle (c_k = k + 2), so a
    /// skid of S cycles moves the sample exactly S instructions. The empirical distances of
    /// 6000 samples with skid normal(40, 12) (rounded, clamped at 0) pass Pearson's
    /// chi-square against that distribution at p = 0.001, and fail against normal(44, 12).
    #[test]
    fn interrupt_skid_follows_the_configured_distribution() {
        let n = 4096u64;
        let t = 1009u64;
        let mut o = ooo(PmuMode::Interrupt, (true, false), t, (224, 1));
        o.skid = SkidDist::Normal {
            mean: 40.0,
            sd: 12.0,
        };
        o.seed = 5;
        let reps = (6000 * t / n + 1) as usize;
        let (s, _) = replay(&[(1, 0x100, vec![1; n as usize])], reps, o);
        let mut dist = vec![0u64; 120];
        for (j, x) in s.samples.iter().enumerate() {
            let over = ((j as u64 + 1) * t - 1) % n;
            let at = (x.ip.svma.0 - 0x100) / 4;
            let d = (at + n - over) % n;
            dist[d.min(119) as usize] += 1;
        }
        assert!(s.samples.len() >= 6000);
        let probs = |mean: f64, sd: f64| -> Vec<f64> {
            (0..120)
                .map(|k| {
                    let hi = if k == 119 {
                        1.0
                    } else {
                        phi((k as f64 + 0.5 - mean) / sd)
                    };
                    let lo = if k == 0 {
                        0.0
                    } else {
                        phi((k as f64 - 0.5 - mean) / sd)
                    };
                    hi - lo
                })
                .collect()
        };
        let (stat, df) = chi_square(&dist, &probs(40.0, 12.0));
        assert!(stat < chi_crit(df), "chi2 {stat} df {df}");
        let (stat, df) = chi_square(&dist, &probs(44.0, 12.0));
        assert!(
            stat > chi_crit(df),
            "a 4-cycle shift not detected: chi2 {stat} df {df}"
        );
    }

    /// IBS: tagged ops are attributed exactly, so on a loop whose third instruction is a
    /// 200-cycle miss the samples spread evenly over the 4 instructions (chi-square against
    /// uniform at p = 0.001), with randomised periods in [T/2, 3T/2]; interrupt sampling
    /// with a 3-cycle skid on the same loop piles them on the miss.
    #[test]
    fn ibs_attributes_uniformly() {
        let cpi = vec![1, 1, 200, 1];
        let mut o = ooo(PmuMode::Ibs, (true, false), 101, (224, 4));
        o.seed = 3;
        let (s, _) = replay(&[(1, 0x100, cpi.clone())], 101_000, o);
        let h = per_position(&s, 4);
        let (stat, df) = chi_square(&h, &[0.25; 4]);
        assert!(s.samples.len() > 3500);
        assert!(stat < chi_crit(df), "{h:?}: chi2 {stat}");
        assert!(s.samples.iter().all(|x| (50..=152).contains(&x.period)));
        assert!(s.samples.iter().any(|x| x.period != 101));
        let mut o = ooo(PmuMode::Interrupt, (true, false), 101, (224, 4));
        o.skid = SkidDist::Constant(3);
        let (s, _) = replay(&[(1, 0x100, cpi)], 101_000, o);
        let h = per_position(&s, 4);
        let (stat, df) = chi_square(&h, &[0.25; 4]);
        assert!(stat > chi_crit(df), "{h:?}");
    }

    /// The time truth alone (no event, exact profile only): TIP cycles sum to the run's
    /// cycles; a ROB of 0 entries is refused.
    #[test]
    fn time_truth_without_events() {
        let (s, e) = replay(
            &[(1, 0x100, vec![1, 1, 200, 1, 3])],
            1000,
            ooo(PmuMode::Tip, (false, false), 97, (224, 4)),
        );
        assert!(s.samples.is_empty());
        let tip: u64 = e.extra_costs.iter().map(|c| c[1]).sum();
        // One miss per pass of 5 instructions on a ROB far larger than a pass: the misses of
        // consecutive passes overlap, the run takes about 1000 * 200 / (passes in flight).
        let own: u64 = e.extra_costs.iter().map(|c| c[0]).sum();
        assert!(tip < own / 10, "tip {tip} own {own}");
        assert!(tip > 1000 * 200 / 45, "tip {tip}");
        let bad = ooo(PmuMode::Tip, (true, false), 97, (0, 4));
        assert!(Vpmu::new(bad, CycleModel::default()).is_err());
    }

    #[test]
    fn bad_options_are_refused() {
        let o = VpmuOptions {
            instruction_period: 0,
            ..VpmuOptions::default()
        };
        assert!(Vpmu::new(o, CycleModel::default()).is_err());
        let o = VpmuOptions {
            skid: SkidDist::Uniform { lo: 5, hi: 1 },
            ..VpmuOptions::default()
        };
        assert!(Vpmu::new(o, CycleModel::default()).is_err());
    }

    /// The per-block step ([`Vpmu::counters_quiet`]) against the per-instruction one: two
    /// replays of one trace, blocks stepped whole where they can be and every instruction
    /// stepped, with LBR off and on, keyed and unkeyed blocks, two threads interleaved, a
    /// random skid and randomised periods short enough that counters overflow inside blocks,
    /// must give the same samples (branch stacks included) and the same exact counts and
    /// cycles; without `--exact`, keyed blocks are stepped from their per-key cycles.
    #[test]
    fn per_block_steps_equal_per_instruction_steps() {
        let mut table = CostTable::new("prog");
        // Three blocks: 0x100.. (3 instructions), 0x200.. (5), 0x300.. (2).
        let blocks: Vec<Vec<Svma>> = [(0x100u64, 3u64), (0x200, 5), (0x300, 2)]
            .iter()
            .map(|&(a, n)| (0..n).map(|k| Svma(a + 4 * k)).collect())
            .collect();
        for (i, b) in blocks.iter().enumerate() {
            for (k, s) in b.iter().enumerate() {
                let cycles = 1 + ((i * 7 + k * 3) % 11) as u32;
                table.costs.insert(s.0, StaticCost { cycles, len: 4 });
            }
        }
        let model = CycleModel {
            default_cycles: 1,
            tables: vec![table],
        };
        // Data accesses per step (mem 1: addresses the timer simulates; mem 2: the levels the
        // plugin's simulation served them at, which `block_cycles` sums without timing).
        let accesses = |step: usize, n: usize, mem: u8| -> Vec<proftrust_model::MemAccess> {
            (0..(step * 5 + 3) % 4)
                .map(|j| {
                    let x = step * 31 + j * 17;
                    proftrust_model::MemAccess {
                        insn: ((j * n) / 3) as u16,
                        addr: if mem == 1 { (x % 23) as u64 * 64 } else { 0 },
                        size: if mem == 1 { 8 } else { 0 },
                        store: x % 5 == 0,
                        level: (mem == 2).then_some((x % 7 % 3) as u8),
                    }
                })
                .collect()
        };
        let run = |lbr: bool, keyed: bool, per_instruction: bool, exact: bool, mem: u8| {
            let opts = VpmuOptions {
                instruction_period: 37,
                cycle_period: 53,
                randomize: true,
                skid: SkidDist::Uniform { lo: 0, hi: 40 },
                seed: 11,
                lbr,
                exact,
                cache: (mem > 0).then(|| CacheConfig {
                    l1_size: 256,
                    l1_ways: 2,
                    llc_size: 512,
                    llc_ways: 2,
                    ..CacheConfig::default()
                }),
                ..VpmuOptions::default()
            };
            let mut v = Vpmu::new(opts, model.clone()).unwrap();
            v.per_instruction = per_instruction;
            let m = Module::new("/t/prog");
            v.visit(&TraceEvent::Module {
                idx: ModuleIdx(3),
                module: &m,
            });
            for step in 0..3000usize {
                let k = (step * step + step / 7) % 3;
                let mem = accesses(step, blocks[k].len(), mem);
                v.visit(&TraceEvent::Block(TraceBlock {
                    tid: if (step / 5) % 3 == 0 { 8 } else { 9 },
                    module: Some(ModuleIdx(3)),
                    instructions: &blocks[k],
                    end: if k == 1 {
                        TraceEnd::Call
                    } else {
                        TraceEnd::Other
                    },
                    mem: &mem,
                    key: keyed.then_some(k as u32),
                }));
            }
            v.visit(&TraceEvent::End(&RunOutcome::Exited { code: 0 }));
            let stats = v.timer.cache_stats();
            let (s, e) = v.finish();
            let samples: Vec<_> = s
                .samples
                .iter()
                .map(|x| (x.event, x.tid, x.time, x.period, x.ip, x.branches.clone()))
                .collect();
            let e = e.unwrap_or_default();
            (samples, e.instructions, e.extra_costs, stats)
        };
        for (lbr, mem) in [false, true]
            .into_iter()
            .flat_map(|l| [(l, 0), (l, 1), (l, 2)])
        {
            let stepped = run(lbr, false, true, true, mem);
            // Overflows every 37 instructions and ~53 cycles: hundreds of samples of each event.
            assert!(stepped.0.len() > 400, "{} samples", stepped.0.len());
            // Branch stacks with LBR only, full once 32 taken branches have passed.
            let late = &stepped.0[stepped.0.len() / 2..];
            assert!(late
                .iter()
                .all(|s| s.5.len() == if lbr { LBR_DEPTH } else { 0 }));
            let n: usize = (0..3000usize)
                .map(|step| blocks[(step * step + step / 7) % 3].len())
                .sum();
            assert_eq!(stepped.1.iter().map(|i| i.count).sum::<u64>(), n as u64);
            let stats = stepped.3.unwrap_or_default();
            if mem > 0 {
                // 0+1+2+3 accesses per 4 steps; some misses.
                assert_eq!(stats.accesses, 4500, "mem {mem}");
                assert!(stats.l1_misses > 100 && stats.llc_misses > 10, "{stats:?}");
            }
            for keyed in [false, true] {
                assert_eq!(
                    run(lbr, keyed, false, true, mem),
                    stepped,
                    "lbr {lbr}, keyed {keyed}, mem {mem}"
                );
                let no_exact = run(lbr, keyed, false, false, mem);
                assert_eq!(
                    (&no_exact.0, no_exact.3),
                    (&stepped.0, stepped.3),
                    "lbr {lbr}, keyed {keyed}, mem {mem}, no --exact"
                );
                assert!(no_exact.1.is_empty());
            }
        }
    }
}
