//! The calling context tree (seed 003 §4) and the gprof problem.
//!
//! Seed 003 §4 (re-read from the extraction): a vertex of the CCT ("call record") stands
//! for an equivalence class of vertices of the dynamic call tree: two activations are
//! equivalent when they run the same procedure and their parents are equivalent. To bound
//! the depth under recursion the equivalence is redefined: a call to procedure `P` from call
//! record `CR` first looks in `CR`'s callee slot for the call site; if it is empty it searches
//! `CR` and its ancestors for a record of `P`; if one (`DR`) is found the slot points back to
//! it (a *backedge*, "recursion folded into the ancestor") and `DR` becomes current;
//! otherwise a new record is made as a child of `CR`. Slots are per call site, so calls of
//! the same procedure from two sites get two records; an indirect call site holds a list of
//! callees (here: the slot key includes the callee).

use crate::funcs::FunctionMap;
use proftrust_model::{Location, ModuleTable};
use rustc_hash::FxHashMap;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::io::Write;

/// Index of a node in a [`Cct`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct NodeId(pub u32);

/// One call record.
#[derive(Debug, Clone, Serialize)]
pub struct CctNode {
    /// Its id.
    pub id: NodeId,
    /// Tree parent (`None` for the root).
    pub parent: Option<NodeId>,
    /// Entry of the procedure (first executed instruction of the activation).
    pub procedure: Location,
    /// Call instruction in the parent (`None`: thread start, or the root).
    pub site: Option<Location>,
    /// Depth, 0 for the root.
    pub depth: u32,
    /// Activations entered through the tree edge (recursive re-entries go to backedges).
    pub calls: u64,
    /// Instructions executed while this record was current (exclusive).
    pub instructions: u64,
    /// Modelled cycles while current.
    pub cycles: u64,
    /// Modelled L1 data-cache misses while current.
    pub l1_misses: u64,
    /// Modelled last-level cache misses while current.
    pub llc_misses: u64,
    /// Tree children.
    pub children: Vec<NodeId>,
}

/// Size statistics as in seed 003 §6 (table "statistics of the CCT").
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct CctStats {
    /// Call records, the root excluded.
    pub nodes: usize,
    /// Average number of tree children of interior nodes (root included).
    pub avg_degree: f64,
    /// Maximum depth (root = 0).
    pub height: u32,
    /// Average depth of the leaves.
    pub avg_leaf_depth: f64,
    /// Maximum number of records of one procedure.
    pub max_replication: usize,
    /// Procedure with the maximum replication.
    pub max_replicated_procedure: Option<Location>,
    /// Distinct (record, call site, callee) slots filled.
    pub call_sites: usize,
    /// Recursion backedges.
    pub backedges: usize,
}

/// A filled callee slot: call site, callee entry, the record it leads to.
type Slot = (Option<Location>, Location, NodeId);

/// A calling context tree with metrics per record.
#[derive(Debug, Clone, Serialize)]
pub struct Cct {
    /// Modules the locations refer to.
    pub modules: ModuleTable,
    nodes: Vec<CctNode>,
    #[serde(skip)]
    slots: FxHashMap<(NodeId, Option<Location>, Location), NodeId>,
    /// Per record (by [`NodeId`]): the slot of `slots` it called through last, (site,
    /// callee, target). Calls repeat (a loop calling one function): [`Cct::call`] checks it
    /// before hashing.
    #[serde(skip)]
    last_slot: Vec<Option<Slot>>,
    /// Calls that took a recursion backedge: (from record, to ancestor) -> calls.
    #[serde(skip)]
    backedges: FxHashMap<(NodeId, NodeId), u64>,
    /// Returns that matched no active call (left unpopped).
    pub unmatched_returns: u64,
    /// Activations left without a return (longjmp, exceptions) and popped when control
    /// reappeared in an older activation.
    pub unwound_frames: u64,
    /// Jumps to another function's entry treated as tail calls.
    pub tail_calls: u64,
    /// Transfers into the middle of a function that is not on the stack (signal handlers,
    /// unknown unwinding); the current record is replaced.
    pub unexplained_transfers: u64,
}

