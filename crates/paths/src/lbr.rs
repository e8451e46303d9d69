//! Path frequency estimates from LBR branch stacks.
//!
//! A branch stack lists the last taken branches, most recent first. Between two consecutive
//! entries (older `b_{i−1}`, newer `b_i`) the program ran straight from `b_{i−1}.to` to
//! `b_i.from`: a *fall-through range*. Mapping each range onto static blocks and each taken
//! branch onto a CFG edge reconstructs a stretch of the block sequence; cutting it at
//! path boundaries (function entry, backedge, return) yields complete Ball-Larus paths,
//! each counted once per sample that holds it. A backedge can be a fall-through (a loop
//! whose header follows its latch in memory): the range then crosses the boundary. Calls inside a path are skipped: the walk is
//! suspended on a branch that leaves the function from the middle of a block and resumed
//! when a branch lands back in that block after the call.
//!
//! Bias (a limit, stated in the output): a stack of 32 branches only holds paths shorter
//! than the stack, and a path is seen in as many samples as the stack windows that contain
//! it, so long paths are under-estimated.

use crate::funcs::{FuncIdx, ProgramCfgs};
use crate::profile::{PathKey, PathProfile};
use crate::Error;
use proftrust_model::{BlockId, Location, ModuleIdx, SampleSet, Svma};
use serde::Serialize;
use std::collections::BTreeMap;

/// Paths seen in branch stacks.
#[derive(Debug, Clone, Default, Serialize)]
pub struct LbrPaths {
    /// Occurrences per path.
    pub paths: BTreeMap<PathKey, u64>,
    /// Samples with a branch stack.
    pub samples: u64,
    /// Fall-through ranges inside the module's known functions.
    pub ranges: u64,
    /// Walks broken because a range or branch did not match the CFG.
    pub broken: u64,
}

/// LBR estimates against the exact path profile.
#[derive(Debug, Clone, Serialize)]
pub struct LbrComparison {
    /// `1/2 Σ_p |l_p/L − x_p/X|` over paths, `l` LBR occurrences, `x` exact counts.
    pub epsilon: f64,
    /// Executed paths in the exact profile.
    pub exact_paths: usize,
    /// Distinct paths seen in branch stacks.
    pub lbr_paths: usize,
    /// Exact share (by count) of the paths never seen.
    pub missed_share: f64,
    /// Overlap of the 10 most frequent paths (`|top10_lbr ∩ top10_exact| / 10`).
    pub top10_overlap: f64,
}

/// LBR paths with the time of every complete path instance ([`lbr_timed_paths`]).
#[derive(Debug, Clone, Default, Serialize)]
pub struct LbrTimedPaths {
    /// Occurrences per path, as [`lbr_paths`] counts them.
    pub paths: LbrPaths,
    /// Every complete path instance whose fall-through ranges all carry a cycle count,
    /// with its time: the sum of those counts (cycles), in stack order.
    pub timed: Vec<(PathKey, u64)>,
    /// Complete path instances left out because an entry of their span had no cycle count
    /// (recorded without cycles, or a CPU that does not report them).
    pub untimed: u64,
}

#[derive(Debug, Clone)]
struct Walk {
    f: FuncIdx,
    blocks: Vec<BlockId>,
    after_backedge: bool,
    /// Sum of the cycle counts of the fall-through ranges walked (exclusive of callees).
    cycles: u64,
    /// A range without a cycle count was walked.
    untimed: bool,
}

impl Walk {
    fn new(f: FuncIdx, start: BlockId, after_backedge: bool) -> Walk {
        Walk {
            f,
            blocks: vec![start],
            after_backedge,
            cycles: 0,
            untimed: false,
        }
    }
}

struct Ctx<'a> {
    cfgs: &'a ProgramCfgs,
    main: Option<ModuleIdx>,
    out: LbrPaths,
    /// `Some` when instance times are collected.
    timed: Option<Vec<(PathKey, u64)>>,
    untimed: u64,
}

