//! `export`, and the `--export FORMAT:FILE` of `audit` and `correct` (`proftrust-export`;
//! docs/export.md): loading a profile, the sides an export can take (samples, exact counts,
//! a corrected estimate), the jobs `--export` asks for, and writing one export to a
//! `Write` (the CLI writes files atomically around it). Also the audit page's flame graphs
//! and annotated source ([`audit_html_extras`]).

use crate::error::{bail, bail_options, Context, Result};
use crate::Events;
use proftrust_binary::Symbolizer;
use proftrust_export::{
    AnnotateInput, AnnotateOptions, CallSite, DiffOptions, FlameOptions, Origin, Profile, Resolver,
    SourceText, ValueType,
};
use proftrust_model::{ExactProfile, Location, SampleSet};
use std::cell::RefCell;
use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Output formats of `export --to` and `--export FORMAT:FILE`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// pprof profile.proto, gzipped (go tool pprof, pprof, Pyroscope, Parca).
    Pprof,
    /// Firefox Profiler processed profile JSON (profiler.firefox.com, samply load).
    Firefox,
    /// speedscope JSON.
    Speedscope,
    /// Folded stacks (flamegraph.pl, inferno-flamegraph).
    Folded,
    /// Differential folded stacks `stack BEFORE AFTER` (needs --against).
    FoldedDiff,
    /// Flame graph SVG (inferno).
    Flamegraph,
    /// Differential flame graph SVG (needs --against).
    FlamegraphDiff,
    /// LLVM sample profile, text (clang -fprofile-sample-use, llvm-profdata).
    LlvmSample,
    /// Annotated source and disassembly, text.
    Annotate,
    /// Annotated source and disassembly, a self-contained HTML page.
    AnnotateHtml,
}

impl Target {
    /// Every format, in the order help lists them.
    pub const ALL: [Target; 10] = [
        Target::Pprof,
        Target::Firefox,
        Target::Speedscope,
        Target::Folded,
        Target::FoldedDiff,
        Target::Flamegraph,
        Target::FlamegraphDiff,
        Target::LlvmSample,
        Target::Annotate,
        Target::AnnotateHtml,
    ];

    /// What the format is for (the CLI's help).
    pub fn description(self) -> &'static str {
        match self {
            Target::Pprof => {
                "pprof profile.proto, gzipped (go tool pprof, pprof, Pyroscope, Parca)"
            }
            Target::Firefox => {
                "Firefox Profiler processed profile JSON (profiler.firefox.com, samply load)"
            }
            Target::Speedscope => "speedscope JSON",
            Target::Folded => "Folded stacks (flamegraph.pl, inferno-flamegraph)",
            Target::FoldedDiff => {
                "Differential folded stacks `stack BEFORE AFTER` (needs --against)"
            }
            Target::Flamegraph => "Flame graph SVG (inferno)",
            Target::FlamegraphDiff => "Differential flame graph SVG (needs --against)",
            Target::LlvmSample => {
                "LLVM sample profile, text (clang -fprofile-sample-use, llvm-profdata)"
            }
            Target::Annotate => "Annotated source and disassembly, text",
            Target::AnnotateHtml => "Annotated source and disassembly, a self-contained HTML page",
        }
    }

    /// The name `--to` and `--export` take.
    pub fn name(self) -> &'static str {
        match self {
            Target::Pprof => "pprof",
            Target::Firefox => "firefox",
            Target::Speedscope => "speedscope",
            Target::Folded => "folded",
            Target::FoldedDiff => "folded-diff",
            Target::Flamegraph => "flamegraph",
            Target::FlamegraphDiff => "flamegraph-diff",
            Target::LlvmSample => "llvm-sample",
            Target::Annotate => "annotate",
            Target::AnnotateHtml => "annotate-html",
        }
    }

    /// The format named `s`.
    pub fn parse(s: &str) -> Option<Target> {
        Target::ALL.iter().copied().find(|t| t.name() == s)
    }

    /// Formats that compare two profiles.
    pub fn compares(self) -> bool {
        matches!(
            self,
            Target::FoldedDiff | Target::FlamegraphDiff | Target::Annotate | Target::AnnotateHtml
        )
    }
}

