//! Running-state timelines (seed 002 §4): one resource, a sequence of *runs* (a task holding
//! the resource for a number of consecutive resource units).
//!
//! A per-unit representation of the paper's 1M-unit timelines would be 1e6 entries per cell
//! and 1e10 steps for the full reproduction; a sampler only observes which run contains each
//! sample point, so the timeline is stored as runs (end offset + task) and the sampler looks
//! runs up through a bucket index ([`RunIndex`]), O(1) amortised per sample.

use crate::SimError;
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

/// How long a task keeps the resource once scheduled (its *running granularity*, seed 002
/// §3.2 (i)), in resource units.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Granularity {
    /// Always exactly this many units (the paper's experiments).
    Constant {
        /// Units per run, at least 1.
        units: u64,
    },
    /// Exponentially distributed with this mean, rounded up to whole units (at least 1).
    Exponential {
        /// Mean units per run, at least 1.
        mean: f64,
    },
    /// Uniform integer in `lo..=hi`.
    Uniform {
        /// Smallest run, at least 1.
        lo: u64,
        /// Largest run, at least `lo`.
        hi: u64,
    },
}

impl Granularity {
    /// A constant granularity.
    pub fn constant(units: u64) -> Granularity {
        Granularity::Constant { units }
    }

    /// Expected units per run.
    pub fn mean(&self) -> f64 {
        match *self {
            Granularity::Constant { units } => units as f64,
            // ceil of an exponential with mean m: geometric with mean 1/(1-exp(-1/m)).
            Granularity::Exponential { mean } => 1.0 / (1.0 - (-1.0 / mean).exp()),
            Granularity::Uniform { lo, hi } => (lo + hi) as f64 / 2.0,
        }
    }

    fn validate(&self, task: &str) -> Result<(), SimError> {
        let ok = match *self {
            Granularity::Constant { units } => units >= 1,
            Granularity::Exponential { mean } => mean.is_finite() && mean >= 1.0,
            Granularity::Uniform { lo, hi } => lo >= 1 && hi >= lo,
        };
        if ok {
            Ok(())
        } else {
            Err(SimError::InvalidScenario {
                what: format!("task {task:?} has granularity {self:?}"),
                fix: "give every task a granularity of at least 1 unit (and lo <= hi)",
            })
        }
    }

    fn draw(&self, rng: &mut ChaCha8Rng) -> u64 {
        match *self {
            Granularity::Constant { units } => units,
            Granularity::Exponential { mean } => {
                let u: f64 = rng.gen::<f64>();
                // 1 - u is in (0, 1]: ln is finite.
                ((-(1.0 - u).ln() * mean).ceil() as u64).max(1)
            }
            Granularity::Uniform { lo, hi } => rng.gen_range(lo..=hi),
        }
    }
}

/// One task of a scenario.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskSpec {
    /// Name printed in tables (`idle` for idle time).
    pub name: String,
    /// Long-run share of the resource units, in (0, 1].
    pub share: f64,
    /// Running granularity.
    pub granularity: Granularity,
}

impl TaskSpec {
    /// A task with a constant granularity.
    pub fn new(name: impl Into<String>, share: f64, granularity: u64) -> TaskSpec {
        TaskSpec {
            name: name.into(),
            share,
            granularity: Granularity::constant(granularity),
        }
    }
}

/// A random running-state scenario: tasks (idle time is a task named `idle`) sharing one
/// resource for `units` resource units.
///
/// Generation (seed 002 §4 leaves the scheduler open; this is the reading chosen): each run's
/// task is drawn independently with probability `pi_k ∝ share_k / E[g_k]` and holds the
/// resource for one granularity draw; consecutive draws of the same task merge into one longer
/// run (the task "was not switched out"). The expected share of task k is then exactly
/// `share_k`. The realised share of one timeline varies around it, as the paper's "mean of
/// running states" column does. Implementation: the next *different* task is drawn from `pi`
/// without the previous task, and the number of merged draws is `1 + Geometric(pi_k)`, which is
/// the same distribution with no wasted draws.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Scenario {
    /// Length of the timeline in resource units. Default 1,000,000 (seed 002 §5.2.1).
    pub units: u64,
    /// The tasks; shares must sum to 1.
    pub tasks: Vec<TaskSpec>,
}

