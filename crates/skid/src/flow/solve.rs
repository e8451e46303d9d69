//! The solver's entry points: graduated smoothing over stages from one or two starts
//! (module doc of [`super`], "Solver", steps 1 and 4), and the forward model.

use super::*;
use crate::SkidError;

/// Solves the whole-program correction (module doc): alternating NNLS from the raw fit.
pub fn solve_flow(g: &FlowGraph, skid: f64, opts: &FlowOptions) -> Result<FlowSolution, SkidError> {
    solve_flow_from(g, skid, opts, None)
}

/// [`solve_flow`] from a given start instead of the raw fit (e.g. a previous solution).
pub fn solve_flow_from(
    g: &FlowGraph,
    skid: f64,
    opts: &FlowOptions,
    start: Option<&FlowStart>,
) -> Result<FlowSolution, SkidError> {
    // Two candidates from the raw fit — plain, and after the global search — each through
    // every smoothing stage; the lower final phi wins (the global search is greedy and can
    // also lead astray).
    if start.is_none() && opts.global_sweeps > 0 && skid > 0.0 {
        let a = staged(g, skid, opts, None, false)?;
        let b = staged(g, skid, opts, None, true)?;
        let iterations = a.iterations + b.iterations;
        let phi_start = a.phi_start;
        let mut best = if b.phi < a.phi { b } else { a };
        best.iterations = iterations;
        best.phi_start = phi_start;
        return Ok(best);
    }
    staged(g, skid, opts, start, false)
}

/// The smoothing stages from `start` (or the raw fit, with the global search first when
/// `search`).
pub(super) fn staged(
    g: &FlowGraph,
    skid: f64,
    opts: &FlowOptions,
    start: Option<&FlowStart>,
    search: bool,
) -> Result<FlowSolution, SkidError> {
    // Graduated smoothing: the emulation averages over a spread of skids; a wide spread
    // makes phi smooth in the flows (its minimum stays near the truth), a narrow one makes
    // it sharp. Solve with spread S * smoothing_start, then halve it down to skid_spread,
    // each stage from the previous solution.
    let mut spreads = Vec::new();
    let last = opts.skid_spread.max(skid * opts.smoothing_end);
    if start.is_none() && skid > 0.0 && opts.smoothing_start > 0.0 {
        let mut sp = skid * opts.smoothing_start;
        while sp > last * 1.5 {
            spreads.push(sp);
            sp *= opts.smoothing_step;
        }
    }
    spreads.push(last);
    let mut st: Option<FlowStart> = start.cloned();
    let mut iterations = 0;
    // The stages are means to an end: the answer is the stage solution with the lowest phi
    // at the base spread (the model of the data), which a sharp last stage does not always
    // reach (its steps can wander off a narrow well).
    let mut best: Option<(f64, FlowSolution)> = None;
    let nstages = spreads.len();
    for (stage, sp) in spreads.into_iter().enumerate() {
        let mut o = opts.clone();
        o.skid_spread = sp;
        let kind = if search && stage == 0 {
            Search::Wide
        } else if search && stage + 1 == nstages {
            Search::Fine
        } else {
            Search::None
        };
        let sol = solve_flow_core(g, skid, &o, st.as_ref(), kind)?;
        let phi_b = phi_of_solution(g, skid, opts, &sol)?;
        iterations += sol.iterations;
        st = Some(FlowStart {
            block_counts: sol.block_counts.clone(),
            box_counts: sol.box_counts.clone(),
        });
        if best.as_ref().is_none_or(|b| phi_b < b.0) {
            best = Some((phi_b, sol));
        }
    }
    let (phi_b, mut sol) = match best {
        Some(b) => b,
        None => return solve_flow_core(g, skid, opts, start, Search::None),
    };
    sol.iterations = iterations;
    sol.phi = phi_b;
    // phi_start at the base spread: the raw fit's (or the start's) phi.
    let mut o = opts.clone();
    o.max_iterations = 0;
    o.lm_iterations = 0;
    sol.phi_start = solve_flow_core(g, skid, &o, start, Search::None)?.phi_start;
    Ok(sol)
}

