//! Fleet-scale statistics (issue 16, docs/fleet-statistics.md): a function's share of a whole
//! fleet's samples with an interval that accounts for samples clustering by host, the
//! difference of two fleets (e.g. build A against build B) with false-discovery-rate control
//! over all functions, per-host deviations, and the samples or hosts a target precision needs.
//!
//! Everything is computed from a handful of sums per function that a query engine aggregates
//! over the hosts (clusters) `h = 1..C`, so no function here needs the samples themselves:
//!
//! * per fleet ([`FleetTotals`]): `C`, `N = Σ_h n_h`, `Σ_h n_h²`, with `n_h` a host's samples;
//! * per function ([`UnitSums`]): `Σ_h y_h`, `Σ_h y_h²`, `Σ_h y_h n_h`, with `y_h` the host's
//!   samples in the function.
//!
//! Hosts are the clusters: recordings of one host are nested in it, and clustering at the
//! coarsest level covers the finer ones (Cameron & Miller 2015, "A Practitioner's Guide to
//! Cluster-Robust Inference", J. Human Resources 50(2), §IV.A: cluster at the broadest level
//! that may be correlated). Samples of one recording are *not* independent of each other
//! (seed 002 §3.4: a running state spans consecutive samples), which the host-level variance
//! absorbs.
//!
//! The per-sample model is seed 002's: a sampled share is unbiased for the running proportion
//! (§3.3, eqs. 3-5, 7) with the binomial variance `p(1 − p)/n` (§3.4-3.5, eqs. 6 and 9). At
//! fleet level the share is a *ratio estimator* (Cochran, *Sampling Techniques*, 3rd ed.
//! 1977, ch. 6: `R = ȳ/x̄`; for clusters of unequal size, ch. 9, the ratio-to-size estimate)
//! and its variance is the linearised (sandwich) one of that estimator.

use crate::dist::{t_quantile, z_for};
pub use crate::dist::{two_sided_p, two_sided_p_t};

/// How [`ratio_share`] computes a share and its interval, with the citation (shown under a
/// fleet report's table).
pub const RATIO_METHOD: &str = "share = Σ_h y_h / Σ_h n_h over hosts h (ratio estimator, Cochran 1977 ch. 6); cluster-robust (linearised) variance Σ_h (y_h − R·n_h)²/N² / (1 − Σ_h (n_h/N)²) with hosts as clusters (the factor is C/(C−1) for hosts of equal samples; Cameron & Miller 2015 §II-VI) and a t interval on C_eff − 1 degrees of freedom, C_eff = N²/Σ n_h² (Kish 1992), never narrower than the Wilson interval of the pooled samples (seed 002 §3.5 eq. 9)";

/// How [`share_difference`] tests a difference of two fleets' shares, with the citation.
pub const DIFF_METHOD: &str = "delta = share_B − share_A; Welch-type z = delta / √(se_A² + se_B²) on the two sides' cluster-robust standard errors (independent hosts on each side), two-sided normal p-value; q-values by the Benjamini-Hochberg step-up procedure over all functions (Benjamini & Hochberg 1995, JRSS B 57(1), §3)";

/// How [`share_difference_df`] tests a difference (the method `fleet diff` should name when it
/// uses the t reference), with the citation.
pub const DIFF_METHOD_DF: &str = "delta = share_B − share_A; t = delta / √(se_A² + se_B²) on the two sides' cluster-robust standard errors (independent hosts on each side) against Student's t with Welch-Satterthwaite degrees of freedom from each side's effective hosts (Welch 1947; Satterthwaite 1946); q-values by the Benjamini-Hochberg step-up procedure over all functions (Benjamini & Hochberg 1995, JRSS B 57(1), §3)";

/// How [`host_deviation`] tests one host against the rest of the fleet, with the citation.
pub const HOST_METHOD: &str = "host share y_h/n_h against the rest of the fleet's share (Σ y − y_h)/(N − n_h): two-proportion z with the pooled binomial variance p̄(1−p̄)(1/n_h + 1/(N − n_h)) (the score test of a 2×2 table, z² = Pearson's X², Agresti, Categorical Data Analysis, 3rd ed. 2013, ch. 3; seed 002 eq. 9 per sample), which assumes independent samples and flags any real difference, not only large ones; q-values by Benjamini-Hochberg over all host × function tests";

/// Kish's effective number of samples of a weight `w` whose samples give `Σ w_i² = sq`
/// (`w² / sq`, Kish 1965 §11.7; see [`FleetTotals::effective_samples`]); 0 when `sq` is 0.
pub fn effective_samples(w: f64, sq: f64) -> f64 {
    if sq > 0.0 {
        w * w / sq
    } else {
        0.0
    }
}

/// The fleet's totals over its `C` hosts (clusters).
///
/// `n_h` is a host's *weight* of the event: the sum of its samples' periods, in the event's
/// unit (nanoseconds of `cpu-clock`, cycles, instructions), so that hosts recorded at
/// different rates count by what they measured, not by how often they sampled (`perf -F
/// 1000` and `-F 10000` over the same CPU time weigh the same). Where every sample weighs 1
/// (`from_hosts`), weights are sample counts and everything reads as before.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct FleetTotals {
    /// Number of hosts `C`.
    pub clusters: u64,
    /// `N = Σ_h n_h`, the event's weight over the fleet.
    pub total: f64,
    /// `Σ_h n_h²`.
    pub total_sq: f64,
    /// Kish's effective number of independent samples behind `N`,
    /// `N² / Σ_samples w_i²` (Kish 1965 §11.7: the sample size whose equal-weight binomial
    /// variance matches the weighted one); `N` itself when every sample weighs 1. The
    /// binomial floor of [`ratio_share`] (Wilson on the pooled samples) uses it. Reading
    /// chosen: `Σ w_i²` is taken as `Σ_rows W²/c` over stored rows of weight `W` and `c`
    /// samples, exact when a row's samples share one period (fixed-period recordings) and a
    /// lower bound of the true sum otherwise.
    pub effective_samples: f64,
}

