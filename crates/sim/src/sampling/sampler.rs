//! The sampler (seed 002 §3.3 eq. 2, §4, §5.3 eq. 10) and repeated profiling.

use super::timeline::{RunIndex, Timeline};
use crate::SimError;
use proftrust_metrics::{wilson_interval, Z_95};
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use rand_distr::StandardNormal;
use serde::{Deserialize, Serialize};

/// Where the first sample falls.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "value")]
pub enum Start {
    /// `t0 ~ U{0, .., T-1}`, independent of everything else (seed 002 §3.3, eq. 2): the
    /// assumption the unbiasedness proof rests on.
    Random,
    /// The same `t0` in every repetition (what a periodic timer started in lock-step with a
    /// periodic workload does).
    Fixed(u64),
}

/// Noise on the distance between two samples.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "value")]
pub enum IntervalJitter {
    /// Every interval is exactly `T` (eq. 2).
    None,
    /// Period randomisation of seed 001 §4 (Wu & Mencer): each interval is `T + U{0, .., max}`;
    /// their choice is `max = T/8`.
    UniformUpTo(u64),
    /// Seed 002 §4's interval noise ("The sampling interval would keep stable roughly with
    /// little variance. We add random noise into the sampling interval"): each interval is
    /// `T + U{-j, .., j}`, mean `T` (the paper gives neither the distribution nor its size;
    /// a symmetric uniform keeps the mean interval at `T`). Needs `j < T`.
    Symmetric(u64),
}

/// Sampler settings.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SamplerOptions {
    /// Sampling interval `T` in resource units. Default 100 (seed 002 §5.2.1).
    pub interval: u64,
    /// First sample. Default [`Start::Random`].
    pub start: Start,
    /// Interval noise. Default [`IntervalJitter::None`].
    pub jitter: IntervalJitter,
    /// Standard deviation `sigma` of the noise on the unit of events: each sample counts
    /// `U * (1 + N(0, sigma))` events, `U = T` (seed 002 §5.3, eq. 10). Default 0 (no noise).
    /// As in the paper, the factor is not clipped: with `sigma >= 1` a sample can count a
    /// negative number of events; shares are ratios of sums and stay unbiased to O(1/n).
    pub unit_noise_sigma: f64,
}

impl Default for SamplerOptions {
    fn default() -> Self {
        SamplerOptions {
            interval: 100,
            start: Start::Random,
            jitter: IntervalJitter::None,
            unit_noise_sigma: 0.0,
        }
    }
}

impl SamplerOptions {
    /// Checks the options.
    pub fn validate(&self) -> Result<(), SimError> {
        if self.interval == 0 {
            return Err(SimError::InvalidSampler {
                what: "interval 0".into(),
                fix: "use an interval of at least 1 unit",
            });
        }
        if let Start::Fixed(t0) = self.start {
            if t0 >= self.interval {
                return Err(SimError::InvalidSampler {
                    what: format!("fixed start {t0} >= interval {}", self.interval),
                    fix: "choose a start inside the first interval",
                });
            }
        }
        if let IntervalJitter::Symmetric(j) = self.jitter {
            if j >= self.interval {
                return Err(SimError::InvalidSampler {
                    what: format!("interval noise ±{j} >= interval {}", self.interval),
                    fix: "keep the interval noise below the interval",
                });
            }
        }
        if !(self.unit_noise_sigma.is_finite() && self.unit_noise_sigma >= 0.0) {
            return Err(SimError::InvalidSampler {
                what: format!("unit noise sigma {}", self.unit_noise_sigma),
                fix: "use a finite sigma >= 0",
            });
        }
        Ok(())
    }
}

/// What one profiling run saw.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Profile {
    /// Samples that landed in each task.
    pub counts: Vec<u64>,
    /// Events attributed to each task (sum of the samples' units, eq. 10).
    pub events: Vec<f64>,
    /// Number of samples.
    pub samples: u64,
}

impl Profile {
    /// Profiled share of each task: its events over all events (seed 002 §2.2: each sample's
    /// unit of events is attributed to the task it lands in).
    pub fn shares(&self) -> Vec<f64> {
        let total: f64 = self.events.iter().sum();
        if total == 0.0 {
            return vec![0.0; self.events.len()];
        }
        self.events.iter().map(|e| e / total).collect()
    }
}

