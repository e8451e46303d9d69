//! Non-negative least squares (Lawson & Hanson's active-set method), on the normal equations.
//!
//! `min ||A x - y||^2, x >= 0` only needs the Gram matrix `G = A^T A` and `h = A^T y`: the
//! active-set loop solves `G_PP z_P = h_P` on the passive (positive) set `P` with a Cholesky
//! factorisation. Forming `G` once costs `rows * n^2`; each subset solve `|P|^3 / 3`. A warm
//! start (the previous solution of an alternation) begins with its positive set passive, so
//! an alternation that changes few signs needs few subset solves.

/// `min ||A x - y||, x >= 0` with `a` row-major (`a[row][col]`). See [`nnls_gram`].
pub fn nnls(a: &[Vec<f64>], y: &[f64]) -> Vec<f64> {
    let n = a.first().map_or(0, |r| r.len());
    let (g, h) = gram(a.iter().map(|r| r.as_slice()).zip(y.iter().copied()), n);
    nnls_gram(&g, &h, n, None)
}

/// `G = A^T A` (row-major `n x n`) and `h = A^T y` from `(row, y)` pairs.
pub fn gram<'r>(rows: impl Iterator<Item = (&'r [f64], f64)>, n: usize) -> (Vec<f64>, Vec<f64>) {
    let mut g = vec![0.0; n * n];
    let mut h = vec![0.0; n];
    let mut nz: Vec<usize> = Vec::with_capacity(n);
    for (row, yi) in rows {
        nz.clear();
        nz.extend((0..n).filter(|&j| row[j] != 0.0));
        for &i in &nz {
            let ri = row[i];
            h[i] += ri * yi;
            let gi = &mut g[i * n..(i + 1) * n];
            for &j in &nz {
                gi[j] += ri * row[j];
            }
        }
    }
    (g, h)
}

/// Lawson–Hanson NNLS on the normal equations: minimises `x^T G x - 2 h^T x` over `x >= 0`
/// (`g` row-major `n x n`, symmetric positive semi-definite). `warm`, when given, is a
/// feasible start (entries `> 0` start passive). Deterministic.
pub fn nnls_gram(g: &[f64], h: &[f64], n: usize, warm: Option<&[f64]>) -> Vec<f64> {
    let mut x = vec![0.0; n];
    if n == 0 {
        return x;
    }
    let diag_max = (0..n).map(|i| g[i * n + i]).fold(0.0f64, f64::max);
    if diag_max <= 0.0 {
        return x;
    }
    let h_max = h
        .iter()
        .fold(0.0f64, |m, v| m.max(v.abs()))
        .max(f64::MIN_POSITIVE);
    // Gradient tolerance: relative to the data, so that the loop ends on rounding noise.
    let tol = 1e-11 * h_max.max(diag_max);
    let mut passive = vec![false; n];
    if let Some(w) = warm {
        for j in 0..n {
            if w.get(j).is_some_and(|v| *v > 0.0) && g[j * n + j] > 0.0 {
                passive[j] = true;
                x[j] = w[j];
            }
        }
        if passive.iter().any(|&p| p) {
            feasible_solve(g, h, n, &mut x, &mut passive);
        }
    }
    let mut grad = vec![0.0; n];
    for _outer in 0..3 * n + 10 {
        for (j, gj) in grad.iter_mut().enumerate() {
            let row = &g[j * n..(j + 1) * n];
            *gj = h[j] - row.iter().zip(&x).map(|(a, b)| a * b).sum::<f64>();
        }
        let cand = (0..n)
            .filter(|&j| !passive[j] && grad[j] > tol && g[j * n + j] > 0.0)
            .max_by(|&i, &j| grad[i].total_cmp(&grad[j]));
        let Some(j) = cand else { break };
        passive[j] = true;
        if !feasible_solve(g, h, n, &mut x, &mut passive) {
            // The new variable could not enter (numerically singular): stop here.
            passive[j] = false;
            x[j] = 0.0;
            break;
        }
    }
    x
}

/// Inner loop of Lawson–Hanson: from a feasible `x` (zero off the passive set), solve on the
/// passive set and step back toward `x` until the solution is positive, dropping variables
/// that hit zero. Returns false when no progress was possible.
fn feasible_solve(g: &[f64], h: &[f64], n: usize, x: &mut [f64], passive: &mut [bool]) -> bool {
    for _inner in 0..3 * n + 10 {
        let Some(z) = solve_subset(g, h, n, passive) else {
            return false;
        };
        if (0..n).all(|k| !passive[k] || z[k] > 0.0) {
            x.copy_from_slice(&z);
            return true;
        }
        let mut alpha = 1.0f64;
        for k in 0..n {
            if passive[k] && z[k] <= 0.0 {
                let d = x[k] - z[k];
                alpha = alpha.min(if d > 0.0 { x[k] / d } else { 0.0 });
            }
        }
        let mut dropped = false;
        for k in 0..n {
            if passive[k] {
                x[k] += alpha * (z[k] - x[k]);
                if x[k] <= 0.0 || (z[k] <= 0.0 && x[k] <= 1e-14 * (1.0 + z[k].abs())) {
                    passive[k] = false;
                    x[k] = 0.0;
                    dropped = true;
                }
            }
        }
        if !dropped {
            // alpha hit a variable that is numerically not zero: drop the smallest ratio one.
            if let Some(k) = (0..n)
                .filter(|&k| passive[k] && z[k] <= 0.0)
                .min_by(|&a, &b| x[a].total_cmp(&x[b]))
            {
                passive[k] = false;
                x[k] = 0.0;
            }
        }
        if !passive.iter().any(|&p| p) {
            return true;
        }
    }
    true
}

