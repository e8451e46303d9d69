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

use crate::profiles::{self, Lookup};
use crate::util;
use anyhow::{bail, Context};
use proftrust_formats::callgrind;
use proftrust_formats::{Format, LoadInfo, Profile, SampleCounts};
use proftrust_model::{ExactProfile, Location, SampleSet};
use serde::Serialize;
use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;

/// Arguments of `proftrust read`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Profile file: perf.data, perf script text, callgrind.out, or a proftrust sample or
    /// exact file. `-` or nothing reads standard input.
    file: Option<PathBuf>,
    /// A binary of the profile (matched to modules by build-id, else file name); repeat for
    /// several. Modules are otherwise looked up as perf does (see --symfs; `-v` shows each
    /// step).
    #[arg(long = "binary", value_name = "PATH")]
    binaries: Vec<PathBuf>,
    /// Look for each module at DIR/RECORDED_PATH first (perf's --symfs), then in perf's
    /// build-id cache, the debuginfod cache, /usr/lib/debug/.build-id, the recorded path.
    #[arg(long, value_name = "DIR")]
    symfs: Option<PathBuf>,
    /// Name kernel samples from this copy of /proc/kallsyms (taken on the recording machine,
    /// as root).
    #[arg(long, value_name = "FILE")]
    kallsyms: Option<PathBuf>,
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

/// Runs `proftrust read`.
pub fn run(a: Args) -> anyhow::Result<()> {
    let lookup =
        Lookup::new(&a.binaries, a.symfs.as_deref()).with_kallsyms(a.kallsyms.as_deref())?;
    let path = a.file.clone().unwrap_or_else(|| PathBuf::from("-"));
    let mut opts = lookup.options();
    opts.format = a.format.map(Format::from);
    // A per-symbol table needs counts per address only: perf.data by the lean streaming
    // reader; other sample files are counted after reading.
    opts.sample_counts = !a.script;
    let loaded = proftrust_formats::load(profiles::source(&path), &opts);
    lookup.print_trace();
    let loaded = loaded?;
    let info = loaded.info;
    match loaded.profile {
        Profile::Samples(s) => show_samples(&a, &lookup, &info, &s),
        Profile::Counts(c) => show_counts(&a, &lookup, &info, &c),
        Profile::Exact(e) => {
            if a.script {
                bail!(
                    "{}: --script prints samples, and this is an exact profile",
                    info.name
                );
            }
            show_exact(&a, &lookup, &info, &e)
        }
        Profile::Callgrind(p) => {
            if a.script {
                bail!(
                    "{}: --script prints samples, and this is a callgrind profile",
                    info.name
                );
            }
            show_callgrind(&a, &info, &p)
        }
        _ => bail!(
            "{}: this build cannot show {}",
            info.name,
            info.format.noun()
        ),
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
fn show_samples(a: &Args, lookup: &Lookup, info: &LoadInfo, s: &SampleSet) -> anyhow::Result<()> {
    if !a.script {
        return show_counts(a, lookup, info, &SampleCounts::from_samples(s));
    }
    let symbolizer = lookup.symbolizer(&s.modules);
    let mut warnings = info.warnings.clone();
    warnings.extend(symbolizer.warnings());
    let stdout = std::io::stdout();
    proftrust_formats::write_perf_script(stdout.lock(), s, |l| symbolizer.function_name(l))
        .context("cannot write to standard output")?;
    for w in &warnings {
        util::note(format!("warning: {w}"));
    }
    Ok(())
}

/// The per-symbol table (text or JSON) of per-address counts: each distinct address is
/// named once, then the counts are summed per (symbol, module).
fn show_counts(a: &Args, lookup: &Lookup, info: &LoadInfo, c: &SampleCounts) -> anyhow::Result<()> {
    let (format, name) = (info.format.name(), info.name.as_str());
    let symbolizer = lookup.symbolizer(&c.modules);
    let mut warnings = info.warnings.clone();
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
            name, format, report.samples, report.lost
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
                    x.name,
                    x.module
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

fn show_callgrind(
    a: &Args,
    info: &LoadInfo,
    p: &callgrind::CallgrindProfile,
) -> anyhow::Result<()> {
    let name = info.name.as_str();
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
            name,
            report.creator.as_deref().unwrap_or("unknown creator"),
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

fn show_exact(a: &Args, lookup: &Lookup, info: &LoadInfo, e: &ExactProfile) -> anyhow::Result<()> {
    let name = info.name.as_str();
    let symbolizer = lookup.symbolizer(&e.modules);
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
        warnings: info
            .warnings
            .iter()
            .cloned()
            .chain(symbolizer.warnings())
            .collect(),
    };
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    if a.json {
        serde_json::to_writer_pretty(&mut out, &report).context("cannot write JSON")?;
        writeln!(out)?;
    } else {
        writeln!(
            out,
            "{}: exact profile ({} {}), {} instructions, {} distinct, {} edges, {} call sites",
            name,
            report.backend,
            report.backend_detail,
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
            f.name,
            f.module.as_deref().unwrap_or("?")
        )?;
    }
    Ok(())
}
