//! Per-instruction cycle models of the virtual PMU.
//!
//! The trace names instructions by address only, so costs are looked up per address: a
//! [`CostTable`] maps each instruction of a module (matched by file name) to its cycles and
//! byte length. Build one with [`class_costs`] (iced-x86 decoding and a [`ClassCycles`]
//! table), fill it by hand (a per-address latency map), or leave it empty to get the flat
//! model ([`CycleModel::default_cycles`] for every instruction).
//!
//! These costs are the static part of an instruction's time; the cache latencies of its data
//! accesses come on top from the timer (`timer.rs`: the set-associative LRU caches of
//! `proftrust-cachesim` over the traced data addresses, or the levels the QEMU plugin
//! simulated). Without a cache model, heavy loads are named per address
//! ([`CostTable::set`]) or by the class rule [`ClassCycles::heavy_load`].

use iced_x86::{Decoder, DecoderOptions, FlowControl, Instruction, Mnemonic, OpKind, Register};
use std::collections::{HashMap, HashSet};

/// Static cost of one instruction in a [`CostTable`] (what it takes without caches).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StaticCost {
    /// Cycles it takes (its CPI); 0 is allowed.
    pub cycles: u32,
    /// Length in bytes, 0 when unknown (used to tell taken branches from fall-through).
    pub len: u8,
}

/// Costs of the instructions of one module, by module-relative address.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CostTable {
    /// File name of the module (`Module::file_name`), e.g. `hmmer`.
    pub module_file_name: String,
    /// Costs by SVMA.
    pub costs: HashMap<u64, StaticCost>,
    /// Memory instructions whose address register was last written by a load, in decode
    /// order or around a loop's back edge (pointer chasing, `a[idx[j]]`; the rule of
    /// [`ClassCycles::heavy_load`], see [`class_costs`]): the out-of-order model starts them
    /// only when the latest load has completed.
    pub dependent: HashSet<u64>,
}

impl CostTable {
    /// An empty table for module `file_name`.
    pub fn new(file_name: impl Into<String>) -> CostTable {
        CostTable {
            module_file_name: file_name.into(),
            costs: HashMap::new(),
            dependent: HashSet::new(),
        }
    }
    /// Adds another table's instructions (another code section of the same module): their
    /// costs and their dependent loads.
    pub fn merge(&mut self, other: CostTable) {
        self.costs.extend(other.costs);
        self.dependent.extend(other.dependent);
    }

    /// Sets the cycles of the instruction at `svma` (keeps a known length).
    pub fn set(&mut self, svma: u64, cycles: u32) {
        let e = self
            .costs
            .entry(svma)
            .or_insert(StaticCost { cycles, len: 0 });
        e.cycles = cycles;
    }
}

/// The cycle model: tables for known modules, a default for everything else.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct CycleModel {
    /// Cycles of an instruction no table names (the flat model's CPI). Default 1.
    pub default_cycles: u32,
    /// Per-module tables.
    pub tables: Vec<CostTable>,
}

impl Default for CycleModel {
    fn default() -> Self {
        CycleModel {
            default_cycles: 1,
            tables: Vec::new(),
        }
    }
}

impl CycleModel {
    /// Index of the table for `module` (matched by file name), if any.
    pub fn table_for(&self, module: &proftrust_model::Module) -> Option<usize> {
        self.tables
            .iter()
            .position(|t| t.module_file_name == module.file_name())
    }

    /// The flat model: every instruction takes `cpi` cycles.
    pub fn flat(cpi: u32) -> CycleModel {
        CycleModel {
            default_cycles: cpi,
            tables: Vec::new(),
        }
    }
}

/// Cycles per instruction class (a rough, documented approximation of a modern out-of-order
/// x86-64 core seen one instruction at a time; fidelity to a particular CPU can only be
/// checked with a hardware PMU).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ClassCycles {
    /// Integer ALU, moves between registers, nops, lea. Default 1.
    pub alu: u32,
    /// Branches, calls, returns. Default 1.
    pub branch: u32,
    /// Integer multiply. Default 3.
    pub mul: u32,
    /// Integer or floating-point divide / square root. Default 25.
    pub div: u32,
    /// Floating-point / SIMD arithmetic. Default 4.
    pub fp: u32,
    /// An instruction reading memory (added to its class cost). Default 4 (an L1 hit).
    pub load: u32,
    /// An instruction writing memory (added). Default 1.
    pub store: u32,
    /// When set, a *dependent load* — a memory read whose base or index register was last
    /// written by a load (pointer chasing `p = p->next`, indirect indexing `a[idx[j]]`) —
    /// costs this instead of `load`: the loads that miss caches in the seed 000 case studies.
    /// "Last written" follows the decode order of the code and the loops' back edges (an
    /// approximation of the data flow; [`class_costs`]). Default `None`.
    pub heavy_load: Option<u32>,
}

