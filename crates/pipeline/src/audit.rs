//! `audit`: can I trust this profile? Samples against exact counts of the same program and
//! input, with metrics, error bars, an optional skid correction and a period sweep.
//!
//! Two inputs ([`AuditInput`]): existing files (samples and exact counts), or a program the
//! audit records with `proftrust-record` and counts exactly with `proftrust-exact` (QEMU
//! plugin or callgrind). The comparison itself is `proftrust_metrics::compare`; the report
//! is `proftrust_report::AuditReport` (text, JSON, HTML renderers there).
//!
//! ```no_run
//! use proftrust_pipeline::audit::{self, AuditInput, AuditOptions};
//!
//! let mut opts = AuditOptions::default();
//! opts.input = AuditInput::Files {
//!     samples: "perf.data".into(),
//!     truth: "callgrind.out.1234".into(),
//! };
//! opts.binaries = vec!["./prog".into()];
//! let report = audit::execute(&opts, &proftrust_pipeline::Silent)?;
//! println!("epsilon = {:?}", report.metrics.epsilon_function);
//! # Ok::<(), proftrust_pipeline::Error>(())
//! ```

use crate::error::{bail, bail_options, Context, Error, Result};
use crate::{load, program, Backend, Events};
use proftrust_binary::Binary;
use proftrust_metrics::{Attribution, CompareOptions, Comparison, TruthWeight};
use proftrust_model::named::Named as _;
use proftrust_model::{
    EventKind, ExactProfile, Module, PeriodMode, RunOutcome, Sample, SampleSet, Svma, Warning,
    WarningKind,
};
use proftrust_report::{
    AuditConfig, AuditReport, CorrectedFunction, CorrectedSide, FunctionRow, InstructionPicture,
    InstructionRow, Metrics, SweepPoint,
};
use proftrust_supervise::StopSignal;
use std::collections::{BTreeMap, HashMap};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// What the audit compares.
#[derive(Debug, Clone, PartialEq)]
pub enum AuditInput {
    /// Existing files: samples (perf.data, `perf script` text, a proftrust sample file) and
    /// exact counts (a callgrind out file or a proftrust exact file).
    Files {
        /// The sample file.
        samples: PathBuf,
        /// The exact-count file.
        truth: PathBuf,
    },
    /// Samples alone, whose branch stacks carry cycle counts: the truth is the time they
    /// measured (`--truth-weight lbr-time`, no exact run).
    Samples {
        /// The sample file.
        samples: PathBuf,
    },
    /// A program and its arguments: recorded, then counted exactly.
    Run {
        /// Program and arguments (the program is looked up on `PATH`).
        command: Vec<OsString>,
    },
    /// An existing sample file (perf.data from `perf record -- PROGRAM`, ...) and the
    /// program that was recorded, which the audit counts exactly (the perf-first workflow).
    SamplesAndRun {
        /// The sample file.
        samples: PathBuf,
        /// Program and arguments, as they were recorded.
        command: Vec<OsString>,
    },
}

/// Settings of [`execute`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct AuditOptions {
    /// What to compare. Default: a run of an empty command (an error: give one).
    pub input: AuditInput,
    /// The binaries whose code is audited. Default: none, meaning the profiled program (or
    /// the module with most samples).
    pub binaries: Vec<PathBuf>,
    /// With [`AuditInput::Files`]: a directory holding the files' modules at their recorded
    /// paths (perf's `--symfs`), tried after `binaries`. Default none.
    pub symfs: Option<PathBuf>,
    /// Sampled event(s) when recording (`cpu-clock`, `task-clock`, `cycles`, `instructions`,
    /// `rHEX`, with `:p` modifiers; several as perf writes them, `instructions,cycles`).
    /// Default `cpu-clock`.
    pub event: String,
    /// Sampling period when recording (events, or ns for clock events). Default: the
    /// recorder's, 100 003 ns for clock events (~10 kHz, [`AUDIT_CLOCK_PERIOD_NS`]).
    pub period: Option<u64>,
    /// Sampling frequency in Hz when recording (the kernel adapts the period), instead of a
    /// period. Default none.
    pub frequency: Option<u64>,
    /// Randomise the period when recording (seed 001 §4). Default false.
    pub randomize: bool,
    /// Seed of every random choice (stored in the report). Default [`crate::DEFAULT_SEED`].
    pub seed: u64,
    /// Exact-count backend when recording. Default [`Backend::Auto`].
    pub backend: Backend,
    /// What the exact side counts. Default instructions.
    pub truth_weight: TruthWeight,
    /// Which time model [`TruthWeight::TimeModel`] uses. Default
    /// [`TimeModelKind::Static`](crate::timemodel::TimeModelKind::Static).
    pub time_model: crate::timemodel::TimeModelKind,
    /// The core the static time model models. Default Intel Golden Cove (LLVM's
    /// `sapphirerapids`).
    pub core: proftrust_uarch::CoreKind,
    /// The static time model charges data-cache misses: the program traced once more under
    /// QEMU with the plugin simulating the caches of
    /// [`CacheCosts`](crate::timemodel::CacheCosts) (docs/audit.md, "Cache misses"). Needs a
    /// program to run. Default false (every load hits L1).
    pub time_caches: bool,
    /// The static time model takes branch mispredictions from a history-based predictor
    /// the QEMU plugin runs on the actual branch outcomes (`QemuOptions::branch_predictor`)
    /// instead of estimating them from outcome frequencies (docs/audit.md, "Branch
    /// mispredictions"). Needs a program to run. Default false.
    pub time_branches: bool,
    /// Periods to sweep (records once per period, fixed and randomised; needs
    /// [`AuditInput::Run`]). Default none.
    pub sweep: Vec<u64>,
    /// Exact share from which a function without samples enters the rank metrics. Default
    /// 0.01.
    pub rank_threshold: f64,
    /// Which event of the samples to compare, by name. Default: the instructions event when
    /// there is one, else the first.
    pub sample_event: Option<String>,
    /// Also undo a skid of this many cycles (seed 000, whole-program flow solver) and report
    /// the corrected profile beside the raw one. Default none.
    pub correct_skid: Option<f64>,
    /// Stop each run of the program after this long. Default none.
    pub timeout: Option<Duration>,
    /// Versions of the tools that made the program (e.g. `gcc`), stored in the report.
    /// Default none.
    pub tool_versions: BTreeMap<String, String>,
    /// Raised to stop the recording or exact run going on (the CLI raises it on SIGINT,
    /// SIGTERM, SIGHUP); the report then holds what there is, marked. Default none.
    pub stop: Option<StopSignal>,
}

impl Default for AuditOptions {
    fn default() -> Self {
        AuditOptions {
            input: AuditInput::Run {
                command: Vec::new(),
            },
            binaries: Vec::new(),
            symfs: None,
            event: "cpu-clock".into(),
            period: None,
            frequency: None,
            randomize: false,
            seed: crate::DEFAULT_SEED,
            backend: Backend::Auto,
            truth_weight: TruthWeight::Instructions,
            time_model: crate::timemodel::TimeModelKind::Static,
            time_caches: false,
            time_branches: false,
            core: proftrust_uarch::CoreKind::GoldenCove,
            sweep: Vec::new(),
            rank_threshold: 0.01,
            sample_event: None,
            correct_skid: None,
            timeout: None,
            tool_versions: BTreeMap::new(),
            stop: None,
        }
    }
}

/// Default period of clock events in `audit`: the recorder's, 100 003 ns (a prime, ~10 kHz),
/// so `record` and `audit` sample alike.
pub const AUDIT_CLOCK_PERIOD_NS: u64 = proftrust_record::DEFAULT_CLOCK_PERIOD_NS;

/// Attribution through the ELF symbols, DWARF inline frames and CFGs of the scope binaries.
struct BinaryAttribution<'a> {
    bins: &'a [Binary],
    /// CFG per (scope module, function start); `None` when it could not be built.
    cfgs: std::cell::RefCell<std::collections::HashMap<(usize, u64), Option<proftrust_model::Cfg>>>,
}

impl Attribution for BinaryAttribution<'_> {
    fn function(&self, m: usize, a: Svma) -> Option<String> {
        self.bins.get(m)?.function_at(a).map(|f| f.name.clone())
    }
    fn innermost(&self, m: usize, a: Svma) -> Option<String> {
        let b = self.bins.get(m)?;
        b.frames(a)
            .into_iter()
            .next()
            .map(|f| f.function)
            .or_else(|| self.function(m, a))
    }
    fn block(&self, m: usize, a: Svma) -> Option<Svma> {
        let b = self.bins.get(m)?;
        let f = b.function_at(a)?;
        let mut cache = self.cfgs.borrow_mut();
        let cfg = cache
            .entry((m, f.start.0))
            .or_insert_with(|| b.cfg(f).ok())
            .as_ref()?;
        cfg.block_at(a).map(|id| cfg.block(id).start)
    }
}

/// The samples of a recording with what the comparison needs to know about its processes.
struct Recorded {
    samples: SampleSet,
    /// The started program's pid.
    pid: Option<u32>,
}

/// Most periods `--sweep` takes (each is recorded twice).
const MAX_SWEEP: usize = 64;

/// What an audit compared, for exports and the HTML page's flame graphs and annotated
/// source ([`execute_with_data`]).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct AuditData {
    /// The samples (all events).
    pub samples: SampleSet,
    /// The compared event of `samples`.
    pub event: u16,
    /// The exact counts.
    pub exact: ExactProfile,
    /// The audited binaries.
    pub binaries: Vec<PathBuf>,
    /// The skid-corrected instruction estimate per location (`correct_skid`), in the
    /// samples' modules.
    pub corrected: Option<std::collections::HashMap<proftrust_model::Location, f64>>,
}

