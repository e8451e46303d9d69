//! Minimum evidence: when a metric or a verdict rests on too few samples to mean anything.
//!
//! Every rule here comes from one sampling model, seed 002's (Wen et al., "Probability
//! Analysis to Improve the Confidence in Profiling Accuracy"): each sample falls in a function
//! of exact share `p` with probability `p` (§3.3 item (2), eq. 3: "the probability of being
//! captured by a sampling point equals the running proportion"), so the samples of that
//! function out of `N` are binomial and the sampled share `k/N` is unbiased (eqs. 5, 7) with
//! variance `p(1−p)/N` (eq. 9, `MOD(x,1)` read as the share and `n` as the number of samples).
//! §3.5 closes with the tail it accepts: "the probability of misestimating the mean value by
//! one more unit event is less than 0.0228" — the one-sided normal tail at two standard
//! deviations. We take that 0.0228 as the risk every rule below accepts ([`ACCEPTED_RISK`]).
//!
//! | rule | too few when | why |
//! |---|---|---|
//! | any metric | `N < 100` samples in scope ([`MIN_SAMPLES`]) | eq. 9 at its worst (`p = ½`): a share's standard deviation is `0.5/√N`; two of them (the 0.0228 tail) are ±10 points at `N = 100`, wider below: every share, and so ε, NRMSE_SR, SC, OD and the ranks, is noise of that size |
//! | a function's bias mark `!` | observed and expected samples (`N·p_exact`) both under 5 ([`MIN_BIAS_SAMPLES`]) | the 0.0228 of §3.5 is a normal tail; the binomial is near normal only where its mean is ≥ 5 (the usual rule for the normal approximation). Below it one or two samples decide the verdict: a single sample skidded over a function boundary is "outside the interval" of a function that ran a few hundred instructions |
//! | coverage | `N < ln(0.0228)/ln(1−t)` (377 at `t` = 1%, [`coverage_min_samples`]) | a function of share `t` gets no sample with probability `(1−t)^N` (eq. 3 per sample, independent): below that `N`, a missed 1% function is chance more often than 0.0228 |
//! | Kendall tau-b | fewer than 5 ranked functions ([`MIN_RANKED_FUNCTIONS`]) | a random order of `m` functions is perfect with probability `1/m!`: 1/24 = 0.042 for 4, above 0.0228; 1/120 for 5 |
//! | top-k overlap | at most `k` ranked functions | both top-k sets are then all ranked functions: the overlap is 1 by construction |
//!
//! The values are still computed and reported; these rules say which of them are not
//! evidence ([`too_few`]), and the report says so next to the number.

use crate::compare::{CompareOptions, Comparison};
use std::collections::BTreeMap;

/// The risk every rule accepts: seed 002 §3.5's 0.0228, the one-sided normal tail at two
/// standard deviations.
pub const ACCEPTED_RISK: f64 = 0.0228;

/// Samples in scope below which no metric is evidence: with `N` samples a share's standard
/// deviation is up to `0.5/√N` (seed 002 §3.5 eq. 9 at `p = ½`), so two standard deviations
/// (the 0.0228 tail of §3.5) are ±10 percentage points at `N = 100`.
pub const MIN_SAMPLES: u64 = 100;

/// Samples (observed, or expected from the exact share: `N·p_exact`) a function needs before
/// a sampled share outside its interval is called bias. The interval's 0.0228-style tail is
/// a normal reading of the binomial of seed 002 §3.5 eq. 9, which holds where the binomial's
/// mean is at least 5.
pub const MIN_BIAS_SAMPLES: f64 = 5.0;

/// Ranked functions Kendall tau-b needs: a random order of `m` items is perfect with
/// probability `1/m!`, under [`ACCEPTED_RISK`] from `m = 5` (1/120; 1/24 for 4).
pub const MIN_RANKED_FUNCTIONS: usize = 5;

/// Samples from which a function of exact share `threshold` is missed (no sample at all) with
/// probability at most [`ACCEPTED_RISK`]: the least `N` with `(1−t)^N ≤ 0.0228` (each sample
/// lands in it with probability `t`, seed 002 §3.3 eq. 3). 377 at `t = 0.01`.
pub fn coverage_min_samples(threshold: f64) -> u64 {
    if !(threshold > 0.0 && threshold < 1.0) {
        return 1;
    }
    (ACCEPTED_RISK.ln() / (1.0 - threshold).ln()).ceil() as u64
}

