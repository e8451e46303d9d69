//! Intervals for another run: the share of a function that another run of the same program
//! and input would show (issue 35), beside the within-run interval the rows state.
//!
//! A run's shares differ from another run's by more than sampling explains: the program's
//! placement in memory, what else the machine runs, frequency changes move the time shares
//! themselves (on this project's 2-core machine, a pointer chase's hot function moved by 1
//! point between runs against a Wilson half-width of 0.6, docs/check.md). Two estimators:
//!
//! * several recordings given: [`between_recordings`], the spread of the shares between them;
//! * one recording: [`overdispersed`], the sampling variance plus a between-run variance
//!   `tau² p(1 − p)` calibrated on repeated runs ([`RUN_TAU`]), i.e. the Wilson interval at
//!   the effective sample size `1/(1/n + tau²)`; for a phase-locked recording the effective
//!   size is at most the number of uninterrupted stretches (each looked at the program's
//!   cycle at one phase).

use proftrust_metrics::dist::t_quantile;
use proftrust_metrics::wilson_interval_of_share;

/// The between-run dispersion `tau` of the one-recording estimator: the share of a function
/// varies between runs with variance `tau² p(1 − p)` on top of the sampling variance, as the
/// shares of a Dirichlet-multinomial with precision `1/tau²` (an over-dispersed multinomial;
/// e.g. Agresti, Categorical Data Analysis, 3rd ed. 2013, §4.7.4, the beta-binomial).
///
/// Calibrated on seven randomised recordings each of the bundled `omnet` and `hmmer`
/// workloads (`scripts/check-run-coverage.sh calibrate`, load average 8): the median tau of
/// the functions of at least 1% was 0.021 (omnet) and 0.010 or 0 (hmmer), and the coverage
/// was measured on three other programs (docs/check.md, "Intervals for another run"). 0.028
/// sits above both calibrations (a busier machine moves shares more) and is the largest
/// round value for which the half-width stays within issue 35's bound, max(3 points, 3x the
/// Wilson half-width), at every `n` and `p` (normal approximation): the worst case is
/// `p = 1/2` at `n = 8/tau²`, where the bound needs `(9/8) tau² ≤ (0.03/z)²/(1/4)`, i.e.
/// `tau ≤ 0.0289`. Another run's shares are then like a sample of at most `1/tau²` ≈ 1280;
/// at `p = 1/2` and many samples the interval is ±2.7 points.
pub const RUN_TAU: f64 = 0.028;

/// The one-recording interval for another run: the Wilson interval of the share `k/n` at the
/// effective sample size `n_eff = 1/(1/n + tau²)` (sampling variance `p(1−p)/n` plus the
/// between-run variance `tau² p(1−p)`), with `n_eff` at most `looks` when given (a
/// phase-locked recording: each uninterrupted stretch is one look at the program's cycle).
/// `n = 0` gives `(0, 1)`.
pub fn overdispersed(k: u64, n: u64, z: f64, tau: f64, looks: Option<u64>) -> (f64, f64) {
    if n == 0 {
        return (0.0, 1.0);
    }
    let mut n_eff = 1.0 / (1.0 / n as f64 + tau * tau);
    if let Some(l) = looks {
        n_eff = n_eff.min(l.max(1) as f64);
    }
    wilson_interval_of_share(k.min(n) as f64 / n as f64, n_eff, z)
}