/// A loaded profile: samples or exact counts.
pub use crate::load::AnyProfile as Loaded;

/// Reads any profile `read` accepts (any format and compression, `-` for standard input)
/// through the pipeline's one loader ([`crate::load::any`]).
pub fn load_profile(path: &Path, binaries: &[PathBuf], events: &dyn Events) -> Result<Loaded> {
    crate::load::any(path, binaries, events)
}

/// One side of an export: the profile, its symbolizer, and (exact profiles) call counts.
pub struct Side {
    /// The profile.
    pub profile: Profile,
    /// Names of its locations.
    pub symbolizer: Symbolizer,
    /// Call counts (exact profiles).
    pub calls: Vec<CallSite>,
    /// The sample set's sampled event, for labels (`cpu-clock samples`).
    pub label: String,
    /// Directories of the binaries given: source files are also looked for there.
    pub source_dirs: Vec<PathBuf>,
}

fn dirs_of(binaries: &[PathBuf]) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = binaries
        .iter()
        .map(|b| match b.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        })
        .collect();
    v.dedup();
    v
}

impl Side {
    /// The samples of `event` (every event when `None`).
    pub fn samples(set: &SampleSet, event: Option<u16>, binaries: &[PathBuf]) -> Side {
        let label = match event.or((set.events.len() == 1).then_some(0)) {
            Some(e) => format!(
                "{} samples",
                set.events.get(e as usize).map_or("?", |d| d.name.as_str())
            ),
            None => "samples".into(),
        };
        Side {
            profile: Profile::from_samples(set, event),
            symbolizer: Symbolizer::new(&set.modules, binaries)
                .with_recorded_kernel_symbols(&set.kernel_symbols),
            calls: Vec::new(),
            label,
            source_dirs: dirs_of(binaries),
        }
    }

    /// Exact counts, with their calls.
    pub fn exact(e: &ExactProfile, binaries: &[PathBuf]) -> Side {
        Side {
            profile: Profile::from_exact(e),
            symbolizer: Symbolizer::new(&e.modules, binaries),
            calls: e
                .calls
                .iter()
                .map(|c| (c.site, c.target, c.count))
                .collect(),
            label: "exact instructions".into(),
            source_dirs: dirs_of(binaries),
        }
    }

    /// A corrected (estimated) profile: instruction estimates per location.
    pub fn corrected(
        modules: &proftrust_model::ModuleTable,
        counts: &HashMap<Location, f64>,
        title: &str,
        binaries: &[PathBuf],
    ) -> Side {
        Side {
            profile: Profile::from_location_counts(
                modules,
                counts.iter().map(|(l, c)| (*l, *c)),
                ValueType::new("instructions", "count"),
                Origin::Estimated,
                title,
            ),
            symbolizer: Symbolizer::new(modules, binaries),
            calls: Vec::new(),
            label: "corrected instructions".into(),
            source_dirs: dirs_of(binaries),
        }
    }

