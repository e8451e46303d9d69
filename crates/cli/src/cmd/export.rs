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
//! `audit` and `correct` take `--export FORMAT:FILE` (repeatable) through [`ExportSpec`]:
//! `correct` exports the corrected profile, `audit` the audited samples (the corrected
//! profile with `--correct-skid`); `FORMAT@SIDE:FILE` picks a side (`samples`, `exact`,
//! `corrected`). The diff formats and `annotate` always compare the samples with the
//! exact counts (and the corrected estimate).

use crate::util;
use anyhow::{bail, Context, Result};
use proftrust_binary::{Binary, Symbolizer};
use proftrust_export::{
    AnnotateInput, AnnotateOptions, CallSite, DiffOptions, FlameOptions, Origin, Profile, Resolver,
    SourceText, ValueType,
};
use proftrust_formats::segments::ElfSegmentsFromDisk;
use proftrust_formats::{callgrind, native, sniff, Format, PerfDataOptions};
use proftrust_formats::{FunctionSymbol, ObjectSymbols, SymbolSource};
use proftrust_model::{ExactProfile, Location, SampleSet};
use std::cell::RefCell;
use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Output formats of `export --to` and `--export FORMAT:FILE`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
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
    fn name(self) -> &'static str {
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

    fn parse(s: &str) -> Option<Target> {
        <Target as clap::ValueEnum>::value_variants()
            .iter()
            .copied()
            .find(|t| t.name() == s)
    }

    /// Formats that compare two profiles.
    fn compares(self) -> bool {
        matches!(
            self,
            Target::FoldedDiff | Target::FlamegraphDiff | Target::Annotate | Target::AnnotateHtml
        )
    }
}

/// Arguments of `proftrust export`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  proftrust export perf.data --to pprof -o prof.pb.gz && go tool pprof -top prof.pb.gz\n  proftrust export samples.ptsamp --to firefox -o prof.json\n  proftrust export exact.ptexact --to llvm-sample -o prog.prof --binary ./prog\n  proftrust export samples.ptsamp --to folded-diff --against exact.ptexact -o diff.folded\n  proftrust export samples.ptsamp --to annotate --against exact.ptexact -o annotate.txt"
)]
pub struct Args {
    /// Profile: perf.data, perf script text, callgrind out file, proftrust sample or exact
    /// file (`-` = standard input).
    profile: PathBuf,
    /// Output format.
    #[arg(long = "to", value_enum)]
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
}

/// A loaded profile: samples or exact counts.
pub(crate) enum Loaded {
    Samples(SampleSet),
    Exact(ExactProfile),
}

/// Function symbols of the objects a file names (perf script `sym+off`, callgrind load
/// biases), from `--binary` by file name or the recorded path; raw and demangled names.
struct DiskSymbols<'a> {
    extra: &'a [PathBuf],
    cache: RefCell<HashMap<String, Option<ObjectSymbols>>>,
}

impl SymbolSource for DiskSymbols<'_> {
    fn symbols(&self, path: &str) -> Option<ObjectSymbols> {
        if let Some(v) = self.cache.borrow().get(path) {
            return v.clone();
        }
        let name = path.rsplit('/').next().unwrap_or(path);
        let file = self
            .extra
            .iter()
            .find(|p| p.file_name().and_then(|n| n.to_str()) == Some(name))
            .cloned()
            .or_else(|| {
                let p = PathBuf::from(path);
                (path.starts_with('/') && p.is_file()).then_some(p)
            });
        let v = file
            .and_then(|f| Binary::open(&f).ok())
            .map(|b| ObjectSymbols {
                build_id: b.build_id().cloned(),
                functions: b
                    .functions()
                    .iter()
                    .flat_map(|f| {
                        let one = |name: &str| FunctionSymbol {
                            name: name.to_string(),
                            start: f.start.0,
                            size: f.size,
                        };
                        let mut v = vec![one(&f.raw_name)];
                        if f.name != f.raw_name {
                            v.push(one(&f.name));
                        }
                        v
                    })
                    .collect(),
            });
        self.cache.borrow_mut().insert(path.to_string(), v.clone());
        v
    }
}

