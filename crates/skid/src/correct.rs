//! Skid correction on one loop (seed 000 §2): simple-loop decomposition, candidate frequencies
//! `F` under eq. 3, CPI estimate eq. 5, skid emulation eq. 6, objective `phi(F)`, and two
//! solvers: the Gibbs sampler of Algorithm 1 and an alternating non-negative least-squares
//! solver.
//!
//! # The problem
//!
//! A loop `K` has basic blocks `B_b` (`|B_b|` instructions each) and simple loops (elementary
//! cycles through the header) `K_1..K_L`, each a sequence of blocks. Instructions are numbered
//! block by block (`i`). The sampling profiler gives, per instruction, the skid-affected
//! instruction estimate `E_i` (samples x period) and the cycle estimate `C_i`.
//!
//! * eq. 3: `|E| = sum_l F_l sum_{B_b in K_l} |B_b|` with `|E| = sum_i E_i` (the loop total
//!   is not biased by skid, §2.1).
//! * eq. 4: `E_i(F) = sum_l F_l [I_i in K_l]` (an instruction sits in exactly one block and a
//!   block appears at most once in an elementary cycle, so the `delta` sum is 0 or 1).
//! * eq. 5: `c_i = C_i / E_i(F)`. When `E_i(F) = 0` no loop with positive frequency contains
//!   `I_i`, so its CPI never matters; we set it to 1.
//! * eq. 6: `E^_i(F) = sum_l F_l d(S, c_l, lambda_{i,l})` where `c_l` is the CPI vector of
//!   `K_l`'s instructions in order and `d(S, c_l, .)` the per-execution distribution of
//!   eq. 2 ([`crate::model::SkidModel::distribution`]). Our reading: eq. 2 is applied with
//!   `N_e = 1` and the loop's frequency `F_l` multiplies it, so `sum_i E^_i(F) = sum_i E_i(F)`.
//! * `phi(F) = sum_b ( sum_{i in B_b} E_i - sum_{i in B_b} E^_i(F) )^2` (§2.2).
//!
//! The corrected instruction counts are `E_i(F*)` for the minimiser `F*`.
//!
//! # Solvers
//!
//! [`solve_gibbs`] follows Algorithm 1; what the paper leaves open is written on
//! [`GibbsOptions`]. [`solve_lsq`] uses the structure of eq. 6: for fixed CPIs `c`, `E^(F)`
//! is *linear* in `F`, so `phi` restricted to fixed `c` is a non-negative least-squares problem
//! (the equality of eq. 3 added as a heavily weighted row). It alternates "CPIs from `F`
//! (eq. 5)" and "NNLS for `F` (Lawson–Hanson)" until `F` is stable. Flow conservation inside
//! the loop holds by construction for any `F >= 0` (each simple loop is a closed cycle through
//! the header), the role conservation constraints play in LLVM's profile inference.

use crate::model::SkidModel;
use crate::SkidError;
use proftrust_model::{BlockId, Cfg, Loop, SimpleLoop, Svma};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

/// One loop to correct.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoopProblem {
    /// `|B_b|` per block of the loop.
    pub block_sizes: Vec<usize>,
    /// Simple loops, each a sequence of indices into `block_sizes`, starting at the header.
    pub simple_loops: Vec<Vec<usize>>,
    /// `E_i`: skid-affected instruction estimate per instruction (samples x period), block by block.
    pub sampled_instructions: Vec<f64>,
    /// `C_i`: cycle estimate per instruction (samples x period), block by block.
    pub sampled_cycles: Vec<f64>,
    /// Skid `S` in cycles.
    pub skid: f64,
}

/// Which solver produced a solution.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Solver {
    /// Algorithm 1 of seed 000.
    Gibbs,
    /// Alternating NNLS.
    Lsq,
}

/// A solved loop.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoopSolution {
    /// `F_l` per simple loop.
    pub frequencies: Vec<f64>,
    /// Corrected instruction counts `E_i(F)` (eq. 4), block by block.
    pub instructions: Vec<f64>,
    /// CPI estimates `c_i` (eq. 5) at the solution.
    pub cpi: Vec<f64>,
    /// `phi(F)` at the solution.
    pub phi: f64,
    /// `phi` of the uncorrected profile read as frequencies (the raw-profile least-squares fit).
    pub phi_start: f64,
    /// Sweeps (Gibbs) or outer iterations (lsq) run.
    pub iterations: usize,
    /// Whether the convergence rule was met before the iteration limit.
    pub converged: bool,
    /// Solver used.
    pub solver: Solver,
    /// Seed of the random choices (Gibbs only).
    pub seed: Option<u64>,
}

/// How `E^_i(F)` (eq. 6) is emulated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Emulation {
    /// Exactly eq. 6: each simple loop is emulated as if it repeated forever on its own
    /// (eq. 2 per simple loop), so a sample never skids from one simple loop into another.
    PerLoop,
    /// Our extension: iterations are a random interleaving of the simple loops with
    /// probabilities `pi_l = F_l / sum F`. A sample whose skid outlasts the rest of its
    /// iteration continues into a next iteration drawn from `pi`, and so on, so skid from a
    /// light path into a heavy instruction of another path (and back) is modelled. The
    /// remaining skid at an iteration boundary is rounded to 1/4 cycle so the expected
    /// landing distribution is memoised over at most `4 S + 1` states. Simple loops whose
    /// CPIs are all zero are left out of `pi` (they cannot consume skid). Default.
    #[default]
    Mixed,
}

