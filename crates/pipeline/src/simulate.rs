//! `simulate sampling`: seed 002's running-state simulation of sampling (Tables 2-6,
//! aliasing, self-time fragmentation, Wilson-interval coverage, the analytic model beside
//! the simulation for any `R`), run by `proftrust_sim`.

use crate::error::{bail_options, Context, Result};
use crate::Events;
pub use proftrust_report::simulate::SimulationReport;
pub use proftrust_sim::sampling::Preset;
use proftrust_sim::sampling::{run_preset, PresetOptions, DEFAULT_SWEEP_R};

/// Settings of [`execute`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct SimulateOptions {
    /// Which experiment. Default [`Preset::Table2`].
    pub preset: Preset,
    /// Repetitions of the profiling per cell. Default 1000 (seed 002 §5.2.1).
    pub reps: u64,
    /// Seed of every random choice (stored in the report). Default [`crate::DEFAULT_SEED`].
    pub seed: u64,
    /// Worker threads; 0 = all cores. Default 0.
    pub threads: usize,
    /// [`Preset::Sweep`]: the `R = granularity / interval` values. Default empty: the
    /// preset's own ([`DEFAULT_SWEEP_R`]); the other presets have the paper's fixed grids
    /// and refuse values.
    pub r_values: Vec<f64>,
    /// [`Preset::Sweep`]: utilisation of the task. Default 0.5.
    pub util: f64,
    /// Tables 2-6 (and [`Preset::All`]): noise on the sampling interval, `T ± U{0..J}`
    /// (seed 002 §4; `PresetOptions::interval_noise`). Default 0: a fixed interval with a
    /// random start; the other presets refuse it.
    pub interval_noise: u64,
}

impl Default for SimulateOptions {
    fn default() -> Self {
        SimulateOptions {
            preset: Preset::Table2,
            reps: 1000,
            seed: crate::DEFAULT_SEED,
            threads: 0,
            r_values: Vec::new(),
            util: 0.5,
            interval_noise: 0,
        }
    }
}

impl SimulateOptions {
    fn preset_options(&self) -> PresetOptions {
        PresetOptions {
            reps: self.reps,
            seed: self.seed,
            threads: self.threads,
            r_values: match self.r_values.is_empty() {
                true => DEFAULT_SWEEP_R.to_vec(),
                false => self.r_values.clone(),
            },
            sweep_util: self.util,
            interval_noise: self.interval_noise,
        }
    }

    /// Bytes the run will hold (its per-repetition shares), to refuse a count that does not
    /// fit before starting.
    pub fn estimated_memory(&self) -> f64 {
        proftrust_sim::sampling::estimated_memory(self.preset, &self.preset_options())
    }
}

/// Runs the preset.
pub fn execute(o: &SimulateOptions, events: &dyn Events) -> Result<SimulationReport> {
    if o.preset != Preset::Sweep && !o.r_values.is_empty() {
        bail_options!("--r sets the R values of --preset sweep; the other presets have the paper's fixed grids");
    }
    let tables = matches!(
        o.preset,
        Preset::Table2
            | Preset::Table3
            | Preset::Table4
            | Preset::Table5
            | Preset::Table6
            | Preset::All
    );
    if o.interval_noise > 0 && !tables {
        bail_options!("--interval-noise applies to the paper's Tables 2-6 (--preset table2..table6 or all); the other presets set their own intervals");
    }
    let task = events.task(
        None,
        &format!(
            "simulating {}",
            proftrust_model::named::Named::name(o.preset)
        ),
    );
    let r = run_preset(o.preset, &o.preset_options()).context("simulation failed");
    task.finish();
    r
}
