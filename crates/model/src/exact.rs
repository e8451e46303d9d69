//! Exact profiles: what really executed.

use crate::addr::{Location, ModuleTable};
use serde::{Deserialize, Serialize};

/// How a profiled or counted program ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum RunOutcome {
    /// Normal exit with this status.
    Exited {
        /// Exit status.
        code: i32,
    },
    /// Killed by this signal.
    Signaled {
        /// Signal number.
        signal: i32,
        /// Signal name (`SIGSEGV`).
        name: String,
    },
    /// Killed by proftrust after `--timeout`.
    TimedOut {
        /// The timeout in milliseconds.
        millis: u64,
    },
    /// Stopped by proftrust because proftrust itself was asked to stop (SIGINT, SIGTERM,
    /// SIGHUP): what was sampled or counted covers the run up to then.
    Interrupted {
        /// The signal proftrust received.
        signal: i32,
        /// Its name (`SIGINT`).
        name: String,
    },
}

impl RunOutcome {
    /// Whether the program ended normally: exit status 0. Anything else is said where the
    /// profile is shown (`ENDED EARLY`, [`RunOutcome::warning`]) or stored (fleet).
    pub fn ended_normally(&self) -> bool {
        matches!(self, RunOutcome::Exited { code: 0 })
    }

    /// Whether proftrust cut the run short (timeout or interrupt): the profile covers only
    /// the part of the run before that.
    pub fn is_cut_short(&self) -> bool {
        matches!(
            self,
            RunOutcome::TimedOut { .. } | RunOutcome::Interrupted { .. }
        )
    }

    /// Whether a signal that means the program crashed killed it (`SIGSEGV`, `SIGBUS`,
    /// `SIGILL`, `SIGFPE`, `SIGABRT`, `SIGTRAP`, `SIGSYS`: the signals whose default action
    /// dumps core, less `SIGQUIT`, which a user sends), by the signal's number on Linux.
    pub fn is_crash(&self) -> bool {
        matches!(self, RunOutcome::Signaled { signal, .. } if matches!(signal, 4..=8 | 11 | 31))
    }

    /// How the program ended, as the predicate of a sentence whose subject is the program:
    /// `exited with status 3`, `was killed by SIGSEGV`, `was stopped at the 500 ms timeout`,
    /// `was interrupted (proftrust received SIGINT)`. The one wording every report and note
    /// uses ([`RunOutcome::sentence`] builds on it); the bare state without `was` is the
    /// `Display` form.
    pub fn phrase(&self) -> String {
        match self {
            RunOutcome::Exited { .. } => self.to_string(),
            _ => format!("was {self}"),
        }
    }

    /// The whole sentence a report or note says when the program did not end normally
    /// (`None` for exit status 0): `program` and [`RunOutcome::phrase`], what that means for
    /// `what` (the report's contents, a plural: `the paths`, `the samples in t.ptsamp`) and
    /// what to do about it:
    ///
    /// - `the program exited with status 3, which usually means it failed: the paths may
    ///   show its error path rather than its normal work; check its arguments and input`
    /// - `the program was killed by SIGSEGV (it crashed): the paths cover the run up to the
    ///   crash; fix the crash, or profile an input it completes`
    /// - `the program was killed by SIGKILL: the paths cover the run up to then; run it
    ///   where nothing kills it to cover the whole run`
    /// - `the program was stopped at the 500 ms timeout: the paths cover the run up to then;
    ///   raise --timeout, or leave it out, to cover the whole run`
    /// - `the program was interrupted (proftrust received SIGINT): the paths cover the run
    ///   up to then` (the user asked for that: nothing to fix)
    pub fn sentence(&self, program: &str, what: &str) -> Option<String> {
        let phrase = self.phrase();
        Some(match self {
            _ if self.ended_normally() => return None,
            RunOutcome::Exited { .. } => format!(
                "{program} {phrase}, which usually means it failed: {what} may show its error path rather than its normal work; check its arguments and input"
            ),
            RunOutcome::Signaled { .. } if self.is_crash() => format!(
                "{program} {phrase} (it crashed): {what} cover the run up to the crash; fix the crash, or profile an input it completes"
            ),
            RunOutcome::Signaled { .. } => format!(
                "{program} {phrase}: {what} cover the run up to then; run it where nothing kills it to cover the whole run"
            ),
            RunOutcome::TimedOut { .. } => format!(
                "{program} {phrase}: {what} cover the run up to then; raise --timeout, or leave it out, to cover the whole run"
            ),
            RunOutcome::Interrupted { .. } => {
                format!("{program} {phrase}: {what} cover the run up to then")
            }
        })
    }

