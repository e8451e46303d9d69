//! `check`: how far to trust one profile when the run cannot be repeated.
//!
//! No truth run: everything comes from the samples themselves and the binary's code, with
//! the sampling theory of the seeds; the statistics are `proftrust_check`'s, this module
//! reads the inputs and runs them in order ([`execute`]):
//!
//! 1. `load`: the recordings (one, or several of the same program and input, merged), the
//!    checked event;
//! 2. `key_samples`: each sampled address's function, inline function, line and the
//!    attribution behind them (symbol or recovered range, debug information);
//! 3. `count_levels`: counts per level and time slice, and per recording;
//! 4. `find`: running states, aliasing (recurrence, phase lock), the code's skid shadow
//!    and locked blocks;
//! 5. `build_rows`: rows with intervals and verdicts, granularity and skid flags;
//! 6. `run_intervals`: the intervals for another run;
//! 7. `health`: lost samples, throttling, multiplexing, samples without a function per
//!    module, missing debug information, how the program ended;
//! 8. the target advice, the finest trustworthy level and the profile's verdict.
//!
//! ```no_run
//! use proftrust_pipeline::check::{execute, CheckOptions};
//!
//! let mut o = CheckOptions::default();
//! o.profiles = vec!["perf.data".into()];
//! o.binaries = vec!["./prog".into()];
//! let r = execute(&o, &proftrust_pipeline::Silent)?;
//! println!("{:?}: {}", r.verdict, r.reason);
//! # Ok::<(), proftrust_pipeline::Error>(())
//! ```

use crate::error::{bail, bail_options, Context, Result};
use crate::{load, Events};
use proftrust_binary::Symbolizer;
use proftrust_check::aliasing;
use proftrust_check::code::{self, CodeFindings, SampledLocation};
pub use proftrust_check::rows::IntervalChoice;
use proftrust_check::rows::{attribution_of, rows, Level, Names, RowRules};
use proftrust_check::runs;
use proftrust_check::verdict::{profile_verdict, trustworthy_at, CodeLevel, EventPrecision};
use proftrust_check::warn;
use proftrust_metrics::resolution::{samples_factor, smallest_detectable_share};
use proftrust_model::{
    EventKind, Location, Module, ModuleTable, PeriodMode, RecordingHealth, Sample, SampleSet,
    Warning, WarningKind,
};
pub use proftrust_report::check::{
    AliasingCheck, Attribution, CheckEvent, CheckHealth, CheckReport, CheckRow, Granularity,
    ModuleAttribution, PhaseLock, RunInterval, TargetAdvice, Verdict,
};
use proftrust_sim::granularity::{running_states, RunningStates};
use rustc_hash::FxHashMap;
use std::path::PathBuf;

/// Settings of [`execute`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct CheckOptions {
    /// The profiles: perf.data, `perf script` text, proftrust sample files (`record`'s
    /// output). One, or several recordings of the same program and input (checked together:
    /// their samples merged, the spread between them giving the intervals for another run).
    /// Default none (an error: give one).
    pub profiles: Vec<PathBuf>,
    /// The program's binaries (matched to the profile's modules by build-id, else file
    /// name), on top of perf's places. Default none.
    pub binaries: Vec<PathBuf>,
    /// perf's `--symfs`. Default none.
    pub symfs: Option<PathBuf>,
    /// Which event to check, by name. Default: the first event of the (first) file that has
    /// samples.
    pub event: Option<String>,
    /// Confidence level of every interval and test. Default 0.95.
    pub confidence: f64,
    /// Time slices of the batch-means intervals. Default 20.
    pub slices: usize,
    /// Rows the advice and the profile verdict look at (the top k). Default 10.
    pub top: usize,
    /// `--target`: wanted half-width of the top rows' intervals, as a share (0.01 = ±1%).
    /// Default none.
    pub target: Option<f64>,
    /// A row is acted on when its interval's half-width is at most this fraction of its
    /// share. Default 0.2 (±20%, about 100 samples).
    pub act_precision: f64,
    /// Beyond this relative half-width a row is noise. Default 0.5 (±50%, about 16
    /// samples).
    pub noise_precision: f64,
    /// Functions seen in fewer running states than this are flagged. Default 5.
    pub min_states: u64,
    /// Which interval is stated (`ci_low`, `ci_high`) and judged. Default
    /// [`IntervalChoice::Wilson`].
    pub interval: IntervalChoice,
}

impl Default for CheckOptions {
    fn default() -> Self {
        CheckOptions {
            profiles: Vec::new(),
            binaries: Vec::new(),
            symfs: None,
            event: None,
            confidence: 0.95,
            slices: 20,
            top: 10,
            target: None,
            act_precision: 0.2,
            noise_precision: 0.5,
            min_states: 5,
            interval: IntervalChoice::Wilson,
        }
    }
}

