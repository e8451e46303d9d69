//! Starting flows: conservation-respecting fits to given block and box counts.

use super::*;
use crate::SkidError;

/// Flows fitted to given counts (identity landing against `y = counts`), conservation and
/// eq. 3 as in [`fit`].
pub(super) fn start_flows(
    l: &mut Layout,
    g: &FlowGraph,
    cons: &[Vec<(usize, f64)>],
    opts: &FlowOptions,
    st: &FlowStart,
) -> Vec<f64> {
    start_flows_weighted(l, g, cons, opts, st, None)
}

/// [`start_flows`] with a weight per site row (firm sites keep their count, soft ones give
/// way to conservation and eq. 3).
pub(super) fn start_flows_weighted(
    l: &mut Layout,
    g: &FlowGraph,
    cons: &[Vec<(usize, f64)>],
    opts: &FlowOptions,
    st: &FlowStart,
    weights: Option<&[f64]>,
) -> Vec<f64> {
    let y_obs = std::mem::take(&mut l.y);
    let mut y = vec![0.0; l.nsites()];
    for (f, bc) in st.block_counts.iter().enumerate().take(g.functions.len()) {
        for (b, x) in bc.iter().enumerate().take(g.functions[f].blocks.len()) {
            let gb = l.first[f] + b;
            if l.instr_sites {
                for k in 0..l.size(gb) {
                    y[l.site_of(gb, k) as usize] = *x;
                }
            } else {
                y[gb] = x * l.size(gb) as f64;
            }
        }
    }
    for (k, x) in st.box_counts.iter().enumerate().take(l.box_e.len()) {
        y[l.box_site(k) as usize] = *x;
    }
    l.y = y;
    let v = match weights {
        None => fit(l, &identity_landing(l), cons, opts, None),
        Some(w) => {
            let mut a = site_matrix(l, &identity_landing(l));
            let mut t = l.y.clone();
            for (s, row) in a.iter_mut().enumerate() {
                for x in row.iter_mut() {
                    *x *= w[s];
                }
                t[s] *= w[s];
            }
            // eq. 3 keeps the observed total: a direction moves counts, not the total.
            let rows = Rows {
                a: &a,
                t: &t,
                total: y_obs.iter().sum(),
            };
            fit_rows(l, rows, cons, opts, None, None)
        }
    };
    l.y = y_obs;
    v
}

/// Observed and emulated values per site (instructions or blocks in function order, as
/// [`FlowOptions::instruction_sites`] says, then boxes) at the flows fitted to `start` —
/// the forward model, for diagnostics and tests.
pub fn sites_at(
    g: &FlowGraph,
    skid: f64,
    opts: &FlowOptions,
    start: &FlowStart,
) -> Result<(Vec<f64>, Vec<f64>), SkidError> {
    let mut l = Layout::new(g, opts.instruction_sites, opts.max_ipc)?;
    let cons = l.conservation_rows();
    let v = start_flows(&mut l, g, &cons, opts, start);
    let e = emulate_at(&l, &v, skid, opts);
    Ok((l.y.clone(), e))
}

/// A start for [`solve_flow_from`]: block counts (per function, per block) and box counts;
/// the edge flows are the conservation-respecting fit to them.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct FlowStart {
    /// Block counts per function, per block.
    pub block_counts: Vec<Vec<f64>>,
    /// Instructions per black box.
    pub box_counts: Vec<f64>,
}

/// `phi` at the conservation-respecting fit to `st` (site rows weighted by `w`), and the
/// block and box counts of that fit.
pub(super) fn phi_at_start(
    l: &mut Layout,
    g: &FlowGraph,
    cons: &[Vec<(usize, f64)>],
    skid: f64,
    opts: &FlowOptions,
    st: &FlowStart,
    w: Option<&[f64]>,
) -> (f64, FlowStart) {
    let v = start_flows_weighted(l, g, cons, opts, st, w);
    let land = landing(l, &v, skid, opts);
    (phi_of(l, &land, &v), counts_of(l, g, &v))
}

/// Block and box counts of flows `v`.
pub(super) fn counts_of(l: &Layout, g: &FlowGraph, v: &[f64]) -> FlowStart {
    let x = l.counts(v);
    FlowStart {
        block_counts: (0..g.functions.len())
            .map(|f| {
                let lo = l.first[f];
                x[lo..lo + g.functions[f].blocks.len()].to_vec()
            })
            .collect(),
        box_counts: l.box_var.iter().map(|&k| v[k]).collect(),
    }
}
