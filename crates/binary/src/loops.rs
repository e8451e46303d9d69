//! Dominators, natural loops with nesting, and simple-loop decomposition.

use crate::error::BinaryError;
use proftrust_model::{BlockId, Cfg, Loop, LoopId, SimpleLoop};

/// Successor lists by block index (edges with a target only), deduplicated, sorted.
fn successors(cfg: &Cfg) -> Vec<Vec<usize>> {
    let n = cfg.blocks.len();
    let mut s = vec![Vec::new(); n];
    for e in &cfg.edges {
        if let Some(t) = e.to {
            let (f, t) = (e.from.0 as usize, t.0 as usize);
            if f < n && t < n {
                s[f].push(t);
            }
        }
    }
    for v in &mut s {
        v.sort_unstable();
        v.dedup();
    }
    s
}

/// Reverse postorder of the blocks reachable from block 0.
fn reverse_postorder(succ: &[Vec<usize>]) -> Vec<usize> {
    let n = succ.len();
    let mut order = Vec::with_capacity(n);
    if n == 0 {
        return order;
    }
    let mut seen = vec![false; n];
    // Iterative DFS: (node, next successor index).
    let mut stack = vec![(0usize, 0usize)];
    seen[0] = true;
    while let Some(&mut (v, ref mut i)) = stack.last_mut() {
        if let Some(&w) = succ[v].get(*i) {
            *i += 1;
            if !seen[w] {
                seen[w] = true;
                stack.push((w, 0));
            }
        } else {
            order.push(v);
            stack.pop();
        }
    }
    order.reverse();
    order
}

/// Immediate dominators, indexed by block id: `None` for the entry (block 0) and for blocks
/// not reachable from it.
///
/// Algorithm: Cooper, Harvey & Kennedy, "A Simple, Fast Dominance Algorithm" (2001):
/// iterate `idom(b) = intersect(processed predecessors of b)` in reverse postorder until
/// nothing changes.
pub fn dominators(cfg: &Cfg) -> Vec<Option<BlockId>> {
    let succ = successors(cfg);
    let n = succ.len();
    let rpo = reverse_postorder(&succ);
    let mut rpo_num = vec![usize::MAX; n];
    for (i, &b) in rpo.iter().enumerate() {
        rpo_num[b] = i;
    }
    let mut preds = vec![Vec::new(); n];
    for (f, v) in succ.iter().enumerate() {
        for &t in v {
            preds[t].push(f);
        }
    }
    const UNDEF: usize = usize::MAX;
    let mut idom = vec![UNDEF; n];
    if n == 0 {
        return Vec::new();
    }
    idom[0] = 0;
    let mut changed = true;
    while changed {
        changed = false;
        for &b in rpo.iter().skip(1) {
            let mut new = UNDEF;
            for &p in &preds[b] {
                if idom[p] == UNDEF {
                    continue;
                }
                new = if new == UNDEF {
                    p
                } else {
                    let (mut x, mut y) = (p, new);
                    while x != y {
                        while rpo_num[x] > rpo_num[y] {
                            x = idom[x];
                        }
                        while rpo_num[y] > rpo_num[x] {
                            y = idom[y];
                        }
                    }
                    x
                };
            }
            if new != UNDEF && idom[b] != new {
                idom[b] = new;
                changed = true;
            }
        }
    }
    (0..n)
        .map(|b| {
            if b == 0 || idom[b] == UNDEF {
                None
            } else {
                Some(BlockId(idom[b] as u32))
            }
        })
        .collect()
}

fn dominates(idom: &[Option<BlockId>], a: usize, mut b: usize) -> bool {
    // Walk up from b; the entry has no idom.
    loop {
        if a == b {
            return true;
        }
        match idom[b] {
            Some(p) => b = p.0 as usize,
            None => return false,
        }
    }
}