/// Whether a function with `samples` of `n` samples and exact share `exact_share` has enough
/// evidence for its difference to be called bias: observed or expected samples at least
/// [`MIN_BIAS_SAMPLES`].
pub fn enough_for_bias(samples: u64, n: u64, exact_share: f64) -> bool {
    (samples as f64).max(n as f64 * exact_share) >= MIN_BIAS_SAMPLES
}

/// The metrics of `c` that rest on too few samples, by the key they have in a report
/// (`epsilon_function`, `kendall_tau`, ...), each with the reason in words.
pub fn too_few(c: &Comparison, opts: &CompareOptions) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let n = c.samples;
    if n < MIN_SAMPLES {
        let why =
            format!("{n} samples; {MIN_SAMPLES} needed before a share is known to ±10 points");
        for k in [
            "epsilon_function",
            "epsilon_inline",
            "epsilon_block",
            "epsilon_instruction",
            "nrmse_sr",
            "sc",
            "od",
            "od_prose",
        ] {
            out.insert(k.to_string(), why.clone());
        }
    }
    let cov = coverage_min_samples(opts.coverage_threshold);
    if n < cov {
        out.insert(
            "coverage".into(),
            format!(
                "{n} samples; {cov} needed before missing a {:.0}% function is not chance",
                100.0 * opts.coverage_threshold
            ),
        );
    }
    let m = c.ranked_functions;
    if m < MIN_RANKED_FUNCTIONS {
        out.insert(
            "kendall_tau".into(),
            format!(
                "{m} ranked functions; {MIN_RANKED_FUNCTIONS} needed before an order is not chance"
            ),
        );
    }
    for (k, key) in [(5, "top5_overlap"), (10, "top10_overlap")] {
        if m <= k {
            out.insert(
                key.into(),
                format!("{m} ranked functions; more than {k} needed (else 1 by construction)"),
            );
        }
    }
    if n < MIN_SAMPLES {
        // Ranks of a handful of samples are noise whatever their number.
        for key in ["kendall_tau", "top5_overlap", "top10_overlap"] {
            out.entry(key.into()).or_insert_with(|| {
                format!("{n} samples; {MIN_SAMPLES} needed before a share is known to ±10 points")
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coverage_needs_377_samples_at_one_percent() {
        // By hand: ln(0.0228) = -3.7809, ln(0.99) = -0.0100503; ratio 376.2 -> 377.
        let n = coverage_min_samples(0.01);
        assert!(0.99f64.powi(n as i32) <= ACCEPTED_RISK);
        assert!(0.99f64.powi(n as i32 - 1) > ACCEPTED_RISK);
        assert_eq!(n, 377);
        assert_eq!(coverage_min_samples(0.0), 1);
    }

    #[test]
    fn bias_needs_five_samples_observed_or_expected() {
        // main with 1 sample of 5113, exact share 1e-6: no verdict.
        assert!(!enough_for_bias(1, 5113, 1e-6));
        // update_penalty: 3 samples, exact 0.22% of 5113 = 11.2 expected: a verdict.
        assert!(enough_for_bias(3, 5113, 0.0022));
        // 5 observed samples where none were expected: a verdict.
        assert!(enough_for_bias(5, 5113, 0.0));
        assert!(!enough_for_bias(4, 1000, 0.004));
    }

    #[test]
    fn two_samples_are_no_evidence_for_anything() {
        let c = Comparison {
            samples: 2,
            ranked_functions: 2,
            ..Comparison::empty_for_tests()
        };
        let t = too_few(&c, &CompareOptions::default());
        for k in [
            "epsilon_function",
            "epsilon_instruction",
            "nrmse_sr",
            "sc",
            "od",
            "od_prose",
            "kendall_tau",
            "top5_overlap",
            "top10_overlap",
            "coverage",
        ] {
            assert!(t.contains_key(k), "{k} not flagged: {t:?}");
        }
        assert!(t["kendall_tau"].contains("2 ranked functions"));
        let c = Comparison {
            samples: 5000,
            ranked_functions: 11,
            ..Comparison::empty_for_tests()
        };
        assert!(too_few(&c, &CompareOptions::default()).is_empty());
        let c = Comparison {
            samples: 5000,
            ranked_functions: 4,
            ..Comparison::empty_for_tests()
        };
        let t = too_few(&c, &CompareOptions::default());
        assert_eq!(
            t.keys().collect::<Vec<_>>(),
            ["kendall_tau", "top10_overlap", "top5_overlap"]
        );
    }
}