impl Ctx<'_> {
    fn lookup(&self, l: Location) -> Option<(FuncIdx, BlockId)> {
        if l.module.is_some() && l.module == self.main {
            self.cfgs.lookup(l.svma)
        } else {
            None
        }
    }

    fn record(&mut self, w: &Walk, end_backedge_to: Option<BlockId>) {
        let Ok(n) = self.cfgs.numbering(w.f) else {
            return;
        };
        match n.path_id(&w.blocks, w.after_backedge, end_backedge_to) {
            Some(id) => {
                let key = PathKey { func: w.f, id };
                *self.out.paths.entry(key).or_insert(0) += 1;
                if let Some(t) = self.timed.as_mut() {
                    if w.untimed {
                        self.untimed += 1;
                    } else {
                        t.push((key, w.cycles));
                    }
                }
            }
            None => self.out.broken += 1,
        }
    }

    /// Extends `w` along fall-through blocks until the block holding `to`.
    fn fall_through(&mut self, w: &mut Option<Walk>, to: Location) {
        let Some(wk) = w.as_mut() else { return };
        let Some((f, target)) = self.lookup(to) else {
            *w = None;
            return;
        };
        let Ok(n) = self.cfgs.numbering(wk.f) else {
            *w = None;
            return;
        };
        if f != wk.f {
            *w = None;
            self.out.broken += 1;
            return;
        }
        let cfg = self.cfgs.cfg(f);
        let mut guard = cfg.blocks.len();
        while let Some(&cur) = wk.blocks.last() {
            if cur == target {
                return;
            }
            let next = cfg.block_at(cfg.block(cur).end);
            match next {
                Some(nb) if n.real_val(cur, nb).is_some() && guard > 0 => {
                    wk.blocks.push(nb);
                    guard -= 1;
                }
                Some(nb)
                    if guard > 0 && n.is_backedge(cur, nb) && n.loop_start_val(nb).is_some() =>
                {
                    // A backedge taken by falling through (no LBR entry): the path ends
                    // here and the next one starts at the header. This range's cycle count
                    // covers the end of one and the start of the other, so neither is timed.
                    let mut done = wk.clone();
                    done.untimed = true;
                    self.record(&done, Some(nb));
                    *wk = Walk::new(wk.f, nb, true);
                    wk.untimed = true;
                    guard -= 1;
                }
                _ => {
                    *w = None;
                    self.out.broken += 1;
                    return;
                }
            }
        }
    }

    fn one_sample(&mut self, branches: &[proftrust_model::Branch]) {
        let mut walk: Option<Walk> = None;
        let mut suspended: Vec<(Walk, BlockId, Svma)> = Vec::new();
        for (i, b) in branches.iter().rev().enumerate() {
            if i > 0 {
                if walk.is_some() {
                    self.out.ranges += 1;
                }
                self.fall_through(&mut walk, b.from);
                // Entry `b`'s cycle count is the time since the previous entry: the range
                // just walked, plus the branch itself.
                if let Some(w) = walk.as_mut() {
                    w.cycles += u64::from(b.cycles);
                    w.untimed |= b.cycles == 0;
                }
            }
            let ff = self.lookup(b.from);
            let ft = self.lookup(b.to);
            match (ff, ft) {
                (Some((f, cur)), Some((g, tb))) if f == g => {
                    let Ok(n) = self.cfgs.numbering(f) else {
                        walk = None;
                        continue;
                    };
                    let to_start = self.cfgs.cfg(f).block(tb).start == b.to.svma;
                    let last_ok = walk
                        .as_ref()
                        .is_some_and(|w| w.f == f && w.blocks.last() == Some(&cur));
                    if to_start && n.is_backedge(cur, tb) {
                        if let (true, Some(w)) = (last_ok, walk.as_ref()) {
                            let w = w.clone();
                            self.record(&w, Some(tb));
                        }
                        walk = Some(Walk::new(f, tb, true));
                    } else if to_start && last_ok && n.real_val(cur, tb).is_some() {
                        if let Some(w) = walk.as_mut() {
                            w.blocks.push(tb);
                        }
                    } else if to_start && tb.0 == 0 && self.cfgs.cfg(f).entry == b.to.svma {
                        // Self-recursive call.
                        if let Some(w) = walk.take() {
                            suspended.push((w, cur, b.from.svma));
                        }
                        walk = Some(Walk::new(f, tb, false));
                    } else if let Some(pos) = suspended
                        .iter()
                        .rposition(|(w, blk, at)| w.f == f && *blk == tb && b.to.svma > *at)
                    {
                        // Return into a suspended activation.
                        self.leave(&mut walk, cur);
                        walk = Some(suspended.swap_remove(pos).0);
                        suspended.truncate(pos);
                    } else {
                        walk = None;
                    }
                }
                (Some((f, cur)), _) => {
                    // Leaves the function: a return (ends a block) or a call (does not).
                    let blk = self.cfgs.cfg(f).block(cur);
                    let is_last = blk.last() == b.from.svma;
                    let leaves = self.cfgs.numbering(f).ok().and_then(|n| n.leave_val(cur));
                    if is_last && leaves.is_some() && !self.is_entry(b.to) {
                        self.leave(&mut walk, cur);
                    } else if let Some(w) = walk.take() {
                        suspended.push((w, cur, b.from.svma));
                    }
                    if let Some((g, tb)) = ft {
                        walk = match suspended
                            .iter()
                            .rposition(|(w, blk, at)| w.f == g && *blk == tb && b.to.svma > *at)
                        {
                            Some(pos) => {
                                let w = suspended.swap_remove(pos).0;
                                suspended.truncate(pos);
                                Some(w)
                            }
                            None => self.enter(g, tb, b.to),
                        };
                    }
                }
                (None, Some((g, tb))) => {
                    if let Some(pos) = suspended
                        .iter()
                        .rposition(|(w, blk, at)| w.f == g && *blk == tb && b.to.svma > *at)
                    {
                        walk = Some(suspended.swap_remove(pos).0);
                        suspended.truncate(pos);
                    } else {
                        walk = self.enter(g, tb, b.to);
                    }
                }
                (None, None) => {}
            }
        }
    }

    fn is_entry(&self, l: Location) -> bool {
        self.lookup(l)
            .is_some_and(|(f, b)| b.0 == 0 && self.cfgs.cfg(f).entry == l.svma)
    }

    fn enter(&self, g: FuncIdx, tb: BlockId, to: Location) -> Option<Walk> {
        (tb.0 == 0 && self.cfgs.cfg(g).entry == to.svma).then(|| Walk::new(g, tb, false))
    }

    fn leave(&mut self, walk: &mut Option<Walk>, cur: BlockId) {
        if let Some(w) = walk.take() {
            if w.blocks.last() == Some(&cur) {
                self.record(&w, None);
            }
        }
    }
}