/// Natural loops: for every back edge `n -> h` (`h` dominates `n`), the blocks that reach
/// `n` without passing `h`, plus `h`. Back edges to one header are merged into one loop
/// (several latches). Nesting: a loop's parent is the smallest other loop containing all
/// its blocks; depth 1 = outermost. Returned outer loops first (by depth, then header),
/// ids equal to positions. Irreducible cycles (entered other than through a dominating
/// header) have no back edge and are not loops here.
pub fn natural_loops(cfg: &Cfg) -> Vec<Loop> {
    let succ = successors(cfg);
    let n = succ.len();
    if n == 0 {
        return Vec::new();
    }
    let idom = dominators(cfg);
    let reachable: Vec<bool> = (0..n).map(|b| b == 0 || idom[b].is_some()).collect();
    let mut preds = vec![Vec::new(); n];
    for (f, v) in succ.iter().enumerate() {
        for &t in v {
            preds[t].push(f);
        }
    }
    // header -> latches
    let mut by_header: std::collections::BTreeMap<usize, Vec<usize>> = Default::default();
    for (f, v) in succ.iter().enumerate() {
        if !reachable[f] {
            continue;
        }
        for &h in v {
            if dominates(&idom, h, f) {
                by_header.entry(h).or_default().push(f);
            }
        }
    }
    struct Raw {
        header: usize,
        blocks: Vec<usize>,
        latches: Vec<usize>,
    }
    let mut raws: Vec<Raw> = Vec::new();
    for (h, mut latches) in by_header {
        latches.sort_unstable();
        latches.dedup();
        let mut inl = vec![false; n];
        inl[h] = true;
        let mut work: Vec<usize> = latches.clone();
        while let Some(x) = work.pop() {
            if inl[x] {
                continue;
            }
            inl[x] = true;
            for &p in &preds[x] {
                if !inl[p] && reachable[p] {
                    work.push(p);
                }
            }
        }
        let blocks: Vec<usize> = (0..n).filter(|&b| inl[b]).collect();
        raws.push(Raw {
            header: h,
            blocks,
            latches,
        });
    }
    // Parents: smallest strict superset (different header).
    let k = raws.len();
    let contains = |a: &Raw, b: &Raw| -> bool {
        // a contains b
        a.header != b.header && b.blocks.iter().all(|x| a.blocks.binary_search(x).is_ok())
    };
    let mut parent: Vec<Option<usize>> = vec![None; k];
    for i in 0..k {
        let mut best: Option<usize> = None;
        for j in 0..k {
            if i != j && contains(&raws[j], &raws[i]) {
                match best {
                    Some(b) if raws[b].blocks.len() <= raws[j].blocks.len() => {}
                    _ => best = Some(j),
                }
            }
        }
        parent[i] = best;
    }
    let mut depth = vec![0u32; k];
    for i in 0..k {
        let mut d = 1;
        let mut p = parent[i];
        while let Some(q) = p {
            d += 1;
            p = parent[q];
            if d as usize > k {
                break;
            }
        }
        depth[i] = d;
    }
    let mut order: Vec<usize> = (0..k).collect();
    order.sort_by_key(|&i| (depth[i], raws[i].header));
    let mut new_id = vec![0u32; k];
    for (pos, &i) in order.iter().enumerate() {
        new_id[i] = pos as u32;
    }
    order
        .iter()
        .map(|&i| Loop {
            id: LoopId(new_id[i]),
            header: BlockId(raws[i].header as u32),
            blocks: raws[i].blocks.iter().map(|&b| BlockId(b as u32)).collect(),
            latches: raws[i].latches.iter().map(|&b| BlockId(b as u32)).collect(),
            parent: parent[i].map(|p| LoopId(new_id[p])),
            depth: depth[i],
        })
        .collect()
}

