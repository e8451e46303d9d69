//! `proftrust record`: sample a program (or a running pid) with perf_event_open and write a
//! native sample file (`PTSAMP01`, see docs/file-formats.md).

use crate::util;
use anyhow::Context;
use clap::Args as ClapArgs;
use proftrust_pipeline::record::{execute, RecordRunOptions, RecordTarget};
use std::path::PathBuf;
use std::time::Duration;

/// Arguments of `proftrust record`.
#[derive(Debug, ClapArgs)]
#[command(after_help = "\
Events: cpu-clock and task-clock (software timers, work everywhere; period in ns), cycles,
instructions and raw codes rNNNN (need a hardware PMU), with :p/:pp/:ppp precise levels.
Default periods are primes: 100003 ns (~10 kHz) for clocks, 2000003 for cycles/instructions, 100003
for raw events. Examples:
  proftrust record -- ./prog arg                 (writes ./proftrust.ptsamp)
  proftrust record -o prof.ptsamp -- ./prog arg
  proftrust record -e task-clock -c 250007 --randomize --seed 7 -g -o prof.ptsamp -- ./prog
  proftrust record --call-graph dwarf --kernel -o prof.ptsamp -- xz -9 file  (stripped code)
  proftrust record --pid 1234 --timeout 10 -o prof.ptsamp")]
pub struct Args {
    /// Event to sample: cpu-clock, task-clock, cycles, instructions, rHEX, with optional :p,
    /// :pp, :ppp; several as perf takes them, `-e a,b` or `-e a -e b`.
    #[arg(short = 'e', long = "event", default_value = "cpu-clock")]
    events: Vec<String>,
    /// Fixed sampling period (events, or ns for clock events); K/M/G suffixes = 2^10/2^20/
    /// 2^30. Default: the event's prime. 1 to 10^15.
    #[arg(short = 'c', long, conflicts_with = "freq", value_parser = crate::args::period)]
    period: Option<u64>,
    /// Sampling frequency in Hz (the kernel adapts the period), 1 to 1000000 (the kernel's
    /// perf_event_max_sample_rate may refuse less).
    #[arg(short = 'F', long, value_parser = crate::args::int::<u64>(1, 1_000_000))]
    freq: Option<u64>,
    /// Randomise the period (paper 001 §4): each next period is T + uniform(0..=T/8).
    #[arg(long)]
    randomize: bool,
    #[command(flatten)]
    seed: crate::args::Seed,
    /// Record call chains: `-g` (or `--call-graph fp`) follows frame pointers;
    /// `--call-graph dwarf[,SIZE]` copies SIZE bytes of user stack per sample (default 8192,
    /// as perf) and unwinds them with the binaries' .eh_frame when the recording ends
    /// (programs built without frame pointers, as distributions ship them).
    #[arg(short = 'g', long = "call-graph", num_args = 0..=1, default_missing_value = "fp", value_name = "fp|dwarf[,SIZE]", value_parser = proftrust_pipeline::record::CallGraph::parse)]
    call_graph: Option<proftrust_pipeline::record::CallGraph>,
    /// Record branch stacks (needs a PMU with LBR or equivalent).
    #[arg(short = 'b', long = "branch-stack")]
    branch_stack: bool,
    /// Attach to this running process instead of starting PROGRAM (stop with Ctrl-C,
    /// --timeout, or when it exits). 1 to 4194304 (the kernel's PID_MAX_LIMIT).
    #[arg(long, conflicts_with = "program", value_parser = crate::args::int::<i32>(1, PID_MAX_LIMIT))]
    pid: Option<i32>,
    /// Stop the program (SIGTERM to its process group, SIGKILL 2 s later) after SECS seconds
    /// (fractions allowed; at most 30 days); the samples so far are written.
    #[arg(long, value_name = "SECS", value_parser = crate::args::timeout)]
    timeout: Option<Duration>,
    /// Also sample kernel code (default: user space only).
    #[arg(long)]
    kernel: bool,
    /// Output file (native sample file; `-` for standard output). Default:
    /// `proftrust.ptsamp` in the current directory (not perf's `perf.data`: perf cannot read
    /// this format; every proftrust command tells formats apart by their magic bytes).
    #[arg(short = 'o', long, default_value = "proftrust.ptsamp")]
    output: PathBuf,
    /// The program and its arguments (after `--`).
    #[command(flatten)]
    wl: crate::workload::WorkloadArgs,
    #[arg(last = true, value_name = "PROGRAM ARGS")]
    program: Vec<String>,
}

/// The largest pid Linux hands out on 64-bit machines (`PID_MAX_LIMIT`, 4 x 1024 x 1024,
/// include/linux/threads.h): `/proc/sys/kernel/pid_max` cannot be set higher.
const PID_MAX_LIMIT: u64 = 4 << 20;

/// Runs `proftrust record`.
pub fn run(mut a: Args) -> anyhow::Result<()> {
    crate::output::check(&a.output)?;
    a.program = a.wl.command(std::mem::take(&mut a.program), None)?;
    let mut o = RecordRunOptions::default();
    o.target = match a.pid {
        Some(pid) => RecordTarget::Pid(pid),
        None => RecordTarget::Command(a.program.clone()),
    };
    (o.events, o.period, o.frequency) = (a.events.clone(), a.period, a.freq);
    use proftrust_pipeline::record::CallGraph;
    o.callchain = a.call_graph == Some(CallGraph::FramePointer);
    if let Some(CallGraph::Dwarf { stack }) = a.call_graph {
        o.dwarf_stack = Some(stack);
    }
    (o.randomize, o.seed) = (a.randomize, a.seed.seed);
    (o.branch_stack, o.kernel, o.timeout) = (a.branch_stack, a.kernel, a.timeout);
    o.stop = Some(crate::interrupt::install());
    let r = execute(&o, &util::Ui)?;
    let rec = &r.recording;
    let kept = crate::output::write_keeping_old(&a.output, |w| {
        proftrust_formats::native::write_samples(w, &rec.samples)
            .with_context(|| format!("cannot write {}", a.output.display()))
    })?;
    let to = a.output.display().to_string();
    if let Some(old) = kept {
        util::note(format!(
            "the previous {to} was kept as {} (as perf record does)",
            old.display()
        ));
    }
    for line in r.summary.render_text(&to, util::verbosity() >= 2).lines() {
        util::note(line);
    }
    if let Some(why) = &rec.exec_error {
        anyhow::bail!(
            "the program could not be started ({why}); the profile with its outcome was written to {to}"
        );
    }
    util::note_outcome(
        rec.samples.outcome.as_ref(),
        &format!("the samples in {to}"),
    );
    Ok(())
}
