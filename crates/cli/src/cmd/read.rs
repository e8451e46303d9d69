//! `proftrust read FILE [--binary PATH]... [--json] [--script]`: what a profile file holds.
//!
//! Reads perf.data, `perf script` text, callgrind out files and proftrust's own sample
//! (`PTSAMP01`) and exact (`PTEXACT1`) files; the format is sniffed from the first bytes
//! unless `--format` says.
//!
//! JSON contract (kept stable):
//!
//! * sample files (`format` = `perf.data`, `perf-script` or `samples`): `events` (each
//!   `name`, `samples`), `lost`, `samples` (all events), `symbols` (each `name`, `module`,
//!   `samples`, counted over all events, sorted by samples, largest first); with several
//!   events each event also has its own `symbols` table (the text output then prints one
//!   table per event, as `perf report` does);
//! * callgrind (`format` = `callgrind`): `total_instructions` (the `Ir` total),
//!   `functions` (each `name`, `instructions` = self Ir, sorted), `events` (each `name`,
//!   `total`);
//! * exact files (`format` = `exact`): `total_instructions`, `functions` (each `name`,
//!   `module`, `instructions`, sorted by instructions).

use crate::util;
use anyhow::{bail, Context};
use proftrust_binary::{Binary, Symbolizer};
use proftrust_formats::callgrind;
use proftrust_formats::segments::ElfSegmentsFromDisk;
use proftrust_formats::{native, sniff, Format};
use proftrust_formats::{
    FunctionSymbol, ObjectSymbols, PerfDataOptions, ReadNotes, SampleCounts, SymbolSource,
};
use proftrust_model::{ExactProfile, Location, SampleSet};
use proftrust_report::quote_name;
use serde::Serialize;
use std::cell::RefCell;
use std::collections::HashMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

/// Arguments of `proftrust read`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Profile file: perf.data, perf script text, callgrind.out, or a proftrust sample or
    /// exact file. `-` or nothing reads standard input.
    file: Option<PathBuf>,
    /// A binary of the profile (matched to modules by build-id, else file name); repeat for
    /// several. Modules are otherwise looked up at their recorded paths.
    #[arg(long = "binary", value_name = "PATH")]
    binaries: Vec<PathBuf>,
    /// Print JSON instead of text.
    #[arg(long, conflicts_with = "script")]
    json: bool,
    /// Print the samples as perf-script-like text (module-relative addresses).
    #[arg(long)]
    script: bool,
    /// Read the file as this format instead of guessing.
    #[arg(long, value_enum)]
    format: Option<FormatArg>,
    /// Rows of the text table (0 = all).
    #[arg(long, default_value_t = 30)]
    top: usize,
}

/// `--format` values.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum FormatArg {
    PerfData,
    PerfScript,
    Callgrind,
    Samples,
    Exact,
}

impl From<FormatArg> for Format {
    fn from(f: FormatArg) -> Format {
        match f {
            FormatArg::PerfData => Format::PerfData,
            FormatArg::PerfScript => Format::PerfScript,
            FormatArg::Callgrind => Format::Callgrind,
            FormatArg::Samples => Format::NativeSamples,
            FormatArg::Exact => Format::NativeExact,
        }
    }
}

/// Symbols of objects from disk (or the `--binary` of the same file name), for perf script
/// `sym+off` and callgrind bias inference.
struct DiskSymbols {
    extra: Vec<PathBuf>,
    cache: RefCell<HashMap<String, Option<ObjectSymbols>>>,
}

impl DiskSymbols {
    fn load(&self, path: &str) -> Option<ObjectSymbols> {
        let name = path.rsplit('/').next().unwrap_or(path);
        let candidate = self
            .extra
            .iter()
            .find(|p| p.file_name().and_then(|n| n.to_str()) == Some(name))
            .cloned()
            .or_else(|| {
                let p = PathBuf::from(path);
                (path.starts_with('/') && p.is_file()).then_some(p)
            })?;
        let b = Binary::open(&candidate).ok()?;
        Some(ObjectSymbols {
            build_id: b.build_id().cloned(),
            functions: b
                .functions()
                .iter()
                .map(|f| FunctionSymbol {
                    name: f.name.clone(),
                    start: f.start.0,
                    size: f.size,
                })
                .collect(),
        })
    }
}

