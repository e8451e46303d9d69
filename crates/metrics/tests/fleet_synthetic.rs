//! The fleet statistics (`proftrust_metrics::fleet`) on seeded synthetic fleets with known
//! true shares and host effects (issue 16, "Show"; docs/fleet-statistics.md records the
//! numbers these tests print).
//!
//! A synthetic host `h` has `n_h` samples (varied: log-uniform over a range) and its own
//! shares `θ_h` of the functions, drawn around the true fleet shares `π` (Beta for one
//! function, Dirichlet for many, concentration `κ`: `Var θ_h = π(1 − π)/(κ + 1)`); its
//! samples fall in the functions as a multinomial draw of `n_h` from `θ_h`. Because `n_h` is
//! drawn independently of `θ_h`, the ratio estimator's target `E[θ n]/E[n]` is `π`, the truth
//! the intervals must cover. The oracle is the generator: the truth is set, not estimated.
//!
//! Every test prints its seed; the seeds are fixed so that a run is repeatable.

use proftrust_metrics::fleet::{
    benjamini_hochberg, host_deviation, ratio_share, share_df, share_difference,
    share_difference_df, FleetTotals, Share, UnitSums,
};
use proftrust_metrics::{wilson_interval, Z_95};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Beta, Binomial, Dirichlet, Distribution};

/// Samples per host, log-uniform in `[lo, hi]` (hosts differ by up to `hi/lo` in size).
fn host_samples(rng: &mut ChaCha8Rng, lo: f64, hi: f64) -> u64 {
    let u: f64 = rng.gen();
    (lo * (hi / lo).powf(u)).round() as u64
}

/// `n` samples spread over cells with probabilities `theta` (sequential binomials).
fn multinomial(rng: &mut ChaCha8Rng, n: u64, theta: &[f64]) -> Vec<u64> {
    let mut out = vec![0; theta.len()];
    let mut left = n;
    let mut mass = 1.0f64;
    for (k, &t) in theta.iter().enumerate() {
        if left == 0 {
            break;
        }
        if k + 1 == theta.len() {
            out[k] = left;
            break;
        }
        let p = if mass > 0.0 {
            (t / mass).clamp(0.0, 1.0)
        } else {
            0.0
        };
        let y = Binomial::new(left, p).unwrap().sample(rng);
        out[k] = y;
        left -= y;
        mass -= t;
    }
    out
}

/// One fleet of `hosts` hosts: per host its samples and its counts per function (hosts'
/// shares from a Dirichlet of concentration `kappa` around `pi`; `kappa = ∞` means no host
/// effect).
fn fleet(
    rng: &mut ChaCha8Rng,
    pi: &[f64],
    hosts: usize,
    kappa: f64,
    size: (f64, f64),
) -> Vec<(u64, Vec<u64>)> {
    let dir = kappa
        .is_finite()
        .then(|| Dirichlet::new(&pi.iter().map(|p| p * kappa).collect::<Vec<_>>()).unwrap());
    (0..hosts)
        .map(|_| {
            let n = host_samples(rng, size.0, size.1);
            let theta = match &dir {
                Some(d) => d.sample(rng),
                None => pi.to_vec(),
            };
            (n, multinomial(rng, n, &theta))
        })
        .collect()
}

/// The engine's sums of a fleet, and every function's share.
fn shares(f: &[(u64, Vec<u64>)], functions: usize) -> (f64, Vec<Share>) {
    let n: Vec<f64> = f.iter().map(|h| h.0 as f64).collect();
    let totals = FleetTotals::from_hosts(&n);
    let s = (0..functions)
        .map(|k| {
            let y: Vec<f64> = f.iter().map(|h| h.1[k] as f64).collect();
            ratio_share(&UnitSums::from_hosts(&y, &n), &totals, 0.95)
        })
        .collect();
    (share_df(&totals), s)
}

/// Normalised shares: `weights / Σ weights`.
fn normalise(w: &[f64]) -> Vec<f64> {
    let t: f64 = w.iter().sum();
    w.iter().map(|x| x / t).collect()
}