    fn resolver(&self) -> Resolver<'_> {
        Resolver::new(&self.symbolizer, &self.profile.modules)
    }

    fn value(&self, name: Option<&str>) -> Result<usize> {
        match name {
            None => Ok(self.profile.default_value),
            Some(n) => self
                .profile
                .value_types
                .iter()
                .position(|v| v.kind == n)
                .with_context(|| {
                    format!(
                        "--value {n}: the profile has {}",
                        self.profile
                            .value_types
                            .iter()
                            .map(|v| v.kind.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                }),
        }
    }
}

/// Source lines read from disk, each file once: at the path the debug info states, else
/// under each `--source-dir` by file name.
#[derive(Default)]
struct DiskSource {
    dirs: Vec<PathBuf>,
    files: RefCell<HashMap<String, Option<Vec<String>>>>,
}

impl SourceText for DiskSource {
    fn line(&self, file: &str, line: u32) -> Option<String> {
        let mut c = self.files.borrow_mut();
        let lines = c.entry(file.to_string()).or_insert_with(|| {
            let name = Path::new(file).file_name()?;
            std::iter::once(PathBuf::from(file))
                .chain(self.dirs.iter().map(|d| d.join(name)))
                .find_map(|p| std::fs::read(p).ok())
                .map(|b| {
                    String::from_utf8_lossy(&b)
                        .lines()
                        .map(str::to_string)
                        .collect()
                })
        });
        lines.as_ref()?.get(line.checked_sub(1)? as usize).cloned()
    }
}

/// What one export needs beyond the main side.
pub struct Job<'a> {
    /// The format.
    pub target: Target,
    /// The profile exported (the "before" side of diffs, the samples of annotate).
    pub main: &'a Side,
    /// The other side of diff formats; exact counts for annotate.
    pub against: Option<&'a Side>,
    /// The corrected profile for annotate.
    pub corrected: Option<&'a Side>,
    /// Value column by name; `None` the profile's default.
    pub value: Option<&'a str>,
    /// annotate: the functions; empty the hottest `top`.
    pub functions: &'a [String],
    /// annotate: how many of the hottest functions.
    pub top: usize,
    /// Diffs: scale the first profile to the second's total.
    pub normalize: bool,
    /// annotate: directories searched for source files by name.
    pub source_dirs: &'a [PathBuf],
}

/// Bytes a loaded profile holds per stack (a flat stack is 48 bytes inline, plus its share
/// of the symbolizer and the loader's leftovers; measured with `scripts/bench-export.sh`).
const PROFILE_BYTES_PER_STACK: u64 = 60;

/// Bytes one distinct stack (or location) costs a format's writer beyond the profile,
/// measured on `scripts/bench-export.sh`'s 26.8 M-address callgrind file (peak RSS minus
/// the profile, over the stacks; docs/export.md). The formats that name every frame once
/// in a table of their own (speedscope, Firefox) hold it as JSON values or in
/// `fxprof-processed-profile`'s tables: hundreds of bytes each.
pub fn bytes_per_stack(t: Target) -> u64 {
    match t {
        // 26.8 M stacks: pprof 2.73 GB, folded 3.12 GB, flame graph 4.35 GB at the peak.
        Target::Pprof => 50,
        Target::Folded | Target::FoldedDiff => 60,
        Target::Flamegraph | Target::FlamegraphDiff => 110,
        Target::Speedscope => 400,
        Target::Firefox => 700,
        // Keyed by functions and lines, or a few functions: no per-address table.
        Target::LlvmSample | Target::Annotate | Target::AnnotateHtml => 0,
    }
}

/// The memory an export takes at its peak, estimated up front from the profiles' stacks
/// ([`bytes_per_stack`]).
pub fn memory_estimate(job: &Job<'_>) -> u64 {
    let mut stacks = job.main.profile.stacks.len() as u64;
    let mut held = stacks;
    for s in job.against.iter().chain(&job.corrected) {
        held += s.profile.stacks.len() as u64;
        if job.target.compares() {
            stacks += s.profile.stacks.len() as u64;
        }
    }
    held * PROFILE_BYTES_PER_STACK + stacks * bytes_per_stack(job.target)
}

fn gb(bytes: u64) -> String {
    format!("{:.1} GB", bytes as f64 / 1e9)
}