impl Default for Scenario {
    fn default() -> Self {
        Scenario {
            units: 1_000_000,
            tasks: vec![TaskSpec::new("task", 1.0, 1)],
        }
    }
}

impl Scenario {
    /// One task at utilisation `util` with constant granularity `g`, the rest idle time with
    /// granularity 1 (seed 002 §5.2.1; idle granularity 1 as in Table 4).
    pub fn single(units: u64, util: f64, g: u64) -> Scenario {
        Scenario {
            units,
            tasks: vec![
                TaskSpec::new("task", util, g),
                TaskSpec::new("idle", 1.0 - util, 1),
            ],
        }
    }

    /// The mix of seed 002 §5.2.2 / Table 4: idle 20% (granularity 1), task 1 30% at 30,
    /// task 2 20% at 50, task 3 20% at 150, task 4 10% at 280.
    pub fn paper_mix(units: u64) -> Scenario {
        Scenario {
            units,
            tasks: vec![
                TaskSpec::new("idle", 0.2, 1),
                TaskSpec::new("1", 0.3, 30),
                TaskSpec::new("2", 0.2, 50),
                TaskSpec::new("3", 0.2, 150),
                TaskSpec::new("4", 0.1, 280),
            ],
        }
    }

    /// Checks shares, granularities and length.
    pub fn validate(&self) -> Result<(), SimError> {
        if self.units == 0 {
            return Err(SimError::InvalidScenario {
                what: "the timeline has 0 units".into(),
                fix: "use at least one sampling interval worth of units",
            });
        }
        if self.tasks.is_empty() || self.tasks.len() > u32::MAX as usize {
            return Err(SimError::InvalidScenario {
                what: format!("{} tasks", self.tasks.len()),
                fix: "give at least one task (idle time is a task named \"idle\")",
            });
        }
        let mut sum = 0.0;
        for t in &self.tasks {
            if !(t.share > 0.0 && t.share <= 1.0) {
                return Err(SimError::InvalidScenario {
                    what: format!("task {:?} has share {}", t.name, t.share),
                    fix: "shares must lie in (0, 1]",
                });
            }
            t.granularity.validate(&t.name)?;
            sum += t.share;
        }
        if (sum - 1.0).abs() > 1e-6 {
            return Err(SimError::InvalidScenario {
                what: format!("shares sum to {sum}"),
                fix: "make the shares (idle included) sum to 1",
            });
        }
        Ok(())
    }

    /// Draws one timeline.
    pub fn generate(&self, rng: &mut ChaCha8Rng) -> Result<Timeline, SimError> {
        self.validate()?;
        let w: Vec<f64> = self
            .tasks
            .iter()
            .map(|t| t.share / t.granularity.mean())
            .collect();
        let wsum: f64 = w.iter().sum();
        let pi: Vec<f64> = w.iter().map(|x| x / wsum).collect();
        let mut tl = Timeline::new(self.tasks.iter().map(|t| t.name.clone()).collect());
        let mut prev: Option<usize> = None;
        let mut pos = 0u64;
        while pos < self.units {
            let k = if self.tasks.len() == 1 {
                0
            } else {
                pick_excluding(&pi, prev, rng)
            };
            // Number of merged consecutive draws: 1 + Geometric(pi_k) (failures before the
            // first draw of another task).
            let extra = if pi[k] >= 1.0 {
                u64::MAX
            } else {
                let u: f64 = rng.gen::<f64>();
                let x = ((1.0 - u).ln() / pi[k].ln()).floor();
                if x.is_finite() && x >= 0.0 {
                    x.min(1e15) as u64
                } else {
                    0
                }
            };
            let remaining = self.units - pos;
            let len = match self.tasks[k].granularity {
                Granularity::Constant { units } => {
                    units.saturating_mul(extra.saturating_add(1)).min(remaining)
                }
                g => {
                    let mut len = 0u64;
                    let mut i = 0u64;
                    while i <= extra && len < remaining {
                        len += g.draw(rng);
                        i += 1;
                    }
                    len.min(remaining)
                }
            };
            tl.push(k as u32, len);
            pos += len;
            prev = Some(k);
        }
        Ok(tl)
    }
}