impl Default for Cct {
    fn default() -> Self {
        Cct::new()
    }
}

impl Cct {
    /// A tree with only the root.
    pub fn new() -> Cct {
        Cct {
            modules: ModuleTable::default(),
            nodes: vec![CctNode {
                id: NodeId(0),
                parent: None,
                procedure: Location::unmapped(0),
                site: None,
                depth: 0,
                calls: 1,
                instructions: 0,
                cycles: 0,
                l1_misses: 0,
                llc_misses: 0,
                children: Vec::new(),
            }],
            slots: FxHashMap::default(),
            last_slot: Vec::new(),
            backedges: FxHashMap::default(),
            unmatched_returns: 0,
            unwound_frames: 0,
            tail_calls: 0,
            unexplained_transfers: 0,
        }
    }
    /// The root.
    pub const ROOT: NodeId = NodeId(0);
    /// All records.
    pub fn nodes(&self) -> &[CctNode] {
        &self.nodes
    }
    /// One record.
    pub fn node(&self, id: NodeId) -> &CctNode {
        &self.nodes[id.0 as usize]
    }
    pub(crate) fn node_mut(&mut self, id: NodeId) -> &mut CctNode {
        &mut self.nodes[id.0 as usize]
    }
    /// Recursion backedges with their call counts, sorted.
    pub fn backedges(&self) -> Vec<(NodeId, NodeId, u64)> {
        let mut v: Vec<_> = self.backedges.iter().map(|(k, c)| (k.0, k.1, *c)).collect();
        v.sort_unstable();
        v
    }

    /// A call from record `cur` at `site` to the procedure entered at `callee`; returns the
    /// record that becomes current (seed 003 §4 algorithm, see the module doc).
    pub fn call(&mut self, cur: NodeId, site: Option<Location>, callee: Location) -> NodeId {
        let c = cur.0 as usize;
        if let Some(Some((s, e, t))) = self.last_slot.get(c) {
            if *s == site && *e == callee {
                let t = *t;
                self.count_edge(cur, t);
                return t;
            }
        }
        let t = self.slot(cur, site, callee);
        if self.last_slot.len() <= c {
            self.last_slot.resize(c + 1, None);
        }
        self.last_slot[c] = Some((site, callee, t));
        t
    }

    /// [`Cct::call`] through the slot table.
    fn slot(&mut self, cur: NodeId, site: Option<Location>, callee: Location) -> NodeId {
        let key = (cur, site, callee);
        if let Some(&t) = self.slots.get(&key) {
            self.count_edge(cur, t);
            return t;
        }
        let mut a = Some(cur);
        while let Some(x) = a {
            if x != Cct::ROOT && self.nodes[x.0 as usize].procedure == callee {
                self.slots.insert(key, x);
                self.count_edge(cur, x);
                return x;
            }
            a = self.nodes[x.0 as usize].parent;
        }
        let id = NodeId(self.nodes.len() as u32);
        let depth = self.nodes[cur.0 as usize].depth + 1;
        self.nodes.push(CctNode {
            id,
            parent: Some(cur),
            procedure: callee,
            site,
            depth,
            calls: 1,
            instructions: 0,
            cycles: 0,
            l1_misses: 0,
            llc_misses: 0,
            children: Vec::new(),
        });
        self.nodes[cur.0 as usize].children.push(id);
        self.slots.insert(key, id);
        id
    }

    fn count_edge(&mut self, from: NodeId, to: NodeId) {
        if self.nodes[to.0 as usize].parent == Some(from) {
            self.nodes[to.0 as usize].calls += 1;
        } else {
            *self.backedges.entry((from, to)).or_insert(0) += 1;
        }
    }

