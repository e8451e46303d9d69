//! A simple out-of-order timing approximation: a reorder buffer (ROB) of `R` entries,
//! in-order dispatch and commit of at most `w` instructions per cycle, and completion after
//! each instruction's own latency, so that long-latency operations overlap and *shadows*
//! form behind a stalled head as on real cores.
//!
//! # The model
//!
//! Instruction `k` (in program order, per thread) with latency `l_k` (its static cost plus
//! its cache latency, [`InstrTimer`](crate::InstrTimer)) is
//!
//! * dispatched (enters the ROB) in cycle `d_k = max(d_{k-1}, d_{k-w} + 1, c_{k-R} + 1)`:
//!   in order, at most `w` per cycle, and only once the instruction `R` places earlier has
//!   committed and freed its entry;
//! * complete in cycle `f_k = d_k + l_k`, or `f_k = max(d_k, r_k) + l_k` when its operand
//!   is ready only in cycle `r_k` ([`Rob::push_after`]): the virtual PMU starts a load whose
//!   address register was last written by a load ([`CostTable::dependent`](crate::CostTable))
//!   when the latest traced load has completed, so pointer chases serialise while
//!   independent misses overlap;
//! * committed in cycle `c_k = max(f_k, c_{k-1}, c_{k-w} + 1)`: in order, at most `w` per
//!   cycle, not before it completes.
//!
//! Histories before the first instruction are 0, so the first dispatch is cycle 1. Cycles
//! are numbered from 1; cycle `t` belongs to the run when `t <= c_last`.
//!
//! **Left out** (a documented approximation, not a core): data dependencies other than the
//! dependent-load rule above (an instruction may start as soon as it is dispatched; the
//! rule is a decode-order approximation (loop back edges included) and waits for the latest load, not necessarily the
//! producing one; without a cache simulation no load is known and nothing waits), branch prediction and wrong-path work, the front end (fetch,
//! decode, instruction cache), functional-unit and port limits, and store-buffer limits.
//! What it keeps is the property the attribution rules of [`PmuMode`](crate::PmuMode) are
//! about: commit is in order, so an instruction waiting at the head of the ROB (a load
//! missing the caches) holds back the commit of the younger instructions that completed
//! behind it, which then commit in a burst of `w` per cycle.
//!
//! # Time-proportional attribution (TIP)
//!
//! [`TipAttribution`] charges every cycle of the run to one or more instructions, after
//! Gottschall, Eeckhout and Jahre, "TIP: Time-Proportional Instruction Profiling" (MICRO
//! 2021, §3; not one of the seeds): a cycle in which instructions commit is split evenly
//! among them; a cycle in which none commits goes to the instruction at the head of the ROB,
//! the oldest not yet committed, i.e. the next to commit. (TIP also names the cases of an
//! empty ROB — front-end stalls, charged to the next instruction to dispatch — and of
//! flushes; this model has neither: the head is always the next instruction to commit.)
//! Hence instruction `k` receives the cycles `c_{k-1} < t < c_k` (its stall at the head) and
//! `1/n` of cycle `c_k`, where `n` instructions commit in that cycle; the attribution sums to
//! `c_last`, the run's cycles.

use std::collections::VecDeque;

/// Geometry of the out-of-order approximation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RobConfig {
    /// Reorder-buffer entries `R` (at least 1). Default 224, the ROB of Intel's Skylake
    /// microarchitecture (Intel 64 and IA-32 Architectures Optimization Reference Manual,
    /// §2.2 "Skylake client microarchitecture", the table of buffer sizes).
    pub entries: u32,
    /// Dispatch and commit width `w` (instructions per cycle, at least 1). Default 4 (the
    /// same manual: Skylake allocates and retires up to 4 micro-ops per cycle; this model
    /// counts instructions, not micro-ops).
    pub width: u32,
}

impl Default for RobConfig {
    fn default() -> Self {
        RobConfig {
            entries: 224,
            width: 4,
        }
    }
}

/// The cycles of one instruction in the [`Rob`] model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RobTiming {
    /// Dispatch cycle `d_k`.
    pub dispatch: u64,
    /// Completion cycle `f_k = d_k + l_k`.
    pub complete: u64,
    /// Commit cycle `c_k`.
    pub commit: u64,
}