/// Profiles `tl` once. Cost: O(samples + runs touched), independent of the number of units
/// between samples.
pub fn profile_once(
    tl: &Timeline,
    idx: &RunIndex,
    opts: &SamplerOptions,
    rng: &mut ChaCha8Rng,
    out: &mut Profile,
) {
    let k = tl.task_names.len();
    out.counts.clear();
    out.counts.resize(k, 0);
    out.events.clear();
    out.events.resize(k, 0.0);
    out.samples = 0;
    let len = tl.len();
    let t_int = opts.interval;
    if t_int == 0 {
        return;
    }
    let mut t = match opts.start {
        Start::Random => rng.gen_range(0..t_int),
        Start::Fixed(t0) => t0,
    };
    let ids = tl.task_ids();
    let unit = t_int as f64;
    let sigma = opts.unit_noise_sigma;
    let mut j = 0usize;
    while t < len {
        j = idx.find(tl, t, j);
        let task = ids[j] as usize;
        out.counts[task] += 1;
        let w = if sigma > 0.0 {
            let z: f64 = rng.sample(StandardNormal);
            unit * (1.0 + sigma * z)
        } else {
            unit
        };
        out.events[task] += w;
        out.samples += 1;
        t += match opts.jitter {
            IntervalJitter::None => t_int,
            IntervalJitter::UniformUpTo(0) => t_int,
            IntervalJitter::UniformUpTo(m) => t_int + rng.gen_range(0..=m),
            IntervalJitter::Symmetric(0) => t_int,
            // j < T (validated), so every step is at least 1.
            IntervalJitter::Symmetric(j) => (t_int - j.min(t_int - 1)) + rng.gen_range(0..=2 * j),
        };
    }
}

/// Sample counts per task for every start `t0 in 0..T` of a jitter-free sampler.
///
/// With a constant interval the sample points are `t0 + i*T`: the whole profile is a function
/// of `t0` alone. A run `[s, e)` of length `l` receives `int(l/T)` samples for every `t0`,
/// plus one more for the `MOD(l, T)` residues `t0` in the cyclic range
/// `[s mod T, s mod T + MOD(l, T))` (the piecewise binomial of seed 002 eq. 5, exactly). A
/// difference array over residues builds the table in O(runs + T * tasks), after which a
/// repetition costs O(tasks) whatever the number of samples.
#[derive(Debug, Clone)]
pub struct StartTable {
    interval: u64,
    tasks: usize,
    /// `counts[t0 * tasks + k]`.
    counts: Vec<u64>,
}

impl StartTable {
    /// Largest interval for which a table is built (memory `T * tasks * 8` bytes).
    pub const MAX_INTERVAL: u64 = 1 << 20;

    /// Builds the table; `None` when `interval` exceeds [`StartTable::MAX_INTERVAL`] or is 0.
    pub fn new(tl: &Timeline, interval: u64) -> Option<StartTable> {
        if interval == 0 || interval > Self::MAX_INTERVAL {
            return None;
        }
        let t = interval;
        let k = tl.task_names.len();
        let tu = t as usize;
        let mut base = vec![0i64; k];
        let mut diff = vec![0i64; (tu + 1) * k];
        for (task, s, e) in tl.runs() {
            let task = task as usize;
            let l = e - s;
            base[task] += (l / t) as i64;
            let rem = (l % t) as usize;
            if rem == 0 {
                continue;
            }
            let a = (s % t) as usize;
            if a + rem <= tu {
                diff[a * k + task] += 1;
                diff[(a + rem) * k + task] -= 1;
            } else {
                diff[a * k + task] += 1;
                diff[tu * k + task] -= 1;
                diff[task] += 1;
                diff[(a + rem - tu) * k + task] -= 1;
            }
        }
        let mut counts = vec![0u64; tu * k];
        let mut run = vec![0i64; k];
        for r in 0..tu {
            for task in 0..k {
                run[task] += diff[r * k + task];
                counts[r * k + task] = (base[task] + run[task]).max(0) as u64;
            }
        }
        Some(StartTable {
            interval: t,
            tasks: k,
            counts,
        })
    }

