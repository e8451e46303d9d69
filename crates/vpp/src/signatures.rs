//! Signatures of Ball-Larus paths (the virtual PMU and LBR sources).
//!
//! The trace and LBR sources cut the execution into the Ball-Larus paths of
//! `proftrust-paths` (seed 003 §2): a path starts at a function entry or right after a loop
//! backedge and ends at a return or by taking a backedge — exactly seed 004 §4.2's
//! boundaries ("procedure entries and loop backward branches"). Each [`PathKey`] is turned
//! into a seed 004 signature by regenerating its blocks:
//!
//! * entry = the start address of its first block (the function entry, or the loop header);
//! * history = one bit per *conditional* branch the path passes, in order, `1` when the
//!   path follows the taken edge and `0` when it falls through — including the branch that
//!   closes the path when it ends by a conditional backedge; unconditional jumps, calls and
//!   returns carry no information and get no bit (as in the paper's example, where a
//!   3-block path has 3 bits, every block there ending in a conditional branch);
//! * a resolved multi-way jump (jump table) with `m` distinct targets adds `⌈log2 m⌉` bits:
//!   the index of the target among the targets sorted by address, most significant first
//!   (the paper's bits only cover two-way branches; without this, paths through different
//!   switch cases would share a signature);
//! * a conditional branch whose two edges reach the same block carries no information (the
//!   trace cannot tell them apart) and gets no bit.
//!
//! Two Ball-Larus paths with the same signature would be merged; that cannot happen under
//! the rules above for paths of one function from one entry, and [`SignatureMap::collisions`]
//! counts it should a CFG defeat them.

use crate::signature::{BranchHistory, PathSignature};
use crate::timings::PathInfo;
use proftrust_model::{BlockId, Cfg, EdgeKind};
use proftrust_paths::{PathKey, ProgramCfgs};
use std::collections::HashMap;

/// Signatures of the paths of one program, computed once per path.
#[derive(Debug)]
pub struct SignatureMap<'a> {
    cfgs: &'a ProgramCfgs,
    cache: HashMap<PathKey, Option<(PathSignature, PathInfo)>>,
    owners: HashMap<PathSignature, PathKey>,
    collisions: u64,
}

/// The bits an edge `from -> to` adds to a history.
fn edge_bits(cfg: &Cfg, from: BlockId, to: BlockId, h: &mut BranchHistory) {
    let succ: Vec<_> = cfg.successors(from).collect();
    let taken = succ
        .iter()
        .find(|e| e.kind == EdgeKind::Taken)
        .and_then(|e| e.to);
    let fall = succ
        .iter()
        .find(|e| e.kind == EdgeKind::FallThrough)
        .and_then(|e| e.to);
    if let (Some(t), Some(f)) = (taken, fall) {
        if t != f {
            h.push(to == t);
        }
        return;
    }
    let mut targets: Vec<BlockId> = succ
        .iter()
        .filter(|e| e.kind == EdgeKind::IndirectResolved)
        .filter_map(|e| e.to)
        .collect();
    targets.sort_by_key(|b| cfg.block(*b).start);
    targets.dedup();
    if targets.len() >= 2 {
        let idx = targets.iter().position(|&b| b == to).unwrap_or(0) as u64;
        let width = u64::BITS - (targets.len() as u64 - 1).leading_zeros();
        for k in (0..width).rev() {
            h.push(idx >> k & 1 == 1);
        }
    }
}

