//! `record`: sample a program (or a running process) with `perf_event_open`
//! (`proftrust-record`) and return the samples, ready to be written as a native sample file.

use crate::error::{bail_options, Result};
use crate::Events;
use proftrust_record::{record, EventSpec, RecordOptions, Recording, Target};
pub use proftrust_report::record::{IntervalExcess, RecordSummary};
use proftrust_supervise::StopSignal;
use std::time::Duration;

/// What to record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordTarget {
    /// Start this program (and arguments) and record it, its threads and children.
    Command(Vec<String>),
    /// Attach to this running process until it exits, the timeout or the stop signal.
    Pid(i32),
}

/// Settings of [`execute`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct RecordRunOptions {
    /// What to record. Default: an empty command (an error: give one).
    pub target: RecordTarget,
    /// Events, each as perf spells them: a name (`cpu-clock`, `task-clock`, `cycles`,
    /// `instructions`, `rHEX`, with `:p` modifiers) or a comma-separated list of names
    /// (`instructions,cycles`); `-e a,b` and `-e a -e b` are the same. Default `cpu-clock`.
    pub events: Vec<String>,
    /// Fixed period (events, or ns for clock events). Default: the event's prime
    /// (`proftrust_record::DEFAULT_CLOCK_PERIOD_NS` for clocks).
    pub period: Option<u64>,
    /// Frequency in Hz instead of a period. Default none.
    pub frequency: Option<u64>,
    /// Randomise the period (seed 001 §4: `T + U(0, T/8)`). Default false.
    pub randomize: bool,
    /// Seed of every random choice (stored in the sample set). Default
    /// [`crate::DEFAULT_SEED`].
    pub seed: u64,
    /// Frame-pointer user call chains. Default false.
    pub callchain: bool,
    /// DWARF call chains: bytes of user stack copied per sample (`--call-graph
    /// dwarf[,SIZE]`), unwound with the binaries' call-frame information. Default none.
    pub dwarf_stack: Option<u32>,
    /// Branch stacks. Default false.
    pub branch_stack: bool,
    /// Sample kernel code too. Default false (user space only).
    pub kernel: bool,
    /// Stop the program after this long (the samples so far are returned). Default none.
    pub timeout: Option<Duration>,
    /// Raised to end the recording early. Default none.
    pub stop: Option<StopSignal>,
}

impl Default for RecordRunOptions {
    fn default() -> Self {
        RecordRunOptions {
            target: RecordTarget::Command(Vec::new()),
            events: vec!["cpu-clock".into()],
            period: None,
            frequency: None,
            randomize: false,
            seed: crate::DEFAULT_SEED,
            callchain: false,
            dwarf_stack: None,
            branch_stack: false,
            kernel: false,
            timeout: None,
            stop: None,
        }
    }
}

/// A recording and what it holds.
#[derive(Debug, Clone)]
pub struct RecordReport {
    /// The samples, the seed, how the program ended (`Recording::exec_error` when it could
    /// not be started).
    pub recording: Recording,
    /// Seed, totals and the recorder's counters.
    pub summary: RecordSummary,
}

/// How call chains are recorded, as perf's `--call-graph` spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallGraph {
    /// `fp`: the kernel follows the frame pointers (`-g`).
    FramePointer,
    /// `dwarf[,SIZE]`: SIZE bytes of user stack (default 8192, perf's) copied per sample
    /// and unwound with the binaries' call-frame information.
    Dwarf {
        /// Bytes of stack copied per sample.
        stack: u32,
    },
}

/// perf's default stack copy of `--call-graph dwarf`.
pub const DEFAULT_DWARF_STACK: u32 = 8192;