/// Coverage of the true share by the cluster-robust 95% interval, and by the plain binomial
/// (Wilson) interval of the pooled samples, over 2000 replicate fleets.
#[test]
fn intervals_cover_the_true_share() {
    let seed = 0x000F_1EE7_0016_u64;
    eprintln!("fleet_synthetic::intervals_cover_the_true_share seed {seed:#x}");
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let reps = 2000;
    // Host effects: θ_h ~ Beta(π κ, (1 − π) κ), π = 0.08, κ = 60: sd of a host's share
    // √(0.08·0.92/61) = 0.0347 against a binomial sd of √(0.08·0.92/5000) = 0.0038 per host.
    let pi = 0.08;
    let kappa = 60.0;
    let beta = Beta::new(pi * kappa, (1.0 - pi) * kappa).unwrap();
    for hosts in [30usize, 100] {
        let (mut cr, mut wilson, mut deff_sum) = (0u32, 0u32, 0.0);
        for _ in 0..reps {
            let mut n = Vec::with_capacity(hosts);
            let mut y = Vec::with_capacity(hosts);
            for _ in 0..hosts {
                let nh = host_samples(&mut rng, 500.0, 50_000.0);
                let th: f64 = beta.sample(&mut rng);
                n.push(nh as f64);
                y.push(Binomial::new(nh, th).unwrap().sample(&mut rng) as f64);
            }
            let s = ratio_share(
                &UnitSums::from_hosts(&y, &n),
                &FleetTotals::from_hosts(&n),
                0.95,
            );
            cr += u32::from(s.ci_low <= pi && pi <= s.ci_high);
            deff_sum += s.design_effect;
            let (lo, hi) = wilson_interval(
                y.iter().sum::<f64>() as u64,
                n.iter().sum::<f64>() as u64,
                Z_95,
            );
            wilson += u32::from(lo <= pi && pi <= hi);
        }
        let (cr, wilson) = (cr as f64 / reps as f64, wilson as f64 / reps as f64);
        eprintln!(
            "host effects, {hosts} hosts, {reps} fleets: cluster-robust coverage {cr:.4}, binomial (Wilson) coverage {wilson:.4}, mean design effect {:.1}",
            deff_sum / reps as f64
        );
        // Monte-Carlo sd of a 0.95 coverage over 2000 fleets: 0.0049.
        assert!(
            (0.93..=0.97).contains(&cr),
            "cluster-robust coverage {cr} with {hosts} hosts"
        );
        assert!(
            wilson < 0.5,
            "the binomial interval should under-cover when hosts differ: {wilson}"
        );
    }
    // No host effect (every host runs the true share): the design effect is about 1 and the
    // interval (floored at Wilson) still covers.
    let mut cr = 0u32;
    let mut deff_sum = 0.0;
    let hosts = 30;
    for _ in 0..reps {
        let mut n = Vec::with_capacity(hosts);
        let mut y = Vec::with_capacity(hosts);
        for _ in 0..hosts {
            let nh = host_samples(&mut rng, 500.0, 50_000.0);
            n.push(nh as f64);
            y.push(Binomial::new(nh, pi).unwrap().sample(&mut rng) as f64);
        }
        let s = ratio_share(
            &UnitSums::from_hosts(&y, &n),
            &FleetTotals::from_hosts(&n),
            0.95,
        );
        cr += u32::from(s.ci_low <= pi && pi <= s.ci_high);
        deff_sum += s.design_effect;
    }
    let cr = cr as f64 / reps as f64;
    let deff = deff_sum / reps as f64;
    eprintln!("no host effect, {hosts} hosts, {reps} fleets: coverage {cr:.4}, mean design effect {deff:.3}");
    assert!(
        (0.93..=0.985).contains(&cr),
        "coverage {cr} without host effects"
    );
    assert!(
        (0.8..1.2).contains(&deff),
        "design effect {deff} without host effects"
    );
}

/// BH discoveries at `target` among the differences of two fleets' shares: with the
/// Welch-Satterthwaite t reference (`t_ref`) or the normal one.
fn discoveries(
    a: &(f64, Vec<Share>),
    b: &(f64, Vec<Share>),
    t_ref: bool,
    target: f64,
) -> Vec<usize> {
    let p: Vec<f64> =
        a.1.iter()
            .zip(&b.1)
            .map(|(x, y)| {
                if t_ref {
                    share_difference_df(x, y, a.0, b.0, 0.95).p
                } else {
                    share_difference(x, y, 0.95).p
                }
            })
            .collect();
    let q = benjamini_hochberg(&p);
    (0..p.len()).filter(|&k| q[k] <= target).collect()
}