impl proftrust_model::named::Named for Emulation {
    const ALL: &'static [(Self, &'static str, &'static str)] = &[
        (
            Emulation::PerLoop,
            "per-loop",
            "Each simple loop emulated on its own (eq. 6 as printed)",
        ),
        (
            Emulation::Mixed,
            "mixed",
            "Simple loops interleaved with probabilities F_l / sum F (skid may cross iterations)",
        ),
    ];
}
proftrust_model::named_from_str!(Emulation);

/// The problem with derived indices, ready for repeated `phi` evaluations.
#[derive(Debug, Clone)]
pub struct Prepared<'a> {
    p: &'a LoopProblem,
    /// How eq. 6 is emulated.
    pub emulation: Emulation,
    /// Width in cycles of a uniform spread of the skid around `S` that the emulation
    /// averages over (4 points). CPIs estimated by eq. 5 carry sampling noise, so partial
    /// sums that are exact integers in the hardware fall a little short or long of `S` in the
    /// estimate and whole landings flip to the neighbour instruction; the spread makes the
    /// emulation robust to that. 0 = eq. 2 exactly (as in [`crate::model`]).
    pub skid_spread: f64,
    block_start: Vec<usize>,
    /// Instruction indices of each simple loop, in execution order.
    loop_instrs: Vec<Vec<usize>>,
    /// Which block each instruction is in.
    block_of: Vec<usize>,
    /// `|K_l|`.
    loop_len: Vec<f64>,
    /// `|E|`.
    total: f64,
    /// `sum_{i in B_b} E_i`.
    block_sampled: Vec<f64>,
}

