//! What a frame-pointer unwinder needs from the code: the direct call that ends at a return
//! address, and whether a function has established its frame at an address. Decoded with
//! iced-x86 from the binary's executable sections (the CLI's `cct` and `paths` use it to
//! restore callers a frame-pointer call chain misses; `proftrust_paths::CodeOracle`).

use crate::elf::Binary;
use iced_x86::{
    Code, Decoder, DecoderOptions, FlowControl, Instruction, Mnemonic, OpKind, Register,
};
use proftrust_model::Svma;

impl Binary {
    /// The instruction at `a` in an executable section, decoded (`None` outside code or
    /// for bytes that do not decode).
    fn decode_at(&self, a: u64) -> Option<Instruction> {
        let (sec, bytes) = self.bytes_at(a)?;
        if !sec.exec || !self.is_x86_64() {
            return None;
        }
        let mut d = Decoder::with_ip(64, bytes, a, DecoderOptions::NONE);
        let i = d.decode();
        (!i.is_invalid()).then_some(i)
    }

    /// Target of the direct call (`call rel32`, 5 bytes, possibly after a `bnd` prefix)
    /// that ends at return address `ret`; `None` when the instruction before `ret` is not a
    /// direct call (an indirect call, or no code there).
    pub fn direct_call_before(&self, ret: Svma) -> Option<Svma> {
        let i = self.decode_at(ret.0.checked_sub(5)?)?;
        let direct = i.flow_control() == FlowControl::Call && i.op0_kind() == OpKind::NearBranch64;
        (direct && i.next_ip() == ret.0).then(|| Svma(i.near_branch_target()))
    }

    /// Whether the function containing `at` has its own frame there: it starts with
    /// `[endbr64] push %rbp; mov %rsp,%rbp`, `at` lies after that prologue and is not its
    /// `ret`. A function without that prologue (a leaf GCC left frameless, code built with
    /// -fomit-frame-pointer) never has one. `None` outside any known function or code.
    pub fn frame_established(&self, at: Svma) -> Option<bool> {
        let f = self.function_at(at)?;
        let mut pc = f.start.0;
        let mut i = self.decode_at(pc)?;
        if i.code() == Code::Endbr64 {
            pc = i.next_ip();
            i = self.decode_at(pc)?;
        }
        let push_rbp = i.mnemonic() == Mnemonic::Push && i.op0_register() == Register::RBP;
        if !push_rbp {
            return Some(false);
        }
        let m = self.decode_at(i.next_ip())?;
        let mov_rbp_rsp = m.mnemonic() == Mnemonic::Mov
            && m.op0_register() == Register::RBP
            && m.op1_register() == Register::RSP;
        if !mov_rbp_rsp {
            return Some(false);
        }
        let body = at.0 >= m.next_ip();
        let ret = self
            .decode_at(at.0)
            .is_some_and(|x| x.mnemonic() == Mnemonic::Ret);
        Some(body && !ret)
    }
}