impl Default for ClassCycles {
    fn default() -> Self {
        ClassCycles {
            alu: 1,
            branch: 1,
            mul: 3,
            div: 25,
            fp: 4,
            load: 4,
            store: 1,
            heavy_load: None,
        }
    }
}

/// Whether `m` divides or takes a square root (integer or floating point, scalar or packed,
/// x87 too): the class of [`ClassCycles::div`], the slow arithmetic instructions after which
/// samples skid (seed 000 §1.2; `check`'s skid shadow uses the same rule).
pub fn is_div_or_sqrt(m: Mnemonic) -> bool {
    use Mnemonic::*;
    matches!(
        m,
        Div | Idiv
            | Divss
            | Divsd
            | Divps
            | Divpd
            | Vdivss
            | Vdivsd
            | Vdivps
            | Vdivpd
            | Sqrtss
            | Sqrtsd
            | Sqrtps
            | Sqrtpd
            | Vsqrtss
            | Vsqrtsd
            | Vsqrtps
            | Vsqrtpd
            | Fdiv
            | Fdivp
            | Fdivr
            | Fdivrp
            | Fsqrt
    )
}

fn is_mul(m: Mnemonic) -> bool {
    matches!(m, Mnemonic::Mul | Mnemonic::Imul | Mnemonic::Mulx)
}

/// Cycles of one decoded instruction under `t`; `dependent` says whether its memory
/// address depends on a loaded register (see [`ClassCycles::heavy_load`]).
pub fn class_cycles(ins: &Instruction, t: &ClassCycles, dependent: bool) -> u32 {
    let m = ins.mnemonic();
    let base = if is_div_or_sqrt(m) {
        t.div
    } else if is_mul(m) {
        t.mul
    } else if ins.flow_control() != FlowControl::Next {
        t.branch
    } else if (0..ins.op_count()).any(|k| {
        ins.op_kind(k) == OpKind::Register && {
            let r = ins.op_register(k);
            r.is_xmm() || r.is_ymm() || r.is_zmm()
        }
    }) && m != Mnemonic::Movd
        && m != Mnemonic::Movq
    {
        t.fp
    } else {
        t.alu
    };
    let has_mem =
        (0..ins.op_count()).any(|k| ins.op_kind(k) == OpKind::Memory) && m != Mnemonic::Lea;
    if !has_mem {
        return base;
    }
    // Operand 0 being memory means a store (or read-modify-write); other positions read.
    let writes = ins.op_count() > 0
        && ins.op_kind(0) == OpKind::Memory
        && m != Mnemonic::Cmp
        && m != Mnemonic::Test;
    let reads = !writes
        || !matches!(
            m,
            Mnemonic::Mov
                | Mnemonic::Movss
                | Mnemonic::Movsd
                | Mnemonic::Movaps
                | Mnemonic::Movups
                | Mnemonic::Movdqa
                | Mnemonic::Movdqu
        );
    let mut c = base;
    if writes {
        c += t.store;
    }
    if reads && ins.flow_control() == FlowControl::Next {
        c += match t.heavy_load {
            Some(h) if dependent => h,
            _ => t.load,
        };
    }
    c
}

/// Whether the instruction reads an explicit memory operand into its first (register)
/// operand: the register then holds a loaded value.
fn loads_into_register(ins: &Instruction) -> Option<Register> {
    if ins.op_count() >= 2
        && ins.op_kind(0) == OpKind::Register
        && (1..ins.op_count()).any(|k| ins.op_kind(k) == OpKind::Memory)
        && ins.mnemonic() != Mnemonic::Lea
    {
        Some(ins.op_register(0).full_register())
    } else {
        None
    }
}

/// Bit of a 64-bit general-purpose register (of any width's full register) in a register
/// mask; 0 for other registers (RIP, vector registers: never an address register here).
fn gpr_bit(r: Register) -> u32 {
    let f = r.full_register();
    if f.is_gpr64() {
        1 << f.number()
    } else {
        0
    }
}