impl<'a> Prepared<'a> {
    /// Validates and indexes a problem.
    pub fn new(p: &'a LoopProblem) -> Result<Prepared<'a>, SkidError> {
        let n: usize = p.block_sizes.iter().sum();
        let bad = |what: String| Err(SkidError::InvalidProblem { what });
        if p.block_sizes.is_empty() || p.block_sizes.contains(&0) {
            return bad("a loop needs blocks, each with at least one instruction".into());
        }
        if p.sampled_instructions.len() != n || p.sampled_cycles.len() != n {
            return bad(format!(
                "{} instructions in the blocks but {} instruction and {} cycle estimates",
                n,
                p.sampled_instructions.len(),
                p.sampled_cycles.len()
            ));
        }
        if p.simple_loops.is_empty() {
            return bad("no simple loops".into());
        }
        if !(p.skid.is_finite() && p.skid >= 0.0) {
            return Err(SkidError::InvalidSkid { skid: p.skid });
        }
        if let Some(x) = p
            .sampled_instructions
            .iter()
            .chain(&p.sampled_cycles)
            .find(|x| !(x.is_finite() && **x >= 0.0))
        {
            return bad(format!("estimate {x} is negative or not finite"));
        }
        let mut block_start = Vec::with_capacity(p.block_sizes.len());
        let mut block_of = Vec::with_capacity(n);
        let mut acc = 0;
        for (b, &s) in p.block_sizes.iter().enumerate() {
            block_start.push(acc);
            block_of.extend(std::iter::repeat_n(b, s));
            acc += s;
        }
        let mut loop_instrs = Vec::new();
        for (l, sl) in p.simple_loops.iter().enumerate() {
            if sl.is_empty() {
                return bad(format!("simple loop {l} has no blocks"));
            }
            let mut seen = vec![false; p.block_sizes.len()];
            let mut v = Vec::new();
            for &b in sl {
                if b >= p.block_sizes.len() {
                    return bad(format!(
                        "simple loop {l} names block {b}, which does not exist"
                    ));
                }
                if seen[b] {
                    return bad(format!(
                        "simple loop {l} visits block {b} twice (not an elementary cycle)"
                    ));
                }
                seen[b] = true;
                v.extend(block_start[b]..block_start[b] + p.block_sizes[b]);
            }
            loop_instrs.push(v);
        }
        let loop_len = loop_instrs.iter().map(|v| v.len() as f64).collect();
        let total = p.sampled_instructions.iter().sum();
        let mut block_sampled = vec![0.0; p.block_sizes.len()];
        for (i, e) in p.sampled_instructions.iter().enumerate() {
            block_sampled[block_of[i]] += e;
        }
        Ok(Prepared {
            p,
            emulation: Emulation::PerLoop,
            skid_spread: 0.0,
            block_start,
            loop_instrs,
            block_of,
            loop_len,
            total,
            block_sampled,
        })
    }

    /// Number of simple loops `L`.
    pub fn loops(&self) -> usize {
        self.loop_instrs.len()
    }

    /// `|E|` (eq. 3 left side).
    pub fn total(&self) -> f64 {
        self.total
    }

    /// Index of the first instruction of block `b`.
    pub fn block_start(&self, b: usize) -> usize {
        self.block_start[b]
    }

    /// `E_i(F)` (eq. 4).
    pub fn executions(&self, f: &[f64]) -> Vec<f64> {
        let mut e = vec![0.0; self.block_of.len()];
        for (l, instrs) in self.loop_instrs.iter().enumerate() {
            for &i in instrs {
                e[i] += f[l];
            }
        }
        e
    }

    /// `c_i = C_i / E_i(F)` (eq. 5); 1 where `E_i(F) = 0`.
    pub fn cpi(&self, f: &[f64]) -> Vec<f64> {
        self.executions(f)
            .iter()
            .zip(&self.p.sampled_cycles)
            .map(|(&e, &c)| if e > 0.0 { c / e } else { 1.0 })
            .collect()
    }

    /// Per-execution skid distribution of each simple loop for CPIs `cpi` (eq. 2, `N_e = 1`).
    /// A simple loop whose CPIs are all zero (no cycle samples at all) keeps the identity
    /// distribution: there is nothing to model.
    pub fn loop_distributions(&self, cpi: &[f64]) -> Vec<Vec<f64>> {
        self.loop_instrs
            .iter()
            .map(|instrs| {
                let c: Vec<f64> = instrs.iter().map(|&i| cpi[i]).collect();
                SkidModel::new(&c)
                    .and_then(|m| m.distribution(self.p.skid))
                    .unwrap_or_else(|_| vec![1.0; instrs.len()])
            })
            .collect()
    }

    /// Expected landings per execution of each simple loop, over all instructions: row `l`
    /// entry `i` is how many of the `|K_l|` overflows of one pass of `K_l` (one per position,
    /// eq. 2 with `N_e = 1`) are attributed to `I_i`.
    pub fn landing_rows(&self, f: &[f64], cpi: &[f64]) -> Vec<Vec<f64>> {
        if self.skid_spread <= 0.0 || self.p.skid <= 0.0 {
            return self.landing_rows_at(self.p.skid, f, cpi);
        }
        // Average over S + spread * (-3/8, -1/8, 1/8, 3/8) (a uniform skid of width
        // `skid_spread`, midpoint rule).
        let mut acc: Option<Vec<Vec<f64>>> = None;
        for q in [-0.375, -0.125, 0.125, 0.375] {
            let s = (self.p.skid + q * self.skid_spread).max(0.0);
            let r = self.landing_rows_at(s, f, cpi);
            acc = Some(match acc {
                None => r,
                Some(mut a) => {
                    for (x, y) in a.iter_mut().zip(&r) {
                        for (u, v) in x.iter_mut().zip(y) {
                            *u += v;
                        }
                    }
                    a
                }
            });
        }
        let mut a = acc.unwrap_or_default();
        for row in &mut a {
            for u in row.iter_mut() {
                *u *= 0.25;
            }
        }
        a
    }

    fn landing_rows_at(&self, s: f64, f: &[f64], cpi: &[f64]) -> Vec<Vec<f64>> {
        let n = self.block_of.len();
        match self.emulation {
            Emulation::PerLoop => self
                .loop_instrs
                .iter()
                .map(|instrs| {
                    let c: Vec<f64> = instrs.iter().map(|&i| cpi[i]).collect();
                    let d = SkidModel::new(&c)
                        .and_then(|m| m.distribution(s))
                        .unwrap_or_else(|_| vec![1.0; instrs.len()]);
                    let mut row = vec![0.0; n];
                    for (pos, &i) in instrs.iter().enumerate() {
                        row[i] += d[pos];
                    }
                    row
                })
                .collect(),
            Emulation::Mixed => self.mixed_rows(s, f, cpi),
        }
    }

    fn mixed_rows(&self, s: f64, f: &[f64], cpi: &[f64]) -> Vec<Vec<f64>> {
        let n = self.block_of.len();
        let totals: Vec<f64> = self
            .loop_instrs
            .iter()
            .map(|ins| ins.iter().map(|&i| cpi[i]).sum())
            .collect();
        let w: Vec<f64> = f
            .iter()
            .zip(&totals)
            .map(|(&x, &t)| if t > 0.0 && x > 0.0 { x } else { 0.0 })
            .collect();
        let wsum: f64 = w.iter().sum();
        if wsum <= 0.0 {
            // Nothing can consume skid: fall back to the per-loop model.
            let mut me = self.clone();
            me.emulation = Emulation::PerLoop;
            return me.landing_rows_at(s, f, cpi);
        }
        let pi: Vec<f64> = w.iter().map(|x| x / wsum).collect();
        let states = (4.0 * s).ceil() as usize + 1;
        let mut memo: Vec<Option<Vec<f64>>> = vec![None; states];
        let mut rows = Vec::with_capacity(self.loop_instrs.len());
        for instrs in &self.loop_instrs {
            let mut row = vec![0.0; n];
            for m in 0..instrs.len() {
                if s <= 0.0 {
                    row[instrs[m]] += 1.0;
                    continue;
                }
                let mut cum = 0.0;
                let mut landed = false;
                for &i in &instrs[m + 1..] {
                    cum += cpi[i];
                    if cum >= s - 1e-9 {
                        row[i] += 1.0;
                        landed = true;
                        break;
                    }
                }
                if !landed {
                    let k = ((s - cum) * 4.0).round().max(1.0) as usize;
                    let v = self.boundary(k, &pi, &totals, cpi, &mut memo);
                    for (r, x) in row.iter_mut().zip(v) {
                        *r += x;
                    }
                }
            }
            rows.push(row);
        }
        rows
    }

    /// Landing distribution of a sample with `k / 4` cycles of skid left at the start of an
    /// iteration (memoised).
    fn boundary<'m>(
        &self,
        k: usize,
        pi: &[f64],
        totals: &[f64],
        cpi: &[f64],
        memo: &'m mut Vec<Option<Vec<f64>>>,
    ) -> &'m [f64] {
        let k = k.min(memo.len() - 1).max(1);
        if memo[k].is_none() {
            let r = k as f64 / 4.0;
            let mut v = vec![0.0; self.block_of.len()];
            for (l, instrs) in self.loop_instrs.iter().enumerate() {
                if pi[l] <= 0.0 {
                    continue;
                }
                if totals[l] >= r - 1e-9 {
                    let mut cum = 0.0;
                    for &i in instrs {
                        cum += cpi[i];
                        if cum >= r - 1e-9 {
                            v[i] += pi[l];
                            break;
                        }
                    }
                } else {
                    let k2 = ((r - totals[l]) * 4.0).round().max(1.0) as usize;
                    let k2 = k2.min(k - 1).max(1);
                    let sub = self.boundary(k2, pi, totals, cpi, memo).to_vec();
                    for (x, y) in v.iter_mut().zip(sub) {
                        *x += pi[l] * y;
                    }
                }
            }
            memo[k] = Some(v);
        }
        memo[k].as_deref().unwrap_or(&[])
    }

    /// `E^_i(F)` (eq. 6, or its [`Emulation::Mixed`] extension).
    pub fn emulate(&self, f: &[f64]) -> Vec<f64> {
        let cpi = self.cpi(f);
        let rows = self.landing_rows(f, &cpi);
        let mut e = vec![0.0; self.block_of.len()];
        for (l, row) in rows.iter().enumerate() {
            if f[l] == 0.0 {
                continue;
            }
            for (x, r) in e.iter_mut().zip(row) {
                *x += f[l] * r;
            }
        }
        e
    }

    /// `phi(F)` (§2.2).
    pub fn phi(&self, f: &[f64]) -> f64 {
        let e = self.emulate(f);
        let mut blocks = vec![0.0; self.block_sampled.len()];
        for (i, x) in e.iter().enumerate() {
            blocks[self.block_of[i]] += x;
        }
        blocks
            .iter()
            .zip(&self.block_sampled)
            .map(|(a, b)| (a - b) * (a - b))
            .sum()
    }

    /// `F` fitted to the raw (skid-affected) profile with no skid model: NNLS of block sums
    /// against block membership, under eq. 3. The common starting point of both solvers.
    pub fn raw_fit(&self) -> Vec<f64> {
        let nb = self.block_sampled.len();
        let ones: Vec<Vec<f64>> = self
            .loop_instrs
            .iter()
            .map(|instrs| {
                let mut col = vec![0.0; nb];
                for &i in instrs {
                    col[self.block_of[i]] += 1.0;
                }
                col
            })
            .collect();
        self.constrained_nnls(&ones)
    }

    /// NNLS of `sum_l F_l col_l ~ block_sampled` with eq. 3 as a weighted row.
    fn constrained_nnls(&self, cols: &[Vec<f64>]) -> Vec<f64> {
        let nb = self.block_sampled.len();
        let l = cols.len();
        // Weight of the eq. 3 row: large against the block rows (whose coefficients are at
        // most a block size) so the total is met to ~1e-6 relative.
        let w = 1e3 * (nb as f64).sqrt();
        let rows = nb + 1;
        let mut a = vec![vec![0.0; l]; rows];
        for (j, col) in cols.iter().enumerate() {
            for b in 0..nb {
                a[b][j] = col[b];
            }
            a[nb][j] = w * self.loop_len[j];
        }
        let mut y = self.block_sampled.clone();
        y.push(w * self.total);
        nnls(&a, &y)
    }
}

