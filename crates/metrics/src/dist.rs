//! The distribution functions every interval and test of proftrust uses, in one place: the
//! standard normal, Student's t and the chi-square distribution, through `statrs` (exact
//! inverse CDFs and regularised incomplete beta/gamma functions, not series approximations).
//!
//! `check`'s batch means (`crate::resolution`) and the fleet statistics (`crate::fleet`)
//! both take their quantiles from here. Before, each had its own: a Cornish-Fisher expansion
//! of the t quantile that gave `t(1)` at 97.5% as 11.30 instead of 12.71 (so `check --slices 2`
//! intervals were 11% too narrow), a Wilson-Hilferty chi-square quantile 2.5% low at one
//! degree of freedom, and hand-written `ln Γ`, incomplete beta and `erfc`.
//!
//! Arguments out of the domain never panic: a probability at or beyond 0 or 1 gives the
//! infinite quantile of that side, degrees of freedom that are not positive give NaN (callers
//! check theirs), infinite degrees of freedom give the normal limit.

use statrs::distribution::{ChiSquared, ContinuousCDF, Normal, StudentsT};

fn standard_normal() -> Normal {
    // Mean 0, standard deviation 1: always valid.
    Normal::standard()
}

/// Quantile of the standard normal distribution at probability `p`: `Φ⁻¹(p)`. `p <= 0`
/// gives `−∞`, `p >= 1` gives `+∞`, NaN gives NaN.
pub fn normal_quantile(p: f64) -> f64 {
    if p.is_nan() {
        return f64::NAN;
    }
    if p <= 0.0 {
        return f64::NEG_INFINITY;
    }
    if p >= 1.0 {
        return f64::INFINITY;
    }
    standard_normal().inverse_cdf(p)
}

/// Two-sided normal quantile of a confidence level: `z` with `P(|Z| <= z) = confidence`
/// (1.959 964 for 0.95).
pub fn z_for(confidence: f64) -> f64 {
    normal_quantile(0.5 + confidence / 2.0)
}

/// The standard normal survival function `P(Z > x)`.
pub fn normal_sf(x: f64) -> f64 {
    if x.is_nan() {
        return f64::NAN;
    }
    standard_normal().sf(x)
}

/// Two-sided p-value of a standard normal statistic: `P(|Z| >= |z|)`; `z = ±∞` gives 0, NaN
/// gives 1 (nothing shown).
pub fn two_sided_p(z: f64) -> f64 {
    if z.is_nan() {
        return 1.0;
    }
    (2.0 * normal_sf(z.abs())).clamp(0.0, 1.0)
}

/// Quantile of Student's t distribution with `df` degrees of freedom at probability `p`,
/// exact at every `df > 0` (`t(1)` at 97.5% = 12.7062, `t(2)` = 4.3027, `t(19)` = 2.0930).
/// `df` infinite gives the normal quantile; `df <= 0` or NaN gives NaN; `p` at or beyond 0
/// or 1 gives the infinite quantile of that side.
pub fn t_quantile(p: f64, df: f64) -> f64 {
    if df.is_infinite() && df > 0.0 {
        return normal_quantile(p);
    }
    if df.is_nan() || df <= 0.0 || p.is_nan() {
        return f64::NAN;
    }
    if p <= 0.0 {
        return f64::NEG_INFINITY;
    }
    if p >= 1.0 {
        return f64::INFINITY;
    }
    match StudentsT::new(0.0, 1.0, df) {
        Ok(t) => t.inverse_cdf(p),
        Err(_) => f64::NAN,
    }
}

/// Two-sided p-value of Student's t with `df` degrees of freedom: `P(|T| >= |t|)`; `df`
/// infinite or above 1e7 gives the normal [`two_sided_p`]; NaN `t` gives 1, infinite `t` 0.
pub fn two_sided_p_t(t: f64, df: f64) -> f64 {
    if t.is_nan() {
        return 1.0;
    }
    if !df.is_finite() || df > 1e7 {
        return two_sided_p(t);
    }
    if t.is_infinite() {
        return 0.0;
    }
    match StudentsT::new(0.0, 1.0, df.max(1e-9)) {
        Ok(d) => (2.0 * d.sf(t.abs())).clamp(0.0, 1.0),
        Err(_) => 1.0,
    }
}

