//! Instrumentation bias (seed 004 §4.2).
//!
//! Seed 004 §4.2: "we believe there is a small bias introduced by the call to the
//! TimeStamp counter and the additional branch instructions. We have collected results for
//! bias analysis, and discovered that this bias is extremely consistent across all profile
//! instantiations. [...] the bias is systematic and can be removed from the measurements."
//!
//! The probes time `calibration` *empty* paths through the same code at start-up; their
//! times are the bias alone. Reading chosen here (the paper gives no statistic): the bias
//! is the **median** empty-path time (robust to the interrupts and migrations that make a
//! few samples huge); it is **consistent** when at least 90% of the calibration samples lie
//! within `max(2 ticks, 10% of the median)` of it. Subtracting it moves every basetime and
//! total down and leaves the net variation unchanged (it is a difference of times), except
//! where a path's time falls below the bias (clamped at 0).

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
    /// Median: the bias subtracted.
    pub median: u64,
    /// 90th percentile.
    pub p90: u64,
    /// Largest.
    pub max: u64,
    /// Mean.
    pub mean: f64,
    /// Standard deviation.
    pub sd: f64,
    /// Half-width of the consistency band around the median.
    pub tolerance: u64,
    /// Share of samples within the band.
    pub within: f64,
    /// `within >= 0.9`.
    pub consistent: bool,
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

/// Estimates the bias from a calibration histogram `(ticks, count)`; `None` when empty.
pub fn estimate_bias(hist: &[(u64, u64)]) -> Option<BiasEstimate> {
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
    let tolerance = (median / 10).max(2);
    let inside: u64 = h
        .iter()
        .filter(|&&(v, _)| v.abs_diff(median) <= tolerance)
        .map(|x| x.1)
        .sum();
    let within = inside as f64 / n as f64;
    Some(BiasEstimate {
        samples: n,
        min: h[0].0,
        p10: quantile(&h, n, 0.1),
        median,
        p90: quantile(&h, n, 0.9),
        max: h[h.len() - 1].0,
        mean,
        sd: var.sqrt(),
        tolerance,
        within,
        consistent: within >= 0.9,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 10 samples: 50 x1, 52 x6, 54 x2, 400 x1. Nearest ranks: p10 = rank 1 = 50, median
    /// = rank 5 = 52, p90 = rank 9 = 54. Band 52 ± 5 holds 9 of 10: consistent.
    /// Mean (50 + 312 + 108 + 400) / 10 = 87.
    #[test]
    fn hand_computed_estimate() {
        let b = estimate_bias(&[(54, 2), (400, 1), (50, 1), (52, 6)]).unwrap();
        assert_eq!(
            (b.samples, b.min, b.p10, b.median, b.p90, b.max),
            (10, 50, 50, 52, 54, 400)
        );
        assert!((b.mean - 87.0).abs() < 1e-12);
        assert_eq!(b.tolerance, 5);
        assert!((b.within - 0.9).abs() < 1e-12);
        assert!(b.consistent);
        // Spread out: 10, 20, ..., 100 (one each): median 50, band 50 ± 5 holds 1.
        let h: Vec<(u64, u64)> = (1..=10).map(|k| (10 * k, 1)).collect();
        let b = estimate_bias(&h).unwrap();
        assert_eq!(b.median, 50);
        assert!(!b.consistent);
        assert!(estimate_bias(&[]).is_none());
        assert!(estimate_bias(&[(5, 0)]).is_none());
    }
}