/// Runs the audit: gathers samples and exact counts (reading or recording them), compares
/// them and returns the report. Notes and progress go to `events`. When
/// [`AuditOptions::stop`] is raised, the run going on is stopped and the report holds what
/// there is, marked (`config.interrupted`; samples alone, `truth_missing`, when the exact
/// run had not counted anything yet).
pub fn execute(args: &AuditOptions, events: &dyn Events) -> Result<AuditReport> {
    execute_with_data(args, events).map(|(r, _)| r)
}

/// [`execute`], also returning what was compared. The steps: gather the two sides
/// (`inputs`) and say how their runs ended, pick the compared event and the processes both
/// sides hold, open the audited binaries (`open_scope`), describe the audit
/// (`audit_config`), then report the samples alone when there is no truth
/// (`samples_alone`), else compare (`compared`).
pub fn execute_with_data(
    args: &AuditOptions,
    events: &dyn Events,
) -> Result<(AuditReport, AuditData)> {
    if args.sweep.len() > MAX_SWEEP {
        bail_options!(
            "--sweep: {} periods; at most {MAX_SWEEP} (each is recorded twice)",
            args.sweep.len()
        );
    }
    let mut tool_versions = args.tool_versions.clone();
    let mut warnings = Vec::new();
    // `interrupted`: what an interrupt cut short, for the report: (signal, phase).
    let Inputs {
        mut samples,
        mut exact,
        samples_source,
        truth_source,
        command,
        sweep_cmd,
        interrupted,
        started,
        time_model_used,
    } = inputs(args, &mut tool_versions, &mut warnings, events)?;
    note_runs(&samples, exact.as_ref(), &mut tool_versions, &mut warnings);
    check_not_empty(&samples, exact.as_ref(), interrupted.is_some())?;
    let event_idx = compared_event(args, &samples)?;
    // The same processes on both sides (docs/processes.md, "Process trees").
    let (process_set, process_rows) = crate::processes::compare_same_processes(
        &mut samples,
        exact.as_mut(),
        started,
        event_idx,
        &mut warnings,
    );
    if samples.count_for_event(event_idx) == 0 && interrupted.is_none() {
        bail!("no samples are left to compare once the processes the exact run does not have are left out (see the warnings above); audit a program whose processes both runs follow, or give --truth of the same run");
    }
    let scope = open_scope(args, &samples, event_idx, &command, &mut warnings)?;
    let exact = exact.filter(|e| counted_scope(e, interrupted.is_some(), &scope, &mut warnings));
    let event = samples.events.get(event_idx as usize).cloned();
    let event = event.as_ref();
    event_warnings(args, &samples, event, time_model_used, &mut warnings);
    let config = AuditConfig {
        samples_source,
        truth_source,
        command,
        tool_versions,
        interrupted: interrupted.map(|(sig, phase)| format!("{sig} during {phase}")),
        ..audit_config(args, event, time_model_used, exact.as_ref(), &scope)
    };
    let partial = Partial {
        samples,
        event: event_idx,
        scope,
        config,
        warnings,
        processes: process_rows,
    };
    let sweep = sweep_cmd.as_deref().filter(|_| !args.sweep.is_empty());
    match exact {
        // Interrupted before the exact run: the samples alone.
        None => samples_alone(partial),
        Some(exact) => compared(args, partial, exact, sweep, &process_set, events),
    }
}

/// Whether the exact profile `e` counted anything of the scope; when it did not and the
/// run was `interrupted` (before it counted anything of the binary), the report holds the
/// samples alone, with a warning saying so.
fn counted_scope(
    e: &ExactProfile,
    interrupted: bool,
    scope: &Scope,
    warnings: &mut Vec<Warning>,
) -> bool {
    if interrupted && proftrust_metrics::check_same_program(e, &scope.modules).is_err() {
        warnings.push(Warning::new(WarningKind::EndedEarly, "the exact run was interrupted before it counted anything in the audited binary: the report holds the samples alone"));
        return false;
    }
    true
}

/// The audited binaries: `--binary`, else the one holding the most samples (with the
/// sentence saying so).
struct Scope {
    paths: Vec<PathBuf>,
    /// Why the binary was chosen, when the user did not name it.
    reason: Option<String>,
    bins: Vec<Binary>,
    /// `bins` as the comparison's modules (their paths and build ids).
    modules: Vec<Module>,
}

/// What the report holds before the comparison: the samples of the compared event, the
/// audited binaries, the audit's settings, the warnings so far and the process rows.
struct Partial {
    samples: SampleSet,
    event: u16,
    scope: Scope,
    config: AuditConfig,
    warnings: Vec<Warning>,
    processes: Vec<proftrust_report::ProcessRow>,
}

/// Warnings about how the recording and the exact run ended, and the versions of the
/// tools that made them (the exact backend, the kernel).
fn note_runs(
    samples: &SampleSet,
    exact: Option<&ExactProfile>,
    tool_versions: &mut BTreeMap<String, String>,
    warnings: &mut Vec<Warning>,
) {
    // An interrupt is said where it cut the audit short (the recording or the exact count).
    let failed = |o: &RunOutcome| {
        !matches!(
            o,
            RunOutcome::Exited { code: 0 } | RunOutcome::Interrupted { .. }
        )
    };
    if let Some(outcome) = samples.outcome.as_ref().filter(|o| failed(o)) {
        warnings.extend(outcome.warning("the profiled program", "the samples"));
    }
    if let Some(e) = exact {
        warnings.extend(crate::warnings::exact(e));
        if let Some(o) = e.outcome.as_ref().filter(|o| failed(o)) {
            warnings.extend(o.warning("the exact run's program", "the exact counts"));
        }
        if e.backend == "callgrind" {
            tool_versions
                .entry("valgrind".into())
                .or_insert_with(|| program::tool_version("valgrind", &["--version"]));
        } else if e.backend == "qemu" {
            tool_versions
                .entry("qemu-x86_64".into())
                .or_insert_with(|| program::tool_version(&qemu_path(), &["--version"]));
        }
    }
    if let Ok(k) = std::fs::read_to_string("/proc/sys/kernel/osrelease") {
        tool_versions.insert("linux".into(), k.trim().to_string());
    }
}

/// An error when a side holds nothing at all (unless an interrupt cut the runs short).
fn check_not_empty(
    samples: &SampleSet,
    exact: Option<&ExactProfile>,
    interrupted: bool,
) -> Result<()> {
    if samples.samples.is_empty() && !interrupted {
        bail!(
            "the sample profile is empty (no samples at all{}); profile a longer run or lower the period",
            if samples.lost > 0 {
                format!(", {} lost", samples.lost)
            } else {
                String::new()
            }
        );
    }
    if let Some(e) = exact {
        if e.total_instructions == 0 && e.instructions.is_empty() && !interrupted {
            bail!("the exact profile is empty (no executed instruction); was the truth counted for this program?");
        }
    }
    Ok(())
}

/// Opens the audited binaries ([`Scope`]), warning about those without debug info.
fn open_scope(
    args: &AuditOptions,
    samples: &SampleSet,
    event: u16,
    command: &[String],
    warnings: &mut Vec<Warning>,
) -> Result<Scope> {
    let (paths, reason) = if args.binaries.is_empty() {
        let locator = load::locator(&[], args.symfs.as_deref());
        let (p, why) = default_binary(samples, event, command, &locator)?;
        (vec![p], Some(why))
    } else {
        (args.binaries.clone(), None)
    };
    let mut bins = Vec::new();
    for p in &paths {
        let b = Binary::open(p).with_context(|| {
            format!(
                "cannot open the binary {} (pass the right file with --binary PATH)",
                p.display()
            )
        })?;
        if !b.has_debug_info() {
            warnings.push(Warning::new(WarningKind::MissingDebugInfo, format!(
                "{} has no debug info: inline-level epsilon equals function level (rebuild with -g)",
                p.display()
            )));
        }
        bins.push(b);
    }
    let modules = bins
        .iter()
        .map(|b| Module {
            path: b.path().display().to_string(),
            build_id: b.build_id().cloned(),
            load_bias: 0,
        })
        .collect();
    Ok(Scope {
        paths,
        reason,
        bins,
        modules,
    })
}

