//! `proftrust truth`: exact per-instruction counts of a program (QEMU plugin or callgrind).

use crate::util;
use anyhow::Context;
use clap::{Args as ClapArgs, ValueEnum};
use proftrust_exact::{count_callgrind, count_qemu, CallgrindOptions, ExactError, QemuOptions};
use proftrust_model::RunOutcome;
use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

/// Which exact counter to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Backend {
    /// QEMU user mode with proftrust's TCG plugin (fast; counts, edges, calls).
    Qemu,
    /// valgrind's callgrind (slower; optional cache and branch simulation).
    Callgrind,
}

#[derive(Debug, ClapArgs)]
#[command(after_help = "\
Every module is counted (main binary, dynamic loader, libraries), module-relative. The profile
is written even when the program exits non-zero, dies by a signal or hits --timeout; the
ending is recorded. Forked children are not counted; an exec'd image is not followed.
Example:
  proftrust truth -o prog.ptexact -- ./prog arg
  proftrust truth --backend callgrind --cache-sim -o prog.ptexact -- ./prog arg")]
pub struct Args {
    /// Exact counter.
    #[arg(long, value_enum, default_value = "qemu")]
    backend: Backend,
    /// QEMU CPU model (`qemu-x86_64 -cpu help`); decides libc's ifunc choices. Default: QEMU's
    /// own (`max`). QEMU backend only.
    #[arg(long, value_name = "MODEL")]
    cpu: Option<String>,
    /// Count instructions only, with inline counters (no edges or calls; fastest). QEMU only.
    #[arg(long)]
    no_edges: bool,
    /// The qemu-x86_64 to run. Default: $PROFTRUST_QEMU, else the newest qemu-x86_64 with
    /// plugin support on PATH or built by scripts/install-qemu.sh (QEMU >= 9.2 counts with
    /// per-vCPU counters and derives edges; QEMU 7.2 needs a callback per block for edges).
    /// The one used is in the profile's backend line (`proftrust read --json`).
    #[arg(long, value_name = "PATH")]
    qemu: Option<PathBuf>,
    /// Callgrind: also simulate caches (extra costs I1mr, D1mr, ...).
    #[arg(long)]
    cache_sim: bool,
    /// Callgrind: also simulate branch prediction (extra costs Bc, Bcm, ...).
    #[arg(long)]
    branch_sim: bool,
    /// Stop the program (SIGTERM to its process group, SIGKILL 2 s later) after SECS seconds;
    /// the counts so far are written.
    #[arg(long, value_name = "SECS")]
    timeout: Option<f64>,
    /// Output file (native exact file, `read` shows it).
    #[arg(short = 'o', long)]
    output: PathBuf,
    /// The program and its arguments (after `--`).
    #[command(flatten)]
    wl: crate::workload::WorkloadArgs,
    #[arg(last = true, value_name = "PROGRAM ARGS")]
    program: Vec<OsString>,
}

/// Runs `proftrust truth`.
pub fn run(mut a: Args) -> anyhow::Result<()> {
    a.program = a.wl.command(std::mem::take(&mut a.program), None)?;
    anyhow::ensure!(
        !a.program.is_empty(),
        "nothing to count: give a program after `--` (proftrust truth -o FILE -- PROGRAM ARGS)"
    );
    let timeout = match a.timeout {
        Some(t) => {
            anyhow::ensure!(
                t.is_finite() && t > 0.0,
                "--timeout must be a positive number of seconds, not {t}"
            );
            Some(Duration::from_secs_f64(t))
        }
        None => None,
    };
    if a.backend == Backend::Callgrind && (a.cpu.is_some() || a.no_edges || a.qemu.is_some()) {
        anyhow::bail!("--cpu, --no-edges and --qemu apply to --backend qemu only");
    }
    if a.backend == Backend::Qemu && (a.cache_sim || a.branch_sim) {
        anyhow::bail!("--cache-sim and --branch-sim apply to --backend callgrind only");
    }
    let pb = util::progress(None, "counting");
    let r = match a.backend {
        Backend::Qemu => count_qemu(
            &a.program,
            &QemuOptions {
                cpu: a.cpu.clone(),
                timeout,
                edges: !a.no_edges,
                qemu: a.qemu.clone(),
                ..Default::default()
            },
        ),
        Backend::Callgrind => count_callgrind(
            &a.program,
            &CallgrindOptions {
                timeout,
                cache_sim: a.cache_sim,
                branch_sim: a.branch_sim,
                ..Default::default()
            },
        ),
    };
    pb.finish_and_clear();
    let p = r.map_err(|e| {
        let hint = match &e {
            ExactError::ToolMissing { .. } | ExactError::PluginMissing { .. } => "",
            ExactError::NoCounts { .. } if a.backend == Backend::Qemu => {
                " (hint: try --backend callgrind, or run with the plugin path in PROFTRUST_QEMU_PLUGIN)"
            }
            _ => "",
        };
        anyhow::anyhow!("{e}{hint}")
    })?;
    util::write_atomically(&a.output, |w| {
        proftrust_formats::native::write_exact(w, &p)
            .with_context(|| format!("cannot write {}", a.output.display()))
    })?;
    util::note(format_args!(
        "{} instructions executed ({} distinct, {} edges, {} call sites, {} modules) written to {}",
        p.total_instructions,
        p.instructions.len(),
        p.edges.len(),
        p.calls.len(),
        p.modules.len(),
        a.output.display()
    ));
    if util::verbosity() >= 2 {
        util::note(format_args!("{}: {}", p.backend, p.backend_detail));
    }
    if proftrust_exact::counts_may_be_low(&p) {
        util::note(format_args!(
            "{} guest threads counted with non-atomic inline counters: counts may be slightly low where threads ran the same code at once (the run ended without the plugin's snapshot; QEMU plugin API v1)",
            proftrust_exact::guest_threads(&p).map_or("several".into(), |n| n.to_string())
        ));
    }
    match &p.outcome {
        Some(RunOutcome::Exited { code: 0 }) | None => {}
        Some(RunOutcome::Exited { code }) => {
            util::note(format_args!("the program exited with status {code}"))
        }
        Some(RunOutcome::Signaled { name, .. }) => {
            util::note(format_args!("the program was killed by {name}"))
        }
        Some(RunOutcome::TimedOut { millis }) => util::note(format_args!(
            "the program was stopped after the {millis} ms timeout"
        )),
    }
    Ok(())
}
