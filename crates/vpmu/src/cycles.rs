//! Per-instruction cycle models of the virtual PMU.
//!
//! The trace names instructions by address only, so costs are looked up per address: a
//! [`CostTable`] maps each instruction of a module (matched by file name) to its cycles and
//! byte length. Build one with [`class_costs`] (iced-x86 decoding and a [`ClassCycles`]
//! table), fill it by hand (a per-address latency map), or leave it empty to get the flat
//! model ([`CycleModel::default_cycles`] for every instruction).
//!
//! The trace carries no data addresses, so a cache simulation (set-associative LRU over the
//! addresses loads touch) cannot run on it; heavy loads are instead named per address
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
    /// order (pointer chasing, `a[idx[j]]`; the rule of [`ClassCycles::heavy_load`]): the
    /// out-of-order model starts them only when the latest load has completed.
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
    /// "Last written" follows the linear decode order of the code (a per-function
    /// approximation of the data flow). Default `None`.
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

fn is_div(m: Mnemonic) -> bool {
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
    let base = if is_div(m) {
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

/// Decodes `code` (bytes of an executable section starting at module-relative `svma`)
/// linearly and returns the class cost of every instruction. Undecodable bytes are skipped
/// one at a time (data in code is not an error).
pub fn class_costs(file_name: &str, code: &[u8], svma: u64, t: &ClassCycles) -> CostTable {
    let mut table = CostTable::new(file_name);
    let mut dec = Decoder::with_ip(64, code, svma, DecoderOptions::NONE);
    let mut ins = Instruction::default();
    // Registers whose last writer (in decode order) was a load.
    let mut loaded: Vec<Register> = Vec::new();
    while dec.can_decode() {
        dec.decode_out(&mut ins);
        if ins.is_invalid() {
            loaded.clear();
            continue;
        }
        let has_mem = (0..ins.op_count()).any(|k| ins.op_kind(k) == OpKind::Memory);
        let dependent = has_mem
            && ins.mnemonic() != Mnemonic::Lea
            && [ins.memory_base(), ins.memory_index()]
                .iter()
                .any(|r| *r != Register::None && loaded.contains(&r.full_register()));
        if dependent {
            table.dependent.insert(ins.ip());
        }
        table.costs.insert(
            ins.ip(),
            StaticCost {
                cycles: class_cycles(&ins, t, dependent),
                len: ins.len() as u8,
            },
        );
        // Update the loaded set: a register written by this instruction is loaded only if
        // this instruction loaded it.
        if ins.op_count() > 0 && ins.op_kind(0) == OpKind::Register {
            let r = ins.op_register(0).full_register();
            loaded.retain(|x| *x != r);
        }
        if let Some(r) = loads_into_register(&ins) {
            loaded.push(r);
        }
        if ins.flow_control() == FlowControl::Return {
            loaded.clear();
        }
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
}
