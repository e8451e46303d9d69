//! Sampled profiles.

use crate::addr::{Location, ModuleTable};
use crate::exact::RunOutcome;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// What kind of event drives the sampling.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EventKind {
    /// Software timer, period in nanoseconds (`cpu-clock`).
    CpuClock,
    /// Software per-task timer, period in nanoseconds (`task-clock`).
    TaskClock,
    /// Hardware cycles (needs a PMU).
    Cycles,
    /// Hardware retired instructions (needs a PMU).
    Instructions,
    /// A raw hardware event code (needs a PMU).
    Raw(u64),
    /// Anything else a foreign file names; see [`EventDesc::name`].
    Other,
}

impl EventKind {
    /// Whether the event needs a hardware PMU.
    pub fn is_hardware(self) -> bool {
        matches!(
            self,
            EventKind::Cycles | EventKind::Instructions | EventKind::Raw(_)
        )
    }
    /// The kind as perf spells the event: `cpu-clock`, `task-clock`, `cycles`,
    /// `instructions`, `r1c0` (a raw code), `other`.
    pub fn perf_name(self) -> String {
        match self {
            EventKind::CpuClock => "cpu-clock".into(),
            EventKind::TaskClock => "task-clock".into(),
            EventKind::Cycles => "cycles".into(),
            EventKind::Instructions => "instructions".into(),
            EventKind::Raw(code) => format!("r{code:x}"),
            EventKind::Other => "other".into(),
        }
    }
    /// Whether the period of this event counts time (ns) rather than events.
    pub fn is_time_based(self) -> bool {
        matches!(self, EventKind::CpuClock | EventKind::TaskClock)
    }
}

/// How the sampling period was chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "mode", content = "value")]
pub enum PeriodMode {
    /// A sample every `n` events (or nanoseconds for clock events).
    Fixed(u64),
    /// The kernel adjusts the period to reach `hz` samples per second.
    Frequency(u64),
    /// Unknown (foreign file that does not say).
    Unknown,
}

/// The sampling configuration of one event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SamplingConfig {
    /// Fixed period or frequency.
    pub period: PeriodMode,
    /// Period randomisation (seed 001 §4): each next period is `T + U(0, T/8)`, `None` = off.
    /// Stored as the maximum added value (`T/8`).
    pub randomize_max: Option<u64>,
    /// Precise level 0-3 (`:p` count).
    pub precise: u8,
    /// Seed of every random choice made while sampling.
    pub seed: Option<u64>,
    /// Kernel samples excluded.
    pub user_only: bool,
    /// Call chains recorded.
    pub callchain: bool,
    /// Branch stacks recorded.
    pub branch_stack: bool,
}

impl Default for SamplingConfig {
    fn default() -> Self {
        SamplingConfig {
            period: PeriodMode::Unknown,
            randomize_max: None,
            precise: 0,
            seed: None,
            user_only: true,
            callchain: false,
            branch_stack: false,
        }
    }
}

/// One event in a sample set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventDesc {
    /// Name as the user wrote it or the file states it (`cpu-clock`, `cycles:pp`).
    pub name: String,
    /// The kind.
    pub kind: EventKind,
    /// How it was sampled.
    pub config: SamplingConfig,
}

/// One branch-stack entry (LBR): a taken branch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Branch {
    /// Branch instruction.
    pub from: Location,
    /// Branch target.
    pub to: Location,
    /// Mispredicted, when the hardware says (`M`); `false` for predicted or unknown.
    pub mispredicted: bool,
    /// Whether prediction information was present at all (`P` or `M` rather than `-`).
    pub predicted_known: bool,
    /// Cycles since the previous branch entry, 0 when not recorded.
    pub cycles: u32,
}

/// One sample.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sample {
    /// Index into [`SampleSet::events`].
    pub event: u16,
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// Time stamp, nanoseconds (perf clock), 0 if unknown.
    pub time: u64,
    /// CPU, `u32::MAX` if unknown.
    pub cpu: u32,
    /// The period this sample stands for (events or ns).
    pub period: u64,
    /// The sampled instruction pointer.
    pub ip: Location,
    /// Call chain, innermost first, *excluding* `ip` itself; empty when not recorded.
    pub callchain: Vec<Location>,
    /// Branch stack, most recent first; empty when not recorded.
    pub branches: Vec<Branch>,
}