/// Options of [`solve_gibbs`] (the choices Algorithm 1 leaves open).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct GibbsOptions {
    /// Seed of the ChaCha8 generator. Default 0.
    pub seed: u64,
    /// Candidate values of `F_l'` per conditional draw: this many evenly over the whole range
    /// allowed by eq. 3, plus as many in a window around the current value that halves each
    /// sweep. Default 24.
    pub grid: usize,
    /// Sweep limit. Default 60.
    pub max_sweeps: usize,
    /// Convergence rule: `phi` is "stable" when its relative change over a sweep is below
    /// this. Default 1e-6.
    pub tolerance: f64,
    /// Stop after this many consecutive stable sweeps. Default 3.
    pub stable_sweeps: usize,
    /// Emulation of eq. 6. Default [`Emulation::PerLoop`] (the paper's).
    pub emulation: Emulation,
    /// See [`Prepared::skid_spread`]. Default 1 cycle.
    pub skid_spread: f64,
}

impl Default for GibbsOptions {
    fn default() -> Self {
        GibbsOptions {
            seed: 0,
            grid: 24,
            max_sweeps: 60,
            tolerance: 1e-6,
            stable_sweeps: 3,
            emulation: Emulation::PerLoop,
            skid_spread: 1.0,
        }
    }
}

