//! Time measured by the hardware's branch stacks: each entry of a last-branch record with a
//! cycle count times the fall-through range that ends with its branch.
//!
//! # What an entry measures
//!
//! A branch stack lists the last taken branches, most recent first: entry `j` is `from_j ->
//! to_j` with `cycles_j`, the core cycles elapsed since the entry before it was recorded
//! (Intel: `MSR_LBR_INFO_x.CYC_CNT`, "elapsed core clocks since the last update to the LBR
//! stack", Intel SDM Vol. 3B §18.x "LBR Enhancements" since Skylake; Arm BRBE: `BRBINF<n>_EL1.CC`,
//! cycles since the previous branch record; perf hands both over as `perf_branch_entry.cycles`,
//! 0 when the hardware gave none). Between the older entry's target `to_{j+1}` and the
//! newer entry's source `from_j` the program ran straight through (no taken branch), so
//! `cycles_j` is the time of the fall-through range `[to_{j+1}, from_j]`, its final taken
//! branch included. The oldest entry of a stack has no range (its start is before the
//! stack). A range whose code is unknown (another module, an address range that is not
//! straight-line code) is counted in [`LbrTime::unresolved`] and left out.
//!
//! # Charging and estimating
//!
//! A range's cycles are split evenly over its instructions (the hardware measures the range,
//! not its instructions; below a range the split is an assumption). Each sample's stack is
//! a window of the execution just before the sample: its ranges tell what the time just
//! before the sample went to. Samples taken at equal intervals of time (a cycles or clock
//! event) each stand for the same stretch of time, so the run's time profile is the *mean
//! of the windows' compositions*: each window's cycles per instruction divided by the
//! window's total, averaged over the samples ([`LbrTime::per_instruction`], scaled back to
//! cycles by the mean window). Summing the raw cycles of all windows instead would weigh
//! code by the length of its windows (32 ranges of a slow loop cover more time than 32 of a
//! fast one) and over-weight slow code by that factor. Intervals ([`LbrTime::shares`]) are
//! percentile bootstrap intervals over samples (Efron and Tibshirani, *An Introduction to
//! the Bootstrap*, 1993, §13.3): samples are resampled with replacement, the shares
//! recomputed, the 2.5% and 97.5% quantiles taken.

use proftrust_model::{Location, ModuleIdx, SampleSet, Svma};
use std::collections::HashMap;

/// The straight-line code between two addresses, for [`lbr_time`].
pub trait RangeCode {
    /// The instructions from `start` to `end`, both included, executed by falling through
    /// (ascending addresses, no gap) in module `module` of the sample set; `None` when that
    /// is not known (no code, or `end` not reached from `start`).
    fn range(&self, module: ModuleIdx, start: Svma, end: Svma) -> Option<Vec<Svma>>;
}

/// One fall-through range and what the stacks measured of it.
#[derive(Debug, Clone, PartialEq)]
pub struct RangeTime {
    /// Module of the range.
    pub module: ModuleIdx,
    /// First instruction (a taken branch's target).
    pub start: Svma,
    /// Last instruction (the next taken branch).
    pub end: Svma,
    /// Times a stack measured it.
    pub count: u64,
    /// Cycles summed over those measurements.
    pub cycles: u64,
    /// Its instructions.
    pub instructions: Vec<Svma>,
}

/// Time from branch stacks (module documentation).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LbrTime {
    /// Measured ranges, in first-seen order.
    pub ranges: Vec<RangeTime>,
    /// Per sample with a stack: (range index, cycles) of each of its ranges.
    pub per_sample: Vec<Vec<(u32, u32)>>,
    /// Samples with a branch stack.
    pub stacks: u64,
    /// Ranges measured (with a cycle count and known code).
    pub measured: u64,
    /// Entries without a cycle count (0: the hardware gave none).
    pub without_cycles: u64,
    /// Ranges whose code is unknown or not straight-line.
    pub unresolved: u64,
}

