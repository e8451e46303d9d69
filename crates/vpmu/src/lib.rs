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
mod timer;

pub use error::VpmuError;

pub use cost::TraceCost;
pub use cycles::{class_costs, class_cycles, ClassCycles, CostTable, CycleModel, StaticCost};
pub use timer::{CacheConfig, CacheStats, InstrTimer, InstrTiming};

use proftrust_model::{
    Branch, EventDesc, EventKind, ExactProfile, InstrCount, Location, Module, ModuleIdx,
    ModuleTable, PeriodMode, RunOutcome, Sample, SampleSet, SamplingConfig, Svma, TraceBlock,
    TraceEnd,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::{HashMap, VecDeque};

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
    /// Events sampled. Default both.
    pub events: VpmuEvents,
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
            lbr: false,
            exact: true,
            cache: None,
            max_samples: None,
        }
    }
}

/// LBR depth.
pub const LBR_DEPTH: usize = 32;

#[derive(Debug, Clone, Copy, Default)]
struct Slot {
    len: u8,
    count: u64,
    total_cycles: u64,
    l1_misses: u64,
    llc_misses: u64,
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
    /// Trace module index -> our index.
    module_map: HashMap<ModuleIdx, ModuleIdx>,
    /// Per (our) module: the cost table, when one matched.
    module_costs: HashMap<ModuleIdx, usize>,
    slots: HashMap<Location, Slot>,
    threads: HashMap<u32, Thread>,
    samples: Vec<Sample>,
    dropped: u64,
    pid: Option<u32>,
    outcome: Option<RunOutcome>,
    ev_instr: Option<u16>,
    ev_cycles: Option<u16>,
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
        if !opts.events.instructions && !opts.events.cycles {
            return Err(VpmuError::InvalidOptions {
                what: "no event to sample".into(),
                fix: "enable the instruction event, the cycle event, or both",
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
            module_map: HashMap::new(),
            module_costs: HashMap::new(),
            slots: HashMap::new(),
            threads: HashMap::new(),
            samples: Vec::new(),
            dropped: 0,
            pid: None,
            outcome: None,
            ev_instr,
            ev_cycles,
        })
    }

    fn next_period(rng: &mut ChaCha8Rng, t: u64, randomize: bool) -> u64 {
        if randomize && t >= 8 {
            t + rng.gen_range(0..=t / 8)
        } else {
            t
        }
    }

    fn slot(&mut self, loc: Location) -> Slot {
        if let Some(s) = self.slots.get(&loc) {
            return *s;
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
        let s = Slot {
            len: cost.len,
            ..Slot::default()
        };
        self.slots.insert(loc, s);
        s
    }

    fn new_thread(&mut self) -> Thread {
        let ip = Self::next_period(
            &mut self.rng,
            self.opts.instruction_period,
            self.opts.randomize,
        );
        let cp = Self::next_period(&mut self.rng, self.opts.cycle_period, self.opts.randomize);
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

    fn step(
        &mut self,
        th: &mut Thread,
        tid: u32,
        loc: Location,
        timing: InstrTiming,
        end_of_block: Option<TraceEnd>,
    ) {
        let slot = self.slot(loc);
        let c = timing.cycles as u64;
        // Taken branch into this instruction?
        if self.opts.lbr {
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
                slot.len,
                end_of_block.is_some(),
                end_of_block.unwrap_or(TraceEnd::Other),
            ));
        }
        let start = th.now;
        let end = start + c;
        th.now = end;
        if self.opts.exact {
            if let Some(s) = self.slots.get_mut(&loc) {
                s.count += 1;
                s.total_cycles += c;
                s.l1_misses += timing.l1_misses as u64;
                s.llc_misses += timing.llc_misses as u64;
            }
        }
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
                th.cycle_period =
                    Self::next_period(&mut self.rng, self.opts.cycle_period, self.opts.randomize);
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
                th.instr_period = Self::next_period(
                    &mut self.rng,
                    self.opts.instruction_period,
                    self.opts.randomize,
                );
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
    pub fn finish(self) -> (SampleSet, Option<ExactProfile>) {
        let cfg = |t: u64| SamplingConfig {
            period: PeriodMode::Fixed(t),
            randomize_max: self.opts.randomize.then_some(t / 8),
            precise: 0,
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
        let exact = self.opts.exact.then(|| {
            let mut v: Vec<(Location, Slot)> = self
                .slots
                .iter()
                .filter(|(_, s)| s.count > 0)
                .map(|(l, s)| (*l, *s))
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
                        if cache {
                            vec![s.total_cycles, s.l1_misses, s.llc_misses]
                        } else {
                            vec![s.total_cycles]
                        }
                    })
                    .collect(),
                extra_cost_names: if cache {
                    vec!["cycles".into(), "l1d_misses".into(), "llc_misses".into()]
                } else {
                    vec!["cycles".into()]
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
        };
        (set, exact)
    }
}

impl proftrust_model::BlockVisitor for Vpmu {
    fn module(&mut self, idx: ModuleIdx, module: &Module) {
        self.timer.module(idx, module);
        let ours = self.modules.intern(module.clone());
        self.module_map.insert(idx, ours);
        if let Some(t) = self.model.table_for(module) {
            self.module_costs.insert(ours, t);
        }
    }

    fn block(&mut self, b: &TraceBlock<'_>) {
        if self.pid.is_none() {
            self.pid = Some(b.tid);
        }
        let module = b.module.map(|m| *self.module_map.get(&m).unwrap_or(&m));
        let mut th = match self.threads.remove(&b.tid) {
            Some(t) => t,
            None => self.new_thread(),
        };
        let n = b.instructions.len();
        let mut timing = std::mem::take(&mut self.timing);
        self.timer.time_block(b, &mut timing);
        for (k, (&Svma(a), &t)) in b.instructions.iter().zip(&timing).enumerate() {
            let loc = Location {
                module,
                svma: Svma(a),
            };
            self.step(&mut th, b.tid, loc, t, (k + 1 == n).then_some(b.end));
        }
        self.timing = timing;
        self.threads.insert(b.tid, th);
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
            }];
            v.block(&TraceBlock {
                tid: 1,
                module: Some(ModuleIdx(0)),
                instructions: &ins,
                end: TraceEnd::Other,
                mem: &mem,
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
}