/// Replicate pairs of fleets (A, B) of 40 functions and 30 hosts a side: how often the
/// difference test + BH at q <= 0.05 finds planted regressions, and the false-discovery rate,
/// with planted regressions and on unchanged fleets (where every discovery is false, so the
/// FDR is the chance of any discovery).
#[test]
fn diff_finds_regressions_and_keeps_fdr() {
    let seed = 0x000F_1EE7_D1FF_u64;
    eprintln!("fleet_synthetic::diff_finds_regressions_and_keeps_fdr seed {seed:#x}");
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let functions = 40;
    // True shares: Zipf-like 1/(k + 1), the shape of real profiles.
    let pi = normalise(
        &(0..functions)
            .map(|k| 1.0 / (k as f64 + 1.0))
            .collect::<Vec<_>>(),
    );
    // Side B: functions 2, 5, 9, 14, 20 take 1.5 times their share (a regression of each),
    // taken from function 0 (the hottest, 0.234 -> 0.151), so that every other share is
    // exactly unchanged: the nulls are true nulls.
    let planted = [2usize, 5, 9, 14, 20];
    let mut pi_b = pi.clone();
    for &k in &planted {
        pi_b[k] *= 1.5;
        pi_b[0] -= pi[k] * 0.5;
    }
    assert!(pi_b[0] > 0.1 && (pi_b.iter().sum::<f64>() - 1.0).abs() < 1e-12);
    // Host effects: Dirichlet of concentration 200 (a host's share of the hottest function
    // has sd 0.030 around 0.234); 2 000 to 20 000 samples per host.
    let (hosts, kappa, size, target) = (30, 200.0, (2_000.0, 20_000.0), 0.05);
    let reps = 1000;
    // [t reference, normal reference]: planted found, FDP sum, unchanged pairs with any.
    let mut found = [0usize; 2];
    let mut fdp = [0.0f64; 2];
    let mut null_any = [0u32; 2];
    for _ in 0..reps {
        let a = shares(&fleet(&mut rng, &pi, hosts, kappa, size), functions);
        let b = shares(&fleet(&mut rng, &pi_b, hosts, kappa, size), functions);
        let a2 = shares(&fleet(&mut rng, &pi, hosts, kappa, size), functions);
        for (i, t_ref) in [true, false].into_iter().enumerate() {
            let hits = discoveries(&a, &b, t_ref, target);
            found[i] += hits.iter().filter(|k| planted.contains(k)).count();
            // Function 0 truly changed too; anything else is a false discovery.
            let fp = hits
                .iter()
                .filter(|&&k| k != 0 && !planted.contains(&k))
                .count();
            if !hits.is_empty() {
                fdp[i] += fp as f64 / hits.len() as f64;
            }
            null_any[i] += u32::from(!discoveries(&a, &a2, t_ref, target).is_empty());
        }
    }
    let rate = |x: f64| x / reps as f64;
    let power = |i: usize| found[i] as f64 / (reps * planted.len()) as f64;
    for (i, name) in ["Welch t reference", "normal reference"].iter().enumerate() {
        eprintln!(
            "{name}: {hosts} hosts a side, kappa {kappa}, {reps} pairs: power {:.3} on 5 planted 1.5x regressions, FDR {:.4} with them, FDR {:.4} on unchanged fleets, target {target}",
            power(i),
            rate(fdp[i]),
            rate(null_any[i] as f64)
        );
    }
    assert!(power(0) >= 0.6, "power {}", power(0));
    // Monte-Carlo sd of a 0.05 rate over 1000 replicates: 0.0069; allow two.
    assert!(
        rate(fdp[0]) <= target + 0.014,
        "FDR {} with planted regressions",
        rate(fdp[0])
    );
    assert!(
        rate(null_any[0] as f64) <= target + 0.014,
        "FDR {} on unchanged fleets",
        rate(null_any[0] as f64)
    );
}

