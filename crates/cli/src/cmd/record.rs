//! `proftrust record`: sample a program (or a running pid) with perf_event_open and write a
//! native sample file (`PTSAMP01`, see docs/file-formats.md).

use crate::util;
use anyhow::Context;
use clap::Args as ClapArgs;
use proftrust_model::RunOutcome;
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
    #[arg(short = 'c', long, conflicts_with = "freq")]
    period: Option<u64>,
    /// Sampling frequency in Hz (the kernel adapts the period).
    #[arg(short = 'F', long)]
    freq: Option<u64>,
    /// Randomise the period (seed 001 §4): each next period is T + uniform(0..=T/8).
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
    #[arg(long, conflicts_with = "program")]
    pid: Option<i32>,
    /// Kill the program (its process group) after SECS seconds (fractions allowed).
    #[arg(long, value_name = "SECS")]
    timeout: Option<f64>,
    /// Also sample kernel code (default: user space only).
    #[arg(long)]
    kernel: bool,
    /// Output file (native sample file).
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
    if let Some(t) = a.timeout {
        anyhow::ensure!(
            t.is_finite() && t > 0.0,
            "--timeout must be a positive number of seconds, not {t}"
        );
        opts.timeout = Some(Duration::from_secs_f64(t));
    }
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
    util::write_atomically(&a.output, |w| {
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
    match &rec.samples.outcome {
        Some(RunOutcome::Exited { code: 0 }) | None => {}
        Some(RunOutcome::Exited { code }) => {
            util::note(format_args!("the program exited with status {code}"))
        }
        Some(RunOutcome::Signaled { name, .. }) => {
            util::note(format_args!("the program was killed by {name}"))
        }
        Some(RunOutcome::TimedOut { millis }) => util::note(format_args!(
            "the program was killed after the {millis} ms timeout"
        )),
    }
    Ok(())
}