fn pick_excluding(pi: &[f64], prev: Option<usize>, rng: &mut ChaCha8Rng) -> usize {
    let total = 1.0 - prev.map_or(0.0, |p| pi[p]);
    let mut x = rng.gen::<f64>() * total;
    let mut last = 0;
    for (i, &p) in pi.iter().enumerate() {
        if Some(i) == prev {
            continue;
        }
        last = i;
        if x < p {
            return i;
        }
        x -= p;
    }
    last
}

/// A running-state timeline: consecutive runs covering `0..len()` resource units.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Timeline {
    /// Task names, indexed by the task ids in the runs.
    pub task_names: Vec<String>,
    /// End offset (exclusive) of each run; run `j` covers `ends[j-1]..ends[j]`.
    ends: Vec<u64>,
    /// Task of each run.
    tasks: Vec<u32>,
}

impl Timeline {
    /// An empty timeline over these tasks.
    pub fn new(task_names: Vec<String>) -> Timeline {
        Timeline {
            task_names,
            ends: Vec::new(),
            tasks: Vec::new(),
        }
    }

    /// Appends a run of `len` units of `task` (merged with the previous run when the task is
    /// the same; ignored when `len` is 0). An id outside `task_names` is reported by
    /// [`Timeline::validate`].
    pub fn push(&mut self, task: u32, len: u64) {
        if len == 0 {
            return;
        }
        let end = self.len() + len;
        if self.tasks.last() == Some(&task) {
            if let Some(e) = self.ends.last_mut() {
                *e = end;
            }
        } else {
            self.tasks.push(task);
            self.ends.push(end);
        }
    }

    /// Checks that every run names an existing task and the timeline is not empty.
    pub fn validate(&self) -> Result<(), SimError> {
        if self.ends.is_empty() {
            return Err(SimError::InvalidScenario {
                what: "the timeline is empty".into(),
                fix: "push at least one run",
            });
        }
        if let Some(t) = self
            .tasks
            .iter()
            .find(|&&t| t as usize >= self.task_names.len())
        {
            return Err(SimError::InvalidScenario {
                what: format!(
                    "a run names task {t} but only {} tasks exist",
                    self.task_names.len()
                ),
                fix: "name every task in task_names",
            });
        }
        Ok(())
    }

    /// A strictly periodic task: `on` units of task 0 then `period - on` units of task 1,
    /// repeated over `units` units (the aliasing case of seed 001 §4). `period` is at least 1
    /// and `on` at most `period`.
    pub fn periodic(units: u64, period: u64, on: u64) -> Timeline {
        let period = period.max(1);
        let on = on.min(period);
        let mut tl = Timeline::new(vec!["periodic".into(), "rest".into()]);
        while tl.len() < units {
            let left = units - tl.len();
            tl.push(0, on.min(left));
            let left = units - tl.len();
            tl.push(1, (period - on).min(left));
        }
        tl
    }

    /// Length in resource units.
    pub fn len(&self) -> u64 {
        self.ends.last().copied().unwrap_or(0)
    }

    /// Whether the timeline has no runs.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Number of runs (after merging).
    pub fn num_runs(&self) -> usize {
        self.ends.len()
    }

    /// Runs as `(task, start, end)`.
    pub fn runs(&self) -> impl Iterator<Item = (u32, u64, u64)> + '_ {
        self.tasks.iter().enumerate().map(move |(j, &t)| {
            let start = if j == 0 { 0 } else { self.ends[j - 1] };
            (t, start, self.ends[j])
        })
    }

    /// Actual share of the units held by each task.
    pub fn actual_shares(&self) -> Vec<f64> {
        let mut units = vec![0u64; self.task_names.len()];
        for (t, s, e) in self.runs() {
            units[t as usize] += e - s;
        }
        let total = self.len().max(1) as f64;
        units.iter().map(|&u| u as f64 / total).collect()
    }

    pub(crate) fn ends(&self) -> &[u64] {
        &self.ends
    }

    pub(crate) fn task_ids(&self) -> &[u32] {
        &self.tasks
    }
}