/// Warnings about the compared event: other events, lost samples, and what the truth
/// weight measures next to it.
fn event_warnings(
    args: &AuditOptions,
    samples: &SampleSet,
    event: Option<&proftrust_model::EventDesc>,
    time_model_used: crate::timemodel::TimeModelKind,
    warnings: &mut Vec<Warning>,
) {
    let weight = args.truth_weight;
    if samples.events.len() > 1 {
        warnings.push(Warning::new(
            WarningKind::Scope,
            format!(
                "the samples hold {} events; comparing {} (--sample-event picks another)",
                samples.events.len(),
                event.map(|e| e.name.as_str()).unwrap_or("?")
            ),
        ));
    }
    if samples.lost > 0 {
        warnings.push(Warning::new(
            WarningKind::Lost,
            format!(
                "{} samples were lost by the kernel (ring buffer overflow)",
                samples.lost
            ),
        ));
    }
    let time_based = event.map(|e| e.kind.is_time_based()).unwrap_or(false);
    if time_based && weight == TruthWeight::Instructions {
        warnings.push(Warning::new(WarningKind::Cpi, format!(
            "{} samples measure time while the truth counts instructions: differences in CPI between functions show up as 'error' (try --truth-weight time-model, or cycles-estimate with the callgrind backend)",
            event.map(|e| e.name.as_str()).unwrap_or("time-based")
        )));
    }
    if weight == TruthWeight::CyclesEstimate {
        warnings.push(Warning::new(WarningKind::TruthModel, "the cycle estimate charges every simulated cache miss in full: it ignores memory-level parallelism and out-of-order overlap, so independent misses (streams, scattered stores) weigh too much next to dependent ones (pointer chases)"));
    }
    if weight == TruthWeight::TimeModel {
        warnings.push(Warning::new(WarningKind::TruthModel, match time_model_used {
            crate::timemodel::TimeModelKind::Static => format!("the time truth is a model, not a measurement: each block's cycles come from an out-of-order model of {} with register and store-to-load dependencies and a simple branch predictor, {}, validated against native timing of dependency-chain kernels (docs/audit.md)", proftrust_uarch::Core::new(args.core).name, if args.time_caches { "data-cache misses from a simulation of the run's loads (of the front end only its one taken branch per cycle)" } else { "every load an L1 hit (no caches; of the front end only its one taken branch per cycle)" }),
            crate::timemodel::TimeModelKind::Trace => "the time truth is a model, not a measurement: each instruction's cycles come from proftrust's out-of-order approximation with simulated caches (no data dependencies, branch prediction or front end), validated on hand-worked traces and by how far it lowers epsilon against cpu-clock samples (docs/audit.md)".into(),
        }));
    }
}

/// The audit's settings as the report states them, from the options, the compared event,
/// the truth and the scope; where the sides came from (sources, command, tool versions,
/// interrupt) is left to the caller.
fn audit_config(
    args: &AuditOptions,
    event: Option<&proftrust_model::EventDesc>,
    time_model_used: crate::timemodel::TimeModelKind,
    exact: Option<&ExactProfile>,
    scope: &Scope,
) -> AuditConfig {
    let weight = args.truth_weight;
    let (period, frequency_hz, randomized) = match event.map(|e| &e.config) {
        Some(c) => (
            match c.period {
                PeriodMode::Fixed(p) => Some(p),
                _ => None,
            },
            match c.period {
                PeriodMode::Frequency(hz) => Some(hz),
                _ => None,
            },
            c.randomize_max.is_some(),
        ),
        None => (None, None, false),
    };
    AuditConfig {
        proftrust_version: env!("CARGO_PKG_VERSION").to_string(),
        seed: event.and_then(|e| e.config.seed).unwrap_or(args.seed),
        truth_weight: weight.name().to_string(),
        truth_weight_formula: match weight {
            TruthWeight::CyclesEstimate => Some(proftrust_metrics::CYCLES_FORMULA.to_string()),
            TruthWeight::TimeModel => Some(match time_model_used {
                crate::timemodel::TimeModelKind::Static => crate::timemodel::formula(
                    &proftrust_uarch::Core::new(args.core),
                    args.time_caches,
                    args.time_branches,
                ),
                crate::timemodel::TimeModelKind::Trace => TIME_MODEL_FORMULA.to_string(),
            }),
            TruthWeight::LbrTime => Some(LBR_TIME_FORMULA.to_string()),
            TruthWeight::Instructions => None,
        },
        event: event
            .map(|e| e.name.clone())
            .unwrap_or_else(|| "unknown".into()),
        period,
        frequency_hz,
        randomized,
        truth_backend: match exact {
            Some(e) if e.backend_detail.is_empty() => e.backend.clone(),
            Some(e) => format!("{} ({})", e.backend, e.backend_detail),
            None => "none".into(),
        },
        binary: scope
            .modules
            .iter()
            .map(|m| m.path.clone())
            .collect::<Vec<_>>()
            .join(", "),
        binary_reason: scope.reason.clone(),
        build_id: scope.modules[0].build_id.as_ref().map(|b| b.to_hex()),
        rank_threshold: args.rank_threshold,
        truth_missing: false,
        ..Default::default()
    }
}

/// The report of samples without a truth (an interrupt before the exact run counted
/// anything): sampled shares with their Wilson intervals.
fn samples_alone(mut p: Partial) -> Result<(AuditReport, AuditData)> {
    let (samples, event, scope) = (&p.samples, p.event, &p.scope);
    let attr = BinaryAttribution {
        bins: &scope.bins,
        cfgs: Default::default(),
    };
    // An interrupt in the first moments of the recording can leave samples of the loader
    // alone: nothing of the binary yet is a report with no rows, not an error.
    let (per, elsewhere) =
        match proftrust_metrics::sampled_functions(samples, &scope.modules, &attr, event) {
            Err(proftrust_metrics::Error::BinaryNotInProfile { .. }) => (
                Vec::new(),
                samples.samples.iter().filter(|s| s.event == event).count() as u64,
            ),
            r => r.context("cannot attribute the samples")?,
        };
    if elsewhere > 0 {
        let warning = elsewhere_warning(samples, event, &scope.modules, elsewhere);
        p.warnings.push(Warning::new(WarningKind::Scope, warning));
    }
    let n: u64 = per.iter().map(|(_, c)| c).sum();
    p.config.truth_missing = true;
    let report = AuditReport {
        attribution: scope_attribution(&p.samples, event, &p.scope.modules, &p.scope.bins),
        config: p.config,
        metrics: proftrust_report::Metrics {
            samples: n,
            samples_elsewhere: elsewhere,
            ..Default::default()
        },
        functions: per
            .into_iter()
            .map(|(name, c)| {
                let (lo, hi) = proftrust_metrics::wilson_interval(c, n, proftrust_metrics::Z_95);
                FunctionRow {
                    name,
                    samples: c,
                    sampled_share: c as f64 / n.max(1) as f64,
                    ci_low: lo,
                    ci_high: hi,
                    ..Default::default()
                }
            })
            .collect(),
        hottest: None,
        sweep: Vec::new(),
        warnings: p.warnings,
        corrected: None,
        processes: p.processes,
    };
    let data = AuditData {
        samples: p.samples,
        event,
        exact: ExactProfile::default(),
        binaries: p.scope.paths,
        corrected: None,
    };
    Ok((report, data))
}

/// The report of samples against the truth: the comparison, its warnings, the skid
/// correction (`--correct-skid`) and the period sweep (`sweep`: the command to record
/// again, with `--sweep`), the last two skipped when the audit was interrupted.
fn compared(
    args: &AuditOptions,
    p: Partial,
    exact: ExactProfile,
    sweep: Option<&[OsString]>,
    process_set: &crate::processes::ProcessSet,
    events: &dyn Events,
) -> Result<(AuditReport, AuditData)> {
    let Partial {
        samples,
        event,
        scope,
        mut config,
        mut warnings,
        processes,
    } = p;
    let interrupted = config.interrupted.is_some();
    let attr = BinaryAttribution {
        bins: &scope.bins,
        cfgs: Default::default(),
    };
    let mut opts = CompareOptions::default();
    opts.event = event;
    opts.truth_weight = args.truth_weight;
    opts.rank_threshold = args.rank_threshold;
    let truth: TruthSide = (&exact, &scope.modules, &attr, &opts);
    let cmp = proftrust_metrics::compare(&samples, &exact, &scope.modules, &attr, &opts)
        .context("cannot compare the samples with the truth")?;
    comparison_warnings(&cmp, &samples, event, &scope.modules, &mut warnings);
    let (corrected, corrected_counts) = match args.correct_skid {
        Some(_) if interrupted => {
            warnings.push(Warning::new(
                WarningKind::EndedEarly,
                "--correct-skid skipped: the audit was interrupted",
            ));
            (None, None)
        }
        Some(skid) => {
            let (side, counts) =
                corrected_side(&samples, &scope.paths, skid, args.seed, truth, events)?;
            (Some(side), Some(counts))
        }
        None => (None, None),
    };
    // Sweep: one recording per period, fixed and randomised; the truth is reused.
    let sweep = match sweep {
        Some(_) if interrupted => {
            warnings.push(Warning::new(
                WarningKind::EndedEarly,
                "--sweep skipped: the audit was interrupted",
            ));
            Vec::new()
        }
        Some(cmd) => {
            let (points, stopped) =
                sweep_periods(cmd, args, process_set, truth, &mut warnings, events)?;
            config.interrupted = stopped.or(config.interrupted);
            points
        }
        None => Vec::new(),
    };
    let report = AuditReport {
        attribution: scope_attribution(&samples, event, &scope.modules, &scope.bins),
        config,
        metrics: metrics_of(&cmp, &opts),
        functions: rows_of(&cmp),
        hottest: picture_of(&cmp, &scope.bins),
        sweep,
        warnings,
        corrected,
        processes,
    };
    let data = AuditData {
        samples,
        event,
        exact,
        binaries: scope.paths,
        corrected: corrected_counts,
    };
    Ok((report, data))
}