impl LbrTime {
    /// Cycles per instruction: the mean over samples of each window's composition (its
    /// ranges' cycles split evenly over their instructions, divided by the window's total),
    /// times the mean window's cycles (module documentation).
    pub fn per_instruction(&self) -> HashMap<Location, f64> {
        let windows: Vec<u64> = self
            .per_sample
            .iter()
            .map(|rs| rs.iter().map(|&(_, c)| u64::from(c)).sum())
            .collect();
        let used = windows.iter().filter(|&&w| w > 0).count();
        let mean = windows.iter().sum::<u64>() as f64 / used.max(1) as f64;
        let mut out: HashMap<Location, f64> = HashMap::new();
        for (rs, &w) in self.per_sample.iter().zip(&windows) {
            if w == 0 {
                continue;
            }
            let scale = mean / w as f64 / used as f64;
            for &(ri, c) in rs {
                let r = &self.ranges[ri as usize];
                let each = f64::from(c) * scale / r.instructions.len().max(1) as f64;
                for &a in &r.instructions {
                    *out.entry(Location {
                        module: Some(r.module),
                        svma: a,
                    })
                    .or_default() += each;
                }
            }
        }
        out
    }

    /// Times each instruction was inside a measured range.
    pub fn coverage(&self) -> HashMap<Location, u64> {
        let mut out: HashMap<Location, u64> = HashMap::new();
        for r in &self.ranges {
            for &a in &r.instructions {
                *out.entry(Location {
                    module: Some(r.module),
                    svma: a,
                })
                .or_default() += r.count;
            }
        }
        out
    }

    /// Total measured cycles.
    pub fn total_cycles(&self) -> u64 {
        self.ranges.iter().map(|r| r.cycles).sum()
    }

    /// Per range: its cycles' split over groups (fraction per group, `group` as in
    /// [`LbrTime::shares`]).
    fn split(&self, group: &dyn Fn(Location) -> Option<usize>) -> Vec<Vec<(usize, f64)>> {
        self.ranges
            .iter()
            .map(|r| {
                let mut v: Vec<(usize, f64)> = Vec::new();
                let each = 1.0 / r.instructions.len().max(1) as f64;
                for &a in &r.instructions {
                    if let Some(g) = group(Location {
                        module: Some(r.module),
                        svma: a,
                    }) {
                        match v.iter_mut().find(|(x, _)| *x == g) {
                            Some(e) => e.1 += each,
                            None => v.push((g, each)),
                        }
                    }
                }
                v
            })
            .collect()
    }

    /// Per group id `0..groups`: the windows (samples' stacks) that measured at least one
    /// range with an instruction of the group. A group's time share and its bootstrap
    /// interval rest on these windows only: with few of them the share is a handful of
    /// measurements and the resampled shares take a handful of values.
    pub fn windows(&self, groups: usize, group: &dyn Fn(Location) -> Option<usize>) -> Vec<u64> {
        let split = self.split(group);
        let mut out = vec![0u64; groups];
        let mut seen: Vec<usize> = Vec::new();
        for rs in &self.per_sample {
            seen.clear();
            for &(ri, _) in rs {
                for &(g, _) in &split[ri as usize] {
                    if g < groups && !seen.contains(&g) {
                        seen.push(g);
                        out[g] += 1;
                    }
                }
            }
        }
        out
    }