/// Reads any profile `read` accepts.
pub(crate) fn load_profile(path: &Path, binaries: &[PathBuf]) -> Result<Loaded> {
    let (bytes, name) = if path.as_os_str() == "-" {
        let mut b = Vec::new();
        std::io::Read::read_to_end(&mut std::io::stdin(), &mut b)
            .context("cannot read standard input")?;
        (b, "<stdin>".to_string())
    } else {
        (
            std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?,
            path.display().to_string(),
        )
    };
    if bytes.is_empty() {
        bail!("{name}: the file is empty; expected perf.data, perf script text, a callgrind out file or a proftrust sample/exact file");
    }
    let format = sniff(&bytes[..bytes.len().min(8192)]).with_context(|| {
        format!("{name}: unknown file format; expected perf.data, perf script text, a callgrind out file or a proftrust sample/exact file")
    })?;
    let syms = DiskSymbols {
        extra: binaries,
        cache: RefCell::new(HashMap::new()),
    };
    let text = || -> Result<&str> {
        std::str::from_utf8(&bytes).with_context(|| format!("{name}: not UTF-8 text"))
    };
    let warn = |w: Vec<String>| {
        for x in w {
            util::note(format!("warning: {name}: {x}"));
        }
    };
    Ok(match format {
        Format::PerfData => {
            let (s, notes) = proftrust_formats::read_perf_data_with(
                &bytes,
                Path::new(&name),
                &PerfDataOptions::default(),
                &ElfSegmentsFromDisk::default(),
            )
            .with_context(|| name.clone())?;
            warn(notes.warnings);
            Loaded::Samples(s)
        }
        Format::PerfScript => {
            let (s, notes) = proftrust_formats::read_perf_script(
                text()?,
                &syms,
                &ElfSegmentsFromDisk::default(),
            )
            .with_context(|| name.clone())?;
            warn(notes.warnings);
            Loaded::Samples(s)
        }
        Format::NativeSamples => {
            Loaded::Samples(native::read_samples(&bytes).with_context(|| name.clone())?)
        }
        Format::NativeExact => {
            let mut e = native::read_exact(&bytes).with_context(|| name.clone())?;
            e.normalize();
            Loaded::Exact(e)
        }
        Format::Callgrind => {
            let p = callgrind::parse(text()?).with_context(|| name.clone())?;
            let mut e = p
                .to_exact(&callgrind::ExactOptions::default(), &syms)
                .with_context(|| {
                    format!("{name}: cannot turn the callgrind counts into an exact profile")
                })?;
            e.normalize();
            Loaded::Exact(e)
        }
        other => bail!("{name}: this build cannot read {} files", other.name()),
    })
}

/// One side of an export: the profile, its symbolizer, and (exact profiles) call counts.
pub(crate) struct Side {
    pub profile: Profile,
    pub symbolizer: Symbolizer,
    pub calls: Vec<CallSite>,
    /// The sample set's sampled event, for labels (`cpu-clock samples`).
    pub label: String,
}

impl Side {
    pub(crate) fn samples(set: &SampleSet, event: Option<u16>, binaries: &[PathBuf]) -> Side {
        let label = match event.or((set.events.len() == 1).then_some(0)) {
            Some(e) => format!(
                "{} samples",
                set.events.get(e as usize).map_or("?", |d| d.name.as_str())
            ),
            None => "samples".into(),
        };
        Side {
            profile: Profile::from_samples(set, event),
            symbolizer: Symbolizer::new(&set.modules, binaries),
            calls: Vec::new(),
            label,
        }
    }

    pub(crate) fn exact(e: &ExactProfile, binaries: &[PathBuf]) -> Side {
        Side {
            profile: Profile::from_exact(e),
            symbolizer: Symbolizer::new(&e.modules, binaries),
            calls: e
                .calls
                .iter()
                .map(|c| (c.site, c.target, c.count))
                .collect(),
            label: "exact instructions".into(),
        }
    }

