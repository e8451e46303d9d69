//! Sampling theory of seed 002 (Wen et al., "Probability Analysis to Improve the Confidence in
//! Profiling Accuracy"), executable: running states, the sampler, the piecewise binomial
//! model, and named experiments.
//!
//! * [`Scenario`] / [`Timeline`] — running states as runs of tasks (§4).
//! * [`SamplerOptions`], [`profile_once`], [`repeat`] — the sampler: interval `T`, start `t0`
//!   (eq. 2), jitter (seed 001 §4), event-unit noise (eq. 10); repeated profiling.
//! * [`piecewise_binomial`], [`timeline_moments`] — eqs. 1-9; [`noise_inflation`],
//!   [`widen_interval`] — the error bar of a non-base event (eq. 10).
//! * [`run_preset`], [`render_text`] — Tables 2-6, aliasing, fragmentation, Wilson coverage,
//!   and the model beside the simulation for any `R` (`sweep`).

mod model;
mod presets;
mod sampler;
mod timeline;

pub use model::{
    frac, noise_inflation, piecewise_binomial, rate, sample_moments, timeline_moments,
    widen_interval, ShareMoments,
};
pub use presets::{
    estimated_memory, is_unbiased, render_text, run_preset, Preset, PresetOptions, PresetReport,
    Row, DEFAULT_SWEEP_R,
};
pub use sampler::{
    mean_sd, profile_from_table, profile_once, repeat, run_capture_moments, IntervalJitter,
    Profile, Repeated, SamplerOptions, Start, StartTable,
};
pub use timeline::{Granularity, RunIndex, Scenario, TaskSpec, Timeline};