/// Runs the check.
pub fn execute(o: &CheckOptions, events: &dyn Events) -> Result<CheckReport> {
    validate(o)?;
    let locator = load::locator(&o.binaries, o.symfs.as_deref());
    let loaded = load(o, &locator, events)?;
    let samples = loaded.samples();
    let n = samples.len() as u64;
    // Kernel samples named also from the kallsyms `proftrust record --kernel` stored.
    let sym = Symbolizer::with_locator(&loaded.set.modules, &locator)
        .with_recorded_kernel_symbols(&loaded.set.kernel_symbols);
    for w in sym.warnings() {
        events.detail(&w);
    }
    let pb = events.task(Some(n), "checking");
    let keys = key_samples(&sym, &samples);
    pb.inc(n / 2);
    let counts = count_levels(&keys, &loaded, o.slices);
    let code = code::code_findings(&sym, &keys.sampled_locations(), keys.functions.names(), 300);
    let found = find(&loaded, &samples, &keys, &code);
    let mut warnings: Vec<Warning> = loaded
        .notes
        .iter()
        .cloned()
        .map(warn::reader_note)
        .collect();
    warnings.extend(found.warnings.iter().cloned());
    let mut notes = code_notes(&code);
    if keys.lines.is_empty() {
        notes.push("no source lines: the binaries have no DWARF line information (build with -g, or give the debug file with --binary)".into());
    }
    let rules = RowRules {
        n,
        confidence: o.confidence,
        interval: o.interval,
        act_precision: o.act_precision,
        noise_precision: o.noise_precision,
        aliased: found.aliased,
    };
    let mut tables = build_rows(o, &rules, &keys, &counts, &code, &found, &mut warnings);
    let run_interval = run_intervals(&mut tables.functions, &keys, &counts, &found, &rules);
    let health = health(&loaded, &samples, &keys, &sym, &mut warnings);
    clustering(o, &tables.functions, counts.slices, &mut warnings);
    hardware_time(
        &loaded,
        &sym,
        &mut tables.functions,
        o,
        rules.noise_floor(),
        &mut warnings,
        &mut notes,
    );
    let (trustworthy_at, verdict, reason) =
        judge(o, &rules, &loaded.event, &tables, &found, &code, &warnings);
    pb.finish();
    Ok(CheckReport {
        profile: loaded.profiles[0].clone(),
        recordings: if loaded.profiles.len() > 1 {
            loaded.profiles.clone()
        } else {
            Vec::new()
        },
        verdict,
        reason,
        samples: n,
        event: check_event(&loaded.event),
        confidence: o.confidence,
        slices: counts.slices,
        smallest_share: smallest_detectable_share(n, o.confidence),
        trustworthy_at,
        run_interval,
        target: o
            .target
            .map(|t| target_advice(&tables.functions, o.top, n, t)),
        functions: tables.functions,
        inlines: tables.inlines,
        lines: tables.lines,
        blocks: tables.blocks,
        aliasing: found.recurrence,
        phase_lock: found.phase,
        health,
        warnings,
        notes,
    })
}

/// The finest level the profile can be trusted at, and its verdict with the reason.
fn judge(
    o: &CheckOptions,
    rules: &RowRules,
    desc: &proftrust_model::EventDesc,
    tables: &Tables,
    found: &Found,
    code: &CodeFindings,
    warnings: &[Warning],
) -> (Granularity, Verdict, String) {
    let trust = trustworthy_at(
        &tables.functions,
        &tables.inlines,
        &tables.lines,
        &tables.blocks,
        &found.code_level(code.functions),
        &EventPrecision {
            hardware: desc.kind.is_hardware(),
            precise: desc.config.precise,
            virtual_pmu: desc.name.contains("vpmu"),
        },
    );
    let (verdict, reason) = profile_verdict(
        &tables.functions,
        warnings,
        found.aliased,
        o.top,
        rules.act_floor(),
    );
    (trust, verdict, reason)
}

/// The options' own checks, before anything is read.
fn validate(o: &CheckOptions) -> Result<()> {
    if !(o.confidence > 0.5 && o.confidence < 1.0) {
        bail_options!(
            "the confidence level must be between 0.5 and 1 (got {})",
            o.confidence
        );
    }
    if o.slices < 2 {
        bail_options!("--slices must be at least 2 (got {})", o.slices);
    }
    if let Some(t) = o.target {
        if !(t > 0.0 && t < 1.0) {
            bail_options!("--target must be a share between 0 and 100% (got {t})");
        }
    }
    if o.profiles.is_empty() || o.profiles.iter().any(|p| p.as_os_str().is_empty()) {
        bail_options!(
            "give the profile to check (perf.data, perf script text or a proftrust sample file)"
        );
    }
    if o.profiles.iter().filter(|p| p.as_os_str() == "-").count() > 1 {
        bail_options!("standard input (-) can be given once only");
    }
    for p in &o.profiles {
        if p.as_os_str() != "-" && !p.exists() {
            bail!("cannot open the profile {}: no such file", p.display());
        }
    }
    Ok(())
}

/// Forwards notes to the caller and keeps them for the report.
struct Collect<'a> {
    inner: &'a dyn Events,
    notes: std::sync::Mutex<Vec<String>>,
}

impl Events for Collect<'_> {
    fn note(&self, msg: &str) {
        self.inner.note(msg);
        if let Ok(mut v) = self.notes.lock() {
            v.push(msg.to_string());
        }
    }
    fn detail(&self, msg: &str) {
        self.inner.detail(msg);
    }
    fn task(&self, len: Option<u64>, what: &str) -> Box<dyn crate::Task + '_> {
        self.inner.task(len, what)
    }
}

/// The recordings, merged: the checked event's samples of every recording, one after the
/// other.
struct Loaded {
    /// The one recording, or the recordings merged: only the checked event's samples, in
    /// recording order; threads of different recordings have different ids, and each
    /// recording's time stamps follow the previous one's.
    set: SampleSet,
    /// The checked event's index in `set`.
    event_idx: u16,
    /// The checked event.
    event: proftrust_model::EventDesc,
    /// The profiles as given.
    profiles: Vec<String>,
    /// Where each recording's samples end among the checked event's (exclusive).
    ends: Vec<usize>,
    /// The readers' warnings.
    notes: Vec<String>,
}

/// Reads every profile, picks the event, merges the recordings.
fn load(
    o: &CheckOptions,
    locator: &proftrust_binary::BinaryLocator,
    events: &dyn Events,
) -> Result<Loaded> {
    let reader = Collect {
        inner: events,
        notes: std::sync::Mutex::new(Vec::new()),
    };
    let mut sets: Vec<SampleSet> = Vec::with_capacity(o.profiles.len());
    for p in &o.profiles {
        sets.push(load::samples_with(p, locator, &reader)?);
    }
    let notes = reader.notes.into_inner().unwrap_or_default();
    let first = &sets[0];
    let name = match &o.event {
        Some(w) => {
            let e = first
                .event_named(w)
                .context(o.profiles[0].display().to_string())?;
            first.events[e as usize].name.clone()
        }
        None => default_event(first)?,
    };
    let mut picked = Vec::with_capacity(sets.len());
    let mut counts = Vec::with_capacity(sets.len());
    for (set, p) in sets.iter().zip(&o.profiles) {
        let e = set.event_named(&name).context(format!(
            "{} (recordings are checked together by event name)",
            p.display()
        ))?;
        let k = set.count_for_event(e);
        if k == 0 {
            bail!(
                "{} holds no samples of {name}: nothing to check (was the program too short for the period?)",
                p.display()
            );
        }
        picked.push(e);
        counts.push(k as usize);
    }
    let event = first.events[picked[0] as usize].clone();
    let profiles: Vec<String> = o.profiles.iter().map(|p| p.display().to_string()).collect();
    let (set, event_idx, ends) = if sets.len() == 1 {
        (sets.remove(0), picked[0], counts)
    } else {
        let (set, ends) = merge(sets, &picked, &event);
        (set, 0, ends)
    };
    Ok(Loaded {
        set,
        event_idx,
        event,
        profiles,
        ends,
        notes,
    })
}