/// Algorithm 1 of seed 000 (§2.3): Gibbs sampling over `F`.
///
/// Our reading of what the paper leaves open:
/// * Step 2 "choose a random F": `F` uniform on the simplex of eq. 3 (random weights
///   `u_l ~ U(0,1)`, scaled so that `sum F_l |K_l| = |E|`).
/// * Step 7: given the others, `F_l'` ranges over `[0, (|E| - sum_{l != l', L} F_l |K_l|) /
///   |K_l'|]`, `F_L` absorbing the rest (eq. 3).
/// * Step 8: the conditional distribution is `P(F_l') ∝ exp(-(phi - phi_min) / tau)` over the
///   candidate grid ([`GibbsOptions::grid`]), with temperature `tau = phi(F) * 0.7^sweep`
///   (plus a floor of `1e-12 |E|^2`), so the sampler anneals toward the minimiser.
/// * Steps 13-14 (printed with the test inverted): stop when `phi` has been stable
///   ([`GibbsOptions::tolerance`]) for [`GibbsOptions::stable_sweeps`] sweeps, or after
///   [`GibbsOptions::max_sweeps`]. The best `F` seen is returned.
pub fn solve_gibbs(p: &LoopProblem, opts: &GibbsOptions) -> Result<LoopSolution, SkidError> {
    let mut pr = Prepared::new(p)?;
    pr.emulation = opts.emulation;
    pr.skid_spread = opts.skid_spread;
    let l = pr.loops();
    let start = pr.raw_fit();
    let phi_start = pr.phi(&start);
    let mut rng = ChaCha8Rng::seed_from_u64(opts.seed);
    let mut f: Vec<f64> = if l == 1 {
        vec![pr.total / pr.loop_len[0]]
    } else {
        let u: Vec<f64> = (0..l).map(|_| rng.gen_range(0.0..1.0)).collect();
        let s: f64 = u.iter().zip(&pr.loop_len).map(|(a, b)| a * b).sum();
        u.iter()
            .map(|x| x * pr.total / s.max(f64::MIN_POSITIVE))
            .collect()
    };
    let mut phi = pr.phi(&f);
    let mut best = (phi, f.clone());
    let floor = 1e-12 * pr.total * pr.total;
    let mut stable = 0;
    let mut sweeps = 0;
    let mut converged = l == 1;
    let grid = opts.grid.max(2);
    while !converged && sweeps < opts.max_sweeps {
        let phi_before = phi;
        let tau = phi * 0.7f64.powi(sweeps as i32) + floor;
        let window = 0.5f64.powi(sweeps as i32 + 1);
        for lp in 0..l - 1 {
            let last = l - 1;
            let rest: f64 = (0..l)
                .filter(|&j| j != lp && j != last)
                .map(|j| f[j] * pr.loop_len[j])
                .sum();
            let room = (pr.total - rest).max(0.0);
            let hi = room / pr.loop_len[lp];
            let mut cands: Vec<f64> = (0..grid)
                .map(|k| hi * k as f64 / (grid - 1) as f64)
                .collect();
            let w = hi * window;
            let lo_w = (f[lp] - w).max(0.0);
            let hi_w = (f[lp] + w).min(hi);
            cands.extend((0..grid).map(|k| lo_w + (hi_w - lo_w) * k as f64 / (grid - 1) as f64));
            cands.push(f[lp].min(hi));
            let mut phis = Vec::with_capacity(cands.len());
            for &c in &cands {
                let mut g = f.clone();
                g[lp] = c;
                g[last] = ((room - c * pr.loop_len[lp]) / pr.loop_len[last]).max(0.0);
                phis.push(pr.phi(&g));
            }
            let min = phis.iter().cloned().fold(f64::INFINITY, f64::min);
            let weights: Vec<f64> = phis.iter().map(|x| (-(x - min) / tau).exp()).collect();
            let sum: f64 = weights.iter().sum();
            let mut r = rng.gen_range(0.0..sum);
            let mut pick = weights.len() - 1;
            for (k, w) in weights.iter().enumerate() {
                if r < *w {
                    pick = k;
                    break;
                }
                r -= w;
            }
            f[lp] = cands[pick];
            f[last] = ((room - f[lp] * pr.loop_len[lp]) / pr.loop_len[last]).max(0.0);
            phi = phis[pick];
            if phi < best.0 {
                best = (phi, f.clone());
            }
        }
        sweeps += 1;
        let rel = (phi_before - phi).abs() / phi_before.max(floor);
        if rel < opts.tolerance {
            stable += 1;
            if stable >= opts.stable_sweeps {
                converged = true;
            }
        } else {
            stable = 0;
        }
        if best.0 <= floor {
            converged = true;
        }
    }
    let f = best.1;
    Ok(finish(
        &pr,
        f,
        phi_start,
        sweeps,
        converged,
        Solver::Gibbs,
        Some(opts.seed),
    ))
}

