//! Rank agreement between the sampled and the exact function rankings, and coverage.

use crate::Error;

/// Kendall's tau-b between two parallel score lists (DESIGN.md "Rank agreement"):
///
/// `τ_b = (n_c − n_d) / sqrt( (n_0 − n_1)(n_0 − n_2) )`, `n_0 = n(n−1)/2`,
/// `n_1 = Σ t_i(t_i−1)/2` over groups of ties in `x`, `n_2` likewise in `y`; a pair tied in
/// `x` or in `y` is neither concordant nor discordant (Kendall 1945). O(n²), meant for
/// function lists. `Ok(None)` when undefined (fewer than two items, or one side all tied).
pub fn kendall_tau_b(x: &[f64], y: &[f64]) -> Result<Option<f64>, Error> {
    if x.len() != y.len() {
        return Err(Error::LengthMismatch {
            what: "Kendall tau-b",
            left: x.len(),
            right: y.len(),
        });
    }
    let n = x.len();
    let (mut nc, mut nd, mut tx, mut ty) = (0u64, 0u64, 0u64, 0u64);
    for i in 0..n {
        for j in i + 1..n {
            let dx = x[i].partial_cmp(&x[j]);
            let dy = y[i].partial_cmp(&y[j]);
            use std::cmp::Ordering::Equal;
            match (dx, dy) {
                (Some(Equal), Some(Equal)) => {
                    tx += 1;
                    ty += 1;
                }
                (Some(Equal), _) => tx += 1,
                (_, Some(Equal)) => ty += 1,
                (Some(a), Some(b)) if a == b => nc += 1,
                (Some(_), Some(_)) => nd += 1,
                _ => {}
            }
        }
    }
    let n0 = (n as u64) * (n as u64).saturating_sub(1) / 2;
    let denom = ((n0 - tx) as f64 * (n0 - ty) as f64).sqrt();
    if denom == 0.0 {
        return Ok(None);
    }
    Ok(Some((nc as f64 - nd as f64) / denom))
}

/// Top-k overlap of two rankings given as parallel scores: `|A ∩ B| / k'` where `A` holds the
/// `k` items with the largest positive `sampled` score, `B` the `k` items with the largest
/// positive `exact` score, and `k' = min(k, max(|positive sampled|, |positive exact|))`.
/// Ties are broken by position (earlier first), so pass the items in a stable order (we sort
/// by name). `None` when `k' = 0`.
pub fn top_k_overlap(sampled: &[u64], exact: &[u64], k: usize) -> Result<Option<f64>, Error> {
    if sampled.len() != exact.len() {
        return Err(Error::LengthMismatch {
            what: "top-k overlap",
            left: sampled.len(),
            right: exact.len(),
        });
    }
    let top = |v: &[u64]| -> Vec<usize> {
        let mut idx: Vec<usize> = (0..v.len()).filter(|&i| v[i] > 0).collect();
        idx.sort_by(|&a, &b| v[b].cmp(&v[a]).then(a.cmp(&b)));
        idx.truncate(k);
        idx
    };
    let pos_s = sampled.iter().filter(|&&c| c > 0).count();
    let pos_e = exact.iter().filter(|&&c| c > 0).count();
    let kk = k.min(pos_s.max(pos_e));
    if kk == 0 {
        return Ok(None);
    }
    let a = top(sampled);
    let b = top(exact);
    let common = a.iter().filter(|i| b.contains(i)).count();
    Ok(Some(common as f64 / kk as f64))
}