    /// Sample counts per task for start `t0` (taken modulo `T`).
    pub fn counts(&self, t0: u64) -> &[u64] {
        let r = (t0 % self.interval) as usize;
        &self.counts[r * self.tasks..(r + 1) * self.tasks]
    }
}

/// Profiles once through a [`StartTable`]. Unit noise is drawn per task: the events of task
/// k are `U * sum_{i in k} (1 + sigma z_i) = U (c_k + sigma sqrt(c_k) Z_k)` with one standard
/// normal `Z_k`, which has exactly the distribution of the per-sample sum (a sum of `c_k`
/// independent `N(0, 1)` is `N(0, c_k)`), so the result is distributed as
/// [`profile_once`]'s.
pub fn profile_from_table(
    table: &StartTable,
    opts: &SamplerOptions,
    rng: &mut ChaCha8Rng,
    out: &mut Profile,
) {
    let t0 = match opts.start {
        Start::Random => rng.gen_range(0..table.interval),
        Start::Fixed(t0) => t0,
    };
    let c = table.counts(t0);
    out.counts.clear();
    out.counts.extend_from_slice(c);
    out.samples = c.iter().sum();
    let unit = opts.interval as f64;
    let sigma = opts.unit_noise_sigma;
    out.events.clear();
    for &ck in c {
        let x = ck as f64;
        let e = if sigma > 0.0 && ck > 0 {
            let z: f64 = rng.sample(StandardNormal);
            x + sigma * x.sqrt() * z
        } else {
            x
        };
        out.events.push(unit * e);
    }
}

/// Per-task results of repeated profiling.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Repeated {
    /// Profiled share of each task in each repetition, `reps x tasks`, row-major.
    pub shares: Vec<f64>,
    /// Repetitions whose 95% Wilson interval contained the actual share, per task.
    pub covered: Vec<u64>,
    /// The same with the interval's half-widths multiplied by
    /// [`noise_inflation`](super::noise_inflation)`(sigma)` (equal to `covered` when
    /// `sigma = 0`).
    pub covered_widened: Vec<u64>,
    /// Samples over all repetitions.
    pub samples: u64,
    /// Number of repetitions.
    pub reps: u64,
}

impl Repeated {
    /// Appends another chunk of repetitions.
    pub fn extend(&mut self, o: Repeated) {
        if self.covered.is_empty() {
            self.covered = o.covered;
            self.covered_widened = o.covered_widened;
        } else {
            for (a, b) in self.covered.iter_mut().zip(o.covered) {
                *a += b;
            }
            for (a, b) in self.covered_widened.iter_mut().zip(o.covered_widened) {
                *a += b;
            }
        }
        self.shares.extend(o.shares);
        self.samples += o.samples;
        self.reps += o.reps;
    }

    /// Mean and (n-1) standard deviation of task `k`'s profiled share.
    pub fn mean_sd(&self, k: usize, tasks: usize) -> (f64, f64) {
        let vals = self.shares.iter().skip(k).step_by(tasks.max(1));
        mean_sd(vals.copied())
    }

    /// Smallest and largest profiled share of task `k` (0, 0 without repetitions).
    pub fn min_max(&self, k: usize, tasks: usize) -> (f64, f64) {
        let vals = self.shares.iter().skip(k).step_by(tasks.max(1));
        let (lo, hi) = vals.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &x| {
            (lo.min(x), hi.max(x))
        });
        if lo.is_finite() {
            (lo, hi)
        } else {
            (0.0, 0.0)
        }
    }
}

/// Mean and sample standard deviation (n-1 denominator; 0 for fewer than two values), by
/// Welford's update.
pub fn mean_sd(vals: impl Iterator<Item = f64>) -> (f64, f64) {
    let (mut n, mut mean, mut m2) = (0u64, 0.0f64, 0.0f64);
    for x in vals {
        n += 1;
        let d = x - mean;
        mean += d / n as f64;
        m2 += d * (x - mean);
    }
    let sd = if n > 1 {
        (m2 / (n - 1) as f64).sqrt()
    } else {
        0.0
    };
    (mean, sd)
}

