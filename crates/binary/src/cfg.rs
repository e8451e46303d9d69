//! Basic blocks and control-flow edges of one function, with jump-table resolution.
//!
//! # Rules
//!
//! * Instructions are decoded linearly from the function start to its end (compilers put no
//!   data in x86-64 `.text`).
//! * A block starts at the entry, at every branch target inside the function, and after
//!   every instruction that ends a block.
//! * **Calls do not end a block**: a call is assumed to return to the next instruction
//!   (seed 000 §2.1 and seed 003 §2 treat procedures intraprocedurally). The exception is a
//!   call to a function known never to return (`exit`, `abort`, `__stack_chk_fail`,
//!   `__cxa_throw`, Rust panics, ...; see `is_noreturn`): its block ends with no successor.
//! * `jcc` gives a `Taken` edge and a `FallThrough` edge; `jmp` an `Unconditional` edge;
//!   `ret` a `Return` edge; a branch out of the function (tail call, `.cold` part) an `Exit`
//!   edge; `int3`/`ud2`/undecodable bytes end a block with no successor; a block that falls
//!   off the end of the function gets an `Exit` edge.
//! * An indirect `jmp` is resolved when it matches a gcc/clang jump-table pattern **and**
//!   the number of entries is bounded by a preceding `cmp idx, N` + `ja`/`jae` (or
//!   `and idx, 2^k-1`) and every entry lands on an instruction of the function:
//!   - PIC: `lea T(%rip),%b; movslq (%b,%idx,4),%r; add %b,%r; jmp *%r` (targets `T + entry`);
//!   - absolute: `jmp *T(,%idx,8)` or `mov T(,%idx,8),%r; jmp *%r` (targets are the entries).
//!
//!   Each distinct target gets an `IndirectResolved` edge. A `jmp *slot(%rip)` through a
//!   GOT slot named by a dynamic relocation is a tail call (`Exit`). Anything else gets one
//!   `IndirectUnknown` edge and sets `has_unknown_indirect`: targets are never guessed.
//! * Padding (blocks of only `nop`/`int3` that nothing reaches) is dropped.

use crate::disasm::{decode_raw, flow_of, Flow};
use crate::elf::{is_noreturn, Binary, Function};
use crate::error::BinaryError;
use crate::loops::natural_loops;
use iced_x86::{Instruction, InstructionInfoFactory, Mnemonic, OpAccess, OpKind, Register};
use proftrust_model::{BasicBlock, BlockId, Cfg, CfgEdge, EdgeKind, Svma};

/// Largest jump table accepted.
const MAX_TABLE: u64 = 1 << 16;
/// How far back (instructions) the jump-table matcher looks.
const WINDOW: usize = 24;

#[derive(Debug, Clone)]
enum Term {
    /// Not a block end (or ends only because the next instruction is a leader).
    None,
    Cond(Option<usize>),
    Jump(Option<usize>),
    Indirect(Indirect),
    Ret,
    /// No successor (trap, invalid, noreturn call).
    Stop,
}

#[derive(Debug, Clone)]
enum Indirect {
    Resolved(Vec<usize>),
    TailCall,
    Unknown,
}

/// Result of jump-table matching for one indirect jump.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct JumpTable {
    /// Table address.
    pub table: u64,
    /// Number of entries (from the bound check).
    pub entries: u64,
    /// Targets, one per entry (duplicates kept).
    pub targets: Vec<u64>,
}

fn full(r: Register) -> Register {
    r.full_register()
}

/// Whether `ins` writes register `r` (full register compared).
fn writes(info: &mut InstructionInfoFactory, ins: &Instruction, r: Register) -> bool {
    if matches!(flow_of(ins), Flow::Call | Flow::IndirectCall) {
        // System V x86-64 ABI: a call may clobber the caller-saved registers only.
        return matches!(
            r,
            Register::RAX
                | Register::RCX
                | Register::RDX
                | Register::RSI
                | Register::RDI
                | Register::R8
                | Register::R9
                | Register::R10
                | Register::R11
        );
    }
    info.info(ins).used_registers().iter().any(|u| {
        full(u.register()) == r
            && matches!(
                u.access(),
                OpAccess::Write
                    | OpAccess::CondWrite
                    | OpAccess::ReadWrite
                    | OpAccess::ReadCondWrite
            )
    })
}

