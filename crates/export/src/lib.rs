//! # proftrust-export
//!
//! Any profile proftrust holds, in the tools users already use. A corrected profile that
//! cannot leave proftrust helps nobody act on it.
//!
//! Input: a [`Profile`] — weighted call stacks of module-relative locations, built from a
//! [`SampleSet`](proftrust_model::SampleSet) (with call chains where the source has them),
//! an [`ExactProfile`](proftrust_model::ExactProfile), or per-location estimates such as a
//! skid-corrected profile — and a [`Resolver`] over a [`Symbols`] source (functions, inline
//! frames, lines, discriminators; [`proftrust_binary::Symbolizer`] implements it).
//!
//! Output, each a writer over [`std::io::Write`]:
//!
//! | function | format | read by |
//! |---|---|---|
//! | [`write_pprof`] | pprof `profile.proto`, gzipped (prost) | `go tool pprof`, `pprof`, Pyroscope, Parca |
//! | [`write_firefox`] | Firefox Profiler processed format (`fxprof-processed-profile`) | profiler.firefox.com, `samply load` |
//! | [`write_speedscope`] | speedscope JSON | speedscope |
//! | [`write_folded`], [`write_folded_diff`] | folded stacks, differential folded | `flamegraph.pl`, inferno, `difffolded.pl` users |
//! | [`write_flamegraph`], [`write_diff_flamegraph`] | flame graph SVG (inferno) | a browser |
//! | [`write_llvm_sample`] | LLVM sample profile (text) | `clang -fprofile-sample-use`, `llvm-profdata` |
//! | [`annotate()`] | per source line and instruction, sampled vs exact (and corrected) | `proftrust-report`'s text and HTML |
//!
//! This crate opens no files and starts no processes; the CLI (`proftrust export`, and
//! `--export FORMAT:FILE` on `audit` and `correct`) reads profiles and binaries and writes
//! the results atomically. See `docs/export.md`.
//!
//! Entry point: a [`Profile`] of a sample set, a [`Resolver`], a writer. Here three samples
//! of one module, resolved without symbols, as folded stacks
//! with their sample counts:
//!
//! ```
//! use proftrust_export::{write_folded, NoSymbols, Profile, Resolver};
//! use proftrust_model::{EventDesc, EventKind, Location, Module, ModuleIdx, Sample, SampleSet};
//!
//! let mut set = SampleSet::default();
//! set.modules.intern(Module::new("/bin/prog"));
//! set.events.push(EventDesc {
//!     name: "cpu-clock".into(),
//!     kind: EventKind::CpuClock,
//!     config: Default::default(),
//! });
//! for ip in [0x1010, 0x1010, 0x1020] {
//!     set.samples.push(Sample {
//!         event: 0,
//!         pid: 1,
//!         tid: 1,
//!         time: ip,
//!         cpu: 0,
//!         period: 100_003,
//!         ip: Location::new(ModuleIdx(0), ip),
//!         callchain: Vec::new(),
//!         branches: Vec::new(),
//!     });
//! }
//! let profile = Profile::from_samples(&set, Some(0));
//! let resolver = Resolver::new(&NoSymbols, &profile.modules);
//! let mut out = Vec::new();
//! write_folded(&mut out, &profile, &resolver, 0)?;
//! let text = String::from_utf8(out).unwrap();
//! let counts: Vec<&str> = text.lines().map(|l| l.rsplit(' ').next().unwrap()).collect();
//! assert_eq!(counts, ["2", "1"]);
//! # Ok::<(), proftrust_export::ExportError>(())
//! ```
#![warn(missing_docs)]
#![forbid(unsafe_code)]

mod annotate;
mod firefox;
mod flame;
mod folded;
mod llvm;
pub mod pprof;
pub mod profile;
mod speedscope;
pub mod symbols;

pub use annotate::{annotate, AnnotateInput, AnnotateOptions, SourceText};
pub use firefox::{debug_id, write_firefox};
pub use flame::{write_diff_flamegraph, write_flamegraph, FlameOptions};
pub use folded::{write_folded, write_folded_diff, DiffOptions};
pub use llvm::{write_llvm_sample, CallSite, LlvmSummary};
pub use pprof::{read_pprof, to_pprof, write_pprof};
pub use profile::{Frames, Origin, Profile, Stack, TimedSample, ValueType, Values};
pub use speedscope::write_speedscope;
pub use symbols::{Frame, NoSymbols, Resolver, Symbols};

/// Why an export failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExportError {
    /// Writing the output failed.
    #[error("cannot write the export: {0}")]
    Io(#[from] std::io::Error),
    /// JSON serialisation failed.
    #[error("cannot write JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// inferno could not draw the flame graph.
    #[error("cannot draw the flame graph: {0}")]
    Flamegraph(String),
    /// A value column that the profile does not have.
    #[error("the profile has no value column {index} (it has: {available})")]
    NoSuchValue {
        /// The index asked for.
        index: usize,
        /// The columns it has.
        available: String,
    },
    /// Nothing to export.
    #[error("nothing to export: {what}")]
    Empty {
        /// What is missing.
        what: String,
    },
    /// A pprof file could not be decoded.
    #[error("not a pprof profile.proto: {0}")]
    Decode(String),
}