/// The first event with samples (a file can name events it has no sample of: perf's
/// `cpu_atom` on a hybrid CPU that ran nothing there).
fn default_event(set: &SampleSet) -> Result<String> {
    if set.events.is_empty() {
        bail!("the profile names no event: nothing to check");
    }
    let e = set.default_event().unwrap_or(0);
    Ok(set.events[usize::from(e)].name.clone())
}

/// One sample set of the checked event out of several recordings: modules interned (the
/// same binary keeps one index), each recording's threads renumbered apart, each recording's
/// time stamps shifted after the previous one's, health summed. Returns the set and where each
/// recording's samples end.
fn merge(
    sets: Vec<SampleSet>,
    picked: &[u16],
    event: &proftrust_model::EventDesc,
) -> (SampleSet, Vec<usize>) {
    let mut out = SampleSet {
        events: vec![event.clone()],
        ..Default::default()
    };
    let mut ends = Vec::with_capacity(sets.len());
    let mut tids: FxHashMap<(usize, u32), u32> = FxHashMap::default();
    let mut clock = 0u64;
    for (r, (set, &e)) in sets.into_iter().zip(picked).enumerate() {
        let remap: Vec<proftrust_model::ModuleIdx> = set
            .modules
            .iter()
            .map(|(_, m)| out.modules.intern(m.clone()))
            .collect();
        let first_time = set
            .samples
            .iter()
            .filter(|s| s.event == e && s.time > 0)
            .map(|s| s.time)
            .min()
            .unwrap_or(0);
        let shift = if r == 0 {
            0
        } else {
            clock.saturating_sub(first_time) + 1
        };
        for mut s in set.samples.into_iter().filter(|s| s.event == e) {
            s.event = 0;
            s.ip.module = s.ip.module.map(|m| remap[m.0 as usize]);
            for f in &mut s.callchain {
                f.module = f.module.map(|m| remap[m.0 as usize]);
            }
            let next = tids.len() as u32 + 1;
            s.tid = *tids.entry((r, s.tid)).or_insert(next);
            if s.time > 0 {
                s.time = s.time.saturating_add(shift);
                clock = clock.max(s.time);
            }
            out.samples.push(s);
        }
        ends.push(out.samples.len());
        out.lost += set.lost;
        // The first recording's outcome, unless a later one ended abnormally.
        let normal = |o: &Option<proftrust_model::RunOutcome>| {
            matches!(
                o,
                None | Some(proftrust_model::RunOutcome::Exited { code: 0 })
            )
        };
        if r == 0 || (normal(&out.outcome) && !normal(&set.outcome)) {
            out.outcome = set.outcome;
        }
        merge_health(&mut out.health, &set.health, e);
        if out.command.is_empty() {
            out.command = set.command;
        }
    }
    (out, ends)
}

fn merge_health(into: &mut RecordingHealth, h: &RecordingHealth, event: u16) {
    into.throttles += h.throttles;
    into.unthrottles += h.unthrottles;
    into.throttled_ns += h.throttled_ns;
    for t in h.event_times.iter().filter(|t| t.event == event) {
        match into.event_times.first_mut() {
            Some(x) => {
                x.enabled_ns += t.enabled_ns;
                x.running_ns += t.running_ns;
            }
            None => into
                .event_times
                .push(proftrust_model::EventTimes { event: 0, ..*t }),
        }
    }
}

/// What one sampled address is, at every level, and what it is attributed with.
#[derive(Debug, Clone, Copy)]
struct LocKeys {
    function: u32,
    inline: u32,
    line: Option<u32>,
    attribution: Attribution,
}

/// Every sample keyed: names per level and each distinct address's keys.
struct Keys {
    functions: Names,
    inlines: Names,
    lines: Names,
    /// Each distinct sampled address, with its keys and samples.
    locs: Vec<(Location, LocKeys, u64)>,
    /// Per sample, its address's index in `locs`.
    per_sample: Vec<u32>,
}

impl Loaded {
    /// The checked event's samples, in order.
    fn samples(&self) -> Vec<&Sample> {
        self.set
            .samples
            .iter()
            .filter(|s| s.event == self.event_idx)
            .collect()
    }
}

impl Keys {
    fn sampled_locations(&self) -> Vec<SampledLocation> {
        self.locs
            .iter()
            .map(|&(location, k, samples)| SampledLocation {
                location,
                samples,
                function: k.function,
            })
            .collect()
    }
    fn key(&self, sample: usize) -> &LocKeys {
        &self.locs[self.per_sample[sample] as usize].1
    }
    fn function_of_samples(&self) -> Vec<u32> {
        self.per_sample
            .iter()
            .map(|&l| self.locs[l as usize].1.function)
            .collect()
    }
}

/// Keys every sample: one symbolisation per distinct address.
fn key_samples(sym: &Symbolizer, samples: &[&Sample]) -> Keys {
    let mut k = Keys {
        functions: Names::default(),
        inlines: Names::default(),
        lines: Names::default(),
        locs: Vec::new(),
        per_sample: Vec::with_capacity(samples.len()),
    };
    let mut ids: FxHashMap<Location, u32> = FxHashMap::default();
    for s in samples {
        let id = *ids.entry(s.ip).or_insert_with(|| {
            let keys = keys_of(sym, s.ip, &mut k.functions, &mut k.inlines, &mut k.lines);
            k.locs.push((s.ip, keys, 0));
            (k.locs.len() - 1) as u32
        });
        k.locs[id as usize].2 += 1;
        k.per_sample.push(id);
    }
    k
}

