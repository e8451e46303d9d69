//! `calibrate`: fit the skid `S` of a PMU from a kernel with a known instruction mix.
//!
//! The kernel is one simple loop: one load of [`CalibrateOptions::heavy`] cycles followed by
//! [`CalibrateOptions::light`] one-cycle instructions. Its instruction samples follow
//! `D(S, c)` (seed 000 §3, eq. 2); the fit picks the `S` whose distribution matches
//! (`proftrust_skid::calibrate`). Fitting a real PMU needs hardware instruction events;
//! without them [`execute`] says so and fails, unless [`CalibrateOptions::vpmu`] replays the
//! kernel under the virtual PMU with a known skid to show the fit recovers it.

use crate::error::{bail, bail_options, Context, Result};
use proftrust_model::{
    BlockVisitor, Module, ModuleIdx, RunOutcome, Svma, TraceBlock, TraceEnd, TraceEvent,
};
pub use proftrust_report::calibrate::{CalibrateReport, CalibrationKernel};
use proftrust_skid::calibrate::{fit_skid, kernel_cpi};
use proftrust_vpmu::{CostTable, CycleModel, SkidDist, StaticCost, Vpmu, VpmuEvents, VpmuOptions};

/// Most instructions a virtual-PMU calibration replays (~17 minutes at 10^7 a second).
pub const MAX_REPLAYED: f64 = 1e10;

/// Settings of [`execute`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct CalibrateOptions {
    /// Replay the kernel under the virtual PMU (no hardware PMU needed). Default false (a
    /// hardware calibration, which this build refuses with the reason).
    pub vpmu: bool,
    /// Skid of the virtual PMU, in cycles. Default 37.
    pub skid: u64,
    /// Cycles of the kernel's heavy load. Default 200.
    pub heavy: u32,
    /// One-cycle instructions after the heavy load. Default 100.
    pub light: usize,
    /// Instruction-event period (a prime coprime with the kernel length spreads overflows
    /// evenly). Default 1009.
    pub period: u64,
    /// Passes through the kernel; `passes x (light + 1)` instructions are replayed, at most
    /// [`MAX_REPLAYED`]. Default 200 000.
    pub passes: u64,
    /// Randomise the period (seed 001 §4: `T + U(0, T/8)`). Default false.
    pub randomize: bool,
    /// Seed of the virtual PMU's random choices (stored in the report). Default
    /// [`crate::DEFAULT_SEED`].
    pub seed: u64,
}

impl Default for CalibrateOptions {
    fn default() -> Self {
        CalibrateOptions {
            vpmu: false,
            skid: 37,
            heavy: 200,
            light: 100,
            period: 1009,
            passes: 200_000,
            randomize: false,
            seed: crate::DEFAULT_SEED,
        }
    }
}

impl CalibrateOptions {
    /// Instructions the replay runs: `passes x (light + 1)`.
    pub fn instructions(&self) -> f64 {
        self.passes as f64 * (self.light as f64 + 1.0)
    }
}