impl FleetTotals {
    /// The totals of hosts with `n[h]` samples each, every sample weighing 1 (hosts with 0
    /// samples count as clusters).
    pub fn from_hosts(n: &[f64]) -> FleetTotals {
        let total = n.iter().sum();
        FleetTotals {
            clusters: n.len() as u64,
            total,
            total_sq: n.iter().map(|x| x * x).sum(),
            effective_samples: total,
        }
    }

    /// The totals of hosts of weight `n[h]` from `c[h]` samples each, every sample of a host
    /// weighing `n[h]/c[h]` (one period per host; parallel slices).
    pub fn from_weighted_hosts(n: &[f64], c: &[f64]) -> FleetTotals {
        let total: f64 = n.iter().sum();
        let sq_per_sample: f64 = n
            .iter()
            .zip(c)
            .filter(|(_, &c)| c > 0.0)
            .map(|(&n, &c)| n * n / c)
            .sum();
        FleetTotals {
            clusters: n.len() as u64,
            total,
            total_sq: n.iter().map(|x| x * x).sum(),
            effective_samples: effective_samples(total, sq_per_sample),
        }
    }

    /// [`FleetTotals::effective_samples`], or `total` where it is not set (0).
    pub fn binomial_n(&self) -> f64 {
        if self.effective_samples > 0.0 {
            self.effective_samples
        } else {
            self.total
        }
    }
}

/// One function's sums over the hosts.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct UnitSums {
    /// `Σ_h y_h`, the function's samples over the fleet.
    pub y: f64,
    /// `Σ_h y_h²`.
    pub y_sq: f64,
    /// `Σ_h y_h n_h`.
    pub y_n: f64,
}

impl UnitSums {
    /// The sums of a function with `y[h]` samples on host `h`, whose samples are `n[h]`
    /// (parallel slices; extra entries of the longer one are ignored).
    pub fn from_hosts(y: &[f64], n: &[f64]) -> UnitSums {
        let mut s = UnitSums::default();
        for (&yh, &nh) in y.iter().zip(n) {
            s.y += yh;
            s.y_sq += yh * yh;
            s.y_n += yh * nh;
        }
        s
    }
}

/// A fleet share with its interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Share {
    /// The ratio estimate `R = Σ y / N`.
    pub share: f64,
    /// Standard error the interval rests on: `√max(V, R(1−R)/N)`, the cluster-robust variance
    /// floored at the binomial one (so that a fleet of hosts more alike than independent
    /// samples is never claimed more precise than its pooled samples).
    pub se: f64,
    /// Lower bound of the interval, in `[0, 1]`.
    pub ci_low: f64,
    /// Upper bound of the interval, in `[0, 1]`.
    pub ci_high: f64,
    /// `V / (R(1−R)/N)`: the cluster-robust variance over the binomial variance of the same
    /// share and samples (Kish's design effect, Kish 1965, *Survey Sampling*, §8.2). Near 1
    /// when samples behave as independent draws, above 1 when hosts differ; 1 by definition
    /// where either variance is 0 or cannot be estimated (one host, `R` = 0 or 1, `N` = 0).
    pub design_effect: f64,
}

/// Kish's effective number of hosts, `C_eff = N²/Σ_h n_h²` (Kish 1992, "Weighting for
/// unequal P_i", J. Official Statistics 8(2): the effective size of unequal weights, `C/(1 + CV²)`
/// with CV the coefficient of variation of the hosts' samples `n_h`): `C`
/// when every host has the same samples, down to 1 when one host has them all. 0 without
/// samples.
pub fn effective_hosts(fleet: &FleetTotals) -> f64 {
    if fleet.total <= 0.0 || fleet.total_sq <= 0.0 {
        return 0.0;
    }
    (fleet.total * fleet.total / fleet.total_sq).min(fleet.clusters as f64)
}

/// The cluster-robust variance of the ratio estimate, `None` when it cannot be estimated
/// (fewer than 2 hosts, no samples, or all samples on one host).
///
/// Linearisation (Cochran 1977 ch. 6, the large-sample variance of `R̂ = ȳ/x̄` and its sample
/// estimate with residuals `y_h − R̂ x_h`; as a sandwich estimator, Cameron & Miller 2015 §II.C
/// with a small-sample factor, §VI): with `e_h = y_h − R n_h`, `V = k · Σ_h e_h² / N²`, and
/// expanding the square, `Σ_h e_h² = Σ y² − 2R Σ y n + R² Σ n²`, which needs only the
/// engine's sums. Rounding can make the expanded sum slightly negative when all residuals
/// are 0; it is clamped at 0.
///
/// The factor `k = 1/(1 − Σ_h w_h²)` with `w_h = n_h/N` (= `C_eff/(C_eff − 1)`, see
/// [`effective_hosts`]) is the usual `C/(C−1)` when hosts have equal samples and larger when
/// they do not. Derivation (reading chosen here): when host effects dominate, `e_h = n_h(θ_h −
/// R̂)` with `E(θ_h − R̂)² = τ²(1 − 2w_h + Σ w²)`, so `E Σ e_h² = τ²N²(Σw² − 2Σw³ + (Σw²)²)`
/// against the true `N² V = τ²N² Σw²`; since `Σw³ >= (Σw²)²` (Cauchy-Schwarz), `1/(1 − Σw²)`
/// never over-corrects, and it is the exact correction for equal hosts (`Σw³` is not among
/// the engine's sums). On the synthetic fleets (docs/fleet-statistics.md) it and the
/// `t(C_eff − 1)` quantile of [`ratio_share`] lift the coverage of hosts whose samples differ
/// a hundredfold from 0.91 to 0.93.
///
/// Reading chosen: hosts are treated as drawn from an infinite population of hosts (no
/// finite-population correction `1 − f`): the fleet is a sample of the machines and moments
/// it could have been recorded on.
pub fn cluster_variance(unit: &UnitSums, fleet: &FleetTotals) -> Option<f64> {
    let n = fleet.total;
    if fleet.clusters < 2 || n <= 0.0 {
        return None;
    }
    let sum_w2 = fleet.total_sq / (n * n);
    if sum_w2 >= 1.0 - 1e-12 {
        return None;
    }
    let r = unit.y / n;
    let resid = (unit.y_sq - 2.0 * r * unit.y_n + r * r * fleet.total_sq).max(0.0);
    Some(resid / (n * n) / (1.0 - sum_w2))
}