/// Function coverage: among the functions whose exact share `e_f / Σ e` exceeds `threshold`
/// (the 1%: pass `0.01`), the fraction that received at least one sample. `None`
/// when no function exceeds the threshold or nothing executed.
pub fn function_coverage(
    samples: &[u64],
    exact: &[u64],
    threshold: f64,
) -> Result<Option<f64>, Error> {
    if samples.len() != exact.len() {
        return Err(Error::LengthMismatch {
            what: "coverage",
            left: samples.len(),
            right: exact.len(),
        });
    }
    let total: u64 = exact.iter().sum();
    if total == 0 {
        return Ok(None);
    }
    let (mut hot, mut seen) = (0usize, 0usize);
    for (&s, &e) in samples.iter().zip(exact) {
        if e as f64 / total as f64 > threshold {
            hot += 1;
            if s > 0 {
                seen += 1;
            }
        }
    }
    Ok((hot > 0).then(|| seen as f64 / hot as f64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tau_b_without_ties() {
        // x = 1 2 3 4, y = 1 3 2 4: of 6 pairs only (2,3) is discordant: (5 - 1)/6
        let t = kendall_tau_b(&[1., 2., 3., 4.], &[1., 3., 2., 4.])
            .unwrap()
            .unwrap();
        assert!((t - 4.0 / 6.0).abs() < 1e-12);
        let t = kendall_tau_b(&[1., 2., 3.], &[3., 2., 1.])
            .unwrap()
            .unwrap();
        assert!((t + 1.0).abs() < 1e-12);
    }

    #[test]
    fn tau_b_with_ties() {
        // x = 1 1 2 3, y = 1 2 2 3. Pairs: (1,2) tied in x; (1,3) c; (1,4) c; (2,3) tied in y;
        // (2,4) c; (3,4) c. n_c = 4, n_d = 0, n_0 = 6, n_1 = 1, n_2 = 1:
        // τ_b = 4 / sqrt(5 · 5) = 0.8 (scipy.stats.kendalltau gives 0.8 too).
        let t = kendall_tau_b(&[1., 1., 2., 3.], &[1., 2., 2., 3.])
            .unwrap()
            .unwrap();
        assert!((t - 0.8).abs() < 1e-12, "{t}");
        // pair tied in both: x = 1 1 2, y = 5 5 6: n_c = 2, n_1 = n_2 = 1: 2/sqrt(2*2) = 1
        let t = kendall_tau_b(&[1., 1., 2.], &[5., 5., 6.])
            .unwrap()
            .unwrap();
        assert!((t - 1.0).abs() < 1e-12);
        assert_eq!(kendall_tau_b(&[1., 1.], &[1., 2.]).unwrap(), None);
        assert_eq!(kendall_tau_b(&[1.], &[1.]).unwrap(), None);
        assert!(kendall_tau_b(&[1.], &[]).is_err());
    }

    #[test]
    fn top_k_hand_computed() {
        // sampled: a=9 b=5 c=4 d=0; exact: a=50 b=1 c=10 d=30
        // top-2 sampled {a,b}, top-2 exact {a,d} -> 1/2
        let s = [9, 5, 4, 0];
        let e = [50, 1, 10, 30];
        assert_eq!(top_k_overlap(&s, &e, 2).unwrap(), Some(0.5));
        // top-3: {a,b,c} vs {a,d,c} -> 2/3
        assert!((top_k_overlap(&s, &e, 3).unwrap().unwrap() - 2.0 / 3.0).abs() < 1e-12);
        // k larger than the lists: k' = max(3 sampled, 4 exact) = 4; overlap {a,b,c} = 3/4
        assert_eq!(top_k_overlap(&s, &e, 10).unwrap(), Some(0.75));
        // ties broken by position: sampled a=1 b=1, exact b=1 only: top-1 {a} vs {b} -> 0
        assert_eq!(top_k_overlap(&[1, 1], &[0, 1], 1).unwrap(), Some(0.0));
        assert_eq!(top_k_overlap(&[0], &[0], 5).unwrap(), None);
    }

    #[test]
    fn coverage_hand_computed() {
        // exact 500 300 195 5 (total 1000): shares .5 .3 .195 .005 -> 3 above 1%;
        // samples 10 0 2 7 -> hot with samples: first and third -> 2/3
        let c = function_coverage(&[10, 0, 2, 7], &[500, 300, 195, 5], 0.01)
            .unwrap()
            .unwrap();
        assert!((c - 2.0 / 3.0).abs() < 1e-12);
        assert_eq!(function_coverage(&[1], &[0], 0.01).unwrap(), None);
        // exactly 1% is not "above"
        assert_eq!(
            function_coverage(&[0, 1], &[1, 99], 0.01).unwrap(),
            Some(1.0)
        );
    }
}