/// A module's name as a row: `[libc.so.6]`, `[vdso]` (bracketed once).
fn module_row(m: &Module) -> String {
    let f = m.file_name();
    if f.starts_with('[') && f.ends_with(']') {
        f.to_string()
    } else {
        format!("[{f}]")
    }
}

fn keys_of(
    sym: &Symbolizer,
    ip: Location,
    fnames: &mut Names,
    inames: &mut Names,
    lnames: &mut Names,
) -> LocKeys {
    let func = sym.function(ip);
    let fname = sym.function_name(ip);
    let symbolized = func.is_some() || !(fname.contains("+0x") || fname == "[unknown]");
    // Code without a function is grouped per module (`libc.so.6+0x...` would make every
    // address its own function).
    let fname = if symbolized {
        fname
    } else {
        match ip.module.and_then(|m| sym.modules().get(m)) {
            Some(m) => module_row(m),
            None => "[unknown]".to_string(),
        }
    };
    let frames = if func.is_some() {
        sym.frames(ip)
    } else {
        Vec::new()
    };
    let inner = frames.first();
    // The innermost frame, named with the function it is inlined in (the function table's
    // name): `__rdtsc (inlined in b)`; not inlined, the function's own row name.
    let iname = match inner {
        Some(f) if frames.len() > 1 => format!("{} (inlined in {fname})", f.function),
        _ => fname.clone(),
    };
    let line = inner.and_then(|f| match (&f.file, f.line) {
        (Some(file), Some(line)) if line > 0 => {
            let short = file.rsplit('/').next().unwrap_or(file);
            Some(lnames.id(format!("{short}:{line}")))
        }
        _ => None,
    });
    let attribution = if !symbolized {
        Attribution::Module
    } else if line.is_some() {
        Attribution::Line
    } else {
        Attribution::Function
    };
    LocKeys {
        function: fnames.id(fname),
        inline: inames.id(iname),
        line,
        attribution,
    }
}

/// Counts per level and time slice, per recording, and the attribution per key.
struct Counts {
    slices: usize,
    sizes: Vec<u64>,
    functions: Vec<Vec<u64>>,
    inlines: Vec<Vec<u64>>,
    lines: Vec<Vec<u64>>,
    /// Per level (functions, inline functions, lines), per key: the attribution its samples
    /// have ([`attribution_of`]).
    attribution: [Vec<Attribution>; 3],
    /// Per recording: per function its samples, and the recording's total.
    by_recording: Vec<(Vec<u64>, u64)>,
}

fn count_levels(keys: &Keys, loaded: &Loaded, slices: usize) -> Counts {
    let n = keys.per_sample.len();
    let b = slices.min(n).max(1);
    let slice_of = |i: usize| i * b / n;
    let mut sizes = vec![0u64; b];
    for i in 0..n {
        sizes[slice_of(i)] += 1;
    }
    let per_level = |nkeys: usize, key: &dyn Fn(&LocKeys) -> Option<u32>| {
        let mut c = vec![vec![0u64; b]; nkeys];
        for (i, &l) in keys.per_sample.iter().enumerate() {
            if let Some(k) = key(&keys.locs[l as usize].1) {
                c[k as usize][slice_of(i)] += 1;
            }
        }
        // What each key's samples are attributed with, from its addresses.
        let mut facts = vec![(0u64, 0u64, 0u64); nkeys];
        for (_, lk, count) in &keys.locs {
            if let Some(k) = key(lk) {
                let f = &mut facts[k as usize];
                f.0 += count;
                f.1 += count * u64::from(lk.attribution >= Attribution::Function);
                f.2 += count * u64::from(lk.attribution >= Attribution::Line);
            }
        }
        let attr = facts
            .iter()
            .map(|&(s, f, l)| attribution_of(s, f, l))
            .collect::<Vec<_>>();
        (c, attr)
    };
    let (functions, fa) = per_level(keys.functions.len(), &|k| Some(k.function));
    let (inlines, ia) = per_level(keys.inlines.len(), &|k| Some(k.inline));
    let (lines, la) = per_level(keys.lines.len(), &|k| k.line);
    let by_recording = if loaded.ends.len() == 1 {
        vec![(functions.iter().map(|c| c.iter().sum()).collect(), n as u64)]
    } else {
        per_recording(keys, &loaded.ends)
    };
    Counts {
        slices: b,
        sizes,
        functions,
        inlines,
        lines,
        attribution: [fa, ia, la],
        by_recording,
    }
}

/// Per recording (ending at `ends`), per function its samples, and the recording's total.
fn per_recording(keys: &Keys, ends: &[usize]) -> Vec<(Vec<u64>, u64)> {
    let mut out = Vec::with_capacity(ends.len());
    let mut start = 0;
    for &end in ends {
        let mut c = vec![0u64; keys.functions.len()];
        for i in start..end {
            c[keys.key(i).function as usize] += 1;
        }
        out.push((c, (end - start) as u64));
        start = end;
    }
    out
}

/// Per block, counts per slice (the blocks come from the code findings).
fn block_counts(keys: &Keys, code: &CodeFindings, counts: &Counts) -> Vec<Vec<u64>> {
    let n = keys.per_sample.len();
    let b = counts.slices;
    let mut c = vec![vec![0u64; b]; code.blocks.len()];
    for (i, &l) in keys.per_sample.iter().enumerate() {
        if let Some(&bid) = code.block_of.get(&l) {
            c[bid as usize][i * b / n] += 1;
        }
    }
    c
}

/// Findings of the samples and the code, with their warnings.
struct Found {
    states: Vec<RunningStates>,
    recurrence: Option<AliasingCheck>,
    phase: Option<PhaseLock>,
    aliased: bool,
    skid_within: Option<(f64, bool)>,
    skid_across: Option<(f64, bool)>,
    two_sided: bool,
    warnings: Vec<Warning>,
}

