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
    /// Whether proftrust cut the run short (timeout or interrupt): the profile covers only
    /// the part of the run before that.
    pub fn is_cut_short(&self) -> bool {
        matches!(
            self,
            RunOutcome::TimedOut { .. } | RunOutcome::Interrupted { .. }
        )
    }
}

impl std::fmt::Display for RunOutcome {
    /// `exited with status 3`, `killed by SIGSEGV`, `stopped at the 500 ms timeout`,
    /// `interrupted (proftrust received SIGINT)`.
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

    /// Count of the instruction at `loc` (binary search; call [`normalize`](Self::normalize) first).
    pub fn count_at(&self, loc: Location) -> u64 {
        self.instructions
            .binary_search_by_key(&loc, |i| i.loc)
            .map(|i| self.instructions[i].count)
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::addr::ModuleIdx;

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
}
