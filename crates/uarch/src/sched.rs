//! The out-of-order scheduler: times a sequence of [`Op`]s on a [`Core`].
//!
//! # The model
//!
//! Instruction `i` (program order) with `u_i` micro-ops, latency `L_i`, port pressure
//! `P_i,p` and, for a memory source, read advance `A_i`:
//!
//! * **dispatch** `d_i`: in order, at most `IssueWidth` micro-ops per cycle, and only when
//!   the reorder buffer (`MicroOpBufferSize` micro-ops) has room: the instructions ahead
//!   that hold it must have retired (cycle after their retirement);
//! * **operands**: `a_i` = when its address registers are ready, `r_i` = when its other
//!   input registers (and flags) are ready; a register is ready when its last writer
//!   completes. Zero idioms read nothing; the stack pointer's changes by push, pop, call,
//!   ret and `add/sub rsp, imm` are the stack engine's (no dependency);
//! * **ports**: the instruction occupies each port `p` for `P_i,p` cycles (LLVM's pressure,
//!   spread over the ports it may use) in the earliest cycles at or after
//!   `t0 = max(d_i + 1, a_i)` (a memory source) or `max(d_i + 1, a_i, r_i)` where the port
//!   has capacity left (a cycle holds one port-cycle per port; capacity left by older
//!   instructions is used by younger ones, as an out-of-order scheduler does): `s_i` is the
//!   cycle its slowest port demand starts;
//! * **completion** `f_i = s_i + L_i`, or with a memory source
//!   `f_i = max(s_i + A_i, r_i) + (L_i - A_i)` (the load and the operation after it; the
//!   other operands are read `A_i` cycles after the load issues, LLVM's `ReadAdvance`).
//!   A load from the address of an earlier store still in the scheduler's store window
//!   (the same base and index register values and displacement) takes its data from the
//!   store: `f_i = max(s_i, w) + L_i` (`w` = when the store's data was ready), i.e. store-to-
//!   load forwarding at the load's own latency;
//! * **retirement** `c_i = max(f_i, c_{i-1})`, at most `RetireControlUnit` per cycle where
//!   the model sets a limit;
//! * **taken branches** ([`Sched::taken_branch`]): the instruction a taken branch leads to
//!   dispatches at the earliest [`Core::taken_branch_cycles`] after the branch
//!   (`d_j >= d_b + T`): the front end fetches one block per cycle and a block ends at its
//!   first taken branch, so the rest of the branch's dispatch group is lost.
//!
//! Left out: the rest of the front end (decoders, micro-op cache, instruction-cache and
//! branch-target-buffer misses, taken-branch bubbles beyond `T`), register-file limits, load and
//! store buffer sizes, memory ordering other than the forwarding above (loads are assumed not
//! to alias unknown stores, llvm-mca's default), caches (every load hits L1 unless the
//! caller adds latency with [`Sched::push_with`]), branch prediction (the caller adds the
//! misprediction cost, [`crate::flow`]).

use crate::op::{Op, NREGS, RSP};
use crate::table::Core;
use std::collections::VecDeque;

/// When one instruction dispatched, issued, completed and retired.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Timing {
    /// Dispatch cycle `d_i`.
    pub dispatch: u64,
    /// Issue cycle `s_i`.
    pub issue: u64,
    /// Completion cycle `f_i`.
    pub complete: u64,
    /// Retirement cycle `c_i`.
    pub retire: u64,
}

/// Cycles of port capacity kept (a ring; rows are reused after this many cycles).
const HORIZON: usize = 1 << 14;
/// Stores kept for forwarding.
const STORE_WINDOW: usize = 64;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Addr {
    base: (u8, u32),
    index: (u8, u32),
    scale: u8,
    disp: i64,
}

/// The scheduler's state (see the module documentation).
#[derive(Debug, Clone)]
pub struct Sched<'c> {
    core: &'c Core,
    ports: usize,
    /// Port capacity used per cycle: row `t % HORIZON`, valid when `stamp` is `t`.
    used: Vec<f32>,
    stamp: Vec<u64>,
    ready: [u64; NREGS],
    /// Per register: a version (changed by every write but a constant offset) and the
    /// offset since that version, so that addresses compare across `p += 8`.
    version: [u32; NREGS],
    offset: [i64; NREGS],
    next_version: u32,
    stores: VecDeque<(Addr, u64)>,
    dispatch_cycle: u64,
    dispatch_used: u32,
    rob: VecDeque<(u64, u16)>,
    rob_uops: u32,
    last_retire: u64,
    retired_in_cycle: u32,
}