/// A function's fleet share `R = Σ y / N` with its interval at `confidence` (e.g. 0.95).
///
/// * Variance: [`cluster_variance`] `V` (hosts as clusters).
/// * Interval: `R ± t_{C_eff−1}(½ + confidence/2) · √V` (Cameron & Miller 2015 §VI: with few
///   clusters use `t(C−1)` critical values; here `C_eff` of [`effective_hosts`], which is `C`
///   for hosts of equal samples and fewer when a few large hosts carry the estimate, a reading
///   chosen here; the degrees of freedom are rounded down to an integer >= 1, the conservative
///   side), clamped to `[0, 1]`, then widened to contain
///   the Wilson interval of the pooled samples (`Σ y` of `N`, seed 002 §3.5 eq. 9: the
///   binomial variance is what independent samples alone would give, so no host structure
///   can make the share better known than that). This floor is a reading chosen here.
/// * `se = √max(V, R(1−R)/N)`; `design_effect = V / (R(1−R)/N)` (see [`Share`]).
///
/// Edge cases, none panics:
/// * `N = 0` (no samples): share 0, the uninformative `[0, 1]`, `se` 0.5 (the largest
///   standard deviation of a share), design effect 1.
/// * one host (`C = 1`): no between-host variance can be estimated; the interval is the
///   Wilson interval alone and the design effect 1 ([`fleet_warnings`] says so).
/// * `Σ y = 0`: share 0; `V` = 0 and the binomial variance 0, so the interval is Wilson's
///   `[0, z²/(N + z²)]`, `se` 0, design effect 1.
/// * `R = 1` (every sample in the function): likewise `[N/(N + z²), 1]`.
/// * `Σ y > N` (inconsistent sums) is clamped to `R = 1`.
pub fn ratio_share(unit: &UnitSums, fleet: &FleetTotals, confidence: f64) -> Share {
    let n = fleet.total;
    if n <= 0.0 || n.is_nan() {
        return Share {
            share: 0.0,
            se: 0.5,
            ci_low: 0.0,
            ci_high: 1.0,
            design_effect: 1.0,
        };
    }
    let r = (unit.y / n).clamp(0.0, 1.0);
    // The binomial floor on the samples behind the weight (FleetTotals::effective_samples).
    let nb = fleet.binomial_n();
    let binom = r * (1.0 - r) / nb;
    let z = z_for(confidence);
    let (w_lo, w_hi) = crate::wilson_interval_of_share(r, nb, z);
    let v = cluster_variance(unit, fleet);
    let (lo, hi, design_effect) = match v {
        Some(v) => {
            let df = (effective_hosts(fleet) - 1.0).floor().max(1.0);
            let t = t_quantile(0.5 + confidence / 2.0, df);
            let half = t * v.sqrt();
            let deff = if binom > 0.0 { v / binom } else { 1.0 };
            (
                (r - half).max(0.0).min(w_lo),
                (r + half).min(1.0).max(w_hi),
                deff,
            )
        }
        None => (w_lo, w_hi, 1.0),
    };
    Share {
        share: r,
        se: v.unwrap_or(0.0).max(binom).sqrt(),
        ci_low: lo,
        ci_high: hi,
        design_effect,
    }
}

/// Plain-language warnings about a fleet's totals that apply to every share computed from
/// them (for a report's `warnings`): no samples; one host (no between-host variance, the
/// intervals are binomial only and too narrow if recordings differ); fewer than 10 hosts, or
/// fewer than 10 effective hosts ([`effective_hosts`]) (cluster-robust variances are biased
/// down with few clusters even after the small-sample factor and the t quantile, Cameron &
/// Miller 2015 §VI; 10 is a reading chosen here).
pub fn fleet_warnings(fleet: &FleetTotals) -> Vec<String> {
    let mut w = Vec::new();
    if fleet.total <= 0.0 || fleet.clusters == 0 {
        w.push("no samples: every share is 0 and every interval the uninformative 0..100%; ingest profiles with samples of the event".to_string());
    } else if fleet.clusters == 1 {
        w.push("one host: no between-host variance can be estimated, so the intervals are binomial (Wilson) only and too narrow if recordings differ; ingest more hosts".to_string());
    } else if fleet.clusters < 10 {
        w.push(format!(
            "only {} hosts: cluster-robust intervals rest on few degrees of freedom and may still be too narrow (Cameron & Miller 2015 §VI); ingest more hosts",
            fleet.clusters,
        ));
    } else if effective_hosts(fleet) < 10.0 {
        w.push(format!(
            "{} hosts, but a few hold most samples (effective number N²/Σn² = {:.1}): the intervals rest on few degrees of freedom and may still be too narrow; ingest more hosts or balance the samples per host",
            fleet.clusters,
            effective_hosts(fleet)
        ));
    }
    w
}

