//! The exact block trace, streamed.
//!
//! The QEMU plugin reports every executed translation block; the analyzer side turns each
//! into a [`TraceBlock`] and hands it to a [`BlockVisitor`]. Nothing keeps the whole trace.
//! A trace block is a *dynamic* straight-line run: it may span several static basic blocks
//! (QEMU ends blocks only at branches) or end early (page ends, instruction limit), so
//! consumers map its instructions onto static blocks themselves.

use crate::addr::{Module, ModuleIdx, Svma};
use crate::exact::RunOutcome;

/// How the last instruction of a trace block transfers control.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TraceEnd {
    /// A call (direct or indirect); the next block of this thread is the callee.
    Call,
    /// A return.
    Return,
    /// A jump, conditional branch, or anything else (including a block cut short).
    Other,
    /// A system call instruction.
    Syscall,
}

/// One data access of a traced instruction (guest virtual address; QEMU reports no access
/// for software prefetches, which it executes as no-ops), or, when the tracer simulated the
/// caches where the access happened, where it was served ([`MemAccess::level`]; the address
/// and size are then not shipped).
///
/// QEMU 7.2 reports what its x86 front end emits as memory operations: a 16-byte SSE load or
/// store arrives as two 8-byte accesses, `rep movs` as one access pair per iteration (each
/// iteration is its own block execution), `push`/`pop`/`call`/`ret` as stack accesses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemAccess {
    /// Index of the instruction in `TraceBlock::instructions`.
    pub insn: u16,
    /// Guest virtual address.
    pub addr: u64,
    /// Bytes accessed.
    pub size: u8,
    /// Store (true) or load (false).
    pub store: bool,
    /// Where the access was served when the tracer simulated the caches itself (the QEMU
    /// plugin with a cache geometry: 0 L1D, 1 last-level cache, 2 memory, the levels of
    /// `proftrust-cachesim`); `addr` and `size` are then 0. `None`: the address and size
    /// are real and a consumer with a cache model simulates them.
    pub level: Option<u8>,
}

/// One executed block.
#[derive(Debug, Clone, Copy)]
pub struct TraceBlock<'a> {
    /// Thread that executed it.
    pub tid: u32,
    /// Module it lies in (`None`: outside any known module).
    pub module: Option<ModuleIdx>,
    /// Module-relative addresses of its instructions, in execution order.
    pub instructions: &'a [Svma],
    /// How its last instruction transfers control.
    pub end: TraceEnd,
    /// Its data accesses in execution order (so `insn` never decreases); empty unless the
    /// trace was asked to carry memory accesses (`QemuOptions::trace_memory` in
    /// `proftrust-exact`). A block left early by a fault carries only the accesses that
    /// happened.
    pub mem: &'a [MemAccess],
    /// The producer's dense id of this block's static content, when it has one: two blocks
    /// with the same key have the same `module`, `instructions` and `end` (only `tid` and
    /// `mem` differ), and keys are small integers (the QEMU trace numbers its translated
    /// blocks from 0). Consumers may keep per-key summaries in flat arrays instead of
    /// recomputing them per executed block. `None`: no such promise (hand-made blocks).
    pub key: Option<u32>,
}

/// Something that happened in a traced run, in order.
#[derive(Debug, Clone, Copy)]
pub enum TraceEvent<'a> {
    /// A module became known; later blocks refer to it by `idx`.
    Module {
        /// Index used by later blocks.
        idx: ModuleIdx,
        /// The module.
        module: &'a Module,
    },
    /// A block executed.
    Block(TraceBlock<'a>),
    /// The run ended.
    End(&'a RunOutcome),
}

/// Consumer of a streamed block trace (virtual PMU, path profiler, CCT builder, ...).
pub trait BlockVisitor {
    /// A module became known.
    fn module(&mut self, _idx: ModuleIdx, _module: &Module) {}
    /// A block executed.
    fn block(&mut self, block: &TraceBlock<'_>);
    /// The run ended.
    fn end(&mut self, _outcome: &RunOutcome) {}

    /// Dispatches one event to the methods above.
    fn visit(&mut self, ev: &TraceEvent<'_>) {
        match ev {
            TraceEvent::Module { idx, module } => self.module(*idx, module),
            TraceEvent::Block(b) => self.block(b),
            TraceEvent::End(o) => self.end(o),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Count(u64, u64);
    impl BlockVisitor for Count {
        fn block(&mut self, b: &TraceBlock<'_>) {
            self.0 += 1;
            self.1 += b.instructions.len() as u64;
        }
    }

    #[test]
    fn visitor_dispatch() {
        let ins = [Svma(1), Svma(2)];
        let m = Module::new("/x");
        let mut c = Count(0, 0);
        c.visit(&TraceEvent::Module {
            idx: ModuleIdx(0),
            module: &m,
        });
        c.visit(&TraceEvent::Block(TraceBlock {
            tid: 1,
            module: Some(ModuleIdx(0)),
            instructions: &ins,
            end: TraceEnd::Other,
            mem: &[],
            key: None,
        }));
        c.visit(&TraceEvent::End(&RunOutcome::Exited { code: 0 }));
        assert_eq!((c.0, c.1), (1, 2));
    }
}