/// Samples of one or more events, with the modules they refer to.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SampleSet {
    /// Modules referenced by the samples' locations.
    pub modules: ModuleTable,
    /// Events, indexed by [`Sample::event`].
    pub events: Vec<EventDesc>,
    /// The samples in time order (as recorded).
    pub samples: Vec<Sample>,
    /// Samples the kernel reported lost (ring buffer overflow), per file.
    pub lost: u64,
    /// Command line that was profiled, when known.
    pub command: Vec<String>,
    /// How the profiled program ended, when known.
    pub outcome: Option<RunOutcome>,
    /// Throttling and multiplexing, as far as the file says.
    pub health: RecordingHealth,
    /// Threads' names over time, in file order (perf.data's `PERF_RECORD_COMM`, the comm
    /// column of `perf script` text); empty when the format does not carry them.
    #[serde(default)]
    pub threads: Vec<ThreadName>,
    /// New processes and threads in file order (perf.data's `PERF_RECORD_FORK`, the
    /// recorder's fork records); empty when the format does not carry them. With
    /// [`SampleSet::threads`] they give the process images ([`SampleSet::images`]).
    #[serde(default)]
    pub forks: Vec<crate::process::ThreadStart>,
    /// Kernel functions copied from `/proc/kallsyms` when the samples were recorded (the
    /// ones the kernel samples and call chains fall in, each with its extent), sorted by
    /// address; empty when the recorder saw none or the format does not carry them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kernel_symbols: Vec<crate::symbols::KernelSymbol>,
}

/// [`SampleSet::threads`] per thread, each list in time order (stable: file order within
/// one time stamp).
#[derive(Debug, Clone)]
pub struct CommIndex<'a> {
    by_tid: HashMap<u32, Vec<&'a ThreadName>>,
    /// Names of each process's main thread (`tid == pid`).
    by_process: HashMap<u32, Vec<&'a ThreadName>>,
}

impl<'a> CommIndex<'a> {
    /// The name of thread `tid` at time `time`: the last [`ThreadName`] of that thread at or
    /// before `time` (perf's rule for the comm column; of equal time stamps the later in the
    /// file), else the thread's first name (a COMM record's time stamp can trail the first
    /// sample of a thread), else its process's name by the same rule (a thread created by
    /// `clone` inherits it and perf records no COMM for it unless it renames itself).
    pub fn at(&self, pid: u32, tid: u32, time: u64) -> Option<&'a str> {
        let pick = |v: &[&'a ThreadName]| -> Option<&'a str> {
            let n = v.partition_point(|t| t.time <= time);
            let t = if n > 0 { v[n - 1] } else { *v.first()? };
            Some(t.comm.as_str())
        };
        self.by_tid
            .get(&tid)
            .and_then(|v| pick(v))
            .or_else(|| self.by_process.get(&pid).and_then(|v| pick(v)))
    }
}

/// A thread's name from a time on, as perf's `PERF_RECORD_COMM` states it: the kernel's
/// `comm` (the program's file name cut to 15 bytes at `exec`, or what `prctl(PR_SET_NAME)`
/// set). perf script's comm column is the name in force at the sample's time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadName {
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// Time stamp from which the name holds (0: from the start, or unknown).
    pub time: u64,
    /// The name.
    pub comm: String,
    /// Whether the name came with an `execve` (the thread now runs a new program).
    pub exec: bool,
}

/// What a recording says about its own health beyond lost samples: throttling (the kernel
/// stopped an event's interrupts for a while, `PERF_RECORD_THROTTLE` / `UNTHROTTLE`) and
/// multiplexing (an event counted for less time than it was enabled, from the
/// `PERF_FORMAT_TOTAL_TIME_ENABLED` / `RUNNING` values of `PERF_SAMPLE_READ` samples and
/// `PERF_RECORD_READ` records). All zero / empty when the format cannot say.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordingHealth {
    /// `PERF_RECORD_THROTTLE` records, per file.
    pub throttles: u64,
    /// `PERF_RECORD_UNTHROTTLE` records, per file.
    pub unthrottles: u64,
    /// Nanoseconds between each throttle and the next unthrottle of the same event stream
    /// (a throttle without an unthrottle counts up to the last time stamp of the file).
    pub throttled_ns: u64,
    /// Enabled and running time per event, where the file carries them.
    pub event_times: Vec<EventTimes>,
}