/// Warnings about the comparison: samples outside the binary, too few samples for a
/// verdict, blocks without a CFG.
fn comparison_warnings(
    cmp: &Comparison,
    samples: &SampleSet,
    event: u16,
    scope: &[Module],
    warnings: &mut Vec<Warning>,
) {
    if cmp.samples_elsewhere > 0 {
        warnings.push(Warning::new(
            WarningKind::Scope,
            elsewhere_warning(samples, event, scope, cmp.samples_elsewhere),
        ));
    }
    if cmp.samples < proftrust_metrics::evidence::MIN_SAMPLES {
        warnings.push(Warning::new(WarningKind::FewSamples, format!(
            "only {} samples in the audited binary: too few for any verdict ({} needed: a share's standard deviation is up to 0.5/sqrt(N), paper 002 §3.5 eq. 9, so below 100 every share is uncertain by more than ±10 points); profile a longer run (--size, a bigger input) or sample more often (--period)",
            cmp.samples,
            proftrust_metrics::evidence::MIN_SAMPLES
        )));
    }
    if !cmp.static_blocks {
        warnings.push(Warning::new(WarningKind::Cfg, "no CFG could be built: blocks for epsilon_block are derived from the exact profile (count changes, and edges where the truth has them)"));
    }
}

/// The period sweep: `cmd` recorded once per period of `--sweep`, fixed and randomised,
/// each recording compared with the same truth. Returns the points and, when an interrupt
/// stopped the sweep, what it cut short (`SIGINT during the sweep`; the points before it
/// are kept).
///
/// Minimum evidence (crates/metrics `evidence::MIN_SAMPLES`, seed 002 §3.5 eq. 9): a point
/// with fewer samples is noise of ±10 points or more, so it is not plotted, and a period at
/// which the events seen so far (samples × period of the recorded points) predict fewer
/// samples is not recorded at all.
fn sweep_periods(
    cmd: &[OsString],
    args: &AuditOptions,
    process_set: &crate::processes::ProcessSet,
    (exact, scope, attr, opts): TruthSide<'_>,
    warnings: &mut Vec<Warning>,
    events: &dyn Events,
) -> Result<(Vec<SweepPoint>, Option<String>)> {
    let stop = args.stop.clone().unwrap_or_default();
    let pb = events.task(Some(2 * args.sweep.len() as u64), "sweep");
    let min = proftrust_metrics::evidence::MIN_SAMPLES;
    let mut events_seen: f64 = 0.0;
    let (mut sweep, mut skipped, mut too_few, mut stopped) =
        (Vec::new(), Vec::new(), Vec::new(), None);
    'sweep: for &p in &args.sweep {
        if events_seen > 0.0 && events_seen / (p as f64) < min as f64 {
            skipped.push(p);
            pb.inc(2);
            continue;
        }
        for randomized in [false, true] {
            // The program's output was shown by the main recording: not again per point.
            let mut r = record_once(cmd, args, Some(p), randomized, true, &stop, events)?;
            if let Some(RunOutcome::Interrupted { name, .. }) = &r.samples.outcome {
                warnings.push(Warning::new(WarningKind::EndedEarly, format!(
                    "the sweep was interrupted ({name}) at period {p}{}: the points before it are kept",
                    if randomized { " randomised" } else { "" }
                )));
                stopped = Some(format!("{name} during the sweep"));
                break 'sweep;
            }
            crate::processes::keep_compared(&mut r.samples, process_set, r.pid);
            let compared = proftrust_metrics::compare(&r.samples, exact, scope, attr, opts);
            let (point, few) = sweep_point(compared, p, randomized)?;
            if few {
                too_few.push(p);
            }
            events_seen = events_seen.max(point.samples as f64 * p as f64);
            sweep.push(point);
            pb.inc(1);
        }
    }
    pb.finish();
    too_few.dedup();
    if !too_few.is_empty() {
        warnings.push(Warning::new(WarningKind::FewSamples, format!(
            "--sweep: at period(s) {} fewer than {min} samples landed in the binary; their metrics are left out (noise of ±10 points or more, paper 002 §3.5 eq. 9)",
            join_periods(&too_few)
        )));
    }
    if !skipped.is_empty() {
        warnings.push(Warning::new(WarningKind::FewSamples, format!(
            "--sweep: period(s) {} not recorded: the shorter periods' samples × period predict fewer than {min} samples there (paper 002 §3.5 eq. 9); use shorter periods or a longer run",
            join_periods(&skipped)
        )));
    }
    Ok((sweep, stopped))
}

/// One point of the sweep from its comparison: the metrics when at least
/// `evidence::MIN_SAMPLES` samples landed in the binary, else the sample count alone and
/// `true` (too few; not when the binary has no samples at all).
fn sweep_point(
    compared: std::result::Result<Comparison, proftrust_metrics::Error>,
    period: u64,
    randomized: bool,
) -> Result<(SweepPoint, bool)> {
    let bare = |samples| SweepPoint {
        period,
        randomized,
        samples,
        ..Default::default()
    };
    match compared {
        Ok(c) if c.samples < proftrust_metrics::evidence::MIN_SAMPLES => {
            Ok((bare(c.samples), true))
        }
        Ok(c) => Ok((
            SweepPoint {
                period,
                randomized,
                samples: c.samples,
                nrmse_sr: Some(c.hotspot.nrmse_sr),
                sc: Some(c.hotspot.sc),
                od: Some(c.hotspot.od),
                od_prose: Some(c.hotspot.od_prose),
                epsilon_function: Some(c.epsilon_function),
            },
            false,
        )),
        Err(proftrust_metrics::Error::NoSamplesInBinary { .. }) => Ok((bare(0), false)),
        Err(e) => Err(e).context("sweep comparison failed"),
    }
}

/// The event of the samples to compare: `--sample-event`, else the instructions event when
/// it has samples, else the first event with samples.
fn compared_event(args: &AuditOptions, samples: &SampleSet) -> Result<u16> {
    let i = match &args.sample_event {
        Some(name) => samples.event_named(name).context("--sample-event")? as usize,
        // An instructions event that has samples, else the first event with samples (a
        // hybrid CPU's first event is often empty).
        None => (0..samples.events.len())
            .find(|&i| {
                samples.events[i].kind == EventKind::Instructions
                    && samples.count_for_event(i as u16) > 0
            })
            .unwrap_or_else(|| usize::from(samples.default_event().unwrap_or(0))),
    };
    Ok(i as u16)
}

/// How the samples of event `event` in each audited binary are attributed: a named
/// function, one recovered from an FDE (`gawk!sub_46dd00`), or none (the same rule as
/// `Symbolizer::attribution`, on the scope's binaries).
fn scope_attribution(
    samples: &SampleSet,
    event: u16,
    scope: &[Module],
    bins: &[Binary],
) -> Vec<proftrust_model::ModuleAttribution> {
    let mut per: Vec<proftrust_model::ModuleAttribution> = scope
        .iter()
        .map(|m| proftrust_model::ModuleAttribution {
            module: m.file_name().to_string(),
            ..Default::default()
        })
        .collect();
    let which: HashMap<proftrust_model::ModuleIdx, usize> = samples
        .modules
        .iter()
        .filter_map(|(i, m)| Some((i, scope.iter().position(|s| s.same_binary(m))?)))
        .collect();
    for s in samples.samples.iter().filter(|s| s.event == event) {
        let Some(&j) = s.ip.module.and_then(|m| which.get(&m)) else {
            continue;
        };
        let a = match bins[j].function_at(s.ip.svma) {
            Some(f) if f.origin.is_named() => proftrust_model::Attribution::Named,
            Some(_) => proftrust_model::Attribution::Recovered,
            None => proftrust_model::Attribution::Unattributed,
        };
        per[j].add(a, 1);
    }
    per
}

/// Share `n / total` as a percentage with two decimals.
fn pct(n: u64, total: u64) -> String {
    format!("{:.2}%", 100.0 * n as f64 / total.max(1) as f64)
}

/// Whether the ELF file at `path` is a program (it has an interpreter and is not named as
/// a shared library): a sample there outside the audited binary belongs to another program,
/// such as an image the audited one exec'd.
fn is_program(path: &str) -> bool {
    use object::Object;
    let name = path.rsplit('/').next().unwrap_or(path);
    if name.contains(".so") {
        return false;
    }
    let Ok(data) = std::fs::read(path) else {
        return false;
    };
    let Ok(f) = object::File::parse(&*data) else {
        return false;
    };
    f.kind() == object::ObjectKind::Executable || f.section_by_name(".interp").is_some()
}

/// "N of M samples lie outside the audited binary and are not compared: libc.so.6 3.10%,
/// (kernel or unmapped) 0.40%, /usr/bin/sort 1.2% (another program)": the modules that hold
/// them, largest first; when shared libraries hold at least 1% of the samples, the exact
/// `--binary` flags that audit them too.
fn elsewhere_warning(samples: &SampleSet, event: u16, scope: &[Module], n: u64) -> String {
    let mut per: BTreeMap<Option<u32>, u64> = BTreeMap::new();
    let mut total = 0u64;
    for s in samples.samples.iter().filter(|s| s.event == event) {
        total += 1;
        let m = s.ip.module.and_then(|m| {
            let module = samples.modules.get(m)?;
            (!scope.iter().any(|x| x.same_binary(module))).then_some(m.0)
        });
        let outside = match s.ip.module {
            None => true,
            Some(_) => m.is_some(),
        };
        if outside {
            *per.entry(m).or_default() += 1;
        }
    }
    let mut v: Vec<(Option<u32>, u64)> = per.into_iter().collect();
    v.sort_by_key(|b| std::cmp::Reverse(b.1));
    let parts: Vec<String> = v
        .iter()
        .take(5)
        .map(|(m, c)| {
            let what = match m.and_then(|m| samples.modules.get(proftrust_model::ModuleIdx(m))) {
                Some(module) if is_program(&module.path) => {
                    format!("{} (another program)", module.path)
                }
                Some(module) => module.file_name().to_string(),
                None => "(kernel or unmapped)".to_string(),
            };
            format!("{what} {}", pct(*c, total))
        })
        .collect();
    let libraries: Vec<&str> = v
        .iter()
        .filter(|(_, c)| *c as f64 >= 0.01 * total as f64)
        .filter_map(|(m, _)| samples.modules.get(proftrust_model::ModuleIdx((*m)?)))
        .filter(|module| !module.path.starts_with('[') && !is_program(&module.path))
        .map(|module| module.path.as_str())
        .collect();
    let hint = match (libraries.is_empty(), scope.first()) {
        (false, Some(program)) => format!(
            "; to audit the shared libraries too, add them: --binary {}{}",
            shell_word(&program.path),
            libraries
                .iter()
                .map(|l| format!(" --binary {}", shell_word(l)))
                .collect::<String>()
        ),
        _ => String::new(),
    };
    format!(
        "{n} of {total} samples lie outside the audited binary and are not compared: {}{}{hint}",
        parts.join(", "),
        if v.len() > 5 { ", ..." } else { "" }
    )
}