/// The interval for another run from `R >= 2` recordings of the same program and input: with
/// the recordings' shares `s_r = counts[r]/totals[r]`, their mean `m` and standard deviation
/// `s`, the prediction interval of one more observation `m ± t_{R−1} · s · √(1 + 1/R)`
/// (the normal-theory prediction interval, e.g. Hahn & Meeker, Statistical Intervals, 1991,
/// §4.6), never narrower than the Wilson interval of one recording of the mean size at `m`
/// (a next run has its own sampling error even when the recordings agree by chance),
/// clamped to `[0, 1]`. Fewer than 2 recordings with samples give `None`.
pub fn between_recordings(counts: &[u64], totals: &[u64], confidence: f64) -> Option<(f64, f64)> {
    let shares: Vec<f64> = counts
        .iter()
        .zip(totals)
        .filter(|(_, &t)| t > 0)
        .map(|(&c, &t)| c as f64 / t as f64)
        .collect();
    let r = shares.len();
    if r < 2 {
        return None;
    }
    let rf = r as f64;
    let m = shares.iter().sum::<f64>() / rf;
    let s2 = shares.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (rf - 1.0);
    let t = t_quantile(0.5 + confidence / 2.0, rf - 1.0);
    let half = t * (s2 * (1.0 + 1.0 / rf)).sqrt();
    let sizes: Vec<u64> = totals.iter().copied().filter(|&t| t > 0).collect();
    let mean_n = sizes.iter().sum::<u64>() as f64 / sizes.len() as f64;
    let z = proftrust_metrics::dist::z_for(confidence);
    let (wl, wh) = wilson_interval_of_share(m, mean_n, z);
    Some(((m - half).max(0.0).min(wl), (m + half).min(1.0).max(wh)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 9000 of 10000 (p = 0.9), tau 0.03: n_eff = 1/(1e-4 + 9e-4) = 1000; Wilson at 1000:
    /// centre (0.9 + 3.8415/2000)/(1 + 0.0038415) = 0.898469, half 1.959964/1.0038415 ·
    /// √(0.09/1000 + 3.8415/4e6) = 0.018621 -> [0.879848, 0.917091].
    #[test]
    fn overdispersed_by_hand() {
        let (lo, hi) = overdispersed(9000, 10_000, 1.959_964, 0.03, None);
        assert!((lo - 0.879_848).abs() < 1e-5, "{lo}");
        assert!((hi - 0.917_091).abs() < 1e-5, "{hi}");
        // tau 0 is the plain Wilson interval.
        let w = proftrust_metrics::wilson_interval(9000, 10_000, 1.959_964);
        assert_eq!(overdispersed(9000, 10_000, 1.959_964, 0.0, None), w);
        // Two looks: the Wilson interval of 0.9 at n = 2.
        let (lo, hi) = overdispersed(9000, 10_000, 1.959_964, 0.03, Some(2));
        assert_eq!((lo, hi), wilson_interval_of_share(0.9, 2.0, 1.959_964));
        assert_eq!(overdispersed(0, 0, 1.96, 0.03, None), (0.0, 1.0));
    }

    /// Issue 35's bound on the one-recording interval: a half-width of at most max(3 points,
    /// 3x the Wilson half-width) at every sample size and share, with the RUN_TAU in use
    /// (at 0.03 it was exceeded by up to 3.5% near p = 1/2 and n = 9600).
    #[test]
    fn run_tau_keeps_the_half_width_within_the_bound() {
        let z = proftrust_metrics::dist::z_for(0.95);
        let mut n = 10u64;
        while n <= 10_000_000 {
            for k in [1, n / 100, n / 10, n / 4, n / 2, n - n / 10] {
                let (lo, hi) = overdispersed(k, n, z, RUN_TAU, None);
                let (wl, wh) = proftrust_metrics::wilson_interval(k, n, z);
                let bound = f64::max(0.03, 3.0 * (wh - wl) / 2.0);
                assert!(
                    (hi - lo) / 2.0 <= bound + 1e-12,
                    "{k}/{n}: {lo} {hi} {bound}"
                );
            }
            n = n * 5 / 4 + 1;
        }
        // 0.03 was not: 4802 of 9604.
        let (lo, hi) = overdispersed(4802, 9604, z, 0.03, None);
        assert!((hi - lo) / 2.0 > 0.03, "{lo} {hi}");
    }

    /// Shares 0.10, 0.12, 0.14 of 1000 each: m 0.12, s 0.02, t(2) 4.302653, √(4/3) ->
    /// half 0.099366 -> [0.020634, 0.219366] (wider than Wilson at 1000).
    #[test]
    fn between_recordings_by_hand() {
        let (lo, hi) = between_recordings(&[100, 120, 140], &[1000; 3], 0.95).unwrap();
        assert!((lo - 0.020_634).abs() < 1e-5, "{lo}");
        assert!((hi - 0.219_366).abs() < 1e-5, "{hi}");
        // Identical shares: the Wilson floor at the mean size.
        let (lo, hi) = between_recordings(&[120, 120], &[1000, 1000], 0.95).unwrap();
        let w = wilson_interval_of_share(0.12, 1000.0, proftrust_metrics::dist::z_for(0.95));
        assert_eq!((lo, hi), w);
        assert!(between_recordings(&[5], &[10], 0.95).is_none());
        assert!(between_recordings(&[5, 0], &[10, 0], 0.95).is_none());
    }
}