    /// A corrected (estimated) profile: instruction estimates per location.
    pub(crate) fn corrected(
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

/// Source lines read from disk, each file once.
#[derive(Default)]
struct DiskSource(RefCell<HashMap<String, Option<Vec<String>>>>);

impl SourceText for DiskSource {
    fn line(&self, file: &str, line: u32) -> Option<String> {
        let mut c = self.0.borrow_mut();
        let lines = c.entry(file.to_string()).or_insert_with(|| {
            std::fs::read(file).ok().map(|b| {
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
pub(crate) struct Job<'a> {
    pub target: Target,
    pub main: &'a Side,
    /// The other side of diff formats; exact counts for annotate.
    pub against: Option<&'a Side>,
    /// The corrected profile for annotate.
    pub corrected: Option<&'a Side>,
    pub value: Option<&'a str>,
    pub functions: &'a [String],
    pub top: usize,
    pub normalize: bool,
}

/// Writes one export to `out` (atomically; `-` = standard output). Returns a one-line note.
pub(crate) fn write_export(job: &Job<'_>, out: &Path) -> Result<String> {
    let t = job.target;
    if matches!(t, Target::FoldedDiff | Target::FlamegraphDiff) && job.against.is_none() {
        bail!(
            "--to {} compares two profiles: give the second with --against FILE",
            t.name()
        );
    }
    let main = job.main;
    let r = main.resolver();
    let v = main.value(job.value)?;
    let mut note = String::new();
    let body = |w: &mut dyn Write| -> Result<()> {
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
                    util::note(format!(
                        "llvm-sample: {} counted addresses ({:.0} of the counts) have no source line and are left out",
                        s.unlined_addresses, s.unlined_count
                    ));
                }
            }
            Target::Annotate | Target::AnnotateHtml => {
                let ann = annotations(job, v)?;
                if t == Target::Annotate {
                    w.write_all(proftrust_report::render_annotation_text(&ann).as_bytes())?;
                } else {
                    w.write_all(
                        proftrust_report::render_annotation_html(
                            &format!("proftrust annotate: {}", main.profile.title),
                            &ann,
                        )
                        .as_bytes(),
                    )?;
                }
            }
        }
        Ok(())
    };
    if out.as_os_str() == "-" {
        let mut so = std::io::stdout().lock();
        body(&mut so)?;
        so.flush()?;
    } else {
        util::write_atomically(out, |w| body(w))?;
        note = format!("{} written to {}", t.name(), out.display());
    }
    Ok(note)
}

fn annotations(job: &Job<'_>, v: usize) -> Result<Vec<proftrust_report::Annotation>> {
    let main = job.main;
    if main.profile.origin != Origin::Sampled {
        bail!("annotate shows samples with their error bars: give a sample profile (and the exact counts with --against)");
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
    Ok(proftrust_export::annotate(
        &input,
        &r,
        &DiskSource::default(),
        &o,
    )?)
}

/// Runs `proftrust export`.
pub fn run(a: Args) -> Result<()> {
    let loaded = load_profile(&a.profile, &a.binaries)?;
    let main = match &loaded {
        Loaded::Samples(s) => {
            if s.samples.is_empty() {
                bail!("{}: the profile holds no samples", a.profile.display());
            }
            let ev =
                match &a.event {
                    Some(n) => Some(s.events.iter().position(|e| &e.name == n).with_context(
                        || {
                            format!(
                                "--event {n}: the profile has {}",
                                s.events
                                    .iter()
                                    .map(|e| e.name.as_str())
                                    .collect::<Vec<_>>()
                                    .join(", ")
                            )
                        },
                    )? as u16),
                    // pprof keeps every event; the others show one.
                    None if a.to == Target::Pprof || s.events.len() <= 1 => None,
                    None => Some(0),
                };
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
        Some(p) => Some(match load_profile(p, &a.binaries)? {
            Loaded::Samples(s) => Side::samples(&s, (s.events.len() > 1).then_some(0), &a.binaries),
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
    };
    let note = write_export(&job, &a.output)?;
    if !note.is_empty() {
        util::note(note);
    }
    Ok(())
}

/// One `--export FORMAT[@SIDE]:FILE` of `audit` and `correct`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportSpec {
    pub target: Target,
    /// `samples`, `exact`, `corrected`, or `None` (the command's default).
    pub side: Option<String>,
    pub file: PathBuf,
}

/// clap value parser of `--export`.
pub fn parse_export_spec(s: &str) -> std::result::Result<ExportSpec, String> {
    let formats = <Target as clap::ValueEnum>::value_variants()
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
pub(crate) struct Sides<'a> {
    pub samples: Option<&'a Side>,
    pub exact: Option<&'a Side>,
    pub corrected: Option<&'a Side>,
    /// The side single-profile formats export by default.
    pub default: &'a str,
}

/// Writes every `--export` of `audit` or `correct`.
pub(crate) fn run_exports(specs: &[ExportSpec], sides: &Sides<'_>) -> Result<()> {
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
                bail!(
                    "--export {}: this run has nothing to compare the samples with",
                    spec.target.name()
                );
            }
            Job {
                target: spec.target,
                main: before,
                against: after,
                corrected: sides.corrected.filter(|_| sides.exact.is_some()),
                value: None,
                functions: &[],
                top: 3,
                normalize: true,
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
            }
        };
        let note = write_export(&job, &spec.file)
            .with_context(|| format!("--export {}:{}", spec.target.name(), spec.file.display()))?;
        if !note.is_empty() {
            util::note(note);
        }
    }
    Ok(())
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