/// Time an event was enabled and running, summed over its streams (threads, CPUs): the last
/// `time_enabled` / `time_running` values each stream reported.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventTimes {
    /// Index into [`SampleSet::events`].
    pub event: u16,
    /// Nanoseconds the event was enabled.
    pub enabled_ns: u64,
    /// Nanoseconds it was actually counting (on the PMU); less than `enabled_ns` when the
    /// kernel multiplexed it with other events.
    pub running_ns: u64,
}

impl EventTimes {
    /// `running / enabled`, 1 when nothing was enabled.
    pub fn running_fraction(&self) -> f64 {
        if self.enabled_ns == 0 {
            1.0
        } else {
            self.running_ns as f64 / self.enabled_ns as f64
        }
    }
}

/// [`SampleSet::event_named`] found no event of that name: the names the set has, for the
/// message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the profile has no event {name}; it has {}", if .available.is_empty() { "none".to_string() } else { .available.join(", ") })]
pub struct NoSuchEvent {
    /// The name asked for.
    pub name: String,
    /// The events the set has, in index order.
    pub available: Vec<String>,
}

impl SampleSet {
    /// The index of the event named `name` (exactly as the file names it, e.g. `cycles:pp`,
    /// `cpu-clock:u`), or an error listing the events the set has. The one lookup of an event
    /// by name (`check --event`, `audit --sample-event`, `export --event`).
    pub fn event_named(&self, name: &str) -> Result<u16, NoSuchEvent> {
        match self.events.iter().position(|e| e.name == name) {
            Some(i) => Ok(i as u16),
            None => Err(NoSuchEvent {
                name: name.to_string(),
                available: self.events.iter().map(|e| e.name.clone()).collect(),
            }),
        }
    }

    /// Number of samples of event `e`.
    pub fn count_for_event(&self, e: u16) -> u64 {
        self.samples.iter().filter(|s| s.event == e).count() as u64
    }

