//! Levenberg-Marquardt on the non-linear `phi` (module doc of [`super`], "Solver", step 2).

use super::*;

/// Levenberg–Marquardt on the full non-linear `phi` (the CPIs, edge probabilities, call
/// shares and `tau` all move with `v`): the Jacobian of `E^` by forward differences (step
/// [`FlowOptions::jacobian_step`] of the variable, or of its block's count for an unused
/// edge) and Broyden's rank-one update after each accepted step (a fresh one when a step
/// with an updated Jacobian fails), then a damped NNLS step `min ||E^(v) + J (w - v) - y||^2 + lambda ||D (w - v)||^2`
/// with conservation and eq. 3 (Marquardt's scaling `D^2 = diag(J^T J)`); `lambda` is
/// divided by 3 after a step that lowers `phi` and multiplied by 4 (at most 8 times) after
/// one that does not. Returns the new `v`, its `phi`, the iterations run and whether it
/// stopped on the tolerance.
pub(super) fn levenberg_marquardt(
    l: &Layout,
    cons: &[Vec<(usize, f64)>],
    skid: f64,
    opts: &FlowOptions,
    mut v: Vec<f64>,
    max_iterations: usize,
) -> (Vec<f64>, f64, usize, bool) {
    let n = l.nvars;
    let ns = l.nsites();
    let mut e0 = emulate_at(l, &v, skid, opts);
    let mut phi = phi_e(l, &e0);
    let mut lambda = 1e-3;
    let mut it = 0;
    let mut converged = false;
    // Jacobian columns (sites x vars); forward differences when fresh, then Broyden
    // rank-one updates after accepted steps; recomputed when a step with an updated
    // Jacobian fails.
    let mut jac: Option<Vec<Vec<f64>>> = None;
    let mut fresh = false;
    while it < max_iterations {
        it += 1;
        let scale = l.counts(&v).iter().cloned().fold(0.0, f64::max).max(1.0);
        if jac.is_none() || (opts.jacobian_refresh > 0 && (it - 1) % opts.jacobian_refresh == 0) {
            jac = Some(fd_jacobian(l, skid, opts, &v, &e0));
            fresh = true;
        }
        let jcols = jac.as_ref().map_or(&[][..], |j| j.as_slice());
        // Rows: J w ~ y - E^(v) + J v.
        let mut a = vec![vec![0.0; n]; ns];
        for (j, col) in jcols.iter().enumerate() {
            for s in 0..ns {
                a[s][j] = col[s];
            }
        }
        let t: Vec<f64> = (0..ns)
            .map(|s| l.y[s] - e0[s] + (0..n).map(|j| a[s][j] * v[j]).sum::<f64>())
            .collect();
        let d: Vec<f64> = jcols
            .iter()
            .map(|c| c.iter().map(|x| x * x).sum::<f64>().max(1e-12))
            .collect();
        let mut accepted = None;
        for _trial in 0..8 {
            let rows = Rows {
                a: &a,
                t: &t,
                total: l.y.iter().sum(),
            };
            let w = fit_rows(l, rows, cons, opts, Some((lambda, &d, &v)), Some(&v));
            let ew = emulate_at(l, &w, skid, opts);
            let phw = phi_e(l, &ew);
            if phw < phi {
                accepted = Some((w, ew, phw));
                lambda = (lambda / 3.0).max(1e-9);
                break;
            }
            lambda *= 4.0;
        }
        match accepted {
            Some((w, ew, phw)) => {
                let step: Vec<f64> = w.iter().zip(&v).map(|(p, q)| p - q).collect();
                let moved = step.iter().fold(0.0f64, |m, x| m.max(x.abs()));
                let rel = (phi - phw) / phi.max(f64::MIN_POSITIVE);
                // Broyden: J += (dE - J step) step^T / |step|^2.
                let nrm: f64 = step.iter().map(|x| x * x).sum();
                if let (Some(jc), true) = (jac.as_mut(), nrm > 0.0) {
                    let mut js = vec![0.0; ns];
                    for (j, col) in jc.iter().enumerate() {
                        if step[j] != 0.0 {
                            for s in 0..ns {
                                js[s] += col[s] * step[j];
                            }
                        }
                    }
                    let u: Vec<f64> = (0..ns).map(|s| (ew[s] - e0[s] - js[s]) / nrm).collect();
                    for (j, col) in jc.iter_mut().enumerate() {
                        if step[j] != 0.0 {
                            for s in 0..ns {
                                col[s] += u[s] * step[j];
                            }
                        }
                    }
                }
                v = w;
                e0 = ew;
                phi = phw;
                fresh = false;
                if moved <= opts.tolerance * scale || rel < 1e-6 {
                    converged = true;
                    break;
                }
            }
            None if !fresh => {
                // The updated Jacobian may be stale: retry with a fresh one.
                jac = None;
                lambda = 1e-3;
            }
            None => {
                converged = true;
                break;
            }
        }
    }
    (v, phi, it, converged)
}

/// Forward-difference Jacobian of `E^` at `v` (columns per variable); see
/// [`levenberg_marquardt`].
pub(super) fn fd_jacobian(
    l: &Layout,
    skid: f64,
    opts: &FlowOptions,
    v: &[f64],
    e0: &[f64],
) -> Vec<Vec<f64>> {
    let n = l.nvars;
    let ns = l.nsites();
    let x = l.counts(v);
    let mut block_of_var = vec![usize::MAX; n];
    for gb in 0..l.nblocks() {
        for b in &mut block_of_var[l.var0[gb]..l.var0[gb + 1]] {
            *b = gb;
        }
    }
    let scale = x.iter().cloned().fold(0.0, f64::max).max(1.0);
    let land0 = landing(l, v, skid, opts);
    let mut jcols: Vec<Vec<f64>> = Vec::with_capacity(n);
    for j in 0..n {
        if let Some(xi) = l.box_var.iter().position(|&b| b == j) {
            // E^ is linear in Y_X with column L_X (tau does not depend on Y_X).
            let mut col = vec![0.0; ns];
            for &(s, w) in &land0.boxes[xi] {
                col[s as usize] += w;
            }
            jcols.push(col);
            continue;
        }
        // Cold variables (their block runs less than 1e-5 of the hottest block and has no
        // samples) keep a zero column: they cannot move the fit.
        let gbj = block_of_var[j];
        let ext_cold = gbj == usize::MAX && v[j] < 1e-5 * scale;
        let block_cold = gbj != usize::MAX
            && x[gbj] < 1e-5 * scale
            && l.e[l.istart[gbj]..l.istart[gbj + 1]]
                .iter()
                .all(|e| *e == 0.0);
        if ext_cold || block_cold {
            jcols.push(vec![0.0; ns]);
            continue;
        }
        let base = if v[j] > 0.0 {
            v[j]
        } else if gbj != usize::MAX && x[gbj] > 0.0 {
            x[gbj]
        } else {
            1e-3 * scale
        };
        let hstep = (opts.jacobian_step * base).max(1e-9 * scale);
        let mut vp = v.to_vec();
        vp[j] += hstep;
        let ep = emulate_at(l, &vp, skid, opts);
        jcols.push(ep.iter().zip(e0).map(|(a, b)| (a - b) / hstep).collect());
    }
    jcols
}