/// Index of the last instruction before `k` (within the window) that writes `r`.
fn last_writer(
    info: &mut InstructionInfoFactory,
    raw: &[Instruction],
    k: usize,
    r: Register,
) -> Option<usize> {
    let lo = k.saturating_sub(WINDOW);
    (lo..k).rev().find(|&m| writes(info, &raw[m], r))
}

fn op0_reg(ins: &Instruction) -> Option<Register> {
    (ins.op_count() >= 1 && ins.op0_kind() == OpKind::Register).then(|| full(ins.op0_register()))
}
fn op1_reg(ins: &Instruction) -> Option<Register> {
    (ins.op_count() >= 2 && ins.op1_kind() == OpKind::Register).then(|| full(ins.op1_register()))
}
fn imm1(ins: &Instruction) -> Option<i64> {
    if ins.op_count() < 2 {
        return None;
    }
    match ins.op1_kind() {
        OpKind::Immediate8
        | OpKind::Immediate16
        | OpKind::Immediate32
        | OpKind::Immediate8to16
        | OpKind::Immediate8to32
        | OpKind::Immediate8to64
        | OpKind::Immediate32to64
        | OpKind::Immediate64 => Some(ins.immediate(1) as i64),
        _ => None,
    }
}

/// Memory operand `[index*scale + disp]` with no base: `(index, scale, disp)`.
fn mem_index_only(ins: &Instruction, op: u32) -> Option<(Register, u32, u64)> {
    if ins.op_count() <= op || ins.op_kind(op) != OpKind::Memory {
        return None;
    }
    if ins.memory_base() != Register::None || ins.memory_index() == Register::None {
        return None;
    }
    Some((
        full(ins.memory_index()),
        ins.memory_index_scale(),
        ins.memory_displacement64(),
    ))
}

/// A memory operand, compared by its parts (rip-relative operands have `RIP` as base and
/// the absolute address as displacement, so equal operands compare equal).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct MemKey {
    base: Register,
    index: Register,
    scale: u32,
    disp: u64,
}

fn mem_key(ins: &Instruction, op: u32) -> Option<MemKey> {
    if ins.op_count() <= op || ins.op_kind(op) != OpKind::Memory {
        return None;
    }
    Some(MemKey {
        base: full(ins.memory_base()),
        index: full(ins.memory_index()),
        scale: ins.memory_index_scale(),
        disp: ins.memory_displacement64(),
    })
}

/// What holds the table index while walking back.
enum Tracked {
    /// Any of these registers (copies of each other).
    Regs(Vec<Register>),
    /// A memory operand the index was loaded from.
    Mem(MemKey),
}