/// Solves `G_PP z_P = h_P` (Cholesky with a tiny ridge against rank deficiency); zero off
/// `P`. `None` when the factorisation fails even with a larger ridge.
fn solve_subset(g: &[f64], h: &[f64], n: usize, passive: &[bool]) -> Option<Vec<f64>> {
    let idx: Vec<usize> = (0..n).filter(|&j| passive[j]).collect();
    let k = idx.len();
    let trace: f64 = idx
        .iter()
        .map(|&j| g[j * n + j])
        .sum::<f64>()
        .max(f64::MIN_POSITIVE);
    let mut ridge = 1e-13 * trace / k.max(1) as f64;
    for _attempt in 0..6 {
        let mut l = vec![0.0; k * k];
        let mut ok = true;
        'fact: for r in 0..k {
            for c in 0..=r {
                let mut s = g[idx[r] * n + idx[c]];
                if r == c {
                    s += ridge;
                }
                for t in 0..c {
                    s -= l[r * k + t] * l[c * k + t];
                }
                if r == c {
                    if s <= 0.0 || !s.is_finite() {
                        ok = false;
                        break 'fact;
                    }
                    l[r * k + r] = s.sqrt();
                } else {
                    l[r * k + c] = s / l[c * k + c];
                }
            }
        }
        if ok {
            let mut z = vec![0.0; k];
            for r in 0..k {
                let mut s = h[idx[r]];
                for t in 0..r {
                    s -= l[r * k + t] * z[t];
                }
                z[r] = s / l[r * k + r];
            }
            for r in (0..k).rev() {
                let mut s = z[r];
                for t in r + 1..k {
                    s -= l[t * k + r] * z[t];
                }
                z[r] = s / l[r * k + r];
            }
            let mut out = vec![0.0; n];
            for (r, &j) in idx.iter().enumerate() {
                out[j] = z[r];
            }
            return Some(out);
        }
        ridge = ridge.max(1e-300) * 1e3;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hand_examples() {
        // min ||[1 0; 0 1; 1 1] x - (1, -1, 1)||, x >= 0: x2 = 0, x1 = argmin (x-1)^2 + (x-1)^2 = 1.
        let a = vec![vec![1.0, 0.0], vec![0.0, 1.0], vec![1.0, 1.0]];
        let x = nnls(&a, &[1.0, -1.0, 1.0]);
        assert!((x[0] - 1.0).abs() < 1e-9 && x[1] == 0.0, "{x:?}");
        // Unconstrained optimum inside the orthant: x = (1, 2).
        let x = nnls(&a, &[1.0, 2.0, 3.0]);
        assert!(
            (x[0] - 1.0).abs() < 1e-9 && (x[1] - 2.0).abs() < 1e-9,
            "{x:?}"
        );
        // Both constrained: y = (-1, -1, -1) -> x = 0.
        let x = nnls(&a, &[-1.0, -1.0, -1.0]);
        assert_eq!(x, vec![0.0, 0.0]);
    }

    #[test]
    fn warm_start_gives_the_same_answer() {
        // 3 columns, the optimum has x3 = 0: A = [1 0 1; 0 1 1; 1 1 0; 0 0 1], y = (2, 1, 3, -2).
        let a = vec![
            vec![1.0, 0.0, 1.0],
            vec![0.0, 1.0, 1.0],
            vec![1.0, 1.0, 0.0],
            vec![0.0, 0.0, 1.0],
        ];
        let y = [2.0, 1.0, 3.0, -2.0];
        let cold = nnls(&a, &y);
        let (g, h) = gram(a.iter().map(|r| r.as_slice()).zip(y.iter().copied()), 3);
        let warm = nnls_gram(&g, &h, 3, Some(&[0.5, 0.5, 0.5]));
        for (c, w) in cold.iter().zip(&warm) {
            assert!((c - w).abs() < 1e-9, "{cold:?} vs {warm:?}");
        }
        // x3 = 0; then min (x1-2)^2 + (x2-1)^2 + (x1+x2-3)^2: x1 = 2, x2 = 1.
        assert!((cold[0] - 2.0).abs() < 1e-9 && (cold[1] - 1.0).abs() < 1e-9);
        assert_eq!(cold[2], 0.0);
    }
}