impl<'c> Sched<'c> {
    /// An empty core.
    pub fn new(core: &'c Core) -> Sched<'c> {
        let ports = core.ports.len().max(1);
        Sched {
            core,
            ports,
            used: vec![0.0; HORIZON * ports],
            stamp: vec![u64::MAX; HORIZON],
            ready: [0; NREGS],
            version: [0; NREGS],
            offset: [0; NREGS],
            next_version: 1,
            stores: VecDeque::with_capacity(STORE_WINDOW),
            dispatch_cycle: 0,
            dispatch_used: 0,
            rob: VecDeque::new(),
            rob_uops: 0,
            last_retire: 0,
            retired_in_cycle: 0,
        }
    }

    /// Back to an empty core (keeps the allocations).
    pub fn reset(&mut self) {
        self.stamp.iter_mut().for_each(|s| *s = u64::MAX);
        self.ready = [0; NREGS];
        self.version = [0; NREGS];
        self.offset = [0; NREGS];
        self.next_version = 1;
        self.stores.clear();
        self.dispatch_cycle = 0;
        self.dispatch_used = 0;
        self.rob.clear();
        self.rob_uops = 0;
        self.last_retire = 0;
        self.retired_in_cycle = 0;
    }

    fn row(&mut self, t: u64) -> usize {
        let r = (t as usize) % HORIZON;
        if self.stamp[r] != t {
            self.stamp[r] = t;
            self.used[r * self.ports..(r + 1) * self.ports]
                .iter_mut()
                .for_each(|u| *u = 0.0);
        }
        r
    }

    /// Places `demand` cycles on `port` from cycle `t0`; returns the first cycle used.
    fn place(&mut self, port: usize, mut demand: f32, t0: u64) -> u64 {
        let mut t = t0;
        let mut first = None;
        while demand > 1e-4 {
            let r = self.row(t);
            let u = &mut self.used[r * self.ports + port];
            let take = (1.0 - *u).min(demand);
            if take > 1e-4 {
                *u += take;
                demand -= take;
                first.get_or_insert(t);
            }
            t += 1;
        }
        first.unwrap_or(t0)
    }

    fn addr(&self, op: &Op) -> Option<Addr> {
        let m = op.mem?;
        let part = |r: u8| -> ((u8, u32), i64) {
            if r == u8::MAX {
                ((r, 0), 0)
            } else {
                ((r, self.version[r as usize]), self.offset[r as usize])
            }
        };
        let (base, bo) = part(m.base);
        let (index, io) = part(m.index);
        Some(Addr {
            base,
            index,
            scale: m.scale,
            disp: m.disp + bo + io * i64::from(m.scale),
        })
    }

    /// A taken branch dispatched in cycle `branch_dispatch`: the next instruction dispatches
    /// at the earliest [`Core::taken_branch_cycles`] later (module documentation).
    pub fn taken_branch(&mut self, branch_dispatch: u64) {
        let t = branch_dispatch + u64::from(self.core.taken_branch_cycles);
        if t > self.dispatch_cycle {
            self.dispatch_cycle = t;
            self.dispatch_used = 0;
        }
    }

    /// Times the next instruction.
    pub fn push(&mut self, op: &Op) -> Timing {
        self.push_with(op, 0)
    }

    /// Times the next instruction, its load taking `extra` cycles more than an L1 hit (a
    /// cache miss the caller knows of).
    pub fn push_with(&mut self, op: &Op, extra: u32) -> Timing {
        let core = self.core;
        // Dispatch: reorder-buffer room, then a slot in the dispatch width.
        let uops = u32::from(op.uops);
        let mut d = self.dispatch_cycle;
        while self.rob_uops + uops > core.rob && !self.rob.is_empty() {
            let (c, u) = self.rob.pop_front().expect("not empty");
            self.rob_uops -= u32::from(u);
            d = d.max(c + 1);
        }
        if d > self.dispatch_cycle {
            self.dispatch_cycle = d;
            self.dispatch_used = 0;
        }
        if self.dispatch_used + uops > core.issue_width && self.dispatch_used > 0 {
            self.dispatch_cycle += 1;
            self.dispatch_used = 0;
        }
        let d = self.dispatch_cycle;
        self.dispatch_used += uops;
        while self.dispatch_used >= core.issue_width {
            self.dispatch_used -= core.issue_width;
            self.dispatch_cycle += 1;
        }
        // Operands.
        let stack = matches!(op.offset, Some((r, _)) if r == RSP);
        let ready = |r: u8| -> u64 {
            if stack && r == RSP {
                0
            } else {
                self.ready[r as usize]
            }
        };
        let a = op
            .addr_reads
            .as_slice()
            .iter()
            .map(|&r| ready(r))
            .max()
            .unwrap_or(0);
        let r = op
            .reads
            .as_slice()
            .iter()
            .map(|&r| ready(r))
            .max()
            .unwrap_or(0);
        let memsrc = op.load && op.mem.is_some();
        let t0 = if memsrc { a } else { a.max(r) }.max(d + 1);
        let mut s = t0;
        for &(p, c) in op.pressure.iter() {
            if (p as usize) < self.ports && c > 0.0 {
                s = s.max(self.place(p as usize, c, t0));
            }
        }
        let lat = u64::from(op.latency) + u64::from(extra);
        let addr = self.addr(op);
        let f = if memsrc {
            let forwarded = addr.and_then(|k| {
                self.stores
                    .iter()
                    .rev()
                    .find(|(x, _)| *x == k)
                    .map(|&(_, w)| w)
            });
            match forwarded {
                Some(w) => s.max(w) + u64::from(op.latency),
                None => {
                    let adv = u64::from(op.advance);
                    (s + adv + u64::from(extra)).max(r) + lat.saturating_sub(adv + u64::from(extra))
                }
            }
        } else {
            s + lat
        };
        // Results.
        if op.store {
            if let Some(k) = addr {
                if self.stores.len() == STORE_WINDOW {
                    self.stores.pop_front();
                }
                // The data stored: an operation's result, or the registers stored.
                let w = if op.load { f } else { r.max(s) };
                self.stores.push_back((k, w));
            }
        }
        for &w in op.writes.as_slice() {
            if stack && w == RSP {
                continue;
            }
            self.ready[w as usize] = f;
        }
        match op.offset {
            Some((reg, delta)) => self.offset[reg as usize] += delta,
            None => {
                for &w in op.writes.as_slice() {
                    self.version[w as usize] = self.next_version;
                    self.offset[w as usize] = 0;
                    self.next_version += 1;
                }
            }
        }
        // Retirement.
        let mut c = f.max(self.last_retire);
        if c == self.last_retire {
            if let Some(w) = core.retire_width {
                if self.retired_in_cycle >= w {
                    c += 1;
                }
            }
        }
        if c > self.last_retire {
            self.retired_in_cycle = 0;
        }
        self.retired_in_cycle += 1;
        self.last_retire = c;
        self.rob.push_back((c, op.uops));
        self.rob_uops += uops;
        Timing {
            dispatch: d,
            issue: s,
            complete: f,
            retire: c,
        }
    }
}

/// Time-proportional attribution of retirement cycles (Gottschall, Eeckhout and Jahre, "TIP:
/// Time-Proportional Instruction Profiling", MICRO 2021, §3; as in `proftrust-vpmu`'s
/// `TipAttribution`): the cycles between two retirements go to the instruction retiring at
/// the end of the stall, and a cycle in which several retire is split evenly among them.
/// `retire` rises; the result sums to `retire.last() - start`.
pub fn tip(retire: &[u64], start: u64) -> Vec<f64> {
    let mut out = vec![0.0; retire.len()];
    let mut prev = start;
    let mut k = 0;
    while k < retire.len() {
        let c = retire[k];
        let mut j = k;
        while j < retire.len() && retire[j] == c {
            j += 1;
        }
        let n = (j - k) as f64;
        let stall = c.saturating_sub(prev).saturating_sub(1) as f64;
        if c > prev {
            out[k] += stall;
            for o in &mut out[k..j] {
                *o += 1.0 / n;
            }
        }
        prev = c.max(prev);
        k = j;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::op::{Flow, MemRef, Regs};
    use crate::table::CoreKind;

    fn regs(r: &[u8]) -> Regs {
        let mut x = Regs::default();
        for &i in r {
            x.add(i);
        }
        x
    }

    fn op(lat: u16, reads: &[u8], writes: &[u8], pressure: &[(u8, f32)]) -> Op {
        Op {
            len: 4,
            uops: 1,
            latency: lat,
            advance: 0,
            pressure: pressure.to_vec().into_boxed_slice(),
            reads: regs(reads),
            addr_reads: Regs::default(),
            writes: regs(writes),
            load: false,
            store: false,
            mem: None,
            offset: None,
            flow: Flow::Next,
            known: true,
        }
    }

    /// Steady state cycles per iteration of `body` repeated `n` times.
    fn per_iter(core: &Core, body: &[Op], n: usize) -> f64 {
        let mut s = Sched::new(core);
        let mut mid = 0;
        let mut last = 0;
        for k in 0..n {
            for o in body {
                last = s.push(o).retire;
            }
            if k == n / 2 {
                mid = last;
            }
        }
        (last - mid) as f64 / (n - 1 - n / 2) as f64
    }

    /// A chain through one register runs at its latency; independent instructions at the
    /// port bound; a 3-cycle-busy divider bounds independent divisions to one per 3 cycles.
    #[test]
    fn chains_ports_and_dividers_by_hand() {
        let core = Core::new(CoreKind::GoldenCove);
        // 15-cycle dependent chain (idiv-like) on port 1 for 3 cycles.
        let chain = [op(15, &[0], &[0], &[(1, 3.0)])];
        assert_eq!(per_iter(&core, &chain, 200), 15.0);
        // Independent: one per 3 cycles (the divider).
        let indep = [op(15, &[], &[0], &[(1, 3.0)])];
        assert_eq!(per_iter(&core, &indep, 200), 3.0);
        // Four independent adds spread over five ALU ports (0.2 each): the dispatch width
        // (6 per cycle) bounds them, 4 per iteration -> 4/6 cycles.
        let alu: Vec<(u8, f32)> = [0u8, 1, 5, 6, 10].iter().map(|&p| (p, 0.2)).collect();
        let adds: Vec<Op> = (0..4).map(|k| op(1, &[k + 1], &[k + 1], &alu)).collect();
        let c = per_iter(&core, &adds, 600);
        assert!((c - 1.0).abs() < 0.02, "{c}"); // each add is a 1-cycle chain of its own
        let free: Vec<Op> = (0..4).map(|k| op(1, &[], &[k + 1], &alu)).collect();
        let c = per_iter(&core, &free, 600);
        assert!((c - 4.0 / 5.0).abs() < 0.02, "{c}"); // 4 port-cycles over 5 ports
    }

    /// A store and a load from the same address: the load waits for the stored data and
    /// adds its own latency (a round trip through memory: 5 + 1 per iteration). Addresses
    /// compare across a constant change of the base register: after `p += 8`, `[p + 8]` is
    /// the `[p + 16]` stored before (forwarded), `[p + 16]` is not (the add chain alone).
    #[test]
    fn store_to_load_forwarding() {
        let core = Core::new(CoreKind::GoldenCove);
        let at = |disp| MemRef {
            base: 7,
            index: u8::MAX,
            scale: 1,
            disp,
            size: 8,
        };
        let mut store = op(1, &[0], &[], &[(4, 1.0)]);
        store.store = true;
        store.mem = Some(at(16));
        store.addr_reads = regs(&[7]);
        let load = |disp| {
            let mut l = op(5, &[], &[0], &[(2, 1.0)]);
            l.load = true;
            l.mem = Some(at(disp));
            l.addr_reads = regs(&[7]);
            l.advance = 5;
            l
        };
        let add = op(1, &[0], &[0], &[(0, 1.0)]);
        let body = [store.clone(), load(16), add.clone()];
        assert_eq!(per_iter(&core, &body, 100), 6.0);
        let mut bump = op(1, &[7], &[7], &[(5, 1.0)]);
        bump.offset = Some((7, 8));
        let body = [store.clone(), bump.clone(), load(8), add.clone()];
        assert_eq!(per_iter(&core, &body, 100), 6.0);
        let body = [store, bump, load(16), add];
        let c = per_iter(&core, &body, 100);
        assert!(c < 2.0, "{c}");
    }

    #[test]
    fn tip_splits_groups_and_charges_stalls() {
        // Retire cycles 2, 2, 10, 11 from 0: cycle 1 is a stall of the first group (to its
        // first member), cycle 2 split; cycles 3-9 a stall of the third; 10; 11.
        assert_eq!(tip(&[2, 2, 10, 11], 0), vec![1.5, 0.5, 8.0, 1.0]);
        assert_eq!(tip(&[5, 5, 5, 5], 5), vec![0.0; 4]);
    }
}
