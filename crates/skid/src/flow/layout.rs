//! The indexed program ([`Layout`]): global blocks, flow variables, sites, conservation rows.

use super::*;
use crate::SkidError;

/// A reference to a caller of a function or black box.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum CallerRef {
    /// A call instruction `k` of global block `gb`.
    Call { gb: usize, k: usize },
    /// A tail-call edge (flow variable `var`) out of global block `gb`.
    Tail { gb: usize, var: usize },
    /// The external-calls variable.
    Ext { var: usize },
}

/// Indexed program: global blocks, flow variables, sites.
#[derive(Debug)]
pub(super) struct Layout {
    /// Function of each global block.
    pub(super) func_of: Vec<usize>,
    /// First global block of each function.
    pub(super) first: Vec<usize>,
    /// First instruction (flattened) of each global block, plus the end.
    pub(super) istart: Vec<usize>,
    /// `E_i`, `C_i` flattened.
    pub(super) e: Vec<f64>,
    pub(super) c: Vec<f64>,
    /// Sum of `C_i` per global block.
    pub(super) c_block: Vec<f64>,
    /// Calls per global block.
    pub(super) calls: Vec<Vec<(usize, Callee)>>,
    /// Successors per global block (with the added Leave), and the first variable.
    pub(super) succ: Vec<Vec<Successor>>,
    pub(super) var0: Vec<usize>,
    /// External-call variable per function.
    pub(super) ext_var: Vec<Option<usize>>,
    /// Variable of each box.
    pub(super) box_var: Vec<usize>,
    /// Upper bound `U_b` of `x_b` per global block (infinite when unbounded).
    pub(super) bounds: Vec<f64>,
    /// Upper bound `U_X` of `Y_X` per box.
    pub(super) box_bounds: Vec<f64>,
    pub(super) nvars: usize,
    /// Indirect call sites (global block, instruction).
    pub(super) indirect_sites: Vec<(usize, usize)>,
    /// Callers per function / per box.
    pub(super) fn_callers: Vec<Vec<CallerRef>>,
    pub(super) box_callers: Vec<Vec<CallerRef>>,
    /// Box sampled instructions / cycles.
    pub(super) box_e: Vec<f64>,
    pub(super) box_c: Vec<f64>,
    /// Sites are instructions (else blocks).
    pub(super) instr_sites: bool,
    /// Observed value per site (global blocks or instructions, then boxes).
    pub(super) y: Vec<f64>,
}

impl Layout {
    /// Indexes `g` (checked first: every block, call, successor and box estimate valid):
    /// its blocks flattened into global blocks, a flow variable per successor edge, per
    /// function without known callers (external calls) and per box, the callers of each
    /// function and box, and the IPC bounds.
    pub(super) fn new(g: &FlowGraph, instr_sites: bool, max_ipc: f64) -> Result<Layout, SkidError> {
        check_graph(g).map_err(|what| SkidError::InvalidProblem { what })?;
        let nf = g.functions.len();
        let mut func_of = Vec::new();
        let mut first = Vec::with_capacity(nf);
        let mut istart = vec![0];
        let mut e = Vec::new();
        let mut c = Vec::new();
        let mut calls = Vec::new();
        let mut succ = Vec::new();
        for (fi, f) in g.functions.iter().enumerate() {
            first.push(func_of.len());
            for b in &f.blocks {
                func_of.push(fi);
                e.extend_from_slice(&b.sampled_instructions);
                c.extend_from_slice(&b.sampled_cycles);
                istart.push(e.len());
                calls.push(b.calls.clone());
                let mut s = b.successors.clone();
                if s.is_empty() {
                    s.push(Successor::Leave);
                }
                succ.push(s);
            }
        }
        let nb = func_of.len();
        let mut var0 = Vec::with_capacity(nb + 1);
        let mut nvars = 0;
        for s in &succ {
            var0.push(nvars);
            nvars += s.len();
        }
        var0.push(nvars);
        let (mut fn_callers, box_callers, indirect_sites) = callers(g, &calls, &succ, &var0);
        let mut ext_var = vec![None; nf];
        for (fi, f) in g.functions.iter().enumerate() {
            if f.external_callers || fn_callers[fi].is_empty() {
                ext_var[fi] = Some(nvars);
                fn_callers[fi].push(CallerRef::Ext { var: nvars });
                nvars += 1;
            }
        }
        let box_var = (nvars..nvars + g.boxes.len()).collect();
        nvars += g.boxes.len();
        let (bounds, box_bounds) = ipc_bounds(g, &c, &istart, max_ipc);
        let c_block = (0..nb)
            .map(|gb| c[istart[gb]..istart[gb + 1]].iter().sum())
            .collect();
        let box_e: Vec<f64> = g.boxes.iter().map(|x| x.sampled_instructions).collect();
        let box_c = g.boxes.iter().map(|x| x.sampled_cycles).collect();
        let mut y: Vec<f64> = if instr_sites {
            e.clone()
        } else {
            (0..nb)
                .map(|gb| e[istart[gb]..istart[gb + 1]].iter().sum())
                .collect()
        };
        y.extend_from_slice(&box_e);
        Ok(Layout {
            func_of,
            first,
            istart,
            e,
            c,
            c_block,
            calls,
            succ,
            var0,
            ext_var,
            box_var,
            bounds,
            box_bounds,
            nvars,
            indirect_sites,
            fn_callers,
            box_callers,
            box_e,
            box_c,
            instr_sites,
            y,
        })
    }

