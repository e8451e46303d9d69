//! `check`: how far to trust one profile when the run cannot be repeated.
//!
//! No truth run: everything comes from the samples themselves and the binary's code, with
//! the sampling theory of the seeds.
//!
//! * Statistical resolution per function, inline function, source line (and basic block):
//!   share with a Wilson interval, and a batch-means interval over time slices where the
//!   row's samples cluster in time (`proftrust_metrics::resolution`); the smallest share
//!   told from zero; whether each rank differs from the next; samples needed for a target
//!   precision. Seed 002 §3.3-3.5 (eqs. 1-9): a sampled share is unbiased for any ratio of
//!   running granularity to period, with variance at most binomial.
//! * Aliasing (seed 001 §3.1 and §4.2: the period is randomised "to avoid biased sampling";
//!   seed 002 §3.3: unbiasedness needs the sampling point independent of the running
//!   state): recurrence of sampled instruction addresses beyond what independent samples
//!   give (`aliasing`).
//! * Granularity (seed 002 §5.1.2): running states as runs of consecutive samples in one
//!   function; `R` of eq. 1 per function.
//! * Event and recording health: what the event measures, lost samples, unsymbolised share,
//!   missing debug info, how the program ended.
//! * Verdict per row and for the profile (act on it / rank only / noise) with its reason.
//!
//! ```no_run
//! use proftrust_pipeline::check::{execute, CheckOptions};
//!
//! let mut o = CheckOptions::default();
//! o.profile = "perf.data".into();
//! o.binaries = vec!["./prog".into()];
//! let r = execute(&o, &proftrust_pipeline::Silent)?;
//! println!("{:?}: {}", r.verdict, r.reason);
//! # Ok::<(), proftrust_pipeline::Error>(())
//! ```

use crate::error::{bail, Result};
use crate::{load, Events};
use proftrust_binary::Symbolizer;
use proftrust_metrics::resolution::{
    batch_means, rank_difference_z, samples_factor, smallest_detectable_share, z_for,
};
use proftrust_metrics::wilson_interval;
use proftrust_model::{EventKind, Location, PeriodMode, RunOutcome, Sample, SampleSet};
pub use proftrust_report::check::{
    AliasingCheck, CheckEvent, CheckHealth, CheckReport, CheckRow, CheckWarning, Granularity,
    TargetAdvice, Verdict,
};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A multiplicative hasher for the per-sample maps (addresses, thread ids): `check` looks up
/// every sample, and SipHash was a fifth of its time on 10^7 samples
/// (`scripts/bench-check.sh`). Keys here are not attacker-chosen hash-flooding material
/// worth SipHash's cost: a profile's addresses and thread ids.
#[derive(Default, Clone, Copy)]
struct MulHasher(u64);

impl Hasher for MulHasher {
    fn finish(&self) -> u64 {
        // Fold the well-mixed high bits into the low ones the table indexes with.
        self.0 ^ (self.0 >> 29)
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }
    fn write_u8(&mut self, v: u8) {
        self.write_u64(u64::from(v));
    }
    fn write_u32(&mut self, v: u32) {
        self.write_u64(u64::from(v));
    }
    fn write_usize(&mut self, v: usize) {
        self.write_u64(v as u64);
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(26) ^ v).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<MulHasher>>;
use std::path::PathBuf;

/// Settings of [`execute`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct CheckOptions {
    /// The profile: perf.data, `perf script` text, a proftrust sample file (`record`'s
    /// output). Default empty (an error: give one).
    pub profile: PathBuf,
    /// The program's binaries (matched to the profile's modules by build-id, else file
    /// name), on top of perf's places. Default none.
    pub binaries: Vec<PathBuf>,
    /// perf's `--symfs`. Default none.
    pub symfs: Option<PathBuf>,
    /// Which event to check, by name. Default: the first event of the file.
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

/// Which interval a row states.
///
/// The two answer different questions. Wilson bounds the sampling error of *this run's*
/// shares: with a fixed period the samples are a systematic sample of the run, whose
/// variance seed 002 §3.4-3.5 (eqs. 6, 9) shows is at most binomial, so Wilson is
/// conservative even when the run has phases. The batch-means interval measures how much
/// the share varies between stretches of the run; when a row clusters in time (phases), it
/// is the interval for "what share would another stretch, or a run like this one, show".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IntervalChoice {
    /// Always the Wilson score interval (default).
    #[default]
    Wilson,
    /// The batch-means interval where the row's samples cluster in time (and it is wider),
    /// else Wilson.
    Auto,
}