    /// Size statistics.
    pub fn stats(&self) -> CctStats {
        let mut s = CctStats {
            nodes: self.nodes.len() - 1,
            call_sites: self.slots.len(),
            backedges: self.backedges.len(),
            ..Default::default()
        };
        let (mut interior, mut children, mut leaves, mut leaf_depth) = (0u64, 0u64, 0u64, 0u64);
        let mut repl: HashMap<Location, usize> = HashMap::new();
        for n in &self.nodes {
            s.height = s.height.max(n.depth);
            if n.children.is_empty() {
                leaves += 1;
                leaf_depth += n.depth as u64;
            } else {
                interior += 1;
                children += n.children.len() as u64;
            }
            if n.id != Cct::ROOT {
                *repl.entry(n.procedure).or_insert(0) += 1;
            }
        }
        s.avg_degree = if interior > 0 {
            children as f64 / interior as f64
        } else {
            0.0
        };
        s.avg_leaf_depth = if leaves > 0 {
            leaf_depth as f64 / leaves as f64
        } else {
            0.0
        };
        let mut best: Option<(usize, Location)> = None;
        for (p, c) in repl {
            if best.is_none_or(|(bc, bp)| c > bc || (c == bc && p < bp)) {
                best = Some((c, p));
            }
        }
        if let Some((c, p)) = best {
            s.max_replication = c;
            s.max_replicated_procedure = Some(p);
        }
        s
    }

    /// Root-to-node procedure names (root excluded).
    pub fn stack_names(&self, id: NodeId, names: &FunctionMap) -> Vec<String> {
        let mut v = Vec::new();
        let mut a = Some(id);
        while let Some(x) = a {
            if x == Cct::ROOT {
                break;
            }
            let n = &self.nodes[x.0 as usize];
            v.push(names.name(&self.modules, n.procedure));
            a = n.parent;
        }
        v.reverse();
        v
    }

    /// Inclusive instructions per record (self plus tree descendants).
    pub fn inclusive_instructions(&self) -> Vec<u64> {
        let mut inc: Vec<u64> = self.nodes.iter().map(|n| n.instructions).collect();
        // Children always have larger ids than their parent.
        for i in (1..self.nodes.len()).rev() {
            if let Some(p) = self.nodes[i].parent {
                inc[p.0 as usize] += inc[i];
            }
        }
        inc
    }

    /// Exclusive instructions per context, keyed by the procedure names from the root; call
    /// sites are merged. With `anchor`, stacks start at the outermost frame named `anchor`
    /// and stacks without it collapse to `["[outside <anchor>]"]`.
    pub fn context_instructions(
        &self,
        names: &FunctionMap,
        anchor: Option<&str>,
    ) -> BTreeMap<Vec<String>, u64> {
        self.context_metric(names, anchor, |n| n.instructions)
    }

    /// Like [`Cct::context_instructions`] for any exclusive metric of a record (cycles,
    /// misses: seed 003 §4's metrics per calling context).
    pub fn context_metric(
        &self,
        names: &FunctionMap,
        anchor: Option<&str>,
        metric: impl Fn(&CctNode) -> u64,
    ) -> BTreeMap<Vec<String>, u64> {
        let mut m = BTreeMap::new();
        for n in &self.nodes {
            let v = metric(n);
            if v == 0 || n.id == Cct::ROOT {
                continue;
            }
            let st = anchor_stack(self.stack_names(n.id, names), anchor);
            *m.entry(st).or_insert(0) += v;
        }
        m
    }

    /// Writes the tree as collapsed stacks (`a;b;c N`, the flame-graph "folded" format), one
    /// line per context with non-zero exclusive instructions, sorted (frames through
    /// [`proftrust_model::folded_frame`]: no line break or `;` inside a frame).
    pub fn write_folded(&self, names: &FunctionMap, w: &mut impl Write) -> std::io::Result<()> {
        self.write_folded_by(names, w, |n| n.instructions)
    }

    /// [`Cct::write_folded`] weighted by any exclusive metric of a record.
    pub fn write_folded_by(
        &self,
        names: &FunctionMap,
        w: &mut impl Write,
        metric: impl Fn(&CctNode) -> u64,
    ) -> std::io::Result<()> {
        for (st, n) in self.context_metric(names, None, metric) {
            writeln!(
                w,
                "{} {n}",
                proftrust_model::folded_stack(st.iter().map(String::as_str))
            )?;
        }
        Ok(())
    }
}

