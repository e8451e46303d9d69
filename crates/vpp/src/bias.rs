//! Instrumentation bias (seed 004 §4.2).
//!
//! Seed 004 §4.2: "we believe there is a small bias introduced by the call to the
//! TimeStamp counter and the additional branch instructions. We have collected results for
//! bias analysis, and discovered that this bias is extremely consistent across all profile
//! instantiations. [...] the bias is systematic and can be removed from the measurements."
//!
//! The probes time `calibration` *empty* paths through the same code at start-up, and
//! again at exit; their times are the bias alone. Of the two, the one with the lower
//! trimmed mean is used ([`choose_calibration`]): a CPU that ran slower at start-up (cold,
//! or at a low clock speed before frequency scaling raised it) makes the start-up empty
//! paths dearer than the probe was while the program ran. Readings chosen here (the paper gives no statistic):
//!
//! * **timer resolution** `q` ([`timer_resolution`]): the greatest common divisor of the
//!   differences between the distinct times observed (calibration and paths). A TSC that
//!   advances in steps (26 ticks on the machine these docs were measured on) makes every
//!   time a multiple of the step; `q = 1` is a fine timer.
//! * **band** `max(2, median/10, q)` ticks around the median: the bias is **consistent**
//!   when at least 90% of the calibration samples lie within it. With a coarse timer a
//!   constant duration reads as one of two neighbouring steps, so the band is at least one
//!   step.
//! * **bias subtracted** = the **mean of the calibration samples inside the band** (a
//!   trimmed mean, robust to the interrupts that make a few samples huge), rounded to a
//!   tick. With a coarse timer read at a random phase, a duration `d` reads as
//!   `q·⌊d/q⌋` or `q·⌊d/q⌋ + q` with probabilities making the expected reading exactly `d`:
//!   the mean recovers the bias below the step, the median cannot (it is always a step).
//!   The median is kept in the report.
//!
//! The analysis subtracts the bias from a path's *sum* of times (`Σ t − n·bias`), not
//! from each sample with a floor at 0: a reading below the bias is quantisation noise, and
//! flooring it would inflate every short path.

use serde::Serialize;

/// The bias measured from empty paths.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BiasEstimate {
    /// Calibration samples.
    pub samples: u64,
    /// Smallest empty-path time.
    pub min: u64,
    /// 10th percentile.
    pub p10: u64,
    /// Median.
    pub median: u64,
    /// 90th percentile.
    pub p90: u64,
    /// Largest.
    pub max: u64,
    /// Mean.
    pub mean: f64,
    /// Standard deviation.
    pub sd: f64,
    /// Timer resolution: every time is a multiple of it ([`timer_resolution`]).
    pub resolution: u64,
    /// Half-width of the consistency band around the median: `max(2, median/10,
    /// resolution)`.
    pub tolerance: u64,
    /// Mean of the samples within the band.
    pub trimmed_mean: f64,
    /// The bias subtracted: `trimmed_mean` rounded.
    pub subtracted: u64,
    /// Share of samples within the band.
    pub within: f64,
    /// `within >= 0.9`.
    pub consistent: bool,
    /// Which calibration these figures are of: `"start"` (timed at start-up) or `"exit"`
    /// (timed again at exit; [`choose_calibration`]).
    pub calibration: &'static str,
    /// The other calibration's median, when the file has both.
    pub other_median: Option<u64>,
}

/// The bias of a probe run timed twice, at start-up and at exit: the calibration with the
/// lower trimmed mean, with the other's median kept beside it. A CPU that starts cold or at
/// a low clock speed and speeds up under load makes the empty paths dearer at start-up
/// than while the program's paths ran; the probe's cost the paths paid is the cheaper one
/// (a bias too large floors every short path's basetime to 0). `exit` is empty for files
/// written without the exit calibration: the start-up one is used as before.
pub fn choose_calibration(
    start: &[(u64, u64)],
    exit: &[(u64, u64)],
    resolution: u64,
) -> Option<BiasEstimate> {
    let s = estimate_bias(start, resolution);
    let e = estimate_bias(exit, resolution).map(|mut e| {
        e.calibration = "exit";
        e
    });
    match (s, e) {
        (Some(mut s), Some(mut e)) => {
            if e.trimmed_mean < s.trimmed_mean {
                e.other_median = Some(s.median);
                Some(e)
            } else {
                s.other_median = Some(e.median);
                Some(s)
            }
        }
        (s, e) => s.or(e),
    }
}