impl SymbolSource for DiskSymbols {
    fn symbols(&self, path: &str) -> Option<ObjectSymbols> {
        if let Some(v) = self.cache.borrow().get(path) {
            return v.clone();
        }
        let v = self.load(path);
        self.cache.borrow_mut().insert(path.to_string(), v.clone());
        v
    }
}

#[derive(Serialize)]
struct JsonEvent {
    name: String,
    kind: String,
    samples: u64,
    /// This event's per-symbol table, when the file holds several events (the top-level
    /// `symbols` then sums all events).
    #[serde(skip_serializing_if = "Option::is_none")]
    symbols: Option<Vec<JsonSymbol>>,
}

#[derive(Serialize)]
struct JsonSymbol {
    name: String,
    module: String,
    samples: u64,
}

#[derive(Serialize)]
struct JsonModule {
    path: String,
    build_id: Option<String>,
}

#[derive(Serialize)]
struct SamplesReport {
    format: &'static str,
    file: String,
    events: Vec<JsonEvent>,
    lost: u64,
    samples: u64,
    modules: Vec<JsonModule>,
    symbols: Vec<JsonSymbol>,
    warnings: Vec<String>,
}

#[derive(Serialize)]
struct JsonFunction {
    name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    module: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    file: Option<String>,
    instructions: u64,
}

#[derive(Serialize)]
struct JsonCgEvent {
    name: String,
    total: u64,
}

#[derive(Serialize)]
struct CallgrindReport {
    format: &'static str,
    file: String,
    creator: Option<String>,
    command: Option<String>,
    parts: usize,
    total_instructions: u64,
    stated_totals: Option<Vec<u64>>,
    events: Vec<JsonCgEvent>,
    calls: usize,
    jumps: usize,
    functions: Vec<JsonFunction>,
}

#[derive(Serialize)]
struct ExactReport {
    format: &'static str,
    file: String,
    backend: String,
    backend_detail: String,
    command: Vec<String>,
    outcome: Option<proftrust_model::RunOutcome>,
    total_instructions: u64,
    distinct_instructions: usize,
    edges: usize,
    calls: usize,
    modules: Vec<JsonModule>,
    functions: Vec<JsonFunction>,
    warnings: Vec<String>,
}

mod sys;

fn read_input(file: Option<&Path>) -> anyhow::Result<(sys::FileBytes, String)> {
    match file {
        None => read_stdin(),
        Some(p) if p.as_os_str() == "-" => read_stdin(),
        Some(p) => {
            let b = std::fs::File::open(p)
                .and_then(sys::file_bytes)
                .with_context(|| format!("cannot read {}", p.display()))?;
            Ok((b, p.display().to_string()))
        }
    }
}

fn read_stdin() -> anyhow::Result<(sys::FileBytes, String)> {
    let mut b = Vec::new();
    std::io::stdin()
        .read_to_end(&mut b)
        .context("cannot read standard input")?;
    Ok((sys::FileBytes::Owned(b), "<stdin>".to_string()))
}

