//! The skid emulation (module doc of [`super`], "Emulation"): memoised walks of the
//! remaining skid from every block start, through calls, returns and black boxes.

use super::*;

/// (site or quantum, mass) pairs.
pub(super) type Pairs = Vec<(u32, f64)>;

/// A range of an arena of (index, mass) pairs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Span {
    pub(super) a: u32,
    pub(super) b: u32,
}

/// Not computed yet / being computed (memo markers in `Span::a`).
pub(super) const NOT: u32 = u32::MAX;
pub(super) const BUSY: u32 = u32::MAX - 1;
pub(super) const EMPTY: Span = Span { a: 0, b: 0 };

impl Span {
    pub(super) fn range(self) -> std::ops::Range<usize> {
        self.a as usize..self.b as usize
    }
}

/// Outcome of a partial walk: landing mass per site, and mass leaving the function the walk
/// is in (returns) per quantised remaining skid — ranges of the emulator's arenas.
#[derive(Debug, Clone, Copy)]
pub(super) struct Out {
    pub(super) land: Span,
    pub(super) exits: Span,
}

pub(super) const OUT_EMPTY: Out = Out {
    land: EMPTY,
    exits: EMPTY,
};

/// Sorts by index and merges equal indices in place; drops masses below 1e-15.
pub(super) fn compact(v: &mut Vec<(u32, f64)>) {
    if v.len() < 2 {
        return;
    }
    v.sort_unstable_by_key(|p| p.0);
    let mut w = 0;
    for r in 1..v.len() {
        if v[r].0 == v[w].0 {
            v[w].1 += v[r].1;
        } else {
            w += 1;
            v[w] = v[r];
        }
    }
    v.truncate(w + 1);
    v.retain(|p| p.1 > 1e-15);
}

/// The emulator for one flow state (eq. 5 CPIs, edge probabilities, call shares, `tau`).
/// Partial outcomes live in two arenas; memo entries are ranges of them.
pub(super) struct Emu<'l> {
    pub(super) l: &'l Layout,
    pub(super) quantum: f64,
    pub(super) cpi: Vec<f64>,
    /// Probability of each flow variable's edge given its block (0 for non-edge variables).
    pub(super) prob: Vec<f64>,
    /// Normalised caller shares per function / box.
    pub(super) fn_share: Vec<Vec<(CallerRef, f64)>>,
    pub(super) box_share: Vec<Vec<(CallerRef, f64)>>,
    pub(super) tau: Vec<f64>,
    /// Targets of indirect calls (functions with external calls) and their probabilities.
    pub(super) ind_targets: Vec<(usize, f64)>,
    /// Indirect call sites (global block, instruction) and their shares of the calls.
    pub(super) ind_sites: Vec<(usize, usize, f64)>,
    /// Quanta of the memo tables (remaining skid `0..rmax`).
    pub(super) rmax: usize,
    /// Walk memo, indexed `(istart[gb] + gb + j) * rmax + rq`.
    pub(super) memo: Vec<Out>,
    pub(super) up_fn_memo: Vec<Span>,
    pub(super) up_box_memo: Vec<Span>,
    pub(super) land_arena: Vec<(u32, f64)>,
    pub(super) exit_arena: Vec<(u32, f64)>,
    /// Scratch buffers for the recursion.
    pub(super) pool: Vec<(Pairs, Pairs)>,
}

