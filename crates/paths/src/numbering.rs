//! Ball-Larus path numbering (seed 003 §2, after Ball & Larus 1996).
//!
//! Seed 003 §2 (text extraction; punctuation lost, the formulas re-derived here):
//!
//! * **NumPaths.** On an acyclic CFG with a unique entry and exit, visiting vertices in
//!   reverse topological order: `NumPaths(EXIT) = 1` and, for a vertex `v` with successors
//!   `w_1..w_n`, `NumPaths(v) = Σ_{i=1..n} NumPaths(w_i)`.
//! * **Val.** For the ordered successors of `v`, the edge `e_i = v→w_i` gets
//!   `Val(e_i) = Σ_{j<i} NumPaths(w_j)` (so `Val(e_1) = 0`). Paths from `v` leaving through
//!   `e_i` then have sums in `[Val(e_i), Val(e_i) + NumPaths(w_i))`; these intervals partition
//!   `[0, NumPaths(v))`. By induction every ENTRY→EXIT path gets a distinct sum in
//!   `[0, NumPaths(ENTRY))` — the path id.
//! * **Cycles.** Each backedge `t→h` is removed and replaced by two *pseudo-edges*
//!   `ENTRY→h` and `t→EXIT`. A path that ends by taking the backedge ends with `t→EXIT`; the
//!   path that starts after it starts with `ENTRY→h`. The pseudo-edges are labelled like real
//!   ones; at run time a backedge does `count[r + Val(t→EXIT)]++; r = Val(ENTRY→h)`.
//!
//! Choices where the text leaves room:
//!
//! * A *virtual* ENTRY node precedes block 0 (edge `ENTRY→block 0` labelled like the others),
//!   so that a loop whose header is block 0 needs no special case.
//! * A *virtual* EXIT node: every block that returns, tail-jumps out, ends in an unresolved
//!   indirect jump, or has no successor gets one edge to EXIT ("several exits", seed 003 §2:
//!   "unique exit vertex reachable from all vertices").
//! * Backedges: the latch→header edges of the natural loops in [`Cfg::loops`], plus any
//!   retreating edge a depth-first search from the entry still finds (irreducible cycles; the
//!   paper notes the algorithm handles irreducible CFGs the same way). Counted in
//!   [`PathNumbering::irreducible_backedges`].
//! * Parallel edges between the same two blocks (a conditional jump to its own fall-through)
//!   are merged: a block trace cannot tell them apart.
//! * Blocks unreachable from the entry get no paths.
//! * Counts are `u128` with checked addition; overflow gives [`Error::TooManyPaths`].

use crate::Error;
use proftrust_model::{BlockId, Cfg, EdgeKind};
use serde::Serialize;
use std::collections::HashMap;

/// A vertex of the acyclic graph that is numbered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum DagNode {
    /// The virtual entry.
    Entry,
    /// The virtual exit.
    Exit,
    /// A basic block.
    Block(BlockId),
}

/// What an edge of the numbered graph stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum DagEdgeKind {
    /// `ENTRY→block 0`: the function was entered.
    Start,
    /// A CFG edge between two blocks that is not a backedge.
    Real,
    /// `block→EXIT`: the function returned or left (return, tail jump, unknown indirect
    /// jump, or a block without successors).
    Leave,
    /// Pseudo-edge `ENTRY→header` standing for "a path that starts after a backedge".
    LoopStart,
    /// Pseudo-edge `latch→EXIT` standing for "a path that ends by taking the backedge to
    /// `header`".
    LoopEnd {
        /// The loop header the backedge goes to.
        header: BlockId,
    },
}

/// An edge of the numbered graph with its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct DagEdge {
    /// Source.
    pub from: DagNode,
    /// Target.
    pub to: DagNode,
    /// What it stands for.
    pub kind: DagEdgeKind,
    /// `Val(e)` (seed 003 §2).
    pub val: u128,
}