    /// Shares of the measured time per group (`group(location)`, `None`: not counted, e.g.
    /// outside the scope), with `level` two-sided percentile bootstrap intervals from `reps`
    /// resamplings of the samples, seeded. Returns, per group id `0..groups`, (share, low,
    /// high); shares of all-`None` input are 0.
    pub fn shares(
        &self,
        groups: usize,
        group: &dyn Fn(Location) -> Option<usize>,
        reps: usize,
        level: f64,
        seed: u64,
    ) -> Vec<(f64, f64, f64)> {
        let split = self.split(group);
        // Per sample: its window's composition (cycles per group over the window's cycles).
        let per: Vec<Vec<(usize, f64)>> = self
            .per_sample
            .iter()
            .map(|rs| {
                let mut v: Vec<(usize, f64)> = Vec::new();
                for &(ri, c) in rs {
                    for &(g, f) in &split[ri as usize] {
                        match v.iter_mut().find(|(x, _)| *x == g) {
                            Some(e) => e.1 += f * f64::from(c),
                            None => v.push((g, f * f64::from(c))),
                        }
                    }
                }
                let w: f64 = rs.iter().map(|&(_, c)| f64::from(c)).sum();
                if w > 0.0 {
                    v.iter_mut().for_each(|x| x.1 /= w);
                }
                v
            })
            .collect();
        let shares_of = |pick: &mut dyn Iterator<Item = usize>| -> Vec<f64> {
            let mut t = vec![0.0f64; groups];
            for s in pick {
                for &(g, c) in &per[s] {
                    if g < groups {
                        t[g] += c;
                    }
                }
            }
            let sum: f64 = t.iter().sum();
            if sum > 0.0 {
                t.iter_mut().for_each(|x| *x /= sum);
            }
            t
        };
        let n = per.len();
        let point = shares_of(&mut (0..n));
        if n == 0 || reps == 0 {
            return point.into_iter().map(|p| (p, p, p)).collect();
        }
        let mut rng = SplitMix(seed);
        let mut draws: Vec<Vec<f64>> = vec![Vec::with_capacity(reps); groups];
        for _ in 0..reps {
            let s = shares_of(&mut (0..n).map(|_| (rng.next() % n as u64) as usize));
            for (g, x) in s.into_iter().enumerate() {
                draws[g].push(x);
            }
        }
        let alpha = (1.0 - level) / 2.0;
        point
            .into_iter()
            .zip(draws)
            .map(|(p, mut d)| {
                d.sort_by(f64::total_cmp);
                let q = |f: f64| d[((f * (d.len() - 1) as f64).round() as usize).min(d.len() - 1)];
                (p, q(alpha), q(1.0 - alpha))
            })
            .collect()
    }
}

/// splitmix64 (Steele, Lea and Flood, "Fast splittable pseudorandom number generators",
/// OOPSLA 2014): the bootstrap's seeded draws.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