/// Profiles `tl` `reps` times with fresh randomness each time (start, jitter, noise), and
/// records whether the 95% Wilson interval of each profile contains the actual share.
/// Without jitter the repetitions go through a [`StartTable`] (O(tasks) each); with jitter
/// every sample is placed by [`profile_once`].
///
/// The Wilson interval is taken on `round(share * n)` of `n` samples: with unit noise the
/// share is a ratio of noisy event sums, and this is the interval `audit` would print from the
/// share and the number of samples. `covered_widened` counts the same interval widened about
/// its centre by `noise_inflation(sigma)` (seed 002 eq. 10: unit noise multiplies the
/// variance of a share by `1 + sigma^2` to first order; see
/// [`timeline_moments`](super::timeline_moments)).
pub fn repeat(
    tl: &Timeline,
    idx: &RunIndex,
    opts: &SamplerOptions,
    actual: &[f64],
    reps: u64,
    rng: &mut ChaCha8Rng,
) -> Repeated {
    let k = tl.task_names.len();
    let mut res = Repeated {
        shares: Vec::with_capacity(reps as usize * k),
        covered: vec![0; k],
        covered_widened: vec![0; k],
        samples: 0,
        reps,
    };
    let mut p = Profile::default();
    let table = match opts.jitter {
        IntervalJitter::None | IntervalJitter::UniformUpTo(0) | IntervalJitter::Symmetric(0) => {
            StartTable::new(tl, opts.interval)
        }
        IntervalJitter::UniformUpTo(_) | IntervalJitter::Symmetric(_) => None,
    };
    for _ in 0..reps {
        match &table {
            Some(t) => profile_from_table(t, opts, rng, &mut p),
            None => profile_once(tl, idx, opts, rng, &mut p),
        }
        res.samples += p.samples;
        let sh = p.shares();
        for (i, &s) in sh.iter().enumerate() {
            let succ = (s * p.samples as f64).round().clamp(0.0, p.samples as f64) as u64;
            let (lo, hi) = wilson_interval(succ, p.samples, Z_95);
            if actual.get(i).is_some_and(|&a| lo <= a && a <= hi) {
                res.covered[i] += 1;
            }
            let (wlo, whi) = super::widen_interval((lo, hi), opts.unit_noise_sigma);
            if actual.get(i).is_some_and(|&a| wlo <= a && a <= whi) {
                res.covered_widened[i] += 1;
            }
        }
        res.shares.extend(sh);
    }
    res
}

/// Number of sample points `t0 + i*T` (i >= 0) below `x`.
#[inline]
fn points_below(x: u64, t0: u64, t: u64) -> u64 {
    if x <= t0 {
        0
    } else {
        (x - t0 - 1) / t + 1
    }
}

