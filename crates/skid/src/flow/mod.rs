//! Whole-program skid correction as a flow problem (our extension of seed 000 §2).
//!
//! Seed 000 corrects one loop at a time with its simple loops. Skid does not stop at a loop's
//! border: samples skid from an outer loop's code into the heavy load of the inner loop
//! (soplex at long skids), out of a called function into its caller (libsvm: `dot`, libm
//! `exp`), and out of straight-line code into whatever follows. This module corrects every
//! modelled function of a program at once.
//!
//! # Unknowns and constraints (LLVM profile inference's flow view)
//!
//! The program is a set of functions, each a CFG of basic blocks `B_b` with `|B_b|`
//! instructions; calls inside a block go to another modelled function, to a *black box*
//! (code whose CFG we do not have, e.g. a shared library reached through a PLT stub), or to
//! unknown code. The unknowns are
//!
//! * `f_e >= 0`: the execution count of every CFG edge `e` (edges that leave a function —
//!   returns, tail calls, unknown jumps — included). The count of a block is `x_b = sum_{e
//!   out of b} f_e`.
//! * `s_g >= 0`: calls into function `g` from outside the model (only for functions that
//!   have callers outside it, e.g. `main`).
//! * `Y_X >= 0`: the instructions executed in black box `X`.
//!
//! Flow conservation (the constraint LLVM's profile inference enforces) holds at every
//! block: `sum_{e into b} f_e + [b = entry of g] (sum_{call sites k of g} x_{b_k} + sum_{tail
//! calls t of g} f_t + s_g) = x_b`. Calls are the interprocedural edges: a function is
//! entered as often as its call sites execute. The total of eq. 3 becomes `sum_b x_b |B_b| +
//! sum_X Y_X = sum_i E_i` over the modelled code (the total is not biased by skid, §2.1).
//! Any `f >= 0` that satisfies these is a valid execution profile, as any `F >= 0` is for
//! the simple loops of one loop (each simple loop is a circulation; the simple-loop
//! decomposition is the special case of one loop without calls).
//!
//! # Emulation (eq. 6, generalised)
//!
//! Eq. 5 gives the CPIs: `c_i = C_i / x_b` for `I_i` in `B_b`. Eq. 6 emulates the skid on each
//! simple loop repeated on its own. Here a sample that overflowed at `I_m` walks forward `S`
//! cycles through the program, as the range before eq. 1 says (`sum_{n=m+1}^{m'-1} c_n < S
//! <= sum_{n=m+1}^{m'} c_n`), but along a random path: at the end of a block it takes edge
//! `e` with probability `f_e / x_b` (a Markov chain on blocks whose edge frequencies are
//! `f`, the same independence assumption as the `mixed` loop emulation); at a call it enters
//! the callee and, when the callee returns, continues after the call (the walk keeps its
//! calling context); a walk that returns from the function it started in continues at one
//! of the function's call sites, chosen with probability proportional to the site's call
//! count. A black box `X` is a sequence of instructions with `tau_X = C_X / calls_X` cycles
//! per call (its sampled cycles over its calls): a walk entering it with `r` cycles left
//! lands in it when `r <= tau_X`, else leaves it with `r - tau_X`; a sample that overflowed
//! inside it (at a uniformly random point of a call) has `u tau_X`, `u ~ U(0,1)`, cycles
//! left in it. Walks that leave the model (an unknown jump, a return to an unmodelled
//! caller) are lost, as the samples they stand for land outside the modelled code.
//!
//! The expected number of samples landing on block `b'` (per unit of the period) is then
//! `E^_{b'}(f) = sum_b x_b L_b(b') + sum_X Y_X L_X(b')`, where `L_b(b')` is the expected
//! number of the `|B_b|` overflows of one execution of `b` (one per instruction, eq. 2 with
//! `N_e = 1`) that land on `b'`. The objective is seed 000's `phi` at block level (black
//! boxes are sites too): `phi(f) = sum_{b'} (sum_{i in B_b'} E_i - E^_{b'}(f))^2`.
//!
//! The remaining skid at a block boundary is rounded to [`FlowOptions::quantum`] cycles so
//! walks from a block start are memoised per `(block, remaining skid)`; the emulation
//! averages over a uniform spread of the skid (4 points) as the loop solvers do.
//!
//! # Solver
//!
//! `phi` over the flows is a golf course: the landing of a sample jumps when a block's time
//! crosses a cycle boundary, so the well around the truth is a few percent wide and the
//! rest is a rugged plateau with local minima (the linear alternation of
//! [`crate::correct::solve_lsq`] — "CPIs and edge probabilities from `f`, NNLS for `f`" —
//! stops at self-consistent wrong fits here; it is available, off by default). What
//! [`solve_flow`] does:
//!
//! 1. **Graduated smoothing.** The emulation averages over a uniform spread of skids. A
//!    wide spread makes `phi` smooth with its minimum near the truth; stages use spreads
//!    `S * smoothing_start`, halved each stage down to [`FlowOptions::skid_spread`], each
//!    from the previous stage's solution.
//! 2. **Levenberg–Marquardt** on the non-linear `phi` in each stage: forward-difference
//!    Jacobian, damped NNLS step ([`crate::nnls`]) with conservation, eq. 3 and the IPC
//!    bounds as weighted rows (`levenberg_marquardt` in the source).
//! 3. **Global search** at the widest stage (our stand-in for the exploration of Algorithm
//!    1's Gibbs sampler) and a fine one at the sharpest (`global_search` in the source).
//! 4. Two candidates (with and without the search) through all stages; every stage's
//!    solution is scored by `phi` at the base spread and the lowest wins.
//!
//! # Files
//!
//! `types.rs` (the public graph, options and solution), `layout.rs` (the indexed program:
//! global blocks, flow variables, sites, conservation rows), `emulator.rs` (the memoised skid
//! walks), `objective.rs` (landing columns, `phi`, the NNLS fits), `start.rs` (start flows
//! from counts), `lm.rs` (Levenberg–Marquardt), `search.rs` (the global search), `solve.rs`
//! (the staged driver and the forward model), `tests.rs` (hand-computed emulations and the
//! solvers on tiny graphs).

mod emulator;
mod layout;
mod lm;
mod objective;
mod search;
mod solve;
mod start;
#[cfg(test)]
mod tests;
mod types;

use emulator::*;
use layout::*;
use lm::*;
use objective::*;
use search::*;
use start::*;

pub use solve::{emulate_flow, solve_flow, solve_flow_from};
pub use start::{sites_at, FlowStart};
pub use types::*;
