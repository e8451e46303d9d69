//! `read`: what a profile file holds — perf.data, `perf script` text, callgrind out files,
//! proftrust's own sample and exact files (format sniffed from the content unless given) —
//! as a per-symbol or per-function summary ([`execute`]), or its samples as
//! perf-script-like text ([`script`]).

use crate::error::{bail, Context, Result};
use crate::load::source;
use crate::Events;
use proftrust_binary::{BinaryLocator, Kallsyms, LocateOptions, Symbolizer};
use proftrust_formats::callgrind::CallgrindProfile;
use proftrust_formats::{Format, LoadInfo, Loaded, Profile, SampleCounts};
use proftrust_model::{ExactProfile, Location, ModuleTable};
pub use proftrust_report::read::{
    ReadAddress, ReadBranch, ReadBranchCount, ReadBranchStack, ReadCallgrind, ReadCgEvent,
    ReadEvent, ReadExact, ReadFunction, ReadModule, ReadReport, ReadSamples, ReadSymbol,
};
use std::cell::Cell;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

/// Settings of [`execute`] and [`script`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ReadOptions {
    /// The profile file; `-` is standard input. Default `-`.
    pub file: PathBuf,
    /// Binaries of the profile (matched to modules by build-id, else file name). Default
    /// none (modules are looked up as perf does).
    pub binaries: Vec<PathBuf>,
    /// Look for each module at DIR/RECORDED_PATH first (perf's `--symfs`). Default none.
    pub symfs: Option<PathBuf>,
    /// A copy of `/proc/kallsyms` naming kernel samples. Default none.
    pub kallsyms: Option<PathBuf>,
    /// Read the file as this format instead of sniffing it. Default none.
    pub format: Option<Format>,
    /// Put each sample's branch stack in [`ReadSamples::branch_stacks`] (the aggregated
    /// branch table is always there). Default false: per-sample stacks of a few thousand
    /// samples are tens of megabytes of JSON.
    pub branch_stacks: bool,
}

impl Default for ReadOptions {
    fn default() -> Self {
        ReadOptions {
            file: PathBuf::from("-"),
            binaries: Vec::new(),
            symfs: None,
            kallsyms: None,
            format: None,
            branch_stacks: false,
        }
    }
}

/// Reads the file and summarises it. Binary lookup steps are details of `events`.
pub fn execute(o: &ReadOptions, events: &dyn Events) -> Result<ReadReport> {
    let lookup = Lookup::new(o)?;
    // A per-symbol table needs counts per address only: perf.data by the lean streaming
    // reader; other sample files are counted after reading.
    let loaded = lookup.load(o, true, events)?;
    let info = loaded.info;
    match loaded.profile {
        Profile::Samples(s) => Ok(ReadReport::Samples(samples(
            &lookup,
            &info,
            &SampleCounts::from_samples(&s),
            o.branch_stacks,
            events,
        ))),
        Profile::Counts(c) => Ok(ReadReport::Samples(samples(
            &lookup,
            &info,
            &c,
            o.branch_stacks,
            events,
        ))),
        Profile::Exact(e) => Ok(ReadReport::Exact(exact(&lookup, &info, &e, events))),
        Profile::Callgrind(p) => Ok(ReadReport::Callgrind(callgrind(&info, &p))),
        _ => bail!(
            "{}: this build cannot show {}",
            info.name,
            info.format.noun()
        ),
    }
}

/// Writes the file's samples to `out` as perf-script-like text (module-relative
/// addresses); returns the reader's and symbolizer's warnings.
pub fn script(
    o: &ReadOptions,
    out: &mut dyn std::io::Write,
    events: &dyn Events,
) -> Result<Vec<proftrust_model::Warning>> {
    let lookup = Lookup::new(o)?;
    let loaded = lookup.load(o, false, events)?;
    let info = loaded.info;
    let mut s = match loaded.profile {
        Profile::Samples(s) => s,
        Profile::Exact(_) => bail!(
            "{}: --script prints samples, and this is an exact profile",
            info.name
        ),
        Profile::Callgrind(_) => bail!(
            "{}: --script prints samples, and this is a callgrind profile",
            info.name
        ),
        _ => bail!(
            "{}: this build cannot show {}",
            info.name,
            info.format.noun()
        ),
    };
    // The comm column is each thread's name at the sample's time (the file's COMM records,
    // as perf script prints it). A file without names: the recorded program's file name,
    // not perf's own name that perf.data's command line starts with.
    if let Some(p) = crate::audit::recorded_program(&s, &s.command) {
        s.command = vec![p.clone()];
    }
    let symbolizer = lookup
        .symbolizer(&s.modules, events)
        .with_recorded_kernel_symbols(&s.kernel_symbols);
    let mut warnings: Vec<_> = info.warnings.iter().map(crate::warnings::input).collect();
    warnings.extend(crate::warnings::all_symbols(symbolizer.warnings()));
    // Names quoted as in every text output (a symbol cannot reach a terminal raw).
    proftrust_formats::write_perf_script(out, &s, |l| {
        proftrust_report::quote_name(&symbolizer.function_name(l)).into_owned()
    })
    .context("cannot write to standard output")?;
    Ok(warnings)
}