    /// [`RunOutcome::sentence`] as a report's warning, of kind
    /// [`ended-early`](crate::WarningKind::EndedEarly).
    pub fn warning(&self, program: &str, what: &str) -> Option<crate::Warning> {
        self.sentence(program, what)
            .map(|m| crate::Warning::new(crate::WarningKind::EndedEarly, m))
    }
}

impl std::fmt::Display for RunOutcome {
    /// The state the program ended in: `exited with status 3`, `killed by SIGSEGV`,
    /// `stopped at the 500 ms timeout`, `interrupted (proftrust received SIGINT)` (for a
    /// sentence about the program, [`RunOutcome::phrase`]).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunOutcome::Exited { code } => write!(f, "exited with status {code}"),
            RunOutcome::Signaled { name, .. } => write!(f, "killed by {name}"),
            RunOutcome::TimedOut { millis } => write!(f, "stopped at the {millis} ms timeout"),
            RunOutcome::Interrupted { name, .. } => {
                write!(f, "interrupted (proftrust received {name})")
            }
        }
    }
}

/// Executions of one instruction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct InstrCount {
    /// Where.
    pub loc: Location,
    /// How many times it retired.
    pub count: u64,
}

/// Executions of one control-flow edge (from the last instruction of one block to the first
/// of the next; fall-throughs included).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct EdgeCount {
    /// Source instruction (the branch, or the last instruction of the block).
    pub from: Location,
    /// Target instruction.
    pub to: Location,
    /// How many times it was taken.
    pub count: u64,
}

/// Executions of one call site to one callee.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallCount {
    /// The call instruction.
    pub site: Location,
    /// The callee entry.
    pub target: Location,
    /// How many calls.
    pub count: u64,
}

/// The `extra_costs` column of the branch mispredictions a simulated predictor counted on
/// the run's actual branch outcomes, per branch instruction (the QEMU plugin's `bpred=on`,
/// `proftrust-bpred`; the time model uses it in place of its frequency-based estimate).
pub const BRANCH_MISSES_COLUMN: &str = "bpred_misses";

/// Exact counts for one run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ExactProfile {
    /// Modules referenced by the locations.
    pub modules: ModuleTable,
    /// Per-instruction execution counts, sorted by location, no duplicates.
    pub instructions: Vec<InstrCount>,
    /// Per-edge counts.
    pub edges: Vec<EdgeCount>,
    /// Per-call-site counts.
    pub calls: Vec<CallCount>,
    /// Returns executed.
    pub returns: u64,
    /// All instructions executed in the counted scope, equal to the sum of `instructions`.
    pub total_instructions: u64,
    /// Extra per-instruction costs (callgrind events beyond `Ir`, e.g. `D1mr`), parallel to
    /// `instructions`; names in `extra_cost_names`.
    pub extra_costs: Vec<Vec<u64>>,
    /// Names of the columns of `extra_costs`.
    pub extra_cost_names: Vec<String>,
    /// Who counted: `qemu`, `callgrind`, `vpmu`, ...
    pub backend: String,
    /// Backend detail (QEMU CPU model, valgrind version).
    pub backend_detail: String,
    /// Command line that was counted.
    pub command: Vec<String>,
    /// How the program ended.
    pub outcome: Option<RunOutcome>,
    /// The process images the run counted (and those it could not follow, with why), the
    /// started program first; empty for files and backends that do not say. The profile's
    /// counts are the sum over the counted ones.
    #[serde(default)]
    pub processes: Vec<crate::process::ExactProcess>,
}

impl ExactProfile {
    /// Sorts instructions by location and merges duplicates (summing counts and extra
    /// costs), then recomputes `total_instructions`.
    pub fn normalize(&mut self) {
        let has_extra = !self.extra_cost_names.is_empty();
        let mut idx: Vec<usize> = (0..self.instructions.len()).collect();
        idx.sort_by_key(|&i| self.instructions[i].loc);
        let mut out: Vec<InstrCount> = Vec::with_capacity(idx.len());
        let mut extra: Vec<Vec<u64>> = Vec::new();
        for i in idx {
            let ic = self.instructions[i];
            let ex = if has_extra {
                self.extra_costs.get(i).cloned()
            } else {
                None
            };
            if let Some(last) = out.last_mut() {
                if last.loc == ic.loc {
                    last.count += ic.count;
                    if let (Some(e), Some(l)) = (ex, extra.last_mut()) {
                        for (a, b) in l.iter_mut().zip(e) {
                            *a += b;
                        }
                    }
                    continue;
                }
            }
            out.push(ic);
            if has_extra {
                extra.push(ex.unwrap_or_else(|| vec![0; self.extra_cost_names.len()]));
            }
        }
        self.instructions = out;
        self.extra_costs = extra;
        self.total_instructions = self.instructions.iter().map(|i| i.count).sum();
    }