/// A path id turned back into blocks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RegeneratedPath {
    /// The blocks in execution order.
    pub blocks: Vec<BlockId>,
    /// True when the path starts at a loop header right after a backedge (pseudo-edge
    /// `ENTRY→header`); false when it starts at the function entry.
    pub starts_after_backedge: bool,
    /// `Some(h)`: the path ends by taking the backedge to header `h`.
    pub ends_with_backedge_to: Option<BlockId>,
}

/// What the path register does on a transition `from→to` between two blocks of a function
/// ([`PathNumbering::step`]): the non-back CFG edge's `Val`, or a backedge's pseudo-edge
/// values (seed 003 §2: `count[r + Val(t→EXIT)]++; r = Val(ENTRY→h)`), or no edge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// A non-back CFG edge: `r += Val(e)` ([`PathNumbering::real_val`]).
    Real(u128),
    /// A backedge `t→h`: `end` = `Val(t→EXIT)` ([`PathNumbering::loop_end_val`]), `start` =
    /// `Val(ENTRY→h)` ([`PathNumbering::loop_start_val`]).
    Back {
        /// `Val(t→EXIT)`.
        end: u128,
        /// `Val(ENTRY→h)`, `None` when the header has no pseudo-edge.
        start: Option<u128>,
    },
    /// No edge of the CFG between the two blocks.
    None,
}

/// Ball-Larus numbering of one function.
#[derive(Debug, Clone)]
pub struct PathNumbering {
    function: String,
    n_blocks: usize,
    /// Edges, grouped by source node, in `Val` order within a source.
    edges: Vec<DagEdge>,
    /// For each node index (blocks, then ENTRY, then EXIT): range into `edges`.
    out: Vec<(u32, u32)>,
    num_paths: Vec<u128>,
    /// Per block: (successor, Val) of its non-back real edges (a handful: linear scans).
    real: Vec<Vec<(u32, u128)>>,
    leave: Vec<Option<u128>>,
    /// Per block: (header, Val(block→EXIT)) of its backedges.
    loop_end: Vec<Vec<(u32, u128)>>,
    loop_start: Vec<Option<u128>>,
    /// Per block: its range in `steps` (the profiler's transition table, one flat array:
    /// [`PathNumbering::step`] is one scan of a handful of entries).
    step_at: Vec<(u32, u32)>,
    /// The out-edges of every block with their [`Step`]s (real edges, then backedges).
    steps: Vec<(u32, Step)>,
    reachable: Vec<bool>,
    incomplete: bool,
    irreducible: usize,
}

