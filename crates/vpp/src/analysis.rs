//! Path variational analysis (seed 004 §5).
//!
//! Per path `i` with timed samples `t_1..t_n` (after subtracting the instrumentation bias,
//! §4.2):
//!
//! * **basetime** `b_i = min_k t_k` (§5.1: "the minimum execution time we observe for a
//!   path");
//! * **deltas** `t_k − b_i` (§5.1: "how much extra time the path executed for"), shown as
//!   histograms (§5.2, Figs. 2 and 6);
//! * **net variation** (§5.1, the displayed equation):
//!   `NV(i) = total path execution time(i) − path frequency(i) × path basetime(i)`
//!   `= Σ_k t_k − n·b_i = Σ_k (t_k − b_i)`;
//! * only paths with **at least two samples** are kept (§5.1: "the minimum required for
//!   measuring variability");
//! * paths are **ranked** by NV (§5.1) and the top N reported (§5.2 uses 10);
//! * **share of time** (§5.2, Fig. 3: "percent of path net variation time relative to the
//!   total program execution time"): `NV(i)·s / T`, with `s` the executions each sample
//!   stands for (1 when every execution is timed; bursty tracing samples one path in about
//!   nCheck) and `T` the program's time when the source knows it, otherwise the timed
//!   paths' own total `Σ t·s` (then the share is "of the timed time"; which one is used is
//!   reported as [`TimeBase`]).
//!
//!
//! **Coarse timers** (probes; [`AnalysisOptions::resolution`] = `Some(q)`): a TSC that
//! advances in steps of `q` ticks reads a duration `d` as `q·⌊d/q⌋` or one step more, with
//! the expected reading `d` when the read's phase is random (see [`crate::estimate_bias`]).
//! The minimum of many readings is then a step below the typical one and, once the bias is
//! subtracted, often 0: the paper's `min` cannot be used as printed. Reading chosen here:
//!
//! * the bias is subtracted from a path's sum, `total = Σ t − n·bias` (floored at 0 once),
//!   never per sample;
//! * **basetime** = the mean reading of the path's *fastest group* — its samples within two
//!   steps of its fastest reading, `t < min + 2q` (a constant duration reads as one of two
//!   neighbouring steps, so the group holds all its readings and the mean is exact in
//!   expectation) — minus the bias. With `q = 1` the group is the readings `min` and
//!   `min + 1`: the paper's minimum up to one tick;
//! * `NV = total − n·basetime` as printed; before the basetime is rounded to a tick this is
//!   `Σ t − n·g` with `g` the group's mean reading: a difference of readings, independent
//!   of the bias, ≥ 0 (the group's mean is at most the path's) and 0 for a path whose
//!   readings all lie in its fastest group (rounding moves it by at most n/2 ticks; the
//!   rounded basetime is capped at the path's mean time, so `NV >= 0` exactly);
//! * a path is **resolved** when its basetime is at least one step `q`: below that the
//!   probe's timing cannot tell the path's fastest time from the bias (the value is still
//!   reported, flagged).
//!
//! **Timed paths slower than the run** (probes): a timed path runs between serialising TSC
//! reads, so its misses cannot overlap its neighbours' and timed executions extrapolate to
//! more than the run's time `T` (`X = Σ t·s > T`). Shares of program time are then taken of
//! `max(T, X)`, i.e. every timed time is deflated by the same factor `X/T`
//! ([`VppAnalysis::timing_inflation`]); a path that timing slows more than the others keeps
//! too large a share. [`PathVariation::share_of_timed`] (of `Σ t`) is reported beside it.
//!
//! §5.5 (Fig. 11) compares the NV ranking with the *frequency* ranking (most executions)
//! and the *total time* ranking; [`top_k_difference`] counts how many of the top k by NV
//! are not in the top k of the other ranking.

use crate::signature::PathSignature;
use crate::timings::{PathTimes, PathTimings, TimeUnit};
use serde::Serialize;