/// Refuses, before the writer allocates anything, an export whose [`memory_estimate`] is
/// above `limit` bytes: the error names the estimate, the limit, and what to do (issue
/// 32: an export of 26.8 M addresses went past 14 GB instead).
pub fn check_memory(job: &Job<'_>, limit: u64) -> Result<()> {
    let need = memory_estimate(job);
    if need <= limit {
        return Ok(());
    }
    let stacks = job.main.profile.stacks.len();
    let lean: Vec<&str> = [Target::Pprof, Target::Folded]
        .into_iter()
        .filter(|&t| t != job.target && memory_estimate(&Job { target: t, ..*job }) <= limit)
        .map(Target::name)
        .collect();
    bail_options!(
        "--to {}: {} distinct stacks would take about {} of memory ({} bytes per stack for the format, {} for the profile), more than the limit of {}; raise it with --max-memory GB if the machine has the memory{}",
        job.target.name(),
        stacks,
        gb(need),
        bytes_per_stack(job.target),
        PROFILE_BYTES_PER_STACK,
        gb(limit),
        if lean.is_empty() {
            String::new()
        } else {
            format!(", or export --to {} (within the limit)", lean.join(" or --to "))
        }
    )
}

/// Writes one export to `w` (the caller opens the file; the CLI writes atomically).
pub fn write_export(job: &Job<'_>, w: &mut dyn Write, events: &dyn Events) -> Result<()> {
    let t = job.target;
    if matches!(t, Target::FoldedDiff | Target::FlamegraphDiff) && job.against.is_none() {
        bail_options!(
            "--to {} compares two profiles: give the second with --against FILE",
            t.name()
        );
    }
    let main = job.main;
    let r = main.resolver();
    let v = main.value(job.value)?;
    {
        match t {
            Target::Pprof => proftrust_export::write_pprof(w, &main.profile, &r)?,
            Target::Firefox => proftrust_export::write_firefox(w, &main.profile, &r, v)?,
            Target::Speedscope => proftrust_export::write_speedscope(w, &main.profile, &r, v)?,
            Target::Folded => proftrust_export::write_folded(w, &main.profile, &r, v)?,
            Target::Flamegraph => {
                let mut o = FlameOptions::default();
                o.title = main.profile.title.clone();
                o.count_name = main.profile.value_types[v].kind.clone();
                proftrust_export::write_flamegraph(w, &main.profile, &r, v, &o)?
            }
            Target::FoldedDiff | Target::FlamegraphDiff => {
                let b = job.against.expect("checked above");
                let rb = b.resolver();
                let vb = b.value(None)?;
                let mut d = DiffOptions::default();
                d.normalize = job.normalize;
                if t == Target::FoldedDiff {
                    proftrust_export::write_folded_diff(
                        w,
                        (&main.profile, &r, v),
                        (&b.profile, &rb, vb),
                        &d,
                    )?;
                } else {
                    let mut o = FlameOptions::default();
                    o.title = format!("{} -> {}", main.label, b.label);
                    o.count_name = b.profile.value_types[vb].kind.clone();
                    proftrust_export::write_diff_flamegraph(
                        w,
                        (&main.profile, &r, v),
                        (&b.profile, &rb, vb),
                        &d,
                        &o,
                    )?;
                }
            }
            Target::LlvmSample => {
                let s = proftrust_export::write_llvm_sample(w, &main.profile, &r, v, &main.calls)?;
                if s.functions == 0 {
                    bail!(
                        "no function with source lines: an LLVM sample profile keys counts by line, which needs DWARF line tables (build the program with -g, pass it with --binary){}",
                        if main.symbolizer.warnings().is_empty() {
                            String::new()
                        } else {
                            format!("; {}", main.symbolizer.warnings().join("; "))
                        }
                    );
                }
                if s.unlined_addresses > 0 {
                    events.note(&format!(
                        "llvm-sample: {} counted addresses ({:.0} of the counts) have no source line and are left out",
                        s.unlined_addresses, s.unlined_count
                    ));
                }
            }
            Target::Annotate | Target::AnnotateHtml => {
                let ann = annotations(job, v)?;
                let text = if t == Target::Annotate {
                    proftrust_report::render_annotation_text(&ann)
                } else {
                    proftrust_report::render_annotation_html(
                        &format!("proftrust annotate: {}", main.profile.title),
                        &ann,
                    )
                };
                w.write_all(text.as_bytes())
                    .context("cannot write the annotation")?;
            }
        }
    }
    Ok(())
}