/// Host deviations on fleets without host effects: with 3 planted outlier hosts, BH over all
/// host × function tests flags the outliers and rarely another host; without outliers (the
/// null true everywhere) it rarely flags anything.
#[test]
fn host_deviation_flags_planted_outliers() {
    let seed = 0x000F_1EE7_4057_u64;
    eprintln!("fleet_synthetic::host_deviation_flags_planted_outliers seed {seed:#x}");
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let functions = 20;
    let pi = normalise(
        &(0..functions)
            .map(|k| 1.0 / (k as f64 + 1.0))
            .collect::<Vec<_>>(),
    );
    // Outliers: hosts 0, 1, 2 spend twice the share in function 3 (a host misconfigured).
    let mut w = pi.clone();
    w[3] *= 2.0;
    let pi_out = normalise(&w);
    let (hosts, reps) = (100, 300);
    // Flags at q <= 0.05 of a fleet: (host, function) pairs.
    let flags = |f: &[(u64, Vec<u64>)]| -> Vec<(usize, usize)> {
        let n_all: u64 = f.iter().map(|h| h.0).sum();
        let y_all: Vec<u64> = (0..functions)
            .map(|k| f.iter().map(|h| h.1[k]).sum())
            .collect();
        let mut tests = Vec::new();
        for (h, (n, y)) in f.iter().enumerate() {
            for k in 0..functions {
                let t = host_deviation(
                    y[k] as f64,
                    *n as f64,
                    (y_all[k] - y[k]) as f64,
                    (n_all - n) as f64,
                );
                tests.push((h, k, t.p));
            }
        }
        let q = benjamini_hochberg(&tests.iter().map(|t| t.2).collect::<Vec<_>>());
        tests
            .iter()
            .zip(&q)
            .filter(|(_, &q)| q <= 0.05)
            .map(|(t, _)| (t.0, t.1))
            .collect()
    };
    let (mut found, mut flagged_total, mut others, mut null_any) = (0usize, 0usize, 0usize, 0u32);
    for _ in 0..reps {
        let mut f = fleet(&mut rng, &pi, hosts, f64::INFINITY, (2_000.0, 20_000.0));
        null_any += u32::from(!flags(&f).is_empty());
        for h in f.iter_mut().take(3) {
            h.1 = multinomial(&mut rng, h.0, &pi_out);
        }
        let flagged = flags(&f);
        found += flagged.iter().filter(|&&(h, k)| h < 3 && k == 3).count();
        // A normal host flagged: its share differs from a rest that holds the outliers (a
        // real but small difference of the comparison), or by chance.
        others += flagged.iter().filter(|&&(h, _)| h >= 3).count();
        flagged_total += flagged.len();
    }
    let power = found as f64 / (reps * 3) as f64;
    let other_rate = others as f64 / (reps * (hosts - 3) * functions) as f64;
    let null_rate = null_any as f64 / reps as f64;
    eprintln!(
        "{hosts} hosts, 3 outliers at 2x in one of {functions} functions, {reps} fleets: power {power:.3}; {others} of {flagged_total} flags on other hosts (rate {other_rate:.5} per other host x function); without outliers {null_any} of {reps} fleets with any flag"
    );
    assert!(power >= 0.9, "power {power}");
    assert!(
        other_rate <= 0.001,
        "other hosts flagged at rate {other_rate}"
    );
    // Monte-Carlo sd of a 0.05 rate over 300 fleets: 0.0126; allow two.
    assert!(
        null_rate <= 0.05 + 0.044,
        "fleets without outliers flagged: {null_rate}"
    );
}

/// The variance from the engine's sums against two independent computations on the per-host
/// data: the residuals summed directly (the same estimator, no expansion of the square), and
/// the delete-one-host jackknife of the ratio (Quenouille 1956, Tukey 1958; a different estimator,
/// asymptotically equal to the linearised one; Shao & Tu, *The Jackknife and Bootstrap*, 1995,
/// ch. 2).
#[test]
fn variance_from_sums_matches_per_host_oracles() {
    let seed = 0x000F_1EE7_0A0C_u64;
    eprintln!("fleet_synthetic::variance_from_sums_matches_per_host_oracles seed {seed:#x}");
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let beta = Beta::new(0.2 * 50.0, 0.8 * 50.0).unwrap();
    let mut worst_jack = 0.0f64;
    for _ in 0..50 {
        let hosts = 200;
        let mut n = Vec::new();
        let mut y = Vec::new();
        for _ in 0..hosts {
            let nh = host_samples(&mut rng, 1_000.0, 100_000.0);
            n.push(nh as f64);
            y.push(
                Binomial::new(nh, beta.sample(&mut rng))
                    .unwrap()
                    .sample(&mut rng) as f64,
            );
        }
        let f = FleetTotals::from_hosts(&n);
        let v =
            proftrust_metrics::fleet::cluster_variance(&UnitSums::from_hosts(&y, &n), &f).unwrap();
        // Direct: k Σ (y_h − R n_h)² / N², k = 1/(1 − Σ(n_h/N)²).
        let (sy, sn): (f64, f64) = (y.iter().sum(), n.iter().sum());
        let r = sy / sn;
        let resid: f64 = y.iter().zip(&n).map(|(y, n)| (y - r * n).powi(2)).sum();
        let k = 1.0 / (1.0 - n.iter().map(|x| (x / sn).powi(2)).sum::<f64>());
        let direct = k * resid / (sn * sn);
        assert!((v / direct - 1.0).abs() < 1e-9, "{v} vs {direct}");
        // Jackknife: (C−1)/C Σ (R_(−h) − mean R_(−h))².
        let loo: Vec<f64> = (0..hosts).map(|h| (sy - y[h]) / (sn - n[h])).collect();
        let mean = loo.iter().sum::<f64>() / hosts as f64;
        let c = hosts as f64;
        let jack = (c - 1.0) / c * loo.iter().map(|x| (x - mean).powi(2)).sum::<f64>();
        worst_jack = worst_jack.max((v / jack - 1.0).abs());
    }
    eprintln!("200 hosts, 50 fleets: linearised / jackknife variance within {worst_jack:.3}");
    // The two estimators differ at order 1/C and by the unequal-size factor k (here about
    // 1.01-1.02); a tenth bounds them on 200 hosts.
    assert!(worst_jack < 0.1, "jackknife ratio off by {worst_jack}");
}