/// Settings of the analysis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AnalysisOptions {
    /// Paths need at least this many samples to be analysed. Default 2 (seed 004 §5.1).
    pub min_samples: u64,
    /// Instrumentation bias subtracted from every time (saturating at 0). Default 0.
    pub bias: u64,
    /// Samples taking longer than this (before the bias is subtracted) are left out and
    /// counted ([`VppAnalysis::excluded`]): a timed path that was preempted or interrupted
    /// measures the operating system, not the path. Default `None`: all kept (the paper).
    pub max_time: Option<u64>,
    /// `Some(q)`: the times were read with a timer advancing in steps of `q` ticks (the
    /// probes; `q` from [`crate::timer_resolution`]): basetimes from the fastest group,
    /// the bias subtracted from sums, paths flagged when unresolved (module docs). `None`:
    /// exact times (trace, LBR): the paper's minimum. Default `None`.
    pub resolution: Option<u64>,
}

impl Default for AnalysisOptions {
    fn default() -> Self {
        AnalysisOptions {
            min_samples: 2,
            bias: 0,
            max_time: None,
            resolution: None,
        }
    }
}

/// The variation of one path.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PathVariation {
    /// The path.
    pub signature: PathSignature,
    /// Timed samples.
    pub count: u64,
    /// Smallest time (after the bias).
    pub basetime: u64,
    /// Sum of the times (after the bias).
    pub total_time: u64,
    /// `total_time − count × basetime`.
    pub net_variation: u64,
    /// Estimated share of the program's time that is this path's net variation.
    pub share_of_time: f64,
    /// Share of the timed paths' time (`net_variation / Σ total_time`).
    pub share_of_timed: f64,
    /// Coarse timer only: whether the basetime is at least one timer step (`None` for
    /// exact times).
    pub resolved: Option<bool>,
    /// Largest time (after the bias).
    pub max_time: u64,
    /// Mean time (after the bias).
    pub mean_time: f64,
}

/// Denominator of the shares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TimeBase {
    /// The program's whole run time (given by the source).
    Program,
    /// The timed paths' own total time, scaled by the executions per sample.
    TimedPaths,
}

/// The analysis of one profile.
#[derive(Debug, Clone, Serialize)]
pub struct VppAnalysis {
    /// Unit of the times.
    pub unit: TimeUnit,
    /// Paths with at least `min_samples` samples, by decreasing net variation (ties: by
    /// signature).
    pub paths: Vec<PathVariation>,
    /// Paths with fewer samples (their net variation is not measurable), by decreasing
    /// count; they still take part in the frequency and time rankings.
    pub others: Vec<PathVariation>,
    /// Timed samples in all.
    pub samples: u64,
    /// Sum of all timed samples' times after the bias.
    pub timed_time: u64,
    /// Sum of the net variation of `paths`.
    pub net_variation: u64,
    /// Denominator of every share, in the unit.
    pub time_base: f64,
    /// What the denominator is.
    pub time_base_kind: TimeBase,
    /// Executions each sample stands for.
    pub executions_per_sample: f64,
    /// Bias subtracted from every time.
    pub bias: u64,
    /// Minimum samples per analysed path.
    pub min_samples: u64,
    /// Samples left out for exceeding [`AnalysisOptions::max_time`].
    pub excluded: u64,
    /// The timer resolution the analysis assumed ([`AnalysisOptions::resolution`]).
    pub resolution: Option<u64>,
    /// `X / T` when the timed paths extrapolated to every execution (`X`) exceed the
    /// program's time `T` (shares are then of `X`); `None` otherwise.
    pub timing_inflation: Option<f64>,
}

fn clamp64(x: u128) -> u64 {
    x.min(u128::from(u64::MAX)) as u64
}

/// Variation of one path's times (bias subtracted, saturating; times above `max_time`
/// left out). Exact times: the paper's minimum as basetime.
pub fn path_variation(
    s: &PathSignature,
    p: &PathTimes,
    bias: u64,
    max_time: Option<u64>,
) -> PathVariation {
    let mut total: u128 = 0;
    let (mut lo, mut hi) = (u64::MAX, 0u64);
    let mut count = 0u64;
    for (t, n) in p.iter() {
        if max_time.is_some_and(|m| t > m) {
            continue;
        }
        let t = t.saturating_sub(bias);
        total += u128::from(t) * u128::from(n);
        lo = lo.min(t);
        hi = hi.max(t);
        count += n;
    }
    if count == 0 {
        lo = 0;
    }
    let nv = total - u128::from(lo) * u128::from(count);
    PathVariation {
        signature: s.clone(),
        count,
        basetime: lo,
        total_time: clamp64(total),
        net_variation: clamp64(nv),
        share_of_time: 0.0,
        share_of_timed: 0.0,
        resolved: None,
        max_time: hi,
        mean_time: if count > 0 {
            total as f64 / count as f64
        } else {
            0.0
        },
    }
}