impl CallGraph {
    /// `fp`, `dwarf` or `dwarf,SIZE` (SIZE a multiple of 8, 8 to 65528, as perf takes it).
    pub fn parse(s: &str) -> std::result::Result<CallGraph, String> {
        let (mode, size) = match s.split_once(',') {
            Some((m, n)) => (m, Some(n)),
            None => (s, None),
        };
        match (mode, size) {
            ("fp", None) => Ok(CallGraph::FramePointer),
            ("dwarf", None) => Ok(CallGraph::Dwarf {
                stack: DEFAULT_DWARF_STACK,
            }),
            ("dwarf", Some(n)) => match n.trim().parse::<u32>() {
                Ok(v) if v > 0 && v % 8 == 0 && v <= 65528 => Ok(CallGraph::Dwarf { stack: v }),
                _ => Err(format!(
                    "the stack size of dwarf,SIZE must be a multiple of 8 from 8 to 65528, not {n}"
                )),
            },
            _ => Err(format!(
                "unknown call-graph mode {s}: give fp (frame pointers, as -g) or dwarf[,SIZE]"
            )),
        }
    }
}

/// The events of `specs`, each a name or a comma-separated list as perf takes them.
pub fn parse_events(specs: &[String]) -> Result<Vec<EventSpec>> {
    let mut out = Vec::new();
    for s in specs {
        out.extend(EventSpec::parse_list(s)?);
    }
    Ok(out)
}

/// Records the target and returns the samples with their summary.
pub fn execute(a: &RecordRunOptions, events: &dyn Events) -> Result<RecordReport> {
    let mut opts = RecordOptions::default();
    opts.events = parse_events(&a.events)?;
    opts.period = a.period;
    opts.frequency = a.frequency;
    opts.randomize = a.randomize;
    opts.seed = Some(a.seed);
    opts.callchain = a.callchain;
    opts.dwarf_stack = a.dwarf_stack;
    opts.branch_stack = a.branch_stack;
    opts.user_only = !a.kernel;
    opts.timeout = a.timeout;
    opts.stop = a.stop.clone();
    let target = match &a.target {
        RecordTarget::Pid(pid) => Target::Pid(*pid),
        RecordTarget::Command(c) if !c.is_empty() => Target::Command(c.clone()),
        RecordTarget::Command(_) => bail_options!(
            "nothing to record: give a program after `--` (proftrust record -o FILE -- PROGRAM ARGS) or --pid PID"
        ),
    };
    let task = events.task(None, "recording");
    let rec = record(&target, &opts);
    task.finish();
    let rec = rec?;
    let s = &rec.stats;
    let summary = RecordSummary {
        seed: rec.seed,
        samples: rec.samples.samples.len(),
        lost: rec.samples.lost,
        modules: rec.samples.modules.len(),
        batches: s.batches,
        period_updates: s.period_updates,
        throttled: s.throttled,
        unmapped_samples: s.unmapped_samples,
        unrandomized_samples: s.unrandomized_samples,
        interval_excess: IntervalExcess::of(&s.interval_excess),
    };
    Ok(RecordReport {
        recording: rec,
        summary,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// perf's spellings of --call-graph.
    #[test]
    fn call_graph_modes_as_perf_spells_them() {
        assert_eq!(CallGraph::parse("fp"), Ok(CallGraph::FramePointer));
        assert_eq!(
            CallGraph::parse("dwarf"),
            Ok(CallGraph::Dwarf { stack: 8192 })
        );
        assert_eq!(
            CallGraph::parse("dwarf,16384"),
            Ok(CallGraph::Dwarf { stack: 16384 })
        );
        for bad in ["dwarf,12", "dwarf,0", "dwarf,70000", "lbr", "fp,8"] {
            assert!(CallGraph::parse(bad).is_err(), "{bad}");
        }
    }

    /// perf's spellings: `-e a,b` and `-e a -e b` name the same events, in order.
    #[test]
    fn event_lists_as_perf_spells_them() {
        let names = |v: &[&str]| -> Vec<String> {
            let specs: Vec<String> = v.iter().map(|s| s.to_string()).collect();
            parse_events(&specs)
                .unwrap()
                .into_iter()
                .map(|e| e.name)
                .collect()
        };
        assert_eq!(
            names(&["cpu-clock,task-clock"]),
            ["cpu-clock", "task-clock"]
        );
        assert_eq!(
            names(&["cpu-clock", "task-clock"]),
            ["cpu-clock", "task-clock"]
        );
        assert!(parse_events(&["cpu-clock,bogus".into()]).is_err());
    }
}