/// Nearest-rank quantile of a sorted `(value, count)` histogram with `n` samples.
fn quantile(h: &[(u64, u64)], n: u64, q: f64) -> u64 {
    let rank = ((q * n as f64).ceil() as u64).clamp(1, n);
    let mut seen = 0;
    for &(v, c) in h {
        seen += c;
        if seen >= rank {
            return v;
        }
    }
    h.last().map_or(0, |x| x.0)
}

/// The timer's resolution: the greatest common divisor of the differences between the
/// distinct `values` (1 when fewer than two distinct values, or when they share no step).
pub fn timer_resolution(values: impl IntoIterator<Item = u64>) -> u64 {
    fn gcd(mut a: u64, mut b: u64) -> u64 {
        while b != 0 {
            (a, b) = (b, a % b);
        }
        a
    }
    let mut first: Option<u64> = None;
    let mut g = 0u64;
    for v in values {
        match first {
            None => first = Some(v),
            Some(f) => {
                g = gcd(g, v.abs_diff(f));
                if g == 1 {
                    return 1;
                }
            }
        }
    }
    g.max(1)
}

/// Estimates the bias from a calibration histogram `(ticks, count)` read with a timer of
/// resolution `resolution` ticks (1 for a fine timer); `None` when empty.
pub fn estimate_bias(hist: &[(u64, u64)], resolution: u64) -> Option<BiasEstimate> {
    let mut h: Vec<(u64, u64)> = hist.iter().copied().filter(|x| x.1 > 0).collect();
    h.sort_unstable();
    let n: u64 = h.iter().map(|x| x.1).sum();
    if n == 0 {
        return None;
    }
    let mean = h.iter().map(|&(v, c)| v as f64 * c as f64).sum::<f64>() / n as f64;
    let var = h
        .iter()
        .map(|&(v, c)| (v as f64 - mean).powi(2) * c as f64)
        .sum::<f64>()
        / n as f64;
    let median = quantile(&h, n, 0.5);
    let resolution = resolution.max(1);
    let tolerance = (median / 10).max(2).max(resolution);
    let band = || h.iter().filter(|&&(v, _)| v.abs_diff(median) <= tolerance);
    let inside: u64 = band().map(|x| x.1).sum();
    let within = inside as f64 / n as f64;
    // The median's own bin is always inside, so `inside >= 1`.
    let trimmed_mean =
        band().map(|&(v, c)| v as f64 * c as f64).sum::<f64>() / inside.max(1) as f64;
    Some(BiasEstimate {
        samples: n,
        min: h[0].0,
        p10: quantile(&h, n, 0.1),
        median,
        p90: quantile(&h, n, 0.9),
        max: h[h.len() - 1].0,
        mean,
        sd: var.sqrt(),
        resolution,
        tolerance,
        trimmed_mean,
        subtracted: trimmed_mean.round() as u64,
        within,
        consistent: within >= 0.9,
        calibration: "start",
        other_median: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 10 samples: 50 x1, 52 x6, 54 x2, 400 x1. Nearest ranks: p10 = rank 1 = 50, median
    /// = rank 5 = 52, p90 = rank 9 = 54. Band 52 ± 5 holds 9 of 10: consistent.
    /// Mean (50 + 312 + 108 + 400) / 10 = 87; trimmed mean (50 + 312 + 108) / 9 = 52.22.
    /// Start-up 100 x 60 (a slow clock), exit 90 x 40 + 10 x 42: the exit one is cheaper
    /// (trimmed mean 40.2) and is used, the start-up median kept beside it; with only one
    /// calibration it is used as it is; both empty: none.
    #[test]
    fn the_cheaper_calibration_is_used() {
        let b = choose_calibration(&[(60, 100)], &[(40, 90), (42, 10)], 1).unwrap();
        assert_eq!((b.calibration, b.median, b.subtracted), ("exit", 40, 40));
        assert!((b.trimmed_mean - 40.2).abs() < 1e-12);
        assert_eq!(b.other_median, Some(60));
        let b = choose_calibration(&[(40, 90), (42, 10)], &[(60, 100)], 1).unwrap();
        assert_eq!((b.calibration, b.other_median), ("start", Some(60)));
        let b = choose_calibration(&[(60, 100)], &[], 1).unwrap();
        assert_eq!(
            (b.calibration, b.subtracted, b.other_median),
            ("start", 60, None)
        );
        let b = choose_calibration(&[], &[(60, 100)], 1).unwrap();
        assert_eq!(b.calibration, "exit");
        assert!(choose_calibration(&[], &[], 1).is_none());
    }

    #[test]
    fn hand_computed_estimate() {
        let b = estimate_bias(&[(54, 2), (400, 1), (50, 1), (52, 6)], 1).unwrap();
        assert_eq!(
            (b.samples, b.min, b.p10, b.median, b.p90, b.max),
            (10, 50, 50, 52, 54, 400)
        );
        assert!((b.mean - 87.0).abs() < 1e-12);
        assert_eq!(b.tolerance, 5);
        assert!((b.within - 0.9).abs() < 1e-12);
        assert!(b.consistent);
        assert!((b.trimmed_mean - 470.0 / 9.0).abs() < 1e-12);
        assert_eq!(b.subtracted, 52);
        // Spread out: 10, 20, ..., 100 (one each): median 50, band 50 ± 5 holds 1.
        let h: Vec<(u64, u64)> = (1..=10).map(|k| (10 * k, 1)).collect();
        let b = estimate_bias(&h, 1).unwrap();
        assert_eq!(b.median, 50);
        assert!(!b.consistent);
        assert!(estimate_bias(&[], 1).is_none());
        assert!(estimate_bias(&[(5, 0)], 1).is_none());
    }

    /// A coarse timer (step 26) reading an empty path of true length 85 ticks at a random
    /// phase: 85 = 3·26 + 7, so it reads 78 with probability 19/26 and 104 with 7/26. With
    /// 26000 samples split exactly so (19000 × 78, 7000 × 104) plus 3 preempted readings
    /// of 2600: the median is 78 (a step), the band is ±26 (the step; 78/10 < 26) and holds
    /// 26000 of 26003 (consistent), the trimmed mean is (19000·78 + 7000·104) / 26000 =
    /// 2210000 / 26000 = 85 exactly: the bias below the step.
    #[test]
    fn coarse_timer_bias_is_the_mean_not_the_step() {
        let h = [(78, 19_000), (104, 7_000), (2600, 3)];
        assert_eq!(timer_resolution(h.iter().map(|x| x.0)), 26);
        let b = estimate_bias(&h, 26).unwrap();
        assert_eq!((b.median, b.tolerance, b.resolution), (78, 26, 26));
        assert!(b.consistent);
        assert!((b.within - 26_000.0 / 26_003.0).abs() < 1e-12);
        assert!((b.trimmed_mean - 85.0).abs() < 1e-12);
        assert_eq!(b.subtracted, 85);
        // The old band (max(2, median/10) = 7) would have called this inconsistent: 73%.
        let fine = estimate_bias(&h, 1).unwrap();
        assert!(!fine.consistent);
    }

    /// gcd of differences: {78, 104, 182} -> gcd(26, 104) = 26; {5, 7} -> 2; one odd
    /// reading among steps of 26 -> 1; a single value -> 1.
    #[test]
    fn timer_resolution_hand_computed() {
        assert_eq!(timer_resolution([104, 78, 182, 78]), 26);
        assert_eq!(timer_resolution([5, 7]), 2);
        assert_eq!(timer_resolution([78, 104, 105]), 1);
        assert_eq!(timer_resolution([42]), 1);
        assert_eq!(timer_resolution([]), 1);
    }
}
