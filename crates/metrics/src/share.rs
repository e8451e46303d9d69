//! Shares: mis-attribution epsilon and the Wilson interval of a sampled share.

use crate::Error;
use std::collections::BTreeMap;

/// The normal quantile for a two-sided 95% interval, `z = 1.959963984540054`.
pub const Z_95: f64 = 1.959_963_984_540_054;

/// Mis-attribution `ε = 1/2 Σ_k | s_k/N_S − e_k/N_I |` (seed 000, "Can We Trust Profiling
/// Results?", §4 case studies: "ε reports that 15% of the instructions are mis-attributed on
/// function level"; the formula is DESIGN.md's reading of that metric). It is the total
/// variation distance between the sampled and the exact distributions: the share of samples
/// that would have to move to another key to match the truth. At instruction or block
/// granularity it equals the TIP paper's error ("share of cycles attributed to the wrong
/// symbol").
///
/// The key is the caller's granularity (outermost function, innermost inlined function,
/// block, instruction address). Keys present on one side only count with share 0 on the other;
/// repeated keys are summed. `N_S` and `N_I` are the sums of the two inputs, so pass every
/// unit in scope (including an "unknown" key for unattributed samples or instructions).
/// Result in `[0, 1]`.
pub fn epsilon<K: Ord>(
    sampled: impl IntoIterator<Item = (K, u64)>,
    exact: impl IntoIterator<Item = (K, u64)>,
) -> Result<f64, Error> {
    let mut m: BTreeMap<K, (u64, u64)> = BTreeMap::new();
    for (k, c) in sampled {
        m.entry(k).or_default().0 += c;
    }
    for (k, c) in exact {
        m.entry(k).or_default().1 += c;
    }
    let n_s: u64 = m.values().map(|v| v.0).sum();
    let n_i: u64 = m.values().map(|v| v.1).sum();
    if n_s == 0 {
        return Err(Error::NoSamples { what: "epsilon" });
    }
    if n_i == 0 {
        return Err(Error::NoExecutions { what: "epsilon" });
    }
    let (ns, ni) = (n_s as f64, n_i as f64);
    let sum: f64 = m
        .values()
        .map(|&(s, e)| (s as f64 / ns - e as f64 / ni).abs())
        .sum();
    Ok((sum / 2.0).clamp(0.0, 1.0))
}

/// Wilson score interval for a proportion: `k` successes out of `n` trials at normal quantile
/// `z` (use [`Z_95`] for 95%). With `p = k/n`:
///
/// `centre = (p + z²/(2n)) / (1 + z²/n)`,
/// `half = z / (1 + z²/n) · sqrt( p(1−p)/n + z²/(4n²) )`, interval `[centre − half, centre + half]`
/// clamped to `[0, 1]` (Wilson 1927; the standard form, e.g. Agresti & Coull 1998 eq. 2).
///
/// Used for a function's sampled share `s_f / N_S` (DESIGN.md "Confidence interval"; seed
/// 002 shows the sampled share is unbiased, so the binomial interval is the per-run bound).
/// `n = 0` gives the uninformative `(0, 1)`; `k > n` is clamped to `n`.
pub fn wilson_interval(k: u64, n: u64, z: f64) -> (f64, f64) {
    if n == 0 {
        return (0.0, 1.0);
    }
    wilson_interval_of_share(k.min(n) as f64 / n as f64, n as f64, z)
}

/// [`wilson_interval`] of a share `p` over `n` samples that may be weighted or effective
/// (non-integer): the same formula over reals (a fleet's weighted samples, an effective
/// sample size after over-dispersion). `n <= 0` gives `(0, 1)`; `p` is clamped to `[0, 1]`,
/// and `p = 0` (`1`) keeps the lower (upper) bound at 0 (1).
pub fn wilson_interval_of_share(p: f64, n: f64, z: f64) -> (f64, f64) {
    if n.is_nan() || n <= 0.0 {
        return (0.0, 1.0);
    }
    let p = p.clamp(0.0, 1.0);
    let z2 = z * z;
    let denom = 1.0 + z2 / n;
    let centre = (p + z2 / (2.0 * n)) / denom;
    let half = z / denom * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).max(0.0).sqrt();
    let lo = if p <= 0.0 {
        0.0
    } else {
        (centre - half).max(0.0)
    };
    let hi = if p >= 1.0 {
        1.0
    } else {
        (centre + half).min(1.0)
    };
    (lo, hi)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epsilon_hand_computed() {
        // sampled f:6 g:4 (N_S = 10) -> .6 .4 0; exact f:50 g:30 h:20 (N_I = 100) -> .5 .3 .2
        // |d| = .1 + .1 + .2 = .4; ε = .2
        let e = epsilon([("f", 6), ("g", 4)], [("f", 50), ("g", 30), ("h", 20)]).unwrap();
        assert!((e - 0.2).abs() < 1e-12, "{e}");
        // identical distributions -> 0; disjoint -> 1
        assert_eq!(epsilon([(1, 2), (2, 2)], [(1, 5), (2, 5)]).unwrap(), 0.0);
        assert!((epsilon([(1, 3)], [(2, 9)]).unwrap() - 1.0).abs() < 1e-12);
        // repeated keys are summed: f:3+3 = 6 as above
        let e = epsilon(
            [("f", 3), ("g", 4), ("f", 3)],
            [("f", 50), ("g", 30), ("h", 20)],
        )
        .unwrap();
        assert!((e - 0.2).abs() < 1e-12);
    }

    #[test]
    fn epsilon_degenerate() {
        assert_eq!(
            epsilon::<u8>([], [(1, 1)]),
            Err(Error::NoSamples { what: "epsilon" })
        );
        assert_eq!(
            epsilon([(1u8, 1)], [(1, 0)]),
            Err(Error::NoExecutions { what: "epsilon" })
        );
    }

    #[test]
    fn wilson_hand_computed() {
        // k=5, n=10, z=1.96: p=.5, z²/n=.38416, denom=1.38416,
        // centre=(.5+.19208)/1.38416=.5, half=1.96/1.38416*sqrt(.025+.009604)=.263408
        let (lo, hi) = wilson_interval(5, 10, 1.96);
        assert!((lo - 0.236_593).abs() < 1e-5, "{lo}");
        assert!((hi - 0.763_407).abs() < 1e-5, "{hi}");
        // k=0, n=10: centre=.19208/1.38416=.138770, half=1.41602*sqrt(.009604)=.138770
        let (lo, hi) = wilson_interval(0, 10, 1.96);
        assert_eq!(lo, 0.0);
        assert!((hi - 0.277_54).abs() < 1e-4, "{hi}");
        // k=n mirrors k=0
        let (lo, hi) = wilson_interval(10, 10, 1.96);
        assert!((lo - 0.722_46).abs() < 1e-4, "{lo}");
        assert_eq!(hi, 1.0);
        assert_eq!(wilson_interval(0, 0, Z_95), (0.0, 1.0));
        // k=81, n=263, z=1.959964: p=.307985, z²/n=.014606, denom=1.014606,
        // centre=(.307985+.007303)/1.014606=.310749,
        // half=1.931748*sqrt(.00081042+.00001388)=1.931748*.028711=.055462 -> (.255287, .366211)
        let (lo, hi) = wilson_interval(81, 263, Z_95);
        assert!(
            (lo - 0.255_287).abs() < 1e-5 && (hi - 0.366_211).abs() < 1e-5,
            "{lo} {hi}"
        );
    }
}
