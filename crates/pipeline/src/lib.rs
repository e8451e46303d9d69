//! # proftrust-pipeline
//!
//! proftrust's commands as a library. Per command a module with an `Options` struct (plain
//! data, `Default`, a documented default per field; no clap) and
//! `execute(&options, &events) -> Result<Report>`; the report types and their renderers
//! (text, JSON, HTML) are in `proftrust-report`. The `proftrust` binary turns its clap
//! arguments into these options and renders the report; `check`, fleet jobs and users' own
//! tools call the same functions.
//!
//! * [`audit`] — can I trust this profile? Samples against exact counts, metrics, error
//!   bars, skid correction, period sweep.
//! * [`check`] — how far to trust one profile when the run cannot be repeated (no truth
//!   run: intervals, aliasing, granularity, recording health, verdicts).
//! * [`correct`] — undo counter skid in an instruction profile (seed 000 §2).
//! * [`vpmu`] — a program's samples under the virtual PMU (skid, LBR, caches).
//! * [`paths`] — a program's exact Ball-Larus path profile with cycles and misses per
//!   path, seed 003 §6's hot/dense/sparse classes, and the paths its LBR stacks show.
//! * [`cct`] — a program's exact calling context tree, gprof's error on it, and sampled
//!   contexts compared with it.
//! * [`vpp`] — variational path profiling (seed 004): paths timed by the virtual PMU,
//!   LBR stacks or the program's own probes, ranked by net variation.
//! * [`record`] — a program's samples from `perf_event_open` (events as perf spells them).
//! * [`truth`] — a program's exact per-instruction counts (QEMU plugin or callgrind).
//! * [`simulate`] — seed 002's running-state simulation of sampling.
//! * [`read`] — what a profile file holds (any format), or its samples as text.
//! * [`inspect`] — what proftrust sees in a binary: functions, blocks, loops, one
//!   function's CFG and instructions.
//! * [`calibrate`] — the skid of a PMU fitted from a kernel with a known instruction mix
//!   (seed 000 eq. 2; on the virtual PMU).
//! * [`analyze`] — running granularity and sampling intervals of real samples (seed 002).
//! * [`export`] — a profile into the tools users already use (pprof, Firefox Profiler,
//!   speedscope, folded stacks, flame graphs, LLVM sample profiles, annotated source): the
//!   `export` command and the `--export` of `audit` and `correct`.
//! * fleet (many hosts' profiles in a Parquet store, on Apache DataFusion) is not here: it
//!   is the `proftrust-fleet` binary (`crates/fleet-cli`), built on its own so that this
//!   crate and the `proftrust` binary do not pull the query engine.
//! * [`load`] — the one place sample files and exact-count files are read, any format.
//! * [`program`] — finding programs on `PATH`, tool versions.
//! * [`trace`] — a program traced under QEMU with a timing model (paths, cct, vpp).
//! * [`Events`] — notes and progress of a running command ([`Silent`] ignores them).
//!
//! This crate is orchestration: it reads files and runs programs (through `proftrust-record`
//! and `proftrust-exact`); the analyses it calls do neither.
//!
//! Running the audit from Rust, without the CLI (here on the golden tests' fixtures: samples
//! of the virtual PMU with skid 3, exact counts from QEMU, and the program's binary):
//!
//! ```
//! use proftrust_pipeline::audit::{execute, AuditInput, AuditOptions};
//!
//! let dir = std::path::Path::new("../cli/tests/golden/fixtures");
//! let mut options = AuditOptions::default();
//! options.input = AuditInput::Files {
//!     samples: dir.join("tiny.ptsamp"),
//!     truth: dir.join("tiny.ptexact"),
//! };
//! options.binaries = vec![dir.join("tiny")];
//! let report = execute(&options, &proftrust_pipeline::Silent)?;
//!
//! // The hottest function, and how many samples sit in the wrong function (seed 000).
//! assert_eq!(report.functions[0].name, "leaf");
//! assert!(report.metrics.epsilon_function.unwrap() < 0.02);
//! print!("{}", proftrust_report::render_text(&report, false, 10));
//! # Ok::<(), proftrust_pipeline::Error>(())
//! ```
#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod analyze;
pub mod audit;
pub mod calibrate;
pub mod cct;
pub mod check;
pub mod correct;
mod error;
mod events;
pub mod export;
pub mod inspect;
pub mod lbr;
pub mod load;
pub mod paths;
mod processes;
pub mod program;
pub mod read;
pub mod record;
pub mod simulate;
pub mod timemodel;
pub mod trace;
pub mod truth;
pub mod vpmu;
pub mod vpp;
mod warnings;

pub use error::{chain, Context, Error, Result, Tool};
pub use events::{Events, Notes, Silent, Task};
pub use proftrust_supervise::StopSignal;

/// Runs `f` in a thread with a 256 MiB stack (reserved, committed only as used) and returns
/// its result: the skid correction's walk recurses once per block a skid crosses, so its
/// depth grows with the skid and the code; a main thread's 8 MiB is not enough for every
/// program at the largest skid the CLI allows (`docs/processes.md`).
pub fn with_big_stack<T: Send>(f: impl FnOnce() -> T + Send) -> Result<T> {
    std::thread::scope(|s| {
        let h = std::thread::Builder::new()
            .name("correct".into())
            .stack_size(256 << 20)
            .spawn_scoped(s, f)
            .context("cannot start the correction thread")?;
        Ok(h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
    })
}

/// The seed of every command's random choices when none is given: 1, the same for `audit`,
/// `record`, `vpmu`, `vpp`, `simulate`, `correct` and `calibrate`, so that two runs of a
/// command with the same inputs make the same choices. Every report and file states the
/// seed it used; `--seed N` picks another stream (docs/ARCHITECTURE.md, "Randomness").
pub const DEFAULT_SEED: u64 = 1;

/// Where exact counts come from when a command runs the program.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Backend {
    /// The QEMU plugin when it is found, else callgrind.
    #[default]
    Auto,
    /// QEMU user mode with the proftrust plugin.
    Qemu,
    /// valgrind --tool=callgrind.
    Callgrind,
}

impl proftrust_model::named::Named for Backend {
    const ALL: &'static [(Self, &'static str, &'static str)] = &[
        (
            Backend::Auto,
            "auto",
            "QEMU plugin when it is found, else callgrind",
        ),
        (
            Backend::Qemu,
            "qemu",
            "QEMU user mode with the proftrust plugin",
        ),
        (Backend::Callgrind, "callgrind", "valgrind --tool=callgrind"),
    ];
}
proftrust_model::named_from_str!(Backend);