/// Options of [`solve_lsq`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct LsqOptions {
    /// Outer-iteration limit. Default 100.
    pub max_iterations: usize,
    /// Stop when no `F_l` moves by more than this fraction of `max F`. Default 1e-6.
    pub tolerance: f64,
    /// Emulation of eq. 6. Default [`Emulation::Mixed`].
    pub emulation: Emulation,
    /// See [`Prepared::skid_spread`]. Default 1 cycle.
    pub skid_spread: f64,
}

impl Default for LsqOptions {
    fn default() -> Self {
        LsqOptions {
            max_iterations: 100,
            tolerance: 1e-6,
            emulation: Emulation::Mixed,
            skid_spread: 1.0,
        }
    }
}

/// Number of "80% on one simple loop" starts of [`solve_lsq`].
pub const LSQ_EXTRA_STARTS: usize = 4;

/// Alternating NNLS (see the module doc): from a start `F`, repeat `c <- eq. 5(F)`,
/// `F <- argmin_{F >= 0} phi_c(F)` (linear in `F` for fixed `c` and fixed interleaving
/// probabilities, eq. 3 as a weighted row) until `F` is stable; a step that raises `phi` is
/// halved (at most 30 times) toward the previous `F`. The alternation can stop at a
/// self-consistent wrong `F` (CPIs computed from a wrong `F` that reproduce it), so it runs
/// from several starts — the raw fit, equal frequencies, and for the [`LSQ_EXTRA_STARTS`]
/// simple loops with the smallest raw-fit share a start with 80% of the instructions on
/// it — and keeps the lowest `phi`. Deterministic.
pub fn solve_lsq(p: &LoopProblem, opts: &LsqOptions) -> Result<LoopSolution, SkidError> {
    let mut pr = Prepared::new(p)?;
    pr.emulation = opts.emulation;
    pr.skid_spread = opts.skid_spread;
    let l = pr.loops();
    let raw = pr.raw_fit();
    let phi_start = pr.phi(&raw);
    let sum_len: f64 = pr.loop_len.iter().sum();
    // Extra starts push weight onto the simple loops the raw fit starves (at most
    // `LSQ_EXTRA_STARTS` of them, smallest raw share first).
    let mut order: Vec<usize> = (0..l).collect();
    order.sort_by(|&x, &y| (raw[x] * pr.loop_len[x]).total_cmp(&(raw[y] * pr.loop_len[y])));
    let mut starts = vec![raw];
    if l > 1 {
        starts.push(vec![pr.total / sum_len; l]);
        for &k in order.iter().take(LSQ_EXTRA_STARTS) {
            // Weights 0.2/L everywhere plus 0.8 on loop k, as shares of the instructions.
            let f: Vec<f64> = (0..l)
                .map(|j| {
                    let share = 0.2 / l as f64 + if j == k { 0.8 } else { 0.0 };
                    share * pr.total / pr.loop_len[j]
                })
                .collect();
            starts.push(f);
        }
    }
    let mut best: Option<(f64, Vec<f64>, bool)> = None;
    let mut iterations = 0;
    for f0 in starts {
        let (f, phi, it, conv) = alternate(&pr, f0, opts);
        iterations += it;
        if best.as_ref().is_none_or(|b| phi < b.0) {
            best = Some((phi, f, conv));
        }
    }
    let (_, f, converged) = best.unwrap_or((0.0, vec![0.0; l], false));
    Ok(finish(
        &pr,
        f,
        phi_start,
        iterations,
        converged,
        Solver::Lsq,
        None,
    ))
}

fn alternate(
    pr: &Prepared<'_>,
    mut f: Vec<f64>,
    opts: &LsqOptions,
) -> (Vec<f64>, f64, usize, bool) {
    let nb = pr.p.block_sizes.len();
    let mut phi = pr.phi(&f);
    let mut it = 0;
    let mut converged = false;
    while it < opts.max_iterations {
        it += 1;
        let cpi = pr.cpi(&f);
        let rows = pr.landing_rows(&f, &cpi);
        let cols: Vec<Vec<f64>> = rows
            .iter()
            .map(|row| {
                let mut col = vec![0.0; nb];
                for (i, x) in row.iter().enumerate() {
                    col[pr.block_of[i]] += x;
                }
                col
            })
            .collect();
        let mut next = pr.constrained_nnls(&cols);
        let mut phi_next = pr.phi(&next);
        let mut halvings = 0;
        while phi_next > phi && halvings < 30 {
            for (n, o) in next.iter_mut().zip(&f) {
                *n = 0.5 * (*n + o);
            }
            phi_next = pr.phi(&next);
            halvings += 1;
        }
        let scale = f.iter().cloned().fold(0.0, f64::max).max(f64::MIN_POSITIVE);
        let moved = next
            .iter()
            .zip(&f)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f64::max);
        if phi_next <= phi {
            f = next;
            phi = phi_next;
        }
        if moved <= opts.tolerance * scale || halvings >= 30 {
            converged = true;
            break;
        }
    }
    (f, phi, it, converged)
}