/// The streaming ROB timing model of one thread (see the module documentation).
#[derive(Debug, Clone)]
pub struct Rob {
    cfg: RobConfig,
    /// Commit cycles of the last `max(R, w)` instructions, oldest first.
    commits: VecDeque<u64>,
    /// Dispatch cycles of the last `w` instructions, oldest first.
    dispatches: VecDeque<u64>,
}

impl Rob {
    /// An empty ROB; a zero entry count or width is taken as 1.
    pub fn new(cfg: RobConfig) -> Rob {
        let cfg = RobConfig {
            entries: cfg.entries.max(1),
            width: cfg.width.max(1),
        };
        Rob {
            cfg,
            commits: VecDeque::with_capacity(cfg.entries.max(cfg.width) as usize),
            dispatches: VecDeque::with_capacity(cfg.width as usize),
        }
    }

    /// `x_{k-n}` from a history holding the last values, oldest first (0 before the start).
    fn back(h: &VecDeque<u64>, n: usize) -> u64 {
        if h.len() >= n {
            h[h.len() - n]
        } else {
            0
        }
    }

    /// Times the next instruction of the thread, of latency `latency` cycles.
    pub fn push(&mut self, latency: u64) -> RobTiming {
        self.push_after(latency, 0)
    }

    /// [`Rob::push`] for an instruction whose operand is ready only in cycle `ready`: it
    /// executes from `max(d_k, ready)`, so `f_k = max(d_k, ready) + l_k`.
    pub fn push_after(&mut self, latency: u64, ready: u64) -> RobTiming {
        let (r, w) = (self.cfg.entries as usize, self.cfg.width as usize);
        let d = Self::back(&self.dispatches, 1)
            .max(Self::back(&self.dispatches, w) + 1)
            .max(Self::back(&self.commits, r) + 1);
        let f = d.max(ready) + latency;
        let c = f
            .max(Self::back(&self.commits, 1))
            .max(Self::back(&self.commits, w) + 1);
        if self.dispatches.len() == w {
            self.dispatches.pop_front();
        }
        self.dispatches.push_back(d);
        if self.commits.len() == r.max(w) {
            self.commits.pop_front();
        }
        self.commits.push_back(c);
        RobTiming {
            dispatch: d,
            complete: f,
            commit: c,
        }
    }

    /// Commit cycle of the last instruction (0 before any).
    pub fn last_commit(&self) -> u64 {
        Self::back(&self.commits, 1)
    }
}

/// Streaming TIP attribution of cycles to committed instructions (module documentation):
/// feed instructions in commit order with [`TipAttribution::push`], end with
/// [`TipAttribution::flush`].
#[derive(Debug, Clone)]
pub struct TipAttribution<T> {
    /// Cycle of the last commit (0 before any).
    cycle: u64,
    /// The instructions committing in `cycle`.
    group: Vec<T>,
}

impl<T: Copy> Default for TipAttribution<T> {
    fn default() -> Self {
        TipAttribution {
            cycle: 0,
            group: Vec::new(),
        }
    }
}

impl<T: Copy> TipAttribution<T> {
    /// The cycle of the latest commit group.
    pub fn cycle(&self) -> u64 {
        self.cycle
    }

    /// The instructions committing in [`TipAttribution::cycle`] so far.
    pub fn group(&self) -> &[T] {
        &self.group
    }

    /// An instruction committing in cycle `commit` (not before the previous one's).
    /// `charge(item, cycles)` receives every attribution made final by it: the previous
    /// group's shares of its commit cycle when `commit` starts a new group, then this
    /// instruction's stall cycles at the head. Before the previous group is charged,
    /// `on_group_end(cycle, group)` sees it (for samples taken in that cycle).
    pub fn push(
        &mut self,
        item: T,
        commit: u64,
        charge: &mut impl FnMut(T, f64),
        on_group_end: &mut impl FnMut(u64, &[T]),
    ) {
        if commit > self.cycle || self.group.is_empty() {
            self.flush(charge, on_group_end);
            let stall = commit.saturating_sub(self.cycle).saturating_sub(1);
            if stall > 0 {
                charge(item, stall as f64);
            }
            self.cycle = commit;
        }
        self.group.push(item);
    }

