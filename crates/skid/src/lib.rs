//! # proftrust-skid
//!
//! Counter skid (seed 000): why instruction samples leave heavy instructions for their light
//! neighbours, and how to undo it.
//!
//! * [`model`] — skid length `g(S, m, c)` (eq. 1) and the sampled distribution `D(S, c)`
//!   (eq. 2) on one simple loop, in closed form and by cycle-by-cycle emulation.
//! * [`correct`] — per loop: simple-loop frequencies `F` under eq. 3, CPIs by eq. 5, skid
//!   emulation by eq. 6, objective `phi(F)`; solved by the Gibbs sampler of Algorithm 1
//!   ([`correct::solve_gibbs`]) or by alternating NNLS ([`correct::solve_lsq`]).
//! * [`flow`] — the whole program at once (our extension of seed 000 §2): edge flows of
//!   every modelled function and black box under flow conservation, skid emulated across
//!   calls; split into types, layout, emulator, objective, start, lm, search and solve.
//! * [`program`] — [`program::correct_profile`], the entry point `correct` and `audit` use:
//!   a `SampledProfile` and the binaries in, corrected estimates per instruction out (flow
//!   solver, or the loop solvers on each hot loop).
//! * [`nnls`] — non-negative least squares (Lawson-Hanson) for the solvers.
//! * [`calibrate`] — fit `S` from a kernel with known CPIs.
//!
//! No I/O, no processes: callers bring sampled estimates and CFGs (see `proftrust-binary`)
//! and get numbers back. The virtual PMU that produces skid-affected profiles without a
//! hardware PMU lives in `proftrust-vpmu`.
//!
//! The model and its inverse in a few lines: the distribution `D(S, c)` of instruction
//! samples on the calibration kernel (one 200-cycle load, 100 one-cycle instructions) under a
//! skid of 37 cycles (seed 000 eq. 2), and the calibration fit that recovers the skid from it:
//!
//! ```
//! use proftrust_skid::calibrate::{fit_skid, kernel_cpi};
//! use proftrust_skid::model::distribution;
//!
//! let cpi = kernel_cpi(200, 100);
//! let d = distribution(37.0, &cpi)?;
//! let observed: Vec<f64> = d.iter().map(|p| p * 10_000.0).collect();
//! let fit = fit_skid(&cpi, &observed, cpi.iter().sum(), 1.0)?;
//! assert!(fit.skid <= 37.0 && 37.0 <= fit.skid_high, "{fit:?}");
//! # Ok::<(), proftrust_skid::SkidError>(())
//! ```
#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod calibrate;
pub mod correct;
mod error;
pub mod flow;
pub mod model;
pub mod nnls;
pub mod program;

pub use error::SkidError;
