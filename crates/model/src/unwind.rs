//! What readers need to turn a user stack copied by the kernel (`perf record --call-graph
//! dwarf`: `PERF_SAMPLE_REGS_USER` + `PERF_SAMPLE_STACK_USER`) into return addresses: a
//! [`StackUnwinder`] per file, made by an [`UnwindSource`].
//!
//! The one implementation (`proftrust-binary`'s `BinaryLocator`) unwinds with the binaries'
//! call-frame information (`.eh_frame`, `.debug_frame`) through framehop; readers take the
//! trait so that they stay free of ELF parsing.

use crate::addr::BuildId;

/// The user registers an unwinder starts from (x86-64: `rip`, `rsp`, `rbp`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct UserRegs {
    /// Instruction pointer.
    pub ip: u64,
    /// Stack pointer: the copied stack starts here.
    pub sp: u64,
    /// Frame pointer.
    pub bp: u64,
}

/// How an unwinding ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnwindEnd {
    /// At the root of the stack (the unwind information says so, or the frame pointer
    /// chain ends at 0).
    Root,
    /// Before the root: the stack copy ended, an address had no unwind information, or a
    /// frame's rule could not be followed.
    Truncated,
}

/// Unwinds the user stacks of one recording's processes. Mappings arrive as the recording
/// states them (mmap, fork, exec, in time order), stacks with each sample.
pub trait StackUnwinder {
    /// An executable mapping of `path` (with `build_id`, when known) at `[start, end)`
    /// from file offset `pgoff` in process `pid`.
    fn map(
        &mut self,
        pid: u32,
        start: u64,
        end: u64,
        pgoff: u64,
        path: &str,
        build_id: Option<&BuildId>,
    );
    /// `child` was forked from `parent`: it starts with a copy of its mappings.
    fn fork(&mut self, parent: u32, child: u32);
    /// `pid` called exec: its mappings are gone.
    fn exec(&mut self, pid: u32);
    /// Appends to `out` the return addresses of the callers of the frame `regs` describe in
    /// process `pid`, innermost first (not `regs.ip` itself), reading the stack from
    /// `stack`, the bytes at `regs.sp` upward.
    fn unwind(&mut self, pid: u32, regs: UserRegs, stack: &[u8], out: &mut Vec<u64>) -> UnwindEnd;
}

/// Makes a [`StackUnwinder`] for one recording.
pub trait UnwindSource {
    /// A fresh unwinder (no process mapped yet).
    fn unwinder(&self) -> Box<dyn StackUnwinder + '_>;
}
