//! Statistical resolution of one sampled profile on its own, without the exact truth (used
//! by `proftrust check`): intervals that account for clustering in time (batch means), the
//! smallest share a profile can tell from zero, whether two neighbouring ranks differ, and
//! how many samples a chosen precision needs.
//!
//! The per-share model is seed 002's: a share estimated from `n` samples is unbiased for any
//! ratio `R` of running granularity to sampling interval (seed 002 §3.3-3.4, eqs. 2-7), with
//! a variance that shrinks as `1/n` (§3.5, eqs. 8-9) and is at most the binomial
//! `p(1 - p)/n` when runs are captured independently (eq. 6: `MOD(r,1)(1 - MOD(r,1)) <=
//! 1/4`). The binomial interval is therefore the per-run bound ([`crate::wilson_interval`]);
//! the functions here add what the seeds leave to the user: the interval when the samples
//! are not independent of each other (clustered in time), and the derived quantities.

pub use crate::dist::{chi2_quantile, normal_quantile, t_quantile, z_for};

/// A share's batch-means interval: the samples, in time order, cut into `counts.len()`
/// consecutive slices (batches) of `sizes[b]` samples, of which `counts[b]` fall in the row.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BatchMeans {
    /// The share over all samples (`Σ counts / Σ sizes`).
    pub share: f64,
    /// Lower bound (clamped to 0).
    pub low: f64,
    /// Upper bound (clamped to 1).
    pub high: f64,
    /// Variance of the share estimated from the batches over the binomial variance
    /// `p(1−p)/n`: above 1 the samples of the row cluster in time.
    pub inflation: f64,
    /// Whether the inflation is significant: the batch variance exceeds the binomial one
    /// beyond the chi-square bound of the confidence level.
    pub clustered: bool,
}

/// Batch-means interval of a share (the standard method for a mean of a dependent
/// sequence; e.g. Law & Kelton, *Simulation Modeling and Analysis*, §9.5.3): the share of
/// the row in each of `B` consecutive time slices of (nearly) equal size is one observation
/// `p_b`; with `p̄` their mean and `s² = Σ(p_b − p̄)²/(B−1)`, the interval is
/// `p ± t_{B−1}(1 − α/2) · s/√B`, where `p` is the overall share.
///
/// Clustering test (reading chosen; the seeds state no test): if the samples were
/// independent, `(B−1)s²/σ²` with `σ² = p(1−p)/m` (`m` = mean slice size) follows χ²(B−1)
/// (seed 002 eq. 9 gives the per-slice variance at most this); the row is `clustered` when
/// it exceeds the χ² quantile at `confidence`. `inflation` = `s²/σ²`.
///
/// `counts[b]` samples of the row among `sizes[b]` in slice `b`. Fewer than 2 slices, or an
/// empty profile, give the uninformative `[0, 1]`.
pub fn batch_means(counts: &[u64], sizes: &[u64], confidence: f64) -> BatchMeans {
    let b = counts.len().min(sizes.len());
    let n: u64 = sizes[..b].iter().sum();
    let k: u64 = counts[..b].iter().sum();
    let uninformative = BatchMeans {
        share: if n > 0 { k as f64 / n as f64 } else { 0.0 },
        low: 0.0,
        high: 1.0,
        inflation: 1.0,
        clustered: false,
    };
    if b < 2 || n == 0 {
        return uninformative;
    }
    let p = k as f64 / n as f64;
    let shares: Vec<f64> = (0..b)
        .filter(|&i| sizes[i] > 0)
        .map(|i| counts[i] as f64 / sizes[i] as f64)
        .collect();
    let bb = shares.len();
    if bb < 2 {
        return uninformative;
    }
    let mean = shares.iter().sum::<f64>() / bb as f64;
    let s2 = shares.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (bb - 1) as f64;
    let t = t_quantile(0.5 + confidence / 2.0, (bb - 1) as f64);
    let half = t * (s2 / bb as f64).sqrt();
    let m = n as f64 / bb as f64;
    let sigma2 = p * (1.0 - p) / m;
    let (inflation, clustered) = if sigma2 > 0.0 {
        let ratio = s2 / sigma2;
        let bound = chi2_quantile(confidence, (bb - 1) as f64) / (bb - 1) as f64;
        (ratio, ratio > bound)
    } else {
        (1.0, false)
    };
    BatchMeans {
        share: p,
        low: (p - half).max(0.0),
        high: (p + half).min(1.0),
        inflation,
        clustered,
    }
}

/// The smallest share a profile of `n` samples tells from zero at `confidence`: a location
/// with true share `q` receives no sample with probability `(1 − q)^n`, so below
/// `q0 = 1 − (1 − confidence)^(1/n)` (≈ 3/n at 95%, the "rule of three") a location may have
/// no sample at all, and a profile's silence about it means nothing. Binomial zero count
/// (seed 002 §3.5: samples are Bernoulli trials of the share); `n = 0` gives 1.
pub fn smallest_detectable_share(n: u64, confidence: f64) -> f64 {
    if n == 0 {
        return 1.0;
    }
    1.0 - (1.0 - confidence).powf(1.0 / n as f64)
}