/// Bound on the index register `idx` used at instruction `k`: the number of table entries.
///
/// Walks back through straight-line code: `cmp idx, N` directly followed by `ja`/`jae`
/// whose fall-through leads to `k` (or `jbe`/`jb` whose target lies in `(m, k]`) gives
/// `N + 1` / `N`; `and idx, 2^j - 1` gives `2^j`. Register copies (`mov`, `movzx`,
/// `movsxd` between registers) are followed, and so is a load of the index from memory
/// (`cmpb $6,2(%rsi); ja ..; movzbl 2(%rsi),%eax`) as long as nothing in between writes
/// the operand's registers or stores to memory. Stops at any other write to the index or
/// at an unconditional jump or return (code before those does not flow here).
fn find_bound(
    info: &mut InstructionInfoFactory,
    raw: &[Instruction],
    k: usize,
    idx: Register,
) -> Option<u64> {
    let mut tracked = Tracked::Regs(vec![idx]);
    let lo = k.saturating_sub(WINDOW);
    let kaddr = raw[k].ip();
    let mut m = k;
    while m > lo {
        m -= 1;
        let ins = &raw[m];
        match flow_of(ins) {
            Flow::Jump | Flow::Return | Flow::IndirectJump | Flow::Trap | Flow::Invalid => {
                return None
            }
            Flow::CondJump if m > 0 => {
                let cmp = &raw[m - 1];
                if cmp.mnemonic() == Mnemonic::Cmp {
                    let same = match &tracked {
                        Tracked::Regs(regs) => op0_reg(cmp).is_some_and(|r| regs.contains(&r)),
                        Tracked::Mem(key) => mem_key(cmp, 0) == Some(*key),
                    };
                    if let (true, Some(n)) = (same, imm1(cmp)) {
                        if n >= 0 {
                            let n = n as u64;
                            let t = ins.near_branch_target();
                            let target_here = t > ins.ip() && t <= kaddr;
                            let b = match ins.mnemonic() {
                                Mnemonic::Ja => Some(n + 1),
                                Mnemonic::Jae => Some(n),
                                Mnemonic::Jbe if target_here => Some(n + 1),
                                Mnemonic::Jb if target_here => Some(n),
                                _ => None,
                            };
                            if b.is_some() {
                                return b;
                            }
                        }
                    }
                }
                continue;
            }
            _ => {}
        }
        match &mut tracked {
            Tracked::Mem(key) => {
                let key = *key;
                let regs_written = [key.base, key.index]
                    .iter()
                    .any(|&r| r != Register::None && r != Register::RIP && writes(info, ins, r));
                let stores = info.info(ins).used_memory().iter().any(|u| {
                    matches!(
                        u.access(),
                        OpAccess::Write
                            | OpAccess::CondWrite
                            | OpAccess::ReadWrite
                            | OpAccess::ReadCondWrite
                    )
                });
                if regs_written || stores {
                    return None;
                }
            }
            Tracked::Regs(regs) => {
                let Some(w) = regs.iter().copied().find(|&r| writes(info, ins, r)) else {
                    continue;
                };
                match ins.mnemonic() {
                    Mnemonic::Mov | Mnemonic::Movzx | Mnemonic::Movsxd | Mnemonic::Movsx
                        if op0_reg(ins) == Some(w) =>
                    {
                        if let Some(src) = op1_reg(ins) {
                            regs.retain(|&r| r != w);
                            regs.push(src);
                        } else if let Some(key) = mem_key(ins, 1) {
                            tracked = Tracked::Mem(key);
                        } else {
                            return None;
                        }
                    }
                    Mnemonic::And if op0_reg(ins) == Some(w) => {
                        let n = imm1(ins)?;
                        if n >= 0 && (n as u64 + 1).is_power_of_two() {
                            return Some(n as u64 + 1);
                        }
                        return None;
                    }
                    _ => return None,
                }
            }
        }
    }
    None
}

/// Whether `raw[i]` is a `pop` of a callee-saved register in an epilogue: only pops and
/// stack adjustments follow it up to a `ret` or a jump out (the restored value is never
/// used inside the function).
fn is_epilogue_pop(raw: &[Instruction], i: usize) -> bool {
    if raw[i].mnemonic() != Mnemonic::Pop {
        return false;
    }
    for ins in raw.iter().skip(i + 1).take(8) {
        match flow_of(ins) {
            Flow::Return | Flow::Jump | Flow::IndirectJump => return true,
            Flow::Next
                if matches!(
                    ins.mnemonic(),
                    Mnemonic::Pop | Mnemonic::Add | Mnemonic::Lea
                ) && (ins.mnemonic() == Mnemonic::Pop
                    || op0_reg(ins) == Some(Register::RSP)) => {}
            _ => return false,
        }
    }
    false
}

/// The only instruction of the whole function that writes `r`, if there is exactly one
/// (a table base loaded once in the prologue and kept in a callee-saved register).
fn unique_writer(
    info: &mut InstructionInfoFactory,
    raw: &[Instruction],
    r: Register,
) -> Option<usize> {
    let mut found = None;
    for (i, ins) in raw.iter().enumerate() {
        if writes(info, ins, r) && !is_epilogue_pop(raw, i) {
            if found.is_some() {
                return None;
            }
            found = Some(i);
        }
    }
    found
}

fn read_u32(bin: &Binary, a: u64) -> Option<u32> {
    let (_, b) = bin.bytes_at(a)?;
    Some(u32::from_le_bytes(b.get(..4)?.try_into().ok()?))
}
fn read_u64(bin: &Binary, a: u64) -> Option<u64> {
    let (_, b) = bin.bytes_at(a)?;
    Some(u64::from_le_bytes(b.get(..8)?.try_into().ok()?))
}