    /// The events' names, comma-separated (what messages list as the choices).
    pub fn event_names(&self) -> String {
        self.events
            .iter()
            .map(|e| e.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The event a command takes when none is named: the first that has samples (the
    /// first event when none has), so that a recording whose first event is empty (a
    /// hybrid CPU's `cpu_atom/cycles/` beside a `cpu_core/cycles/` that took every sample)
    /// is not read as empty, while a recording whose events all have samples keeps perf
    /// report's order. `None` when the set names no event.
    pub fn default_event(&self) -> Option<u16> {
        if self.events.is_empty() {
            return None;
        }
        let mut seen = vec![false; self.events.len()];
        for s in &self.samples {
            if let Some(c) = seen.get_mut(usize::from(s.event)) {
                *c = true;
            }
        }
        Some(seen.iter().position(|&b| b).unwrap_or(0) as u16)
    }

    /// The name of thread `tid` at time `time` (see [`CommIndex::at`]). One lookup scans
    /// the names once; for many samples build [`SampleSet::comm_index`] once.
    pub fn comm_at(&self, pid: u32, tid: u32, time: u64) -> Option<&str> {
        self.comm_index().at(pid, tid, time)
    }

    /// The threads' names indexed per thread and in time order, for per-sample lookups.
    pub fn comm_index(&self) -> CommIndex<'_> {
        let mut by_tid: HashMap<u32, Vec<&ThreadName>> = HashMap::new();
        let mut by_process: HashMap<u32, Vec<&ThreadName>> = HashMap::new();
        for t in &self.threads {
            by_tid.entry(t.tid).or_default().push(t);
            if t.tid == t.pid {
                by_process.entry(t.pid).or_default().push(t);
            }
        }
        // Stable: names of equal time stamps stay in file order.
        for v in by_tid.values_mut().chain(by_process.values_mut()) {
            v.sort_by_key(|t| t.time);
        }
        CommIndex { by_tid, by_process }
    }

    /// The program the recording is about, by the threads' names: the name the process
    /// with the most samples had at exec (else its latest name). `None` when the file
    /// carries no names.
    pub fn program_comm(&self) -> Option<&str> {
        let mut per_pid: std::collections::BTreeMap<u32, u64> = Default::default();
        for s in &self.samples {
            *per_pid.entry(s.pid).or_default() += 1;
        }
        let (&pid, _) = per_pid
            .iter()
            .filter(|(p, _)| self.threads.iter().any(|t| t.pid == **p))
            .max_by_key(|(p, n)| (**n, std::cmp::Reverse(**p)))?;
        let own = || self.threads.iter().filter(|t| t.pid == pid);
        own()
            .rfind(|t| t.exec && t.tid == pid)
            .or_else(|| own().rfind(|t| t.tid == pid))
            .or_else(|| own().next_back())
            .map(|t| t.comm.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ModuleIdx;

    fn name(pid: u32, tid: u32, time: u64, comm: &str, exec: bool) -> ThreadName {
        ThreadName {
            pid,
            tid,
            time,
            comm: comm.into(),
            exec,
        }
    }

    fn sample(pid: u32, tid: u32) -> Sample {
        Sample {
            event: 0,
            pid,
            tid,
            time: 0,
            cpu: 0,
            period: 1,
            ip: Location::new(ModuleIdx(0), 0x1000),
            callchain: Vec::new(),
            branches: Vec::new(),
        }
    }

    /// One lookup by name: the index, or every name the set has in the message.
    #[test]
    fn event_named_finds_or_lists() {
        let ev = |name: &str| EventDesc {
            name: name.into(),
            kind: EventKind::Other,
            config: SamplingConfig::default(),
        };
        let set = SampleSet {
            events: vec![ev("cycles:pp"), ev("cpu-clock:u")],
            ..Default::default()
        };
        assert_eq!(set.event_named("cpu-clock:u"), Ok(1));
        let e = set.event_named("cycles").unwrap_err();
        assert_eq!(
            e.to_string(),
            "the profile has no event cycles; it has cycles:pp, cpu-clock:u"
        );
        let empty = SampleSet::default();
        assert_eq!(
            empty.event_named("x").unwrap_err().to_string(),
            "the profile has no event x; it has none"
        );
    }

    /// perf's comm rule by hand: the name in force at the time; before a thread's first
    /// record, its first name; a thread without records, its process's name.
    #[test]
    fn comm_at_follows_the_records() {
        let set = SampleSet {
            threads: vec![
                name(10, 10, 100, "perf-exec", false),
                name(10, 10, 200, "prog", true),
                name(10, 11, 300, "worker", false),
                name(20, 20, 400, "child", true),
            ],
            ..Default::default()
        };
        assert_eq!(set.comm_at(10, 10, 150), Some("perf-exec"));
        assert_eq!(set.comm_at(10, 10, 200), Some("prog"));
        assert_eq!(set.comm_at(10, 10, 999), Some("prog"));
        assert_eq!(set.comm_at(10, 10, 50), Some("perf-exec"));
        assert_eq!(set.comm_at(10, 11, 350), Some("worker"));
        // Thread 12 has no record: its process's name at that time.
        assert_eq!(set.comm_at(10, 12, 250), Some("prog"));
        assert_eq!(set.comm_at(20, 20, 500), Some("child"));
        assert_eq!(set.comm_at(30, 30, 500), None);
    }

    /// Issue 31 item 4: the first event of a hybrid CPU's recording is empty; the event
    /// taken by default is the first with samples.
    #[test]
    fn default_event_and_events_by_name() {
        let ev = |name: &str| EventDesc {
            name: name.into(),
            kind: crate::EventKind::Cycles,
            config: SamplingConfig::default(),
        };
        let mut set = SampleSet {
            events: vec![ev("cpu_atom/cycles/"), ev("cpu_core/cycles/")],
            ..Default::default()
        };
        assert_eq!(set.default_event(), Some(0), "no samples: the first");
        for _ in 0..3 {
            set.samples.push(Sample {
                event: 1,
                ..sample(1, 1)
            });
        }
        assert_eq!(set.default_event(), Some(1));
        // Both with samples: the first, though the second has more.
        set.samples.push(sample(1, 1));
        assert_eq!(set.default_event(), Some(0));
        assert_eq!(set.event_named("cpu_core/cycles/"), Ok(1));
        assert_eq!(set.event_names(), "cpu_atom/cycles/, cpu_core/cycles/");
        assert_eq!(SampleSet::default().default_event(), None);
    }

    /// The program is the exec name of the process with the most samples.
    #[test]
    fn program_comm_is_the_busiest_process_exec_name() {
        let mut set = SampleSet {
            threads: vec![
                name(10, 10, 100, "prog", true),
                name(10, 10, 150, "renamed", false),
                name(20, 20, 400, "child", true),
            ],
            samples: vec![sample(10, 10), sample(20, 20), sample(10, 11)],
            ..Default::default()
        };
        assert_eq!(set.program_comm(), Some("prog"));
        set.samples.extend([sample(20, 20), sample(20, 20)]);
        assert_eq!(set.program_comm(), Some("child"));
        set.threads.clear();
        assert_eq!(set.program_comm(), None);
    }
}
