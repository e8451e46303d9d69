//! `truth`: exact per-instruction counts of a program, under QEMU with proftrust's TCG
//! plugin or under callgrind (`proftrust-exact`). Every module is counted, module-relative;
//! the profile is returned even when the program exits non-zero, dies by a signal, hits the
//! timeout or is stopped (its outcome says how it ended).

use crate::error::{bail_options, Error, Result};
use crate::Events;
use proftrust_exact::{count_callgrind, count_qemu, CallgrindOptions, ExactError, QemuOptions};
use proftrust_model::ExactProfile;
pub use proftrust_report::truth::TruthSummary;
use proftrust_supervise::StopSignal;
use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

/// Which exact counter to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TruthBackend {
    /// QEMU user mode with proftrust's TCG plugin (fast; counts, edges, calls).
    #[default]
    Qemu,
    /// valgrind's callgrind (slower; optional cache and branch simulation).
    Callgrind,
}

impl proftrust_model::named::Named for TruthBackend {
    const ALL: &'static [(Self, &'static str, &'static str)] = &[
        (
            TruthBackend::Qemu,
            "qemu",
            "QEMU user mode with proftrust's TCG plugin (fast; counts, edges, calls)",
        ),
        (
            TruthBackend::Callgrind,
            "callgrind",
            "valgrind's callgrind (slower; optional cache and branch simulation)",
        ),
    ];
}
proftrust_model::named_from_str!(TruthBackend);

/// Settings of [`execute`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct TruthOptions {
    /// Program and arguments. Default empty (an error: give one).
    pub command: Vec<OsString>,
    /// Exact counter. Default [`TruthBackend::Qemu`].
    pub backend: TruthBackend,
    /// QEMU CPU model (decides libc's ifunc choices). Default none: QEMU's own (`max`).
    pub cpu: Option<String>,
    /// Count edges and calls besides instructions (QEMU). Default true.
    pub edges: bool,
    /// The `qemu-x86_64` to run. Default none: `$PROFTRUST_QEMU`, else the newest with
    /// plugin support (`proftrust_exact::find_qemu`).
    pub qemu: Option<PathBuf>,
    /// Callgrind: also simulate caches. Default false.
    pub cache_sim: bool,
    /// Also simulate branch prediction. Callgrind: its own simulation (columns `Bc`, `Bcm`,
    /// `Bi`, `Bim`); QEMU: the plugin runs every branch through `proftrust-bpred`'s
    /// history-based predictor (column `bpred_misses`, which the time model uses; needs
    /// edges). Default false.
    pub branch_sim: bool,
    /// Stop the program after this long (the counts so far are returned). Default none.
    pub timeout: Option<Duration>,
    /// Raised to stop the program as at the timeout. Default none.
    pub stop: Option<StopSignal>,
}

impl Default for TruthOptions {
    fn default() -> Self {
        TruthOptions {
            command: Vec::new(),
            backend: TruthBackend::Qemu,
            cpu: None,
            edges: true,
            qemu: None,
            cache_sim: false,
            branch_sim: false,
            timeout: None,
            stop: None,
        }
    }
}

/// The exact counts of one run and what they hold.
#[derive(Debug, Clone)]
pub struct TruthReport {
    /// The counts (written as a native exact file by the CLI).
    pub profile: ExactProfile,
    /// Totals, backend detail, cautions.
    pub summary: TruthSummary,
}

/// The process images of `p` by name and how they began, the started program first (empty
/// for one image).
fn process_groups(p: &ExactProfile) -> Vec<proftrust_report::truth::TruthProcesses> {
    use proftrust_model::ImageStart;
    if p.processes.len() < 2 {
        return Vec::new();
    }
    let mut groups: Vec<proftrust_report::truth::TruthProcesses> = Vec::new();
    for (i, x) in p.processes.iter().enumerate() {
        let start = (if i == 0 { ImageStart::Root } else { x.start }).label(x.replaced);
        let g = match groups
            .iter_mut()
            .find(|g| g.name == x.comm && g.start == start)
        {
            Some(g) => g,
            None => {
                groups.push(proftrust_report::truth::TruthProcesses {
                    name: x.comm.clone(),
                    start,
                    images: 0,
                    counted: 0,
                    instructions: 0,
                    pids: Vec::new(),
                    not_counted: None,
                });
                groups.last_mut().expect("just pushed")
            }
        };
        g.images += 1;
        g.pids.push(x.pid);
        match &x.not_counted {
            None => {
                g.counted += 1;
                g.instructions += x.total_instructions;
            }
            Some(why) => g.not_counted = Some(why.clone()),
        }
    }
    groups
}

/// Runs the program under the chosen backend and returns its exact counts.
pub fn execute(a: &TruthOptions, events: &dyn Events) -> Result<TruthReport> {
    if a.command.is_empty() {
        bail_options!(
            "nothing to count: give a program after `--` (proftrust truth -o FILE -- PROGRAM ARGS)"
        );
    }
    if a.backend == TruthBackend::Callgrind && (a.cpu.is_some() || !a.edges || a.qemu.is_some()) {
        bail_options!("--cpu, --no-edges and --qemu apply to --backend qemu only");
    }
    if a.backend == TruthBackend::Qemu && a.cache_sim {
        bail_options!("--cache-sim applies to --backend callgrind only (the time model's caches: `audit --truth-weight time-model --time-caches`)");
    }
    if a.backend == TruthBackend::Qemu && a.branch_sim && !a.edges {
        bail_options!("--branch-sim under QEMU runs a callback per block anyway: drop --no-edges");
    }
    let task = events.task(None, "counting");
    let r = match a.backend {
        TruthBackend::Qemu => count_qemu(
            &a.command,
            &QemuOptions {
                cpu: a.cpu.clone(),
                timeout: a.timeout,
                edges: a.edges,
                branch_predictor: a.branch_sim,
                stop: a.stop.clone(),
                qemu: a.qemu.clone(),
                ..Default::default()
            },
        ),
        TruthBackend::Callgrind => count_callgrind(
            &a.command,
            &CallgrindOptions {
                timeout: a.timeout,
                cache_sim: a.cache_sim,
                branch_sim: a.branch_sim,
                stop: a.stop.clone(),
                ..Default::default()
            },
        ),
    };
    task.finish();
    let p = r.map_err(|e| {
        let hint = match &e {
            ExactError::NoCounts { .. } if a.backend == TruthBackend::Qemu => {
                " (hint: try --backend callgrind, or run with the plugin path in PROFTRUST_QEMU_PLUGIN)"
            }
            _ => "",
        };
        let message = format!("{e}{hint}");
        Error::exact_with_message(e, message)
    })?;
    let summary = TruthSummary {
        backend: p.backend.clone(),
        backend_detail: p.backend_detail.clone(),
        instructions: p.total_instructions,
        distinct: p.instructions.len(),
        edges: p.edges.len(),
        call_sites: p.calls.len(),
        modules: p.modules.len(),
        counts_may_be_low: proftrust_exact::counts_may_be_low(&p).then(|| {
            proftrust_exact::guest_threads(&p).map_or("several".into(), |n| n.to_string())
        }),
        warnings: crate::warnings::exact(&p),
        processes: process_groups(&p),
    };
    Ok(TruthReport {
        profile: p,
        summary,
    })
}