/// The binaries of the profile, found as perf finds them; each lookup step is reported
/// once as a detail.
struct Lookup {
    locator: BinaryLocator,
    kallsyms: Option<Arc<Kallsyms>>,
    traced: Cell<usize>,
}

impl Lookup {
    fn new(o: &ReadOptions) -> Result<Lookup> {
        let kallsyms = match &o.kallsyms {
            Some(p) => Some(Arc::new(Kallsyms::open(p)?)),
            None => None,
        };
        Ok(Lookup {
            locator: BinaryLocator::new(LocateOptions::new(&o.binaries, o.symfs.as_deref())),
            kallsyms,
            traced: Cell::new(0),
        })
    }

    fn load(&self, o: &ReadOptions, counts: bool, events: &dyn Events) -> Result<Loaded> {
        let mut opts = crate::load::options(&self.locator);
        opts.format = o.format;
        opts.sample_counts = counts;
        let loaded = proftrust_formats::load(source(&o.file), &opts);
        self.trace(events);
        Ok(loaded?)
    }

    fn symbolizer(&self, modules: &ModuleTable, events: &dyn Events) -> Symbolizer {
        let s = Symbolizer::with_locator(modules, &self.locator);
        self.trace(events);
        match &self.kallsyms {
            Some(k) => s.with_kallsyms(k.clone()),
            None => s,
        }
    }

    /// Reports the lookup steps not reported yet.
    fn trace(&self, events: &dyn Events) {
        let t = self.locator.trace();
        for line in t.iter().skip(self.traced.get()) {
            events.detail(&format!("binary lookup: {line}"));
        }
        self.traced.set(t.len());
    }
}

fn modules(m: &ModuleTable) -> Vec<ReadModule> {
    m.iter()
        .map(|(_, m)| ReadModule {
            path: m.path.clone(),
            build_id: m.build_id.as_ref().map(|b| b.to_hex()),
        })
        .collect()
}

