//! Source (c): timed paths from a probe file (`proftrust-probe`, Rust or C).
//!
//! Each `s` line is one timed path: entry = the module-relative address of the probe site
//! where it started, history = the outcomes of the `PT_BRANCH` conditions on it, time in
//! TSC ticks. With bursty tracing each timed path stands for
//! `boundaries / (timed + dropped)` path executions, and the program's time is the ticks
//! from the runtime's start to its exit, so shares are of the whole run (seed 004 Fig. 3).
//! The calibration histogram gives the instrumentation bias ([`estimate_bias`]).

use crate::bias::{estimate_bias, BiasEstimate};
use crate::signature::{BranchHistory, PathSignature};
use crate::timings::{PathInfo, PathTimings, TimeUnit};
use proftrust_model::Svma;
use proftrust_probe::format::MAX_BITS;
use proftrust_probe::ProbeFile;

/// Timed paths and the bias estimate of a probe file.
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
    (t, estimate_bias(&f.calibration))
}