/// `phi` of a solution's flows at the spread of `opts`.
pub(super) fn phi_of_solution(
    g: &FlowGraph,
    skid: f64,
    opts: &FlowOptions,
    sol: &FlowSolution,
) -> Result<f64, SkidError> {
    let l = Layout::new(g, opts.instruction_sites, opts.max_ipc)?;
    let v = flows_vector(&l, g, &sol.edge_flows, &sol.external_calls, &sol.box_counts);
    let land = landing(&l, &v, skid, opts);
    Ok(phi_of(&l, &land, &v))
}

/// The variable vector of given edge flows, external calls and box counts.
pub(super) fn flows_vector(
    l: &Layout,
    g: &FlowGraph,
    edge_flows: &[Vec<Vec<f64>>],
    external_calls: &[f64],
    box_counts: &[f64],
) -> Vec<f64> {
    let mut v = vec![0.0; l.nvars];
    for (f, fl) in edge_flows.iter().enumerate().take(g.functions.len()) {
        for (b, e) in fl.iter().enumerate().take(g.functions[f].blocks.len()) {
            let gb = l.first[f] + b;
            for (j, x) in e.iter().enumerate().take(l.var0[gb + 1] - l.var0[gb]) {
                v[l.var0[gb] + j] = *x;
            }
        }
    }
    for (f, s) in external_calls.iter().enumerate() {
        if let Some(Some(k)) = l.ext_var.get(f) {
            v[*k] = *s;
        }
    }
    for (x, y) in box_counts.iter().enumerate() {
        if let Some(k) = l.box_var.get(x) {
            v[*k] = *y;
        }
    }
    v
}

/// Which global search a stage starts with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Search {
    None,
    Wide,
    Fine,
}