/// Whether two rows of one profile with `k1 >= k2` of `n` samples are told apart at
/// two-sided normal quantile `z`, as the z statistic of their difference. The two shares
/// are multinomial cells of one profile, so `Var(p1 − p2) = (p1 + p2 − (p1 − p2)²)/n`
/// (multinomial covariance `−p1 p2/n`); `inflation` (>= 1, e.g. a batch-means
/// [`BatchMeans::inflation`]) multiplies the variance when the samples cluster. Returns the
/// statistic `(p1 − p2)/sqrt(Var)`; ranks differ when it exceeds `z`.
pub fn rank_difference_z(k1: u64, k2: u64, n: u64, inflation: f64) -> f64 {
    if n == 0 {
        return 0.0;
    }
    let (p1, p2) = (k1 as f64 / n as f64, k2 as f64 / n as f64);
    let d = p1 - p2;
    let var = (p1 + p2 - d * d) / n as f64 * inflation.max(1.0);
    if var <= 0.0 {
        return if d == 0.0 { 0.0 } else { f64::INFINITY };
    }
    d / var.sqrt()
}

/// How many times more samples bring an interval of half-width `half` (from `n` samples)
/// down to `target`: every interval here narrows as `1/√n` (seed 002 eq. 9: the variance of
/// the mean of `n` draws is the one-draw variance over `n`), so the factor is
/// `(half/target)²`. A factor <= 1 means the precision is already reached.
pub fn samples_factor(half: f64, target: f64) -> f64 {
    if target <= 0.0 {
        return f64::INFINITY;
    }
    (half / target).powi(2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_means_by_hand() {
        // Four slices of 100 samples with 10, 30, 10, 30 in the row: p = 0.2, batch shares
        // 0.1, 0.3, 0.1, 0.3, mean 0.2, s² = 4·0.01/3 = 0.013333, s/√4 = 0.057735,
        // t(3, 97.5%) = 3.182446 (tables) -> half 0.183739.
        let bm = batch_means(&[10, 30, 10, 30], &[100; 4], 0.95);
        assert!((bm.share - 0.2).abs() < 1e-12);
        let half = (bm.high - bm.low) / 2.0;
        assert!((half - 3.182_446 * 0.057_735_03).abs() < 1e-5, "{half}");
        // Binomial variance of a slice share: 0.2·0.8/100 = 0.0016; s² / that = 8.33.
        assert!((bm.inflation - 0.013_333 / 0.0016).abs() < 1e-3);
        assert!(bm.clustered); // 8.33 > chi2(3, 95%)/3 = 7.815/3 = 2.6
                               // Even slices: no clustering.
        let flat = batch_means(&[20, 20, 21, 19], &[100; 4], 0.95);
        assert!(!flat.clustered && flat.inflation < 0.1);
        // Degenerate inputs.
        assert_eq!(batch_means(&[5], &[10], 0.95).high, 1.0);
        assert_eq!(batch_means(&[], &[], 0.95).low, 0.0);
    }

    /// `check --slices 2`: two batches, one degree of freedom, so the interval uses
    /// t(1, 97.5%) = 12.7062 (the Cornish-Fisher expansion used before gave 11.30, 11% too
    /// narrow). Shares 0.1 and 0.3 of 100 each: s = 0.141421, s/√2 = 0.1 -> half 1.27062,
    /// clamped to [0, 1] around 0.2.
    #[test]
    fn two_slices_use_the_exact_t() {
        let bm = batch_means(&[10, 30], &[100, 100], 0.95);
        assert_eq!((bm.low, bm.high), (0.0, 1.0));
        // Shares 0.19 and 0.21 of 1000 each: s/√2 = 0.01 -> half 0.127062.
        let bm = batch_means(&[190, 210], &[1000, 1000], 0.95);
        let half = (bm.high - bm.low) / 2.0;
        assert!((half - 0.127_062).abs() < 1e-6, "{half}");
    }

    #[test]
    fn detectable_share_is_rule_of_three() {
        // 1 - 0.05^(1/100) = 0.029513 (≈ 3/100).
        assert!((smallest_detectable_share(100, 0.95) - 0.029_513).abs() < 1e-6);
        assert!((smallest_detectable_share(10_000, 0.95) * 10_000.0 - 2.9957).abs() < 1e-3);
        assert_eq!(smallest_detectable_share(0, 0.95), 1.0);
    }

    #[test]
    fn rank_difference_by_hand() {
        // 300 and 250 of 1000: d = 0.05, var = (0.55 − 0.0025)/1000 -> z = 0.05/0.023399 =
        // 2.1368: told apart at 95%.
        let z = rank_difference_z(300, 250, 1000, 1.0);
        assert!((z - 2.1368).abs() < 1e-3, "{z}");
        // Twice the variance: 1.511, not told apart.
        assert!((rank_difference_z(300, 250, 1000, 2.0) - 2.1368 / 2f64.sqrt()).abs() < 1e-3);
        assert_eq!(rank_difference_z(5, 5, 10, 1.0), 0.0);
    }

    #[test]
    fn samples_factor_by_hand() {
        // ±3.2% now, ±1% wanted: 10.24 times the samples.
        assert!((samples_factor(0.032, 0.01) - 10.24).abs() < 1e-9);
        assert!(samples_factor(0.005, 0.01) < 1.0);
    }
}
