//! `proftrust export PROFILE --to FORMAT -o FILE [--binary PATH]...`: any profile `read`
//! accepts (perf.data, `perf script`, callgrind, proftrust sample and exact files) into the
//! tools users already use (`proftrust-export`; docs/export.md):
//!
//! * `pprof` (gzipped profile.proto), `firefox` (Firefox Profiler processed JSON),
//!   `speedscope` (speedscope JSON), `folded` (FlameGraph / inferno input), `flamegraph`
//!   (SVG drawn by inferno), `llvm-sample` (LLVM sample profile text for
//!   `clang -fprofile-sample-use`);
//! * `folded-diff` and `flamegraph-diff` compare PROFILE with `--against FILE` (sampled vs
//!   exact, raw vs corrected);
//! * `annotate` and `annotate-html`: annotated source and disassembly of the hottest
//!   functions, samples against `--against` exact counts when given.
//!
//! `audit` and `correct` take `--export FORMAT:FILE` (repeatable;
//! `proftrust_pipeline::export`):
//! `correct` exports the corrected profile, `audit` the audited samples (the corrected
//! profile with `--correct-skid`); `FORMAT@SIDE:FILE` picks a side (`samples`, `exact`,
//! `corrected`). The diff formats and `annotate` always compare the samples with the
//! exact counts (and the corrected estimate).

use crate::util;
use anyhow::{bail, Context, Result};
use proftrust_pipeline::export::{load_profile, Job, Loaded, Side, Target};
use std::path::PathBuf;

/// Arguments of `proftrust export`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  proftrust export perf.data --to pprof -o prof.pb.gz && go tool pprof -top prof.pb.gz\n  proftrust export samples.ptsamp --to firefox -o prof.json\n  proftrust export exact.ptexact --to llvm-sample -o prog.prof --binary ./prog\n  proftrust export samples.ptsamp --to folded-diff --against exact.ptexact -o diff.folded\n  proftrust export samples.ptsamp --to annotate --against exact.ptexact -o annotate.txt"
)]
pub struct Args {
    /// Profile: perf.data, perf script text, callgrind out file, proftrust sample or exact
    /// file.
    profile: PathBuf,
    /// Output format.
    #[arg(long = "to", value_parser = crate::args::export_target())]
    to: Target,
    /// Output file (`-` = standard output).
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    output: PathBuf,
    /// A binary of the profile (matched to modules by build-id, else file name); repeat for
    /// several. Modules are otherwise looked up at their recorded paths.
    #[arg(long = "binary", value_name = "PATH")]
    binaries: Vec<PathBuf>,
    /// The profile to compare with (folded-diff, flamegraph-diff: the "after" side;
    /// annotate: exact counts).
    #[arg(long, value_name = "FILE")]
    against: Option<PathBuf>,
    /// Sampled profiles: export only this event (by name). Default: every event (pprof
    /// keeps one column pair per event; the other formats use the first event).
    #[arg(long, value_name = "NAME")]
    event: Option<String>,
    /// Value column by name (`samples`, `cpu-clock`, `instructions`, a callgrind event).
    /// Default: the first (sample counts, or exact instructions).
    #[arg(long, value_name = "NAME")]
    value: Option<String>,
    /// annotate: functions to annotate (repeat); default the hottest --top.
    #[arg(long = "function", value_name = "NAME")]
    functions: Vec<String>,
    /// annotate: how many of the hottest functions.
    #[arg(long, default_value_t = 3)]
    top: usize,
    /// folded-diff, flamegraph-diff: do not scale the first profile to the second's total.
    #[arg(long)]
    no_normalize: bool,
    /// Refuse up front an export estimated to need more memory than this, in GB (a
    /// profile of millions of distinct addresses: the error names the estimate and the
    /// formats that fit).
    #[arg(long, value_name = "GB", default_value_t = 4.0)]
    max_memory: f64,
    /// annotate: look for source files here (by file name) when the path the debug info
    /// states does not exist (a build tree moved elsewhere), as `perf annotate --prefix`.
    #[arg(long, value_name = "DIR")]
    source_dir: Vec<PathBuf>,
}

/// Runs `proftrust export`.
pub fn run(a: Args) -> Result<()> {
    crate::output::check(&a.output).context("-o")?;
    // The loaded profile is dropped once its export side is built: a profile of millions of
    // addresses is not held twice.
    let main = match &load_profile(&a.profile, &a.binaries, &util::Ui)? {
        Loaded::Samples(s) => {
            if s.samples.is_empty() {
                bail!("{}: the profile holds no samples", a.profile.display());
            }
            let ev = match &a.event {
                Some(n) => Some(s.event_named(n).context("--event")?),
                // pprof keeps every event; the others show one.
                None if a.to == Target::Pprof || s.events.len() <= 1 => None,
                // The event with the samples (issue 31: a hybrid CPU's first event is
                // often empty), said when there was a choice.
                None => {
                    let e = s.default_event().unwrap_or(0);
                    util::note(format!(
                        "{} events ({}): exporting {}, the first with samples; --event picks another",
                        s.events.len(),
                        s.event_names(),
                        s.events[usize::from(e)].name
                    ));
                    Some(e)
                }
            };
            if let Some(e) = ev {
                if s.count_for_event(e) == 0 {
                    bail!(
                        "{}: the profile holds no samples of {} (it has {}): nothing to export",
                        a.profile.display(),
                        s.events[usize::from(e)].name,
                        s.event_names()
                    );
                }
            }
            Side::samples(s, ev, &a.binaries)
        }
        Loaded::Exact(e) => {
            if e.instructions.is_empty() {
                bail!(
                    "{}: the exact profile holds no executed instruction",
                    a.profile.display()
                );
            }
            Side::exact(e, &a.binaries)
        }
    };
    for w in main.symbolizer.warnings() {
        util::note(format!("warning: {w}"));
    }
    let against = match &a.against {
        Some(p) => Some(match load_profile(p, &a.binaries, &util::Ui)? {
            Loaded::Samples(s) => Side::samples(
                &s,
                (s.events.len() > 1).then(|| s.default_event().unwrap_or(0)),
                &a.binaries,
            ),
            Loaded::Exact(e) => Side::exact(&e, &a.binaries),
        }),
        None => None,
    };
    if a.against.is_some() && !a.to.compares() {
        util::note(format!("--against is not used by --to {}", a.to.name()));
    }
    let job = Job {
        target: a.to,
        main: &main,
        against: against.as_ref(),
        corrected: None,
        value: a.value.as_deref(),
        functions: &a.functions,
        top: a.top,
        normalize: !a.no_normalize,
        source_dirs: &a.source_dir,
    };
    if !a.max_memory.is_finite() || a.max_memory <= 0.0 {
        bail!(
            "--max-memory {}: give a positive number of GB",
            a.max_memory
        );
    }
    proftrust_pipeline::export::check_memory(&job, (a.max_memory * 1e9) as u64)?;
    crate::output::write_export(&job, &a.output)
}
