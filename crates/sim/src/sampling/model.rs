//! The analytic model of seed 002 §3 (eqs. 1-9): the piecewise binomial distribution of the
//! number of samples a run receives, and the moments of a profiled share it implies.

use super::timeline::Timeline;
use serde::{Deserialize, Serialize};

/// `R = running granularity / sampling interval` (seed 002 §3.3, eq. 1).
pub fn rate(granularity: f64, interval: f64) -> f64 {
    granularity / interval
}

/// `MOD(r, 1)`: the fractional part of `r` (seed 002 §3.4, after eq. 5).
pub fn frac(r: f64) -> f64 {
    r - r.floor()
}

/// Expectation and variance of the number of samples that land in one run of `r` sampling
/// intervals, for a start independent of the run (seed 002 §3.4): the run receives
/// `int(r) + 1` samples with probability `MOD(r,1)` and `int(r)` otherwise, so
/// `E = MOD(r,1) + int(r) = r` (eq. 5) and `V = MOD(r,1)(1 - MOD(r,1))` (eq. 6).
///
/// Reading chosen: the extracted eq. 5 prints `P(int(r)+1)·(int(r)+1)·P(int(r))·int(r)`; the
/// middle `·` is a lost `+` (the result `MOD(r,1) + int(r)` only follows with a sum).
pub fn piecewise_binomial(r: f64) -> (f64, f64) {
    let m = frac(r);
    (r, m * (1.0 - m))
}

/// Mean and variance of the average of `n` independent piecewise binomial draws with
/// parameter `x` (seed 002 §3.5, eqs. 8-9): `E = x`, `V = MOD(x,1)(1-MOD(x,1)) / n`.
pub fn sample_moments(x: f64, n: u64) -> (f64, f64) {
    let (e, v) = piecewise_binomial(x);
    (e, v / n.max(1) as f64)
}

/// Factor by which noise on the unit of events widens the standard deviation of a share whose
/// noise-free spread is binomial: `sqrt(1 + sigma^2)` (seed 002 eq. 10; first-order
/// derivation in [`timeline_moments`]). For a non-base event, `sigma^2` is the squared
/// coefficient of variation of its count per sampling interval, which
/// `proftrust analyze granularity` measures per module (`cv2`); `audit` should multiply the
/// half-width of a Wilson interval by this factor when it reports a non-base event.
pub fn noise_inflation(sigma: f64) -> f64 {
    (1.0 + sigma * sigma).sqrt()
}

/// A share's confidence interval `(lo, hi)` widened about its centre by
/// [`noise_inflation`]`(sigma)`, clamped to `[0, 1]`: the interval `audit` should print for a
/// share of a non-base event whose count per sampling interval has coefficient of variation
/// `sigma` (seed 002 eq. 10; `sigma^2` is the `cv2` that `proftrust analyze granularity`
/// measures). The coverage this restores is measured by the `coverage` preset
/// ([`Row::widened_coverage`](super::Row::widened_coverage)).
pub fn widen_interval(ci: (f64, f64), sigma: f64) -> (f64, f64) {
    let (lo, hi) = ci;
    let (mid, half) = ((lo + hi) / 2.0, (hi - lo) / 2.0 * noise_inflation(sigma));
    ((mid - half).max(0.0), (mid + half).min(1.0))
}

/// Model moments of one task's profiled share.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ShareMoments {
    /// Expected profiled share.
    pub mean: f64,
    /// Standard deviation of the profiled share.
    pub sd: f64,
}

/// Expected profiled share and its standard deviation for every task of a timeline, under the
/// piecewise binomial model with independent runs and unit noise `sigma` (eq. 10).
///
/// Derivation (the paper states eqs. 5-9 for one constant `r`; this is their sum over a
/// timeline): run `j` of task `k` spans `r_j = len_j / T` intervals and receives
/// `X_j = int(r_j) + Bernoulli(MOD(r_j,1))` samples (eqs. 5-6). With `n = L / T` samples,
/// the profiled share is `sum_j X_j / n`, so `E = sum_j r_j / n = actual share` (eqs. 5, 7)
/// and, if runs are captured independently, `Var = sum_j MOD(r_j,1)(1-MOD(r_j,1)) / n^2`.
/// With noise, each sample's unit is `U(1 + N(0, sigma))`; a first-order expansion of the
/// ratio `sum_{i in k} w_i / sum_i w_i` adds `sigma^2 p (1 - p) / n` (p = the share).
///
/// The independence of runs is the model's weak point: when the timeline is periodic with a
/// period commensurate with `T` (aliasing, self-time fragments of a loop) the captures of
/// different runs are correlated and the real spread is larger; see the `fragmentation`
/// preset.
pub fn timeline_moments(tl: &Timeline, interval: u64, sigma: f64) -> Vec<ShareMoments> {
    let k = tl.task_names.len();
    let t = interval.max(1) as f64;
    let n = tl.len() as f64 / t;
    let mut mean = vec![0.0; k];
    let mut var = vec![0.0; k];
    for (task, a, b) in tl.runs() {
        let (e, v) = piecewise_binomial((b - a) as f64 / t);
        mean[task as usize] += e;
        var[task as usize] += v;
    }
    mean.iter()
        .zip(&var)
        .map(|(&m, &v)| {
            let p = m / n;
            let total = v / (n * n) + sigma * sigma * p * (1.0 - p) / n;
            ShareMoments {
                mean: p,
                sd: total.max(0.0).sqrt(),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn piecewise_binomial_hand_values() {
        let (e, v) = piecewise_binomial(2.8);
        assert!((e - 2.8).abs() < 1e-12);
        assert!((v - 0.8 * 0.2).abs() < 1e-12);
        assert_eq!(piecewise_binomial(2.0), (2.0, 0.0));
        let (_, v) = piecewise_binomial(0.3);
        assert!((v - 0.21).abs() < 1e-12);
        // eq. 9 maximum 0.25 at MOD = 0.5, n = 1.
        assert!((sample_moments(1.5, 1).1 - 0.25).abs() < 1e-12);
        assert!((sample_moments(1.5, 100).1 - 0.0025).abs() < 1e-12);
        assert!((noise_inflation(2.0) - 5f64.sqrt()).abs() < 1e-12);
        // (0.4, 0.6) widened by sqrt(1 + 1) about 0.5; clamped at the ends.
        let (lo, hi) = widen_interval((0.4, 0.6), 1.0);
        assert!((lo - (0.5 - 0.1 * 2f64.sqrt())).abs() < 1e-12);
        assert!((hi - (0.5 + 0.1 * 2f64.sqrt())).abs() < 1e-12);
        assert_eq!(widen_interval((0.0, 0.2), 3.0).0, 0.0);
        assert_eq!(widen_interval((0.4, 0.6), 0.0), (0.4, 0.6));
    }

    #[test]
    fn timeline_moments_hand_computed() {
        // a [0,150) b [150,250) a [250,330), T = 100: n = 3.3 samples.
        let mut tl = Timeline::new(vec!["a".into(), "b".into()]);
        tl.push(0, 150);
        tl.push(1, 100);
        tl.push(0, 80);
        let m = timeline_moments(&tl, 100, 0.0);
        assert!((m[0].mean - 230.0 / 330.0).abs() < 1e-12);
        let var_a: f64 = (0.25 + 0.8 * 0.2) / (3.3 * 3.3);
        assert!((m[0].sd - var_a.sqrt()).abs() < 1e-12);
        assert_eq!(m[1].sd, 0.0);
    }
}