/// Runs `proftrust read`.
pub fn run(a: Args) -> anyhow::Result<()> {
    let (bytes, name) = read_input(a.file.as_deref())?;
    if bytes.is_empty() {
        bail!("{name}: the file is empty; expected perf.data, perf script text, a callgrind out file or a proftrust sample/exact file");
    }
    let format = match a.format {
        Some(f) => f.into(),
        None => sniff(&bytes[..bytes.len().min(8192)]).with_context(|| {
            format!("{name}: unknown file format; expected perf.data, perf script text, a callgrind out file or a proftrust sample/exact file (use --format to force one)")
        })?,
    };
    let syms = DiskSymbols {
        extra: a.binaries.clone(),
        cache: RefCell::new(HashMap::new()),
    };
    let text = || -> anyhow::Result<&str> {
        std::str::from_utf8(&bytes).with_context(|| format!("{name}: not UTF-8 text"))
    };
    match format {
        Format::PerfData if !a.script => {
            // Only counts per address are needed: the streaming reader.
            let (c, notes) = proftrust_formats::count_perf_data(
                &bytes,
                Path::new(&name),
                &PerfDataOptions::default(),
                &ElfSegmentsFromDisk::default(),
            )
            .with_context(|| name.clone())?;
            show_counts(&a, "perf.data", &name, &c, notes)
        }
        Format::PerfData => {
            let (s, notes) = proftrust_formats::read_perf_data_with(
                &bytes,
                Path::new(&name),
                &PerfDataOptions::default(),
                &ElfSegmentsFromDisk::default(),
            )
            .with_context(|| name.clone())?;
            show_samples(&a, "perf.data", &name, &s, notes)
        }
        Format::PerfScript => {
            let (s, notes) = proftrust_formats::read_perf_script(
                text()?,
                &syms,
                &ElfSegmentsFromDisk::default(),
            )
            .with_context(|| name.clone())?;
            show_samples(&a, "perf-script", &name, &s, notes)
        }
        Format::NativeSamples => {
            let s = native::read_samples(&bytes).with_context(|| name.clone())?;
            show_samples(&a, "samples", &name, &s, ReadNotes::default())
        }
        Format::NativeExact => {
            let e = native::read_exact(&bytes).with_context(|| name.clone())?;
            if a.script {
                bail!("{name}: --script prints samples, and this is an exact profile");
            }
            show_exact(&a, &name, &e)
        }
        Format::Callgrind => {
            let p = callgrind::parse(text()?).with_context(|| name.clone())?;
            if a.script {
                bail!("{name}: --script prints samples, and this is a callgrind profile");
            }
            show_callgrind(&a, &name, &p)
        }
        _ => bail!("{name}: this build cannot read {} files", format.name()),
    }
}

fn modules_json(m: &proftrust_model::ModuleTable) -> Vec<JsonModule> {
    m.iter()
        .map(|(_, m)| JsonModule {
            path: m.path.clone(),
            build_id: m.build_id.as_ref().map(|b| b.to_hex()),
        })
        .collect()
}

/// `--script` prints the samples; otherwise they are counted per address and shown as a
/// per-symbol table.
fn show_samples(
    a: &Args,
    format: &'static str,
    name: &str,
    s: &SampleSet,
    notes: ReadNotes,
) -> anyhow::Result<()> {
    if !a.script {
        return show_counts(a, format, name, &SampleCounts::from_samples(s), notes);
    }
    let symbolizer = Symbolizer::new(&s.modules, &a.binaries);
    let mut warnings = notes.warnings;
    warnings.extend(symbolizer.warnings());
    let stdout = std::io::stdout();
    proftrust_formats::write_perf_script(stdout.lock(), s, |l| {
        quote_name(&symbolizer.function_name(l)).into_owned()
    })
    .context("cannot write to standard output")?;
    for w in &warnings {
        util::note(format!("warning: {w}"));
    }
    Ok(())
}

