//! Source (c): timed paths from a probe file (`proftrust-probe`, Rust or C).
//!
//! Each `s` line is one timed path: entry = the module-relative address of the probe site
//! where it started, history = the outcomes of the `PT_BRANCH` conditions on it, time in
//! TSC ticks. With bursty tracing each timed path stands for
//! `boundaries / (timed + dropped)` path executions.
//!
//! Shares are of the run's ticks (`program_time` = the file's `program_ticks`), as seed
//! 004 Fig. 3 reports them ("relative to the total program execution time"). A timed path
//! runs between a serialising `rdtscp` and `lfence`, so its memory accesses cannot overlap
//! those of its neighbours as they do in the clean code, and a timed instance is slower
//! than an untimed one (seed 004 §4.2's first Heisenberg effect): on a memory-bound loop
//! the timed times, extrapolated, exceed the run's own time. [`timed_coverage`] reports that
//! extrapolation against the run's ticks, and the analysis then takes shares of the larger
//! of the two (`VppAnalysis::timing_inflation`).
//!
//! The calibration histograms (start-up and exit) give the instrumentation bias
//! ([`choose_calibration`]); every
//! time of the file gives the timer's resolution ([`probe_resolution`]).

use crate::bias::{choose_calibration, timer_resolution, BiasEstimate};
use crate::signature::{BranchHistory, PathSignature};
use crate::timings::{PathInfo, PathTimings, TimeUnit};
use proftrust_model::Svma;
use proftrust_probe::format::MAX_BITS;
use proftrust_probe::ProbeFile;

/// The timer's resolution in a probe file: the step shared by every calibration and path
/// time ([`timer_resolution`]; 1 for a fine timer).
pub fn probe_resolution(f: &ProbeFile) -> u64 {
    timer_resolution(
        f.calibration
            .iter()
            .chain(&f.calibration_exit)
            .filter(|x| x.1 > 0)
            .map(|x| x.0)
            .chain(f.samples.iter().map(|s| s.ticks)),
    )
}

/// Timed paths (with the run's ticks as their program time) and the bias estimate of a
/// probe file.
pub fn probe_timings(f: &ProbeFile) -> (PathTimings, Option<BiasEstimate>) {
    let mut t = PathTimings::new(TimeUnit::TscTicks);
    for s in &f.samples {
        let sig = PathSignature {
            entry: Svma(s.entry),
            history: BranchHistory::from_bits(s.bits, s.nbits),
            overflow: s.nbits.saturating_sub(MAX_BITS),
        };
        t.add(sig, s.ticks);
    }
    let names: std::collections::HashMap<u64, &str> =
        f.sites.iter().map(|(a, n)| (*a, n.as_str())).collect();
    let sigs: Vec<PathSignature> = t.iter().map(|(s, _)| s.clone()).collect();
    for s in sigs {
        let function = names
            .get(&s.entry.0)
            .map_or_else(|| format!("site {:#x}", s.entry.0), |n| n.to_string());
        t.info.insert(
            s,
            PathInfo {
                function,
                blocks: Vec::new(),
            },
        );
    }
    let timed = f.samples.len() as u64 + f.dropped;
    t.executions_per_sample = if timed > 0 && f.boundaries >= timed {
        f.boundaries as f64 / timed as f64
    } else {
        1.0
    };
    t.program_time = (f.program_ticks > 0).then_some(f.program_ticks);
    let q = probe_resolution(f);
    (
        t,
        choose_calibration(&f.calibration, &f.calibration_exit, q),
    )
}

/// The timed paths' time extrapolated to every execution, as a share of the run's ticks:
/// `timed_time × executions_per_sample / program_ticks` (`None` without the run's ticks).
/// Near or below 1 when the probes cover the run's hot loops and barely perturb them;
/// above 1 when timing inflates the paths (serialised memory accesses).
pub fn timed_coverage(f: &ProbeFile, timed_time: u64, executions_per_sample: f64) -> Option<f64> {
    (f.program_ticks > 0)
        .then(|| timed_time as f64 * executions_per_sample / f.program_ticks as f64)
}