/// Cuts `st` to begin at the first frame named `anchor`.
pub(crate) fn anchor_stack(st: Vec<String>, anchor: Option<&str>) -> Vec<String> {
    match anchor {
        None => st,
        Some(a) => match st.iter().position(|s| s == a) {
            Some(i) => st[i..].to_vec(),
            None => vec![format!("[outside {a}]")],
        },
    }
}

/// One context of the gprof comparison.
#[derive(Debug, Clone, Serialize)]
pub struct GprofContext {
    /// Procedure names from the root.
    pub stack: Vec<String>,
    /// Exact exclusive instructions of the context.
    pub exact: u64,
    /// gprof's estimate.
    pub gprof: f64,
}

/// The gprof problem, measured: per-context estimates under gprof's assumption against the
/// exact CCT.
#[derive(Debug, Clone, Serialize)]
pub struct GprofComparison {
    /// `1/2 Σ_c |gprof_c − exact_c| / total`: the share of instructions gprof's assumption
    /// puts in the wrong context.
    pub epsilon: f64,
    /// Contexts, largest exact first.
    pub contexts: Vec<GprofContext>,
}

/// gprof's assumption (every call of a procedure costs the same, whoever calls it) applied to
/// the exact call graph, compared with the exact CCT.
///
/// gprof knows only the arcs `calls(g→f)` summed over all contexts and each procedure's
/// total self cost `T(f)`. Estimated calls reaching a context `n = (…, g, f)` propagate down
/// the tree: `ĉ(root) = 1`, `ĉ(n) = ĉ(parent) · calls(g→f) / calls(g)` where `calls(g)` is
/// all calls of `g`; outermost records (thread starts) get their exact count. The
/// estimated self cost of the context is `T(f) · ĉ(n) / calls(f)`. Recursive calls (CCT
/// backedges) stay inside the context they fold into, as gprof collapses recursion cycles
/// into one node, so only tree edges count in `calls(g→f)` and `calls(f)`. Derivation: with
/// a uniform per-call cost, the share of `f`'s cost in a context is the share of `f`'s calls
/// made in it, and gprof apportions the calls of `f` among the contexts of `g` by the share
/// of `g`'s calls in each.
pub fn gprof_comparison(cct: &Cct, names: &FunctionMap) -> Result<GprofComparison, crate::Error> {
    let total: u64 = cct.nodes.iter().map(|n| n.instructions).sum();
    if total == 0 {
        return Err(crate::Error::Empty {
            what: "gprof comparison",
            why: "the CCT has no instructions".into(),
        });
    }
    let proc_of = |id: NodeId| {
        if id == Cct::ROOT {
            Location::unmapped(0)
        } else {
            cct.nodes[id.0 as usize].procedure
        }
    };
    let mut self_cost: HashMap<Location, u64> = HashMap::new();
    let mut calls_of: HashMap<Location, u64> = HashMap::new();
    let mut arcs: HashMap<(Location, Location), u64> = HashMap::new();
    for n in cct.nodes.iter().skip(1) {
        *self_cost.entry(n.procedure).or_insert(0) += n.instructions;
        *calls_of.entry(n.procedure).or_insert(0) += n.calls;
        let p = n.parent.map(proc_of).unwrap_or(Location::unmapped(0));
        *arcs.entry((p, n.procedure)).or_insert(0) += n.calls;
    }
    // Contexts are procedure paths from the root: records that differ only by call site
    // are one context (gprof cannot tell sites apart either).
    let mut ctx_of = vec![usize::MAX; cct.nodes.len()];
    let mut ctx_index: HashMap<(usize, Location), usize> = HashMap::new();
    // (parent context, procedure, exact instructions, estimate, representative node)
    let mut ctxs: Vec<(usize, Location, u64, f64, NodeId)> = Vec::new();
    for n in cct.nodes.iter().skip(1) {
        let par = n.parent.unwrap_or(Cct::ROOT);
        let pc = if par == Cct::ROOT {
            usize::MAX
        } else {
            ctx_of[par.0 as usize]
        };
        let c = *ctx_index.entry((pc, n.procedure)).or_insert_with(|| {
            let (arc, pcalls, pest) = if pc == usize::MAX {
                // Outermost activations (thread starts) are known exactly.
                (
                    *arcs
                        .get(&(Location::unmapped(0), n.procedure))
                        .unwrap_or(&0) as f64,
                    1.0,
                    1.0,
                )
            } else {
                let pp = ctxs[pc].1;
                (
                    *arcs.get(&(pp, n.procedure)).unwrap_or(&0) as f64,
                    *calls_of.get(&pp).unwrap_or(&1) as f64,
                    ctxs[pc].3,
                )
            };
            let est = if pcalls > 0.0 {
                pest * arc / pcalls
            } else {
                0.0
            };
            ctxs.push((pc, n.procedure, 0, est, n.id));
            ctxs.len() - 1
        });
        ctx_of[n.id.0 as usize] = c;
        ctxs[c].2 += n.instructions;
    }
    let mut rows = Vec::new();
    let mut diff = 0.0;
    for &(_, p, exact, est, rep) in &ctxs {
        let fcalls = *calls_of.get(&p).unwrap_or(&0) as f64;
        let t = *self_cost.get(&p).unwrap_or(&0) as f64;
        let g = if fcalls > 0.0 { t * est / fcalls } else { 0.0 };
        diff += (g - exact as f64).abs();
        if exact > 0 || g > 0.0 {
            rows.push(GprofContext {
                stack: cct.stack_names(rep, names),
                exact,
                gprof: g,
            });
        }
    }
    rows.sort_by(|a, b| b.exact.cmp(&a.exact).then_with(|| a.stack.cmp(&b.stack)));
    Ok(GprofComparison {
        epsilon: (diff / total as f64 / 2.0).clamp(0.0, 1.0),
        contexts: rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proftrust_model::{ModuleIdx, Svma};

    /// The per-record memo of the last slot ([`Cct::call`]) against the slot table alone
    /// ([`Cct::slot`], the computation before the memo): a pseudo-random walk of calls and
    /// returns over 6 procedures and 3 sites (recursion included) builds the same records,
    /// calls, backedges and statistics either way.
    #[test]
    fn last_slot_memo_gives_the_slot_table_tree() {
        let (mut memo, mut table) = (Cct::new(), Cct::new());
        let (mut sm, mut st) = (vec![Cct::ROOT], vec![Cct::ROOT]);
        let mut x: u64 = 0x2021;
        let mut calls = 0;
        for _ in 0..20_000 {
            // xorshift64: a fixed sequence.
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            if x % 3 == 0 && sm.len() > 1 {
                sm.pop();
                st.pop();
                continue;
            }
            let callee = Location {
                module: Some(ModuleIdx(0)),
                svma: Svma(0x1000 * (1 + (x >> 8) % 6)),
            };
            let site = ((x >> 16) % 4 != 0).then(|| Location::unmapped(0x10 + (x >> 20) % 3));
            let a = memo.call(*sm.last().expect("root"), site, callee);
            let b = table.slot(*st.last().expect("root"), site, callee);
            assert_eq!(a, b);
            sm.push(a);
            st.push(b);
            calls += 1;
        }
        assert!(calls > 5000);
        assert_eq!(memo.nodes.len(), table.nodes.len());
        for (m, t) in memo.nodes.iter().zip(&table.nodes) {
            assert_eq!(
                (m.parent, m.procedure, m.site, m.calls, &m.children),
                (t.parent, t.procedure, t.site, t.calls, &t.children)
            );
        }
        assert_eq!(memo.backedges(), table.backedges());
        assert!(!memo.backedges().is_empty(), "recursion folded");
        assert_eq!(memo.stats(), table.stats());
    }
}
