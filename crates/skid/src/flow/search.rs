//! The global search at the widest and the sharpest smoothing stage (module doc of
//! [`super`], "Solver", step 3).

use super::*;

/// Global coordinate search over the directions in which `phi` is most non-convex (our
/// stand-in for the global exploration of Algorithm 1's Gibbs sampler). A direction
/// multiplies some counts by a factor `a`: the blocks of one natural loop, with the rest
/// of its function scaled to keep the function's total (the loop's trip count); all blocks
/// of one function (its call count); one black box (its size; when its samples all skidded
/// away, as for a short library routine, its cycles times an IPC from 0.1 to 4). The flows
/// are then refitted
/// with the sites of the direction's function (or box) weighted 1 and all others
/// [`FlowOptions::global_soft_weight`] over the square root of their share — the others give
/// way in proportion to their size, as conservation and eq. 3 demand (fewer calls of `dot` means more iterations per call at the same total). Each direction is searched on the factors `4^{k/10}`, `k = -10..10`; sweeps
/// repeat while `phi` falls by more than 0.1%.
pub(super) fn global_search(
    l: &mut Layout,
    g: &FlowGraph,
    cons: &[Vec<(usize, f64)>],
    skid: f64,
    opts: &FlowOptions,
    mut st: FlowStart,
    factors: &[f64],
) -> FlowStart {
    let total_obs: f64 = l.y.iter().sum();
    let (mut phi, _) = phi_at_start(l, g, cons, skid, opts, &st, None);
    // Directions: a loop of a function (against the rest of the function), a whole
    // function, a box.
    enum Dir {
        Loop(usize, Vec<usize>),
        Function(usize),
        Box(usize),
    }
    let mut dirs = Vec::new();
    for (f, func) in g.functions.iter().enumerate() {
        for lp in &func.loops {
            if lp.len() < func.blocks.len() {
                dirs.push(Dir::Loop(f, lp.clone()));
            }
        }
        dirs.push(Dir::Function(f));
    }
    for x in 0..g.boxes.len() {
        dirs.push(Dir::Box(x));
    }
    let ns = l.nsites();
    let size = |f: usize, b: usize| g.functions[f].blocks[b].sampled_instructions.len() as f64;
    let mean_y = total_obs / ns.max(1) as f64;
    let soft: Vec<f64> = (0..ns)
        .map(|s| opts.global_soft_weight * (mean_y / l.y[s].max(1e-3 * mean_y)).sqrt())
        .collect();
    for _sweep in 0..opts.global_sweeps {
        let phi_sweep = phi;
        for d in &dirs {
            // Soft rows weighted by 1/sqrt(count), so that what gives way does so in
            // proportion to its size.
            let mut w = soft.clone();
            let (f_of, moved): (Option<usize>, f64) = match d {
                Dir::Loop(f, bs) => (
                    Some(*f),
                    bs.iter()
                        .map(|&b| st.block_counts[*f][b] * size(*f, b))
                        .sum(),
                ),
                Dir::Function(f) => (
                    Some(*f),
                    (0..g.functions[*f].blocks.len())
                        .map(|b| st.block_counts[*f][b] * size(*f, b))
                        .sum(),
                ),
                Dir::Box(x) => (None, st.box_counts[*x]),
            };
            // A box whose samples all skidded away starts from nothing: try sizes as shares
            // of the total instead of factors.
            let box_from_zero = matches!(d, Dir::Box(_)) && moved < 1e-3 * total_obs;
            if moved < 1e-3 * total_obs && !box_from_zero {
                continue;
            }
            match (d, f_of) {
                (Dir::Box(x), _) => w[l.box_site(*x) as usize] = 1.0,
                (_, Some(f)) => {
                    for b in 0..g.functions[f].blocks.len() {
                        let gb = l.first[f] + b;
                        for k in 0..l.size(gb) {
                            w[l.site_of(gb, k) as usize] = 1.0;
                        }
                    }
                }
                _ => {}
            }
            let mut best: Option<(f64, FlowStart)> = None;
            // ... then sized by its cycles: Y = IPC x C_X for IPCs 0.1 .. 4.
            let candidates: Vec<f64> = match d {
                Dir::Box(x) if box_from_zero => (0..=16)
                    .map(|k| 0.1 * 40f64.powf(k as f64 / 16.0) * l.box_c[*x])
                    .collect(),
                _ => factors.to_vec(),
            };
            for &a in &candidates {
                let mut t = st.clone();
                match d {
                    Dir::Loop(f, bs) => {
                        // The smaller side (loop or rest of the function) takes the factor,
                        // the other keeps the function's total (so the grid's steps are
                        // steps of the smaller side's counts).
                        let all: f64 = (0..g.functions[*f].blocks.len())
                            .map(|b| st.block_counts[*f][b] * size(*f, b))
                            .sum();
                        let rest = all - moved;
                        let (small_is_loop, small, large) = if moved <= rest {
                            (true, moved, rest)
                        } else {
                            (false, rest, moved)
                        };
                        let b_fac = if large > 0.0 {
                            (all - a * small) / large
                        } else {
                            1.0
                        };
                        if b_fac < 0.0 {
                            continue;
                        }
                        for (b, x) in t.block_counts[*f].iter_mut().enumerate() {
                            *x *= if bs.contains(&b) == small_is_loop {
                                a
                            } else {
                                b_fac
                            };
                        }
                    }
                    Dir::Function(f) => {
                        for x in t.block_counts[*f].iter_mut() {
                            *x *= a;
                        }
                    }
                    Dir::Box(x) if box_from_zero => t.box_counts[*x] = a,
                    Dir::Box(x) => t.box_counts[*x] *= a,
                }
                let (p, counts) = phi_at_start(l, g, cons, skid, opts, &t, Some(&w));
                if best.as_ref().is_none_or(|bb| p < bb.0) {
                    best = Some((p, counts));
                }
            }
            if let Some((p, counts)) = best {
                if p < phi {
                    phi = p;
                    st = counts;
                }
            }
        }
        if phi > phi_sweep * (1.0 - 1e-3) {
            break;
        }
    }
    st
}