/// A path as a shell word: as is when it holds only safe characters, else single-quoted.
fn shell_word(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+,:=@".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// The truth side of a comparison: exact profile, scope, attribution, options.
type TruthSide<'a> = (
    &'a ExactProfile,
    &'a [Module],
    &'a BinaryAttribution<'a>,
    &'a CompareOptions,
);

/// The audit's two sides, read from files or made by running the program, with where they
/// came from and the command (for a sweep, the one to record again).
struct Inputs {
    samples: SampleSet,
    /// None when an interrupt came before the exact run.
    exact: Option<ExactProfile>,
    samples_source: String,
    truth_source: String,
    command: Vec<String>,
    sweep_cmd: Option<Vec<OsString>>,
    /// What an interrupt cut short: (signal, phase).
    interrupted: Option<(String, &'static str)>,
    /// The started program's pid in a recording proftrust made (the root of its process
    /// tree); `None` for a file.
    started: Option<u32>,
    /// The time model the truth's time column comes from.
    time_model_used: crate::timemodel::TimeModelKind,
}

/// Step 1: the samples and the exact counts: read from files, recorded and counted, or a
/// sample file with the program counted here.
fn inputs(
    args: &AuditOptions,
    tool_versions: &mut BTreeMap<String, String>,
    warnings: &mut Vec<Warning>,
    events: &dyn Events,
) -> Result<Inputs> {
    if args.time_branches
        && (args.truth_weight != TruthWeight::TimeModel
            || args.time_model != crate::timemodel::TimeModelKind::Static
            || !matches!(args.input, AuditInput::Run { .. }))
    {
        bail_options!("--time-branches runs the program's branches through a predictor under QEMU for the static time model: use it with --truth-weight time-model and the program after `--` (or --workload)");
    }
    if args.time_caches {
        if args.truth_weight != TruthWeight::TimeModel
            || args.time_model != crate::timemodel::TimeModelKind::Static
        {
            bail_options!("--time-caches adds data-cache misses to the static time model: use it with --truth-weight time-model (--time-model static, the default)");
        }
        if !matches!(args.input, AuditInput::Run { .. }) {
            bail_options!("--time-caches traces the program's data accesses under QEMU: give the program after `--` (or --workload) instead of --samples/--truth");
        }
    }
    match &args.input {
        AuditInput::Files { samples, truth } => file_inputs(args, samples, truth, warnings, events),
        AuditInput::Samples { samples } => lbr_inputs(args, samples, warnings, events),
        AuditInput::SamplesAndRun { samples, command } => {
            samples_and_run_inputs(args, samples, command, tool_versions, warnings, events)
        }
        AuditInput::Run { command } => run_inputs(args, command, tool_versions, warnings, events),
    }
}

/// `--samples FILE --truth FILE`.
fn file_inputs(
    args: &AuditOptions,
    sf: &Path,
    tf: &Path,
    warnings: &mut Vec<Warning>,
    events: &dyn Events,
) -> Result<Inputs> {
    if !args.sweep.is_empty() {
        bail_options!("--sweep records the program once per period; give the program after `--` (or --workload) instead of --samples/--truth");
    }
    let weight = args.truth_weight;
    let mut time_model_used = args.time_model;
    let locator = load::locator(&args.binaries, args.symfs.as_deref());
    let s = load::samples_with(sf, &locator, events)?;
    let mut e = load::exact_with(tf, &locator, events)?;
    if weight == TruthWeight::TimeModel
        && args.time_model == crate::timemodel::TimeModelKind::Static
        && !e.edges.is_empty()
    {
        // A truth with edges: time its blocks here (a virtual PMU's truth, which has its
        // own time column and no edges, is compared as it is).
        let core = proftrust_uarch::Core::new(args.core);
        let locate = |m: &Module| {
            locator
                .locate(&m.path, m.build_id.as_ref())
                .binary
                .map(|b| b.path().to_path_buf())
        };
        let summary = crate::timemodel::add_time_column(&mut e, &core, &[], &locate, events)?;
        events.note(&crate::timemodel::summary_note(&core, &summary));
    } else if weight == TruthWeight::TimeModel {
        time_model_used = crate::timemodel::TimeModelKind::Trace;
    }
    if weight == TruthWeight::LbrTime {
        e = lbr_side(&s, Some(e), &locator, warnings, events)?;
    }
    let command = s.command.clone();
    Ok(Inputs {
        samples: s,
        exact: Some(e),
        samples_source: sf.display().to_string(),
        truth_source: tf.display().to_string(),
        command,
        sweep_cmd: None,
        interrupted: None,
        started: None,
        time_model_used,
    })
}

/// The program of a command made absolute and checked as `execve` would take it, before
/// any long run: missing, not executable, an empty or text file, a missing `#!`
/// interpreter are refused here.
fn checked_command(cmd: &[OsString]) -> Result<Vec<OsString>> {
    let mut cmd = cmd.to_vec();
    if cmd.is_empty() {
        bail_options!("nothing to audit: give a program after `--` (proftrust audit -- ./prog args), --workload NAME, or --samples FILE [--truth FILE]");
    }
    cmd[0] = program::find_absolute(&cmd[0])?.into_os_string();
    proftrust_exact::plan(&cmd).context("the program cannot be run")?;
    Ok(cmd)
}

/// `--samples FILE -- PROGRAM`: the samples read, the program counted exactly here.
fn samples_and_run_inputs(
    args: &AuditOptions,
    sf: &Path,
    cmd: &[OsString],
    tool_versions: &mut BTreeMap<String, String>,
    warnings: &mut Vec<Warning>,
    events: &dyn Events,
) -> Result<Inputs> {
    if !args.sweep.is_empty() {
        bail_options!("--sweep records the program once per period; drop --samples to let the audit record it");
    }
    let cmd = checked_command(cmd)?;
    let locator = load::locator(&args.binaries, args.symfs.as_deref());
    let s = load::samples_with(sf, &locator, events)?;
    if s.samples.is_empty() {
        bail!(
            "{}: the sample file holds no samples; nothing to audit",
            sf.display()
        );
    }
    let stop = args.stop.clone().unwrap_or_default();
    let (mut e, interrupted) = exact_side(&cmd, args, tool_versions, warnings, &stop, events)?;
    if args.truth_weight == TruthWeight::LbrTime {
        e = lbr_side(&s, Some(e), &locator, warnings, events)?;
    }
    Ok(Inputs {
        command: lossy(&cmd),
        samples: s,
        truth_source: format!("an exact run under {}", e.backend),
        exact: Some(e),
        samples_source: sf.display().to_string(),
        sweep_cmd: None,
        interrupted,
        started: None,
        time_model_used: args.time_model,
    })
}

/// `--samples FILE --truth-weight lbr-time`: the samples' branch stacks are the truth.
fn lbr_inputs(
    args: &AuditOptions,
    sf: &Path,
    warnings: &mut Vec<Warning>,
    events: &dyn Events,
) -> Result<Inputs> {
    if args.truth_weight != TruthWeight::LbrTime {
        bail_options!("--samples without --truth: give the truth file (--truth FILE), the program that was recorded after `--`, or --truth-weight lbr-time when the samples carry branch stacks with cycle counts");
    }
    if !args.sweep.is_empty() {
        bail_options!("--sweep records the program once per period; give the program after `--` (or --workload)");
    }
    let locator = load::locator(&args.binaries, args.symfs.as_deref());
    let s = load::samples_with(sf, &locator, events)?;
    let e = lbr_side(&s, None, &locator, warnings, events)?;
    Ok(Inputs {
        command: s.command.clone(),
        samples: s,
        exact: Some(e),
        samples_source: sf.display().to_string(),
        truth_source: "the samples' branch stacks (no exact run)".to_string(),
        sweep_cmd: None,
        interrupted: None,
        started: None,
        time_model_used: args.time_model,
    })
}

/// `-- PROGRAM`: recorded, then counted exactly (the recording first: a run that gives no
/// sample stops the audit before the exact run).
fn run_inputs(
    args: &AuditOptions,
    cmd: &[OsString],
    tool_versions: &mut BTreeMap<String, String>,
    warnings: &mut Vec<Warning>,
    events: &dyn Events,
) -> Result<Inputs> {
    let cmd = checked_command(cmd)?;
    let stop = args.stop.clone().unwrap_or_default();
    let r = record_once(
        &cmd,
        args,
        args.period,
        args.randomize,
        false,
        &stop,
        events,
    )?;
    let s = r.samples;
    let (e, interrupted) = if let Some(o @ RunOutcome::Interrupted { name, .. }) = &s.outcome {
        warnings.push(Warning::new(WarningKind::EndedEarly, format!(
            "the recording was {o}: no exact count was made; the report holds the samples of the run up to then"
        )));
        (None, Some((name.clone(), "the recording")))
    } else {
        if s.samples.is_empty() {
            bail!(
                "the recording holds no samples (the run took {}; {}): profile a longer run or lower the period (-c); no exact run was made",
                s.outcome.as_ref().map_or("an unknown time".to_string(), |o| o.to_string()),
                match args.period {
                    Some(p) => format!("one sample every {p} events or ns"),
                    None => "the default period".into(),
                }
            );
        }
        let (mut e, i) = exact_side(&cmd, args, tool_versions, warnings, &stop, events)?;
        if args.truth_weight == TruthWeight::LbrTime {
            let locator = load::locator(&args.binaries, args.symfs.as_deref());
            e = lbr_side(&s, Some(e), &locator, warnings, events)?;
        }
        (Some(e), i)
    };
    let truth_source = match &e {
        Some(e) => format!("an exact run under {}", e.backend),
        None => "none (interrupted before the exact run)".to_string(),
    };
    Ok(Inputs {
        samples: s,
        exact: e,
        samples_source: "a perf_event_open recording".to_string(),
        truth_source,
        command: lossy(&cmd),
        sweep_cmd: Some(cmd),
        interrupted,
        started: r.pid,
        time_model_used: args.time_model,
    })
}

/// The exact count of `cmd` with the warnings it brings, and whether an interrupt cut it.
fn exact_side(
    cmd: &[OsString],
    args: &AuditOptions,
    tool_versions: &mut BTreeMap<String, String>,
    warnings: &mut Vec<Warning>,
    stop: &StopSignal,
    events: &dyn Events,
) -> Result<(ExactProfile, Option<(String, &'static str)>)> {
    let (e, backend_note) = count_exact(cmd, args, args.truth_weight, tool_versions, stop, events)?;
    if let Some(n) = backend_note {
        warnings.push(Warning::new(WarningKind::Backend, n));
    }
    let mut interrupted = None;
    if let Some(o @ RunOutcome::Interrupted { name, .. }) = &e.outcome {
        interrupted = Some((name.clone(), "the exact count"));
        warnings.push(Warning::new(WarningKind::EndedEarly, format!(
            "the exact count was {o}: the truth covers only the first part of the run while the samples cover all of it, so the metrics are not a verdict on the profile"
        )));
    }
    Ok((e, interrupted))
}

/// A command line as text.
fn lossy(cmd: &[OsString]) -> Vec<String> {
    cmd.iter()
        .map(|c| c.to_string_lossy().into_owned())
        .collect()
}

/// `--correct-skid`: undoes the skid with the whole-program flow solver (`proftrust_skid`,
/// seed 000 §2) and compares the corrected instruction estimates with the same truth. The
/// estimates enter the comparison as a sample set of the instruction event with
/// `round(count / period)` samples per address, so every metric is computed the same way
/// as for the raw samples.
fn corrected_side(
    samples: &SampleSet,
    binaries: &[PathBuf],
    skid: f64,
    seed: u64,
    (exact, scope, attr, opts): TruthSide<'_>,
    events: &dyn Events,
) -> Result<(
    CorrectedSide,
    std::collections::HashMap<proftrust_model::Location, f64>,
)> {
    use proftrust_skid::program::{correct_profile, ProgramOptions, SampledProfile};
    let prof = SampledProfile::from_sample_set(samples).context(
        "--correct-skid needs instruction and cycle samples of one run (a `proftrust vpmu` file, or perf.data from `perf record -e instructions,cycles`)",
    )?;
    let sym = proftrust_binary::Symbolizer::new(&prof.modules, binaries);
    // Model the audited binaries only (as `proftrust correct --binary`).
    let modelled: Vec<_> = prof
        .modules
        .iter()
        .filter(|(i, _)| {
            sym.binary(*i)
                .is_some_and(|b| binaries.iter().any(|p| b.path() == p.as_path()))
        })
        .map(|(i, _)| i)
        .collect();
    if modelled.is_empty() {
        bail!("--correct-skid: no module of the samples is an audited binary (matched by build-id, else file name)");
    }
    let mut o = ProgramOptions::default();
    o.skid = skid;
    o.seed = seed;
    o.modules = Some(modelled);
    let pb = events.task(None, "correcting skid");
    let cor = crate::with_big_stack(|| correct_profile(&prof, &sym, &o))?
        .context("skid correction failed")?;
    pb.finish();
    let ev = samples
        .events
        .iter()
        .position(|e| e.kind == EventKind::Instructions)
        .context("no instructions event")?;
    let period = samples
        .samples
        .iter()
        .find(|s| s.event as usize == ev)
        .map_or(1, |s| s.period.max(1));
    let mut set = SampleSet {
        modules: samples.modules.clone(),
        events: vec![samples.events[ev].clone()],
        ..SampleSet::default()
    };
    let mut locs: Vec<_> = cor.corrected.iter().collect();
    locs.sort_by_key(|(l, _)| **l);
    for (&loc, &count) in locs {
        let n = (count / period as f64).round() as u64;
        for _ in 0..n {
            set.samples.push(Sample {
                event: 0,
                pid: 0,
                tid: 0,
                time: 0,
                cpu: 0,
                period,
                ip: loc,
                callchain: Vec::new(),
                branches: Vec::new(),
            });
        }
    }
    let mut opts = opts.clone();
    opts.event = 0;
    let c = proftrust_metrics::compare(&set, exact, scope, attr, &opts)
        .context("cannot compare the corrected profile with the truth")?;
    let total: f64 = c.functions.iter().map(|f| f.samples as f64).sum();
    let side = CorrectedSide {
        skid,
        method: format!("{:?}", cor.method).to_lowercase(),
        metrics: metrics_of(&c, &opts),
        functions: c
            .functions
            .iter()
            .map(|f| CorrectedFunction {
                name: f.name.clone(),
                corrected_instructions: f.samples as f64 * period as f64,
                corrected_share: if total > 0.0 {
                    f.samples as f64 / total
                } else {
                    0.0
                },
            })
            .collect(),
    };
    Ok((side, cor.corrected))
}

/// `64K, 1M, ...` for a warning.
fn join_periods(ps: &[u64]) -> String {
    ps.iter()
        .map(|p| p.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

fn metrics_of(c: &Comparison, opts: &CompareOptions) -> Metrics {
    Metrics {
        nrmse_sr: Some(c.hotspot.nrmse_sr),
        sc: Some(c.hotspot.sc),
        od: Some(c.hotspot.od),
        od_prose: Some(c.hotspot.od_prose),
        epsilon_function: Some(c.epsilon_function),
        epsilon_inline: Some(c.epsilon_inline),
        epsilon_block: Some(c.epsilon_block),
        epsilon_instruction: Some(c.epsilon_instruction),
        kendall_tau: c.kendall_tau,
        top5_overlap: c.top5_overlap,
        top10_overlap: c.top10_overlap,
        coverage: c.coverage,
        samples: c.samples,
        samples_elsewhere: c.samples_elsewhere,
        instructions: c.instructions,
        exact_weight: c.exact_weight,
        sampled_ips: c.hotspot.m as u64,
        functions_outside_ci: c.functions.iter().filter(|f| f.outside_ci).count() as u64,
        functions_biased: c.functions.iter().filter(|f| f.bias).count() as u64,
        too_few: proftrust_metrics::evidence::too_few(c, opts),
    }
}

fn rows_of(c: &Comparison) -> Vec<FunctionRow> {
    c.functions
        .iter()
        .map(|f| FunctionRow {
            name: f.name.clone(),
            samples: f.samples,
            sampled_share: f.sampled_share,
            ci_low: f.ci.0,
            ci_high: f.ci.1,
            exact_instructions: f.exact_instructions,
            exact_weight: f.exact_weight,
            exact_share: f.exact_share,
            difference: f.sampled_share - f.exact_share,
            outside_ci: f.outside_ci,
            bias: f.bias,
        })
        .collect()
}

/// The hottest function instruction by instruction, each row with its disassembly where
/// one of the audited binaries holds the function and its code decodes (x86-64).
fn picture_of(c: &Comparison, bins: &[Binary]) -> Option<InstructionPicture> {
    let (name, rows) = c.hottest.as_ref()?;
    let s: u64 = rows.iter().map(|r| r.1).sum();
    let e: u64 = rows.iter().map(|r| r.2).sum();
    let share = |x: u64, t: u64| if t == 0 { 0.0 } else { x as f64 / t as f64 };
    let texts = disassembly_of(bins, name, rows.first().map(|r| r.0));
    Some(InstructionPicture {
        function: name.clone(),
        rows: rows
            .iter()
            .map(|&(address, samples, exact)| InstructionRow {
                address,
                samples,
                sampled_share: share(samples, s),
                exact,
                exact_share: share(exact, e),
                text: texts.get(&address).cloned(),
            })
            .collect(),
    })
}

/// Address -> disassembly of the function `name` that holds `first`, from the first audited
/// binary that has it; empty when none does or its code does not decode.
fn disassembly_of(bins: &[Binary], name: &str, first: Option<u64>) -> BTreeMap<u64, String> {
    let Some(first) = first else {
        return BTreeMap::new();
    };
    for b in bins {
        let Some(f) = b.function_at(proftrust_model::Svma(first)) else {
            continue;
        };
        if f.name != name {
            continue;
        }
        if let Ok(ins) = b.instructions(f) {
            return ins.into_iter().map(|i| (i.addr.0, i.text)).collect();
        }
    }
    BTreeMap::new()
}

/// The program a recording is about. From the file's thread names first (perf.data's COMM
/// records: the name the most-sampled process took at exec, which is the program's file name
/// cut to 15 bytes; the module whose file name starts with it is the program). Without names
/// (other formats, or a name no module matches, e.g. after `prctl(PR_SET_NAME)`), from the
/// command line: perf.data records perf's own (`perf record -e cpu-clock -- ./prog 3`), so
/// the program is the first later argument that names a module of the samples (perf's
/// options and their values name none); any other command is the program itself.
pub(crate) fn recorded_program(samples: &SampleSet, command: &[String]) -> Option<String> {
    if let Some(comm) = samples.program_comm() {
        let mut found: Option<&str> = None;
        for (_, m) in samples.modules.iter() {
            let file = m.path.rsplit('/').next().unwrap_or(&m.path);
            let cut: String = file.chars().take(15).collect();
            if cut == comm && !m.path.starts_with('[') {
                // Two modules matching one cut name (`programname1`, `programname2`)
                // cannot be told apart by the name: fall back to the command line.
                if found.is_some() {
                    found = None;
                    break;
                }
                found = Some(&m.path);
            }
        }
        if let Some(p) = found {
            return Some(p.to_string());
        }
    }
    let base = |p: &str| p.rsplit('/').next().unwrap_or(p).to_string();
    let first = command.first()?;
    if base(first) != "perf" {
        return Some(first.clone());
    }
    command[1..]
        .iter()
        .find(|a| !a.starts_with('-') && samples.modules.find_by_file_name(&base(a)).is_some())
        .cloned()
}

/// The binary to audit when `--binary` is not given: the readable module holding the most
/// samples of the compared event (for `bzip2`, `libbz2` where the time is), found as
/// everywhere else (`locator`: `--symfs`, build-id caches, the recorded path); with the
/// sentence that says so (its share, and the program's when it is another module).
fn default_binary(
    samples: &SampleSet,
    event: u16,
    command: &[String],
    locator: &proftrust_binary::BinaryLocator,
) -> Result<(PathBuf, String)> {
    let found = |m: &proftrust_model::Module| -> Option<PathBuf> {
        if m.path.starts_with('[') {
            return None;
        }
        let l = locator.locate(&m.path, m.build_id.as_ref());
        let b = l.binary?;
        // The recorded path, when it holds the same build as the copy found first (perf's
        // build-id cache, ~/.debug/.build-id/..../elf): the name the user knows.
        let recorded = Path::new(&m.path);
        if b.path() != recorded && b.build_id().is_some() && recorded.is_file() {
            let same = proftrust_binary::Binary::open(recorded)
                .is_ok_and(|r| r.build_id() == b.build_id());
            if same {
                return Some(recorded.to_path_buf());
            }
        }
        Some(b.path().to_path_buf())
    };
    let mut per: BTreeMap<u32, u64> = BTreeMap::new();
    let mut total = 0u64;
    for s in samples.samples.iter().filter(|s| s.event == event) {
        total += 1;
        if let Some(m) = s.ip.module {
            *per.entry(m.0).or_default() += 1;
        }
    }
    let mut ranked: Vec<(u32, u64)> = per.into_iter().collect();
    ranked.sort_by_key(|&(m, c)| (std::cmp::Reverse(c), m));
    let best = ranked.iter().find_map(|&(m, c)| {
        let module = samples.modules.get(proftrust_model::ModuleIdx(m))?;
        Some((found(module)?, c, module.file_name().to_string()))
    });
    let Some((path, c, name)) = best else {
        bail!("cannot tell which binary to audit: the samples name no module found on this machine; pass --binary PATH (the program that was recorded)")
    };
    let share = |n: u64| 100.0 * n as f64 / total.max(1) as f64;
    let mut why = format!(
        "{name}: chosen as the binary with the most samples, {:.1}% of the {total} compared",
        share(c)
    );
    // The program itself, when it is another file (it may hold no sample at all).
    if let Some(p) = recorded_program(samples, command) {
        let file = p.rsplit('/').next().unwrap_or(&p).to_string();
        let module = samples.modules.find_by_file_name(&file);
        // A `#!` script is not a binary: its interpreter holds its samples.
        let elf = module.is_some() || std::fs::read(&p).is_ok_and(|b| b.starts_with(b"\x7fELF"));
        if file != name && elf {
            let n = module
                .and_then(|m| ranked.iter().find(|(x, _)| *x == m.0))
                .map_or(0, |x| x.1);
            why.push_str(&format!(" (the program {file}: {:.1}%)", share(n)));
        }
    }
    why.push_str("; --binary PATH audits another");
    Ok((path, why))
}

fn record_once(
    cmd: &[OsString],
    args: &AuditOptions,
    period: Option<u64>,
    randomize: bool,
    discard_stdout: bool,
    stop: &StopSignal,
    events: &dyn Events,
) -> Result<Recorded> {
    let evs = proftrust_record::EventSpec::parse_list(&args.event)
        .with_context(|| format!("bad --event {:?}", args.event))?;
    let mut o = proftrust_record::RecordOptions::default();
    // The recorder's defaults are the audit's (~10 kHz for clock events): a sweep point or
    // --period sets a period, --frequency a frequency, else each event's default period.
    o.period = period;
    o.frequency = if period.is_none() {
        args.frequency
    } else {
        None
    };
    o.events = evs;
    o.randomize = randomize;
    o.seed = Some(args.seed);
    o.timeout = args.timeout;
    o.stop = Some(stop.clone());
    o.discard_stdout = discard_stdout;
    let argv: Vec<String> = cmd
        .iter()
        .map(|c| c.to_string_lossy().into_owned())
        .collect();
    let pb = events.task(None, "recording samples");
    let r = proftrust_record::record(&proftrust_record::Target::Command(argv), &o)
        .context("recording failed")?;
    pb.finish();
    if let Some(e) = r.exec_error {
        let program = cmd[0].to_string_lossy().into_owned();
        let message = format!("cannot run {program}: {e}");
        return Err(Error::program_not_run(Some(program), message));
    }
    Ok(Recorded {
        samples: r.samples,
        pid: r.pid,
    })
}

fn count_exact(
    cmd: &[OsString],
    args: &AuditOptions,
    weight: TruthWeight,
    versions: &mut BTreeMap<String, String>,
    stop: &StopSignal,
    events: &dyn Events,
) -> Result<(ExactProfile, Option<String>)> {
    if weight == TruthWeight::TimeModel {
        if args.backend == Backend::Callgrind {
            bail_options!("--truth-weight time-model times the blocks QEMU counts (edges included); use --backend qemu or auto");
        }
        if args.time_model == crate::timemodel::TimeModelKind::Trace {
            return time_model_truth(cmd, args, versions, stop, events).map(|e| (e, None));
        }
    }
    let timeout = args.timeout;
    let mut note = None;
    let use_qemu = match args.backend {
        Backend::Qemu => true,
        Backend::Callgrind => false,
        Backend::Auto => {
            if weight == TruthWeight::CyclesEstimate {
                false
            } else {
                match proftrust_exact::find_plugin() {
                    Ok(_) => true,
                    Err(e) => {
                        note = Some(format!(
                            "QEMU plugin not available ({e}); exact counts from callgrind instead"
                        ));
                        false
                    }
                }
            }
        }
    };
    if !use_qemu && weight == TruthWeight::TimeModel {
        return Err(Error::ToolMissing {
            tool: crate::error::Tool::QemuPlugin,
            fix: "scripts/install-qemu.sh".into(),
            message: format!("--truth-weight time-model needs the block-to-block edges of the QEMU plugin's count ({}); install QEMU with plugin support (scripts/install-qemu.sh)", note.as_deref().unwrap_or("callgrind gives none")),
            source: None,
        });
    }
    if use_qemu && weight == TruthWeight::CyclesEstimate {
        bail_options!("--truth-weight cycles-estimate needs callgrind's cache and branch simulation; use --backend callgrind");
    }
    let pb = events.task(
        None,
        if use_qemu {
            "counting exactly (qemu)"
        } else {
            "counting exactly (callgrind)"
        },
    );
    let mut e = if use_qemu {
        // The audit needs instruction counts only: inline counters (no per-block callback)
        // run at the speed of bare QEMU. They are exact for one guest thread; with several,
        // API v1's non-atomic inline adds can lose increments, so count again with the
        // per-vcpu callback counts.
        // The time model needs the edges (a callback where control went elsewhere than a
        // block's listed successor, the rest derived).
        let mut o = proftrust_exact::QemuOptions {
            timeout,
            show_output: false,
            edges: matches!(weight, TruthWeight::TimeModel | TruthWeight::LbrTime),
            branch_predictor: args.time_branches && weight == TruthWeight::TimeModel,
            stop: Some(stop.clone()),
            ..Default::default()
        };
        versions.insert(
            "qemu-x86_64".into(),
            program::tool_version(&qemu_path(), &["--version"]),
        );
        let e = proftrust_exact::count_qemu(cmd, &o).context("exact count under QEMU failed")?;
        if proftrust_exact::counts_may_be_low(&e) && stop.signal().is_none() {
            o.edges = true;
            let threads = proftrust_exact::guest_threads(&e).unwrap_or(0);
            note = Some(format!(
                "the program ran {threads} threads: counted again with per-thread counters (inline counters can lose increments across threads)"
            ));
            proftrust_exact::count_qemu(cmd, &o).context("exact count under QEMU failed")?
        } else {
            e
        }
    } else {
        let o = proftrust_exact::CallgrindOptions {
            timeout,
            show_output: false,
            cache_sim: weight == TruthWeight::CyclesEstimate,
            branch_sim: weight == TruthWeight::CyclesEstimate,
            stop: Some(stop.clone()),
            ..Default::default()
        };
        versions.insert(
            "valgrind".into(),
            program::tool_version("valgrind", &["--version"]),
        );
        proftrust_exact::count_callgrind(cmd, &o).context("exact count under callgrind failed")?
    };
    pb.finish();
    e.normalize();
    if weight == TruthWeight::TimeModel {
        let core = proftrust_uarch::Core::new(args.core);
        let locator = load::locator(&args.binaries, args.symfs.as_deref());
        let locate = |m: &Module| {
            locator
                .locate(&m.path, m.build_id.as_ref())
                .binary
                .map(|b| b.path().to_path_buf())
        };
        let miss = if args.time_caches {
            let costs = crate::timemodel::CacheCosts::default();
            let q = proftrust_exact::QemuOptions {
                timeout,
                show_output: false,
                stop: Some(stop.clone()),
                ..Default::default()
            };
            let (miss, m) = crate::timemodel::miss_latencies(&e, cmd, &q, &costs, events)?;
            events.note(&format!(
                "data caches (L1D {} KiB, L2 {} KiB): {} loads, {} served by L2 (+{} cycles), {} beyond (+{} cycles)",
                costs.geometry.l1_size / 1024,
                costs.geometry.llc_size / 1024,
                m.loads,
                m.second,
                costs.second,
                m.memory,
                costs.memory
            ));
            miss
        } else {
            Vec::new()
        };
        let s = crate::timemodel::add_time_column(&mut e, &core, &miss, &locate, events)?;
        events.note(&crate::timemodel::summary_note(&core, &s));
        e.backend_detail.push_str(&format!(
            "; time model: {}{}",
            core.name,
            if args.time_caches {
                ", data caches simulated"
            } else {
                ""
            }
        ));
    }
    Ok((e, note))
}

/// How the `lbr-time` truth is formed, as printed in reports.
pub const LBR_TIME_FORMULA: &str = "cycles of an instruction = its share of the cycles the samples' branch stacks measured: each fall-through range from an entry's target to the next newer entry's source timed by that newer entry's cycle count (Intel LBR cycle counts, Arm BRBE), split evenly over the range's instructions; a measurement of the sampled windows, not a model";

/// How the time-model truth is formed, as printed in reports.
pub const TIME_MODEL_FORMULA: &str = "cycles of an instruction = its time-proportional (TIP) share of the run's cycles in proftrust's out-of-order model: ROB 224 entries, dispatch/commit width 4, latency = instruction class + simulated L1D 32K/LLC 8M/memory 200 cycles; no data dependencies, branch prediction or front end (docs/skid.md)";

/// The time truth of `--truth-weight time-model`: the program traced under QEMU (with its
/// data accesses) and replayed through the virtual PMU's out-of-order model in
/// [`PmuMode::Tip`](proftrust_vpmu::PmuMode), which charges every modelled cycle to the
/// instruction committing in it or stalling the commit (`proftrust_vpmu::TipAttribution`).
/// A model, not a measurement (see [`TIME_MODEL_FORMULA`]).
fn time_model_truth(
    cmd: &[OsString],
    args: &AuditOptions,
    versions: &mut BTreeMap<String, String>,
    stop: &StopSignal,
    events: &dyn Events,
) -> Result<ExactProfile> {
    let o = crate::vpmu::VpmuRunOptions {
        command: cmd.to_vec(),
        mode: proftrust_vpmu::PmuMode::Tip,
        cpi_model: crate::vpmu::CpiModel::CacheSim,
        exact: true,
        sample: false,
        timeout: args.timeout,
        stop: Some(stop.clone()),
        ..Default::default()
    };
    versions.insert(
        "qemu-x86_64".into(),
        program::tool_version(&qemu_path(), &["--version"]),
    );
    let r = crate::vpmu::execute(&o, events).context("the time-model run failed")?;
    let mut e = r
        .exact
        .context("the time-model run returned no exact profile")?;
    e.backend_detail =
        "time model: TIP attribution on the out-of-order model with simulated caches, replaying the QEMU block trace".into();
    e.normalize();
    Ok(e)
}

/// The `lbr-time` truth ([`crate::lbr::lbr_truth`]) with its notes and warnings; an error
/// when the samples hold no branch stack with cycle counts.
fn lbr_side(
    samples: &SampleSet,
    exact: Option<ExactProfile>,
    locator: &proftrust_binary::BinaryLocator,
    warnings: &mut Vec<Warning>,
    events: &dyn Events,
) -> Result<ExactProfile> {
    let sym = proftrust_binary::Symbolizer::with_locator(&samples.modules, locator);
    let (e, s) = crate::lbr::lbr_truth(samples, exact, &sym);
    if s.measured == 0 {
        bail!(
            "--truth-weight lbr-time: the samples hold no branch-stack range with a cycle count and known code ({} stacks, {} ranges of unknown code); record branch stacks with cycles (perf record -b or --call-graph lbr on Intel since Skylake, Arm BRBE; proftrust vpmu --lbr) and give the binaries (--binary)",
            s.stacks,
            s.unresolved
        );
    }
    events.note(&format!(
        "lbr time: {} fall-through ranges measured by {} branch stacks, {} cycles",
        s.measured, s.stacks, s.cycles
    ));
    if s.unresolved > 0 {
        warnings.push(Warning::new(WarningKind::Unsymbolized, format!(
            "{} branch-stack ranges ({:.1}% of the ranges) have no known straight-line code (another module, or a binary not found) and are left out of the lbr time",
            s.unresolved,
            100.0 * s.unresolved as f64 / (s.unresolved + s.measured).max(1) as f64
        )));
    }
    if s.off_cfg.0 > 0 {
        warnings.push(Warning::new(WarningKind::Input, format!(
            "{} of {} measured branch-stack ranges ({:.1}% of the measured cycles) are not straight-line paths of the exact run (an instruction it never executed, or a fall-through it never took): the samples and the exact run are not of the same program and input, or the stacks are corrupt",
            s.off_cfg.0,
            s.checked,
            100.0 * s.off_cfg.1 as f64 / s.cycles.max(1) as f64
        )));
    }
    if exact_is_lbr_only(&e) {
        warnings.push(Warning::new(WarningKind::TruthModel, "no exact run: the counts beside the lbr time are how often the branch stacks covered each instruction, not executions (NRMSE_SR, SC and OD rest on them)"));
    }
    Ok(e)
}

fn exact_is_lbr_only(e: &ExactProfile) -> bool {
    e.backend == "lbr"
}

/// The QEMU proftrust runs (`proftrust_exact::find_qemu`), for its version in the report.
fn qemu_path() -> String {
    proftrust_exact::find_qemu().map_or_else(|_| "qemu-x86_64".into(), |p| p.display().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proftrust_model::{Location, Sample};

    /// The column the comparison reads is the one the virtual PMU writes.
    #[test]
    fn time_model_column_is_the_vpmus() {
        assert_eq!(
            proftrust_metrics::TIME_MODEL_COLUMN,
            proftrust_vpmu::TIP_CYCLES
        );
    }

    /// libsvm's case: 54% of the samples in libm. The warning names the share and gives the
    /// flags that audit libm too (the program first, as `--binary` replaces the default); a
    /// library under 1% (here libc, 0.5%) and the kernel are named but not suggested.
    #[test]
    fn elsewhere_warning_gives_the_binary_flags_for_libraries() {
        let mut s = SampleSet::default();
        let prog = s.modules.intern(Module::new("/w/libsvm"));
        let libm = s
            .modules
            .intern(Module::new("/lib/x86_64-linux-gnu/libm.so.6"));
        let libc = s
            .modules
            .intern(Module::new("/lib/x86_64-linux-gnu/libc.so.6"));
        let mut push = |loc: Location, n: usize| {
            for _ in 0..n {
                s.samples.push(Sample {
                    event: 0,
                    pid: 1,
                    tid: 1,
                    time: 0,
                    cpu: 0,
                    period: 1,
                    ip: loc,
                    callchain: Vec::new(),
                    branches: Vec::new(),
                });
            }
        };
        push(Location::new(prog, 0x1000), 455);
        push(Location::new(libm, 0x2000), 540);
        push(Location::new(libc, 0x3000), 5);
        let scope = vec![Module::new("/w/libsvm")];
        let w = elsewhere_warning(&s, 0, &scope, 545);
        assert_eq!(
            w,
            "545 of 1000 samples lie outside the audited binary and are not compared: \
             libm.so.6 54.00%, libc.so.6 0.50%; to audit the shared libraries too, add them: \
             --binary /w/libsvm --binary /lib/x86_64-linux-gnu/libm.so.6"
        );
        assert_eq!(shell_word("/a b/it's"), "'/a b/it'\\''s'");
    }
}