impl Default for CheckOptions {
    fn default() -> Self {
        CheckOptions {
            profile: PathBuf::new(),
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

/// What one sampled address is, at every level.
#[derive(Debug, Clone, Copy)]
struct LocKeys {
    function: u32,
    inline: u32,
    line: Option<u32>,
    symbolized: bool,
}

/// Names interned per level.
#[derive(Debug, Default)]
struct Names {
    names: Vec<String>,
    ids: HashMap<String, u32>,
}

impl Names {
    fn id(&mut self, s: String) -> u32 {
        if let Some(&i) = self.ids.get(&s) {
            return i;
        }
        let i = self.names.len() as u32;
        self.ids.insert(s.clone(), i);
        self.names.push(s);
        i
    }
}

/// Runs the check.
pub fn execute(o: &CheckOptions, events: &dyn Events) -> Result<CheckReport> {
    if !(o.confidence > 0.5 && o.confidence < 1.0) {
        bail!(
            "the confidence level must be between 0.5 and 1 (got {})",
            o.confidence
        );
    }
    if o.slices < 2 {
        bail!("--slices must be at least 2 (got {})", o.slices);
    }
    if let Some(t) = o.target {
        if !(t > 0.0 && t < 1.0) {
            bail!("--target must be a share between 0 and 100% (got {t})");
        }
    }
    if o.profile.as_os_str().is_empty() {
        bail!("give the profile to check (perf.data, perf script text or a proftrust sample file)");
    }
    if o.profile.as_os_str() != "-" && !o.profile.exists() {
        bail!(
            "cannot open the profile {}: no such file",
            o.profile.display()
        );
    }
    let locator = load::locator(&o.binaries, o.symfs.as_deref());
    // The reader's warnings (a cut file, records it could not use) go to the caller and
    // into the report.
    let reader = Collect {
        inner: events,
        notes: std::sync::Mutex::new(Vec::new()),
    };
    let set = load::samples_with(&o.profile, &locator, &reader)?;
    let reader_notes = reader.notes.into_inner().unwrap_or_default();
    let ev = pick_event(&set, o.event.as_deref())?;
    let samples: Vec<&Sample> = set.samples.iter().filter(|s| s.event == ev).collect();
    let n = samples.len() as u64;
    let desc = &set.events[ev as usize];
    if n == 0 {
        bail!(
            "{} holds no samples of {}: nothing to check (was the program too short for the period?)",
            o.profile.display(),
            desc.name
        );
    }
    let sym = Symbolizer::with_locator(&set.modules, &locator);
    for w in sym.warnings() {
        events.detail(&w);
    }
    let pb = events.task(Some(n), "checking");

    // Keys of every distinct sampled address.
    let mut fnames = Names::default();
    let mut inames = Names::default();
    let mut lnames = Names::default();
    let mut loc_ids: FastMap<Location, u32> = FastMap::default();
    let mut locs: Vec<(Location, LocKeys)> = Vec::new();
    let mut per_sample: Vec<u32> = Vec::with_capacity(samples.len());
    for s in &samples {
        let id = *loc_ids.entry(s.ip).or_insert_with(|| {
            let keys = keys_of(&sym, s.ip, &mut fnames, &mut inames, &mut lnames);
            locs.push((s.ip, keys));
            (locs.len() - 1) as u32
        });
        per_sample.push(id);
    }
    pb.inc(n / 2);

    // Counts per level and per time slice.
    let b = o.slices.min(samples.len()).max(1);
    let slice_of = |i: usize| i * b / samples.len();
    let mut sizes = vec![0u64; b];
    for i in 0..samples.len() {
        sizes[slice_of(i)] += 1;
    }
    let level_counts = |nkeys: usize, key: &dyn Fn(u32) -> Option<u32>| {
        let mut c = vec![vec![0u64; b]; nkeys];
        for (i, &l) in per_sample.iter().enumerate() {
            if let Some(k) = key(l) {
                c[k as usize][slice_of(i)] += 1;
            }
        }
        c
    };
    let fcounts = level_counts(fnames.names.len(), &|l| Some(locs[l as usize].1.function));
    let icounts = level_counts(inames.names.len(), &|l| Some(locs[l as usize].1.inline));
    let lcounts = level_counts(lnames.names.len(), &|l| locs[l as usize].1.line);
    // The code: blocks, skid shadow, locked blocks.
    let mut loc_counts = vec![0u64; locs.len()];
    for &l in &per_sample {
        loc_counts[l as usize] += 1;
    }
    let code = code_findings(&sym, &locs, &loc_counts, &fnames, 300);
    let bcounts = level_counts(code.blocks.names.len(), &|l| code.block_of.get(&l).copied());

    // Running states per function (seed 002 §5.1.2).
    let func_of: Vec<u32> = per_sample
        .iter()
        .map(|&l| locs[l as usize].1.function)
        .collect();
    let states = running_states(&samples, &func_of, fnames.names.len());

    let z = z_for(o.confidence);
    let mut warnings: Vec<CheckWarning> = Vec::new();
    let mut notes: Vec<String> = Vec::new();
    let warn = |w: &mut Vec<CheckWarning>, kind: &str, message: String| {
        w.push(CheckWarning {
            kind: kind.into(),
            message,
        })
    };
    for msg in reader_notes {
        let cut = ["ends after", "truncated", "cut copy", "incomplete"]
            .iter()
            .any(|k| msg.contains(k));
        let kind = if cut { "ended-early" } else { "input" };
        warn(&mut warnings, kind, msg);
    }

    // Aliasing.
    let loc_of_sample: Vec<u32> = per_sample.clone();
    let aliasing = aliasing(&samples, &loc_of_sample, &func_of, 16);
    let randomized = desc.config.randomize_max.is_some();
    if let Some(a) = &aliasing {
        if a.flagged {
            warn(
                &mut warnings,
                "aliasing",
                format!(
                    "samples {} apart land on the same instruction {:.1}x as often as independent samples would ({} of {} pairs, {:.0} expected): the period may be locked to periodic code, so shares may be biased (paper 001 §4.2, paper 002 §3.3); {}",
                    a.lag,
                    a.ratio,
                    a.same_observed,
                    a.pairs,
                    a.same_expected,
                    if randomized {
                        "the period was already randomised: record with a different period"
                    } else {
                        "record again with --randomize"
                    }
                ),
            );
        }
    }
    let mut aliased = aliasing.as_ref().is_some_and(|a| a.flagged);
    let locked: u64 = code.locked.iter().map(|x| x.1).sum();
    if desc.kind == EventKind::Instructions && locked as f64 >= 0.05 * n as f64 {
        aliased = true;
        let mut names: Vec<&str> = code.locked.iter().map(|x| x.0.as_str()).collect();
        names.truncate(5);
        warn(
            &mut warnings,
            "aliasing",
            format!(
                "{} basic block{} holding {} of the samples ({}) have 80% of their samples on one instruction, though every instruction of a block retires equally often: the period is locked to the loop, so shares may be biased (paper 001 §4.2); {}",
                code.locked.len(),
                if code.locked.len() == 1 { "" } else { "s" },
                pct(locked as f64 / n as f64),
                names.join(", "),
                if randomized {
                    "the period was already randomised: record with a different period"
                } else {
                    "record again with --randomize"
                }
            ),
        );
    }
    // Skid (seed 000 §1.2).
    let two_sided = desc.kind == EventKind::Instructions;
    let skid_within = skid_shows(code.within, two_sided);
    let skid_across = skid_shows(code.across, two_sided);
    let within_bad = skid_within.is_some_and(|x| x.1);
    let across_bad = skid_across.is_some_and(|x| x.1);
    if within_bad || across_bad {
        let (f, _) = if within_bad {
            skid_within.unwrap_or_default()
        } else {
            skid_across.unwrap_or_default()
        };
        warn(
            &mut warnings,
            "skid",
            format!(
                "{} of the samples on a slow instruction (load, division{}) and the one after it sit on the one after it (about half without skid): samples gather at or just after slow instructions (paper 000 §1.2), so instruction-level{} attribution is unreliable; {}",
                pct(f),
                if across_bad { ", call" } else { "" },
                if across_bad { " and block-level" } else { "" },
                if desc.kind.is_hardware() && desc.config.precise < 2 {
                    "a precise event (:pp) or `proftrust correct` undoes most of it"
                } else {
                    "`proftrust correct --skid S` estimates the counts without it"
                }
            ),
        );
    }
    if code.functions == 0 {
        notes.push("no code examined (no binary found for the sampled modules): block and instruction checks skipped".into());
    }
    for u in code.unreadable.iter().take(3) {
        notes.push(format!("cannot read the code of {u}"));
    }

    let build = |names: &Names,
                 counts: &[Vec<u64>],
                 states: Option<&[(u64, u64)]>,
                 level_note: Option<&str>| {
        rows(names, counts, &sizes, n, z, o, states, aliased, level_note)
    };
    let mut functions = build(&fnames, &fcounts, Some(&states), None);
    let median_period = period_note(desc);
    // Granularity flags (seed 002 §3.3, §5.1.2).
    let mut short_states = Vec::new();
    let mut few_states = Vec::new();
    for r in functions.iter_mut().take(o.top) {
        if let (Some(runs), Some(rm)) = (r.runs, r.r_mean) {
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
    }
    if !short_states.is_empty() {
        warn(
            &mut warnings,
            "granularity",
            format!(
                "{} run{} for less than one sampling period at a time (R < 1.5, paper 002 §3.3 eq. 1): each state is caught or missed by chance, so their shares are unbiased but only as precise as their sample count says; a shorter period sharpens them",
                short_states.join(", "),
                if short_states.len() == 1 { "s" } else { "" }
            ),
        );
    }
    if !few_states.is_empty() {
        warn(
            &mut warnings,
            "granularity",
            format!(
                "{} sampled in fewer than {} running states: precise for this run (a long state is caught to within one sample, paper 002 eqs. 5-6), but only that many independent looks at the code, so how long such states usually last is unknown",
                few_states.join(", "),
                o.min_states
            ),
        );
    }
    for r in functions.iter_mut() {
        if let Some(&(pairs, shadow)) = code.per_function.get(&r.name) {
            let f = shadow as f64 / pairs.max(1) as f64;
            if pairs >= 20 && (f >= 0.8 || (two_sided && f <= 0.2)) {
                r.flags.push("skid".into());
                r.reason
                    .push_str("; skid shadow inside it: instruction-level attribution unreliable");
            }
        }
    }
    let has_lines = !lnames.names.is_empty();
    let inlines = build(&inames, &icounts, None, None);
    let lines = build(&lnames, &lcounts, None, None);
    let blocks = build(
        &code.blocks,
        &bcounts,
        None,
        across_bad.then_some("skid moves samples across blocks"),
    );
    if !has_lines {
        notes.push("no source lines: the binaries have no DWARF line information (build with -g, or give the debug file with --binary)".into());
    }

    // Health.
    let unsym: u64 = per_sample
        .iter()
        .filter(|&&l| !locs[l as usize].1.symbolized)
        .count() as u64;
    let unsym_share = unsym as f64 / n as f64;
    if unsym_share > 0.01 {
        warn(
            &mut warnings,
            "unsymbolized",
            format!(
                "{} of the samples have no function name (no binary or no symbol found for their module): give the binaries with --binary (or --symfs)",
                pct(unsym_share)
            ),
        );
    }
    if set.lost > 0 {
        let share = set.lost as f64 / (set.lost + n) as f64;
        warn(
            &mut warnings,
            "lost",
            format!(
                "{} samples were lost ({} of all): the kernel's ring buffer overflowed; lost samples cluster in time, so shares may be biased toward what ran when the buffer had room; record with a larger buffer (-m) or a longer period",
                set.lost,
                pct(share)
            ),
        );
    }
    let (throttled, running_ratio) = throttle_and_multiplex(&set, ev, &samples, &mut warnings);
    let mut no_debug: Vec<String> = Vec::new();
    {
        let mut seen = std::collections::BTreeSet::new();
        for (l, _) in &locs {
            if let Some(m) = l.module {
                if seen.insert(m) {
                    if let Some(bin) = sym.binary(m) {
                        if !bin.has_debug_info() {
                            no_debug.push(
                                set.modules
                                    .get(m)
                                    .map(|x| x.file_name().to_string())
                                    .unwrap_or_default(),
                            );
                        }
                    }
                }
            }
        }
    }
    let outcome = set.outcome.as_ref().map(|oc| match oc {
        RunOutcome::Exited { code } => format!("exited with status {code}"),
        RunOutcome::Signaled { name, .. } => format!("killed by {name}"),
        RunOutcome::TimedOut { millis } => format!("stopped after the {millis} ms timeout"),
        RunOutcome::Interrupted { name, .. } => format!("interrupted by {name}"),
    });
    if let Some(oc) = &set.outcome {
        if !matches!(oc, RunOutcome::Exited { code: 0 }) {
            warn(
                &mut warnings,
                "ended-early",
                format!(
                    "the recorded program {}{}: the profile covers the run up to there only",
                    if matches!(oc, RunOutcome::Exited { .. }) {
                        ""
                    } else {
                        "was "
                    },
                    outcome.clone().unwrap_or_default()
                ),
            );
        }
    }

    // Clustering note.
    let clustered: Vec<&str> = functions
        .iter()
        .take(o.top)
        .filter(|r| r.flags.iter().any(|f| f == "clustering"))
        .map(|r| r.name.as_str())
        .collect();
    if !clustered.is_empty() {
        warn(
            &mut warnings,
            "clustering",
            format!(
                "the samples of {} cluster in time (their share varies between the {b} time slices more than sampling explains: the run has phases); {}",
                clustered.join(", "),
                if o.interval == IntervalChoice::Auto {
                    "their intervals are batch means over the slices"
                } else {
                    "the Wilson intervals bound this run's shares; for another stretch or run of the same code use the batch-means intervals (--interval auto, JSON batch_low/batch_high)"
                }
            ),
        );
    }

    // Target.
    let target = o.target.map(|t| {
        let top: Vec<&CheckRow> = functions.iter().take(o.top).collect();
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
    });

    // Event.
    let event = CheckEvent {
        name: desc.name.clone(),
        kind: kind_name(desc.kind).into(),
        measures: measures(desc.kind, &desc.name).into(),
        precise: desc.config.precise,
        period: median_period,
        randomized,
    };

    // The finest trustworthy granularity.
    let level_ok = |rows: &[CheckRow]| rows.first().is_some_and(|r| r.verdict == Verdict::Act);
    let trustworthy_at = if !level_ok(&functions) {
        Granularity {
            level: "none".into(),
            reason: "the hottest function's share is not precise enough to act on".into(),
        }
    } else if !level_ok(&inlines) {
        Granularity {
            level: "function".into(),
            reason: "inline functions have too few samples".into(),
        }
    } else if !has_lines {
        Granularity {
            level: "inline".into(),
            reason: "no line information".into(),
        }
    } else if !level_ok(&lines) {
        Granularity {
            level: "inline".into(),
            reason: "source lines have too few samples".into(),
        }
    } else if code.functions == 0 {
        Granularity {
            level: "line".into(),
            reason: "no code to examine block and instruction attribution (give the binary)".into(),
        }
    } else if across_bad {
        Granularity {
            level: "line".into(),
            reason: format!(
                "samples skid across blocks: {} of the samples on a call and its return site sit on the return site",
                pct(skid_across.unwrap_or_default().0)
            ),
        }
    } else if !level_ok(&blocks) {
        Granularity {
            level: "line".into(),
            reason: "basic blocks have too few samples".into(),
        }
    } else if within_bad {
        Granularity {
            level: "block".into(),
            reason: format!(
                "skid shadow: {} of the samples on a slow instruction and the next sit on the next",
                pct(skid_within.unwrap_or_default().0)
            ),
        }
    } else if aliased {
        Granularity {
            level: "block".into(),
            reason: "aliasing: instruction shares may be biased".into(),
        }
    } else if !(desc.kind.is_hardware() && desc.config.precise >= 2) {
        Granularity {
            level: "block".into(),
            reason: format!(
                "{} event: each sample lands some cycles after the instruction that triggered it (paper 000 §1.2), so single instructions are unreliable even without a visible pile-up",
                if desc.name.contains("vpmu") {
                    "a virtual-PMU (skid as modelled)".to_string()
                } else if desc.kind.is_hardware() {
                    format!("an imprecise (precise level {})", desc.config.precise)
                } else {
                    "a software timer".to_string()
                }
            ),
        }
    } else {
        Granularity {
            level: "instruction".into(),
            reason: match skid_within {
                Some((f, _)) => format!(
                    "no skid shadow ({} of the samples on slow instructions and their successors sit on the successors)",
                    pct(f)
                ),
                None => "no slow instruction sampled to test for skid".into(),
            },
        }
    };

    // Profile verdict.
    let (verdict, reason) = profile_verdict(&functions, &warnings, aliased, o.top);
    pb.finish();
    Ok(CheckReport {
        profile: o.profile.display().to_string(),
        verdict,
        reason,
        samples: n,
        event,
        confidence: o.confidence,
        slices: b,
        smallest_share: smallest_detectable_share(n, o.confidence),
        trustworthy_at,
        target,
        functions: std::mem::take(&mut functions),
        inlines,
        lines,
        blocks,
        aliasing,
        health: CheckHealth {
            lost: set.lost,
            throttled,
            running_ratio,
            unsymbolized: unsym_share,
            no_debug_info: no_debug,
            outcome,
        },
        warnings,
        notes,
    })
}

/// The `throttling` and `multiplexing` warnings from the file's own record of them
/// ([`proftrust_model::RecordingHealth`]); returns the throttle count and the checked event's
/// running / enabled ratio for the report's `health`.
///
/// Both stop the event's sampling for stretches of the run: a throttled event loses its
/// interrupts until the next timer tick (`perf_event_max_sample_rate`), a multiplexed one
/// is off the PMU while other events count. The samples then stand for the stretches the
/// event was on only, so shares are unbiased only if the program behaved the same while it
/// was off (seed 002 §3.3: the sampling point must not depend on the running state).
fn throttle_and_multiplex(
    set: &SampleSet,
    ev: u16,
    samples: &[&Sample],
    warnings: &mut Vec<CheckWarning>,
) -> (Option<u64>, Option<f64>) {
    let h = &set.health;
    if h.throttles > 0 {
        let first = samples.iter().map(|s| s.time).filter(|&t| t > 0).min();
        let last = samples.iter().map(|s| s.time).max();
        let span = match (first, last) {
            (Some(a), Some(b)) if b > a => Some(b - a),
            _ => None,
        };
        let of_span = span.map_or(String::new(), |sp| {
            format!(
                " ({} of the sampled span)",
                pct(h.throttled_ns as f64 / sp as f64)
            )
        });
        warnings.push(CheckWarning {
            kind: "throttling".into(),
            message:
            format!(
                "the kernel throttled sampling {} time{} for {:.3} ms in all{}: the event interrupted more often than perf_event_max_sample_rate allows, and what ran while it was throttled has no samples; record with a longer period (-c) or a lower frequency (-F)",
                h.throttles,
                if h.throttles == 1 { "" } else { "s" },
                h.throttled_ns as f64 / 1e6,
                of_span
            ),
        });
    }
    let times = h.event_times.iter().find(|t| t.event == ev);
    let ratio = times.map(|t| t.running_fraction());
    if let (Some(t), Some(r)) = (times, ratio) {
        // Below 99%: a counter that ran its whole enabled time reads running == enabled.
        if r < 0.99 {
            warnings.push(CheckWarning {
                kind: "multiplexing".into(),
                message:
                format!(
                    "{} counted during {} of the time it was enabled ({:.3} of {:.3} ms): the kernel multiplexed it with other events on the PMU, and what ran while it was off has no samples; record fewer events at once",
                    set.events[ev as usize].name,
                    pct(r),
                    t.running_ns as f64 / 1e6,
                    t.enabled_ns as f64 / 1e6
                ),
            });
        }
    }
    (Some(h.throttles), ratio)
}

fn pct(x: f64) -> String {
    format!("{:.2}%", 100.0 * x)
}

fn pct_short(x: f64) -> String {
    let s = format!("{:.2}", 100.0 * x);
    let s = s.trim_end_matches('0').trim_end_matches('.');
    format!("{s}%")
}

fn pick_event(set: &SampleSet, want: Option<&str>) -> Result<u16> {
    if set.events.is_empty() {
        bail!("the profile names no event: nothing to check");
    }
    match want {
        // The event with the samples: a hybrid CPU's first event is often empty (issue 31).
        None => Ok(set.default_event().unwrap_or(0)),
        Some(w) => match set.event_named(w) {
            Some(i) => Ok(i),
            None => bail!("the profile has no event {w}; it has {}", set.event_names()),
        },
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
    // Code without a symbol is grouped per module (`libc.so.6+0x...` would make every
    // address its own function).
    let fname = if symbolized {
        fname
    } else {
        match ip.module.and_then(|m| sym.modules().get(m)) {
            Some(m) => format!("[{}]", m.file_name()),
            None => "[unknown]".to_string(),
        }
    };
    let frames = if func.is_some() {
        sym.frames(ip)
    } else {
        Vec::new()
    };
    let inner = frames.first();
    let iname = inner.map_or_else(|| fname.clone(), |f| f.function.clone());
    let line = inner.and_then(|f| match (&f.file, f.line) {
        (Some(file), Some(line)) if line > 0 => {
            let short = file.rsplit('/').next().unwrap_or(file);
            Some(lnames.id(format!("{short}:{line}")))
        }
        _ => None,
    });
    LocKeys {
        function: fnames.id(fname),
        inline: inames.id(iname),
        line,
        symbolized,
    }
}

/// Running states of each function: maximal runs of consecutive samples of one thread in
/// that function (seed 002 §5.1.2: "continuing samples with the same module name" form a
/// run, the key here is the function). A gap longer than 4 median sampling intervals of
/// the thread ends a run (the thread was switched out or idle; the reading
/// `proftrust_sim::granularity` chose too). Returns per function (runs, samples in runs);
/// `R` of eq. 1 is then samples per run (each sample stands for one sampling interval).
fn running_states(samples: &[&Sample], func_of: &[u32], nfuncs: usize) -> Vec<(u64, u64)> {
    let mut out = vec![(0u64, 0u64); nfuncs];
    // Median interval over consecutive samples of one thread (time stamps, when present).
    let mut last: FastMap<u32, (u64, u32)> = FastMap::default();
    let mut gaps: Vec<u64> = Vec::new();
    for s in samples {
        if let Some((t, _)) = last.get(&s.tid) {
            if s.time > *t && *t > 0 {
                gaps.push(s.time - t);
            }
        }
        last.insert(s.tid, (s.time, 0));
    }
    let limit = if gaps.is_empty() {
        u64::MAX
    } else {
        let mid = gaps.len() / 2;
        let (_, m, _) = gaps.select_nth_unstable(mid);
        m.saturating_mul(4)
    };
    last.clear();
    for (s, &f) in samples.iter().zip(func_of) {
        let cont = match last.get(&s.tid) {
            Some(&(t, pf)) => pf == f && s.time.saturating_sub(t) <= limit,
            None => false,
        };
        let e = &mut out[f as usize];
        if !cont {
            e.0 += 1;
        }
        e.1 += 1;
        last.insert(s.tid, (s.time, f));
    }
    out
}

/// The aliasing measurement: for lags `1..=max_lag`, pairs of samples `lag` apart in one
/// thread and in the same function, and how many land on the same instruction, against
/// what independent samples give.
///
/// Model (seed 002 §3.3, line "the sampling point is independent of running this task";
/// seed 001 §3.1: the period is randomised "to avoid biased sampling result"): if the
/// sampling point is independent of the code's phase, two samples in function `f` land on
/// the same instruction with the collision probability `q_f = Σ_a c_a(c_a − 1) / (c_f(c_f −
/// 1))` of `f`'s sampled instructions (`c_a` samples at `a`, `c_f` in `f`; the unbiased
/// estimate). Over the pairs, the expected same-instruction count is `E = Σ q_f`, with
/// variance `V = Σ q_f(1 − q_f)`. A period locked to periodic code (a loop whose length in
/// events divides, or nearly divides, the period) makes samples recur at one or a few
/// instructions: the observed count `O` exceeds `E`. Flagged when, at some lag,
/// `O/E >= 3`, `(O − E)/√V >= 4` (a conservative bound: 16 lags are tried and pairs are
/// not independent) and `O >= 20`. Reading chosen: the seeds give no test; phases of a
/// function that run different loops also raise `O/E`, which is why the ratio bound is 3.
/// A period that divides the loop exactly sends every sample of the loop to one
/// instruction and leaves `O/E` at 1; that case is found from the code (a block whose
/// samples sit on one instruction), not here.
///
/// A fixed period against a loop whose length does not divide it makes the phase drift: a
/// pattern recurs every few samples (a stroboscope) but over the run every phase is
/// visited, and the shares are not biased (on the golden fixture `tiny` with period 1009
/// the recurrence at lag 11 is 39% of pairs, 4.6x the independent rate, and the profile is
/// closer to the truth than randomised ones). Only a pattern that recurs in at least
/// `LOCKED_SHARE` (80%) of the pairs at its lag visits too few phases: that is flagged.
fn aliasing(
    samples: &[&Sample],
    loc_of: &[u32],
    func_of: &[u32],
    max_lag: usize,
) -> Option<AliasingCheck> {
    // Collision probability per function (locations and functions are dense ids).
    let nloc = loc_of.iter().max().map_or(0, |&m| m as usize + 1);
    let nfun = func_of.iter().max().map_or(0, |&m| m as usize + 1);
    let mut by_loc: Vec<(u32, u64)> = vec![(0, 0); nloc];
    for (&l, &f) in loc_of.iter().zip(func_of) {
        let e = &mut by_loc[l as usize];
        e.0 = f;
        e.1 += 1;
    }
    let mut fsum: Vec<(u64, f64)> = vec![(0, 0.0); nfun];
    for &(f, c) in &by_loc {
        let e = &mut fsum[f as usize];
        e.0 += c;
        e.1 += (c * c.saturating_sub(1)) as f64;
    }
    let q: Vec<f64> = fsum
        .iter()
        .map(|&(c, s)| {
            if c >= 2 {
                s / (c as f64 * (c - 1) as f64)
            } else {
                0.0
            }
        })
        .collect();
    // Samples per thread, in order.
    let mut threads: FastMap<u32, Vec<usize>> = FastMap::default();
    for (i, s) in samples.iter().enumerate() {
        threads.entry(s.tid).or_default().push(i);
    }
    let mut best: Option<AliasingCheck> = None;
    for lag in 1..=max_lag {
        let (mut pairs, mut obs, mut exp, mut var) = (0u64, 0u64, 0.0f64, 0.0f64);
        for idx in threads.values() {
            for w in lag..idx.len() {
                let (i, j) = (idx[w - lag], idx[w]);
                if func_of[i] != func_of[j] {
                    continue;
                }
                let qf = q[func_of[j] as usize];
                pairs += 1;
                exp += qf;
                var += qf * (1.0 - qf);
                if loc_of[i] == loc_of[j] {
                    obs += 1;
                }
            }
        }
        if pairs == 0 {
            continue;
        }
        let z = if var > 0.0 {
            (obs as f64 - exp) / var.sqrt()
        } else {
            0.0
        };
        let ratio = if exp > 0.0 { obs as f64 / exp } else { 1.0 };
        let flagged =
            ratio >= 3.0 && z >= 4.0 && obs >= 20 && obs as f64 >= LOCKED_SHARE * pairs as f64;
        let cand = AliasingCheck {
            pairs,
            lag: lag as u64,
            same_observed: obs as f64,
            same_expected: exp,
            ratio,
            z,
            flagged,
        };
        let better = match &best {
            None => true,
            Some(b) => (cand.flagged, cand.z) > (b.flagged, b.z),
        };
        if better {
            best = Some(cand);
        }
    }
    best
}

/// Share of the pairs at a lag that must recur for a locked phase (see [`aliasing`]).
const LOCKED_SHARE: f64 = 0.8;

#[allow(clippy::too_many_arguments)]
fn rows(
    names: &Names,
    counts: &[Vec<u64>],
    sizes: &[u64],
    n: u64,
    z: f64,
    o: &CheckOptions,
    states: Option<&[(u64, u64)]>,
    aliased: bool,
    level_note: Option<&str>,
) -> Vec<CheckRow> {
    let mut order: Vec<usize> = (0..names.names.len()).collect();
    let total = |i: usize| counts[i].iter().sum::<u64>();
    order.retain(|&i| total(i) > 0);
    order.sort_by(|&a, &b| {
        total(b)
            .cmp(&total(a))
            .then(names.names[a].cmp(&names.names[b]))
    });
    let mut out: Vec<CheckRow> = order
        .iter()
        .map(|&i| {
            let k = total(i);
            let share = k as f64 / n as f64;
            let (wl, wh) = wilson_interval(k, n, z);
            let bm = batch_means(&counts[i], sizes, o.confidence);
            let use_bm = o.interval == IntervalChoice::Auto
                && bm.clustered
                && (bm.high - bm.low) > (wh - wl);
            let (lo, hi) = if use_bm {
                (bm.low.min(wl), bm.high.max(wh))
            } else {
                (wl, wh)
            };
            let (runs, r_mean) = match states.map(|s| s[i]) {
                Some((r, c)) if r > 0 => (Some(r), Some(c as f64 / r as f64)),
                _ => (None, None),
            };
            let rel = (hi - lo) / 2.0 / share;
            let (mut verdict, mut reason) = if rel <= o.act_precision {
                (Verdict::Act, format!("share known to ±{:.0}%", rel * 100.0))
            } else if rel <= o.noise_precision {
                (
                    Verdict::RankOnly,
                    format!("share known only to ±{:.0}%", rel * 100.0),
                )
            } else {
                (
                    Verdict::Noise,
                    format!(
                        "{k} sample{}: ±{:.0}%",
                        if k == 1 { "" } else { "s" },
                        rel * 100.0
                    ),
                )
            };
            let mut flags = Vec::new();
            if bm.clustered && k >= 10 {
                flags.push("clustering".to_string());
            }
            if aliased && verdict == Verdict::Act {
                verdict = Verdict::RankOnly;
                reason.push_str("; aliasing may bias it");
                flags.push("aliasing".to_string());
            }
            if let Some(note) = level_note {
                if verdict == Verdict::Act {
                    verdict = Verdict::RankOnly;
                }
                reason.push_str(&format!("; {note}"));
            }
            CheckRow {
                name: names.names[i].clone(),
                samples: k,
                share,
                ci_low: lo,
                ci_high: hi,
                interval: if use_bm { "batch-means" } else { "wilson" }.into(),
                wilson_low: wl,
                wilson_high: wh,
                batch_low: bm.low,
                batch_high: bm.high,
                inflation: bm.inflation,
                distinct_from_next: None,
                runs,
                r_mean,
                flags,
                verdict,
                reason,
            }
        })
        .collect();
    for w in 0..out.len().saturating_sub(1) {
        let (a, b) = (&out[w], &out[w + 1]);
        let infl = |r: &CheckRow| {
            if r.interval == "batch-means" {
                r.inflation
            } else {
                1.0
            }
        };
        let zs = rank_difference_z(a.samples, b.samples, n, infl(a).max(infl(b)));
        out[w].distinct_from_next = Some(zs > z);
    }
    out
}

fn profile_verdict(
    functions: &[CheckRow],
    warnings: &[CheckWarning],
    aliased: bool,
    top: usize,
) -> (Verdict, String) {
    let Some(first) = functions.first() else {
        return (Verdict::Noise, "no samples".into());
    };
    if first.verdict == Verdict::Noise {
        return (
            Verdict::Noise,
            format!(
                "even the hottest function, {}, has too few samples ({})",
                first.name, first.samples
            ),
        );
    }
    if aliased {
        return (
            Verdict::RankOnly,
            "aliasing: the period may be locked to periodic code (record with --randomize)".into(),
        );
    }
    // Lost samples, throttling and multiplexing all leave stretches of the run unsampled.
    let gap = warnings
        .iter()
        .find(|w| matches!(w.kind.as_str(), "lost" | "throttling" | "multiplexing"));
    let lost = gap.is_some();
    let top_rows: Vec<&CheckRow> = functions.iter().take(top).collect();
    let act = top_rows
        .iter()
        .filter(|r| r.verdict == Verdict::Act)
        .count();
    if first.verdict == Verdict::Act && !lost {
        let tied = top_rows
            .iter()
            .take(act.max(1))
            .filter(|r| r.distinct_from_next == Some(false))
            .count();
        let mut reason = format!(
            "{act} of the top {} function{} can be acted on",
            top_rows.len(),
            if top_rows.len() == 1 { "" } else { "s" }
        );
        if tied > 0 {
            reason.push_str(&format!(
                "; {tied} of them not told apart from the next in rank"
            ));
        }
        (Verdict::Act, reason)
    } else if let Some(w) = gap {
        (
            Verdict::RankOnly,
            match w.kind.as_str() {
                "lost" => "samples were lost: shares may be biased toward what ran when the buffer had room",
                "throttling" => "the kernel throttled sampling: shares may be biased against what ran while it was off",
                _ => "the event was multiplexed: shares may be biased against what ran while it was off",
            }
            .into(),
        )
    } else {
        (
            Verdict::RankOnly,
            format!(
                "the hottest function, {}, is known only to ±{:.0}%",
                first.name,
                (first.ci_high - first.ci_low) / 2.0 / first.share * 100.0
            ),
        )
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

#[cfg(test)]
mod tests {
    use super::*;
    use proftrust_model::{ModuleIdx, Svma};

    fn sample(tid: u32, time: u64, addr: u64) -> Sample {
        Sample {
            event: 0,
            pid: 1,
            tid,
            time,
            cpu: 0,
            period: 1,
            ip: Location {
                module: Some(ModuleIdx(0)),
                svma: Svma(addr),
            },
            callchain: Vec::new(),
            branches: Vec::new(),
        }
    }

    #[test]
    fn running_states_by_hand() {
        // f f g f (tid 1), then f after a long gap: f has runs [2], [1], [1] = 3 runs of
        // 4 samples, g one run.
        let s = [
            sample(1, 10, 0),
            sample(1, 20, 0),
            sample(1, 30, 0),
            sample(1, 40, 0),
            sample(1, 1000, 0),
        ];
        let refs: Vec<&Sample> = s.iter().collect();
        let st = running_states(&refs, &[0, 0, 1, 0, 0], 2);
        assert_eq!(st, vec![(3, 4), (1, 1)]);
    }

    #[test]
    fn aliasing_flags_locked_phase_not_drift_or_random() {
        // One function of 8 instructions sampled 400 times, in three ways.
        let s: Vec<Sample> = (0..400).map(|i| sample(1, i as u64, 0)).collect();
        let refs: Vec<&Sample> = s.iter().collect();
        let f = vec![0u32; 400];
        // Locked: the period is a multiple of a third of the loop, so samples cycle over
        // instructions 0, 3, 6 (every 50th sample is displaced to 1, interrupt jitter).
        let locked: Vec<u32> = (0..400u32)
            .map(|i| {
                if i % 50 == 49 {
                    1
                } else {
                    [0, 3, 6][i as usize % 3]
                }
            })
            .collect();
        let a = aliasing(&refs, &locked, &f, 16).unwrap();
        assert!(a.flagged, "{a:?}");
        assert_eq!(a.lag, 3);
        // Lag-3 pairs: 397; a pair fails when either end is displaced: samples 49, 99, ...
        // 399 (8 of them) each break the pair ending there and the one starting there
        // (except 399, the last, and 49 is reached from 46): 16 - 1 = 15 broken.
        assert_eq!(a.same_observed, 382.0);
        // q from the counts: 0 -> 131, 3 -> 131, 6 -> 130, 1 -> 8 (of 400).
        let q = (131.0 * 130.0 * 2.0 + 130.0 * 129.0 + 8.0 * 7.0) / (400.0 * 399.0);
        assert!((a.same_expected - 397.0 * q).abs() < 1e-6, "{a:?} {q}");
        // Drifting: the phase advances one instruction every 4 samples and sweeps the
        // whole loop (a stroboscope: recurrent, but every phase is visited): not flagged.
        let drift: Vec<u32> = (0..400u32).map(|i| (i / 4) % 8).collect();
        let d = aliasing(&refs, &drift, &f, 16).unwrap();
        assert!(!d.flagged, "{d:?}");
        assert!(d.ratio > 3.0); // recurrent all the same
                                // Independent: a fixed pseudo-random sequence.
        let mut x = 12345u64;
        let random: Vec<u32> = (0..400)
            .map(|_| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((x >> 33) % 8) as u32
            })
            .collect();
        let r = aliasing(&refs, &random, &f, 16).unwrap();
        assert!(!r.flagged, "{r:?}");
    }
}

/// What the binary's code says about the samples: basic blocks, the skid shadow and
/// samples locked onto one instruction of a block.
#[derive(Debug, Default)]
struct CodeFindings {
    /// Block name per sampled location id (`function@0xSTART`).
    block_of: HashMap<u32, u32>,
    /// Block names.
    blocks: Names,
    /// Samples on the instruction before a shadow position, and on the shadow position,
    /// within a block (after long-latency instructions).
    within: (u64, u64),
    /// The same across a block boundary (the return site after a call).
    across: (u64, u64),
    /// Per function name: (samples on pairs, samples in the shadow).
    per_function: HashMap<String, (u64, u64)>,
    /// Blocks whose samples sit on one instruction that is not a shadow position:
    /// (block, samples).
    locked: Vec<(String, u64)>,
    /// Functions whose code could not be read, with the reason.
    unreadable: Vec<String>,
    /// Functions examined.
    functions: usize,
}

/// Whether an instruction takes long enough that a sample skids past it: an explicit
/// memory load (a cache miss costs hundreds of cycles), a division or a square root.
fn long_latency(i: &proftrust_binary::Instr) -> bool {
    let mnemonic = i.text.split_whitespace().next().unwrap_or("");
    (i.memory && i.loads) || mnemonic.contains("div") || mnemonic.contains("sqrt")
}

/// Examines the code of the sampled functions (the `max_functions` with most samples).
///
/// Skid shadow (seed 000 §1.2, eqs. 1-2): a sample triggered at instruction `I_m` is
/// attributed to `I_{m+g(S,m,c)}`, `g` counting the instructions retired during the skid `S`
/// cycles. After an instruction of long latency `c_m >> S` the skid ends on its successor
/// (`g = 1`), so the samples of the slow instruction *and* of the instructions before it
/// within `S` cycles pile up on the successor, and the slow instruction itself keeps few.
/// For each pair (long-latency or call instruction `L`, next instruction `N` in address
/// order) the pile-up is `c_N / (c_L + c_N)`: about 1/2 without skid for an instruction
/// event (both retire equally often), at most 1/2 for a time or cycles event (the slow
/// instruction holds its own time), near 1 under skid. Pairs whose `N` starts another
/// basic block (the return site after a call) measure skid across blocks and functions.
///
/// Locked phase (seed 001 §4.2, seed 002 §3.3): every instruction of a basic block retires
/// equally often, so under an instruction event a block's samples spread over its
/// instructions (shifted, not gathered, by a constant skid); a block of at least 4
/// instructions with at least 30 samples, 80% of them on one instruction that is no shadow
/// position, means the period is locked to the loop.
fn code_findings(
    sym: &Symbolizer,
    locs: &[(Location, LocKeys)],
    loc_counts: &[u64],
    fnames: &Names,
    max_functions: usize,
) -> CodeFindings {
    let mut out = CodeFindings::default();
    // Sampled locations per (module, function start).
    let mut by_fn: HashMap<(proftrust_model::ModuleIdx, u64), Vec<u32>> = HashMap::new();
    for (id, (l, _)) in locs.iter().enumerate() {
        let Some(m) = l.module else { continue };
        let Some(f) = sym.binary(m).and_then(|b| b.function_at(l.svma)) else {
            continue;
        };
        by_fn.entry((m, f.start.0)).or_default().push(id as u32);
    }
    let mut fns: Vec<((proftrust_model::ModuleIdx, u64), Vec<u32>)> = by_fn.into_iter().collect();
    let samples_of = |v: &[u32]| v.iter().map(|&i| loc_counts[i as usize]).sum::<u64>();
    fns.sort_by(|a, b| samples_of(&b.1).cmp(&samples_of(&a.1)).then(a.0.cmp(&b.0)));
    fns.truncate(max_functions);
    for ((m, start), ids) in fns {
        let Some(bin) = sym.binary(m) else { continue };
        let Some(func) = bin.function_at(proftrust_model::Svma(start)) else {
            continue;
        };
        let fname = fnames.names[locs[ids[0] as usize].1.function as usize].clone();
        let (instrs, cfg) = match (bin.instructions(func), bin.cfg(func)) {
            (Ok(i), Ok(c)) => (i, c),
            (Err(e), _) | (_, Err(e)) => {
                out.unreadable.push(format!("{fname}: {e}"));
                continue;
            }
        };
        out.functions += 1;
        let count: HashMap<u64, u64> = ids
            .iter()
            .map(|&i| (locs[i as usize].0.svma.0, loc_counts[i as usize]))
            .collect();
        let c = |a: proftrust_model::Svma| count.get(&a.0).copied().unwrap_or(0);
        // Blocks.
        for &id in &ids {
            let a = locs[id as usize].0.svma;
            if let Some(b) = cfg.block_at(a) {
                let start = cfg.blocks[b.0 as usize].start;
                let name = format!("{fname}@{:#x}", start.0);
                let bid = out.blocks.id(name);
                out.block_of.insert(id, bid);
            }
        }
        // Skid shadow.
        let block_start: std::collections::HashSet<u64> =
            cfg.blocks.iter().map(|b| b.start.0).collect();
        let mut shadow_pos: std::collections::HashSet<u64> = std::collections::HashSet::new();
        let fe = out.per_function.entry(fname.clone()).or_default();
        for w in instrs.windows(2) {
            let (l, n) = (&w[0], &w[1]);
            let call = matches!(
                l.flow,
                proftrust_binary::Flow::Call | proftrust_binary::Flow::IndirectCall
            );
            if !(call || (long_latency(l) && l.flow == proftrust_binary::Flow::Next)) {
                continue;
            }
            shadow_pos.insert(n.addr.0);
            let (cl, cn) = (c(l.addr), c(n.addr));
            let across = block_start.contains(&n.addr.0);
            let acc = if across {
                &mut out.across
            } else {
                &mut out.within
            };
            acc.0 += cl + cn;
            acc.1 += cn;
            fe.0 += cl + cn;
            fe.1 += cn;
        }
        // Locked blocks.
        for b in &cfg.blocks {
            if b.instructions.len() < 4 {
                continue;
            }
            let total: u64 = b.instructions.iter().map(|&a| c(a)).sum();
            if total < 30 {
                continue;
            }
            let (top_addr, top) = b
                .instructions
                .iter()
                .map(|&a| (a, c(a)))
                .max_by_key(|x| x.1)
                .unwrap_or((b.start, 0));
            if top as f64 >= 0.8 * total as f64 && !shadow_pos.contains(&top_addr.0) {
                out.locked
                    .push((format!("{fname}@{:#x}", b.start.0), total));
            }
        }
    }
    out
}

/// `c_N / (c_L + c_N)` of [`code_findings`] and whether it shows skid: at least 50 samples on
/// the pairs and 3 standard deviations away from the 1/2 of an instruction event without
/// skid, by at least 1/4. Under an instruction event (`two_sided`) both directions are skid:
/// seed 000's `g(S,m,c)` (eq. 1) ends the skid on the instruction executing when `S` cycles
/// have passed, which is the slow instruction itself when it is reached (samples gather *on*
/// it, as the virtual PMU models), and hardware that reports the next instruction to retire
/// puts them on its successor. Under a time or cycles event the slow instruction rightly
/// holds more than half, so only a pile-up on the successor counts.
fn skid_shows(pair: (u64, u64), two_sided: bool) -> Option<(f64, bool)> {
    let (n, s) = pair;
    if n == 0 {
        return None;
    }
    let f = s as f64 / n as f64;
    let z = (s as f64 - 0.5 * n as f64) / (0.25 * n as f64).sqrt();
    let off = if two_sided {
        (f - 0.5).abs() >= 0.25 && z.abs() >= 3.0
    } else {
        f >= 0.75 && z >= 3.0
    };
    Some((f, n >= 50 && off))
}
