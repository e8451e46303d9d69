//! # proftrust-binary
//!
//! The program binary as proftrust sees it: one ELF file (executable or shared object, PIE
//! or not) mapped from module-relative addresses ([`Svma`]) to functions, inline chains,
//! source lines, instructions and basic blocks.
//!
//! Entry points:
//!
//! * [`Binary::open`]: header checks with clear errors (empty, not ELF, truncated, other
//!   architecture), build-id, functions from `.symtab` (else `.dynsym`, plus synthesized
//!   `name@plt` stubs), demangled Rust and C++ names, DWARF found embedded or in a separate
//!   debug file (by build-id under `/usr/lib/debug/.build-id/`, or by `.gnu_debuglink`),
//!   parsed lazily.
//! * [`Binary::function_at`] (binary search), [`Binary::frames`] (inline chain, innermost
//!   first, from `addr2line`); [`Binary::source_frames`] adds what PGO profiles key lines
//!   by: linkage names, function start lines, discriminators ([`SourceFrame`]).
//! * [`Binary::instructions`] and [`Binary::cfg`]: iced-x86 decoding, basic blocks (calls do
//!   not end a block), edge kinds, jump tables, natural loops (module docs of `cfg.rs`).
//! * [`dominators`], [`natural_loops`], [`simple_loops`] (seed 000 §2.1, Fig. 1).
//! * [`BinaryLocator`]: finds the binary of a profile's module as perf does (`--binary`,
//!   `--symfs`, perf's build-id cache, the debuginfod cache, `/usr/lib/debug/.build-id`,
//!   the recorded path), and is the [`SymbolSource`](proftrust_model::SymbolSource) and
//!   [`SegmentSource`](proftrust_model::SegmentSource) the readers of
//!   `proftrust-formats` take.
//! * [`Kallsyms`]: kernel function symbols from a `/proc/kallsyms` copy (`--kallsyms`),
//!   perf's build-id cache or the running kernel (when its build-id matches).
//! * `[vdso]`: the kernel's vDSO, found by the locator in perf's build-id cache or read
//!   from this process when the running kernel's has the recorded build-id
//!   ([`running_vdso_build_id`], which `proftrust record` stamps on `[vdso]`).
//! * [`ProcessUnwinder`]: DWARF unwinding of user stacks the kernel copied
//!   (`perf record --call-graph dwarf`), framehop over the binaries' call-frame
//!   information; `BinaryLocator` is the readers' `UnwindSource`.
//! * [`Symbolizer`]: a profile's [`ModuleTable`](proftrust_model::ModuleTable) mapped to
//!   binaries on disk, naming any [`Location`](proftrust_model::Location).
//!
//! Nothing here panics on bad input; problems that do not stop the work (no debug info, no
//! symbol table, build-id mismatch) are collected as warnings.
//!
//! Entry point: [`Binary::open`], then functions, inline frames and CFGs (here on the golden
//! tests' fixture program):
//!
//! ```
//! use proftrust_binary::Binary;
//!
//! let b = Binary::open("../cli/tests/golden/fixtures/tiny".as_ref())?;
//! let work = b.function_by_name("work").expect("a function of tiny.c");
//! let cfg = b.cfg(work)?;
//! assert!(cfg.blocks.len() > 2); // a loop with a branch
//! assert_eq!(b.function_at(work.start).unwrap().name, "work");
//! # Ok::<(), proftrust_binary::BinaryError>(())
//! ```
#![warn(missing_docs)]
#![forbid(unsafe_code)]

mod callsites;
mod cfg;
mod crc;
mod debuginfo;
mod demangle;
mod disasm;
mod elf;
mod error;
mod kallsyms;
mod locate;
mod loops;
mod recover;
mod srcframes;
mod symbolizer;
mod unwind;
mod vdso;

pub use demangle::demangle;
pub use disasm::{Flow, Instr};
pub use elf::{segment_table, Binary, Frame, Function, FunctionOrigin, LoadHeaders, OpenOptions};
pub use error::BinaryError;
pub use kallsyms::{build_id_in_notes, Kallsyms, KernelSymbol};
pub use locate::{object_symbols, BinaryLocator, LocateOptions, Located};
pub use loops::{dominators, natural_loops, simple_loops};
pub use proftrust_model::{BlockId, BuildId, Cfg, Svma};
pub use srcframes::SourceFrame;
pub use symbolizer::{is_kernel_module, Symbolizer};
pub use unwind::ProcessUnwinder;
pub use vdso::{running_vdso_build_id, vdso_range, VDSO};

/// Default cap on the number of simple loops enumerated per loop.
pub const DEFAULT_SIMPLE_LOOP_CAP: usize = 10_000;

/// A resolved jump table (see [`Binary::jump_tables`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JumpTable {
    /// Address of the indirect `jmp`.
    pub jump: Svma,
    /// Address of the table.
    pub table: Svma,
    /// Number of entries, from the bounds check before the jump.
    pub entries: u64,
    /// Target of each entry, in table order (duplicates kept).
    pub targets: Vec<Svma>,
}

impl Binary {
    /// The control-flow graph of `f`: blocks, edges with kinds, natural loops.
    pub fn cfg(&self, f: &Function) -> Result<Cfg, BinaryError> {
        cfg::build_cfg(self, f)
    }

    /// The instructions of `f`, decoded in address order.
    pub fn instructions(&self, f: &Function) -> Result<Vec<Instr>, BinaryError> {
        Ok(disasm::describe(&disasm::decode_raw(self, f)?))
    }

    /// The jump tables of `f` that match a known pattern with a bounded size.
    pub fn jump_tables(&self, f: &Function) -> Result<Vec<JumpTable>, BinaryError> {
        Ok(cfg::jump_tables(self, f)?
            .into_iter()
            .map(|(jump, t)| JumpTable {
                jump,
                table: Svma(t.table),
                entries: t.entries,
                targets: t.targets.into_iter().map(Svma).collect(),
            })
            .collect())
    }
}
