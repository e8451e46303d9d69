//! `proftrust truth`: exact per-instruction counts of a program (QEMU plugin or callgrind).

use crate::util;
use anyhow::Context;
use clap::Args as ClapArgs;
use proftrust_pipeline::truth::{execute, TruthBackend, TruthOptions};
use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, ClapArgs)]
#[command(after_help = "\
Every module is counted (main binary, dynamic loader, libraries), module-relative. The profile
is written even when the program exits non-zero, dies by a signal or hits --timeout, and when
proftrust is interrupted (SIGINT, SIGTERM, SIGHUP: the program is stopped, the counts so far
are written marked \"interrupted\", then proftrust ends by that signal); the ending is
recorded. The whole process tree is counted (forked children, programs started by exec,
#! scripts through their interpreter); the process images are listed after the totals.
Example:
  proftrust truth -o prog.ptexact -- ./prog arg
  proftrust truth --backend callgrind --cache-sim -o prog.ptexact -- ./prog arg")]
pub struct Args {
    /// Exact counter.
    #[arg(long, value_parser = crate::args::named::<TruthBackend>(), default_value_t = TruthBackend::Qemu)]
    backend: TruthBackend,
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
    /// Also simulate branch prediction. Callgrind: its own (extra costs Bc, Bcm, ...). QEMU:
    /// the plugin runs every branch through a history-based predictor (TAGE, ITTAGE-like
    /// indirect, return stack) and counts its mispredictions per branch (extra cost
    /// bpred_misses, which `audit --truth-weight time-model` then uses).
    #[arg(long)]
    branch_sim: bool,
    /// Stop the program (SIGTERM to its process group, SIGKILL 2 s later) after SECS seconds
    /// (at most 30 days); the counts so far are written.
    #[arg(long, value_name = "SECS", value_parser = crate::args::timeout)]
    timeout: Option<Duration>,
    /// Output file (native exact file, `read` shows it; `-` for standard output).
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
    crate::output::check(&a.output)?;
    let mut o = TruthOptions::default();
    o.command = a.wl.command(std::mem::take(&mut a.program), None)?;
    o.backend = a.backend;
    (o.cpu, o.edges, o.qemu) = (a.cpu.clone(), !a.no_edges, a.qemu.clone());
    (o.cache_sim, o.branch_sim, o.timeout) = (a.cache_sim, a.branch_sim, a.timeout);
    o.stop = Some(crate::interrupt::install());
    let r = execute(&o, &util::Ui)?;
    crate::output::write(&a.output, |w| {
        proftrust_formats::native::write_exact(w, &r.profile)
            .with_context(|| format!("cannot write {}", a.output.display()))
    })?;
    let to = a.output.display().to_string();
    for line in r.summary.render_text(&to, util::verbosity() >= 2).lines() {
        util::note(line);
    }
    util::note_outcome(r.profile.outcome.as_ref(), &format!("the counts in {to}"));
    Ok(())
}
