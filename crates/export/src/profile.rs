//! The one shape every exporter reads: weighted call stacks of module-relative locations.
//!
//! A [`Profile`] is built from any profile proftrust holds — a [`SampleSet`] (read,
//! recorded or virtual-PMU samples, with call chains where the source has them), an
//! [`ExactProfile`] (exact per-instruction counts: flat stacks of one location), or
//! per-location estimates such as a skid-corrected profile
//! ([`Profile::from_location_counts`]). Values are `f64` so corrected estimates keep their
//! fractions until a writer that needs integers rounds them; exact counts below 2^53 are
//! represented exactly.

use proftrust_model::{EventKind, ExactProfile, Location, ModuleTable, PeriodMode, SampleSet};
use smallvec::{smallvec, SmallVec};
use std::collections::{BTreeMap, HashMap};

/// What one value column measures (pprof's `ValueType`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValueType {
    /// What is counted: `samples`, `cpu-clock`, `instructions`.
    pub kind: String,
    /// Its unit: `count`, `nanoseconds`.
    pub unit: String,
}

impl ValueType {
    /// A value type.
    pub fn new(kind: impl Into<String>, unit: impl Into<String>) -> ValueType {
        ValueType {
            kind: kind.into(),
            unit: unit.into(),
        }
    }
}

/// Where a profile's numbers come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// Samples of a sampling profiler (or the virtual PMU).
    Sampled,
    /// Exact counts (QEMU plugin, callgrind).
    Exact,
    /// Estimates computed from samples (skid-corrected).
    Estimated,
}

/// Frames of a stack, leaf first; one is held inline.
pub type Frames = SmallVec<[Location; 1]>;

/// Values of a stack; two (a sampled event's samples and periods) are held inline.
pub type Values = SmallVec<[f64; 2]>;

/// One call stack with its values (parallel to [`Profile::value_types`]). A flat stack of
/// one or two columns holds no heap memory of its own (48 bytes): an exact profile of 27
/// million addresses is 1.3 GB of stacks, not 3.
#[derive(Debug, Clone, PartialEq)]
pub struct Stack {
    /// Leaf first: `frames[0]` is the sampled instruction, the others are return addresses
    /// of the callers (as recorded: symbolizers look up the call at `address - 1`).
    pub frames: Frames,
    /// One value per value type.
    pub values: Values,
}

/// One sample in time order (sampled profiles only), for timeline views.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimedSample {
    /// Index into [`Profile::stacks`].
    pub stack: usize,
    /// Nanoseconds (perf clock; 0 when unknown).
    pub time: u64,
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// Event index of the source sample set.
    pub event: u16,
    /// The period the sample stands for.
    pub period: u64,
}

/// Weighted call stacks ready for export (module docs).
#[derive(Debug, Clone, PartialEq)]
pub struct Profile {
    /// Modules the locations refer to.
    pub modules: ModuleTable,
    /// A title: the profiled command, or what the profile is.
    pub title: String,
    /// Where the numbers come from.
    pub origin: Origin,
    /// The value columns.
    pub value_types: Vec<ValueType>,
    /// The column a viewer shows first (pprof's `default_sample_type`).
    pub default_value: usize,
    /// Per value column, the event of the sample set it counts (sampled profiles; `None`
    /// elsewhere): a timeline sample counts in a column only when its event is that one.
    pub column_events: Vec<Option<u16>>,
    /// The sampling period and what it counts, when it was fixed.
    pub period: Option<(ValueType, u64)>,
    /// Distinct stacks with their summed values, in first-seen order.
    pub stacks: Vec<Stack>,
    /// The samples in time order (sampled profiles; empty otherwise).
    pub timeline: Vec<TimedSample>,
    /// Whether any stack has callers (call chains were recorded).
    pub has_callers: bool,
    /// Time span of the samples in nanoseconds (0 when unknown).
    pub duration_ns: u64,
    /// Each sampled thread's name (`comm`) at its first sample, by (pid, tid): sampled
    /// profiles whose file names its threads; empty otherwise.
    pub thread_names: BTreeMap<(u32, u32), String>,
}

fn unit_of(kind: EventKind) -> &'static str {
    if kind.is_time_based() {
        "nanoseconds"
    } else {
        "count"
    }
}