fn finish(
    pr: &Prepared<'_>,
    f: Vec<f64>,
    phi_start: f64,
    iterations: usize,
    converged: bool,
    solver: Solver,
    seed: Option<u64>,
) -> LoopSolution {
    LoopSolution {
        instructions: pr.executions(&f),
        cpi: pr.cpi(&f),
        phi: pr.phi(&f),
        frequencies: f,
        phi_start,
        iterations,
        converged,
        solver,
        seed,
    }
}

/// Solves with the chosen solver and emulation, other options at their defaults (Gibbs
/// seeded with `seed`).
pub fn solve(
    p: &LoopProblem,
    solver: Solver,
    emulation: Emulation,
    seed: u64,
) -> Result<LoopSolution, SkidError> {
    match solver {
        Solver::Gibbs => solve_gibbs(
            p,
            &GibbsOptions {
                seed,
                emulation,
                ..GibbsOptions::default()
            },
        ),
        Solver::Lsq => solve_lsq(
            p,
            &LsqOptions {
                emulation,
                ..LsqOptions::default()
            },
        ),
    }
}

pub use crate::nnls::nnls;

/// A loop problem built from a function's CFG, with the addresses of its instructions.
#[derive(Debug, Clone, PartialEq)]
pub struct CfgLoopProblem {
    /// The problem.
    pub problem: LoopProblem,
    /// Address of each instruction of `problem`, block by block.
    pub addresses: Vec<Svma>,
    /// The CFG blocks, in problem order.
    pub blocks: Vec<BlockId>,
}