/// Replays the kernel under the virtual PMU and fits the skid from its instruction samples.
pub fn execute(a: &CalibrateOptions) -> Result<CalibrateReport> {
    if !a.vpmu {
        let pmu = std::path::Path::new("/sys/bus/event_source/devices/cpu").exists();
        if pmu {
            bail!(
                "calibrating a hardware PMU is not supported by this build (it needs precise \
                 instruction sampling of a pinned kernel); run `proftrust calibrate --vpmu` to \
                 check the fit on the virtual PMU"
            );
        }
        bail!(
            "calibration needs a hardware PMU and this machine has none \
             (/sys/bus/event_source/devices/cpu is missing; perf_event_open offers only \
             software events here, which have no instruction-level skid to fit)\n\
             hint: run `proftrust calibrate --vpmu` to check the fit on the virtual PMU with a known skid"
        );
    }
    let instructions = a.instructions();
    if instructions > MAX_REPLAYED {
        bail_options!(
            "--passes {} x (--light {} + 1) = {instructions:.3e} instructions to replay, ~{} at 10^7 a second (at most {MAX_REPLAYED:e}); lower --passes or --light",
            a.passes,
            a.light,
            human_seconds(instructions / 1e7)
        );
    }
    let n = a.light + 1;
    // The kernel as a module of 4-byte instructions at 0x1000.
    let addrs: Vec<Svma> = (0..n).map(|k| Svma(0x1000 + 4 * k as u64)).collect();
    let mut table = CostTable::new("calibration-kernel");
    for (k, s) in addrs.iter().enumerate() {
        let cycles = if k == 0 { a.heavy } else { 1 };
        table.costs.insert(s.0, StaticCost { cycles, len: 4 });
    }
    let mut model = CycleModel::flat(1);
    model.tables.push(table);
    let mut opts = VpmuOptions::default();
    opts.instruction_period = a.period;
    opts.randomize = a.randomize;
    opts.skid = SkidDist::Constant(a.skid);
    opts.seed = a.seed;
    opts.events = VpmuEvents {
        instructions: true,
        cycles: false,
    };
    opts.exact = false;
    let mut v = Vpmu::new(opts, model).context("cannot set up the virtual PMU")?;
    let m = Module::new("calibration-kernel");
    v.visit(&TraceEvent::Module {
        idx: ModuleIdx(0),
        module: &m,
    });
    for _ in 0..a.passes {
        v.block(&TraceBlock {
            tid: 1,
            module: Some(ModuleIdx(0)),
            instructions: &addrs,
            end: TraceEnd::Other,
            mem: &[],
            key: None,
        });
    }
    v.end(&RunOutcome::Exited { code: 0 });
    let (set, _) = v.finish();
    let mut hist = vec![0.0; n];
    for s in &set.samples {
        let k = ((s.ip.svma.0 - 0x1000) / 4) as usize;
        if let Some(h) = hist.get_mut(k) {
            *h += 1.0;
        }
    }
    let cpi = kernel_cpi(a.heavy as u64, a.light);
    let max = cpi.iter().sum::<f64>();
    let fit = fit_skid(&cpi, &hist, max, 1.0).context("cannot fit the skid")?;
    Ok(CalibrateReport {
        backend: "vpmu".into(),
        fitted_skid: fit.skid,
        fitted_skid_high: fit.skid_high,
        kernel: CalibrationKernel {
            heavy_cycles: a.heavy,
            light_instructions: a.light,
        },
        period: a.period,
        randomize: a.randomize,
        residual: fit.residual,
        samples: fit.samples,
        seed: a.seed,
        true_skid: a.skid,
    })
}

/// `3 s`, `2.5 h`, `41 days`, `3.2e6 years`.
fn human_seconds(s: f64) -> String {
    if s < 120.0 {
        format!("{s:.0} s")
    } else if s < 7200.0 {
        format!("{:.0} min", s / 60.0)
    } else if s < 172_800.0 {
        format!("{:.1} h", s / 3600.0)
    } else if s < 3.0e7 {
        format!("{:.0} days", s / 86_400.0)
    } else {
        format!("{:.1e} years", s / 3.15e7)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_units() {
        assert_eq!(human_seconds(30.0), "30 s");
        assert_eq!(human_seconds(90_000.0), "25.0 h");
    }

    /// The virtual PMU with a constant skid and a fixed period: the fit recovers the skid
    /// it was given (the kernel's D(S, c) has one best S on the grid).
    #[test]
    fn fit_recovers_the_virtual_skid() {
        let o = CalibrateOptions {
            vpmu: true,
            passes: 2000,
            seed: 5,
            ..CalibrateOptions::default()
        };
        let r = execute(&o).unwrap();
        assert_eq!((r.fitted_skid, r.true_skid), (37.0, 37));
        assert_eq!(r.samples, 200.0);
        assert_eq!(r.seed, 5);
        assert!(r.render_text().contains("seed 5"));
        assert!(r.to_json().unwrap().contains("\"seed\": 5"));
    }

    #[test]
    fn too_many_instructions_are_refused() {
        let o = CalibrateOptions {
            vpmu: true,
            passes: 1_000_000_000,
            ..CalibrateOptions::default()
        };
        let e = execute(&o).unwrap_err().to_string();
        assert!(e.contains("lower --passes or --light"), "{e}");
    }
}