impl Profile {
    /// From samples. `event` picks one event of the set; `None` keeps every event, each
    /// with two columns (its samples, and its periods summed in the event's unit). The
    /// first column (samples of the first kept event) is the default, so a viewer's numbers
    /// are the per-symbol sample counts `proftrust read` prints.
    pub fn from_samples(set: &SampleSet, event: Option<u16>) -> Profile {
        let events: Vec<u16> = match event {
            Some(e) => vec![e],
            None => (0..set.events.len() as u16).collect(),
        };
        let single = events.len() == 1;
        let mut value_types = Vec::new();
        let mut column_events = Vec::new();
        let mut column: HashMap<u16, usize> = HashMap::new();
        for &e in &events {
            let desc = set.events.get(e as usize);
            let name = desc.map_or_else(|| format!("event{e}"), |d| d.name.clone());
            let unit = desc.map_or("count", |d| unit_of(d.kind));
            column.insert(e, value_types.len());
            column_events.push(Some(e));
            column_events.push(Some(e));
            if single {
                value_types.push(ValueType::new("samples", "count"));
            } else {
                value_types.push(ValueType::new(format!("{name}-samples"), "count"));
            }
            value_types.push(ValueType::new(name, unit));
        }
        let period = match events.as_slice() {
            [e] => set
                .events
                .get(*e as usize)
                .and_then(|d| match d.config.period {
                    PeriodMode::Fixed(p) => {
                        Some((ValueType::new(d.name.clone(), unit_of(d.kind)), p))
                    }
                    _ => None,
                }),
            _ => None,
        };
        let ncol = value_types.len();
        let mut index: HashMap<Vec<Location>, usize> = HashMap::new();
        let mut stacks: Vec<Stack> = Vec::new();
        let mut timeline = Vec::new();
        let mut has_callers = false;
        let (mut tmin, mut tmax) = (u64::MAX, 0u64);
        let mut key = Vec::new();
        let comms = set.comm_index();
        let mut thread_names = BTreeMap::new();
        for s in &set.samples {
            let Some(&col) = column.get(&s.event) else {
                continue;
            };
            key.clear();
            key.push(s.ip);
            key.extend_from_slice(&s.callchain);
            has_callers |= !s.callchain.is_empty();
            let i = match index.get(&key) {
                Some(&i) => i,
                None => {
                    index.insert(key.clone(), stacks.len());
                    stacks.push(Stack {
                        frames: key.iter().copied().collect(),
                        values: smallvec![0.0; ncol],
                    });
                    stacks.len() - 1
                }
            };
            stacks[i].values[col] += 1.0;
            stacks[i].values[col + 1] += s.period as f64;
            if s.time != 0 {
                tmin = tmin.min(s.time);
                tmax = tmax.max(s.time);
            }
            if let std::collections::btree_map::Entry::Vacant(v) =
                thread_names.entry((s.pid, s.tid))
            {
                if let Some(name) = comms.at(s.pid, s.tid, s.time) {
                    v.insert(name.to_string());
                }
            }
            timeline.push(TimedSample {
                stack: i,
                time: s.time,
                pid: s.pid,
                tid: s.tid,
                event: s.event,
                period: s.period,
            });
        }
        Profile {
            modules: set.modules.clone(),
            title: if set.command.is_empty() {
                "samples".into()
            } else {
                set.command.join(" ")
            },
            origin: Origin::Sampled,
            value_types,
            default_value: 0,
            column_events,
            period,
            stacks,
            timeline,
            has_callers,
            duration_ns: tmax.saturating_sub(tmin.min(tmax)),
            thread_names,
        }
    }

    /// From exact counts: one flat stack per executed instruction, valued by its executions
    /// (`instructions`), plus one column per extra cost (callgrind events such as `D1mr`).
    pub fn from_exact(e: &ExactProfile) -> Profile {
        let mut value_types = vec![ValueType::new("instructions", "count")];
        value_types.extend(
            e.extra_cost_names
                .iter()
                .map(|n| ValueType::new(n.clone(), "count")),
        );
        let ncol = value_types.len();
        let stacks = e
            .instructions
            .iter()
            .enumerate()
            .filter(|(_, ic)| ic.count > 0)
            .map(|(i, ic)| {
                let mut values = Values::with_capacity(ncol);
                values.push(ic.count as f64);
                for c in 0..ncol - 1 {
                    values.push(
                        e.extra_costs
                            .get(i)
                            .and_then(|v| v.get(c))
                            .map_or(0.0, |&x| x as f64),
                    );
                }
                Stack {
                    frames: smallvec![ic.loc],
                    values,
                }
            })
            .collect();
        Profile {
            modules: e.modules.clone(),
            title: if e.command.is_empty() {
                format!("exact counts ({})", e.backend)
            } else {
                e.command.join(" ")
            },
            origin: Origin::Exact,
            column_events: vec![None; value_types.len()],
            value_types,
            default_value: 0,
            period: None,
            stacks,
            timeline: Vec::new(),
            has_callers: false,
            duration_ns: 0,
            thread_names: BTreeMap::new(),
        }
    }

    /// From per-location estimates (a skid-corrected profile's instruction estimates):
    /// flat stacks, sorted by location, zero and negative estimates left out.
    pub fn from_location_counts(
        modules: &ModuleTable,
        counts: impl IntoIterator<Item = (Location, f64)>,
        value: ValueType,
        origin: Origin,
        title: impl Into<String>,
    ) -> Profile {
        let mut v: Vec<(Location, f64)> = counts
            .into_iter()
            .filter(|(_, c)| c.is_finite() && *c > 0.0)
            .collect();
        v.sort_by_key(|(l, _)| *l);
        let mut stacks: Vec<Stack> = Vec::with_capacity(v.len());
        for (l, c) in v {
            match stacks.last_mut() {
                Some(s) if s.frames[0] == l => s.values[0] += c,
                _ => stacks.push(Stack {
                    frames: smallvec![l],
                    values: smallvec![c],
                }),
            }
        }
        Profile {
            modules: modules.clone(),
            title: title.into(),
            origin,
            value_types: vec![value],
            default_value: 0,
            column_events: vec![None],
            period: None,
            stacks,
            timeline: Vec::new(),
            has_callers: false,
            duration_ns: 0,
            thread_names: BTreeMap::new(),
        }
    }