fn annotations(job: &Job<'_>, v: usize) -> Result<Vec<proftrust_report::Annotation>> {
    let main = job.main;
    if main.profile.origin != Origin::Sampled {
        bail_options!("annotate shows samples with their error bars: give a sample profile (and the exact counts with --against)");
    }
    let r = main.resolver();
    let mut o = AnnotateOptions::default();
    o.functions = job.functions.to_vec();
    o.top = job.top;
    o.sampled_label = main.label.clone();
    let input = AnnotateInput {
        sampled: (&main.profile, v),
        exact: job.against.map(|s| (&s.profile, s.profile.default_value)),
        corrected: job.corrected.map(|s| (&s.profile, s.profile.default_value)),
    };
    let src = DiskSource {
        dirs: job
            .source_dirs
            .iter()
            .chain(&main.source_dirs)
            .cloned()
            .collect(),
        ..DiskSource::default()
    };
    Ok(proftrust_export::annotate(&input, &r, &src, &o)?)
}

/// One `--export FORMAT[@SIDE]:FILE` of `audit` and `correct`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportSpec {
    /// The format.
    pub target: Target,
    /// `samples`, `exact`, `corrected`, or `None` (the command's default).
    pub side: Option<String>,
    /// The output file (`-` = standard output).
    pub file: PathBuf,
}

/// Parses `FORMAT[@SIDE]:FILE` (the CLI's value parser of `--export`).
pub fn parse_export_spec(s: &str) -> std::result::Result<ExportSpec, String> {
    let formats = Target::ALL
        .iter()
        .map(|t| t.name())
        .collect::<Vec<_>>()
        .join(", ");
    let (fmt, file) = s
        .split_once(':')
        .ok_or_else(|| format!("expected FORMAT:FILE (formats: {formats})"))?;
    if file.is_empty() {
        return Err("expected FORMAT:FILE, the file is empty".into());
    }
    let (fmt, side) = match fmt.split_once('@') {
        Some((f, s)) => (f, Some(s.to_string())),
        None => (fmt, None),
    };
    if let Some(s) = &side {
        if !["samples", "exact", "corrected"].contains(&s.as_str()) {
            return Err(format!("unknown side {s:?} (samples, exact, corrected)"));
        }
    }
    let target =
        Target::parse(fmt).ok_or_else(|| format!("unknown format {fmt:?} (formats: {formats})"))?;
    Ok(ExportSpec {
        target,
        side,
        file: PathBuf::from(file),
    })
}

/// The sides `audit` and `correct` have at hand for `--export`.
pub struct Sides<'a> {
    /// The samples.
    pub samples: Option<&'a Side>,
    /// The exact counts.
    pub exact: Option<&'a Side>,
    /// The corrected estimate.
    pub corrected: Option<&'a Side>,
    /// The side single-profile formats export by default.
    pub default: &'a str,
}

/// The job of every `--export` of `audit` or `correct`, beside its spec.
pub fn export_jobs<'a>(
    specs: &'a [ExportSpec],
    sides: &Sides<'a>,
) -> Result<Vec<(&'a ExportSpec, Job<'a>)>> {
    let mut jobs = Vec::new();
    for spec in specs {
        let pick = |name: &str| -> Result<&Side> {
            match name {
                "samples" => sides.samples,
                "exact" => sides.exact,
                "corrected" => sides.corrected,
                _ => None,
            }
            .with_context(|| {
                format!(
                    "--export {}@{name}: this run has no {name} profile",
                    spec.target.name()
                )
            })
        };
        let job = if spec.target.compares() {
            let before = match &spec.side {
                Some(s) => pick(s)?,
                None => sides
                    .samples
                    .or(sides.corrected)
                    .context("no samples to compare")?,
            };
            let after = match spec.target {
                Target::Annotate | Target::AnnotateHtml => sides.exact,
                // Samples -> exact; with only a corrected profile: raw -> corrected.
                _ => sides.exact.or(sides.corrected),
            };
            if after.is_none() && !matches!(spec.target, Target::Annotate | Target::AnnotateHtml) {
                bail_options!(
                    "--export {}: this run has nothing to compare the samples with",
                    spec.target.name()
                );
            }
            Job {
                target: spec.target,
                main: before,
                against: after,
                corrected: sides.corrected,
                value: None,
                functions: &[],
                top: 3,
                normalize: true,
                source_dirs: &[],
            }
        } else {
            Job {
                target: spec.target,
                main: pick(spec.side.as_deref().unwrap_or(sides.default))?,
                against: None,
                corrected: None,
                value: None,
                functions: &[],
                top: 3,
                normalize: true,
                source_dirs: &[],
            }
        };
        jobs.push((spec, job));
    }
    Ok(jobs)
}