impl<'a> SignatureMap<'a> {
    /// An empty map over `cfgs`.
    pub fn new(cfgs: &'a ProgramCfgs) -> SignatureMap<'a> {
        SignatureMap {
            cfgs,
            cache: HashMap::new(),
            owners: HashMap::new(),
            collisions: 0,
        }
    }

    /// Signature and display information of a path (`None`: the function has no numbering
    /// or the id is out of range).
    pub fn get(&mut self, key: PathKey) -> Option<&(PathSignature, PathInfo)> {
        if !self.cache.contains_key(&key) {
            let v = self.compute(key);
            if let Some((s, _)) = &v {
                match self.owners.get(s) {
                    Some(k) if *k != key => self.collisions += 1,
                    Some(_) => {}
                    None => {
                        self.owners.insert(s.clone(), key);
                    }
                }
            }
            self.cache.insert(key, v);
        }
        self.cache.get(&key).and_then(|x| x.as_ref())
    }

    fn compute(&self, key: PathKey) -> Option<(PathSignature, PathInfo)> {
        let n = self.cfgs.numbering(key.func).ok()?;
        let cfg = self.cfgs.cfg(key.func);
        let r = n.regenerate(key.id).ok()?;
        let first = *r.blocks.first()?;
        let mut h = BranchHistory::new();
        for w in r.blocks.windows(2) {
            edge_bits(cfg, w[0], w[1], &mut h);
        }
        if let (Some(hd), Some(&last)) = (r.ends_with_backedge_to, r.blocks.last()) {
            edge_bits(cfg, last, hd, &mut h);
        }
        Some((
            PathSignature::new(cfg.block(first).start, h),
            PathInfo {
                function: cfg.function.clone(),
                blocks: r.blocks.iter().map(|b| cfg.block(*b).start).collect(),
            },
        ))
    }

    /// Distinct paths that got a signature another path already had.
    pub fn collisions(&self) -> u64 {
        self.collisions
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proftrust_model::{BasicBlock, CfgEdge, Module, Svma};
    use proftrust_paths::FuncIdx;

    fn block(id: u32, start: u64) -> BasicBlock {
        BasicBlock {
            id: BlockId(id),
            start: Svma(start),
            end: Svma(start + 4),
            instructions: vec![Svma(start)],
        }
    }

    /// b0: jmp *table -> b1 | b2 | b3 (3 targets: 2 bits, index by address);
    /// b1: jcc b4 else b4 (both edges to b4: no bit); b2, b3 -> b4; b4: ret.
    /// Paths: via b1 "0x100-00", via b2 "0x100-01", via b3 "0x100-10".
    #[test]
    fn jump_tables_and_parallel_edges() {
        let e = |f: u32, t: Option<u32>, kind| CfgEdge {
            from: BlockId(f),
            to: t.map(BlockId),
            kind,
        };
        let cfg = Cfg {
            function: "sw".into(),
            entry: Svma(0x100),
            blocks: (0..5)
                .map(|k| block(k, 0x100 + 0x10 * u64::from(k)))
                .collect(),
            edges: vec![
                e(0, Some(3), EdgeKind::IndirectResolved),
                e(0, Some(1), EdgeKind::IndirectResolved),
                e(0, Some(2), EdgeKind::IndirectResolved),
                e(1, Some(4), EdgeKind::Taken),
                e(1, Some(4), EdgeKind::FallThrough),
                e(2, Some(4), EdgeKind::Unconditional),
                e(3, Some(4), EdgeKind::FallThrough),
                e(4, None, EdgeKind::Return),
            ],
            loops: vec![],
            has_unknown_indirect: false,
        };
        let cfgs = ProgramCfgs::new(Module::new("/t/sw"), vec![cfg]);
        let n = cfgs.numbering(FuncIdx(0)).unwrap();
        assert_eq!(n.num_paths(), 3);
        let mut m = SignatureMap::new(&cfgs);
        let mut got: Vec<String> = (0..3)
            .map(|id| {
                let k = PathKey {
                    func: FuncIdx(0),
                    id,
                };
                m.get(k).unwrap().0.to_string()
            })
            .collect();
        got.sort();
        assert_eq!(got, vec!["0x100-00", "0x100-01", "0x100-10"]);
        assert_eq!(m.collisions(), 0);
        assert!(m
            .get(PathKey {
                func: FuncIdx(0),
                id: 3
            })
            .is_none());
    }
}
