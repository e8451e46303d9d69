//! The flow problem's public types: the program as a graph of functions, blocks and black
//! boxes ([`FlowGraph`]), the solver's options ([`FlowOptions`]) and its result ([`FlowSolution`]).

use serde::{Deserialize, Serialize};

/// Where a call or a tail call goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Callee {
    /// A modelled function (index into [`FlowGraph::functions`]).
    Function(usize),
    /// A black box (index into [`FlowGraph::boxes`]).
    Box(usize),
    /// Code outside the model; a call to it takes no time in the emulation.
    Unknown,
    /// An indirect call (through a function pointer, a virtual call): in the emulation it
    /// enters one of the functions called from outside the model (those with an unknown
    /// count of external calls `s_g`), with probability `s_g / sum s`; walks that return
    /// from such a function continue after the indirect call sites, in proportion to their
    /// counts.
    Indirect,
}

/// A successor of a block (one flow unknown each).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Successor {
    /// A block of the same function.
    Block(usize),
    /// Return from the function.
    Return,
    /// Jump to the entry of another function (tail call); it returns for us.
    TailCall(Callee),
    /// Leaves the model (unknown indirect jump, trap, no-return call, jump into the middle
    /// of other code).
    Leave,
}

/// A basic block of a [`FlowFunction`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlowBlock {
    /// `E_i` per instruction (samples x period), in order.
    pub sampled_instructions: Vec<f64>,
    /// `C_i` per instruction (samples x period), in order.
    pub sampled_cycles: Vec<f64>,
    /// Calls made by the block: (instruction index of the call, callee), by index.
    pub calls: Vec<(usize, Callee)>,
    /// Successors; a block without any gets one [`Successor::Leave`].
    pub successors: Vec<Successor>,
}

/// A modelled function: its blocks, block 0 being the entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlowFunction {
    /// Name, for messages.
    pub name: String,
    /// Blocks; block 0 is the entry.
    pub blocks: Vec<FlowBlock>,
    /// Whether the function may be called from outside the model (gets an unknown `s_g`).
    /// Functions without any caller in the model get one regardless.
    pub external_callers: bool,
    /// Natural loops, each as the indices of its blocks (directions of the global search,
    /// [`FlowOptions::global_sweeps`]). May be empty.
    #[serde(default)]
    pub loops: Vec<Vec<usize>>,
}

/// Code without a CFG in the model, reached by calls (e.g. a shared library through PLT
/// stubs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BlackBox {
    /// Name, for messages.
    pub name: String,
    /// `sum E_i` over its instructions.
    pub sampled_instructions: f64,
    /// `sum C_i` over its instructions.
    pub sampled_cycles: f64,
}

/// The program to correct.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FlowGraph {
    /// Modelled functions.
    pub functions: Vec<FlowFunction>,
    /// Black boxes.
    pub boxes: Vec<BlackBox>,
    /// Mean period of one cycle sample (cycles), for the noise allowance of the IPC bound
    /// ([`FlowOptions::max_ipc`]); 0 = unknown, no bound.
    pub cycle_period: f64,
}

