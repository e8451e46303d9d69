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
}

impl Default for AnalysisOptions {
    fn default() -> Self {
        AnalysisOptions {
            min_samples: 2,
            bias: 0,
            max_time: None,
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
}

fn clamp64(x: u128) -> u64 {
    x.min(u128::from(u64::MAX)) as u64
}

/// Variation of one path's times (bias subtracted, saturating; times above `max_time`
/// left out).
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
        max_time: hi,
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
        let v = path_variation(s, p, o.bias, o.max_time);
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
    let (time_base, kind) = match t.program_time {
        Some(p) if p > 0 => (p as f64, TimeBase::Program),
        _ => (timed as f64 * eps, TimeBase::TimedPaths),
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
    /// Timed time 160 + 5000 + 45 + 7 = 5212; program time 10424 (= 2 x 5212) given.
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
        // With the program's time and bursty sampling (each sample = 3 executions):
        // 120 * 3 / 10424.
        t.program_time = Some(10424);
        t.executions_per_sample = 3.0;
        let a = analyze(&t, &AnalysisOptions::default());
        assert_eq!(a.time_base_kind, TimeBase::Program);
        assert!((a.paths[0].share_of_time - 360.0 / 10424.0).abs() < 1e-15);
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