    /// Site of instruction `k` of global block `gb`.
    pub(super) fn site_of(&self, gb: usize, k: usize) -> u32 {
        if self.instr_sites {
            (self.istart[gb] + k) as u32
        } else {
            gb as u32
        }
    }

    /// Site of black box `x`.
    pub(super) fn box_site(&self, x: usize) -> u32 {
        if self.instr_sites {
            (self.e.len() + x) as u32
        } else {
            (self.nblocks() + x) as u32
        }
    }

    pub(super) fn nblocks(&self) -> usize {
        self.func_of.len()
    }

    pub(super) fn nsites(&self) -> usize {
        if self.instr_sites {
            self.e.len() + self.box_e.len()
        } else {
            self.nblocks() + self.box_e.len()
        }
    }

    pub(super) fn size(&self, gb: usize) -> usize {
        self.istart[gb + 1] - self.istart[gb]
    }

    /// `x_b` for every global block.
    pub(super) fn counts(&self, v: &[f64]) -> Vec<f64> {
        (0..self.nblocks())
            .map(|gb| v[self.var0[gb]..self.var0[gb + 1]].iter().sum())
            .collect()
    }

    /// Weight of a caller reference under flows `v` (counts `x`).
    pub(super) fn caller_weight(&self, r: CallerRef, v: &[f64], x: &[f64]) -> f64 {
        match r {
            CallerRef::Call { gb, .. } => x[gb],
            CallerRef::Tail { var, .. } | CallerRef::Ext { var } => v[var],
        }
    }

    /// Conservation rows: for every global block, the coefficients of `in(b) - x_b` as
    /// (variable, coefficient) pairs.
    pub(super) fn conservation_rows(&self) -> Vec<Vec<(usize, f64)>> {
        let nb = self.nblocks();
        let mut rows: Vec<Vec<(usize, f64)>> = vec![Vec::new(); nb];
        for gb in 0..nb {
            for v in self.var0[gb]..self.var0[gb + 1] {
                rows[gb].push((v, -1.0));
            }
            let f = self.func_of[gb];
            for (j, s) in self.succ[gb].iter().enumerate() {
                if let Successor::Block(t) = s {
                    rows[self.first[f] + t].push((self.var0[gb] + j, 1.0));
                }
            }
        }
        for (f, callers) in self.fn_callers.iter().enumerate() {
            let entry = self.first[f];
            for r in callers {
                match *r {
                    CallerRef::Call { gb, .. } => {
                        for v in self.var0[gb]..self.var0[gb + 1] {
                            rows[entry].push((v, 1.0));
                        }
                    }
                    CallerRef::Tail { var, .. } | CallerRef::Ext { var } => {
                        rows[entry].push((var, 1.0))
                    }
                }
            }
        }
        rows
    }
}

