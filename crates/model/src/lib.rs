//! # proftrust-model
//!
//! The nouns every other proftrust crate speaks (see `docs/ARCHITECTURE.md`):
//!
//! * [`Module`], [`BuildId`], [`Svma`], [`Location`] — which binary and where in it. Once an
//!   address leaves the recorder it is **module-relative**: an [`Svma`] (the address as the ELF
//!   file states it, i.e. runtime address minus load bias) inside a [`Module`]. Native runs,
//!   QEMU and valgrind load the same binary at different bases; only module-relative addresses
//!   compare.
//! * [`SampleSet`], [`Sample`], [`EventDesc`] — what a sampling profiler saw.
//! * [`ExactProfile`] — exact execution counts per instruction, edge and call.
//! * [`process`] — process images on both sides: [`ExactProcess`] (what an exact run
//!   counted per process), [`SampleSet::images`] (what a recording saw), named as the
//!   kernel names processes so two runs can be matched.
//! * [`Cfg`], [`BasicBlock`], [`CfgEdge`], [`Loop`] — the static structure of a function.
//! * [`TraceBlock`] and [`BlockVisitor`] — the streamed exact block trace; [`CostModel`] and
//!   [`InstrCost`] — what each traced instruction costs under a timing model.
//! * [`segments`] — the one address rule (file offset ↔ SVMA ↔ runtime address through
//!   `PT_LOAD` segments) and [`SegmentSource`]; [`symbols`] — [`SymbolSource`], the
//!   function symbols readers need from the objects a profile names; [`unwind`] —
//!   [`UnwindSource`], what readers need to unwind user stacks copied by the kernel.
//! * [`Warning`], [`WarningKind`] — one warning of any report: a closed kind and a message.
//!
//! This crate does no I/O: readers and writers live in `proftrust-formats`, analyses in their
//! own crates.
//!
//! Entry point: module-relative addresses in a module table.
//!
//! ```
//! use proftrust_model::{Location, Module, ModuleTable};
//!
//! let mut modules = ModuleTable::default();
//! let prog = modules.intern(Module::new("/usr/bin/prog"));
//! let again = modules.intern(Module::new("/usr/bin/prog"));
//! assert_eq!(prog, again); // one module per binary
//! let at = Location::new(prog, 0x1130); // an SVMA, as objdump prints it
//! assert_eq!(modules.get(at.module.unwrap()).unwrap().file_name(), "prog");
//! ```
#![warn(missing_docs)]
#![forbid(unsafe_code)]

mod addr;
mod cfg;
mod cost;
mod event_name;
mod exact;
pub mod named;
pub mod process;
mod quote;
mod sample;
pub mod segments;
pub mod symbols;
mod trace;
mod units;
pub mod unwind;
mod warning;

pub use addr::{BuildId, Location, Module, ModuleIdx, ModuleTable, RuntimeAddress, Svma};
pub use cfg::{BasicBlock, BlockId, Cfg, CfgEdge, EdgeKind, Loop, LoopId, SimpleLoop};
pub use cost::{sum_ranges, CostModel, InstrCost};
pub use event_name::{event_base, PeriodUnit};
pub use exact::{CallCount, EdgeCount, ExactProfile, InstrCount, RunOutcome, BRANCH_MISSES_COLUMN};
pub use process::{ExactProcess, ImageStart, SampledImage, ThreadStart};
pub use quote::{
    escape_markup, folded_comment, folded_frame, folded_stack, llvm_sample_name, quote_line,
    quote_name,
};
pub use sample::{
    Branch, CommIndex, EventDesc, EventKind, EventTimes, NoSuchEvent, PeriodMode, RecordingHealth,
    Sample, SampleSet, SamplingConfig, ThreadName,
};
pub use segments::{LoadSegment, SegmentSource, SegmentTable};
pub use symbols::{
    Attribution, FunctionSymbol, KernelSymbol, ModuleAttribution, ObjectSymbols, SymbolSource,
};
pub use trace::{BlockVisitor, MemAccess, TraceBlock, TraceEnd, TraceEvent};
pub use units::{Cycles, Instructions, SampleCount};
pub use unwind::{StackUnwinder, UnwindEnd, UnwindSource, UserRegs};
pub use warning::{Warning, WarningKind};