/// The per-symbol table of per-address counts: each distinct address is named once, then
/// the counts are summed per (symbol, module).
fn samples(
    lookup: &Lookup,
    info: &LoadInfo,
    c: &SampleCounts,
    per_sample_branches: bool,
    events: &dyn Events,
) -> ReadSamples {
    let symbolizer = lookup
        .symbolizer(&c.modules, events)
        .with_recorded_kernel_symbols(&c.kernel_symbols);
    let mut warnings: Vec<_> = info.warnings.iter().map(crate::warnings::input).collect();
    warnings.extend(crate::warnings::all_symbols(symbolizer.warnings()));
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
    let table = |counts: &mut dyn Iterator<Item = (Location, u64)>| -> Vec<ReadSymbol> {
        let mut per_sym: HashMap<(&str, &str), u64> = HashMap::new();
        for (loc, n) in counts {
            let (name, module) = &names[&loc];
            *per_sym.entry((name.as_str(), module)).or_default() += n;
        }
        let mut symbols: Vec<ReadSymbol> = per_sym
            .into_iter()
            .map(|((name, module), samples)| ReadSymbol {
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
    let attribution = symbolizer.attribution_by_module(per_loc.iter().map(|(&l, &n)| (l, n)));
    let (branches, branch_stacks) =
        branch_tables(c, &symbolizer, &module_names, per_sample_branches);
    let several = c.events.len() > 1;
    let counts = c.per_event();
    ReadSamples {
        format: info.format.name().to_string(),
        file: info.name.clone(),
        events: c
            .events
            .iter()
            .zip(&counts)
            .enumerate()
            .map(|(i, (e, &n))| ReadEvent {
                name: e.name.clone(),
                kind: e.kind.perf_name(),
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
        modules: modules(&c.modules),
        symbols,
        branches,
        branch_samples: (!c.branch_stacks.is_empty()).then_some(c.branch_stacks.len() as u64),
        branch_stacks,
        attribution,
        outcome: c.outcome.clone(),
        warnings,
    }
}

/// The branch table (taken branches counted over all stacks, most frequent first; ties by
/// address) and, when `per_sample`, each sample's branch stack; every address named once.
fn branch_tables(
    c: &SampleCounts,
    symbolizer: &Symbolizer,
    module_names: &[&str],
    per_sample: bool,
) -> (Vec<ReadBranchCount>, Vec<ReadBranchStack>) {
    let mut named: HashMap<Location, ReadAddress> = HashMap::new();
    let mut address = |loc: Location| -> ReadAddress {
        named
            .entry(loc)
            .or_insert_with(|| ReadAddress {
                module: loc
                    .module
                    .and_then(|m| module_names.get(m.0 as usize))
                    .map(|m| m.to_string()),
                address: loc.svma.0,
                symbol: symbolizer.function_name(loc),
            })
            .clone()
    };
    let mut per_pair: HashMap<(Location, Location), (u64, u64)> = HashMap::new();
    let mut stacks = Vec::new();
    for st in &c.branch_stacks {
        for b in &st.branches {
            let e = per_pair.entry((b.from, b.to)).or_default();
            e.0 += 1;
            e.1 += u64::from(b.mispredicted);
        }
        if !per_sample {
            continue;
        }
        let mut branches = Vec::with_capacity(st.branches.len());
        for b in &st.branches {
            branches.push(ReadBranch {
                from: address(b.from),
                to: address(b.to),
                mispredicted: b.predicted_known.then_some(b.mispredicted),
                cycles: b.cycles,
            });
        }
        stacks.push(ReadBranchStack {
            sample: st.sample,
            event: c
                .events
                .get(usize::from(st.event))
                .map_or_else(|| "unknown".to_string(), |e| e.name.clone()),
            branches,
        });
    }
    let mut pairs: Vec<((Location, Location), (u64, u64))> = per_pair.into_iter().collect();
    let key = |l: &Location| (l.module.map(|m| m.0), l.svma.0);
    pairs.sort_by(|(a, x), (b, y)| {
        y.0.cmp(&x.0)
            .then_with(|| key(&a.0).cmp(&key(&b.0)))
            .then_with(|| key(&a.1).cmp(&key(&b.1)))
    });
    let table = pairs
        .into_iter()
        .map(|((from, to), (count, mispredicted))| ReadBranchCount {
            from: address(from),
            to: address(to),
            count,
            mispredicted,
        })
        .collect();
    (table, stacks)
}

fn callgrind(info: &LoadInfo, p: &CallgrindProfile) -> ReadCallgrind {
    let ir = p.event_index("Ir").unwrap_or(0);
    let totals = p.totals();
    let mut functions: Vec<ReadFunction> = p
        .function_totals()
        .into_iter()
        .map(|f| ReadFunction {
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
    ReadCallgrind {
        format: "callgrind".to_string(),
        file: info.name.clone(),
        creator: p.creator.clone(),
        command: p.command.clone(),
        parts: p.parts.len(),
        total_instructions: totals.get(ir).copied().unwrap_or(0),
        stated_totals: p.stated_totals(),
        events: p
            .events
            .iter()
            .zip(&totals)
            .map(|(n, &t)| ReadCgEvent {
                name: n.clone(),
                total: t,
            })
            .collect(),
        calls: p.calls.len(),
        jumps: p.jumps.len(),
        functions,
        warnings: info.warnings.iter().map(crate::warnings::input).collect(),
    }
}

fn exact(lookup: &Lookup, info: &LoadInfo, e: &ExactProfile, events: &dyn Events) -> ReadExact {
    let symbolizer = lookup.symbolizer(&e.modules, events);
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
    let mut functions: Vec<ReadFunction> = per
        .into_iter()
        .filter(|(_, n)| *n > 0)
        .map(|((name, module), n)| ReadFunction {
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
    ReadExact {
        format: "exact".to_string(),
        file: info.name.clone(),
        backend: e.backend.clone(),
        backend_detail: e.backend_detail.clone(),
        command: e.command.clone(),
        outcome: e.outcome.clone(),
        total_instructions: e.total_instructions,
        distinct_instructions: e.instructions.len(),
        edges: e.edges.len(),
        calls: e.calls.len(),
        modules: modules(&e.modules),
        functions,
        warnings: info
            .warnings
            .iter()
            .map(crate::warnings::input)
            .chain(crate::warnings::all_symbols(symbolizer.warnings()))
            .collect(),
    }
}