/// What is wrong with `g`, if anything: a function without blocks, a block whose estimates
/// differ in number, are empty, negative or not finite, a call outside its block or out of
/// order, a call or jump to what does not exist, a black box with bad estimates.
fn check_graph(g: &FlowGraph) -> Result<(), String> {
    let nf = g.functions.len();
    let check = |cl: &Callee| match *cl {
        Callee::Function(h) if h >= nf => Err(format!("calls function {h}")),
        Callee::Box(x) if x >= g.boxes.len() => Err(format!("calls box {x}")),
        _ => Ok(()),
    };
    for f in &g.functions {
        if f.blocks.is_empty() {
            return Err(format!("function {} has no blocks", f.name));
        }
        for (bi, b) in f.blocks.iter().enumerate() {
            let n = b.sampled_instructions.len();
            if n == 0 || b.sampled_cycles.len() != n {
                return Err(format!(
                    "block {bi} of {}: {} instruction and {} cycle estimates (need the \
                     same number, at least one)",
                    f.name,
                    n,
                    b.sampled_cycles.len()
                ));
            }
            if let Some(v) = b
                .sampled_instructions
                .iter()
                .chain(&b.sampled_cycles)
                .find(|v| !(v.is_finite() && **v >= 0.0))
            {
                return Err(format!(
                    "block {bi} of {}: estimate {v} is negative or not finite",
                    f.name
                ));
            }
            let mut last_k = None;
            for (k, cl) in &b.calls {
                if *k >= n || last_k.is_some_and(|l| l >= *k) {
                    return Err(format!(
                        "block {bi} of {}: call at instruction {k} is outside the block \
                         or out of order",
                        f.name
                    ));
                }
                last_k = Some(*k);
                if let Err(w) = check(cl) {
                    return Err(format!(
                        "block {bi} of {} {w}, which does not exist",
                        f.name
                    ));
                }
            }
            for s in &b.successors {
                match s {
                    Successor::Block(t) if *t >= f.blocks.len() => {
                        return Err(format!(
                            "block {bi} of {} jumps to block {t}, which does not exist",
                            f.name
                        ))
                    }
                    Successor::TailCall(cl) => {
                        if let Err(w) = check(cl) {
                            return Err(format!(
                                "block {bi} of {} tail-{w}, which does not exist",
                                f.name
                            ));
                        }
                    }
                    _ => {}
                }
            }
        }
    }
    for x in &g.boxes {
        if !(x.sampled_instructions.is_finite()
            && x.sampled_instructions >= 0.0
            && x.sampled_cycles.is_finite()
            && x.sampled_cycles >= 0.0)
        {
            return Err(format!("black box {}: bad estimates", x.name));
        }
    }
    Ok(())
}

/// The callers of each function, those of each box, and the indirect call sites.
type Callers = (
    Vec<Vec<CallerRef>>,
    Vec<Vec<CallerRef>>,
    Vec<(usize, usize)>,
);

/// The callers of each function and box (calls and tail calls of the global blocks;
/// `var0`: each block's first flow variable), and the indirect call sites.
fn callers(
    g: &FlowGraph,
    calls: &[Vec<(usize, Callee)>],
    succ: &[Vec<Successor>],
    var0: &[usize],
) -> Callers {
    let mut fn_callers: Vec<Vec<CallerRef>> = vec![Vec::new(); g.functions.len()];
    let mut box_callers: Vec<Vec<CallerRef>> = vec![Vec::new(); g.boxes.len()];
    let mut indirect_sites = Vec::new();
    for gb in 0..calls.len() {
        for &(k, cl) in &calls[gb] {
            match cl {
                Callee::Function(h) => fn_callers[h].push(CallerRef::Call { gb, k }),
                Callee::Box(x) => box_callers[x].push(CallerRef::Call { gb, k }),
                Callee::Indirect => indirect_sites.push((gb, k)),
                Callee::Unknown => {}
            }
        }
        for (j, s) in succ[gb].iter().enumerate() {
            let var = var0[gb] + j;
            match s {
                Successor::TailCall(Callee::Function(h)) => {
                    fn_callers[*h].push(CallerRef::Tail { gb, var })
                }
                Successor::TailCall(Callee::Box(x)) => {
                    box_callers[*x].push(CallerRef::Tail { gb, var })
                }
                _ => {}
            }
        }
    }
    (fn_callers, box_callers, indirect_sites)
}

/// The upper bounds `U_b` per global block (per instruction: `c`, `istart` as in
/// [`Layout`]) and `U_X` per box. IPC bound: x_b |B_b| <= IPC_max x (an upper confidence
/// bound on the block's cycles): C_b + 2 sqrt(C_b P) + 3 P (Poisson: 3 periods when nothing
/// was sampled); infinite without a `max_ipc` or a cycle period.
fn ipc_bounds(g: &FlowGraph, c: &[f64], istart: &[usize], max_ipc: f64) -> (Vec<f64>, Vec<f64>) {
    let bounded = max_ipc.is_finite() && max_ipc > 0.0 && g.cycle_period > 0.0;
    let per = g.cycle_period;
    let upper = |cb: f64| max_ipc * (cb + 2.0 * (cb * per).sqrt() + 3.0 * per);
    let bounds = (0..istart.len() - 1)
        .map(|gb| {
            if bounded {
                let cb: f64 = c[istart[gb]..istart[gb + 1]].iter().sum();
                upper(cb) / (istart[gb + 1] - istart[gb]) as f64
            } else {
                f64::INFINITY
            }
        })
        .collect();
    let box_bounds = g
        .boxes
        .iter()
        .map(|b| {
            if bounded {
                upper(b.sampled_cycles)
            } else {
                f64::INFINITY
            }
        })
        .collect();
    (bounds, box_bounds)
}
