//! `proftrust record`: sample a program (or a running pid) with perf_event_open and write a
//! native sample file (`PTSAMP01`, see docs/file-formats.md).

use crate::util;
use anyhow::Context;
use clap::Args as ClapArgs;
use proftrust_record::{record, EventSpec, RecordOptions, Target};
use std::path::PathBuf;
use std::time::Duration;

/// Arguments of `proftrust record`.
#[derive(Debug, ClapArgs)]
#[command(after_help = "\
Events: cpu-clock and task-clock (software timers, work everywhere; period in ns), cycles,
instructions and raw codes rNNNN (need a hardware PMU), with :p/:pp/:ppp precise levels.
Default periods are primes: 100003 ns (~10 kHz) for clocks, 2000003 for cycles/instructions, 100003
for raw events. Examples:
  proftrust record -o prof.ptsamp -- ./prog arg
  proftrust record -e task-clock -c 250007 --randomize --seed 7 -g -o prof.ptsamp -- ./prog
  proftrust record --pid 1234 --timeout 10 -o prof.ptsamp")]
pub struct Args {
    /// Event to sample (repeat for several): cpu-clock, task-clock, cycles, instructions, rHEX,
    /// with optional :p, :pp, :ppp.
    #[arg(short = 'e', long = "event", default_value = "cpu-clock")]
    events: Vec<String>,
    /// Fixed sampling period (events, or ns for clock events). Default: the event's prime.
    /// 1 to 10^15.
    #[arg(short = 'c', long, conflicts_with = "freq", value_parser = crate::args::int::<u64>(1, 1_000_000_000_000_000))]
    period: Option<u64>,
    /// Sampling frequency in Hz (the kernel adapts the period), 1 to 1000000 (the kernel's
    /// perf_event_max_sample_rate may refuse less).
    #[arg(short = 'F', long, value_parser = crate::args::int::<u64>(1, 1_000_000))]
    freq: Option<u64>,
    /// Randomise the period (paper 001 §4): each next period is T + uniform(0..=T/8).
    #[arg(long)]
    randomize: bool,
    /// Seed of every random choice (printed and stored in the file). Default: from the clock.
    #[arg(long)]
    seed: Option<u64>,
    /// Record frame-pointer user call chains.
    #[arg(short = 'g', long = "call-graph")]
    callchain: bool,
    /// Record branch stacks (needs a PMU with LBR or equivalent).
    #[arg(short = 'b', long = "branch-stack")]
    branch_stack: bool,
    /// Attach to this running process instead of starting PROGRAM (stop with Ctrl-C,
    /// --timeout, or when it exits).
    #[arg(long, conflicts_with = "program", value_parser = crate::args::int::<i32>(1, i32::MAX as u64))]
    pid: Option<i32>,
    /// Stop the program (SIGTERM to its process group, SIGKILL 2 s later) after SECS seconds
    /// (fractions allowed; at most 30 days); the samples so far are written.
    #[arg(long, value_name = "SECS", value_parser = crate::args::timeout)]
    timeout: Option<Duration>,
    /// Also sample kernel code (default: user space only).
    #[arg(long)]
    kernel: bool,
    /// Output file (native sample file; `-` for standard output).
    #[arg(short = 'o', long)]
    output: PathBuf,
    /// The program and its arguments (after `--`).
    #[command(flatten)]
    wl: crate::workload::WorkloadArgs,
    #[arg(last = true, value_name = "PROGRAM ARGS")]
    program: Vec<String>,
}

/// Runs `proftrust record`.
pub fn run(mut a: Args) -> anyhow::Result<()> {
    crate::output::check(&a.output)?;
    a.program = a.wl.command(std::mem::take(&mut a.program), None)?;
    let mut opts = RecordOptions::default();
    opts.events = a
        .events
        .iter()
        .map(|e| EventSpec::parse(e))
        .collect::<Result<_, _>>()?;
    opts.period = a.period;
    opts.frequency = a.freq;
    opts.randomize = a.randomize;
    opts.seed = a.seed;
    opts.callchain = a.callchain;
    opts.branch_stack = a.branch_stack;
    opts.user_only = !a.kernel;
    opts.timeout = a.timeout;
    opts.stop = Some(crate::interrupt::install());
    let target = match (a.pid, a.program.is_empty()) {
        (Some(pid), _) => Target::Pid(pid),
        (None, false) => Target::Command(a.program.clone()),
        (None, true) => anyhow::bail!(
            "nothing to record: give a program after `--` (proftrust record -o FILE -- PROGRAM ARGS) or --pid PID"
        ),
    };
    let pb = util::progress(None, "recording");
    let rec = record(&target, &opts);
    pb.finish_and_clear();
    let rec = rec?;
    util::note(format_args!("seed {}", rec.seed));
    crate::output::write(&a.output, |w| {
        proftrust_formats::native::write_samples(w, &rec.samples)
            .with_context(|| format!("cannot write {}", a.output.display()))
    })?;
    let s = &rec.stats;
    util::note(format_args!(
        "{} samples, {} lost, {} modules written to {}",
        rec.samples.samples.len(),
        rec.samples.lost,
        rec.samples.modules.len(),
        a.output.display()
    ));
    if util::verbosity() >= 2 {
        util::note(format_args!(
            "{} ring-buffer batches, {} period updates, {} throttle records, {} unmapped samples, {} samples not randomised (inherited instances)",
            s.batches, s.period_updates, s.throttled, s.unmapped_samples, s.unrandomized_samples
        ));
        if !s.interval_excess.is_empty() {
            let mut v = s.interval_excess.clone();
            v.sort_unstable();
            util::note(format_args!(
                "realised interval - recorded period (reaction latency): min {} median {} p90 {} max {} over {} samples",
                v[0],
                v[v.len() / 2],
                v[v.len() * 9 / 10],
                v[v.len() - 1],
                v.len()
            ));
        }
    }
    if let Some(why) = &rec.exec_error {
        anyhow::bail!(
            "the program could not be started ({why}); the profile with its outcome was written to {}",
            a.output.display()
        );
    }
    util::note_outcome(
        rec.samples.outcome.as_ref(),
        &format!(
            "the samples up to then were written to {}",
            a.output.display()
        ),
    );
    Ok(())
}