impl Found {
    fn within_bad(&self) -> bool {
        self.skid_within.is_some_and(|x| x.1)
    }
    fn across_bad(&self) -> bool {
        self.skid_across.is_some_and(|x| x.1)
    }
    fn code_level(&self, functions_examined: usize) -> CodeLevel {
        CodeLevel {
            functions_examined,
            skid_across: self
                .across_bad()
                .then(|| self.skid_across.unwrap_or_default().0),
            skid_within: self
                .within_bad()
                .then(|| self.skid_within.unwrap_or_default().0),
            shadow_share: self.skid_within.map(|x| x.0),
            aliased: self.aliased,
        }
    }
}

/// Running states, aliasing (recurrence, locked blocks, phase lock) and skid.
fn find(loaded: &Loaded, samples: &[&Sample], keys: &Keys, code: &CodeFindings) -> Found {
    let desc = &loaded.event;
    let n = samples.len() as u64;
    let func_of = keys.function_of_samples();
    let states = running_states(samples, &func_of, keys.functions.len(), 4.0);
    let randomized = desc.config.randomize_max.is_some();
    let mut warnings = Vec::new();
    let recurrence = aliasing::recurrence(samples, &keys.per_sample, &func_of, 16);
    let mut aliased = false;
    if let Some(a) = recurrence.as_ref().filter(|a| a.flagged) {
        aliased = true;
        warnings.push(warn::recurrence(a, randomized));
    }
    let locked: u64 = code.locked.iter().map(|x| x.1).sum();
    if desc.kind == EventKind::Instructions && locked as f64 >= 0.05 * n as f64 {
        aliased = true;
        warnings.push(warn::locked_blocks(&code.locked, n, randomized));
    }
    // The phase lock needs time stamps in the period's unit and a period that is not
    // randomised.
    let phase = (desc.kind.is_time_based() && !randomized)
        .then(|| aliasing::phase_lock(samples, &func_of, keys.functions.names(), |s| s.period))
        .flatten();
    if let Some(p) = phase.as_ref().filter(|p| p.flagged) {
        aliased = true;
        warnings.push(warn::phase_lock(p, " ns"));
    }
    // Skid (seed 000 §1.2).
    let two_sided = desc.kind == EventKind::Instructions;
    let skid_within = code::skid_shows(code.within, two_sided);
    let skid_across = code::skid_shows(code.across, two_sided);
    let mut found = Found {
        states,
        recurrence,
        phase,
        aliased,
        skid_within,
        skid_across,
        two_sided,
        warnings,
    };
    if found.within_bad() || found.across_bad() {
        let share = if found.within_bad() {
            found.skid_within
        } else {
            found.skid_across
        };
        found.warnings.push(warn::skid(
            share.unwrap_or_default().0,
            found.across_bad(),
            desc.kind.is_hardware() && desc.config.precise < 2,
        ));
    }
    found
}

fn code_notes(code: &CodeFindings) -> Vec<String> {
    let mut notes = Vec::new();
    if code.functions == 0 {
        notes.push("no code examined (no binary found for the sampled modules): block and instruction checks skipped".into());
    }
    for u in code.unreadable.iter().take(3) {
        notes.push(format!("cannot read the code of {u}"));
    }
    notes
}

/// The four tables.
struct Tables {
    functions: Vec<CheckRow>,
    inlines: Vec<CheckRow>,
    lines: Vec<CheckRow>,
    blocks: Vec<CheckRow>,
}

/// The rows of every level, with the granularity flags (seed 002 §3.3, §5.1.2) and skid flags
/// on the functions.
fn build_rows(
    o: &CheckOptions,
    rules: &RowRules,
    keys: &Keys,
    counts: &Counts,
    code: &CodeFindings,
    found: &Found,
    warnings: &mut Vec<Warning>,
) -> Tables {
    let sizes = &counts.sizes;
    let level = |names, c, attribution, needs| level(names, c, sizes, attribution, needs);
    let mut functions = rows(
        &Level {
            states: Some(&found.states),
            ..level(
                &keys.functions,
                &counts.functions,
                &counts.attribution[0],
                Attribution::Function,
            )
        },
        rules,
    );
    granularity_flags(o, &mut functions, warnings);
    for r in functions.iter_mut() {
        if let Some(&(pairs, shadow)) = code.per_function.get(&r.name) {
            if code::function_shows_skid(pairs, shadow, found.two_sided) {
                r.flags.push("skid".into());
                r.reason
                    .push_str("; skid shadow inside it: instruction-level attribution unreliable");
            }
        }
    }
    let inlines = rows(
        &level(
            &keys.inlines,
            &counts.inlines,
            &counts.attribution[1],
            Attribution::Line,
        ),
        rules,
    );
    let lines = rows(
        &level(
            &keys.lines,
            &counts.lines,
            &counts.attribution[2],
            Attribution::Line,
        ),
        rules,
    );
    let bcounts = block_counts(keys, code, counts);
    let battr = vec![Attribution::Function; code.blocks.len()];
    let blocks = rows(
        &Level {
            note: found
                .across_bad()
                .then_some("skid moves samples across blocks"),
            ..level(&code.blocks, &bcounts, &battr, Attribution::Function)
        },
        rules,
    );
    Tables {
        functions,
        inlines,
        lines,
        blocks,
    }
}

/// One level's rows input, without running states or note.
fn level<'a>(
    names: &'a Names,
    counts: &'a [Vec<u64>],
    sizes: &'a [u64],
    attribution: &'a [Attribution],
    needs: Attribution,
) -> Level<'a> {
    Level {
        names: names.names(),
        counts,
        sizes,
        attribution,
        needs,
        states: None,
        note: None,
    }
}