/// Number of samples each run of `task` with exactly `run_len` units receives when sampling
/// starts at `t0` with a jitter-free interval `T`: returns (runs, mean, population variance)
/// of those counts. Seed 002 §3.4 eqs. 5-6 predict mean `r` and variance
/// `MOD(r,1)(1-MOD(r,1))` with `r = run_len / T`.
pub fn run_capture_moments(
    tl: &Timeline,
    task: u32,
    run_len: u64,
    t0: u64,
    interval: u64,
) -> (u64, f64, f64) {
    let (mut n, mut s, mut s2) = (0u64, 0.0f64, 0.0f64);
    for (tk, a, b) in tl.runs() {
        if tk == task && b - a == run_len {
            let c = (points_below(b, t0, interval) - points_below(a, t0, interval)) as f64;
            n += 1;
            s += c;
            s2 += c * c;
        }
    }
    if n == 0 {
        return (0, 0.0, 0.0);
    }
    let mean = s / n as f64;
    (n, mean, (s2 / n as f64 - mean * mean).max(0.0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn periodic_timeline_fixed_start_hits_the_same_phase() {
        // period 100 = T, task on for 30 units: t0 = 10 always lands in the task, t0 = 50 never.
        let tl = Timeline::periodic(10_000, 100, 30);
        let idx = RunIndex::new(&tl, 100);
        let mut rng = ChaCha8Rng::seed_from_u64(0);
        let mut p = Profile::default();
        let mut o = SamplerOptions {
            start: Start::Fixed(10),
            ..Default::default()
        };
        profile_once(&tl, &idx, &o, &mut rng, &mut p);
        assert_eq!(p.samples, 100);
        assert_eq!(p.counts, vec![100, 0]);
        o.start = Start::Fixed(50);
        profile_once(&tl, &idx, &o, &mut rng, &mut p);
        assert_eq!(p.counts, vec![0, 100]);
    }

    /// Seed 002 §4's interval noise on the aliasing case: period 100 = T, task on for 30
    /// units, fixed start 10. Without noise every sample lands at phase 10 (share 1, the
    /// test above). With `T ± 50` the phase after k samples is a sum of k independent
    /// U{-50..50} steps: it spreads over the period within a few samples, so the share
    /// tends to the duty cycle 30/100 (2000 samples: binomial SD ≈ 0.01, and 0.05 covers the
    /// few correlated samples at the start). `T ± 0` is the fixed interval exactly; `T ± 100`
    /// is refused.
    #[test]
    fn symmetric_interval_noise_removes_aliasing() {
        let tl = Timeline::periodic(200_000, 100, 30);
        let idx = RunIndex::new(&tl, 100);
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let mut p = Profile::default();
        let mut o = SamplerOptions {
            start: Start::Fixed(10),
            jitter: IntervalJitter::Symmetric(0),
            ..Default::default()
        };
        profile_once(&tl, &idx, &o, &mut rng, &mut p);
        assert_eq!(p.counts, vec![2000, 0]);
        o.jitter = IntervalJitter::Symmetric(50);
        o.validate().unwrap();
        profile_once(&tl, &idx, &o, &mut rng, &mut p);
        // Mean interval T: the 200000 units hold about 2000 samples.
        assert!((p.samples as f64 - 2000.0).abs() < 100.0, "{}", p.samples);
        let share = p.shares()[0];
        assert!((share - 0.3).abs() < 0.05, "share {share}");
        o.jitter = IntervalJitter::Symmetric(100);
        assert!(o.validate().is_err());
    }

    #[test]
    fn hand_counted_capture() {
        // runs: a [0,150) b [150,250) a [250,330); T = 100, t0 = 20: samples 20,120 (a),
        // 220 (b), 320 (a).
        let mut tl = Timeline::new(vec!["a".into(), "b".into()]);
        tl.push(0, 150);
        tl.push(1, 100);
        tl.push(0, 80);
        let idx = RunIndex::new(&tl, 100);
        let mut rng = ChaCha8Rng::seed_from_u64(0);
        let mut p = Profile::default();
        let o = SamplerOptions {
            start: Start::Fixed(20),
            ..Default::default()
        };
        profile_once(&tl, &idx, &o, &mut rng, &mut p);
        assert_eq!(p.counts, vec![3, 1]);
        assert_eq!(p.shares(), vec![0.75, 0.25]);
        assert_eq!(run_capture_moments(&tl, 0, 150, 20, 100), (1, 2.0, 0.0));
        assert_eq!(run_capture_moments(&tl, 0, 80, 20, 100), (1, 1.0, 0.0));
    }

    #[test]
    fn start_table_equals_the_walk_for_every_start() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let tl = crate::sampling::Scenario::paper_mix(123_457)
            .generate(&mut rng)
            .unwrap();
        let idx = RunIndex::new(&tl, 100);
        let table = StartTable::new(&tl, 100).unwrap();
        let mut p = Profile::default();
        for t0 in 0..100 {
            let o = SamplerOptions {
                start: Start::Fixed(t0),
                ..Default::default()
            };
            profile_once(&tl, &idx, &o, &mut rng, &mut p);
            assert_eq!(table.counts(t0), &p.counts[..], "t0 {t0}");
        }
    }

    #[test]
    fn mean_sd_hand_computed() {
        let (m, s) = mean_sd([2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0].into_iter());
        assert!((m - 5.0).abs() < 1e-12);
        assert!((s - (32.0f64 / 7.0).sqrt()).abs() < 1e-12);
    }
}
