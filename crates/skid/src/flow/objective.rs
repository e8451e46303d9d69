//! The objective `phi` (seed 000 eq. 7 at block level) and the linear fits of the flows
//! to fixed landing columns (NNLS with conservation and eq. 3 as weighted rows).

use super::*;
use crate::nnls::{gram, nnls_gram};

/// Landing columns of every global block and box under flows `v` (sparse).
pub(super) struct Landing {
    pub(super) blocks: Vec<Vec<(u32, f64)>>,
    pub(super) boxes: Vec<Vec<(u32, f64)>>,
}

/// The skid values the emulation averages over: the midpoints of `n` equal parts of
/// `[S - spread/2, S + spread/2]`, `n = 2 spread` clamped to 4..`max_points` (4 points for
/// the default spread of 1 cycle, as the loop solvers).
pub(super) fn skid_points(skid: f64, spread: f64, max_points: usize) -> Vec<f64> {
    if spread <= 0.0 || skid <= 0.0 {
        return vec![skid];
    }
    let n = ((2.0 * spread).ceil() as usize).clamp(4, max_points);
    (0..n)
        .map(|k| (skid + spread * ((k as f64 + 0.5) / n as f64 - 0.5)).max(0.0))
        .collect()
}

pub(super) fn landing(l: &Layout, v: &[f64], skid: f64, opts: &FlowOptions) -> Landing {
    let skids = skid_points(skid, opts.skid_spread, opts.max_skid_points.max(4));
    let max_skid = skids.iter().cloned().fold(0.0, f64::max);
    let mut emu = Emu::new(l, v, opts.quantum, max_skid);
    let blocks = (0..l.nblocks())
        .map(|gb| emu.block_landing(gb, &skids))
        .collect();
    let boxes = (0..l.box_e.len())
        .map(|x| emu.box_landing(x, &skids))
        .collect();
    Landing { blocks, boxes }
}

/// Identity landing (no skid): the raw fit.
pub(super) fn identity_landing(l: &Layout) -> Landing {
    Landing {
        blocks: (0..l.nblocks())
            .map(|gb| {
                if l.instr_sites {
                    (0..l.size(gb)).map(|k| (l.site_of(gb, k), 1.0)).collect()
                } else {
                    vec![(gb as u32, l.size(gb) as f64)]
                }
            })
            .collect(),
        boxes: (0..l.box_e.len())
            .map(|x| vec![(l.box_site(x), 1.0)])
            .collect(),
    }
}

/// `E^(f)` per site.
pub(super) fn emulated(l: &Layout, land: &Landing, v: &[f64]) -> Vec<f64> {
    let x = l.counts(v);
    let mut e = vec![0.0; l.nsites()];
    for (gb, col) in land.blocks.iter().enumerate() {
        if x[gb] != 0.0 {
            for &(s, w) in col {
                e[s as usize] += x[gb] * w;
            }
        }
    }
    for (xi, col) in land.boxes.iter().enumerate() {
        let y = v[l.box_var[xi]];
        if y != 0.0 {
            for &(s, w) in col {
                e[s as usize] += y * w;
            }
        }
    }
    e
}

pub(super) fn phi_of(l: &Layout, land: &Landing, v: &[f64]) -> f64 {
    emulated(l, land, v)
        .iter()
        .zip(&l.y)
        .map(|(a, b)| (a - b) * (a - b))
        .sum()
}

/// Site rows of the linear model `E^ = A v` for fixed landing columns (dense,
/// `nsites x nvars`).
pub(super) fn site_matrix(l: &Layout, land: &Landing) -> Vec<Vec<f64>> {
    let n = l.nvars;
    let mut a = vec![vec![0.0; n]; l.nsites()];
    for gb in 0..l.nblocks() {
        for &(s, w) in &land.blocks[gb] {
            for x in &mut a[s as usize][l.var0[gb]..l.var0[gb + 1]] {
                *x += w;
            }
        }
    }
    for (xi, col) in land.boxes.iter().enumerate() {
        for &(s, w) in col {
            a[s as usize][l.box_var[xi]] += w;
        }
    }
    a
}

/// Site rows `A w ~ t` and the eq. 3 total of a fit.
#[derive(Clone, Copy)]
pub(super) struct Rows<'a> {
    pub(super) a: &'a [Vec<f64>],
    pub(super) t: &'a [f64],
    pub(super) total: f64,
}