/// Functions whose running states are shorter than the period, and functions seen in few
/// running states (seed 002 §3.3, §5.1.2), among the top rows.
fn granularity_flags(o: &CheckOptions, functions: &mut [CheckRow], warnings: &mut Vec<Warning>) {
    let mut short_states = Vec::new();
    let mut few_states = Vec::new();
    for r in functions.iter_mut().take(o.top) {
        let (Some(runs), Some(rm)) = (r.runs, r.r_mean) else {
            continue;
        };
        if r.samples >= 10 && rm < 1.5 {
            short_states.push(r.name.clone());
            r.flags.push("granularity".into());
            r.reason
                .push_str("; running states shorter than the period (unbiased, noisy)");
        }
        if runs < o.min_states && r.verdict != Verdict::Noise && r.share < 0.999 {
            few_states.push(format!("{} ({runs})", r.name));
            if !r.flags.iter().any(|f| f == "granularity") {
                r.flags.push("granularity".into());
            }
            r.reason.push_str(&format!(
                "; seen in {runs} running state{} only",
                if runs == 1 { "" } else { "s" }
            ));
        }
    }
    if !short_states.is_empty() {
        warnings.push(warn::short_states(&short_states));
    }
    if !few_states.is_empty() {
        warnings.push(warn::few_states(&few_states, o.min_states));
    }
}

/// The functions' intervals for another run (`run_low`, `run_high`): between the recordings
/// when several were given, else the over-dispersion estimator (at most one look per
/// uninterrupted stretch when the period is locked to the program).
fn run_intervals(
    functions: &mut [CheckRow],
    keys: &Keys,
    counts: &Counts,
    found: &Found,
    rules: &RowRules,
) -> RunInterval {
    let recs = counts.by_recording.len();
    let locked = found.phase.as_ref().filter(|p| p.flagged);
    let z = rules.z();
    let id: FxHashMap<&str, usize> = keys
        .functions
        .names()
        .iter()
        .enumerate()
        .map(|(i, s)| (s.as_str(), i))
        .collect();
    let totals: Vec<u64> = counts.by_recording.iter().map(|r| r.1).collect();
    for r in functions.iter_mut() {
        let (lo, hi) = match (recs, id.get(r.name.as_str())) {
            (2.., Some(&i)) => {
                let c: Vec<u64> = counts.by_recording.iter().map(|x| x.0[i]).collect();
                runs::between_recordings(&c, &totals, rules.confidence).unwrap_or((0.0, 1.0))
            }
            _ => runs::overdispersed(
                r.samples,
                rules.n,
                z,
                runs::RUN_TAU,
                locked.map(|p| p.stretches),
            ),
        };
        r.run_low = Some(lo);
        r.run_high = Some(hi);
    }
    if recs >= 2 {
        RunInterval {
            method: "recordings".into(),
            recordings: recs,
            tau: None,
            note: format!(
                "the spread of each function's share between the {recs} recordings: a prediction interval for one more run (t with {} degree{} of freedom), never narrower than one recording's Wilson interval",
                recs - 1,
                if recs == 2 { "" } else { "s" }
            ),
        }
    } else if let Some(p) = locked {
        RunInterval {
            method: "stretches".into(),
            recordings: 1,
            tau: Some(runs::RUN_TAU),
            note: format!(
                "the period is locked to the program: each of the {} uninterrupted stretches is one look at its cycle, so the shares rest on that many looks, not on the samples",
                p.stretches
            ),
        }
    } else {
        RunInterval {
            method: "overdispersion".into(),
            recordings: 1,
            tau: Some(runs::RUN_TAU),
            note: format!(
                "one recording: the sampling variance plus a between-run variance tau² p(1-p), tau = {} (calibrated on repeated runs, docs/check.md); give several recordings (check a.data b.data ...) to measure it",
                runs::RUN_TAU
            ),
        }
    }
}

/// Recording health and its warnings.
fn health(
    loaded: &Loaded,
    samples: &[&Sample],
    keys: &Keys,
    sym: &Symbolizer,
    warnings: &mut Vec<Warning>,
) -> CheckHealth {
    let set = &loaded.set;
    let n = samples.len() as u64;
    let unattributed = unattributed_per_module(keys, &set.modules);
    let without: u64 = unattributed.iter().map(|m| m.without_function).sum();
    let unsym_share = without as f64 / n.max(1) as f64;
    if unsym_share > 0.01 {
        warnings.push(warn::unsymbolized(unsym_share, &unattributed));
    }
    if set.lost > 0 {
        warnings.push(warn::lost(set.lost, n));
    }
    let h = &set.health;
    if h.throttles > 0 {
        let first = samples.iter().map(|s| s.time).filter(|&t| t > 0).min();
        let last = samples.iter().map(|s| s.time).max();
        let span = match (first, last) {
            (Some(a), Some(b)) if b > a => Some(b - a),
            _ => None,
        };
        warnings.extend(warn::throttling(h, span));
    }
    let times = h.event_times.iter().find(|t| t.event == loaded.event_idx);
    let running_ratio = times.map(|t| t.running_fraction());
    if let Some(t) = times {
        warnings.extend(warn::multiplexing(
            &loaded.event.name,
            t.running_fraction(),
            t.running_ns,
            t.enabled_ns,
        ));
    }
    let mut no_debug: Vec<String> = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for (l, _, _) in &keys.locs {
        let Some(m) = l.module else { continue };
        if seen.insert(m) && sym.binary(m).is_some_and(|b| !b.has_debug_info()) {
            no_debug.push(
                set.modules
                    .get(m)
                    .map(|x| x.file_name().to_string())
                    .unwrap_or_default(),
            );
        }
    }
    if let Some(w) = set.outcome.as_ref().and_then(warn::ended_early) {
        warnings.push(w);
    }
    CheckHealth {
        lost: set.lost,
        throttled: Some(h.throttles),
        running_ratio,
        unsymbolized: unsym_share,
        unattributed,
        no_debug_info: no_debug,
        outcome: set.outcome.as_ref().map(|o| o.to_string()),
    }
}