/// Options of [`solve_flow`](super::solve_flow).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct FlowOptions {
    /// Iterations of the alternating linear solver (see the module doc) per stage. It is
    /// cheap but goes for the nearest self-consistent fit, often a wrong one. Default 0
    /// (Levenberg–Marquardt only).
    pub max_iterations: usize,
    /// Stop when no flow moves by more than this fraction of the largest. Default 1e-4.
    pub tolerance: f64,
    /// Width in cycles of the uniform skid spread the emulation averages over (4 points);
    /// see [`crate::correct::Prepared::skid_spread`]. Default 1.
    pub skid_spread: f64,
    /// Rounding of the remaining skid at block boundaries, in cycles. Default 0.25.
    pub quantum: f64,
    /// Weight of the conservation rows relative to the block rows, per instruction of the
    /// mean block. Default 100.
    pub conservation_weight: f64,
    /// Weight of the eq. 3 total row. Default 100.
    pub total_weight: f64,
    /// Levenberg–Marquardt iterations after the alternation (0 = alternation only).
    /// Default 30.
    pub lm_iterations: usize,
    /// LM runs only when the problem has at most this many unknowns (each iteration costs
    /// one emulation per unknown). Default 600.
    pub lm_max_unknowns: usize,
    /// Relative forward-difference step of the LM Jacobian. Default 0.02.
    pub jacobian_step: f64,
    /// LM: recompute the Jacobian by finite differences every this many iterations (in
    /// between, Broyden updates); 0 = only when a step fails. Default 1 (always).
    pub jacobian_refresh: usize,
    /// Graduated smoothing: the first stage averages the emulation over a skid spread of
    /// this fraction of `S`; each next stage halves the spread, down to
    /// [`FlowOptions::skid_spread`]. With a sharp spread `phi` is a golf course (a narrow
    /// well at the solution in a rugged plateau, as the skid's landing jumps when a block's
    /// time crosses a cycle boundary); a wide spread smooths it. 0 = one stage. Default 0.5.
    pub smoothing_start: f64,
    /// Most skid values a spread is averaged over (2 per cycle of spread, at least 4).
    /// Default 16.
    pub max_skid_points: usize,
    /// Factor between the spreads of consecutive smoothing stages. Default 0.5.
    pub smoothing_step: f64,
    /// The last smoothing stage uses a spread of `max(skid_spread, smoothing_end * S)`.
    /// Whatever the last stage, the answer is the stage solution with the lowest `phi` at
    /// [`FlowOptions::skid_spread`]. Default 0 (stages down to `skid_spread`).
    pub smoothing_end: f64,
    /// Sweeps of the global search at the first smoothing stage (see `global_search` in the
    /// source: loop trip counts and black-box sizes on a grid of factors). 0 = none.
    /// Default 3.
    pub global_sweeps: usize,
    /// Weight of the sites outside a direction of the global search. Default 0.1.
    pub global_soft_weight: f64,
    /// Largest IPC a block can have: with the block's cycle estimate `C_b` (and a Poisson
    /// allowance for the sampling noise), `x_b <= max_ipc * C_b^upper / |B_b|`. Rules out
    /// flows that put many executions on blocks the cycle samples say take no time (a
    /// degenerate fit the instruction samples alone cannot exclude when skid empties those
    /// blocks). 0 = no bound. Default 4 (retirement width of common x86-64 cores).
    pub max_ipc: f64,
    /// Compare per instruction instead of per block (`phi` as seed 000 defines it sums
    /// over blocks). Default false.
    pub instruction_sites: bool,
}

impl Default for FlowOptions {
    fn default() -> Self {
        FlowOptions {
            max_iterations: 0,
            tolerance: 1e-4,
            skid_spread: 1.0,
            quantum: 0.25,
            conservation_weight: 100.0,
            total_weight: 100.0,
            lm_iterations: 30,
            lm_max_unknowns: 600,
            jacobian_step: 0.02,
            jacobian_refresh: 1,
            instruction_sites: false,
            max_ipc: 4.0,
            smoothing_start: 0.5,
            global_sweeps: 3,
            global_soft_weight: 0.1,
            smoothing_end: 0.0,
            smoothing_step: 0.5,
            max_skid_points: 16,
        }
    }
}

/// The corrected program.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlowSolution {
    /// Corrected `x_b` per function, per block.
    pub block_counts: Vec<Vec<f64>>,
    /// Corrected `f_e` per function, per block, per successor (an added `Leave` included).
    pub edge_flows: Vec<Vec<Vec<f64>>>,
    /// `s_g` per function (0 for functions without one).
    pub external_calls: Vec<f64>,
    /// Corrected `Y_X` per black box.
    pub box_counts: Vec<f64>,
    /// `phi` at the solution.
    pub phi: f64,
    /// `phi` of the raw fit (the start).
    pub phi_start: f64,
    /// Outer iterations run.
    pub iterations: usize,
    /// Whether the convergence rule was met.
    pub converged: bool,
    /// Largest relative violation of flow conservation at the solution (over blocks with
    /// a count > 0).
    pub max_conservation_error: f64,
}