/// Matches the jump-table patterns for the indirect jump at `raw[j]`.
pub(crate) fn match_jump_table(
    bin: &Binary,
    info: &mut InstructionInfoFactory,
    raw: &[Instruction],
    j: usize,
) -> Option<JumpTable> {
    let jmp = &raw[j];
    // Absolute: jmp *T(,%idx,8)
    if let Some((idx, 8, table)) = mem_index_only(jmp, 0) {
        let n = find_bound(info, raw, j, idx)?;
        return read_abs(bin, table, n);
    }
    let t = op0_reg(jmp)?;
    let w1 = last_writer(info, raw, j, t)?;
    let i1 = &raw[w1];
    // mov T(,%idx,8),%t ; jmp *%t
    if i1.mnemonic() == Mnemonic::Mov && op0_reg(i1) == Some(t) {
        let (idx, scale, table) = mem_index_only(i1, 1)?;
        if scale != 8 {
            return None;
        }
        let n = find_bound(info, raw, w1, idx)?;
        return read_abs(bin, table, n);
    }
    // lea T(%rip),%b ; movslq (%b,%idx,4),%t ; add %b,%t ; jmp *%t
    if i1.mnemonic() != Mnemonic::Add || op0_reg(i1) != Some(t) {
        return None;
    }
    let b = op1_reg(i1)?;
    let w2 = last_writer(info, raw, w1, t)?;
    let i2 = &raw[w2];
    if i2.mnemonic() != Mnemonic::Movsxd
        || op0_reg(i2) != Some(t)
        || i2.op1_kind() != OpKind::Memory
        || full(i2.memory_base()) != b
        || i2.memory_index() == Register::None
        || i2.memory_index_scale() != 4
        || i2.memory_displacement64() != 0
    {
        return None;
    }
    let idx = full(i2.memory_index());
    // The base must hold the same value at the load and at the add.
    let wb = match last_writer(info, raw, w2, b) {
        Some(wb) => {
            if last_writer(info, raw, w1, b) != Some(wb) {
                return None;
            }
            wb
        }
        None => {
            // Not in the window: accept a base written once in the whole function.
            let wb = unique_writer(info, raw, b)?;
            if wb >= w2 {
                return None;
            }
            wb
        }
    };
    let lea = &raw[wb];
    if lea.mnemonic() != Mnemonic::Lea || !lea.is_ip_rel_memory_operand() {
        return None;
    }
    let table = lea.ip_rel_memory_address();
    let n = find_bound(info, raw, w2, idx)?;
    if n == 0 || n > MAX_TABLE {
        return None;
    }
    let mut targets = Vec::with_capacity(n as usize);
    for i in 0..n {
        let e = read_u32(bin, table.checked_add(4 * i)?)? as i32 as i64;
        targets.push(table.wrapping_add(e as u64));
    }
    Some(JumpTable {
        table,
        entries: n,
        targets,
    })
}

fn read_abs(bin: &Binary, table: u64, n: u64) -> Option<JumpTable> {
    if n == 0 || n > MAX_TABLE {
        return None;
    }
    let mut targets = Vec::with_capacity(n as usize);
    for i in 0..n {
        targets.push(read_u64(bin, table.checked_add(8 * i)?)?);
    }
    Some(JumpTable {
        table,
        entries: n,
        targets,
    })
}

fn is_padding(ins: &Instruction) -> bool {
    matches!(ins.mnemonic(), Mnemonic::Nop | Mnemonic::Int3)
        || (ins.mnemonic() == Mnemonic::Xchg && op0_reg(ins) == op1_reg(ins))
}

/// Builds the CFG of `f` (loops filled in): each instruction's terminator and the block
/// leaders ([`terminators`]), blocks as instruction ranges, their successors
/// ([`successors`]), unreachable padding left out ([`reachable_blocks`]), then the blocks
/// and edges renumbered ([`blocks_and_edges`]).
pub(crate) fn build_cfg(bin: &Binary, f: &Function) -> Result<Cfg, BinaryError> {
    let raw = decode_raw(bin, f)?;
    let n = raw.len();
    let addrs: Vec<u64> = raw.iter().map(|i| i.ip()).collect();
    let (leader, term) = terminators(bin, &raw, &addrs);
    // Blocks as instruction index ranges.
    let starts: Vec<usize> = (0..n).filter(|&k| leader[k]).collect();
    let ranges: Vec<(usize, usize)> = starts
        .iter()
        .enumerate()
        .map(|(i, &s)| (s, starts.get(i + 1).copied().unwrap_or(n)))
        .collect();
    let (succ, unknown) = successors(&ranges, &starts, &term, n);
    let keep = reachable_blocks(&raw, &ranges, &succ);
    let (blocks, edges) = blocks_and_edges(&raw, &addrs, &ranges, &succ, &keep);
    let mut cfg = Cfg {
        function: f.name.clone(),
        entry: f.start,
        blocks,
        edges,
        loops: Vec::new(),
        has_unknown_indirect: unknown,
    };
    cfg.loops = natural_loops(&cfg);
    Ok(cfg)
}