/// Reconstructs complete paths of the functions in `cfgs` from the branch stacks of `set`.
pub fn lbr_paths(set: &SampleSet, cfgs: &ProgramCfgs) -> LbrPaths {
    walk_samples(set, cfgs, false).paths
}

/// Like [`lbr_paths`], and also the time of every complete path instance: Intel's LBR
/// cycle count of an entry is the time since the previous entry, i.e. of the fall-through
/// range that ends with the entry's branch, so a path's time is the sum over the entries
/// whose ranges it is made of. Ranges walked inside callees belong to the callees' paths,
/// so times are exclusive of callees, as in the exact profile. Each stack is a window of
/// its own: a path instance held by two overlapping stacks (a sampling period shorter than
/// the stack's span) is timed twice.
pub fn lbr_timed_paths(set: &SampleSet, cfgs: &ProgramCfgs) -> LbrTimedPaths {
    walk_samples(set, cfgs, true)
}

fn walk_samples(set: &SampleSet, cfgs: &ProgramCfgs, timed: bool) -> LbrTimedPaths {
    let main = set.modules.find_same_binary(cfgs.module());
    let mut cx = Ctx {
        cfgs,
        main,
        out: LbrPaths::default(),
        timed: timed.then(Vec::new),
        untimed: 0,
    };
    for s in &set.samples {
        if s.branches.is_empty() {
            continue;
        }
        cx.out.samples += 1;
        cx.one_sample(&s.branches);
    }
    LbrTimedPaths {
        paths: cx.out,
        timed: cx.timed.unwrap_or_default(),
        untimed: cx.untimed,
    }
}

/// Compares LBR path occurrences with exact path counts.
pub fn compare_lbr(lbr: &LbrPaths, exact: &PathProfile) -> Result<LbrComparison, Error> {
    let eps = proftrust_metrics::epsilon(
        lbr.paths.iter().map(|(k, v)| (*k, *v)),
        exact.paths.iter().map(|(k, m)| (*k, m.count)),
    )
    .map_err(|e| Error::Empty {
        what: "LBR path comparison",
        why: e.to_string(),
    })?;
    let total: u64 = exact.paths.values().map(|m| m.count).sum();
    let missed: u64 = exact
        .paths
        .iter()
        .filter(|(k, _)| !lbr.paths.contains_key(k))
        .map(|(_, m)| m.count)
        .sum();
    let top = |v: Vec<(PathKey, u64)>| -> Vec<PathKey> {
        let mut v = v;
        v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        v.into_iter().take(10).map(|x| x.0).collect()
    };
    let tl = top(lbr.paths.iter().map(|(k, v)| (*k, *v)).collect());
    let te = top(exact.paths.iter().map(|(k, m)| (*k, m.count)).collect());
    let k = te.len().clamp(1, 10);
    let overlap = tl.iter().filter(|x| te.contains(x)).count() as f64 / k as f64;
    Ok(LbrComparison {
        epsilon: eps,
        exact_paths: exact.paths.len(),
        lbr_paths: lbr.paths.len(),
        missed_share: if total > 0 {
            missed as f64 / total as f64
        } else {
            0.0
        },
        top10_overlap: overlap,
    })
}