/// The sides of an audit (samples of the compared event, exact counts, corrected estimates).
pub struct AuditSides {
    samples: Side,
    exact: Side,
    corrected: Option<Side>,
}

impl AuditSides {
    /// What `audit --export` exports: single-profile formats the corrected profile when the
    /// audit corrected skid, else the samples; the diff formats and annotate compare the
    /// samples with the exact counts.
    pub fn sides(&self) -> Sides<'_> {
        Sides {
            samples: Some(&self.samples),
            exact: Some(&self.exact),
            corrected: self.corrected.as_ref(),
            default: if self.corrected.is_some() {
                "corrected"
            } else {
                "samples"
            },
        }
    }
}

/// The sides of an audit's data.
pub fn audit_sides(d: &crate::audit::AuditData) -> AuditSides {
    AuditSides {
        samples: Side::samples(&d.samples, Some(d.event), &d.binaries),
        exact: Side::exact(&d.exact, &d.binaries),
        corrected: d.corrected.as_ref().map(|c| {
            Side::corrected(
                &d.samples.modules,
                c,
                "skid-corrected instructions",
                &d.binaries,
            )
        }),
    }
}

/// The audit page's flame graphs (samples and exact counts side by side, the differential
/// samples -> exact) and annotated source of the three hottest sampled functions. A part
/// that cannot be drawn is left out with a note; the report itself never fails on it.
pub fn audit_html_extras(
    d: &crate::audit::AuditData,
    events: &dyn Events,
) -> proftrust_report::HtmlExtras {
    let s = audit_sides(d);
    let mut extras = proftrust_report::HtmlExtras::default();
    let rs = s.samples.resolver();
    let re = s.exact.resolver();
    // Graphs left out for the same reason (an empty exact side fails the exact and the
    // differential graph alike) get one note naming them all.
    let missing: std::cell::RefCell<Vec<(String, String)>> = Default::default();
    let svg =
        |f: &dyn Fn(&mut Vec<u8>) -> std::result::Result<(), proftrust_export::ExportError>,
         what: &str|
         -> Option<String> {
            let mut v = Vec::new();
            match f(&mut v) {
                Ok(()) => String::from_utf8(v).ok(),
                Err(e) => {
                    missing.borrow_mut().push((what.to_string(), e.to_string()));
                    None
                }
            }
        };
    let mut o = FlameOptions::default();
    o.title = format!("Sampled: {}", s.samples.label);
    o.count_name = "samples".into();
    o.width = 600;
    let sampled = svg(
        &|w| proftrust_export::write_flamegraph(w, &s.samples.profile, &rs, 0, &o),
        "sampled",
    );
    let mut o = FlameOptions::default();
    o.title = format!("Exact: {} ({})", s.exact.label, d.exact.backend);
    o.count_name = "instructions".into();
    o.width = 600;
    let exact = svg(
        &|w| proftrust_export::write_flamegraph(w, &s.exact.profile, &re, 0, &o),
        "exact",
    );
    let mut o = FlameOptions::default();
    o.title = "Differential: samples -> exact".into();
    o.count_name = "instructions".into();
    let diff = svg(
        &|w| {
            proftrust_export::write_diff_flamegraph(
                w,
                (&s.samples.profile, &rs, 0),
                (&s.exact.profile, &re, 0),
                &DiffOptions::default(),
                &o,
            )
        },
        "differential",
    );
    let mut why: Vec<(Vec<String>, String)> = Vec::new();
    for (what, e) in missing.into_inner() {
        match why.iter_mut().find(|(_, x)| *x == e) {
            Some((w, _)) => w.push(what),
            None => why.push((vec![what], e)),
        }
    }
    for (whats, e) in why {
        let graphs = match whats.len() {
            1 => format!("no {} flame graph", whats[0]),
            _ => format!("no {} flame graphs", whats.join(" or ")),
        };
        events.note(&format!("HTML report: {graphs}: {e}"));
    }
    let note = if s.samples.profile.has_callers {
        "The sampled graph shows the recorded call chains; the exact counts have no call chains, so the exact and the differential graphs show each function with the functions inlined into it (the differential graph cuts the samples to the same depth).".into()
    } else {
        "No call chains were recorded: each graph shows each function with the functions inlined into it.".into()
    };
    extras.flamegraphs = Some(proftrust_report::FlameGraphs {
        sampled,
        exact,
        diff,
        note,
    });
    let job = Job {
        target: Target::AnnotateHtml,
        main: &s.samples,
        against: Some(&s.exact),
        corrected: s.corrected.as_ref(),
        value: None,
        functions: &[],
        top: 3,
        normalize: true,
        source_dirs: &[],
    };
    match annotations(&job, 0) {
        Ok(a) => extras.annotations = a,
        Err(e) => events.note(&format!(
            "HTML report: no annotated source: {}",
            crate::error::chain(&e)
        )),
    }
    extras
}