/// Variation of one path's times read with a timer of resolution `q` ticks (module docs,
/// "Coarse timers"): basetime = mean reading of the samples below `min + 2q`, minus the
/// bias; the bias subtracted from the sum; `resolved` when the basetime is at least `q`.
pub fn path_variation_quantised(
    s: &PathSignature,
    p: &PathTimes,
    bias: u64,
    max_time: Option<u64>,
    q: u64,
) -> PathVariation {
    let q = q.max(1);
    let kept: Vec<(u64, u64)> = p
        .iter()
        .filter(|&(t, _)| max_time.is_none_or(|m| t <= m))
        .collect();
    let count: u64 = kept.iter().map(|x| x.1).sum();
    let sum: f64 = kept.iter().map(|&(t, n)| t as f64 * n as f64).sum();
    let (lo, hi) = match (kept.first(), kept.last()) {
        (Some(a), Some(b)) => (a.0, b.0),
        _ => (0, 0),
    };
    let (gn, gsum) = kept
        .iter()
        .take_while(|&&(t, _)| t < lo.saturating_add(2 * q))
        .fold((0u64, 0f64), |(n, s), &(t, c)| {
            (n + c, s + t as f64 * c as f64)
        });
    let group_mean = if gn > 0 { gsum / gn as f64 } else { 0.0 };
    let b = bias as f64;
    // Integer readings and an integer bias: the total is exact; the basetime is rounded to
    // a tick and the NV is `total − n·basetime` of the rounded values (the report's
    // identity), within n/2 ticks of `Σ t − n·g`.
    let total = (sum - count as f64 * b).max(0.0).round() as u64;
    // At most the mean (a rounding up of a group holding every reading would exceed it).
    let basetime = ((group_mean - b).max(0.0).round() as u64).min(total / count.max(1));
    let nv = u128::from(total).saturating_sub(u128::from(basetime) * u128::from(count));
    PathVariation {
        signature: s.clone(),
        count,
        basetime,
        total_time: total,
        net_variation: clamp64(nv),
        share_of_time: 0.0,
        share_of_timed: 0.0,
        resolved: Some(count > 0 && group_mean - b >= q as f64),
        max_time: hi.saturating_sub(bias),
        mean_time: if count > 0 {
            total as f64 / count as f64
        } else {
            0.0
        },
    }
}

/// Analyses a profile (seed 004 §5.1-5.2).
pub fn analyze(t: &PathTimings, o: &AnalysisOptions) -> VppAnalysis {
    let mut paths = Vec::new();
    let mut others = Vec::new();
    let mut timed: u128 = 0;
    let mut samples = 0u64;
    let mut excluded = 0u64;
    for (s, p) in t.iter() {
        let v = match o.resolution {
            Some(q) => path_variation_quantised(s, p, o.bias, o.max_time, q),
            None => path_variation(s, p, o.bias, o.max_time),
        };
        timed += u128::from(v.total_time);
        samples += v.count;
        excluded += p.count() - v.count;
        if v.count == 0 {
            continue;
        }
        if v.count >= o.min_samples.max(1) {
            paths.push(v);
        } else {
            others.push(v);
        }
    }
    let eps = if t.executions_per_sample.is_finite() && t.executions_per_sample > 0.0 {
        t.executions_per_sample
    } else {
        1.0
    };
    let extrapolated = timed as f64 * eps;
    let (time_base, kind, timing_inflation) = match t.program_time {
        Some(p) if p > 0 && extrapolated > p as f64 => (
            extrapolated,
            TimeBase::Program,
            Some(extrapolated / p as f64),
        ),
        Some(p) if p > 0 => (p as f64, TimeBase::Program, None),
        _ => (extrapolated, TimeBase::TimedPaths, None),
    };
    let share = |nv: u64| {
        if time_base > 0.0 {
            nv as f64 * eps / time_base
        } else {
            0.0
        }
    };
    for v in paths.iter_mut().chain(others.iter_mut()) {
        v.share_of_time = share(v.net_variation);
        v.share_of_timed = if timed > 0 {
            v.net_variation as f64 / timed as f64
        } else {
            0.0
        };
    }
    paths.sort_by(|a, b| {
        b.net_variation
            .cmp(&a.net_variation)
            .then_with(|| a.signature.cmp(&b.signature))
    });
    others.sort_by(|a, b| {
        b.count
            .cmp(&a.count)
            .then_with(|| a.signature.cmp(&b.signature))
    });
    let nv: u128 = paths.iter().map(|p| u128::from(p.net_variation)).sum();
    VppAnalysis {
        unit: t.unit,
        paths,
        others,
        samples,
        timed_time: clamp64(timed),
        net_variation: clamp64(nv),
        time_base,
        time_base_kind: kind,
        executions_per_sample: eps,
        bias: o.bias,
        min_samples: o.min_samples.max(1),
        excluded,
        resolution: o.resolution,
        timing_inflation,
    }
}