/// The per-symbol table (text or JSON) of per-address counts: each distinct address is
/// named once, then the counts are summed per (symbol, module).
fn show_counts(
    a: &Args,
    format: &'static str,
    name: &str,
    c: &SampleCounts,
    notes: ReadNotes,
) -> anyhow::Result<()> {
    let symbolizer = Symbolizer::new(&c.modules, &a.binaries);
    let mut warnings = notes.warnings;
    warnings.extend(symbolizer.warnings());
    // The same address may appear once per event: name each address once.
    let mut per_loc: HashMap<Location, u64> = HashMap::with_capacity(c.counts.len());
    for x in &c.counts {
        *per_loc.entry(x.ip).or_default() += x.samples;
    }
    let module_names: Vec<&str> = c.modules.iter().map(|(_, m)| m.path.as_str()).collect();
    let names: HashMap<Location, (String, &str)> = per_loc
        .keys()
        .map(|&loc| {
            let module = loc
                .module
                .and_then(|m| module_names.get(m.0 as usize).copied())
                .unwrap_or("[unknown]");
            (loc, (symbolizer.function_name(loc), module))
        })
        .collect();
    let table = |counts: &mut dyn Iterator<Item = (Location, u64)>| -> Vec<JsonSymbol> {
        let mut per_sym: HashMap<(&str, &str), u64> = HashMap::new();
        for (loc, n) in counts {
            let (name, module) = &names[&loc];
            *per_sym.entry((name.as_str(), module)).or_default() += n;
        }
        let mut symbols: Vec<JsonSymbol> = per_sym
            .into_iter()
            .map(|((name, module), samples)| JsonSymbol {
                name: name.to_string(),
                module: module.to_string(),
                samples,
            })
            .collect();
        symbols.sort_by(|x, y| {
            y.samples
                .cmp(&x.samples)
                .then_with(|| x.name.cmp(&y.name))
                .then_with(|| x.module.cmp(&y.module))
        });
        symbols
    };
    let symbols = table(&mut per_loc.iter().map(|(&l, &n)| (l, n)));
    let several = c.events.len() > 1;
    let counts = c.per_event();
    let report = SamplesReport {
        format,
        file: name.to_string(),
        events: c
            .events
            .iter()
            .zip(&counts)
            .enumerate()
            .map(|(i, (e, &n))| JsonEvent {
                name: e.name.clone(),
                kind: format!("{:?}", e.kind),
                samples: n,
                symbols: several.then(|| {
                    table(
                        &mut c
                            .counts
                            .iter()
                            .filter(|x| x.event as usize == i)
                            .map(|x| (x.ip, x.samples)),
                    )
                }),
            })
            .collect(),
        lost: c.lost,
        samples: c.total(),
        modules: modules_json(&c.modules),
        symbols,
        warnings,
    };
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    if a.json {
        serde_json::to_writer_pretty(&mut out, &report).context("cannot write JSON")?;
        writeln!(out)?;
    } else {
        writeln!(
            out,
            "{}: {} ({} samples, {} lost)",
            quote_name(name),
            format,
            report.samples,
            report.lost
        )?;
        for e in &report.events {
            writeln!(
                out,
                "  event {} ({}): {} samples",
                e.name, e.kind, e.samples
            )?;
        }
        let n = if a.top == 0 { usize::MAX } else { a.top };
        let mut write_table = |title: Option<&str>, symbols: &[JsonSymbol], total: u64| {
            if let Some(t) = title {
                writeln!(out, "\n{t}")?;
            }
            writeln!(out, "{:>10} {:>7}  symbol (module)", "samples", "%")?;
            for x in symbols.iter().take(n) {
                writeln!(
                    out,
                    "{:>10} {:>6.2}%  {} ({})",
                    x.samples,
                    100.0 * x.samples as f64 / total.max(1) as f64,
                    quote_name(&x.name),
                    quote_name(&x.module)
                )?;
            }
            std::io::Result::Ok(())
        };
        if several {
            // One table per event, as `perf report` does: summing instruction and cycle
            // samples would mean nothing.
            for e in &report.events {
                if let Some(syms) = &e.symbols {
                    write_table(Some(&format!("event {}:", e.name)), syms, e.samples)?;
                }
            }
        } else {
            write_table(None, &report.symbols, report.samples)?;
        }
        for w in &report.warnings {
            util::note(format!("warning: {w}"));
        }
    }
    out.flush()?;
    Ok(())
}