/// The difference of two independent fleets' shares, `b − a`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DiffTest {
    /// `b.share − a.share`.
    pub delta: f64,
    /// `√(se_a² + se_b²)`.
    pub se: f64,
    /// Lower bound of the interval of `delta`, in `[−1, 1]`.
    pub ci_low: f64,
    /// Upper bound of the interval of `delta`, in `[−1, 1]`.
    pub ci_high: f64,
    /// `delta / se` (0 when both are 0; `±f64::MAX` when only `se` is 0).
    pub z: f64,
    /// Two-sided normal p-value of `z`.
    pub p: f64,
}

/// Welch-type test of the difference of two shares measured on disjoint sets of hosts
/// (Welch 1938/1947: unequal variances, each side its own variance; here each side's
/// cluster-robust standard error from [`ratio_share`]): `delta = b − a`,
/// `se = √(se_a² + se_b²)` (the two sides independent), `z = delta/se`, `p = 2·P(Z > |z|)`,
/// interval `delta ± z_{½+confidence/2}·se` clamped to `[−1, 1]`. Normal rather than t
/// reference: Welch-Satterthwaite degrees of freedom would need each side's host count,
/// which [`Share`] does not carry; with few hosts per side the test is anti-conservative
/// (the report warns through [`fleet_warnings`] of each side).
///
/// `se = 0` (both shares exactly 0 or 1 with no variance): `z = 0, p = 1` when `delta = 0`,
/// else `z = ±f64::MAX`, `p = 0` (finite so the JSON stays numeric).
pub fn share_difference(a: &Share, b: &Share, confidence: f64) -> DiffTest {
    let delta = b.share - a.share;
    let se = (a.se * a.se + b.se * b.se).sqrt();
    let zc = z_for(confidence);
    let (z, p) = if se > 0.0 {
        let z = delta / se;
        (z, two_sided_p(z))
    } else if delta == 0.0 {
        (0.0, 1.0)
    } else {
        (f64::MAX.copysign(delta), 0.0)
    };
    DiffTest {
        delta,
        se,
        ci_low: (delta - zc * se).max(-1.0),
        ci_high: (delta + zc * se).min(1.0),
        z,
        p,
    }
}

/// The degrees of freedom of a share's cluster-robust interval on `fleet`: `⌊C_eff − 1⌋ >= 1`
/// ([`effective_hosts`]), as [`ratio_share`] uses them; infinite (normal reference) when no
/// between-host variance exists (fewer than 2 hosts), where the interval is binomial.
pub fn share_df(fleet: &FleetTotals) -> f64 {
    if fleet.clusters < 2 || effective_hosts(fleet) <= 1.0 + 1e-12 {
        return f64::INFINITY;
    }
    (effective_hosts(fleet) - 1.0).floor().max(1.0)
}

/// [`share_difference`] with a t reference instead of the normal: the Welch-Satterthwaite
/// degrees of freedom `ν = (se_a² + se_b²)² / (se_a⁴/df_a + se_b⁴/df_b)` (Welch 1947,
/// Biometrika 34; Satterthwaite 1946, Biometrics Bulletin 2), with `df_a`, `df_b` each side's [`share_df`];
/// the interval uses `t_ν` and `p = P(|T_ν| >= |z|)`. The one to use for `fleet diff`: on the
/// synthetic fleets of 30 hosts a side (tests/fleet_synthetic.rs, docs/fleet-statistics.md)
/// BH over 40 unchanged functions made a discovery in 10.0% of the pairs with the normal
/// reference of [`share_difference`] (target 5%) and 4.4% with this one: BH looks at small
/// p-values, where the normal tail is much thinner than the t tail. The `z` field holds the
/// statistic `delta/se` all the same.
pub fn share_difference_df(
    a: &Share,
    b: &Share,
    df_a: f64,
    df_b: f64,
    confidence: f64,
) -> DiffTest {
    let mut d = share_difference(a, b, confidence);
    let (va, vb) = (a.se * a.se, b.se * b.se);
    let denom = va * va / df_a.max(1.0) + vb * vb / df_b.max(1.0);
    if d.se <= 0.0 || denom <= 0.0 || !denom.is_finite() {
        return d;
    }
    let nu = ((va + vb) * (va + vb) / denom).max(1.0);
    if d.z.abs() < f64::MAX {
        d.p = two_sided_p_t(d.z, nu);
    }
    let tc = if nu.is_finite() && nu < 1e7 {
        // Non-integer ν: the quantile at ⌊ν⌋ (the conservative side).
        t_quantile(0.5 + confidence / 2.0, nu.floor().max(1.0))
    } else {
        z_for(confidence)
    };
    d.ci_low = (d.delta - tc * d.se).max(-1.0);
    d.ci_high = (d.delta + tc * d.se).min(1.0);
    d
}

/// The `|t|` at which Student's t with `df` degrees of freedom has the two-sided p-value
/// `p` (`P(|T| >= t) = p`): the lower-tail quantile at `p/2` of [`crate::dist::t_quantile`]
/// (the lower tail keeps its precision where `1 - p/2` would round: `fleet diff` needs `p =
/// fdr/m`, e.g. 0.05/200). `df` infinite: the normal's. `p` outside `(0, 1)`: infinite for
/// `p <= 0`, 0 for `p >= 1`.
pub fn t_critical(p: f64, df: f64) -> f64 {
    if p.is_nan() || p <= 0.0 {
        return f64::INFINITY;
    }
    if p >= 1.0 {
        return 0.0;
    }
    -t_quantile(p / 2.0, df)
}