impl<'l> Emu<'l> {
    pub(super) fn new(l: &'l Layout, v: &[f64], quantum: f64, max_skid: f64) -> Emu<'l> {
        let x = l.counts(v);
        let nb = l.nblocks();
        let mut cpi = vec![1.0; l.e.len()];
        for (gb, &xb) in x.iter().enumerate() {
            // Eq. 5; a block with no cycle samples (or not executed under `f`) gets CPI 1:
            // nothing is known about it, and it is cold.
            if xb > 0.0 && l.c_block[gb] > 0.0 {
                let r = l.istart[gb]..l.istart[gb + 1];
                for (c, ci) in cpi[r.clone()].iter_mut().zip(&l.c[r]) {
                    *c = ci / xb;
                }
            }
        }
        let mut prob = vec![0.0; l.nvars];
        for (gb, &xb) in x.iter().enumerate().take(nb) {
            let (a, b) = (l.var0[gb], l.var0[gb + 1]);
            if xb > 0.0 {
                for (p, vk) in prob[a..b].iter_mut().zip(&v[a..b]) {
                    *p = vk.max(0.0) / xb;
                }
            } else {
                // Unexecuted block: spread evenly (a walk only gets here under other flows).
                for p in &mut prob[a..b] {
                    *p = 1.0 / (b - a) as f64;
                }
            }
        }
        let share = |callers: &[CallerRef]| -> Vec<(CallerRef, f64)> {
            let w: Vec<f64> = callers
                .iter()
                .map(|r| l.caller_weight(*r, v, &x).max(0.0))
                .collect();
            let s: f64 = w.iter().sum();
            if s > 0.0 {
                callers
                    .iter()
                    .zip(&w)
                    .filter(|(_, w)| **w > 0.0)
                    .map(|(r, w)| (*r, w / s))
                    .collect()
            } else {
                Vec::new()
            }
        };
        let fn_share = l.fn_callers.iter().map(|c| share(c)).collect();
        let box_share: Vec<Vec<(CallerRef, f64)>> =
            l.box_callers.iter().map(|c| share(c)).collect();
        let tau = (0..l.box_e.len())
            .map(|xi| {
                let calls: f64 = l.box_callers[xi]
                    .iter()
                    .map(|r| l.caller_weight(*r, v, &x).max(0.0))
                    .sum();
                if calls > 0.0 {
                    l.box_c[xi] / calls
                } else {
                    f64::INFINITY
                }
            })
            .collect();
        let ext_total: f64 = l.ext_var.iter().flatten().map(|&k| v[k].max(0.0)).sum();
        let ind_targets = if ext_total > 0.0 {
            l.ext_var
                .iter()
                .enumerate()
                .filter_map(|(f, e)| e.map(|k| (f, v[k].max(0.0) / ext_total)))
                .filter(|(_, p)| *p > 0.0)
                .collect()
        } else {
            Vec::new()
        };
        let site_total: f64 = l.indirect_sites.iter().map(|&(gb, _)| x[gb].max(0.0)).sum();
        let ind_sites = if site_total > 0.0 {
            l.indirect_sites
                .iter()
                .map(|&(gb, k)| (gb, k, x[gb].max(0.0) / site_total))
                .filter(|s| s.2 > 0.0)
                .collect()
        } else {
            Vec::new()
        };
        Emu {
            l,
            quantum,
            cpi,
            prob,
            fn_share,
            box_share,
            tau,
            ind_targets,
            ind_sites,
            rmax: (max_skid / quantum).ceil() as usize + 2,
            memo: Vec::new(),
            up_fn_memo: Vec::new(),
            up_box_memo: Vec::new(),
            land_arena: Vec::new(),
            exit_arena: Vec::new(),
            pool: Vec::new(),
        }
    }

    pub(super) fn q(&self, r: f64) -> u32 {
        (r / self.quantum).round().max(0.0) as u32
    }

    pub(super) fn box_site(&self, x: usize) -> u32 {
        self.l.box_site(x)
    }

    pub(super) fn scratch(&mut self) -> (Pairs, Pairs) {
        let (mut a, mut b) = self.pool.pop().unwrap_or_default();
        a.clear();
        b.clear();
        (a, b)
    }

    /// Compacts the scratch buffers into the arenas and returns them to the pool.
    pub(super) fn finish(&mut self, mut land: Vec<(u32, f64)>, mut exits: Vec<(u32, f64)>) -> Out {
        compact(&mut land);
        compact(&mut exits);
        let la = self.land_arena.len() as u32;
        self.land_arena.extend_from_slice(&land);
        let ea = self.exit_arena.len() as u32;
        self.exit_arena.extend_from_slice(&exits);
        let o = Out {
            land: Span {
                a: la,
                b: self.land_arena.len() as u32,
            },
            exits: Span {
                a: ea,
                b: self.exit_arena.len() as u32,
            },
        };
        self.pool.push((land, exits));
        o
    }

    pub(super) fn add_land(&self, dst: &mut Vec<(u32, f64)>, s: Span, w: f64) {
        if w != 0.0 {
            dst.extend(self.land_arena[s.range()].iter().map(|&(k, v)| (k, v * w)));
        }
    }

    pub(super) fn add_exits(&self, dst: &mut Vec<(u32, f64)>, s: Span, w: f64) {
        if w != 0.0 {
            dst.extend(self.exit_arena[s.range()].iter().map(|&(k, v)| (k, v * w)));
        }
    }

    /// Memoised walk from instruction `j` of `gb` with `rq` quanta of skid left.
    pub(super) fn walk_q(&mut self, gb: usize, j: usize, rq: u32) -> Out {
        let rq_us = rq as usize;
        if rq_us >= self.rmax {
            return self.walk(gb, j, rq as f64 * self.quantum);
        }
        if self.memo.is_empty() {
            let marker = Out {
                land: Span { a: NOT, b: NOT },
                exits: EMPTY,
            };
            self.memo = vec![marker; (self.l.e.len() + self.l.nblocks()) * self.rmax];
        }
        let key = (self.l.istart[gb] + gb + j) * self.rmax + rq_us;
        match self.memo[key].land.a {
            NOT => {}
            // In progress: a cycle of zero-time blocks; the mass is lost.
            BUSY => return OUT_EMPTY,
            _ => return self.memo[key],
        }
        self.memo[key].land.a = BUSY;
        let o = self.walk(gb, j, rq as f64 * self.quantum);
        self.memo[key] = o;
        o
    }

    /// Entering function `h` with `r` cycles left.
    pub(super) fn enter(&mut self, h: usize, r: f64) -> Out {
        let rq = self.q(r);
        self.walk_q(self.l.first[h], 0, rq)
    }

    /// After a call to `h` made by instruction `k` of `gb`, with `left` cycles: the callee's
    /// landings, then the rest of `gb` for each way out of the callee.
    pub(super) fn through_call(&mut self, gb: usize, k: usize, cl: Callee, left: f64) -> Out {
        match cl {
            Callee::Function(h) => {
                let (mut land, mut exits) = self.scratch();
                let o = self.enter(h, left);
                self.add_land(&mut land, o.land, 1.0);
                for idx in o.exits.range() {
                    let (rq, p) = self.exit_arena[idx];
                    let c = self.walk_q(gb, k + 1, rq);
                    self.add_land(&mut land, c.land, p);
                    self.add_exits(&mut exits, c.exits, p);
                }
                self.finish(land, exits)
            }
            Callee::Box(x) => {
                if self.tau[x] >= left - 1e-9 {
                    let (mut land, exits) = self.scratch();
                    land.push((self.box_site(x), 1.0));
                    self.finish(land, exits)
                } else {
                    self.walk(gb, k + 1, left - self.tau[x])
                }
            }
            Callee::Indirect if !self.ind_targets.is_empty() => {
                let (mut land, mut exits) = self.scratch();
                let targets = std::mem::take(&mut self.ind_targets);
                for &(h, ph) in &targets {
                    let o = self.enter(h, left);
                    self.add_land(&mut land, o.land, ph);
                    for idx in o.exits.range() {
                        let (rq, p) = self.exit_arena[idx];
                        let c = self.walk_q(gb, k + 1, rq);
                        self.add_land(&mut land, c.land, ph * p);
                        self.add_exits(&mut exits, c.exits, ph * p);
                    }
                }
                self.ind_targets = targets;
                self.finish(land, exits)
            }
            Callee::Unknown | Callee::Indirect => self.walk(gb, k + 1, left),
        }
    }

    /// Walk from (before) instruction `j` of `gb` with `r` cycles left.
    pub(super) fn walk(&mut self, gb: usize, j: usize, r: f64) -> Out {
        let l = self.l;
        let mut cum = 0.0;
        let i0 = l.istart[gb];
        let n = l.size(gb);
        for k in j..n {
            cum += self.cpi[i0 + k];
            if cum >= r - 1e-9 {
                let (mut land, exits) = self.scratch();
                land.push((l.site_of(gb, k), 1.0));
                return self.finish(land, exits);
            }
            if let Some(&(_, cl)) = l.calls[gb].iter().find(|(kk, _)| *kk == k) {
                if cl != Callee::Unknown {
                    return self.through_call(gb, k, cl, r - cum);
                }
            }
        }
        let left = r - cum;
        let (mut land, mut exits) = self.scratch();
        let f = l.func_of[gb];
        for (jj, s) in l.succ[gb].iter().enumerate() {
            let p = self.prob[l.var0[gb] + jj];
            if p <= 0.0 {
                continue;
            }
            match *s {
                Successor::Block(t) => {
                    let rq = self.q(left);
                    let c = self.walk_q(l.first[f] + t, 0, rq);
                    self.add_land(&mut land, c.land, p);
                    self.add_exits(&mut exits, c.exits, p);
                }
                Successor::Return => exits.push((self.q(left), p)),
                Successor::TailCall(Callee::Function(h)) => {
                    let c = self.enter(h, left);
                    self.add_land(&mut land, c.land, p);
                    self.add_exits(&mut exits, c.exits, p);
                }
                Successor::TailCall(Callee::Box(x)) => {
                    if self.tau[x] >= left - 1e-9 {
                        land.push((self.box_site(x), p));
                    } else {
                        exits.push((self.q(left - self.tau[x]), p));
                    }
                }
                Successor::TailCall(Callee::Unknown | Callee::Indirect) | Successor::Leave => {}
            }
        }
        self.finish(land, exits)
    }

    /// Landing of a walk that returns from function `f` with `rq` quanta left: it continues
    /// at `f`'s callers in proportion to their calls (memoised).
    pub(super) fn up_fn(&mut self, f: usize, rq: u32) -> Span {
        let rq_us = (rq as usize).min(self.rmax - 1);
        if self.up_fn_memo.is_empty() {
            self.up_fn_memo = vec![Span { a: NOT, b: NOT }; self.fn_share.len() * self.rmax];
        }
        let key = f * self.rmax + rq_us;
        match self.up_fn_memo[key].a {
            NOT => {}
            BUSY => return EMPTY,
            _ => return self.up_fn_memo[key],
        }
        self.up_fn_memo[key].a = BUSY;
        let shares = std::mem::take(&mut self.fn_share[f]);
        let land = self.up_from(&shares, rq_us as u32);
        self.fn_share[f] = shares;
        self.up_fn_memo[key] = land;
        land
    }

    pub(super) fn up_box(&mut self, x: usize, rq: u32) -> Span {
        let rq_us = (rq as usize).min(self.rmax - 1);
        if self.up_box_memo.is_empty() {
            self.up_box_memo = vec![Span { a: NOT, b: NOT }; self.box_share.len() * self.rmax];
        }
        let key = x * self.rmax + rq_us;
        match self.up_box_memo[key].a {
            NOT => {}
            BUSY => return EMPTY,
            _ => return self.up_box_memo[key],
        }
        self.up_box_memo[key].a = BUSY;
        let shares = std::mem::take(&mut self.box_share[x]);
        let land = self.up_from(&shares, rq_us as u32);
        self.box_share[x] = shares;
        self.up_box_memo[key] = land;
        land
    }

    pub(super) fn up_from(&mut self, shares: &[(CallerRef, f64)], rq: u32) -> Span {
        let (mut land, exits) = self.scratch();
        for &(r, p) in shares {
            match r {
                CallerRef::Call { gb, k } => {
                    let c = self.walk_q(gb, k + 1, rq);
                    self.add_land(&mut land, c.land, p);
                    let g = self.l.func_of[gb];
                    for idx in c.exits.range() {
                        let (rq2, p2) = self.exit_arena[idx];
                        let u = self.up_fn(g, rq2);
                        self.add_land(&mut land, u, p * p2);
                    }
                }
                CallerRef::Tail { gb, .. } => {
                    let g = self.l.func_of[gb];
                    let u = self.up_fn(g, rq);
                    self.add_land(&mut land, u, p);
                }
                CallerRef::Ext { .. } => {
                    // Back to an indirect call site, if the model has any (else lost).
                    let sites = std::mem::take(&mut self.ind_sites);
                    for &(gb, k, q) in &sites {
                        let c = self.walk_q(gb, k + 1, rq);
                        self.add_land(&mut land, c.land, p * q);
                        let g = self.l.func_of[gb];
                        for idx in c.exits.range() {
                            let (rq2, p2) = self.exit_arena[idx];
                            let u = self.up_fn(g, rq2);
                            self.add_land(&mut land, u, p * q * p2);
                        }
                    }
                    self.ind_sites = sites;
                }
            }
        }
        self.finish(land, exits).land
    }

    /// Everything after an overflow at instruction `m` of `gb` with skid `s`: the walk, and
    /// the continuation of returns at the callers.
    pub(super) fn after_overflow(
        &mut self,
        gb: usize,
        m: usize,
        s: f64,
        w: f64,
        land: &mut Vec<(u32, f64)>,
    ) {
        let l = self.l;
        let f = l.func_of[gb];
        let o = match l.calls[gb].iter().find(|(kk, _)| *kk == m) {
            // The overflow is on a call: the next instructions are the callee's.
            Some(&(_, cl)) => self.through_call(gb, m, cl, s),
            None => {
                // Fast path: the sample lands in the rest of its own block before any call
                // (the common case) — no partial outcome needed.
                let i0 = l.istart[gb];
                let mut cum = 0.0;
                for k in m + 1..l.size(gb) {
                    if l.calls[gb].iter().any(|(kk, _)| *kk == k) {
                        break;
                    }
                    cum += self.cpi[i0 + k];
                    if cum >= s - 1e-9 {
                        land.push((l.site_of(gb, k), w));
                        return;
                    }
                }
                self.walk(gb, m + 1, s)
            }
        };
        self.add_land(land, o.land, w);
        for idx in o.exits.range() {
            let (rq, p) = self.exit_arena[idx];
            let u = self.up_fn(f, rq);
            self.add_land(land, u, w * p);
        }
    }

    /// `L_b`: landing per site of the `|B_b|` overflows of one execution of `gb`, averaged
    /// over the skid points.
    pub(super) fn block_landing(&mut self, gb: usize, skids: &[f64]) -> Vec<(u32, f64)> {
        let mut land = Vec::new();
        let w = 1.0 / skids.len() as f64;
        for m in 0..self.l.size(gb) {
            for &s in skids {
                if s <= 0.0 {
                    land.push((self.l.site_of(gb, m), w));
                } else {
                    self.after_overflow(gb, m, s, w, &mut land);
                }
            }
            compact(&mut land);
        }
        land
    }

    /// `L_X`: landing per site of one overflow inside black box `x`, at a uniformly random
    /// point of a call: `u tau` cycles are left in the box, `u ~ U(0,1)`. It stays in the
    /// box with probability `max(0, 1 - S / tau)`; otherwise it leaves with `r = S - u tau`
    /// left, uniform on `(max(0, S - tau), S]` with density `1 / tau` — spread exactly over
    /// the quanta of `r`.
    pub(super) fn box_landing(&mut self, x: usize, skids: &[f64]) -> Vec<(u32, f64)> {
        let mut land = Vec::new();
        let tau = self.tau[x];
        let w = 1.0 / skids.len() as f64;
        for &s in skids {
            if !tau.is_finite() || s <= 0.0 {
                land.push((self.box_site(x), w));
                continue;
            }
            let stay = (1.0 - s / tau).max(0.0);
            if stay > 0.0 {
                land.push((self.box_site(x), w * stay));
            }
            let lo = (s - tau).max(0.0);
            let (q0, q1) = (self.q(lo), self.q(s));
            for rq in q0..=q1 {
                let a = ((rq as f64 - 0.5) * self.quantum).max(lo);
                let b = ((rq as f64 + 0.5) * self.quantum).min(s);
                if b > a {
                    let u = self.up_box(x, rq);
                    self.add_land(&mut land, u, w * (b - a) / tau);
                }
            }
        }
        compact(&mut land);
        land
    }
}