/// Quantile of the chi-square distribution with `k > 0` degrees of freedom at probability
/// `p` (`χ²(1)` at 95% = 3.8415, `χ²(19)` = 30.1435). `p <= 0` gives 0, `p >= 1` gives `+∞`,
/// `k <= 0` or NaN gives NaN.
pub fn chi2_quantile(p: f64, k: f64) -> f64 {
    if k.is_nan() || k <= 0.0 || p.is_nan() {
        return f64::NAN;
    }
    if p <= 0.0 {
        return 0.0;
    }
    if p >= 1.0 {
        return f64::INFINITY;
    }
    match ChiSquared::new(k) {
        Ok(c) => c.inverse_cdf(p),
        Err(_) => f64::NAN,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    /// Against printed tables (Abramowitz & Stegun 26.2, 26.7, 26.4; the same values R's
    /// qnorm, qt and qchisq give).
    #[test]
    fn quantiles_match_tables() {
        assert!(close(normal_quantile(0.975), 1.959_963_985, 1e-8));
        assert!(close(normal_quantile(0.995), 2.575_829_304, 1e-8));
        assert!(close(normal_quantile(0.05), -1.644_853_627, 1e-8));
        assert!(close(z_for(0.95), 1.959_963_985, 1e-8));
        // Student t at 97.5%, small df exact (the Cornish-Fisher expansion gave 11.30 at df 1).
        for (df, want) in [
            (1.0, 12.706_205),
            (2.0, 4.302_653),
            (3.0, 3.182_446),
            (4.0, 2.776_445),
            (9.0, 2.262_157),
            (19.0, 2.093_024),
            (30.0, 2.042_272),
        ] {
            let t = t_quantile(0.975, df);
            assert!(close(t, want, 1e-5), "t({df}) = {t}, want {want}");
            assert!(close(t_quantile(0.025, df), -want, 1e-5));
        }
        assert!(close(t_quantile(0.975, f64::INFINITY), 1.959_963_985, 1e-8));
        // Chi-square at 95%: df 1 -> 3.8415 (Wilson-Hilferty gave 2.5% less), 9 -> 16.919,
        // 19 -> 30.144.
        assert!(close(chi2_quantile(0.95, 1.0), 3.841_459, 1e-5));
        assert!(close(chi2_quantile(0.95, 9.0), 16.918_978, 1e-4));
        assert!(close(chi2_quantile(0.95, 19.0), 30.143_527, 1e-4));
    }

    #[test]
    fn p_values_match_tables() {
        assert!(close(two_sided_p(1.959_964), 0.05, 1e-6));
        assert!(close(two_sided_p(-3.0), 0.002_699_8, 1e-7));
        assert!(close(two_sided_p(6.0) / 1.973_175e-9, 1.0, 1e-5));
        assert_eq!(two_sided_p(0.0), 1.0);
        assert_eq!(two_sided_p(f64::INFINITY), 0.0);
        assert_eq!(two_sided_p(f64::NAN), 1.0);
        assert!(close(two_sided_p_t(12.706_205, 1.0), 0.05, 1e-6));
        assert!(close(two_sided_p_t(2.093_024, 19.0), 0.05, 1e-6));
        // df 2 closed form p = 1 − t/√(2 + t²): t = 3 -> 1 − 3/√11.
        assert!(close(
            two_sided_p_t(3.0, 2.0),
            1.0 - 3.0 / 11f64.sqrt(),
            1e-12
        ));
        // df 1 is the Cauchy distribution: P(|T| >= 1) = 1/2.
        assert!(close(two_sided_p_t(1.0, 1.0), 0.5, 1e-12));
        assert!(close(two_sided_p_t(3.0, f64::INFINITY), 0.002_699_8, 1e-7));
        assert!(close(two_sided_p_t(3.0, 1e6), 0.002_699_8, 1e-6));
        assert_eq!(two_sided_p_t(0.0, 5.0), 1.0);
    }

    #[test]
    fn out_of_domain_does_not_panic() {
        assert_eq!(normal_quantile(0.0), f64::NEG_INFINITY);
        assert_eq!(normal_quantile(1.0), f64::INFINITY);
        assert!(t_quantile(0.975, 0.0).is_nan());
        assert!(t_quantile(0.975, -1.0).is_nan());
        assert_eq!(t_quantile(1.5, 3.0), f64::INFINITY);
        assert!(chi2_quantile(0.95, 0.0).is_nan());
        assert_eq!(chi2_quantile(0.0, 3.0), 0.0);
        assert_eq!(two_sided_p_t(f64::INFINITY, 3.0), 0.0);
    }
}