/// The sides of a skid correction.
pub struct CorrectSides {
    samples: Option<Side>,
    exact: Option<Side>,
    corrected: Side,
}

impl CorrectSides {
    /// What `correct --export` exports: the corrected profile by default; the raw samples
    /// and the truth as the other sides.
    pub fn sides(&self) -> Sides<'_> {
        Sides {
            samples: self.samples.as_ref(),
            exact: self.exact.as_ref(),
            corrected: Some(&self.corrected),
            default: "corrected",
        }
    }
}

/// The sides of a correction: the raw samples (the instructions event of `raw`), the truth
/// (when the correction had one) and the corrected estimate.
pub fn correct_sides(
    raw: Option<&Path>,
    d: &crate::correct::CorrectData,
    binaries: &[PathBuf],
    events: &dyn Events,
) -> Result<CorrectSides> {
    let samples = match raw.map(|p| load_profile(p, binaries, events)).transpose()? {
        Some(Loaded::Samples(set)) => {
            let ev = set
                .events
                .iter()
                .position(|e| e.kind == proftrust_model::EventKind::Instructions)
                .map(|e| e as u16);
            Some(Side::samples(&set, ev, binaries))
        }
        _ => None,
    };
    let exact = d.truth.as_ref().map(|t| Side::exact(t, binaries));
    let corrected = Side::corrected(
        &d.modules,
        &d.corrected,
        "skid-corrected instructions",
        binaries,
    );
    Ok(CorrectSides {
        samples,
        exact,
        corrected,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn export_specs_parse() {
        let s = parse_export_spec("pprof:out/p.pb.gz").unwrap();
        assert_eq!(s.target, Target::Pprof);
        assert_eq!(s.file, PathBuf::from("out/p.pb.gz"));
        assert_eq!(s.side, None);
        let s = parse_export_spec("llvm-sample@exact:a:b.prof").unwrap();
        assert_eq!(s.target, Target::LlvmSample);
        assert_eq!(s.side.as_deref(), Some("exact"));
        assert_eq!(s.file, PathBuf::from("a:b.prof"));
        assert!(parse_export_spec("pprof").is_err());
        assert!(parse_export_spec("svg:x").is_err());
        assert!(parse_export_spec("pprof@nope:x").is_err());
        assert!(parse_export_spec("pprof:").is_err());
    }
}