/// NNLS `min ||A w - t||^2 + lambda sum_j d_j (w_j - v_j)^2 + conservation + eq. 3` over
/// `w >= 0` (conservation and eq. 3 as heavily weighted rows; the damping term only when
/// `damping` is given as `(lambda, d, v)`).
pub(super) fn fit_rows(
    l: &Layout,
    rows: Rows<'_>,
    cons: &[Vec<(usize, f64)>],
    opts: &FlowOptions,
    damping: Option<(f64, &[f64], &[f64])>,
    warm: Option<&[f64]>,
) -> Vec<f64> {
    let Rows { a, t, total } = rows;
    let n = l.nvars;
    let nb = l.nblocks();
    let mean_size = l.e.len() as f64 / nb.max(1) as f64;
    let wc = opts.conservation_weight * mean_size;
    let wt = opts.total_weight;
    let (mut g, mut h) = gram(a.iter().map(|r| r.as_slice()).zip(t.iter().copied()), n);
    // Conservation rows (sparse).
    for r in cons {
        for &(i, ci) in r {
            for &(j, cj) in r {
                g[i * n + j] += wc * wc * ci * cj;
            }
        }
    }
    // Eq. 3 row.
    let mut tot = vec![0.0; n];
    for gb in 0..nb {
        for t in &mut tot[l.var0[gb]..l.var0[gb + 1]] {
            *t = l.size(gb) as f64;
        }
    }
    for &v in &l.box_var {
        tot[v] = 1.0;
    }
    let nz: Vec<usize> = (0..n).filter(|&j| tot[j] != 0.0).collect();
    for &i in &nz {
        h[i] += wt * wt * tot[i] * total;
        for &j in &nz {
            g[i * n + j] += wt * wt * tot[i] * tot[j];
        }
    }
    if let Some((lambda, d, v)) = damping {
        for j in 0..n {
            g[j * n + j] += lambda * d[j];
            h[j] += lambda * d[j] * v[j];
        }
    }
    // The IPC bounds, added lazily: solve; for every block (box) over its bound, pin it
    // to the bound with a weighted row (an active upper bound holds with equality at the
    // optimum of a convex problem); repeat until none is violated.
    let mut pinned_b = vec![false; nb];
    let mut pinned_x = vec![false; l.box_var.len()];
    let mut w = nnls_gram(&g, &h, n, warm);
    for _round in 0..8 {
        let x = l.counts(&w);
        let mut added = false;
        for gb in 0..nb {
            if !pinned_b[gb] && x[gb] > l.bounds[gb] * (1.0 + 1e-6) {
                pinned_b[gb] = true;
                added = true;
                let idx: Vec<usize> = (l.var0[gb]..l.var0[gb + 1]).collect();
                for &i in &idx {
                    h[i] += wc * wc * l.bounds[gb];
                    for &j in &idx {
                        g[i * n + j] += wc * wc;
                    }
                }
            }
        }
        for (xi, &var) in l.box_var.iter().enumerate() {
            if !pinned_x[xi] && w[var] > l.box_bounds[xi] * (1.0 + 1e-6) {
                pinned_x[xi] = true;
                added = true;
                h[var] += wt * wt * l.box_bounds[xi];
                g[var * n + var] += wt * wt;
            }
        }
        if !added {
            break;
        }
        w = nnls_gram(&g, &h, n, Some(&w));
    }
    w
}

/// NNLS for the flows given landing columns: block rows, conservation rows, eq. 3 row.
pub(super) fn fit(
    l: &Layout,
    land: &Landing,
    cons: &[Vec<(usize, f64)>],
    opts: &FlowOptions,
    warm: Option<&[f64]>,
) -> Vec<f64> {
    let a = site_matrix(l, land);
    let rows = Rows {
        a: &a,
        t: &l.y,
        total: l.y.iter().sum(),
    };
    fit_rows(l, rows, cons, opts, None, warm)
}

/// `E^(v)` with the emulation at `v`.
pub(super) fn emulate_at(l: &Layout, v: &[f64], skid: f64, opts: &FlowOptions) -> Vec<f64> {
    let land = landing(l, v, skid, opts);
    emulated(l, &land, v)
}

pub(super) fn phi_e(l: &Layout, e: &[f64]) -> f64 {
    e.iter().zip(&l.y).map(|(a, b)| (a - b) * (a - b)).sum()
}