    /// The per-instruction counts of process image `i` (its own list, or the profile's when
    /// it is the only process); empty for an image that was not counted or out of range.
    pub fn process_instructions(&self, i: usize) -> &[InstrCount] {
        match self.processes.get(i) {
            Some(p) if p.not_counted.is_some() => &[],
            Some(_) if self.processes.len() == 1 => &self.instructions,
            Some(p) => &p.instructions,
            None => &[],
        }
    }

    /// Adds the counts of `other` (instructions, edges, calls, returns, processes; its
    /// locations moved into this profile's module table, its processes' `parent` indices,
    /// which point into its own list, moved past this profile's), then normalises. Extra costs are
    /// kept only when both profiles have the same columns. Each process of `other` keeps
    /// its own counts; a profile that had one process gets its counts copied into that
    /// process first, so every process holds its own list afterwards.
    pub fn merge(&mut self, other: &ExactProfile) {
        use crate::addr::ModuleIdx;
        if self.processes.len() == 1 && self.processes[0].instructions.is_empty() {
            self.processes[0].instructions = self.instructions.clone();
        }
        let map: Vec<ModuleIdx> = other
            .modules
            .iter()
            .map(|(_, m)| self.modules.intern(m.clone()))
            .collect();
        let mv = |l: crate::Location| crate::Location {
            module: l.module.map(|m| map[m.0 as usize]),
            svma: l.svma,
        };
        let same_extra = self.extra_cost_names == other.extra_cost_names;
        if !same_extra {
            self.extra_cost_names.clear();
            self.extra_costs.clear();
        }
        for (k, ic) in other.instructions.iter().enumerate() {
            self.instructions.push(InstrCount {
                loc: mv(ic.loc),
                count: ic.count,
            });
            if same_extra && !self.extra_cost_names.is_empty() {
                self.extra_costs
                    .push(other.extra_costs.get(k).cloned().unwrap_or_default());
            }
        }
        let base = self.processes.len();
        let single = other.processes.len() == 1;
        for p in &other.processes {
            let mut q = p.clone();
            q.parent = p.parent.map(|i| i + base);
            let own: &[InstrCount] = if single && p.not_counted.is_none() {
                &other.instructions
            } else {
                &p.instructions
            };
            let mut v: Vec<InstrCount> = own
                .iter()
                .map(|i| InstrCount {
                    loc: mv(i.loc),
                    count: i.count,
                })
                .collect();
            v.sort_by_key(|i| i.loc);
            q.instructions = v;
            self.processes.push(q);
        }
        let edges = self.edges.drain(..).map(|e| ((e.from, e.to), e.count));
        let more = other
            .edges
            .iter()
            .map(|e| ((mv(e.from), mv(e.to)), e.count));
        self.edges = sum_by_pair(edges.chain(more))
            .map(|((from, to), count)| EdgeCount { from, to, count })
            .collect();
        let calls = self.calls.drain(..).map(|c| ((c.site, c.target), c.count));
        let more = other
            .calls
            .iter()
            .map(|c| ((mv(c.site), mv(c.target)), c.count));
        self.calls = sum_by_pair(calls.chain(more))
            .map(|((site, target), count)| CallCount {
                site,
                target,
                count,
            })
            .collect();
        self.returns += other.returns;
        self.normalize();
    }

    /// Keeps the counts of the process images in `keep` only (indices into
    /// [`ExactProfile::processes`]): the profile's instructions, total and process list
    /// become those of the kept images (the others stay listed, marked not counted with
    /// `why`). Edges, calls and extra costs are kept only when every counted image is kept
    /// (they are not recorded per process).
    pub fn keep_processes(&mut self, keep: &[usize], why: &str) {
        let counted: Vec<usize> = (0..self.processes.len())
            .filter(|&i| self.processes[i].not_counted.is_none())
            .collect();
        if counted.iter().all(|i| keep.contains(i)) {
            return;
        }
        let mut instructions = Vec::new();
        for &i in keep {
            instructions.extend_from_slice(self.process_instructions(i));
        }
        for (i, p) in self.processes.iter_mut().enumerate() {
            if !keep.contains(&i) && p.not_counted.is_none() {
                p.not_counted = Some(why.to_string());
                p.instructions.clear();
            }
        }
        self.instructions = instructions;
        self.extra_costs.clear();
        self.extra_cost_names.clear();
        self.edges.clear();
        self.calls.clear();
        self.returns = 0;
        self.normalize();
    }

