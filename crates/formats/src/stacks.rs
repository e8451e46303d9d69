//! User stacks copied by the kernel (`perf record --call-graph dwarf`: each sample carries
//! its user registers, `PERF_SAMPLE_REGS_USER`, and a copy of the user stack,
//! `PERF_SAMPLE_STACK_USER`) turned into return addresses by the caller's
//! [`UnwindSource`] (`proftrust_binary::BinaryLocator`: framehop over the binaries'
//! call-frame information), as `perf script` and `perf report` unwind them.
//!
//! The mappings reach the unwinder as the file states them (executable `MMAP`/`MMAP2`,
//! `FORK`, `exec`); each sample's stack is unwound from its registers. The call chain is
//! then the kernel part the file records (`PERF_SAMPLE_CALLCHAIN`, which `--call-graph
//! dwarf` limits to the kernel with `exclude_callchain_user`), the user `ip` for a sample
//! taken in the kernel, and the unwound return addresses.

use proftrust_model::unwind::{StackUnwinder, UnwindEnd, UnwindSource, UserRegs};
use proftrust_model::BuildId;

/// x86-64 `perf_event` register numbers (`arch/x86/include/uapi/asm/perf_regs.h`).
const REG_BP: u64 = 6;
const REG_SP: u64 = 7;
const REG_IP: u64 = 8;

/// The unwinder of one file and what it did.
pub(crate) struct Stacks<'s> {
    unwinder: Option<Box<dyn StackUnwinder + 's>>,
    /// Samples with registers and a stack.
    seen: u64,
    /// Of them, unwound to the root of the stack.
    root: u64,
    /// Samples whose stack was not unwound (no unwinder given).
    skipped: u64,
    out: Vec<u64>,
}

impl<'s> Stacks<'s> {
    /// Unwinding with `source` (none: stacks are counted and reported, not unwound).
    pub(crate) fn new(source: Option<&'s dyn UnwindSource>) -> Stacks<'s> {
        Stacks {
            unwinder: source.map(|s| s.unwinder()),
            seen: 0,
            root: 0,
            skipped: 0,
            out: Vec::new(),
        }
    }

    /// An executable mapping of a process.
    pub(crate) fn map(
        &mut self,
        pid: i32,
        start: u64,
        end: u64,
        pgoff: u64,
        path: &str,
        build_id: Option<&BuildId>,
    ) {
        if let Some(u) = &mut self.unwinder {
            u.map(pid as u32, start, end, pgoff, path, build_id);
        }
    }

    /// A fork (the child gets the parent's mappings).
    pub(crate) fn fork(&mut self, parent: i32, child: i32) {
        if let Some(u) = &mut self.unwinder {
            u.fork(parent as u32, child as u32);
        }
    }

    /// An exec (the process's mappings are gone).
    pub(crate) fn exec(&mut self, pid: i32) {
        if let Some(u) = &mut self.unwinder {
            u.exec(pid as u32);
        }
    }

    /// The user registers of a sample (`None` when it carries none: a kernel thread, or no
    /// `REGS_USER`, or registers without ip and sp).
    pub(crate) fn regs(
        r: Option<&linux_perf_data::linux_perf_event_reader::Regs<'_>>,
    ) -> Option<UserRegs> {
        let r = r?;
        Some(UserRegs {
            ip: r.get(REG_IP)?,
            sp: r.get(REG_SP)?,
            bp: r.get(REG_BP).unwrap_or(0),
        })
    }

    /// The return addresses of the user stack `stack` (the bytes at `regs.sp` upward) of
    /// process `pid`, innermost first; `None` without an unwinder.
    pub(crate) fn unwind(&mut self, pid: i32, regs: UserRegs, stack: &[u8]) -> Option<&[u64]> {
        self.seen += 1;
        let Some(u) = &mut self.unwinder else {
            self.skipped += 1;
            return None;
        };
        self.out.clear();
        if u.unwind(pid as u32, regs, stack, &mut self.out) == UnwindEnd::Root {
            self.root += 1;
        }
        Some(&self.out)
    }

    /// What the reader should say: stacks left alone, or how many ended before their root.
    pub(crate) fn warnings(&self) -> Vec<String> {
        let mut w = Vec::new();
        if self.skipped > 0 {
            w.push(format!(
                "{} samples carry a copy of the user stack (--call-graph dwarf) that was not unwound (no binaries to unwind with were given to the reader): their call chains hold the kernel part only",
                self.skipped
            ));
        }
        let unwound = self.seen - self.skipped;
        if unwound > 0 && self.root < unwound {
            w.push(format!(
                "{} of {unwound} user stacks (--call-graph dwarf) were unwound to their root; the others end early (a stack copy shorter than the stack: record with --call-graph dwarf,SIZE larger than the default 8192; or code without unwind information)",
                self.root
            ));
        }
        w
    }
}