/// Per module, its samples and those in no function, for the modules that have any; most
/// such samples first.
fn unattributed_per_module(keys: &Keys, modules: &ModuleTable) -> Vec<ModuleAttribution> {
    let mut per: FxHashMap<Option<proftrust_model::ModuleIdx>, (u64, u64)> = FxHashMap::default();
    for (l, k, c) in &keys.locs {
        let e = per.entry(l.module).or_default();
        e.0 += c;
        if k.attribution == Attribution::Module {
            e.1 += c;
        }
    }
    let mut out: Vec<ModuleAttribution> = per
        .into_iter()
        .filter(|(_, (_, w))| *w > 0)
        .map(|(m, (s, w))| ModuleAttribution {
            module: m
                .and_then(|m| modules.get(m))
                .map_or_else(|| "[unknown]".to_string(), |m| m.file_name().to_string()),
            samples: s,
            without_function: w,
            share: w as f64 / s as f64,
        })
        .collect();
    out.sort_by(|a, b| {
        b.without_function
            .cmp(&a.without_function)
            .then_with(|| a.module.cmp(&b.module))
    });
    out
}

/// The clustering warning over the top functions.
fn clustering(
    o: &CheckOptions,
    functions: &[CheckRow],
    slices: usize,
    warnings: &mut Vec<Warning>,
) {
    let clustered: Vec<&str> = functions
        .iter()
        .take(o.top)
        .filter(|r| r.flags.iter().any(|f| f == "clustering"))
        .map(|r| r.name.as_str())
        .collect();
    if !clustered.is_empty() {
        warnings.push(warn::clustering(
            &clustered,
            slices,
            o.interval == IntervalChoice::Auto,
        ));
    }
}

/// `--target`: how much longer to record for the wanted precision on the top rows.
fn target_advice(functions: &[CheckRow], top: usize, n: u64, t: f64) -> TargetAdvice {
    let top: Vec<&CheckRow> = functions.iter().take(top).collect();
    let factor = top
        .iter()
        .map(|r| samples_factor((r.ci_high - r.ci_low) / 2.0, t))
        .fold(0.0f64, f64::max);
    let needed = (n as f64 * factor).ceil() as u64;
    let message = if factor <= 1.0 {
        format!("the top {} are within ±{} already", top.len(), pct_short(t))
    } else {
        format!(
            "record {:.1}x longer for ±{} on the top {} ({} samples instead of {n})",
            factor,
            pct_short(t),
            top.len(),
            needed
        )
    };
    TargetAdvice {
        precision: t,
        top: top.len(),
        factor,
        samples_needed: needed,
        message,
    }
}

fn pct_short(x: f64) -> String {
    let s = format!("{:.2}", 100.0 * x);
    let s = s.trim_end_matches('0').trim_end_matches('.');
    format!("{s}%")
}

fn check_event(d: &proftrust_model::EventDesc) -> CheckEvent {
    CheckEvent {
        name: d.name.clone(),
        kind: kind_name(d.kind).into(),
        measures: measures(d.kind, &d.name).into(),
        precise: d.config.precise,
        period: period_note(d),
        randomized: d.config.randomize_max.is_some(),
    }
}

fn kind_name(k: EventKind) -> &'static str {
    match k {
        EventKind::CpuClock => "cpu-clock",
        EventKind::TaskClock => "task-clock",
        EventKind::Cycles => "cycles",
        EventKind::Instructions => "instructions",
        EventKind::Raw(_) => "raw",
        EventKind::Other => "other",
    }
}

/// What a share of the event's samples estimates.
fn measures(k: EventKind, name: &str) -> &'static str {
    match k {
        EventKind::CpuClock | EventKind::TaskClock => "time on CPU",
        EventKind::Cycles if name.contains("vpmu") => "modelled cycles (virtual PMU)",
        EventKind::Cycles => "CPU cycles",
        EventKind::Instructions if name.contains("vpmu") => "retired instructions (virtual PMU)",
        EventKind::Instructions => "retired instructions",
        EventKind::Raw(_) => "a raw hardware event",
        EventKind::Other => "an event proftrust does not know",
    }
}

fn period_note(d: &proftrust_model::EventDesc) -> String {
    let unit = if d.kind.is_time_based() { " ns" } else { "" };
    match d.config.period {
        PeriodMode::Fixed(p) => format!("{p}{unit}"),
        PeriodMode::Frequency(hz) => format!("{hz} Hz (kernel-adjusted)"),
        PeriodMode::Unknown => "unknown".into(),
    }
}