    /// Whether timeline sample `t` counts in column `v`.
    pub fn counts_in(&self, t: &TimedSample, v: usize) -> bool {
        match self.column_events.get(v) {
            Some(Some(e)) => *e == t.event,
            _ => true,
        }
    }

    /// Total of column `v`.
    pub fn total(&self, v: usize) -> f64 {
        self.stacks
            .iter()
            .map(|s| s.values.get(v).copied().unwrap_or(0.0))
            .sum()
    }

    /// Per-location totals of column `v` at the leaf (self cost), sorted by location.
    pub fn self_counts(&self, v: usize) -> Vec<(Location, f64)> {
        let mut m: HashMap<Location, f64> = HashMap::new();
        for s in &self.stacks {
            if let (Some(&l), Some(&x)) = (s.frames.first(), s.values.get(v)) {
                *m.entry(l).or_default() += x;
            }
        }
        let mut out: Vec<(Location, f64)> = m.into_iter().collect();
        out.sort_by_key(|(l, _)| *l);
        out
    }

    /// The same profile with every stack cut to its leaf (for comparing a profile with
    /// call chains against a flat one).
    pub fn flattened(&self) -> Profile {
        let ncol = self.value_types.len();
        let mut index: HashMap<Location, usize> = HashMap::new();
        let mut stacks: Vec<Stack> = Vec::new();
        for s in &self.stacks {
            let Some(&leaf) = s.frames.first() else {
                continue;
            };
            let i = *index.entry(leaf).or_insert_with(|| {
                stacks.push(Stack {
                    frames: smallvec![leaf],
                    values: smallvec![0.0; ncol],
                });
                stacks.len() - 1
            });
            for (a, b) in stacks[i].values.iter_mut().zip(&s.values) {
                *a += b;
            }
        }
        Profile {
            stacks,
            timeline: Vec::new(),
            has_callers: false,
            ..self.clone()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proftrust_model::{EventDesc, InstrCount, Module, ModuleIdx, Sample, SamplingConfig};

    fn sample(ip: u64, chain: &[u64], event: u16, period: u64) -> Sample {
        let m = ModuleIdx(0);
        Sample {
            event,
            pid: 1,
            tid: 1,
            time: 1000 + ip,
            cpu: 0,
            period,
            ip: Location::new(m, ip),
            callchain: chain.iter().map(|&a| Location::new(m, a)).collect(),
            branches: Vec::new(),
        }
    }

    #[test]
    fn samples_are_grouped_per_stack_with_samples_and_periods() {
        let mut set = SampleSet::default();
        set.modules.intern(Module::new("/bin/a"));
        for (name, kind) in [
            ("cpu-clock", EventKind::CpuClock),
            ("instructions", EventKind::Instructions),
        ] {
            set.events.push(EventDesc {
                name: name.into(),
                kind,
                config: SamplingConfig::default(),
            });
        }
        set.samples = vec![
            sample(0x10, &[0x50], 0, 100),
            sample(0x10, &[0x50], 0, 100),
            sample(0x10, &[0x60], 0, 100),
            sample(0x20, &[], 1, 7),
        ];
        let all = Profile::from_samples(&set, None);
        assert_eq!(all.value_types.len(), 4);
        assert_eq!(
            all.value_types[1],
            ValueType::new("cpu-clock", "nanoseconds")
        );
        assert_eq!(all.stacks.len(), 3);
        assert_eq!(all.stacks[0].values[..], [2.0, 200.0, 0.0, 0.0]);
        assert_eq!(all.stacks[2].values[..], [0.0, 0.0, 1.0, 7.0]);
        assert!(all.has_callers);
        assert_eq!(all.timeline.len(), 4);
        let one = Profile::from_samples(&set, Some(1));
        assert_eq!(one.value_types[0], ValueType::new("samples", "count"));
        assert_eq!(one.stacks.len(), 1);
        assert_eq!(one.total(1), 7.0);
        let flat = all.flattened();
        assert_eq!(flat.stacks.len(), 2);
        assert_eq!(flat.stacks[0].values[0], 3.0);
    }

    #[test]
    fn exact_counts_are_flat_stacks_with_extra_costs() {
        let m = ModuleIdx(0);
        let e = ExactProfile {
            instructions: vec![
                InstrCount {
                    loc: Location::new(m, 0x10),
                    count: 5,
                },
                InstrCount {
                    loc: Location::new(m, 0x14),
                    count: 0,
                },
            ],
            extra_cost_names: vec!["D1mr".into()],
            extra_costs: vec![vec![2], vec![0]],
            ..Default::default()
        };
        let p = Profile::from_exact(&e);
        assert_eq!(p.stacks.len(), 1);
        assert_eq!(p.stacks[0].values[..], [5.0, 2.0]);
        assert_eq!(p.value_types[1].kind, "D1mr");
    }
}
