//! One decoded instruction as the scheduler sees it: the registers it reads and writes, its
//! memory operand, its table entry.

use crate::table::Core;
use iced_x86::{
    FlowControl, Instruction, InstructionInfoFactory, Mnemonic, OpAccess, OpKind, Register,
};

/// Register ids of the scheduler: 0-15 the general-purpose registers (any width), 16-47 the
/// vector registers (xmm/ymm/zmm of one number are one register), 48-55 the mask registers,
/// 56-63 x87/MMX, [`FLAGS`].
pub type Reg = u8;
/// The flags register (all flags as one register).
pub const FLAGS: Reg = 64;
/// Number of register ids.
pub const NREGS: usize = 65;
/// The stack pointer's id.
pub const RSP: Reg = 4;

/// How an instruction transfers control.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    /// Falls through.
    Next,
    /// A conditional branch to a known target.
    Conditional(u64),
    /// A direct jump.
    Jump(u64),
    /// An indirect jump.
    IndirectJump,
    /// A direct call.
    Call(u64),
    /// An indirect call.
    IndirectCall,
    /// A return.
    Return,
    /// A system call, interrupt or anything else that leaves the program.
    Other,
}

/// A memory operand: base and index register ids (`u8::MAX` for none), scale, displacement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemRef {
    /// Base register id.
    pub base: Reg,
    /// Index register id.
    pub index: Reg,
    /// Scale of the index.
    pub scale: u8,
    /// Displacement (for RIP-relative operands the absolute address; base none).
    pub disp: i64,
    /// Bytes accessed.
    pub size: u8,
}

/// Up to 8 register ids.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Regs {
    ids: [Reg; 8],
    n: u8,
}

impl Regs {
    /// Adds a register id (ignored when already present or when 8 are held).
    pub fn add(&mut self, r: Reg) {
        if !self.as_slice().contains(&r) && (self.n as usize) < self.ids.len() {
            self.ids[self.n as usize] = r;
            self.n += 1;
        }
    }
    /// The ids.
    pub fn as_slice(&self) -> &[Reg] {
        &self.ids[..self.n as usize]
    }
}

/// One instruction, ready for the scheduler.
#[derive(Debug, Clone, PartialEq)]
pub struct Op {
    /// Length in bytes.
    pub len: u8,
    /// Dispatch slots (LLVM's micro-ops, at least 1: every instruction takes a slot and a
    /// reorder-buffer entry, also a move LLVM eliminates with 0 micro-ops).
    pub uops: u16,
    /// Latency from the inputs to the result (LLVM's).
    pub latency: u16,
    /// With a memory source: cycles after the load issues at which the other register
    /// inputs are needed (LLVM's `ReadAdvance`, at most `latency`); 0 otherwise.
    pub advance: u16,
    /// Port pressure (port, cycles).
    pub pressure: Box<[(u8, f32)]>,
    /// Registers read as data.
    pub reads: Regs,
    /// Registers read to form the memory address.
    pub addr_reads: Regs,
    /// Registers written.
    pub writes: Regs,
    /// Reads memory.
    pub load: bool,
    /// Writes memory.
    pub store: bool,
    /// The memory operand, when there is one (not for `lea`).
    pub mem: Option<MemRef>,
    /// A change of a register by an immediate (`add/sub reg, imm`, `inc`, `dec`, `push`,
    /// `pop`, `call`, `ret`, `lea r, [r + d]`): the register and the change. For the stack
    /// pointer the core's stack engine does it without a micro-op dependency; for the others
    /// the scheduler keeps addresses comparable across the change.
    pub offset: Option<(Reg, i64)>,
    /// Control flow.
    pub flow: Flow,
    /// Whether the core's table had this form (else 1 micro-op, latency 1, no port).
    pub known: bool,
}

