//! Timed path samples, grouped by signature.
//!
//! Every source (virtual PMU, LBR, probes) turns what it saw into one [`PathTimings`]: per
//! [`PathSignature`] the exact histogram of the times observed (times are integers: cycles
//! or TSC ticks). The histogram keeps everything the analysis needs — count, total, minimum
//! and the deltas — in memory bounded by the number of *distinct* times of a path, whatever
//! the number of executions.

use crate::signature::PathSignature;
use proftrust_model::Svma;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};

/// Unit of the times of a profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TimeUnit {
    /// Modelled or hardware core cycles (virtual PMU, LBR).
    Cycles,
    /// Time-stamp counter ticks (probes).
    TscTicks,
}

impl TimeUnit {
    /// Short name for tables.
    pub fn name(self) -> &'static str {
        match self {
            TimeUnit::Cycles => "cycles",
            TimeUnit::TscTicks => "ticks",
        }
    }
}

/// One timed execution of a path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimedPathSample {
    /// Which path.
    pub signature: PathSignature,
    /// How long it took.
    pub time: u64,
}

/// The times observed for one path: `time -> occurrences`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PathTimes {
    hist: BTreeMap<u64, u64>,
    count: u64,
    total: u128,
}

impl PathTimes {
    /// Records one execution taking `t`.
    pub fn add(&mut self, t: u64) {
        self.add_n(t, 1);
    }
    /// Records `n` executions taking `t` each.
    pub fn add_n(&mut self, t: u64, n: u64) {
        if n == 0 {
            return;
        }
        *self.hist.entry(t).or_insert(0) += n;
        self.count += n;
        self.total += u128::from(t) * u128::from(n);
    }
    /// Adds all of `o`.
    pub fn merge(&mut self, o: &PathTimes) {
        for (&t, &n) in &o.hist {
            self.add_n(t, n);
        }
    }
    /// Executions recorded.
    pub fn count(&self) -> u64 {
        self.count
    }
    /// Sum of the times.
    pub fn total(&self) -> u128 {
        self.total
    }
    /// Smallest time (seed 004's *basetime*), `None` when empty.
    pub fn min(&self) -> Option<u64> {
        self.hist.keys().next().copied()
    }
    /// Largest time.
    pub fn max(&self) -> Option<u64> {
        self.hist.keys().next_back().copied()
    }
    /// `(time, occurrences)` in increasing time.
    pub fn iter(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.hist.iter().map(|(&t, &n)| (t, n))
    }
    /// Number of distinct times.
    pub fn distinct(&self) -> usize {
        self.hist.len()
    }
}

/// What is known about a path besides its times (for display).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PathInfo {
    /// Function holding the path (or the probe site's `file:line`).
    pub function: String,
    /// Start addresses of its basic blocks, when the CFG is known.
    pub blocks: Vec<Svma>,
}

/// Timed path samples of one run.
#[derive(Debug, Clone)]
pub struct PathTimings {
    /// Unit of every time.
    pub unit: TimeUnit,
    /// Path executions each timed sample stands for: 1 when every execution was timed,
    /// about `(nCheck + nInstr) / nInstr` with bursty tracing.
    pub executions_per_sample: f64,
    /// The whole run's time in the same unit, when the source knows it (denominator of the
    /// shares); `None`: the timed paths' own total is used.
    pub program_time: Option<u64>,
    paths: HashMap<PathSignature, PathTimes>,
    /// Display information per path, where the source has it.
    pub info: HashMap<PathSignature, PathInfo>,
}

impl PathTimings {
    /// An empty set in `unit`, every execution timed, program time unknown.
    pub fn new(unit: TimeUnit) -> PathTimings {
        PathTimings {
            unit,
            executions_per_sample: 1.0,
            program_time: None,
            paths: HashMap::new(),
            info: HashMap::new(),
        }
    }
    /// Records one timed execution.
    pub fn add(&mut self, signature: PathSignature, time: u64) {
        self.paths.entry(signature).or_default().add(time);
    }
    /// Records a sample.
    pub fn add_sample(&mut self, s: &TimedPathSample) {
        self.add(s.signature.clone(), s.time);
    }
    /// Adds the times of one path.
    pub fn add_times(&mut self, signature: PathSignature, times: &PathTimes) {
        self.paths.entry(signature).or_default().merge(times);
    }
    /// The times of a path.
    pub fn get(&self, s: &PathSignature) -> Option<&PathTimes> {
        self.paths.get(s)
    }
    /// All paths (unordered).
    pub fn iter(&self) -> impl Iterator<Item = (&PathSignature, &PathTimes)> {
        self.paths.iter()
    }
    /// Number of distinct paths.
    pub fn len(&self) -> usize {
        self.paths.len()
    }
    /// True when nothing was timed.
    pub fn is_empty(&self) -> bool {
        self.paths.is_empty()
    }
    /// Timed samples in all.
    pub fn samples(&self) -> u64 {
        self.paths.values().map(PathTimes::count).sum()
    }
    /// Sum of all timed samples' times.
    pub fn total_time(&self) -> u128 {
        self.paths.values().map(PathTimes::total).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signature::BranchHistory;

    #[test]
    fn histogram_keeps_count_total_min() {
        let mut p = PathTimes::default();
        for t in [30, 10, 10, 50, 10] {
            p.add(t);
        }
        p.add_n(20, 2);
        p.add_n(99, 0);
        assert_eq!(p.count(), 7);
        assert_eq!(p.total(), 30 + 10 * 3 + 50 + 40);
        assert_eq!((p.min(), p.max(), p.distinct()), (Some(10), Some(50), 4));
        assert_eq!(
            p.iter().collect::<Vec<_>>(),
            vec![(10, 3), (20, 2), (30, 1), (50, 1)]
        );
        let mut t = PathTimings::new(TimeUnit::Cycles);
        let s = PathSignature::new(Svma(0x10), BranchHistory::from_bits(1, 1));
        t.add_times(s.clone(), &p);
        t.add_sample(&TimedPathSample {
            signature: s.clone(),
            time: 5,
        });
        assert_eq!((t.len(), t.samples(), t.total_time()), (1, 8, 155));
        assert_eq!(t.get(&s).unwrap().min(), Some(5));
    }
}