pub(super) fn solve_flow_core(
    g: &FlowGraph,
    skid: f64,
    opts: &FlowOptions,
    start: Option<&FlowStart>,
    search: Search,
) -> Result<FlowSolution, SkidError> {
    if !(skid.is_finite() && skid >= 0.0) {
        return Err(SkidError::InvalidSkid { skid });
    }
    if !(opts.quantum.is_finite() && opts.quantum > 0.0) {
        return Err(SkidError::InvalidProblem {
            what: format!("quantum {} must be > 0", opts.quantum),
        });
    }
    let mut l = Layout::new(g, opts.instruction_sites, opts.max_ipc)?;
    let cons = l.conservation_rows();
    let mut raw = match start {
        None => fit(&l, &identity_landing(&l), &cons, opts, None),
        Some(st) => start_flows(&mut l, g, &cons, opts, st),
    };
    if search != Search::None && opts.global_sweeps > 0 {
        let x = l.counts(&raw);
        let st = FlowStart {
            block_counts: (0..g.functions.len())
                .map(|f| {
                    let lo = l.first[f];
                    x[lo..lo + g.functions[f].blocks.len()].to_vec()
                })
                .collect(),
            box_counts: l.box_var.iter().map(|&k| raw[k]).collect(),
        };
        // Wide: factors 4^{k/10}, k = -10..10 (0.25 to 4). Fine: 1.5^{k/12}, k = -12..12
        // (steps of 3.4%, 0.67 to 1.5), for the narrow well of a sharp stage.
        let factors: Vec<f64> = match search {
            Search::Wide => (-10..=10).map(|k| 4f64.powf(k as f64 / 10.0)).collect(),
            _ => (-12..=12).map(|k| 1.5f64.powf(k as f64 / 12.0)).collect(),
        };
        let factors: Vec<f64> = factors
            .into_iter()
            .filter(|a| (a - 1.0).abs() > 1e-12)
            .collect();
        let best = global_search(&mut l, g, &cons, skid, opts, st, &factors);
        raw = start_flows(&mut l, g, &cons, opts, &best);
    }
    let mut v = raw;
    let mut land = landing(&l, &v, skid, opts);
    let mut phi = phi_of(&l, &land, &v);
    let phi_start = phi;
    let mut it = 0;
    let mut converged = false;
    while it < opts.max_iterations {
        it += 1;
        let mut next = fit(&l, &land, &cons, opts, Some(&v));
        let mut land_next = landing(&l, &next, skid, opts);
        let mut phi_next = phi_of(&l, &land_next, &next);
        let mut halvings = 0;
        while phi_next > phi && halvings < 12 {
            for (a, b) in next.iter_mut().zip(&v) {
                *a = 0.5 * (*a + b);
            }
            land_next = landing(&l, &next, skid, opts);
            phi_next = phi_of(&l, &land_next, &next);
            halvings += 1;
        }
        let scale = v.iter().cloned().fold(0.0, f64::max).max(f64::MIN_POSITIVE);
        let moved = next
            .iter()
            .zip(&v)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f64::max);
        if phi_next <= phi {
            v = next;
            land = land_next;
            phi = phi_next;
        }
        if moved <= opts.tolerance * scale || halvings >= 12 {
            converged = true;
            break;
        }
    }
    if opts.lm_iterations > 0 && l.nvars <= opts.lm_max_unknowns {
        let (v2, phi2, it2, conv2) =
            levenberg_marquardt(&l, &cons, skid, opts, v.clone(), opts.lm_iterations);
        if phi2 <= phi {
            v = v2;
            phi = phi2;
        }
        it += it2;
        converged = conv2;
    }
    let x = l.counts(&v);
    let mut max_cons = 0.0f64;
    for (gb, r) in cons.iter().enumerate() {
        // Relative to the count, for blocks run at least once (below that it is noise).
        if x[gb] >= 1.0 {
            let s: f64 = r.iter().map(|&(var, c)| c * v[var]).sum();
            max_cons = max_cons.max(s.abs() / x[gb]);
        }
    }
    let nf = g.functions.len();
    let mut block_counts = Vec::with_capacity(nf);
    let mut edge_flows = Vec::with_capacity(nf);
    for f in 0..nf {
        let lo = l.first[f];
        let hi = if f + 1 < nf {
            l.first[f + 1]
        } else {
            l.nblocks()
        };
        block_counts.push(x[lo..hi].to_vec());
        edge_flows.push(
            (lo..hi)
                .map(|gb| v[l.var0[gb]..l.var0[gb + 1]].to_vec())
                .collect(),
        );
    }
    Ok(FlowSolution {
        block_counts,
        edge_flows,
        external_calls: l.ext_var.iter().map(|e| e.map_or(0.0, |k| v[k])).collect(),
        box_counts: l.box_var.iter().map(|&k| v[k]).collect(),
        phi,
        phi_start,
        iterations: it,
        converged,
        max_conservation_error: max_cons,
    })
}

/// `E^` per site (global blocks in function order, then boxes) for given block counts and
/// box counts, with the emulation of [`solve_flow`] — the forward model, for tests and for
/// producing synthetic profiles. `edge_flows` as in [`FlowSolution::edge_flows`],
/// `external_calls` per function, `box_counts` per box.
pub fn emulate_flow(
    g: &FlowGraph,
    skid: f64,
    opts: &FlowOptions,
    edge_flows: &[Vec<Vec<f64>>],
    external_calls: &[f64],
    box_counts: &[f64],
) -> Result<Vec<f64>, SkidError> {
    let l = Layout::new(g, opts.instruction_sites, opts.max_ipc)?;
    let v = flows_vector(&l, g, edge_flows, external_calls, box_counts);
    let land = landing(&l, &v, skid, opts);
    Ok(emulated(&l, &land, &v))
}