fn reg_id(r: Register) -> Option<Reg> {
    if r == Register::None {
        return None;
    }
    if r.is_gpr() {
        return Some(r.full_register().number() as Reg);
    }
    if r.is_xmm() || r.is_ymm() || r.is_zmm() {
        return Some(16 + (r.number() as Reg & 31));
    }
    if r.is_k() {
        return Some(48 + (r.number() as Reg & 7));
    }
    if r.is_st() || r.is_mm() {
        return Some(56 + (r.number() as Reg & 7));
    }
    None
}

/// Whether the instruction is a zero idiom: same source registers, a result that does not
/// depend on them (`xor eax, eax`, `sub`, `pxor`, `xorps`, `vpxor x, x, x`, ...). Intel and
/// AMD break the dependency at rename (Intel 64 and IA-32 Architectures Optimization
/// Reference Manual, "Dependency breaking idioms"; AMD Software Optimization Guide for
/// Family 19h, "Dependency Breaking Idioms").
fn zero_idiom(ins: &Instruction) -> bool {
    use Mnemonic::*;
    let m = ins.mnemonic();
    let candidates = matches!(
        m,
        Xor | Sub
            | Sbb
            | Pxor
            | Xorps
            | Xorpd
            | Vpxor
            | Vpxord
            | Vpxorq
            | Vxorps
            | Vxorpd
            | Psubb
            | Psubw
            | Psubd
            | Psubq
            | Vpsubb
            | Vpsubw
            | Vpsubd
            | Vpsubq
            | Pcmpgtb
            | Pcmpgtw
            | Pcmpgtd
            | Pandn
            | Andnps
            | Andnpd
    );
    if !candidates {
        return false;
    }
    let regs: Vec<Register> = (0..ins.op_count())
        .filter(|&k| ins.op_kind(k) == OpKind::Register)
        .map(|k| ins.op_register(k))
        .collect();
    regs.len() == ins.op_count() as usize
        && regs.len() >= 2
        && regs[1..].iter().all(|&r| r == regs[regs.len() - 1])
        && (regs.len() == 3 || regs[0] == regs[1])
}

