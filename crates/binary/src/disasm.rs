//! x86-64 decoding of a function with iced-x86.

use crate::elf::{Binary, Function};
use crate::error::BinaryError;
use iced_x86::{
    Decoder, DecoderOptions, FlowControl, Formatter, GasFormatter, Instruction,
    InstructionInfoFactory, Mnemonic, OpKind,
};
use proftrust_model::Svma;

/// How an instruction transfers control (iced-x86's `FlowControl`, simplified).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Flow {
    /// Falls through to the next instruction (includes `syscall` and `int n`).
    Next,
    /// Direct call; returns to the next instruction.
    Call,
    /// Indirect call; returns to the next instruction.
    IndirectCall,
    /// Direct unconditional jump.
    Jump,
    /// Direct conditional branch.
    CondJump,
    /// Indirect jump (jump table, tail call through a pointer, PLT stub).
    IndirectJump,
    /// Return.
    Return,
    /// `int3`, `ud2` and other trapping instructions: no successor.
    Trap,
    /// Bytes that do not decode.
    Invalid,
}

/// One decoded instruction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Instr {
    /// Address.
    pub addr: Svma,
    /// Length in bytes.
    pub len: u32,
    /// Text in AT&T syntax (as `objdump -d` prints it).
    pub text: String,
    /// Control-flow kind.
    pub flow: Flow,
    /// Target of a direct branch or call.
    pub target: Option<Svma>,
    /// Has an explicit memory operand that is accessed (`lea` and `nop` forms excluded).
    pub memory: bool,
    /// Reads memory (explicit operand, or implicit like `pop`, `ret`, string ops).
    pub loads: bool,
    /// Writes memory (explicit operand, or implicit like `push`, `call`).
    pub stores: bool,
    /// The decoder's mnemonic (for instruction classes, e.g. the virtual PMU's
    /// `proftrust_vpmu::is_div_or_sqrt`).
    pub mnemonic: iced_x86::Mnemonic,
}

impl Instr {
    /// One past the last byte.
    pub fn end(&self) -> Svma {
        Svma(self.addr.0 + self.len as u64)
    }
}

pub(crate) fn flow_of(ins: &Instruction) -> Flow {
    if ins.is_invalid() {
        return Flow::Invalid;
    }
    match ins.flow_control() {
        FlowControl::Next | FlowControl::XbeginXabortXend => Flow::Next,
        FlowControl::UnconditionalBranch => {
            if is_near_branch(ins) {
                Flow::Jump
            } else {
                Flow::IndirectJump
            }
        }
        FlowControl::ConditionalBranch => Flow::CondJump,
        FlowControl::IndirectBranch => Flow::IndirectJump,
        FlowControl::Return => Flow::Return,
        FlowControl::Call => {
            if is_near_branch(ins) {
                Flow::Call
            } else {
                // syscall, sysenter, vmcall...: control comes back to the next instruction.
                Flow::Next
            }
        }
        FlowControl::IndirectCall => Flow::IndirectCall,
        FlowControl::Interrupt => {
            if ins.mnemonic() == Mnemonic::Int3 {
                Flow::Trap
            } else {
                Flow::Next
            }
        }
        FlowControl::Exception => Flow::Trap,
    }
}

fn is_near_branch(ins: &Instruction) -> bool {
    matches!(
        ins.op0_kind(),
        OpKind::NearBranch16 | OpKind::NearBranch32 | OpKind::NearBranch64
    )
}

/// The bytes of `f` (clipped to its section).
pub(crate) fn code_of<'a>(bin: &'a Binary, f: &Function) -> Result<&'a [u8], BinaryError> {
    let no_code = || BinaryError::NoCode {
        path: bin.path().to_path_buf(),
        function: f.name.clone(),
        address: f.start.0,
    };
    let (_, bytes) = bin.bytes_at(f.start.0).ok_or_else(no_code)?;
    let n = (f.size.min(bytes.len() as u64)) as usize;
    Ok(&bytes[..n])
}

/// Decodes `f` linearly (compilers put no data in x86-64 `.text`).
pub(crate) fn decode_raw(bin: &Binary, f: &Function) -> Result<Vec<Instruction>, BinaryError> {
    bin.require_x86_64("instructions, basic blocks, CFGs, skid correction and paths")?;
    let code = code_of(bin, f)?;
    let mut dec = Decoder::with_ip(64, code, f.start.0, DecoderOptions::NONE);
    let mut out = Vec::with_capacity(code.len() / 4 + 1);
    while dec.can_decode() {
        out.push(dec.decode());
    }
    Ok(out)
}

/// Turns decoded instructions into [`Instr`]s.
pub(crate) fn describe(raw: &[Instruction]) -> Vec<Instr> {
    let mut fmt = GasFormatter::new();
    // Close to `objdump -d`: `jae 7a200`, lower-case hex without leading zeros.
    fmt.options_mut().set_branch_leading_zeros(false);
    fmt.options_mut().set_leading_zeros(false);
    fmt.options_mut().set_uppercase_hex(false);
    fmt.options_mut().set_show_branch_size(false);
    fmt.options_mut().set_rip_relative_addresses(true);
    let mut info = InstructionInfoFactory::new();
    let mut out = Vec::with_capacity(raw.len());
    for ins in raw {
        let mut text = String::new();
        if ins.is_invalid() {
            text.push_str("(bad)");
        } else {
            fmt.format(ins, &mut text);
        }
        let flow = flow_of(ins);
        let target = match flow {
            Flow::Jump | Flow::CondJump | Flow::Call => Some(Svma(ins.near_branch_target())),
            _ => None,
        };
        let (mut loads, mut stores) = (false, false);
        let memory = !ins.is_invalid()
            && ins.mnemonic() != Mnemonic::Lea
            && ins.mnemonic() != Mnemonic::Nop
            && (0..ins.op_count()).any(|i| ins.op_kind(i) == OpKind::Memory);
        if !ins.is_invalid() {
            for m in info.info(ins).used_memory() {
                use iced_x86::OpAccess::*;
                match m.access() {
                    Read | CondRead => loads = true,
                    Write | CondWrite => stores = true,
                    ReadWrite | ReadCondWrite => {
                        loads = true;
                        stores = true;
                    }
                    _ => {}
                }
            }
        }
        out.push(Instr {
            addr: Svma(ins.ip()),
            len: ins.len() as u32,
            text,
            flow,
            target,
            memory,
            loads,
            stores,
            mnemonic: ins.mnemonic(),
        });
    }
    out
}