impl PathNumbering {
    /// Numbers the paths of `cfg`.
    pub fn new(cfg: &Cfg) -> Result<PathNumbering, Error> {
        let n = cfg.blocks.len();
        if n == 0 {
            return Err(Error::EmptyCfg {
                function: cfg.function.clone(),
            });
        }
        for e in &cfg.edges {
            let bad = e.from.0 as usize >= n || e.to.is_some_and(|t| t.0 as usize >= n);
            if bad {
                return Err(Error::BadEdge {
                    function: cfg.function.clone(),
                    from: e.from.0,
                    to: e.to.map_or(u32::MAX, |t| t.0),
                    blocks: n,
                });
            }
        }
        // Successor lists over blocks (real intra-function edges, deduplicated).
        let mut succ: Vec<Vec<u32>> = vec![Vec::new(); n];
        let mut leaves = vec![false; n];
        for e in &cfg.edges {
            match e.to {
                Some(t) if !matches!(e.kind, EdgeKind::Return | EdgeKind::Exit) => {
                    let s = &mut succ[e.from.0 as usize];
                    if !s.contains(&t.0) {
                        s.push(t.0);
                    }
                }
                _ => leaves[e.from.0 as usize] = true,
            }
        }
        // Backedges: natural-loop latches first.
        let mut back: HashMap<(u32, u32), ()> = HashMap::new();
        for l in &cfg.loops {
            for la in &l.latches {
                if (la.0 as usize) < n && succ[la.0 as usize].contains(&l.header.0) {
                    back.insert((la.0, l.header.0), ());
                }
            }
        }
        // Then retreating edges of an iterative DFS from block 0 (irreducible cycles). A
        // header reachable only through its backedge is a start point too (via its
        // pseudo-edge ENTRY→header), so the search restarts there until nothing changes.
        let mut color = vec![0u8; n]; // 0 white, 1 grey, 2 black
        let mut irreducible = 0;
        let mut roots = vec![0u32];
        while let Some(root) = roots.pop() {
            if color[root as usize] != 0 {
                continue;
            }
            let mut stack: Vec<(u32, usize)> = vec![(root, 0)];
            color[root as usize] = 1;
            while let Some(&mut (v, ref mut i)) = stack.last_mut() {
                if let Some(&w) = succ[v as usize].get(*i) {
                    *i += 1;
                    if back.contains_key(&(v, w)) {
                        continue;
                    }
                    match color[w as usize] {
                        0 => {
                            color[w as usize] = 1;
                            stack.push((w, 0));
                        }
                        1 => {
                            back.insert((v, w), ());
                            irreducible += 1;
                        }
                        _ => {}
                    }
                } else {
                    color[v as usize] = 2;
                    stack.pop();
                }
            }
            if roots.is_empty() {
                let mut more: Vec<u32> = back
                    .keys()
                    .filter(|&&(t, h)| color[t as usize] == 2 && color[h as usize] == 0)
                    .map(|&(_, h)| h)
                    .collect();
                more.sort_unstable();
                more.dedup();
                more.reverse();
                roots = more;
            }
        }
        let reachable: Vec<bool> = color.iter().map(|&c| c == 2).collect();
        let entry = n as u32;
        let exit = n as u32 + 1;
        // Out-edges as (from node, to node, kind), in a fixed order.
        let mut outs: Vec<Vec<(u32, DagEdgeKind)>> = vec![Vec::new(); n + 2];
        outs[entry as usize].push((0, DagEdgeKind::Start));
        let mut headers: Vec<u32> = back
            .keys()
            .filter(|&&(t, _)| reachable[t as usize])
            .map(|&(_, h)| h)
            .collect();
        headers.sort_unstable();
        headers.dedup();
        for &h in &headers {
            outs[entry as usize].push((h, DagEdgeKind::LoopStart));
        }
        for v in 0..n {
            if !reachable[v] {
                continue;
            }
            let o = &mut outs[v];
            for &w in &succ[v] {
                if !back.contains_key(&(v as u32, w)) {
                    o.push((w, DagEdgeKind::Real));
                }
            }
            let mut hs: Vec<u32> = succ[v]
                .iter()
                .copied()
                .filter(|&w| back.contains_key(&(v as u32, w)))
                .collect();
            hs.sort_unstable();
            for h in hs {
                o.push((exit, DagEdgeKind::LoopEnd { header: BlockId(h) }));
            }
            if leaves[v] || succ[v].is_empty() {
                o.push((exit, DagEdgeKind::Leave));
            }
        }
        // Reverse topological order = postorder of a DFS from ENTRY on the DAG.
        let mut post: Vec<u32> = Vec::with_capacity(n + 2);
        let mut seen = vec![false; n + 2];
        let mut st: Vec<(u32, usize)> = vec![(entry, 0)];
        seen[entry as usize] = true;
        while let Some(&mut (v, ref mut i)) = st.last_mut() {
            if let Some(&(w, _)) = outs[v as usize].get(*i) {
                *i += 1;
                if !seen[w as usize] {
                    seen[w as usize] = true;
                    st.push((w, 0));
                }
            } else {
                post.push(v);
                st.pop();
            }
        }
        let mut np = vec![0u128; n + 2];
        np[exit as usize] = 1;
        for &v in &post {
            if v == exit {
                continue;
            }
            let mut sum: u128 = 0;
            for &(w, _) in &outs[v as usize] {
                sum = sum
                    .checked_add(np[w as usize])
                    .ok_or_else(|| Error::TooManyPaths {
                        function: cfg.function.clone(),
                        block: v,
                    })?;
            }
            np[v as usize] = sum;
        }
        let node = |x: u32| -> DagNode {
            if x == entry {
                DagNode::Entry
            } else if x == exit {
                DagNode::Exit
            } else {
                DagNode::Block(BlockId(x))
            }
        };
        let mut edges = Vec::new();
        let mut out = vec![(0u32, 0u32); n + 2];
        let mut real: Vec<Vec<(u32, u128)>> = vec![Vec::new(); n];
        let mut leave: Vec<Option<u128>> = vec![None; n];
        let mut loop_end: Vec<Vec<(u32, u128)>> = vec![Vec::new(); n];
        let mut loop_start: Vec<Option<u128>> = vec![None; n];
        for v in 0..n + 2 {
            let start = edges.len() as u32;
            let mut val: u128 = 0;
            for &(w, kind) in &outs[v] {
                edges.push(DagEdge {
                    from: node(v as u32),
                    to: node(w),
                    kind,
                    val,
                });
                match kind {
                    DagEdgeKind::Real => {
                        real[v].push((w, val));
                    }
                    DagEdgeKind::Leave => {
                        leave[v] = Some(val);
                    }
                    DagEdgeKind::LoopEnd { header } => {
                        loop_end[v].push((header.0, val));
                    }
                    DagEdgeKind::LoopStart => {
                        loop_start[w as usize] = Some(val);
                    }
                    DagEdgeKind::Start => {}
                }
                // Cannot overflow: the partial sums are bounded by np[v], which fit.
                val += np[w as usize];
            }
            out[v] = (start, edges.len() as u32);
        }
        let mut step_at = Vec::with_capacity(n);
        let mut steps = Vec::new();
        for v in 0..n {
            let from = steps.len() as u32;
            steps.extend(real[v].iter().map(|&(w, val)| (w, Step::Real(val))));
            steps.extend(loop_end[v].iter().map(|&(h, end)| {
                (
                    h,
                    Step::Back {
                        end,
                        start: loop_start[h as usize],
                    },
                )
            }));
            step_at.push((from, steps.len() as u32));
        }
        Ok(PathNumbering {
            function: cfg.function.clone(),
            n_blocks: n,
            edges,
            out,
            num_paths: np,
            real,
            leave,
            loop_end,
            loop_start,
            step_at,
            steps,
            reachable,
            incomplete: cfg.has_unknown_indirect,
            irreducible,
        })
    }