/// Builds the scheduler's view of `ins` on `core`.
pub fn op_of(ins: &Instruction, core: &Core, factory: &mut InstructionInfoFactory) -> Op {
    let has_mem = (0..ins.op_count()).any(|k| ins.op_kind(k) == OpKind::Memory);
    let lea = ins.mnemonic() == Mnemonic::Lea;
    let info = core.info(ins.code(), has_mem);
    let known = info.is_some();
    let (uops, latency, pressure, may_load, may_store) = match info {
        Some(i) => (
            i.uops.max(1),
            i.latency,
            i.pressure.clone().into_boxed_slice(),
            i.may_load,
            i.may_store,
        ),
        None => (1, 1, Box::default(), false, false),
    };
    let fi = factory.info(ins);
    let mut reads = Regs::default();
    let mut writes = Regs::default();
    let mut addr_reads = Regs::default();
    let mut load = false;
    let mut store = false;
    let mut mem = None;
    for m in fi.used_memory() {
        if lea {
            break;
        }
        match m.access() {
            OpAccess::Read | OpAccess::CondRead => load = true,
            OpAccess::Write | OpAccess::CondWrite => store = true,
            OpAccess::ReadWrite | OpAccess::ReadCondWrite => {
                load = true;
                store = true;
            }
            _ => {}
        }
        if mem.is_none() {
            let base = reg_id(m.base()).unwrap_or(u8::MAX);
            let index = reg_id(m.index()).unwrap_or(u8::MAX);
            mem = Some(MemRef {
                base: if m.base() == Register::RIP {
                    u8::MAX
                } else {
                    base
                },
                index,
                scale: m.scale() as u8,
                disp: m.displacement() as i64,
                size: m.memory_size().size().min(255) as u8,
            });
        }
        for r in [m.base(), m.index()] {
            if let Some(id) = reg_id(r) {
                addr_reads.add(id);
            }
        }
    }
    let zero = zero_idiom(ins);
    for u in fi.used_registers() {
        let Some(id) = reg_id(u.register()) else {
            continue;
        };
        // Registers of the memory operand are reported as reads too: keep them apart.
        let partial = u.register().is_gpr8() || u.register().is_gpr16();
        match u.access() {
            OpAccess::Read | OpAccess::CondRead
                if !zero && !addr_reads.as_slice().contains(&id) =>
            {
                reads.add(id)
            }
            OpAccess::Write | OpAccess::CondWrite => {
                writes.add(id);
                // An 8- or 16-bit write merges into the full register (and a conditional
                // write keeps the old value when the condition fails).
                if (partial || u.access() == OpAccess::CondWrite) && !zero {
                    reads.add(id);
                }
            }
            OpAccess::ReadWrite | OpAccess::ReadCondWrite => {
                if !zero {
                    reads.add(id);
                }
                writes.add(id);
            }
            _ => {}
        }
    }
    if ins.rflags_read() != 0 && !zero_idiom_flags_free(ins, zero) {
        reads.add(FLAGS);
    }
    if ins.rflags_modified() != 0 {
        writes.add(FLAGS);
    }
    // An address register also read as data (`add rax, [rax]`) stays an address read.
    let flow = match ins.flow_control() {
        FlowControl::Next => Flow::Next,
        FlowControl::ConditionalBranch => Flow::Conditional(ins.near_branch_target()),
        FlowControl::UnconditionalBranch => Flow::Jump(ins.near_branch_target()),
        FlowControl::IndirectBranch => Flow::IndirectJump,
        FlowControl::Call => Flow::Call(ins.near_branch_target()),
        FlowControl::IndirectCall => Flow::IndirectCall,
        FlowControl::Return => Flow::Return,
        _ => Flow::Other,
    };
    let offset = offset_of(ins);
    let advance = if load {
        let vector = (0..ins.op_count()).any(|k| {
            ins.op_kind(k) == OpKind::Register && {
                let r = ins.op_register(k);
                r.is_xmm() || r.is_ymm() || r.is_zmm()
            }
        });
        let a = if vector {
            core.vec_load_advance
        } else {
            core.load_advance
        };
        (a as u16).min(latency)
    } else {
        0
    };
    Op {
        len: ins.len() as u8,
        uops,
        latency,
        advance,
        pressure,
        reads,
        addr_reads,
        writes,
        load: load || (may_load && mem.is_some() && !store),
        store: store || (may_store && mem.is_some() && !load),
        mem,
        offset,
        flow,
        known,
    }
}

/// `sbb r, r` reads CF: not free of the flags even as an idiom.
fn zero_idiom_flags_free(ins: &Instruction, zero: bool) -> bool {
    zero && ins.mnemonic() != Mnemonic::Sbb
}

/// The register an instruction changes by a constant, and by how much.
fn offset_of(ins: &Instruction) -> Option<(Reg, i64)> {
    use Mnemonic::*;
    let m = ins.mnemonic();
    match m {
        Push | Call => return Some((crate::op::RSP, -8)),
        Pop | Ret => {
            let imm = if ins.op_count() == 1 && m == Ret {
                ins.immediate16() as i64
            } else {
                0
            };
            return Some((crate::op::RSP, 8 + imm));
        }
        _ => {}
    }
    if ins.op_count() == 0 || ins.op_kind(0) != OpKind::Register {
        return None;
    }
    let r = ins.op_register(0);
    if !r.is_gpr64() {
        return None;
    }
    let id = reg_id(r)?;
    match m {
        Inc => Some((id, 1)),
        Dec => Some((id, -1)),
        Add | Sub if ins.op_count() == 2 => {
            let imm = match ins.op_kind(1) {
                OpKind::Immediate8to64 | OpKind::Immediate32to64 => ins.immediate(1) as i64,
                _ => return None,
            };
            Some((id, if m == Add { imm } else { -imm }))
        }
        Lea if ins.op_count() == 2
            && ins.memory_base() == r
            && ins.memory_index() == Register::None =>
        {
            Some((id, ins.memory_displacement64() as i64))
        }
        _ => None,
    }
}