fn show_callgrind(a: &Args, name: &str, p: &callgrind::CallgrindProfile) -> anyhow::Result<()> {
    let ir = p.event_index("Ir").unwrap_or(0);
    let totals = p.totals();
    let mut functions: Vec<JsonFunction> = p
        .function_totals()
        .into_iter()
        .map(|f| JsonFunction {
            name: f.name,
            module: f.object,
            file: f.file,
            instructions: f.costs.get(ir).copied().unwrap_or(0),
        })
        .collect();
    functions.sort_by(|x, y| {
        y.instructions
            .cmp(&x.instructions)
            .then_with(|| x.name.cmp(&y.name))
    });
    let report = CallgrindReport {
        format: "callgrind",
        file: name.to_string(),
        creator: p.creator.clone(),
        command: p.command.clone(),
        parts: p.parts.len(),
        total_instructions: totals.get(ir).copied().unwrap_or(0),
        stated_totals: p.stated_totals(),
        events: p
            .events
            .iter()
            .zip(&totals)
            .map(|(n, &t)| JsonCgEvent {
                name: n.clone(),
                total: t,
            })
            .collect(),
        calls: p.calls.len(),
        jumps: p.jumps.len(),
        functions,
    };
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    if a.json {
        serde_json::to_writer_pretty(&mut out, &report).context("cannot write JSON")?;
        writeln!(out)?;
    } else {
        writeln!(
            out,
            "{}: callgrind ({}), {} instructions, {} part(s), {} calls, {} jumps",
            quote_name(name),
            quote_name(report.creator.as_deref().unwrap_or("unknown creator")),
            report.total_instructions,
            report.parts,
            report.calls,
            report.jumps
        )?;
        for e in &report.events {
            writeln!(out, "  event {}: {}", e.name, e.total)?;
        }
        write_instruction_table(
            &mut out,
            &report.functions,
            report.total_instructions,
            a.top,
            "object",
        )?;
    }
    out.flush()?;
    Ok(())
}

fn show_exact(a: &Args, name: &str, e: &ExactProfile) -> anyhow::Result<()> {
    let symbolizer = Symbolizer::new(&e.modules, &a.binaries);
    let mut per: HashMap<(String, String), u64> = HashMap::new();
    for ic in &e.instructions {
        let module = ic
            .loc
            .module
            .and_then(|m| e.modules.get(m))
            .map_or_else(|| "[unknown]".to_string(), |m| m.path.clone());
        *per.entry((symbolizer.function_name(ic.loc), module))
            .or_default() += ic.count;
    }
    let mut functions: Vec<JsonFunction> = per
        .into_iter()
        .filter(|(_, n)| *n > 0)
        .map(|((name, module), n)| JsonFunction {
            name,
            module: Some(module),
            file: None,
            instructions: n,
        })
        .collect();
    functions.sort_by(|x, y| {
        y.instructions
            .cmp(&x.instructions)
            .then_with(|| x.name.cmp(&y.name))
    });
    let report = ExactReport {
        format: "exact",
        file: name.to_string(),
        backend: e.backend.clone(),
        backend_detail: e.backend_detail.clone(),
        command: e.command.clone(),
        outcome: e.outcome.clone(),
        total_instructions: e.total_instructions,
        distinct_instructions: e.instructions.len(),
        edges: e.edges.len(),
        calls: e.calls.len(),
        modules: modules_json(&e.modules),
        functions,
        warnings: symbolizer.warnings(),
    };
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    if a.json {
        serde_json::to_writer_pretty(&mut out, &report).context("cannot write JSON")?;
        writeln!(out)?;
    } else {
        writeln!(
            out,
            "{}: exact profile ({} {}), {} instructions, {} distinct, {} edges, {} call sites",
            quote_name(name),
            quote_name(&report.backend),
            quote_name(&report.backend_detail),
            report.total_instructions,
            report.distinct_instructions,
            report.edges,
            report.calls
        )?;
        write_instruction_table(
            &mut out,
            &report.functions,
            report.total_instructions,
            a.top,
            "module",
        )?;
        for w in &report.warnings {
            util::note(format!("warning: {w}"));
        }
    }
    out.flush()?;
    Ok(())
}

/// The per-function instruction table of callgrind and exact files: the `top` first
/// functions (all when 0) with their share of `total`; `place` names the module column.
fn write_instruction_table(
    out: &mut impl Write,
    functions: &[JsonFunction],
    total: u64,
    top: usize,
    place: &str,
) -> std::io::Result<()> {
    let total = total.max(1) as f64;
    let n = if top == 0 { usize::MAX } else { top };
    writeln!(out, "{:>14} {:>7}  function ({place})", "instructions", "%")?;
    for f in functions.iter().take(n) {
        writeln!(
            out,
            "{:>14} {:>6.2}%  {} ({})",
            f.instructions,
            100.0 * f.instructions as f64 / total,
            quote_name(&f.name),
            quote_name(f.module.as_deref().unwrap_or("?"))
        )?;
    }
    Ok(())
}