/// Time per fall-through range from the branch stacks of the samples of `event` (all events
/// when `None`) in `set` (module documentation).
pub fn lbr_time(set: &SampleSet, event: Option<u16>, code: &dyn RangeCode) -> LbrTime {
    let mut out = LbrTime::default();
    let mut index: HashMap<(ModuleIdx, Svma, Svma), u32> = HashMap::new();
    let mut unknown: HashMap<(ModuleIdx, Svma, Svma), ()> = HashMap::new();
    for s in &set.samples {
        if s.branches.is_empty() || event.is_some_and(|e| s.event != e) {
            continue;
        }
        out.stacks += 1;
        let mut mine = Vec::new();
        for w in s.branches.windows(2) {
            let (newer, older) = (&w[0], &w[1]);
            if newer.cycles == 0 {
                out.without_cycles += 1;
                continue;
            }
            let (Some(m), Some(m2)) = (older.to.module, newer.from.module) else {
                out.unresolved += 1;
                continue;
            };
            if m != m2 || newer.from.svma < older.to.svma {
                out.unresolved += 1;
                continue;
            }
            let key = (m, older.to.svma, newer.from.svma);
            let ri = match index.get(&key) {
                Some(&i) => i,
                None if unknown.contains_key(&key) => {
                    out.unresolved += 1;
                    continue;
                }
                None => match code.range(m, key.1, key.2) {
                    Some(instructions) if !instructions.is_empty() => {
                        out.ranges.push(RangeTime {
                            module: m,
                            start: key.1,
                            end: key.2,
                            count: 0,
                            cycles: 0,
                            instructions,
                        });
                        let i = (out.ranges.len() - 1) as u32;
                        index.insert(key, i);
                        i
                    }
                    _ => {
                        unknown.insert(key, ());
                        out.unresolved += 1;
                        continue;
                    }
                },
            };
            let r = &mut out.ranges[ri as usize];
            r.count += 1;
            r.cycles += u64::from(newer.cycles);
            out.measured += 1;
            mine.push((ri, newer.cycles));
        }
        out.per_sample.push(mine);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proftrust_model::{Branch, Module, Sample};

    /// Straight-line code of 4-byte instructions everywhere.
    struct Fours;
    impl RangeCode for Fours {
        fn range(&self, _: ModuleIdx, start: Svma, end: Svma) -> Option<Vec<Svma>> {
            ((end.0 - start.0) % 4 == 0).then(|| (start.0..=end.0).step_by(4).map(Svma).collect())
        }
    }

    fn br(m: ModuleIdx, from: u64, to: u64, cycles: u32) -> Branch {
        Branch {
            from: Location::new(m, from),
            to: Location::new(m, to),
            mispredicted: false,
            predicted_known: true,
            cycles,
        }
    }

    /// A loop at 0x100..0x10c (back edge 0x10c -> 0x100), by hand. Stack 1 (newest
    /// first): 0x10c->0x100 (12 cycles), 0x10c->0x100 (10), 0x204->0x100 (7; the oldest
    /// entry, its range starts before the stack): the loop range [0x100, 0x10c] measured 12
    /// and 10. Stack 2: 0x10c->0x208 (9), 0x10c->0x100 (20), 0x1f0->0x100 (3),
    /// 0x1e0->0x1f0 (0): the loop range 9 and 20, the range [0x1f0, 0x1f0] 3.
    #[test]
    fn ranges_by_hand() {
        let mut set = SampleSet::default();
        let m = set.modules.intern(Module::new("/bin/p"));
        let mut push = |branches: Vec<Branch>| {
            set.samples.push(Sample {
                event: 0,
                pid: 1,
                tid: 1,
                time: 0,
                cpu: 0,
                period: 1,
                ip: Location::new(m, 0x104),
                callchain: Vec::new(),
                branches,
            })
        };
        push(vec![
            br(m, 0x10c, 0x100, 12),
            br(m, 0x10c, 0x100, 10),
            br(m, 0x204, 0x100, 7),
        ]);
        push(vec![
            br(m, 0x10c, 0x208, 9),
            br(m, 0x10c, 0x100, 20),
            br(m, 0x1f0, 0x100, 3),
            br(m, 0x1e0, 0x1f0, 0),
        ]);
        let t = lbr_time(&set, None, &Fours);
        assert_eq!((t.stacks, t.measured, t.without_cycles), (2, 5, 0));
        assert_eq!(t.ranges.len(), 2);
        let l = &t.ranges[0];
        assert_eq!((l.start, l.end), (Svma(0x100), Svma(0x10c)));
        assert_eq!((l.count, l.cycles), (4, 12 + 10 + 9 + 20));
        let one = &t.ranges[1];
        assert_eq!(
            (one.start, one.end, one.cycles),
            (Svma(0x1f0), Svma(0x1f0), 3)
        );
        assert_eq!(t.total_cycles(), 54);
        // Windows: sample 1 all loop (22 cycles), sample 2 loop 29 of 32 cycles; the mean
        // window 27 cycles; the loop's share the mean composition (1 + 29/32) / 2.
        let per = t.per_instruction();
        let want = (1.0 + 29.0 / 32.0) / 2.0;
        assert!((per[&Location::new(m, 0x104)] - want * 27.0 / 4.0).abs() < 1e-9);
        // Shares of two groups: the loop (0x100..0x10c) and the rest.
        let s = t.shares(
            2,
            &|l: Location| Some(usize::from(l.svma.0 >= 0x1f0)),
            200,
            0.95,
            7,
        );
        let want = (1.0 + 29.0 / 32.0) / 2.0;
        assert!((s[0].0 - want).abs() < 1e-12, "{s:?}");
        assert!(s[0].1 <= want && want <= s[0].2, "{s:?}");
        // Windows: both stacks measured the loop, only the second the range at 0x1f0; a
        // third group nothing.
        let w = t.windows(3, &|l: Location| Some(usize::from(l.svma.0 >= 0x1f0)));
        assert_eq!(w, vec![2, 1, 0]);
    }
}