/// Builds the problem of one natural loop from its CFG, its simple loops (elementary cycles
/// through the header, e.g. from `proftrust_binary::simple_loops`) and per-address sampled
/// instruction / cycle estimates (samples x period).
pub fn problem_from_cfg(
    cfg: &Cfg,
    lp: &Loop,
    simple: &[SimpleLoop],
    skid: f64,
    instructions: impl Fn(Svma) -> f64,
    cycles: impl Fn(Svma) -> f64,
) -> Result<CfgLoopProblem, SkidError> {
    let blocks: Vec<BlockId> = lp.blocks.clone();
    let index_of = |b: BlockId| blocks.iter().position(|&x| x == b);
    let mut block_sizes = Vec::new();
    let mut addresses = Vec::new();
    for &b in &blocks {
        let bb = cfg
            .blocks
            .get(b.0 as usize)
            .ok_or_else(|| SkidError::InvalidProblem {
                what: format!(
                    "loop at block {} of {} names block {}, not in the CFG",
                    lp.header.0, cfg.function, b.0
                ),
            })?;
        block_sizes.push(bb.instructions.len());
        addresses.extend(bb.instructions.iter().copied());
    }
    let mut simple_loops = Vec::new();
    for (k, s) in simple.iter().enumerate() {
        let v: Option<Vec<usize>> = s.blocks.iter().map(|&b| index_of(b)).collect();
        simple_loops.push(v.ok_or_else(|| SkidError::InvalidProblem {
            what: format!(
                "simple loop {k} of {} leaves the natural loop at block {}",
                cfg.function, lp.header.0
            ),
        })?);
    }
    let problem = LoopProblem {
        block_sizes,
        simple_loops,
        sampled_instructions: addresses.iter().map(|&a| instructions(a)).collect(),
        sampled_cycles: addresses.iter().map(|&a| cycles(a)).collect(),
        skid,
    };
    Ok(CfgLoopProblem {
        problem,
        addresses,
        blocks,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// hmmer-like loop (seed 000 Fig. 1): A (3 instrs) -> B (4 instrs, one heavy) -> C
    /// (2 instrs) -> A, and A -> C -> A. The "sampled" profile is produced by the skid model
    /// itself from known F and CPIs, so both solvers must find F again.
    fn synthetic(f_true: &[f64], skid: f64) -> (LoopProblem, Vec<f64>) {
        let cpi_true = [1.0, 1.0, 1.0, 1.0, 150.0, 1.0, 1.0, 2.0, 1.0];
        let block_sizes = vec![3, 4, 2];
        let simple_loops = vec![vec![0, 1, 2], vec![0, 2]];
        let mut p = LoopProblem {
            block_sizes,
            simple_loops,
            sampled_instructions: vec![0.0; 9],
            sampled_cycles: vec![0.0; 9],
            skid,
        };
        let pr = Prepared::new(&p).unwrap();
        let e_true = pr.executions(f_true);
        let cycles: Vec<f64> = e_true.iter().zip(&cpi_true).map(|(e, c)| e * c).collect();
        p.sampled_cycles = cycles;
        let pr = Prepared::new(&p).unwrap();
        let sampled = pr.emulate(f_true);
        p.sampled_instructions = sampled;
        (p, e_true)
    }

    #[test]
    fn model_quantities_by_hand() {
        // F = (10, 30): E = 40 for A and C, 10 for B. |E| = 10*9 + 30*5 = 240.
        let (p, e) = synthetic(&[10.0, 30.0], 20.0);
        assert_eq!(
            e,
            vec![40.0, 40.0, 40.0, 10.0, 10.0, 10.0, 10.0, 40.0, 40.0]
        );
        let pr = Prepared::new(&p).unwrap();
        assert!((pr.total() - 240.0).abs() < 1e-9);
        let cpi = pr.cpi(&[10.0, 30.0]);
        assert!((cpi[4] - 150.0).abs() < 1e-9);
        let d = pr.loop_distributions(&cpi);
        // Loop 2 (A, C) has no heavy instruction; its distribution keeps one sample per position
        // in total.
        assert_eq!(d[1].iter().sum::<f64>(), 5.0);
        // Loop 1 (A, B, C; CPIs 1,1,1,1,150,1,1,2,1): its light instructions sum to 9 cycles < S
        // = 20, so from every overflow position the 20 cycles run into the heavy load at
        // position 4: all 9 samples of a pass land there.
        assert_eq!(d[0][4], 9.0);
        assert!(pr.phi(&[10.0, 30.0]) < 1e-9);
    }

    #[test]
    fn solvers_recover_frequencies() {
        for (f_true, skid) in [
            ([10.0, 30.0], 20.0),
            ([500.0, 120.0], 45.0),
            ([7.0, 0.0], 12.0),
        ] {
            let (p, e_true) = synthetic(&f_true, skid);
            // The data come from the per-loop model, so both solvers use it.
            let lo = LsqOptions {
                emulation: Emulation::PerLoop,
                skid_spread: 0.0,
                ..LsqOptions::default()
            };
            let go = GibbsOptions {
                skid_spread: 0.0,
                ..GibbsOptions::default()
            };
            for sol in [solve_lsq(&p, &lo).unwrap(), solve_gibbs(&p, &go).unwrap()] {
                let err: f64 = sol
                    .instructions
                    .iter()
                    .zip(&e_true)
                    .map(|(a, b)| (a - b).abs())
                    .sum::<f64>()
                    / e_true.iter().sum::<f64>();
                assert!(
                    err < 0.01,
                    "{:?} F_true={f_true:?} S={skid}: got F={:?} err={err}",
                    sol.solver,
                    sol.frequencies
                );
                assert!(sol.phi <= sol.phi_start + 1e-9);
            }
        }
    }

    /// Mixed emulation by hand: blocks x (CPI 1) and h (CPI 10); K1 = (x, h), K2 = (x);
    /// F = (1, 1) so pi = (1/2, 1/2); S = 2.
    /// boundary(1): K1 lands on x (1 >= 1), K2 lands on x -> x: 1.
    /// boundary(2): K1: x (1), h (11 >= 2) -> h: 1/2; K2: total 1 < 2, 1 cycle left ->
    ///   boundary(1) -> x: 1/2.
    /// Row K1: overflow at x lands on h (10 >= 2); at h the pass ends with 2 left ->
    ///   boundary(2). Row K1 = (x 1/2, h 3/2). Row K2: overflow at x -> boundary(2) =
    ///   (x 1/2, h 1/2). E^ = (1, 2).
    #[test]
    fn mixed_emulation_by_hand() {
        let p = LoopProblem {
            block_sizes: vec![1, 1],
            simple_loops: vec![vec![0, 1], vec![0]],
            sampled_instructions: vec![1.0, 2.0],
            sampled_cycles: vec![2.0, 10.0],
            skid: 2.0,
        };
        let mut pr = Prepared::new(&p).unwrap();
        pr.emulation = Emulation::Mixed;
        let cpi = pr.cpi(&[1.0, 1.0]);
        assert_eq!(cpi, vec![1.0, 10.0]);
        let rows = pr.landing_rows(&[1.0, 1.0], &cpi);
        assert_eq!(rows, vec![vec![0.5, 1.5], vec![0.5, 0.5]]);
        assert_eq!(pr.emulate(&[1.0, 1.0]), vec![1.0, 2.0]);
        assert!(pr.phi(&[1.0, 1.0]) < 1e-12);
        // The per-loop model (eq. 6 as printed): K1 alone repeats (x, h): from x the skid
        // lands on h (10 >= 2); from h, x (1) then h (11 >= 2) -> h: row (0, 2). K2 alone
        // repeats x: x (1), x (2 >= 2) -> x: row (1, 0). Here too E^ = (1, 2).
        pr.emulation = Emulation::PerLoop;
        assert_eq!(pr.emulate(&[1.0, 1.0]), vec![1.0, 2.0]);
    }

    #[test]
    fn gibbs_is_reproducible() {
        let (p, _) = synthetic(&[10.0, 30.0], 20.0);
        let a = solve_gibbs(&p, &GibbsOptions::default()).unwrap();
        let b = solve_gibbs(&p, &GibbsOptions::default()).unwrap();
        assert_eq!(a.frequencies, b.frequencies);
        assert_eq!(a.seed, Some(0));
    }

    #[test]
    fn rejects_bad_problems() {
        let mut p = synthetic(&[1.0, 1.0], 5.0).0;
        p.simple_loops.push(vec![0, 0]);
        assert!(Prepared::new(&p).is_err());
        p.simple_loops.pop();
        p.simple_loops.push(vec![7]);
        assert!(Prepared::new(&p).is_err());
        p.simple_loops.pop();
        p.sampled_cycles.pop();
        assert!(Prepared::new(&p).is_err());
    }
}