impl VppAnalysis {
    /// The `n` paths with the largest net variation.
    pub fn top(&self, n: usize) -> &[PathVariation] {
        &self.paths[..n.min(self.paths.len())]
    }
    /// Share of time of the top `n` paths' net variation together (Fig. 3's stacked bar).
    pub fn top_share(&self, n: usize) -> f64 {
        self.top(n).iter().map(|p| p.share_of_time).sum()
    }
    /// Share of time of all paths' net variation (Fig. 5's first bar).
    pub fn total_share(&self) -> f64 {
        self.paths.iter().map(|p| p.share_of_time).sum()
    }
    /// The analysed path with this signature.
    pub fn find(&self, s: &PathSignature) -> Option<&PathVariation> {
        self.paths.iter().find(|p| &p.signature == s)
    }
    /// Share of time of the net variation of the given paths in this profile (paths it
    /// does not hold, or holds with fewer than `min_samples` samples, count 0): the
    /// cross-evaluation of §5.3 (Figs. 4 and 5).
    pub fn share_of(&self, sigs: &[PathSignature]) -> f64 {
        sigs.iter()
            .filter_map(|s| self.find(s))
            .map(|p| p.share_of_time)
            .sum()
    }
}

/// How hot paths are ranked (seed 004 §5.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Ranking {
    /// By net variation (VPP).
    NetVariation,
    /// By number of executions (timed samples): classic hot paths (Ball & Larus).
    Frequency,
    /// By total time spent on the path.
    TotalTime,
}

/// The top `k` signatures under a ranking (ties broken by signature). Frequency and time
/// rankings include the paths with too few samples for a variation.
pub fn ranked(a: &VppAnalysis, r: Ranking, k: usize) -> Vec<PathSignature> {
    if r == Ranking::NetVariation {
        return a.top(k).iter().map(|p| p.signature.clone()).collect();
    }
    let mut all: Vec<&PathVariation> = a.paths.iter().chain(a.others.iter()).collect();
    let key = |p: &PathVariation| match r {
        Ranking::Frequency => p.count,
        _ => p.total_time,
    };
    all.sort_by(|x, y| {
        key(y)
            .cmp(&key(x))
            .then_with(|| x.signature.cmp(&y.signature))
    });
    all.into_iter()
        .take(k)
        .map(|p| p.signature.clone())
        .collect()
}

/// Fig. 11: how many of the top `k` paths by net variation are not among the top `k` of
/// another ranking.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TopKDifference {
    /// The other ranking.
    pub ranking: Ranking,
    /// k.
    pub k: usize,
    /// Top k by net variation.
    pub vpp: Vec<PathSignature>,
    /// Top k by the other ranking.
    pub other: Vec<PathSignature>,
    /// |vpp \ other|.
    pub not_in_other: usize,
}

/// Compares the NV ranking with `r` on the top `k` (seed 004 §5.5, Fig. 11).
pub fn top_k_difference(a: &VppAnalysis, r: Ranking, k: usize) -> TopKDifference {
    let vpp = ranked(a, Ranking::NetVariation, k);
    let other = ranked(a, r, k);
    let not_in_other = vpp.iter().filter(|s| !other.contains(s)).count();
    TopKDifference {
        ranking: r,
        k,
        vpp,
        other,
        not_in_other,
    }
}

/// Histogram of one path's deltas from its basetime (seed 004 §5.2, Figs. 2 and 6).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeltaHistogram {
    /// The path.
    pub signature: PathSignature,
    /// Its basetime (raw, bias included: deltas do not depend on the bias).
    pub basetime: u64,
    /// Width of a bin; bin `j` holds deltas in `[j·w, (j+1)·w)`.
    pub bin_width: u64,
    /// Samples per bin.
    pub counts: Vec<u64>,
    /// Samples with a delta beyond the last bin.
    pub overflow: u64,
}