/// Benjamini-Hochberg q-values (adjusted p-values) of `p`, in the same order: with the
/// p-values sorted ascending `p_(1) <= .. <= p_(m)`, `q_(i) = min_{j >= i} min(1, m·p_(j)/j)`
/// (the step-up procedure of Benjamini & Hochberg 1995, JRSS B 57(1), §3, as adjusted p-values:
/// rejecting every `q <= α` is exactly the procedure at FDR level `α`; Wright 1992,
/// Biometrics 48(4), "Adjusted p-values for simultaneous inference"). NaN p-values count as 1.
/// Controls the false-discovery rate for independent or positively dependent tests
/// (Benjamini & Yekutieli 2001, Thm. 1.2). Empty in, empty out.
pub fn benjamini_hochberg(p: &[f64]) -> Vec<f64> {
    let m = p.len();
    let clean: Vec<f64> = p
        .iter()
        .map(|&x| if x.is_nan() { 1.0 } else { x.clamp(0.0, 1.0) })
        .collect();
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|&i, &j| clean[i].total_cmp(&clean[j]).then(i.cmp(&j)));
    let mut q = vec![1.0; m];
    let mut running = 1.0f64;
    for (rank, &i) in order.iter().enumerate().rev() {
        let adj = (clean[i] * m as f64 / (rank + 1) as f64).min(1.0);
        running = running.min(adj);
        q[i] = running;
    }
    q
}

/// One host's deviation from the rest of the fleet in one function.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HostTest {
    /// `(p_host − p_rest) / √(p̄(1−p̄)(1/n_host + 1/n_rest))`.
    pub z: f64,
    /// Two-sided normal p-value.
    pub p: f64,
}

/// A host's share of a function (`host_y` of its `host_n` samples) against the rest of the
/// fleet (`rest_y` of `rest_n`: the fleet's sums minus the host's, so the host is not compared
/// with itself): the two-proportion z with the pooled binomial variance, `p̄ = (host_y +
/// rest_y)/(host_n + rest_n)`, `z = (p_host − p_rest)/√(p̄(1 − p̄)(1/host_n + 1/rest_n))`
/// (the score test of a 2×2 table: `z²` is Pearson's X² of the table; Agresti, *Categorical Data
/// Analysis*, 3rd ed. 2013, ch. 3; per-sample variance of seed 002 eq. 9).
///
/// What it assumes: every sample an independent Bernoulli draw of its side's share (seed
/// 002's model), so it answers "is this host's share outside what sampling explains?" — any
/// real difference, however small, is flagged once the host has samples enough, and samples
/// clustered in time within the host make it anti-conservative. Use q-values
/// ([`benjamini_hochberg`] over all host × function tests) to read it.
///
/// No samples on either side, or `p̄` 0 or 1: `z = 0, p = 1`.
pub fn host_deviation(host_y: f64, host_n: f64, rest_y: f64, rest_n: f64) -> HostTest {
    host_deviation_weighted(host_y, host_n, host_n, rest_y, rest_n, rest_n)
}

/// [`host_deviation`] where `y` and `n` are weights (periods summed, the event's unit) and
/// `host_eff`, `rest_eff` the effective numbers of samples behind each side's weight
/// ([`FleetTotals::effective_samples`]): the shares are the weights' (`y/n`), the pooled
/// share is the samples-weighted mean of the two, and the binomial variance is of the
/// effective samples. With every sample weighing 1 (`eff = n`) it is [`host_deviation`].
pub fn host_deviation_weighted(
    host_y: f64,
    host_n: f64,
    host_eff: f64,
    rest_y: f64,
    rest_n: f64,
    rest_eff: f64,
) -> HostTest {
    let bad = |x: f64| x <= 0.0 || x.is_nan();
    if bad(host_n) || bad(rest_n) || bad(host_eff) || bad(rest_eff) {
        return HostTest { z: 0.0, p: 1.0 };
    }
    let p1 = (host_y / host_n).clamp(0.0, 1.0);
    let p2 = (rest_y / rest_n).clamp(0.0, 1.0);
    let pool = ((p1 * host_eff + p2 * rest_eff) / (host_eff + rest_eff)).clamp(0.0, 1.0);
    let var = pool * (1.0 - pool) * (1.0 / host_eff + 1.0 / rest_eff);
    if var <= 0.0 {
        return HostTest { z: 0.0, p: 1.0 };
    }
    let z = (p1 - p2) / var.sqrt();
    HostTest {
        z,
        p: two_sided_p(z),
    }
}

fn ceil_u64(x: f64) -> u64 {
    if x.is_nan() {
        u64::MAX
    } else {
        // `as` saturates: +∞ and anything beyond u64::MAX give u64::MAX.
        x.max(0.0).ceil() as u64
    }
}