/// Decodes `code` (bytes of an executable section starting at module-relative `svma`)
/// linearly and returns the class cost of every instruction. Undecodable bytes are skipped
/// one at a time (data in code is not an error).
///
/// Dependent loads ([`CostTable::dependent`]): a register is *loaded* after an instruction
/// that reads memory into it, until another instruction writes it; a memory access whose
/// base or index register is loaded is dependent. The loaded set flows in decode order and
/// along backward branches: the set at the end of a loop body joins (union) the set at its
/// head, and the body is scanned again until nothing changes. Without the back edges a
/// pointer chase whose load is the loop's first use of the pointer, `mov rcx, [rdi+8]; mov
/// rdi, [rdi]; ...; jne head` (gcc's `chase` in `workloads/omnet.c`), looked independent:
/// its misses overlapped 25 deep in the out-of-order model's ROB, about 5.6 modelled cycles
/// per step where a real core waits for each miss (docs/audit.md, "Time truth").
pub fn class_costs(file_name: &str, code: &[u8], svma: u64, t: &ClassCycles) -> CostTable {
    let mut table = CostTable::new(file_name);
    let mut dec = Decoder::with_ip(64, code, svma, DecoderOptions::NONE);
    // Decoded instructions in address order; `None` marks undecodable bytes (a barrier).
    let mut all: Vec<Option<Instruction>> = Vec::new();
    let mut ips: Vec<u64> = Vec::new();
    while dec.can_decode() {
        let ins = dec.decode();
        ips.push(ins.ip());
        all.push((!ins.is_invalid()).then_some(ins));
    }
    let n = all.len();
    // Per instruction: the address registers, the register it writes, whether it loads into
    // it, and the index of a backward branch's target.
    struct Flow {
        addr: u32,
        kill: u32,
        gen: u32,
        clears: bool,
        back_to: Option<usize>,
    }
    let flow: Vec<Flow> = all
        .iter()
        .enumerate()
        .map(|(i, ins)| {
            let Some(ins) = ins else {
                return Flow {
                    addr: 0,
                    kill: 0,
                    gen: 0,
                    clears: true,
                    back_to: None,
                };
            };
            let has_mem = (0..ins.op_count()).any(|k| ins.op_kind(k) == OpKind::Memory);
            let addr = if has_mem && ins.mnemonic() != Mnemonic::Lea {
                gpr_bit(ins.memory_base()) | gpr_bit(ins.memory_index())
            } else {
                0
            };
            let kill = if ins.op_count() > 0 && ins.op_kind(0) == OpKind::Register {
                gpr_bit(ins.op_register(0))
            } else {
                0
            };
            let gen = loads_into_register(ins).map_or(0, gpr_bit);
            let branch = matches!(
                ins.flow_control(),
                FlowControl::ConditionalBranch | FlowControl::UnconditionalBranch
            ) && matches!(
                ins.op0_kind(),
                OpKind::NearBranch16 | OpKind::NearBranch32 | OpKind::NearBranch64
            );
            let back_to = if branch && ins.near_branch_target() <= ins.ip() {
                ips.binary_search(&ins.near_branch_target())
                    .ok()
                    .filter(|&k| k <= i)
            } else {
                None
            };
            Flow {
                addr,
                kill,
                gen,
                clears: ins.flow_control() == FlowControl::Return,
                back_to,
            }
        })
        .collect();
    // `before[i]`: registers loaded when instruction i starts; `join[i]`: what backward
    // branches bring to i. Scans start at 0 and at every head whose join grew; a rescan stops
    // where its set equals the one already recorded (nothing downstream changes).
    let mut before: Vec<Option<u32>> = vec![None; n];
    let mut join = vec![0u32; n];
    let mut starts = vec![0usize];
    while let Some(start) = starts.pop() {
        let mut mask = if start == 0 {
            0
        } else {
            before[start - 1].map_or(0, |m| {
                let f = &flow[start - 1];
                if f.clears {
                    0
                } else {
                    (m & !f.kill) | f.gen
                }
            })
        };
        for i in start..n {
            let m = mask | join[i];
            if i > start && before[i] == Some(m) {
                break;
            }
            before[i] = Some(m);
            let f = &flow[i];
            mask = if f.clears { 0 } else { (m & !f.kill) | f.gen };
            if let Some(h) = f.back_to {
                if mask & !join[h] != 0 {
                    join[h] |= mask;
                    starts.push(h);
                }
            }
        }
    }
    for (i, ins) in all.iter().enumerate() {
        let Some(ins) = ins else { continue };
        let dependent = flow[i].addr & before[i].unwrap_or(0) != 0;
        if dependent {
            table.dependent.insert(ins.ip());
        }
        table.costs.insert(
            ins.ip(),
            StaticCost {
                cycles: class_cycles(ins, t, dependent),
                len: ins.len() as u8,
            },
        );
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_of_known_encodings() {
        // add eax, ebx (01 d8); imul eax, ebx (0f af c3); div rcx (48 f7 f1);
        // mov eax, [rdi + rsi*4] (8b 04 b7); mov [rsp+8], eax (89 44 24 08); ret (c3);
        // mov eax, [rbp-4] (8b 45 fc); mov rax, [rax] (48 8b 00: depends on the load before);
        // mov rdi, [rdi + rax*8] (48 8b 3c c7: index rax was loaded)
        let code = [
            0x01, 0xd8, 0x0f, 0xaf, 0xc3, 0x48, 0xf7, 0xf1, 0x8b, 0x04, 0xb7, 0x89, 0x44, 0x24,
            0x08, 0xc3, 0x8b, 0x45, 0xfc, 0x48, 0x8b, 0x00, 0x48, 0x8b, 0x3c, 0xc7,
        ];
        let t = ClassCycles {
            heavy_load: Some(200),
            ..ClassCycles::default()
        };
        let tab = class_costs("x", &code, 0x1000, &t);
        let c = |a: u64| tab.costs[&a];
        assert_eq!(c(0x1000), StaticCost { cycles: 1, len: 2 });
        assert_eq!(c(0x1002), StaticCost { cycles: 3, len: 3 });
        assert_eq!(c(0x1005), StaticCost { cycles: 25, len: 3 });
        // Independent loads: the L1 latency; a store: +1.
        assert_eq!(
            c(0x1008),
            StaticCost {
                cycles: 1 + 4,
                len: 3
            }
        );
        assert_eq!(
            c(0x100b),
            StaticCost {
                cycles: 1 + 1,
                len: 4
            }
        );
        assert_eq!(c(0x100f), StaticCost { cycles: 1, len: 1 });
        assert_eq!(
            c(0x1010),
            StaticCost {
                cycles: 1 + 4,
                len: 3
            }
        );
        // Dependent loads (address register produced by a load): heavy.
        assert_eq!(
            c(0x1013),
            StaticCost {
                cycles: 1 + 200,
                len: 3
            }
        );
        assert_eq!(
            c(0x1016),
            StaticCost {
                cycles: 1 + 200,
                len: 4
            }
        );
        assert_eq!(tab.costs.len(), 9);
        let mut dep: Vec<u64> = tab.dependent.iter().copied().collect();
        dep.sort_unstable();
        assert_eq!(dep, vec![0x1013, 0x1016]);
    }

    /// A pointer chase whose loads are the loop's first use of the pointer (omnet's
    /// `chase` as gcc compiles it): in decode order `rdi` was never loaded before them, but
    /// the back edge brings the `rdi` loaded at 0x1006 to the head, so both loads are
    /// dependent. The same code without the back edge (a `nop` for the `jne`) has none.
    #[test]
    fn loop_carried_pointer_chase_is_dependent() {
        // xor edx,edx; L: mov rcx,[rdi+8]; mov rdi,[rdi]; add rdx,1; cmp rdx,rsi; jne L; ret
        let code = [
            0x31, 0xd2, 0x48, 0x8b, 0x4f, 0x08, 0x48, 0x8b, 0x3f, 0x48, 0x83, 0xc2, 0x01, 0x48,
            0x39, 0xf2, 0x75, 0xf0, 0xc3,
        ];
        let tab = class_costs("x", &code, 0x1000, &ClassCycles::default());
        let mut dep: Vec<u64> = tab.dependent.iter().copied().collect();
        dep.sort_unstable();
        assert_eq!(dep, vec![0x1002, 0x1006]);
        assert_eq!(tab.costs.len(), 7);
        let mut straight = code;
        straight[16..18].copy_from_slice(&[0x66, 0x90]); // jne L -> 2-byte nop
        let tab = class_costs("x", &straight, 0x1000, &ClassCycles::default());
        assert!(tab.dependent.is_empty(), "{:?}", tab.dependent);
        // A loop that reloads the pointer from a register each time is not a chase: the
        // back edge brings rcx (loaded), not rdi.
        // L: mov rdi, rbx; mov rcx,[rdi]; add rdx,1; cmp rdx,rsi; jne L; ret
        let code = [
            0x48, 0x89, 0xdf, 0x48, 0x8b, 0x0f, 0x48, 0x83, 0xc2, 0x01, 0x48, 0x39, 0xf2, 0x75,
            0xf1, 0xc3,
        ];
        let tab = class_costs("x", &code, 0x1000, &ClassCycles::default());
        assert!(tab.dependent.is_empty(), "{:?}", tab.dependent);
    }
}