    /// Function name.
    pub fn function(&self) -> &str {
        &self.function
    }
    /// `NumPaths(ENTRY)`: the number of potential paths; ids lie in `[0, num_paths)`.
    pub fn num_paths(&self) -> u128 {
        self.num_paths[self.n_blocks]
    }
    /// `NumPaths(v)` of a block (0 for blocks unreachable from the entry).
    pub fn num_paths_from(&self, b: BlockId) -> u128 {
        self.num_paths.get(b.0 as usize).copied().unwrap_or(0)
    }
    /// All edges of the numbered graph with their values.
    pub fn edges(&self) -> &[DagEdge] {
        &self.edges
    }
    /// True when the CFG had an unresolved indirect jump: paths through it end at the jump
    /// (edge to EXIT) and what follows it cannot be numbered; the profiler counts such
    /// transfers as lost.
    pub fn is_incomplete(&self) -> bool {
        self.incomplete
    }
    /// Backedges found by DFS beyond the natural loops' latches (irreducible cycles).
    pub fn irreducible_backedges(&self) -> usize {
        self.irreducible
    }
    /// Whether a block is reachable from the entry.
    pub fn is_reachable(&self, b: BlockId) -> bool {
        self.reachable.get(b.0 as usize).copied().unwrap_or(false)
    }
    /// Whether `from→to` is a backedge.
    pub fn is_backedge(&self, from: BlockId, to: BlockId) -> bool {
        self.loop_end
            .get(from.0 as usize)
            .is_some_and(|v| v.iter().any(|x| x.0 == to.0))
    }
    /// What the transition `from→to` does to the path register, from one precomputed table:
    /// the same as [`PathNumbering::is_backedge`] (then [`PathNumbering::loop_end_val`] and
    /// [`PathNumbering::loop_start_val`]) or else [`PathNumbering::real_val`].
    #[inline]
    pub fn step(&self, from: BlockId, to: BlockId) -> Step {
        let Some(&(s, e)) = self.step_at.get(from.0 as usize) else {
            return Step::None;
        };
        self.steps[s as usize..e as usize]
            .iter()
            .find(|x| x.0 == to.0)
            .map_or(Step::None, |x| x.1)
    }
    /// `Val(ENTRY→block 0)`: the initial path register.
    pub fn start_val(&self) -> u128 {
        0
    }
    /// `Val(from→to)` of a non-back CFG edge.
    pub fn real_val(&self, from: BlockId, to: BlockId) -> Option<u128> {
        self.real
            .get(from.0 as usize)?
            .iter()
            .find(|x| x.0 == to.0)
            .map(|x| x.1)
    }
    /// `Val(b→EXIT)` when `b` can leave the function.
    pub fn leave_val(&self, b: BlockId) -> Option<u128> {
        self.leave.get(b.0 as usize).copied().flatten()
    }
    /// `Val(t→EXIT)` of the pseudo-edge for backedge `t→h`.
    pub fn loop_end_val(&self, tail: BlockId, header: BlockId) -> Option<u128> {
        self.loop_end
            .get(tail.0 as usize)?
            .iter()
            .find(|x| x.0 == header.0)
            .map(|x| x.1)
    }
    /// `Val(ENTRY→h)` of the pseudo-edge for loop header `h`.
    pub fn loop_start_val(&self, header: BlockId) -> Option<u128> {
        self.loop_start.get(header.0 as usize).copied().flatten()
    }