/// Successors of a block: (target block, kind); `None` leaves the function.
type Successors = Vec<(Option<usize>, EdgeKind)>;

/// Each instruction's terminator, and which instructions begin a block (the first, the
/// targets of jumps, and those after a terminator). `addrs`: the instructions' addresses.
fn terminators(bin: &Binary, raw: &[Instruction], addrs: &[u64]) -> (Vec<bool>, Vec<Term>) {
    let n = raw.len();
    let mut info = InstructionInfoFactory::new();
    let idx_of = |a: u64| addrs.binary_search(&a).ok();
    let mut leader = vec![false; n];
    let mut term = vec![Term::None; n];
    if n > 0 {
        leader[0] = true;
    }
    for (k, ins) in raw.iter().enumerate() {
        let t = match flow_of(ins) {
            Flow::Next => continue,
            Flow::Call | Flow::IndirectCall => {
                let name = match flow_of(ins) {
                    Flow::Call => bin.name_of_target(ins.near_branch_target()),
                    _ if ins.is_ip_rel_memory_operand() => bin
                        .got_names
                        .get(&ins.ip_rel_memory_address())
                        .map(String::as_str),
                    _ => None,
                };
                if name.is_some_and(is_noreturn) {
                    Term::Stop
                } else {
                    continue;
                }
            }
            Flow::CondJump => Term::Cond(idx_of(ins.near_branch_target())),
            Flow::Jump => Term::Jump(idx_of(ins.near_branch_target())),
            Flow::IndirectJump => Term::Indirect(indirect_jump(bin, &mut info, raw, k, idx_of)),
            Flow::Return => Term::Ret,
            Flow::Trap | Flow::Invalid => Term::Stop,
        };
        match &t {
            Term::Cond(Some(x)) | Term::Jump(Some(x)) => leader[*x] = true,
            Term::Indirect(Indirect::Resolved(v)) => {
                for &x in v {
                    leader[x] = true;
                }
            }
            _ => {}
        }
        if k + 1 < n {
            leader[k + 1] = true;
        }
        term[k] = t;
    }
    (leader, term)
}

/// Where the indirect jump `raw[k]` goes: a tail call through the GOT, the instructions
/// (indices, by `idx_of`) of a jump table's targets, or unknown.
fn indirect_jump(
    bin: &Binary,
    info: &mut InstructionInfoFactory,
    raw: &[Instruction],
    k: usize,
    idx_of: impl Fn(u64) -> Option<usize>,
) -> Indirect {
    let ins = &raw[k];
    if ins.is_ip_rel_memory_operand() && bin.got_names.contains_key(&ins.ip_rel_memory_address()) {
        return Indirect::TailCall;
    }
    let Some(jt) = match_jump_table(bin, info, raw, k) else {
        return Indirect::Unknown;
    };
    match jt
        .targets
        .iter()
        .map(|&a| idx_of(a))
        .collect::<Option<Vec<usize>>>()
    {
        Some(mut v) => {
            v.sort_unstable();
            v.dedup();
            Indirect::Resolved(v)
        }
        None => Indirect::Unknown,
    }
}