    /// Charges the current group its commit cycle, split evenly.
    pub fn flush(
        &mut self,
        charge: &mut impl FnMut(T, f64),
        on_group_end: &mut impl FnMut(u64, &[T]),
    ) {
        if self.group.is_empty() {
            return;
        }
        on_group_end(self.cycle, &self.group);
        let share = 1.0 / self.group.len() as f64;
        for &g in &self.group {
            charge(g, share);
        }
        self.group.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Five instructions, the second a cache miss of latency 10, on a ROB of 4 entries and
    /// width 2. By hand from the rules of the module documentation (histories start at 0):
    ///
    /// | k | l | d = max(d_{k-1}, d_{k-2}+1, c_{k-4}+1) | f = d + l | c = max(f, c_{k-1}, c_{k-2}+1) |
    /// |---|---|---|---|---|
    /// | 0 | 1 | max(0, 1, 1) = 1 | 2 | max(2, 0, 1) = 2 |
    /// | 1 | 10 | max(1, 1, 1) = 1 | 11 | max(11, 2, 1) = 11 |
    /// | 2 | 1 | max(1, 2, 1) = 2 | 3 | max(3, 11, 3) = 11 |
    /// | 3 | 1 | max(2, 2, 1) = 2 | 3 | max(3, 11, 12) = 12 |
    /// | 4 | 1 | max(2, 3, 3) = 3 | 4 | max(4, 12, 12) = 12 |
    ///
    /// Instructions 2-4 complete in the miss's shadow (cycles 3-4) and commit behind it.
    /// TIP: cycles 1-2 go to I0 (stall in cycle 1, commits alone in 2); cycles 3-10 are
    /// stalls with I1 at the head (8 cycles); cycle 11 is split between I1 and I2; cycle 12
    /// between I3 and I4: (2, 8.5, 0.5, 0.5, 0.5), summing to the 12 cycles of the run.
    /// An in-order model would charge the run 14 cycles, 10 of them to I1.
    #[test]
    fn head_of_rob_by_hand() {
        let mut rob = Rob::new(RobConfig {
            entries: 4,
            width: 2,
        });
        let lat = [1, 10, 1, 1, 1];
        let t: Vec<RobTiming> = lat.iter().map(|&l| rob.push(l)).collect();
        let got: Vec<(u64, u64, u64)> = t
            .iter()
            .map(|x| (x.dispatch, x.complete, x.commit))
            .collect();
        assert_eq!(
            got,
            vec![(1, 2, 2), (1, 11, 11), (2, 3, 11), (2, 3, 12), (3, 4, 12)]
        );
        let mut tip = TipAttribution::default();
        let mut charged = [0.0f64; 5];
        let mut groups = Vec::new();
        for (k, x) in t.iter().enumerate() {
            tip.push(
                k,
                x.commit,
                &mut |i, c| charged[i] += c,
                &mut |cyc, g: &[usize]| groups.push((cyc, g.to_vec())),
            );
        }
        tip.flush(&mut |i, c| charged[i] += c, &mut |cyc, g: &[usize]| {
            groups.push((cyc, g.to_vec()))
        });
        assert_eq!(charged, [2.0, 8.5, 0.5, 0.5, 0.5]);
        assert_eq!(charged.iter().sum::<f64>(), rob.last_commit() as f64);
        assert_eq!(
            groups,
            vec![(2, vec![0]), (11, vec![1, 2]), (12, vec![3, 4])]
        );
    }

    /// The ROB bounds how far dispatch runs ahead of a stalled head: with R = 3 and width 4,
    /// the fourth instruction behind a 100-cycle miss dispatches only after the miss commits.
    #[test]
    fn a_full_rob_stops_dispatch() {
        let mut rob = Rob::new(RobConfig {
            entries: 3,
            width: 4,
        });
        let t: Vec<RobTiming> = [100, 1, 1, 1].iter().map(|&l| rob.push(l)).collect();
        assert_eq!(t[0].commit, 101);
        assert_eq!((t[1].dispatch, t[2].dispatch), (1, 1));
        assert_eq!(t[3].dispatch, 102);
        assert_eq!(t[3].commit, 103);
        // A load whose address comes from a 100-cycle load starts when that one completes.
        let mut rob = Rob::new(RobConfig::default());
        let a = rob.push(100);
        let b = rob.push_after(100, a.complete);
        assert_eq!((a.complete, b.complete, b.commit), (101, 201, 201));
        let c = rob.push(100);
        assert_eq!(c.commit, 201);
        // A flat stream of 1-cycle instructions runs at the width: 4 per cycle.
        let mut rob = Rob::new(RobConfig::default());
        let last = (0..4000).map(|_| rob.push(1)).last().unwrap();
        assert_eq!(last.commit, 1000 + 1);
    }
}