/// Bucket index over a timeline: for every bucket `b` of `width` units, the first run that
/// ends after `b * width`. Finding the run at time `t` starts at bucket `t / width` and walks
/// forward over at most the runs ending inside that bucket. Memory: `len / width` u32.
#[derive(Debug, Clone)]
pub struct RunIndex {
    width: u64,
    first: Vec<u32>,
}

impl RunIndex {
    /// Builds the index with buckets of `width` units (use the sampling interval).
    pub fn new(tl: &Timeline, width: u64) -> RunIndex {
        let width = width.max(1);
        let nb = tl.len().div_ceil(width) as usize;
        let mut first = Vec::with_capacity(nb);
        let ends = tl.ends();
        let mut j = 0usize;
        for b in 0..nb as u64 {
            let t = b * width;
            while j < ends.len() && ends[j] <= t {
                j += 1;
            }
            first.push(j as u32);
        }
        RunIndex { width, first }
    }

    /// Index of the run containing unit `t` (`t < tl.len()`), starting the walk no earlier
    /// than `hint` (pass the previous answer for monotone queries, or 0).
    #[inline]
    pub fn find(&self, tl: &Timeline, t: u64, hint: usize) -> usize {
        let ends = tl.ends();
        let last = ends.len().saturating_sub(1);
        let b = (t / self.width) as usize;
        let lo = hint
            .max(self.first.get(b).copied().unwrap_or(0) as usize)
            .min(last);
        // The run containing `t` ends in this bucket or is the first one ending after it.
        let hi = self
            .first
            .get(b + 1)
            .map_or(last, |&x| x as usize)
            .clamp(lo, last);
        lo + ends[lo..=hi].partition_point(|&e| e <= t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn push_merges_and_shares_add_up() {
        let mut tl = Timeline::new(vec!["a".into(), "b".into()]);
        tl.push(0, 3);
        tl.push(0, 2);
        tl.push(1, 5);
        tl.push(1, 0);
        assert_eq!(tl.num_runs(), 2);
        assert_eq!(tl.len(), 10);
        assert_eq!(tl.actual_shares(), vec![0.5, 0.5]);
        assert_eq!(tl.runs().collect::<Vec<_>>(), vec![(0, 0, 5), (1, 5, 10)]);
    }

    #[test]
    fn index_finds_the_run_of_every_unit() {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let tl = Scenario::paper_mix(20_000).generate(&mut rng).unwrap();
        let idx = RunIndex::new(&tl, 100);
        let runs: Vec<_> = tl.runs().collect();
        for t in (0..tl.len()).step_by(7) {
            let j = idx.find(&tl, t, 0);
            assert!(runs[j].1 <= t && t < runs[j].2, "unit {t} run {j}");
        }
    }

    #[test]
    fn generated_shares_are_near_targets_and_runs_alternate() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let sc = Scenario::paper_mix(1_000_000);
        let tl = sc.generate(&mut rng).unwrap();
        assert_eq!(tl.len(), 1_000_000);
        let sh = tl.actual_shares();
        for (t, s) in sc.tasks.iter().zip(&sh) {
            assert!((t.share - s).abs() < 0.02, "{} {} {}", t.name, t.share, s);
        }
        let ids = tl.task_ids();
        assert!(ids.windows(2).all(|w| w[0] != w[1]));
    }

    #[test]
    fn bad_scenarios_are_errors() {
        let mut sc = Scenario::single(1000, 0.5, 10);
        sc.tasks[0].share = 0.7;
        assert!(matches!(
            sc.validate(),
            Err(SimError::InvalidScenario { .. })
        ));
        let sc = Scenario {
            units: 10,
            tasks: vec![TaskSpec::new("a", 1.0, 0)],
        };
        assert!(sc.validate().is_err());
    }
}