/// The successors of each block (`ranges` of instructions beginning at `starts`) by its
/// last instruction's terminator, and whether an indirect jump stayed unknown.
fn successors(
    ranges: &[(usize, usize)],
    starts: &[usize],
    term: &[Term],
    n: usize,
) -> (Vec<Successors>, bool) {
    let block_of_instr = |k: usize| starts.partition_point(|&s| s <= k) - 1;
    let mut succ: Vec<Successors> = Vec::with_capacity(ranges.len());
    let mut unknown = false;
    for &(_, e) in ranges {
        let last = e - 1;
        let next = (e < n).then_some(e).map(block_of_instr);
        let fall = (
            next,
            if next.is_some() {
                EdgeKind::FallThrough
            } else {
                EdgeKind::Exit
            },
        );
        let mut v = Vec::new();
        match &term[last] {
            Term::None => v.push(fall),
            Term::Cond(t) => {
                match t {
                    Some(x) => v.push((Some(block_of_instr(*x)), EdgeKind::Taken)),
                    None => v.push((None, EdgeKind::Exit)),
                }
                v.push(fall);
            }
            Term::Jump(t) => match t {
                Some(x) => v.push((Some(block_of_instr(*x)), EdgeKind::Unconditional)),
                None => v.push((None, EdgeKind::Exit)),
            },
            Term::Indirect(Indirect::Resolved(ts)) => {
                for &x in ts {
                    v.push((Some(block_of_instr(x)), EdgeKind::IndirectResolved));
                }
            }
            Term::Indirect(Indirect::TailCall) => v.push((None, EdgeKind::Exit)),
            Term::Indirect(Indirect::Unknown) => {
                unknown = true;
                v.push((None, EdgeKind::IndirectUnknown));
            }
            Term::Ret => v.push((None, EdgeKind::Return)),
            Term::Stop => {}
        }
        succ.push(v);
    }
    (succ, unknown)
}

/// The blocks kept: all but the padding blocks no kept block reaches (a fixpoint: a
/// padding run may fall into more padding); the entry block always.
fn reachable_blocks(
    raw: &[Instruction],
    ranges: &[(usize, usize)],
    succ: &[Successors],
) -> Vec<bool> {
    let mut keep = vec![true; ranges.len()];
    loop {
        let mut has_pred = vec![false; ranges.len()];
        for (b, v) in succ.iter().enumerate() {
            if keep[b] {
                for (t, _) in v {
                    if let Some(t) = t {
                        has_pred[*t] = true;
                    }
                }
            }
        }
        let mut changed = false;
        for (b, &(s, e)) in ranges.iter().enumerate() {
            if b != 0 && keep[b] && !has_pred[b] && raw[s..e].iter().all(is_padding) {
                keep[b] = false;
                changed = true;
            }
        }
        if !changed {
            return keep;
        }
    }
}

/// The kept blocks, numbered in address order, with their edges.
fn blocks_and_edges(
    raw: &[Instruction],
    addrs: &[u64],
    ranges: &[(usize, usize)],
    succ: &[Successors],
    keep: &[bool],
) -> (Vec<BasicBlock>, Vec<CfgEdge>) {
    let mut new_id = vec![u32::MAX; ranges.len()];
    let mut next_id = 0u32;
    for b in 0..ranges.len() {
        if keep[b] {
            new_id[b] = next_id;
            next_id += 1;
        }
    }
    let mut blocks = Vec::with_capacity(next_id as usize);
    let mut edges = Vec::new();
    for (b, &(s, e)) in ranges.iter().enumerate() {
        if !keep[b] {
            continue;
        }
        let id = BlockId(new_id[b]);
        blocks.push(BasicBlock {
            id,
            start: Svma(addrs[s]),
            end: Svma(addrs[e - 1] + raw[e - 1].len() as u64),
            instructions: addrs[s..e].iter().map(|&a| Svma(a)).collect(),
        });
        for &(t, kind) in &succ[b] {
            // Edges into dropped padding cannot exist (dropped blocks have no predecessor).
            edges.push(CfgEdge {
                from: id,
                to: t.map(|t| BlockId(new_id[t])),
                kind,
            });
        }
    }
    (blocks, edges)
}

/// Jump tables found in `f`: `(address of the jmp, table)` for each resolved indirect jump.
pub(crate) fn jump_tables(
    bin: &Binary,
    f: &Function,
) -> Result<Vec<(Svma, JumpTable)>, BinaryError> {
    let raw = decode_raw(bin, f)?;
    let mut info = InstructionInfoFactory::new();
    let mut out = Vec::new();
    for (k, ins) in raw.iter().enumerate() {
        if flow_of(ins) == Flow::IndirectJump {
            if let Some(jt) = match_jump_table(bin, &mut info, &raw, k) {
                out.push((Svma(ins.ip()), jt));
            }
        }
    }
    Ok(out)
}