/// The "hardware time" column (issue 34): when the samples carry branch stacks with cycle
/// counts (perf `-b`, `-j any`, `--call-graph lbr`; Arm BRBE; `proftrust vpmu --lbr`), each
/// function's share of the time the stacks measured (`proftrust_metrics::lbr_time`: every
/// fall-through range timed by its entry's cycles), with a bootstrap interval over samples,
/// beside the sampled share. A row whose sampled interval and hardware-time interval do not
/// overlap is flagged `hardware-time`: the samples put it elsewhere than the time went (skid,
/// a biased event, a period locked to a loop), measured from the user's own file.
///
/// **The floor**: a row is judged only when it has at least `floor` samples *and* at least
/// `floor` branch stacks measured a range of it (`floor` = [`RowRules::noise_floor`],
/// `⌈(z/noise_precision)²⌉`, 16 at 95% and ±50%). Below it the comparison means nothing:
/// * on the sampled side the row is noise by check's own rule (its share known to no better
///   than ±50%);
/// * on the hardware side the share is the mean of the few windows that saw the function,
///   and the bootstrap over samples resamples those few: its distribution is that of about
///   a Poisson(w) count of windows, relative spread `1/√w`, so the same ±50% bound needs
///   `w ≥ (z/0.5)²` windows; at `w = 0` the interval is exactly `[0, 0]` and excludes every
///   sampled share. `w = 0` with samples is common and no disagreement: a stack ends at the
///   last taken branch before the sample, so the range running when the sample was taken is
///   never in it, and a short function run once (exit handlers, the loader) gets a sample
///   and no measured range;
/// * the rows below the floor are the many rare ones (dozens of libc and loader functions
///   with 1-2 samples), each compared at the stated confidence: some would disagree by
///   chance alone.
///
/// Rows below the floor keep their hardware time and windows (`hardware_time_windows`) and
/// are named in a note, unjudged.
fn hardware_time(
    loaded: &Loaded,
    sym: &Symbolizer,
    functions: &mut [CheckRow],
    o: &CheckOptions,
    floor: u64,
    warnings: &mut Vec<Warning>,
    notes: &mut Vec<String>,
) {
    let (set, ev) = (&loaded.set, loaded.event_idx);
    if !set
        .samples
        .iter()
        .any(|s| s.event == ev && s.branches.iter().any(|b| b.cycles > 0))
    {
        return;
    }
    let code = crate::lbr::SymbolizedRanges::new(sym);
    let t = proftrust_metrics::lbr_time(set, Some(ev), &code);
    if t.measured == 0 {
        notes.push(format!(
            "hardware time: the {} branch stacks hold no range with a cycle count and known code ({} unresolved, {} entries without cycles)",
            t.stacks, t.unresolved, t.without_cycles
        ));
        return;
    }
    // Groups: the function rows, by the names the rows use.
    let index: FxHashMap<&str, usize> = functions
        .iter()
        .enumerate()
        .map(|(i, r)| (r.name.as_str(), i))
        .collect();
    let names = std::cell::RefCell::new((Names::default(), Names::default(), Names::default()));
    let group_cache: std::cell::RefCell<FxHashMap<Location, Option<usize>>> = Default::default();
    let group = |l: Location| -> Option<usize> {
        *group_cache.borrow_mut().entry(l).or_insert_with(|| {
            let mut n = names.borrow_mut();
            let (f, i, li) = &mut *n;
            let k = keys_of(sym, l, f, i, li);
            // Time in a function without samples counts in the total (a group of its own).
            Some(
                index
                    .get(f.names()[k.function as usize].as_str())
                    .copied()
                    .unwrap_or(functions.len()),
            )
        })
    };
    let shares = t.shares(functions.len() + 1, &group, 400, o.confidence, 1);
    let windows = t.windows(functions.len() + 1, &group);
    let pct = |x: f64| format!("{:.2}%", 100.0 * x);
    let mut disagree = Vec::new();
    let mut unjudged = 0usize;
    for ((r, (share, lo, hi)), w) in functions.iter_mut().zip(shares).zip(windows) {
        r.hardware_time = Some(share);
        r.hardware_time_low = Some(lo);
        r.hardware_time_high = Some(hi);
        r.hardware_time_windows = Some(w);
        if r.samples < floor || w < floor {
            unjudged += 1;
            continue;
        }
        if r.ci_high < lo || hi < r.ci_low {
            r.flags.push("hardware-time".into());
            disagree.push(format!(
                "{} (sampled {}, hardware time {})",
                r.name,
                pct(r.share),
                pct(share)
            ));
        }
    }
    notes.push(format!(
        "hardware time: {} fall-through ranges measured by the cycle counts of {} branch stacks ({} cycles; {} ranges of unknown code, {} entries without cycles); shares with {:.0}% bootstrap intervals over samples (400 resamplings, seed 1)",
        t.measured,
        t.stacks,
        t.total_cycles(),
        t.unresolved,
        t.without_cycles,
        100.0 * o.confidence
    ));
    if unjudged > 0 {
        notes.push(format!(
            "hardware time: {unjudged} function(s) with fewer than {floor} samples or fewer than {floor} branch stacks measuring them are not compared (the noise floor: below it either share is known to no better than ±50%)"
        ));
    }
    if !disagree.is_empty() {
        warnings.push(Warning {
            kind: WarningKind::HardwareTime,
            message: format!(
                "{} function(s) where the sampled share and the time the branch stacks measured disagree beyond both intervals: {}; the samples land elsewhere than the time goes (skid behind slow instructions, an event that is not time, a period locked to a loop): trust the hardware time for these rows",
                disagree.len(),
                disagree.join(", ")
            ),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proftrust_model::{EventDesc, ModuleIdx, SamplingConfig};

    fn sample(tid: u32, time: u64, module: u32) -> Sample {
        Sample {
            event: 1,
            pid: tid,
            tid,
            time,
            cpu: 0,
            period: 1,
            ip: Location::new(ModuleIdx(module), 0x10),
            callchain: Vec::new(),
            branches: Vec::new(),
        }
    }

    /// Two recordings merged: modules interned by path, the second's threads renumbered
    /// apart and its times after the first's, only the checked event kept.
    #[test]
    fn merge_by_hand() {
        let ev = |name: &str| EventDesc {
            name: name.into(),
            kind: EventKind::CpuClock,
            config: SamplingConfig::default(),
        };
        let mut a = SampleSet {
            events: vec![ev("x"), ev("cpu-clock")],
            ..Default::default()
        };
        a.modules.intern(Module::new("/bin/prog"));
        a.samples = vec![sample(7, 100, 0), sample(7, 200, 0)];
        a.lost = 2;
        let mut b = SampleSet {
            events: vec![ev("cpu-clock")],
            ..Default::default()
        };
        b.modules.intern(Module::new("/lib/libc.so.6"));
        b.modules.intern(Module::new("/bin/prog"));
        let mut s = sample(7, 50, 1);
        s.event = 0;
        b.samples = vec![s];
        b.lost = 3;
        let (m, ends) = merge(vec![a, b], &[1, 0], &ev("cpu-clock"));
        assert_eq!(ends, vec![2, 3]);
        assert_eq!(m.lost, 5);
        assert_eq!(m.modules.len(), 2);
        let last = &m.samples[2];
        assert_eq!(last.ip.module, Some(ModuleIdx(0)), "prog keeps index 0");
        assert_eq!(m.samples[0].tid, m.samples[1].tid);
        assert_ne!(
            last.tid, m.samples[0].tid,
            "the second recording's thread 7 is another thread"
        );
        assert_eq!(last.time, 201);
        assert!(m.samples.iter().all(|s| s.event == 0));
    }

    #[test]
    fn module_rows_are_bracketed_once() {
        assert_eq!(
            module_row(&Module::new("/usr/lib/libc.so.6")),
            "[libc.so.6]"
        );
        assert_eq!(module_row(&Module::new("[vdso]")), "[vdso]");
        assert_eq!(
            module_row(&Module::new("[kernel.kallsyms]")),
            "[kernel.kallsyms]"
        );
    }
}