/// Bins `p`'s deltas `t − min` into `bins` bins of width `bin_width` (at least 1).
pub fn delta_histogram(
    s: &PathSignature,
    p: &PathTimes,
    bin_width: u64,
    bins: usize,
) -> DeltaHistogram {
    let w = bin_width.max(1);
    let base = p.min().unwrap_or(0);
    let mut counts = vec![0u64; bins];
    let mut overflow = 0;
    for (t, n) in p.iter() {
        let j = (t - base) / w;
        match counts.get_mut(j as usize) {
            Some(c) if j < bins as u64 => *c += n,
            _ => overflow += n,
        }
    }
    DeltaHistogram {
        signature: s.clone(),
        basetime: base,
        bin_width: w,
        counts,
        overflow,
    }
}

/// Delta histograms of the top `n` paths of `a` on one common scale: the bin width is the
/// smallest that puts the 99th percentile delta of every one of them inside `bins` bins
/// (so a few far outliers go to `overflow` rather than squash the plot).
pub fn top_delta_histograms(
    t: &PathTimings,
    a: &VppAnalysis,
    n: usize,
    bins: usize,
) -> Vec<DeltaHistogram> {
    let bins = bins.max(1);
    let top: Vec<(&PathSignature, &PathTimes)> = a
        .top(n)
        .iter()
        .filter_map(|v| t.get(&v.signature).map(|p| (&v.signature, p)))
        .collect();
    let mut span = 1u64;
    for (_, p) in &top {
        let base = p.min().unwrap_or(0);
        let want = (p.count() as f64 * 0.99).ceil() as u64;
        let mut seen = 0;
        for (t, c) in p.iter() {
            seen += c;
            if seen >= want {
                span = span.max(t - base + 1);
                break;
            }
        }
    }
    let w = span.div_ceil(bins as u64).max(1);
    top.into_iter()
        .map(|(s, p)| delta_histogram(s, p, w, bins))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signature::BranchHistory;
    use proftrust_model::Svma;

    fn sig(e: u64, bits: u64, n: u32) -> PathSignature {
        PathSignature::new(Svma(e), BranchHistory::from_bits(bits, n))
    }

    /// Hand-computed example.
    ///
    /// A (0x100-1): 10, 10, 40, 100  -> base 10, total 160, NV 160 - 40 = 120
    /// B (0x100-0): 5 x 1000 times   -> base 5, total 5000, NV 0 (the hot, optimised path)
    /// C (0x200):   20, 25           -> base 20, total 45, NV 5
    /// D (0x300):   7 (one sample)   -> not analysed
    /// Timed time 160 + 5000 + 45 + 7 = 5212; program time 20848 (= 4 x 5212) given.
    #[test]
    fn hand_computed_net_variation_ranking_and_shares() {
        let mut t = PathTimings::new(TimeUnit::Cycles);
        for x in [10, 10, 40, 100] {
            t.add(sig(0x100, 1, 1), x);
        }
        for _ in 0..1000 {
            t.add(sig(0x100, 0, 1), 5);
        }
        t.add(sig(0x200, 0, 0), 20);
        t.add(sig(0x200, 0, 0), 25);
        t.add(sig(0x300, 0, 0), 7);
        let a = analyze(&t, &AnalysisOptions::default());
        let got: Vec<(String, u64, u64, u64, u64)> = a
            .paths
            .iter()
            .map(|p| {
                (
                    p.signature.to_string(),
                    p.count,
                    p.basetime,
                    p.total_time,
                    p.net_variation,
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                ("0x100-1".into(), 4, 10, 160, 120),
                ("0x200".into(), 2, 20, 45, 5),
                ("0x100-0".into(), 1000, 5, 5000, 0),
            ]
        );
        assert_eq!(a.others.len(), 1);
        assert_eq!(
            (a.samples, a.timed_time, a.net_variation),
            (1007, 5212, 125)
        );
        // Shares of the timed time (no program time): 120 / 5212.
        assert_eq!(a.time_base_kind, TimeBase::TimedPaths);
        assert!((a.paths[0].share_of_time - 120.0 / 5212.0).abs() < 1e-15);
        assert!((a.top_share(2) - 125.0 / 5212.0).abs() < 1e-15);
        // With the program's time and bursty sampling (each sample = 3 executions; the
        // timed paths extrapolate to 15636 < 20848): 120 * 3 / 20848.
        t.program_time = Some(20848);
        t.executions_per_sample = 3.0;
        let a = analyze(&t, &AnalysisOptions::default());
        assert_eq!(a.time_base_kind, TimeBase::Program);
        assert_eq!(a.timing_inflation, None);
        assert!((a.paths[0].share_of_time - 360.0 / 20848.0).abs() < 1e-15);
        assert!((a.paths[0].share_of_timed - 120.0 / 5212.0).abs() < 1e-15);
        // Rankings: by frequency B first, by total time B (5000) then A (160); NV puts A
        // first. Top-1 differs from both.
        assert_eq!(
            ranked(&a, Ranking::Frequency, 2),
            vec![sig(0x100, 0, 1), sig(0x100, 1, 1)]
        );
        assert_eq!(
            ranked(&a, Ranking::TotalTime, 3),
            vec![sig(0x100, 0, 1), sig(0x100, 1, 1), sig(0x200, 0, 0)]
        );
        let d = top_k_difference(&a, Ranking::Frequency, 1);
        assert_eq!(d.not_in_other, 1);
        let d = top_k_difference(&a, Ranking::TotalTime, 2);
        assert_eq!((d.vpp.len(), d.not_in_other), (2, 1)); // 0x200 is not in the time top 2
                                                           // min_samples 1 analyses D too (NV 0).
        let a1 = analyze(
            &t,
            &AnalysisOptions {
                min_samples: 1,
                ..AnalysisOptions::default()
            },
        );
        assert_eq!((a1.paths.len(), a1.others.len()), (4, 0));
        // max_time 50 leaves out A's 100: A = 10, 10, 40 -> NV 30; C, B unchanged.
        let a2 = analyze(
            &t,
            &AnalysisOptions {
                max_time: Some(50),
                ..AnalysisOptions::default()
            },
        );
        assert_eq!(a2.excluded, 1);
        assert_eq!(a2.paths[0].signature, sig(0x100, 1, 1));
        assert_eq!((a2.paths[0].count, a2.paths[0].net_variation), (3, 30));
        assert_eq!(a2.samples, 1006);
    }

    /// A constant bias shifts basetime and total but not the net variation (seed 004 §4.2:
    /// "the actual size of the bias is not as important as the consistency").
    #[test]
    fn bias_subtraction() {
        let mut t = PathTimings::new(TimeUnit::TscTicks);
        for x in [50, 52, 90] {
            t.add(sig(0x10, 0, 0), x);
        }
        let a = analyze(
            &t,
            &AnalysisOptions {
                bias: 40,
                ..AnalysisOptions::default()
            },
        );
        let p = &a.paths[0];
        assert_eq!(
            (p.basetime, p.total_time, p.net_variation, p.max_time),
            (10, 72, 42, 50)
        );
        // Bias larger than the fastest sample saturates at 0: 0, 0, 30 -> NV 30.
        let a = analyze(
            &t,
            &AnalysisOptions {
                bias: 60,
                ..AnalysisOptions::default()
            },
        );
        assert_eq!((a.paths[0].basetime, a.paths[0].net_variation), (0, 30));
    }

    /// A coarse timer (step q = 26 ticks), read at a random phase, and a bias of 85 ticks
    /// (`bias::tests::coarse_timer_bias_is_the_mean_not_the_step`). A duration d reads as
    /// `26·⌊d/26⌋` with probability `1 − (d mod 26)/26`, else one step more; the samples are
    /// split in exactly those proportions:
    ///
    /// * A, true time 41: 41 + 85 = 126 = 4·26 + 22 -> 4 × 104, 22 × 130 (sum 3276, mean
    ///   126): basetime 126 − 85 = 41 (resolved, >= 26), total 3276 − 26·85 = 1066, NV 0;
    /// * B, 26 executions of A's time and 26 of 300: 300 + 85 = 385 = 14·26 + 21 -> 5 × 364,
    ///   21 × 390 (sum 10010). Fastest group: readings < 104 + 52 = A's 26 (mean 126):
    ///   basetime 41; total 13286 − 52·85 = 8866; NV 13286 − 52·126 = 6734 = 26 × (385 −
    ///   126), the true extra time of the slow executions;
    /// * C, true time 10: 95 = 3·26 + 17 -> 9 × 78, 17 × 104 (sum 2470): basetime 10 — below
    ///   one step, unresolved — total 260, NV 0.
    ///
    /// The paper's minimum with the median bias (78) subtracted per sample gives C a
    /// basetime of 0 and B an NV of (13286 − 52·78) − 52·26 = 7878: 17% too large.
    #[test]
    fn coarse_timer_basetimes_hand_computed() {
        let mut t = PathTimings::new(TimeUnit::TscTicks);
        let (a, b, c) = (sig(0xa, 0, 0), sig(0xb, 0, 0), sig(0xc, 0, 0));
        for s in [&a, &b] {
            for (x, n) in [(104, 4), (130, 22)] {
                t.add_times(s.clone(), &times(x, n));
            }
        }
        for (x, n) in [(364, 5), (390, 21)] {
            t.add_times(b.clone(), &times(x, n));
        }
        for (x, n) in [(78, 9), (104, 17)] {
            t.add_times(c.clone(), &times(x, n));
        }
        let o = AnalysisOptions {
            bias: 85,
            resolution: Some(26),
            ..AnalysisOptions::default()
        };
        // Program time twice the timed time (1066 + 8866 + 260 = 10192): no inflation.
        t.program_time = Some(20384);
        let an = analyze(&t, &o);
        let got: Vec<(PathSignature, u64, u64, u64, Option<bool>)> = an
            .paths
            .iter()
            .map(|p| {
                (
                    p.signature.clone(),
                    p.basetime,
                    p.total_time,
                    p.net_variation,
                    p.resolved,
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                (b.clone(), 41, 8866, 6734, Some(true)),
                (a.clone(), 41, 1066, 0, Some(true)),
                (c.clone(), 10, 260, 0, Some(false)),
            ]
        );
        assert_eq!(an.timed_time, 10192);
        assert_eq!(an.timing_inflation, None);
        assert!((an.paths[0].share_of_time - 6734.0 / 20384.0).abs() < 1e-12);
        assert!((an.paths[0].share_of_timed - 6734.0 / 10192.0).abs() < 1e-12);
        // The run shorter than the timed paths extrapolated (5096 < 10192): inflation 2,
        // shares of the extrapolated time.
        t.program_time = Some(5096);
        let an = analyze(&t, &o);
        assert_eq!(an.timing_inflation, Some(2.0));
        assert!((an.paths[0].share_of_time - 6734.0 / 10192.0).abs() < 1e-12);
        // The old reading (minimum, median bias per sample, floored): C at 0, B's NV 7878.
        let old = analyze(
            &t,
            &AnalysisOptions {
                bias: 78,
                ..AnalysisOptions::default()
            },
        );
        assert_eq!(old.find(&c).unwrap().basetime, 0);
        assert_eq!(old.find(&b).unwrap().net_variation, 7878);
    }

    fn times(x: u64, n: u64) -> PathTimes {
        let mut p = PathTimes::default();
        p.add_n(x, n);
        p
    }

    /// Deltas 0,0,30,90 with width 25 and 3 bins: [0,25) 2, [25,50) 1, [50,75) 0,
    /// overflow 1 (90).
    #[test]
    fn delta_histograms_hand_computed() {
        let mut p = PathTimes::default();
        for x in [10, 10, 40, 100] {
            p.add(x);
        }
        let s = sig(0x100, 1, 1);
        let h = delta_histogram(&s, &p, 25, 3);
        assert_eq!(
            (h.basetime, h.counts.clone(), h.overflow),
            (10, vec![2, 1, 0], 1)
        );
        // Common scale: the top path's 99th percentile delta is 90 (4 samples: rank 4),
        // span 91 over 10 bins: width 10; 90 lands in bin 9.
        let mut t = PathTimings::new(TimeUnit::Cycles);
        t.add_times(s.clone(), &p);
        let a = analyze(&t, &AnalysisOptions::default());
        let hs = top_delta_histograms(&t, &a, 5, 10);
        assert_eq!(hs.len(), 1);
        assert_eq!(hs[0].bin_width, 10);
        assert_eq!(hs[0].counts, vec![2, 0, 0, 1, 0, 0, 0, 0, 0, 1]);
        assert_eq!(hs[0].overflow, 0);
    }
}