    fn node_index(&self, n: DagNode) -> usize {
        match n {
            DagNode::Entry => self.n_blocks,
            DagNode::Exit => self.n_blocks + 1,
            DagNode::Block(b) => b.0 as usize,
        }
    }

    /// Regenerates the block sequence of path `id`: from ENTRY, repeatedly take the out-edge
    /// with the largest `Val ≤ r` and subtract it (the inverse of the labelling).
    pub fn regenerate(&self, id: u128) -> Result<RegeneratedPath, Error> {
        if id >= self.num_paths() {
            return Err(Error::PathOutOfRange {
                function: self.function.clone(),
                id,
                num_paths: self.num_paths(),
            });
        }
        let mut r = id;
        let mut v = DagNode::Entry;
        let mut p = RegeneratedPath {
            blocks: Vec::new(),
            starts_after_backedge: false,
            ends_with_backedge_to: None,
        };
        while v != DagNode::Exit {
            let (s, e) = self.out[self.node_index(v)];
            let es = &self.edges[s as usize..e as usize];
            // Edges are in increasing Val order; the last with val <= r.
            let k = es.partition_point(|x| x.val <= r);
            let edge = es
                .get(k.wrapping_sub(1))
                .ok_or_else(|| Error::PathOutOfRange {
                    function: self.function.clone(),
                    id,
                    num_paths: self.num_paths(),
                })?;
            r -= edge.val;
            match edge.kind {
                DagEdgeKind::LoopStart => p.starts_after_backedge = true,
                DagEdgeKind::LoopEnd { header } => p.ends_with_backedge_to = Some(header),
                _ => {}
            }
            if let DagNode::Block(b) = edge.to {
                p.blocks.push(b);
            }
            v = edge.to;
        }
        Ok(p)
    }

    /// Ids of the paths whose blocks cover a given sequence of block transitions exactly
    /// (used by tests and by LBR reconstruction): the id of the path
    /// `blocks[0] .. blocks[k]` with the given start and end, if it is a path.
    pub fn path_id(
        &self,
        blocks: &[BlockId],
        after_backedge: bool,
        ends_with_backedge_to: Option<BlockId>,
    ) -> Option<u128> {
        let first = *blocks.first()?;
        let mut r = if after_backedge {
            self.loop_start_val(first)?
        } else if first.0 == 0 {
            self.start_val()
        } else {
            return None;
        };
        for w in blocks.windows(2) {
            r += self.real_val(w[0], w[1])?;
        }
        let last = *blocks.last()?;
        r += match ends_with_backedge_to {
            Some(h) => self.loop_end_val(last, h)?,
            None => self.leave_val(last)?,
        };
        Some(r)
    }
}