/// Samples and hosts needed for a share's interval half-width to fall to `target_rel` times
/// the share (relative precision, e.g. 0.1 for ±10%) at `confidence`, given the fleet it was
/// measured on (`samples` = `N`, `hosts` = `C`). Returns `(binomial, design, hosts)`:
///
/// * `binomial`: seed 002's probability analysis solved for `n`: a share's variance is
///   `p(1 − p)/n` (§3.5 eq. 9 with the binomial variance of eq. 6), and the half-width
///   `z·√(p(1 − p)/n) <= e·p` gives `n = z²(1 − p)/(p e²)` (derivation here; the paper states
///   the variance, not the solved form);
/// * `design`: `binomial · max(1, design_effect)`: the samples needed when they cluster by host
///   as they do now (Kish 1965 §8.2: a design effect multiplies the sample size needed), i.e.
///   at today's samples per host;
/// * `hosts`: `ceil(C · V/V_target)` with `V = se²` now and `V_target = (e p / z)²`: the
///   variance of a ratio estimator over hosts shrinks as `1/C` when the hosts added are like
///   today's (same samples per host, Cochran 1977 ch. 6).
///
/// All three use the normal quantile `z` (the t quantile of [`ratio_share`] tends to it as hosts
/// are added). Share 0, a target <= 0, or no samples/hosts: `u64::MAX` (no number of samples
/// gives a relative precision on a share of 0; unknown without a measurement). Share 1: 0
/// samples beyond today's are needed by the binomial formula, and `hosts` from `se`.
pub fn precision_needed(
    share: &Share,
    samples: u64,
    hosts: u64,
    target_rel: f64,
    confidence: f64,
) -> (u64, u64, u64) {
    let p = share.share;
    if p <= 0.0 || p.is_nan() || target_rel <= 0.0 || target_rel.is_nan() || samples == 0 {
        return (u64::MAX, u64::MAX, u64::MAX);
    }
    let z = z_for(confidence);
    let e = target_rel;
    let binomial = z * z * (1.0 - p) / (p * e * e);
    let design = binomial * share.design_effect.max(1.0);
    let hosts_needed = if hosts == 0 {
        u64::MAX
    } else {
        let v_target = (e * p / z).powi(2);
        ceil_u64(hosts as f64 * share.se * share.se / v_target)
    };
    (ceil_u64(binomial), ceil_u64(design), hosts_needed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    #[test]
    fn ratio_share_by_hand() {
        // Four hosts, n = 100, 200, 300, 400 (N = 1000, Σn² = 300 000); the function has
        // y = 10, 30, 20, 40 (Σy = 100, R = 0.1).
        // Σy² = 100 + 900 + 400 + 1600 = 3000; Σyn = 1000 + 6000 + 6000 + 16000 = 29 000.
        // Residuals y − R n: 0, 10, −10, 0 -> Σe² = 200;
        // expanded: 3000 − 2·0.1·29 000 + 0.01·300 000 = 3000 − 5800 + 3000 = 200. ✓
        // Σw² = Σn²/N² = 0.3 -> factor 1/(1 − 0.3) = 1.428571 (equal hosts: 4/3);
        // V = 200 / 10⁶ / 0.7 = 2.857143e-4, √V = 0.0169031.
        // Binomial: 0.1·0.9/1000 = 9e-5 -> design effect 3.174603.
        // C_eff = 1/0.3 = 3.33 -> df floor(2.33) = 2, t(2, 97.5%) = 4.3027 (tables) -> half
        // 0.072729: [0.027271, 0.172729].
        // Wilson(100 of 1000) = [0.08291, 0.12009] lies inside, so no floor here.
        let n = [100.0, 200.0, 300.0, 400.0];
        let y = [10.0, 30.0, 20.0, 40.0];
        let fleet = FleetTotals::from_hosts(&n);
        let unit = UnitSums::from_hosts(&y, &n);
        assert_eq!(
            (fleet.clusters, fleet.total, fleet.total_sq),
            (4, 1000.0, 300_000.0)
        );
        assert_eq!((unit.y, unit.y_sq, unit.y_n), (100.0, 3000.0, 29_000.0));
        let v = cluster_variance(&unit, &fleet).unwrap();
        assert!(close(v, 200.0 / 1e6 / 0.7, 1e-15), "{v}");
        assert!(close(effective_hosts(&fleet), 1.0 / 0.3, 1e-12));
        let s = ratio_share(&unit, &fleet, 0.95);
        assert!(close(s.share, 0.1, 1e-15));
        assert!(close(s.se, 0.016_903_09, 1e-7), "{}", s.se);
        assert!(
            close(s.design_effect, 3.174_603, 1e-6),
            "{}",
            s.design_effect
        );
        assert!(close(s.ci_low, 0.027_271, 1e-5), "{}", s.ci_low);
        assert!(close(s.ci_high, 0.172_729, 1e-5), "{}", s.ci_high);
        // Equal hosts: the factor is C/(C−1). Four hosts of 250 with y = 20, 30, 20, 30
        // (R = 0.1): residuals −5, 5, −5, 5 -> Σe² = 100, V = 4/3·100/10⁶ = 1.33333e-4,
        // C_eff = 4, t(3) = 3.182446 (exact, crate::dist) -> half 3.182446·0.0115470 = 0.036748.
        let n = [250.0; 4];
        let f = FleetTotals::from_hosts(&n);
        let u = UnitSums::from_hosts(&[20.0, 30.0, 20.0, 30.0], &n);
        assert!(close(
            cluster_variance(&u, &f).unwrap(),
            4.0 / 3.0 * 1e-4,
            1e-15
        ));
        let s = ratio_share(&u, &f, 0.95);
        assert!(close(s.ci_high - 0.1, 0.036_748, 1e-6), "{}", s.ci_high);
        // All samples on one of two hosts: no between-host variance.
        let n = [1000.0, 0.0];
        assert_eq!(
            cluster_variance(
                &UnitSums::from_hosts(&[10.0, 0.0], &n),
                &FleetTotals::from_hosts(&n)
            ),
            None
        );
    }

    #[test]
    fn wilson_floor_when_hosts_agree() {
        // Two hosts of 1000 samples, 100 each in the function: residuals 0, V = 0, so the
        // interval is the Wilson one of 200 of 2000: p = 0.1, z = 1.959964, z² = 3.841459,
        // denom = 1 + 3.841459/2000 = 1.0019207, centre = (0.1 + 0.00096036)/1.0019207 =
        // 0.1007669, half = 1.959964/1.0019207·√(0.09/2000 + 3.841459/(4·2000²)) =
        // 1.956207·√(4.5e-5 + 2.40091e-7) = 1.956207·0.0067261 = 0.0131577
        // -> [0.0876092, 0.1139246].
        let n = [1000.0, 1000.0];
        let s = ratio_share(
            &UnitSums::from_hosts(&[100.0, 100.0], &n),
            &FleetTotals::from_hosts(&n),
            0.95,
        );
        assert!(close(s.ci_low, 0.087_609, 2e-6), "{}", s.ci_low);
        assert!(close(s.ci_high, 0.113_925, 2e-6), "{}", s.ci_high);
        let (lo, hi) = crate::wilson_interval(200, 2000, crate::Z_95);
        assert!(close(s.ci_low, lo, 1e-8) && close(s.ci_high, hi, 1e-8));
        // se floored at the binomial √(0.09/2000) = 0.0067082; design effect 0/9e-5 = 0 (up to rounding of the expanded sum).
        assert!(close(s.se, 0.006_708_2, 1e-7));
        assert!(s.design_effect.abs() < 1e-6, "{}", s.design_effect);
    }

    #[test]
    fn edge_cases_do_not_panic() {
        // N = 0.
        let s = ratio_share(&UnitSums::default(), &FleetTotals::default(), 0.95);
        assert_eq!((s.share, s.ci_low, s.ci_high, s.se), (0.0, 0.0, 1.0, 0.5));
        assert!(!fleet_warnings(&FleetTotals::default()).is_empty());
        // One host, 30 of 100: Wilson only (0.2189..0.3958, from the integer version).
        let one = FleetTotals::from_hosts(&[100.0]);
        let s = ratio_share(&UnitSums::from_hosts(&[30.0], &[100.0]), &one, 0.95);
        let (lo, hi) = crate::wilson_interval(30, 100, crate::Z_95);
        assert!(close(s.ci_low, lo, 1e-8) && close(s.ci_high, hi, 1e-8));
        assert_eq!(s.design_effect, 1.0);
        assert!(fleet_warnings(&one)[0].starts_with("one host"));
        // y = 0 over 3 hosts of 100: [0, z²/(300 + z²)] = [0, 3.841459/303.841459 = 0.012643].
        let n = [100.0; 3];
        let f = FleetTotals::from_hosts(&n);
        let s = ratio_share(&UnitSums::from_hosts(&[0.0; 3], &n), &f, 0.95);
        assert_eq!(
            (s.share, s.ci_low, s.se, s.design_effect),
            (0.0, 0.0, 0.0, 1.0)
        );
        assert!(close(s.ci_high, 0.012_643, 1e-6), "{}", s.ci_high);
        assert!(fleet_warnings(&f)[0].starts_with("only 3 hosts"));
        // R = 1: [300/303.841459 = 0.987357, 1].
        let s = ratio_share(&UnitSums::from_hosts(&n, &n), &f, 0.95);
        assert_eq!((s.share, s.ci_high), (1.0, 1.0));
        assert!(close(s.ci_low, 0.987_357, 1e-6), "{}", s.ci_low);
        assert!(fleet_warnings(&FleetTotals::from_hosts(&[1.0; 10])).is_empty());
    }

    #[test]
    fn share_difference_by_hand() {
        // a = 0.10 ± 0.01, b = 0.13 ± 0.02: delta 0.03, se √(1e-4 + 4e-4) = 0.0223607,
        // z = 1.341641, p = 0.179713; interval 0.03 ± 1.959964·0.0223607 = [−0.013826, 0.073826].
        let mk = |share, se| Share {
            share,
            se,
            ci_low: 0.0,
            ci_high: 1.0,
            design_effect: 1.0,
        };
        let d = share_difference(&mk(0.10, 0.01), &mk(0.13, 0.02), 0.95);
        assert!(close(d.delta, 0.03, 1e-15));
        assert!(close(d.se, 0.022_360_68, 1e-8));
        assert!(close(d.z, 1.341_641, 1e-6));
        assert!(close(d.p, 0.179_713, 1e-5), "{}", d.p);
        assert!(close(d.ci_low, -0.013_826, 1e-6) && close(d.ci_high, 0.073_826, 1e-6));
        // No variance on either side.
        let d = share_difference(&mk(0.0, 0.0), &mk(0.0, 0.0), 0.95);
        assert_eq!((d.z, d.p), (0.0, 1.0));
        let d = share_difference(&mk(0.0, 0.0), &mk(1.0, 0.0), 0.95);
        assert_eq!((d.z, d.p), (f64::MAX, 0.0));
    }

    #[test]
    fn t_critical_inverts_the_tables() {
        // Tables: t(1) 12.7062, t(2) 4.3027, t(19) 2.0930 at p = 0.05; the normal 1.95996.
        for (df, t) in [(1.0, 12.7062), (2.0, 4.3027), (19.0, 2.0930)] {
            assert!(close(t_critical(0.05, df), t, 1e-3), "df {df}");
        }
        assert!(close(t_critical(0.05, f64::INFINITY), 1.959964, 1e-5));
        // Far tail at df 1 (Cauchy): p = 1 − 2·atan(t)/π, so t = tan(π(1 − p)/2) = cot(πp/2).
        let p = 0.05 / 217.0;
        let exact = 1.0 / (std::f64::consts::PI * p / 2.0).tan();
        assert!(close(t_critical(p, 1.0), exact, exact * 1e-9));
        // df 2: p = 1 − t/√(2 + t²) gives t = √2 (1 − p) / √(1 − (1 − p)²).
        let q = 1.0 - p;
        let exact2 = (2.0f64).sqrt() * q / (1.0 - q * q).sqrt();
        assert!(close(t_critical(p, 2.0), exact2, exact2 * 1e-9));
        assert_eq!(t_critical(0.0, 3.0), f64::INFINITY);
        assert_eq!(t_critical(1.0, 3.0), 0.0);
    }

    #[test]
    fn welch_df_by_hand() {
        // se 0.01 (df 9) and 0.02 (df 19): ν = (1e-4 + 4e-4)² / (1e-8/9 + 1.6e-7/19) =
        // 2.5e-7 / (1.11111e-9 + 8.42105e-9) = 26.2245; z = 0.03/0.0223607 = 1.341641,
        // p(t_26.22) ≈ 0.1913 (between t_26 0.19137 and the normal 0.1797).
        let mk = |share, se| Share {
            share,
            se,
            ci_low: 0.0,
            ci_high: 1.0,
            design_effect: 1.0,
        };
        let d = share_difference_df(&mk(0.10, 0.01), &mk(0.13, 0.02), 9.0, 19.0, 0.95);
        assert!(close(d.z, 1.341_641, 1e-6));
        assert!(d.p > 0.1797 && close(d.p, 0.1913, 5e-4), "{}", d.p);
        // t(26, 97.5%) = 2.0555 -> half 0.045963.
        assert!(close(d.ci_high - 0.03, 0.045_963, 2e-4), "{}", d.ci_high);
        let n = [250.0; 4];
        assert_eq!(share_df(&FleetTotals::from_hosts(&n)), 3.0);
        assert!(share_df(&FleetTotals::from_hosts(&[5.0])).is_infinite());
    }

    #[test]
    fn bh_by_hand() {
        // p = 0.01, 0.04, 0.03, 0.005 (m = 4); sorted 0.005, 0.01, 0.03, 0.04 ->
        // m p/j = 0.02, 0.02, 0.04, 0.04; running minimum from the top: 0.04, 0.04, 0.02, 0.02.
        let q = benjamini_hochberg(&[0.01, 0.04, 0.03, 0.005]);
        let want = [0.02, 0.04, 0.04, 0.02];
        for (a, b) in q.iter().zip(want) {
            assert!(close(*a, b, 1e-15), "{q:?}");
        }
        // Monotone step: p = 0.02, 0.5 -> 0.04, 0.5; then min from the top keeps 0.04.
        // A later small rank pulls earlier ones down: p = 0.03, 0.031 -> 0.06 vs 0.031 ->
        // both 0.031.
        let q = benjamini_hochberg(&[0.03, 0.031]);
        assert!(close(q[0], 0.031, 1e-15) && close(q[1], 0.031, 1e-15));
        let q = benjamini_hochberg(&[0.9, f64::NAN]);
        assert_eq!(q, vec![1.0, 1.0]);
        assert!(benjamini_hochberg(&[]).is_empty());
    }

    #[test]
    fn host_deviation_by_hand() {
        // Host 60 of 200 (0.3) vs rest 200 of 1000 (0.2): pooled 260/1200 = 0.216667,
        // var = 0.216667·0.783333·(1/200 + 1/1000) = 0.169722·0.006 = 0.00101833,
        // z = 0.1/0.0319113 = 3.133687, p = 0.0017262.
        let t = host_deviation(60.0, 200.0, 200.0, 1000.0);
        assert!(close(t.z, 3.133_687, 1e-5), "{}", t.z);
        assert!(close(t.p, 0.001_726_2, 2e-6), "{}", t.p);
        // Same share: z = 0.
        assert_eq!(host_deviation(20.0, 100.0, 200.0, 1000.0).z, 0.0);
        // Degenerate.
        assert_eq!(
            host_deviation(0.0, 0.0, 5.0, 10.0),
            HostTest { z: 0.0, p: 1.0 }
        );
        assert_eq!(
            host_deviation(0.0, 5.0, 0.0, 10.0),
            HostTest { z: 0.0, p: 1.0 }
        );
    }

    #[test]
    fn precision_by_hand() {
        // p = 0.1, e = 0.1, z = 1.959964 (z² = 3.841459): n = 3.841459·0.9/(0.1·0.01) =
        // 3457.31 -> 3458; design effect 2.5 -> 8643.28 -> 8644.
        // Hosts: se² = 2.5·0.09/N with N = 10 000 -> 2.25e-5; V_target = (0.01/1.959964)² =
        // 2.603213e-5 -> C·V/V_target = 20·0.864328 = 17.29 -> 18 (= C·design/N = 20·0.8643).
        let s = Share {
            share: 0.1,
            se: (2.5f64 * 0.09 / 10_000.0).sqrt(),
            ci_low: 0.0,
            ci_high: 1.0,
            design_effect: 2.5,
        };
        assert_eq!(
            precision_needed(&s, 10_000, 20, 0.1, 0.95),
            (3458, 8644, 18)
        );
        // A design effect below 1 does not lower the samples needed.
        let s1 = Share {
            design_effect: 0.5,
            ..s
        };
        assert_eq!(precision_needed(&s1, 10_000, 20, 0.1, 0.95).1, 3458);
        let zero = Share { share: 0.0, ..s };
        assert_eq!(precision_needed(&zero, 10_000, 20, 0.1, 0.95).0, u64::MAX);
        assert_eq!(precision_needed(&s, 10_000, 0, 0.1, 0.95).2, u64::MAX);
    }
}