/// Decomposes loop `l` of `cfg` into simple loops: the elementary cycles through its header
/// that stay inside the loop (seed 000_2ee15c5664b08d59.txt §2.1, "decomposition of complex
/// loop into simple loops", Fig. 1: the hmmer loop `40c570 -> 40c612 -> 40c659` and
/// `40c570 -> 40c659`).
///
/// Reading chosen: a simple loop is a path header -> ... -> latch -> header that visits no
/// block twice, so an inner loop's repetition is not part of it (its blocks may appear
/// once). Enumerated by depth-first search from the header, successors in block order, so
/// the result is deterministic. More than `cap` cycles (or more than `cap * 64` search
/// steps) gives [`BinaryError::CapExceeded`]: the count can grow exponentially with the
/// number of branches.
pub fn simple_loops(cfg: &Cfg, l: &Loop, cap: usize) -> Result<Vec<SimpleLoop>, BinaryError> {
    let succ = successors(cfg);
    let n = succ.len();
    let h = l.header.0 as usize;
    let foreign = |what: &str| BinaryError::ForeignLoop {
        function: cfg.function.clone(),
        loop_id: l.id.0,
        what: what.to_string(),
    };
    if h >= n {
        return Err(foreign("header is not a block of this CFG"));
    }
    let mut inl = vec![false; n];
    for b in &l.blocks {
        let b = b.0 as usize;
        if b >= n {
            return Err(foreign("a block is not in this CFG"));
        }
        inl[b] = true;
    }
    if !inl[h] {
        return Err(foreign("the header is not among its blocks"));
    }
    let cap_err = || BinaryError::CapExceeded {
        function: cfg.function.clone(),
        header: cfg.blocks[h].start.0,
        cap,
    };
    let step_budget = (cap as u64).saturating_mul(64).max(1024);
    let mut steps = 0u64;
    let mut out = Vec::new();
    let mut on_path = vec![false; n];
    let mut path = vec![h];
    on_path[h] = true;
    let mut stack: Vec<usize> = vec![0]; // next successor index per path element
    while let Some(top) = stack.last_mut() {
        let v = *path.last().unwrap_or(&h);
        let i = *top;
        if i >= succ[v].len() {
            stack.pop();
            if let Some(x) = path.pop() {
                on_path[x] = false;
            }
            continue;
        }
        *top += 1;
        steps += 1;
        if steps > step_budget {
            return Err(cap_err());
        }
        let w = succ[v][i];
        if w == h {
            if out.len() >= cap {
                return Err(cap_err());
            }
            out.push(SimpleLoop {
                blocks: path.iter().map(|&b| BlockId(b as u32)).collect(),
            });
        } else if inl[w] && !on_path[w] {
            on_path[w] = true;
            path.push(w);
            stack.push(0);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proftrust_model::{BasicBlock, CfgEdge, EdgeKind, Svma};

    /// A CFG with one-instruction blocks at 0x10*i and the given edges.
    fn cfg(n: u32, edges: &[(u32, u32)]) -> Cfg {
        Cfg {
            function: "t".into(),
            entry: Svma(0),
            blocks: (0..n)
                .map(|i| BasicBlock {
                    id: BlockId(i),
                    start: Svma(0x10 * i as u64),
                    end: Svma(0x10 * i as u64 + 1),
                    instructions: vec![Svma(0x10 * i as u64)],
                })
                .collect(),
            edges: edges
                .iter()
                .map(|&(f, t)| CfgEdge {
                    from: BlockId(f),
                    to: Some(BlockId(t)),
                    kind: EdgeKind::FallThrough,
                })
                .collect(),
            loops: vec![],
            has_unknown_indirect: false,
        }
    }

    #[test]
    fn dominators_of_diamond_with_unreachable_block() {
        // 0 -> 1, 0 -> 2, 1 -> 3, 2 -> 3; 4 unreachable.
        let c = cfg(5, &[(0, 1), (0, 2), (1, 3), (2, 3)]);
        let d = dominators(&c);
        assert_eq!(
            d,
            vec![
                None,
                Some(BlockId(0)),
                Some(BlockId(0)),
                Some(BlockId(0)),
                None
            ]
        );
    }

    #[test]
    fn seed_000_figure_1_hmmer_loop() {
        // Fig. 1 of seed 000: blocks A=40c570, B=40c612, C=40c659; A -> B, A -> C, B -> C,
        // C -> A (back edge), C -> exit. Two simple loops: A B C and A C.
        let c = cfg(4, &[(0, 1), (0, 2), (1, 2), (2, 0), (2, 3)]);
        let ls = natural_loops(&c);
        assert_eq!(ls.len(), 1);
        assert_eq!(ls[0].header, BlockId(0));
        assert_eq!(ls[0].blocks, vec![BlockId(0), BlockId(1), BlockId(2)]);
        assert_eq!(ls[0].latches, vec![BlockId(2)]);
        let s = simple_loops(&c, &ls[0], 10).unwrap();
        let got: Vec<Vec<u32>> = s
            .iter()
            .map(|x| x.blocks.iter().map(|b| b.0).collect())
            .collect();
        assert_eq!(got, vec![vec![0, 1, 2], vec![0, 2]]);
    }

    #[test]
    fn nested_loops_have_parent_and_depth() {
        // 0 -> 1 (outer header) -> 2 (inner header) -> 3 -> 2 (inner back edge),
        // 3 -> 4 -> 1 (outer back edge), 4 -> 5 exit.
        let c = cfg(6, &[(0, 1), (1, 2), (2, 3), (3, 2), (3, 4), (4, 1), (4, 5)]);
        let ls = natural_loops(&c);
        assert_eq!(ls.len(), 2);
        assert_eq!(ls[0].header, BlockId(1));
        assert_eq!(ls[0].depth, 1);
        assert_eq!(ls[0].parent, None);
        assert_eq!(
            ls[0].blocks,
            vec![BlockId(1), BlockId(2), BlockId(3), BlockId(4)]
        );
        assert_eq!(ls[1].header, BlockId(2));
        assert_eq!(ls[1].depth, 2);
        assert_eq!(ls[1].parent, Some(LoopId(0)));
        assert_eq!(ls[1].blocks, vec![BlockId(2), BlockId(3)]);
        // Outer loop: the only elementary cycle through 1 is 1 2 3 4.
        let s = simple_loops(&c, &ls[0], 10).unwrap();
        assert_eq!(s.len(), 1);
        assert_eq!(
            s[0].blocks,
            vec![BlockId(1), BlockId(2), BlockId(3), BlockId(4)]
        );
    }

    #[test]
    fn irreducible_cycle_is_not_a_natural_loop() {
        // 0 -> 1, 0 -> 2, 1 <-> 2: neither 1 nor 2 dominates the other.
        let c = cfg(3, &[(0, 1), (0, 2), (1, 2), (2, 1)]);
        assert!(natural_loops(&c).is_empty());
    }

    #[test]
    fn cap_is_enforced_with_clear_message() {
        // A chain of k diamonds inside one loop has 2^k simple loops.
        let k = 12u32;
        let mut e = vec![];
        // header 0; diamond i uses blocks 3i+1 (split), 3i+2, 3i+3 (join = next split)
        let mut prev = 0;
        let mut next = 1;
        for _ in 0..k {
            let (a, b, j) = (next, next + 1, next + 2);
            e.push((prev, a));
            e.push((prev, b));
            e.push((a, j));
            e.push((b, j));
            prev = j;
            next += 3;
        }
        e.push((prev, 0));
        let c = cfg(next, &e);
        let ls = natural_loops(&c);
        assert_eq!(ls.len(), 1);
        assert_eq!(simple_loops(&c, &ls[0], 1 << k).unwrap().len(), 1 << k);
        let err = simple_loops(&c, &ls[0], 100).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("more than 100 simple loops"), "{msg}");
        assert!(msg.contains("0x0"), "{msg}");
    }
}