    /// Count of the instruction at `loc` (binary search; call [`normalize`](Self::normalize) first).
    pub fn count_at(&self, loc: Location) -> u64 {
        self.instructions
            .binary_search_by_key(&loc, |i| i.loc)
            .map(|i| self.instructions[i].count)
            .unwrap_or(0)
    }
}

/// The counts of each pair of locations summed, in order of the pair.
fn sum_by_pair(
    counts: impl Iterator<Item = ((Location, Location), u64)>,
) -> std::collections::btree_map::IntoIter<(Location, Location), u64> {
    let mut sums: std::collections::BTreeMap<(Location, Location), u64> = Default::default();
    for (pair, n) in counts {
        *sums.entry(pair).or_insert(0) += n;
    }
    sums.into_iter()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::addr::ModuleIdx;

    fn signaled(signal: i32, name: &str) -> RunOutcome {
        RunOutcome::Signaled {
            signal,
            name: name.into(),
        }
    }

    /// Every variant: its state (`Display`), its phrase, its sentence about the paths, and
    /// the warning's kind. The texts are written out in full: they are what users read.
    #[test]
    fn every_outcome_in_words() {
        let interrupted = |signal, name: &str| RunOutcome::Interrupted {
            signal,
            name: name.into(),
        };
        let cases: Vec<(RunOutcome, &str, &str, Option<&str>)> = vec![
            (
                RunOutcome::Exited { code: 0 },
                "exited with status 0",
                "exited with status 0",
                None,
            ),
            (
                RunOutcome::Exited { code: 3 },
                "exited with status 3",
                "exited with status 3",
                Some("the program exited with status 3, which usually means it failed: the paths may show its error path rather than its normal work; check its arguments and input"),
            ),
            (
                RunOutcome::Exited { code: -1 },
                "exited with status -1",
                "exited with status -1",
                Some("the program exited with status -1, which usually means it failed: the paths may show its error path rather than its normal work; check its arguments and input"),
            ),
            (
                signaled(11, "SIGSEGV"),
                "killed by SIGSEGV",
                "was killed by SIGSEGV",
                Some("the program was killed by SIGSEGV (it crashed): the paths cover the run up to the crash; fix the crash, or profile an input it completes"),
            ),
            (
                signaled(6, "SIGABRT"),
                "killed by SIGABRT",
                "was killed by SIGABRT",
                Some("the program was killed by SIGABRT (it crashed): the paths cover the run up to the crash; fix the crash, or profile an input it completes"),
            ),
            (
                signaled(9, "SIGKILL"),
                "killed by SIGKILL",
                "was killed by SIGKILL",
                Some("the program was killed by SIGKILL: the paths cover the run up to then; run it where nothing kills it to cover the whole run"),
            ),
            (
                signaled(2, "SIGINT"),
                "killed by SIGINT",
                "was killed by SIGINT",
                Some("the program was killed by SIGINT: the paths cover the run up to then; run it where nothing kills it to cover the whole run"),
            ),
            (
                signaled(64, "SIG64"),
                "killed by SIG64",
                "was killed by SIG64",
                Some("the program was killed by SIG64: the paths cover the run up to then; run it where nothing kills it to cover the whole run"),
            ),
            (
                RunOutcome::TimedOut { millis: 500 },
                "stopped at the 500 ms timeout",
                "was stopped at the 500 ms timeout",
                Some("the program was stopped at the 500 ms timeout: the paths cover the run up to then; raise --timeout, or leave it out, to cover the whole run"),
            ),
            (
                interrupted(2, "SIGINT"),
                "interrupted (proftrust received SIGINT)",
                "was interrupted (proftrust received SIGINT)",
                Some("the program was interrupted (proftrust received SIGINT): the paths cover the run up to then"),
            ),
            (
                interrupted(15, "SIGTERM"),
                "interrupted (proftrust received SIGTERM)",
                "was interrupted (proftrust received SIGTERM)",
                Some("the program was interrupted (proftrust received SIGTERM): the paths cover the run up to then"),
            ),
        ];
        for (o, state, phrase, sentence) in cases {
            assert_eq!(o.to_string(), state, "{o:?}");
            assert_eq!(o.phrase(), phrase, "{o:?}");
            assert_eq!(
                o.sentence("the program", "the paths").as_deref(),
                sentence,
                "{o:?}"
            );
            let w = o.warning("the program", "the paths");
            assert_eq!(w.as_ref().map(|w| w.message.as_str()), sentence, "{o:?}");
            if let Some(w) = w {
                assert_eq!(w.kind, crate::WarningKind::EndedEarly, "{o:?}");
            }
        }
    }

    /// The crash signals are the core-dumping ones but SIGQUIT (a user's), by number.
    #[test]
    fn crash_signals() {
        let crash: Vec<i32> = (1..=64).filter(|&s| signaled(s, "").is_crash()).collect();
        assert_eq!(crash, vec![4, 5, 6, 7, 8, 11, 31]);
        assert!(!RunOutcome::Exited { code: 139 }.is_crash());
        assert!(!RunOutcome::Interrupted {
            signal: 11,
            name: "SIGSEGV".into()
        }
        .is_crash());
    }

    #[test]
    fn normalize_merges_and_totals() {
        let m = ModuleIdx(0);
        let mut p = ExactProfile {
            instructions: vec![
                InstrCount {
                    loc: Location::new(m, 0x20),
                    count: 2,
                },
                InstrCount {
                    loc: Location::new(m, 0x10),
                    count: 5,
                },
                InstrCount {
                    loc: Location::new(m, 0x20),
                    count: 3,
                },
            ],
            extra_cost_names: vec!["D1mr".into()],
            extra_costs: vec![vec![1], vec![0], vec![4]],
            ..Default::default()
        };
        p.normalize();
        assert_eq!(p.instructions.len(), 2);
        assert_eq!(p.total_instructions, 10);
        assert_eq!(p.count_at(Location::new(m, 0x20)), 5);
        assert_eq!(p.extra_costs, vec![vec![0], vec![5]]);
        assert_eq!(p.count_at(Location::new(m, 0x30)), 0);
    }

    fn process(comm: &str, pid: u32) -> crate::ExactProcess {
        crate::ExactProcess {
            pid,
            parent: None,
            start: crate::ImageStart::Root,
            comm: comm.into(),
            path: String::new(),
            argv: Vec::new(),
            total_instructions: 0,
            instructions: Vec::new(),
            not_counted: None,
            outcome: None,
            replaced: false,
        }
    }

    /// Two one-process profiles of different module tables merged: counts summed by module
    /// path, each process keeps its own counts (moved to the merged table); leaving one out
    /// again gives the other's counts alone.
    #[test]
    fn merge_and_keep_processes_by_hand() {
        let mut a = ExactProfile::default();
        let prog = a.modules.intern(crate::Module::new("/bin/sh"));
        a.instructions = vec![InstrCount {
            loc: Location::new(prog, 0x10),
            count: 3,
        }];
        a.processes = vec![process("sh", 1)];
        a.normalize();
        let mut b = ExactProfile::default();
        let libc = b.modules.intern(crate::Module::new("/lib/libc.so.6"));
        let sh = b.modules.intern(crate::Module::new("/bin/sh"));
        b.instructions = vec![
            InstrCount {
                loc: Location::new(sh, 0x10),
                count: 4,
            },
            InstrCount {
                loc: Location::new(libc, 0x20),
                count: 5,
            },
        ];
        let mut child = process("sh", 2);
        child.start = crate::ImageStart::Fork;
        b.processes = vec![child];
        b.normalize();
        a.merge(&b);
        let libc_a = a.modules.find_by_file_name("libc.so.6").unwrap();
        assert_eq!(a.total_instructions, 12);
        assert_eq!(a.count_at(Location::new(prog, 0x10)), 7);
        assert_eq!(a.count_at(Location::new(libc_a, 0x20)), 5);
        assert_eq!(a.processes.len(), 2);
        assert_eq!(a.processes[1].pid, 2);
        assert_eq!(
            a.process_instructions(0)
                .iter()
                .map(|i| i.count)
                .sum::<u64>(),
            3
        );
        assert_eq!(
            a.process_instructions(1)
                .iter()
                .map(|i| i.count)
                .sum::<u64>(),
            9
        );
        a.keep_processes(&[1], "left out");
        assert_eq!(a.total_instructions, 9);
        assert_eq!(a.count_at(Location::new(prog, 0x10)), 4);
        assert_eq!(a.processes[0].not_counted.as_deref(), Some("left out"));
        assert!(a.process_instructions(0).is_empty());
    }
}
