//! `vpp`: variational path profiling (seed 004). Times acyclic paths, ranks them by net
//! variation (total time − executions × fastest time), and checks how stable the ranking
//! is. Sources ([`VppSource`]):
//!
//! * `vpmu` (default): the program runs under QEMU with its data accesses traced; the
//!   virtual PMU's timer (class costs + simulated L1D/LLC) times every instruction and the
//!   Ball-Larus path profiler cuts the run into paths (proftrust-vpp `TracePathTimer`);
//! * `lbr`: branch stacks with cycle counts — a perf.data (`perf record -b`), `perf script
//!   -F ...,brstack` text or proftrust sample file, or, without a file, the virtual PMU's
//!   LBR stacks of a traced run;
//! * `probe`: the program, built with `proftrust_probe.h` (or the Rust crate), runs natively
//!   and times its own paths with the TSC and bursty tracing (or an existing probe file is
//!   read).

use crate::error::{bail, bail_options, Context, Error, Result};
use crate::trace::{self, load_program, Program};
use crate::Events;
use proftrust_exact::{run_native, trace_qemu, NativeOptions, QemuOptions};
use proftrust_model::{RunOutcome, SampleSet, Warning, WarningKind};
use proftrust_paths::PathMetrics;
use proftrust_probe::BurstyOptions;
pub use proftrust_report::vpp::{
    VppCache, VppConfig, VppPath, VppRanking, VppReport, VppRunSummary, VppSource, VppStability,
};
use proftrust_report::{render_line_plot, LinePlot, Series};
use proftrust_vpmu::{
    CacheConfig, ClassCycles, CycleModel, TraceCost, Vpmu, VpmuEvents, VpmuOptions,
};
use proftrust_vpp::{
    analyze, compare_runs, lbr_timings, probe_resolution, probe_timings, ranked,
    top_delta_histograms, top_k_difference, AnalysisOptions, BiasEstimate, DeltaHistogram,
    PathSignature, PathTimings, Ranking, TracePathTimer, TraceSourceOptions, VppAnalysis,
};
use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Settings of [`execute`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct VppOptions {
    /// The program and its arguments (the reference input). Default empty (needed unless a
    /// probe file is read).
    pub command: Vec<String>,
    /// Where the path timings come from. Default [`VppSource::Vpmu`].
    pub source: VppSource,
    /// Top paths compared (stability, rankings). Default 10.
    pub top: usize,
    /// Paths listed in the report. Default all.
    pub limit: Option<usize>,
    /// Make the delta histograms' SVG ([`VppReport::svg`]). Default false.
    pub svg: bool,
    /// Paths in the delta histograms. Default 5.
    pub histogram_paths: usize,
    /// Bins of the delta histograms. Default 40.
    pub bins: usize,
    /// Paths need at least this many timed samples (seed 004 §5.1). Default 2.
    pub min_samples: u64,
    /// Leave out timed samples longer than this (the source's unit, before the bias is
    /// subtracted). Default none.
    pub max_time: Option<u64>,
    /// Bursty tracing nCheck (0: time every path). Default: 0 for vpmu, 10000 for probe.
    pub n_check: Option<u64>,
    /// Bursty tracing nInstr. Default 1.
    pub n_instr: u64,
    /// Jitter every nCheck reset by U(0, nCheck/8). Default false.
    pub randomize: bool,
    /// Seed of the jitter (stored in the report). Default [`crate::DEFAULT_SEED`].
    pub seed: u64,
    /// vpmu/lbr: QEMU CPU model. Default QEMU's.
    pub cpu: Option<String>,
    /// Stop the program after this long. Default none.
    pub timeout: Option<Duration>,
    /// Raised to stop the program as at the timeout (the CLI raises it on SIGINT, SIGTERM,
    /// SIGHUP); the paths timed up to then are kept and the outcome says `Interrupted`.
    /// Default none.
    pub stop: Option<proftrust_supervise::StopSignal>,
    /// vpmu: no cache simulation (static class costs). Default false.
    pub no_cache: bool,
    /// Simulated L1D size in KiB (8-way, 64-byte lines). Default 32.
    pub l1_kib: u32,
    /// Simulated last-level cache size in KiB (16-way). Default 8192.
    pub llc_kib: u32,
    /// Cycles of a load that hits the LLC. Default 40.
    pub llc_latency: u32,
    /// Cycles of a load that goes to memory. Default 200.
    pub memory_latency: u32,
    /// lbr: a branch-stack sample file of the same program; without it the virtual PMU's
    /// LBR stacks are used. Default none.
    pub lbr_file: Option<PathBuf>,
    /// lbr without a file: instructions between the virtual PMU's samples. Default 1009.
    pub lbr_period: u64,
    /// probe: read this probe file instead of running the program. Default none.
    pub probe_file: Option<PathBuf>,
    /// probe: do not subtract the instrumentation bias. Default false.
    pub no_bias: bool,
    /// probe: run under this many busy background threads. Default none.
    pub load: Option<usize>,
    /// probe: run without and with this many background threads and compare. Default none.
    pub compare_load: Option<usize>,
    /// Also run with these arguments as the training input and compare self- and
    /// cross-trained top paths (seed 004 §5.3.2). Default none.
    pub train: Option<Vec<String>>,
    /// Let the program's output through. Default false.
    pub show_output: bool,
}

impl Default for VppOptions {
    fn default() -> Self {
        VppOptions {
            command: Vec::new(),
            source: VppSource::Vpmu,
            top: 10,
            limit: None,
            svg: false,
            histogram_paths: 5,
            bins: 40,
            min_samples: 2,
            max_time: None,
            n_check: None,
            n_instr: 1,
            randomize: false,
            seed: crate::DEFAULT_SEED,
            cpu: None,
            timeout: None,
            stop: None,
            no_cache: false,
            l1_kib: 32,
            llc_kib: 8192,
            llc_latency: 40,
            memory_latency: 200,
            lbr_file: None,
            lbr_period: 1009,
            probe_file: None,
            no_bias: false,
            load: None,
            compare_load: None,
            train: None,
            show_output: false,
        }
    }
}

/// Most background threads `--load` and `--compare-load` start.
pub const MAX_LOAD_THREADS: usize = 64;
/// Bytes each background thread streams through.
const LOAD_BYTES: usize = 32 << 20;

/// N threads streaming through their own 32 MiB buffers until dropped (CPU and cache
/// pressure). They are proftrust's threads, so they cannot outlive it; dropping the guard
/// (also on an error) stops and joins them.
struct BackgroundLoad {
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl BackgroundLoad {
    fn start(n: usize) -> Result<BackgroundLoad> {
        if n == 0 || n > MAX_LOAD_THREADS {
            bail_options!("a background load of {n} threads: give 1 to {MAX_LOAD_THREADS}");
        }
        let stop = Arc::new(AtomicBool::new(false));
        let mut g = BackgroundLoad {
            stop: Arc::clone(&stop),
            threads: Vec::new(),
        };
        for k in 0..n {
            let stop = Arc::clone(&stop);
            let h = std::thread::Builder::new()
                .name(format!("proftrust-load-{k}"))
                .spawn(move || {
                    let mut buf = vec![k as u64; LOAD_BYTES / 8];
                    while !stop.load(Ordering::Relaxed) {
                        for chunk in buf.chunks_mut(4096) {
                            for x in chunk.iter_mut() {
                                *x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
                            }
                            if stop.load(Ordering::Relaxed) {
                                break;
                            }
                        }
                    }
                    std::hint::black_box(&buf);
                })
                .context("cannot start a background load thread")?;
            g.threads.push(h);
        }
        Ok(g)
    }
}

impl Drop for BackgroundLoad {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// One measured run.
struct Measured {
    timings: PathTimings,
    bias: Option<BiasEstimate>,
    outcome: Option<RunOutcome>,
    /// Exact totals per path (trace source): all executions, memory events.
    exact: HashMap<PathSignature, PathMetrics>,
    stats: serde_json::Value,
    /// The whole run's time in the timings' unit, when known.
    run_time: Option<u64>,
    /// Probes: the timer's resolution in ticks (seed 004 readings for coarse timers).
    resolution: Option<u64>,
    warnings: Vec<Warning>,
}

fn bursty(a: &VppOptions, default_check: u64) -> Result<BurstyOptions> {
    if a.n_instr == 0 {
        bail_options!("--n-instr 0: at least one path is timed per burst");
    }
    Ok(BurstyOptions {
        n_check: a.n_check.unwrap_or(default_check),
        n_instr: a.n_instr,
        randomize: a.randomize,
        seed: a.seed,
    })
}

fn command(p: &Path, args: &[String]) -> Vec<OsString> {
    std::iter::once(p.as_os_str().to_owned())
        .chain(args.iter().map(OsString::from))
        .collect()
}

/// The static model: class costs of the program's code (memory costs left to the cache
/// when it is on, as `proftrust vpmu --cpi-model cache-sim` does).
fn class_model(p: &Program, cache: bool) -> Result<CycleModel> {
    let mut classes = ClassCycles::default();
    if cache {
        classes.load = 0;
        classes.store = 0;
    }
    let mut model = CycleModel::default();
    model.tables.push(trace::program_costs(&p.path, &classes)?);
    Ok(model)
}

/// The simulated caches from the flags (`None` with --no-cache).
fn cache_config(a: &VppOptions) -> Result<Option<CacheConfig>> {
    if a.no_cache {
        return Ok(None);
    }
    let mut c = CacheConfig::default();
    c.l1_size = a.l1_kib.saturating_mul(1024);
    c.llc_size = a.llc_kib.saturating_mul(1024);
    c.llc_latency = a.llc_latency;
    c.memory_latency = a.memory_latency;
    c.check()
        .context("--l1-kib / --llc-kib: the cache geometry is not usable")?;
    Ok(Some(c))
}

fn measure_vpmu(
    a: &VppOptions,
    p: &Program,
    args: &[String],
    events: &dyn Events,
) -> Result<Measured> {
    let opts = TraceSourceOptions {
        bursty: bursty(a, 0)?,
    };
    let cache = cache_config(a)?;
    let timer = TraceCost::new(class_model(p, cache.is_some())?, cache.clone());
    let mut v = TracePathTimer::new(&p.cfgs, timer, opts);
    let qo = QemuOptions {
        cpu: a.cpu.clone(),
        timeout: a.timeout,
        show_output: a.show_output,
        trace_memory: cache.is_some(),
        cache: crate::trace::plugin_cache(cache.as_ref().map(CacheConfig::geometry)),
        stop: a.stop.clone(),
        ..QemuOptions::default()
    };
    let pb = events.task(None, "tracing under QEMU (virtual PMU)");
    let outcome = trace_qemu(&command(&p.path, args), &qo, &mut v)
        .context("tracing the program under QEMU")?;
    pb.finish();
    let cs = v.timer().cache_stats();
    let r = v.finish();
    let mut warnings = Vec::new();
    warnings.extend(outcome.warning("the program", "the paths"));
    if r.collisions > 0 {
        warnings.push(Warning::new(
            WarningKind::Measurement,
            format!(
                "{} distinct path(s) shared a signature with another and were merged",
                r.collisions
            ),
        ));
    }
    let stats = serde_json::json!({
        "completed_paths": r.completed,
        "timed_paths": r.timed,
        "total_cycles": r.profile.total_cycles,
        "total_instructions": r.profile.total_instructions,
        "signature_collisions": r.collisions,
        "cache": cs.map(|c| serde_json::json!({
            "accesses": c.accesses,
            "loads": c.loads,
            "l1_misses": c.l1_misses,
            "llc_misses": c.llc_misses,
        })),
    });
    Ok(Measured {
        timings: r.timings,
        bias: None,
        outcome: Some(outcome),
        exact: r.exact,
        stats,
        run_time: Some(r.profile.total_cycles),
        resolution: None,
        warnings,
    })
}

fn read_lbr_file(f: &Path, p: &Program, events: &dyn Events) -> Result<SampleSet> {
    let set = crate::load::samples(f, std::slice::from_ref(&p.path), events)?;
    if !set.samples.iter().any(|s| !s.branches.is_empty()) {
        bail!(
            "{}: no sample has a branch stack; record with `perf record -b` (needs a PMU with LBR) or `proftrust vpmu --lbr`",
            f.display()
        );
    }
    if !set
        .samples
        .iter()
        .flat_map(|s| s.branches.iter())
        .any(|b| b.cycles > 0)
    {
        bail!(
            "{}: the branch stacks carry no cycle counts, so paths cannot be timed (Intel LBR reports them from Skylake on; `perf script -F brstack` prints them last)",
            f.display()
        );
    }
    Ok(set)
}

fn measure_lbr(
    a: &VppOptions,
    p: &Program,
    args: &[String],
    events: &dyn Events,
) -> Result<Measured> {
    let mut warnings = Vec::new();
    let (set, outcome, extra) = match &a.lbr_file {
        Some(f) => (read_lbr_file(f, p, events)?, None, serde_json::Value::Null),
        None => {
            if a.lbr_period == 0 {
                bail_options!("--lbr-period 0: give a period >= 1");
            }
            let cache = cache_config(a)?;
            let model = class_model(p, cache.is_some())?;
            let mut o = VpmuOptions::default();
            o.instruction_period = a.lbr_period;
            o.events = VpmuEvents {
                instructions: true,
                cycles: false,
            };
            o.lbr = true;
            o.exact = false;
            o.seed = a.seed;
            o.cache = cache.clone();
            let mut v = Vpmu::new(o, model).context("cannot set up the virtual PMU")?;
            let qo = QemuOptions {
                cpu: a.cpu.clone(),
                timeout: a.timeout,
                show_output: a.show_output,
                trace_memory: cache.is_some(),
                cache: crate::trace::plugin_cache(cache.as_ref().map(CacheConfig::geometry)),
                stop: a.stop.clone(),
                ..QemuOptions::default()
            };
            let pb = events.task(None, "tracing under QEMU (virtual LBR)");
            let outcome = trace_qemu(&command(&p.path, args), &qo, &mut v)
                .context("tracing the program under QEMU")?;
            pb.finish();
            warnings.extend(outcome.warning("the program", "the paths"));
            let (set, _) = v.finish();
            (
                set,
                Some(outcome),
                serde_json::json!({"virtual_lbr_period": a.lbr_period}),
            )
        }
    };
    let (timings, st) = lbr_timings(&set, &p.cfgs);
    if st.timed == 0 {
        warnings.push(Warning::new(WarningKind::FewSamples, format!(
            "no complete path of {} was found in the {} branch stacks ({} walks broken); is it the same program?",
            p.path.display(),
            st.stacks,
            st.broken
        )));
    }
    if st.collisions > 0 {
        warnings.push(Warning::new(
            WarningKind::Measurement,
            format!(
                "{} distinct path(s) shared a signature with another and were merged",
                st.collisions
            ),
        ));
    }
    let stats = serde_json::json!({"lbr": st, "source": extra});
    Ok(Measured {
        timings,
        bias: None,
        outcome,
        exact: HashMap::new(),
        stats,
        run_time: None,
        resolution: None,
        warnings,
    })
}

fn read_probe(f: &Path) -> Result<proftrust_probe::ProbeFile> {
    let bytes = std::fs::read(f).with_context(|| format!("cannot read {}", f.display()))?;
    proftrust_probe::format::read(&bytes).with_context(|| f.display().to_string())
}

/// The environment the probe header reads: where to write its file, the bursty-tracing
/// counts, and the randomisation with its seed.
fn probe_env(out: &std::path::Path, b: &BurstyOptions) -> Vec<(OsString, OsString)> {
    [
        ("PROFTRUST_PROBE_OUT", out.as_os_str().to_owned()),
        ("PROFTRUST_PROBE_NCHECK", b.n_check.to_string().into()),
        ("PROFTRUST_PROBE_NINSTR", b.n_instr.to_string().into()),
        (
            "PROFTRUST_PROBE_RANDOMIZE",
            u8::from(b.randomize).to_string().into(),
        ),
        ("PROFTRUST_PROBE_SEED", b.seed.to_string().into()),
    ]
    .into_iter()
    .map(|(k, v)| (OsString::from(k), v))
    .collect()
}

fn measure_probe(
    a: &VppOptions,
    args: &[String],
    load: Option<usize>,
    events: &dyn Events,
) -> Result<Measured> {
    let mut warnings = Vec::new();
    let (file, outcome) = match (&a.probe_file, load) {
        (Some(f), None) => (read_probe(f)?, None),
        (Some(_), Some(_)) => bail_options!(
            "--probe-file reads a finished run; --load and --compare-load need to run the program"
        ),
        (None, _) => {
            let prog = a
                .command
                .first()
                .context("--source probe needs the program after `--` (or --probe-file FILE)")?;
            let path = crate::program::find(prog)?;
            let b = bursty(a, 10_000)?;
            let dir = tempfile::tempdir().context("cannot create a temporary directory")?;
            let out = dir.path().join("probe.txt");
            let o = NativeOptions {
                timeout: a.timeout,
                env: probe_env(&out, &b),
                show_output: a.show_output,
                stop: a.stop.clone(),
            };
            let pb = events.task(
                None,
                &match load {
                    Some(n) => format!("running natively under a load of {n} threads"),
                    None => "running natively".to_string(),
                },
            );
            let guard = load.map(BackgroundLoad::start).transpose()?;
            let outcome = run_native(&command(&path, args), &o);
            drop(guard);
            pb.finish();
            let outcome = outcome.context("running the program")?;
            if !out.exists() {
                let why = match &outcome {
                    RunOutcome::Exited { .. } => format!(
                        "{} wrote no probe file: build it with crates/probe/include/proftrust_probe.h and PT_BOUNDARY() at its path boundaries (not with -DPT_DISABLE), or use the Rust crate proftrust-probe",
                        path.display()
                    ),
                    other => {
                        return Err(Error::program_ended(
                            Some(path.display().to_string()),
                            other.to_string(),
                            format!(
                                "{} {} before writing its probe file (the file is written at exit())",
                                path.display(),
                                other.phrase()
                            ),
                        ))
                    }
                };
                return Err(Error::Invalid(why));
            }
            warnings.extend(outcome.warning("the program", "the paths"));
            (read_probe(&out)?, Some(outcome))
        }
    };
    if file.samples.is_empty() {
        warnings.push(Warning::new(
            WarningKind::FewSamples,
            format!(
                "the probes timed no path ({} boundaries passed; lower --n-check below that)",
                file.boundaries
            ),
        ));
    }
    if file.dropped > 0 {
        warnings.push(Warning::new(WarningKind::Measurement, format!(
            "{} timed paths did not fit the probe buffer (PROFTRUST_PROBE_CAPACITY) and were dropped",
            file.dropped
        )));
    }
    if file.foreign > 0 {
        warnings.push(Warning::new(
            WarningKind::Measurement,
            format!(
                "{} other thread(s) passed probes; only the main thread's paths are timed",
                file.foreign
            ),
        ));
    }
    let (timings, bias) = probe_timings(&file);
    let resolution = probe_resolution(&file);
    if let Some(b) = &bias {
        if let Some(other) = b
            .other_median
            .filter(|o| o.abs_diff(b.median) > b.tolerance)
        {
            let (start, exit) = if b.calibration == "exit" {
                (other, b.median)
            } else {
                (b.median, other)
            };
            warnings.push(Warning::new(WarningKind::Measurement, format!(
                "the probe's own cost changed during the run (empty paths: median {start} ticks at start-up, {exit} at exit): the CPU's clock speed changed (frequency scaling, a cold start); the cheaper ({}) calibration is subtracted. Pin the clock (cpupower frequency-set -g performance) for steadier timings",
                if b.calibration == "exit" { "exit" } else { "start-up" }
            )));
        }
        if !b.consistent {
            warnings.push(Warning::new(WarningKind::Measurement, format!(
                "the instrumentation bias is not consistent ({:.0}% of the calibration within ±{} ticks of {}): timings are noisy",
                b.within * 100.0,
                b.tolerance,
                b.median
            )));
        }
    }
    let stats = serde_json::json!({
        "boundaries": file.boundaries,
        "timed_paths": file.samples.len(),
        "dropped": file.dropped,
        "foreign_threads": file.foreign,
        "program_ticks": file.program_ticks,
        "tsc_per_ns": file.tsc_per_ns,
        "timer_resolution": resolution,
        "n_check": file.n_check,
        "n_instr": file.n_instr,
        "randomize": file.randomize,
        "seed": file.seed,
        "exe": file.exe,
    });
    Ok(Measured {
        timings,
        bias,
        outcome,
        exact: HashMap::new(),
        stats,
        run_time: (file.program_ticks > 0).then_some(file.program_ticks),
        resolution: Some(resolution),
        warnings,
    })
}

fn summary(args: &[String], m: &Measured, an: &VppAnalysis, k: usize) -> VppRunSummary {
    VppRunSummary {
        args: args.to_vec(),
        samples: an.samples,
        net_variation_share: an.total_share(),
        top_share: an.top_share(k),
        top: ranked(an, Ranking::NetVariation, k),
        outcome: m.outcome.clone(),
        program_time: m.timings.program_time,
    }
}

/// The flag combinations `vpp` refuses, before anything runs.
fn check_options(a: &VppOptions) -> Result<()> {
    if a.top == 0 {
        bail_options!("--top 0: give at least 1");
    }
    let needs_program = match a.source {
        VppSource::Vpmu | VppSource::Lbr => true,
        VppSource::Probe => a.probe_file.is_none(),
    };
    if needs_program && a.command.is_empty() {
        bail_options!(
            "give the program after `--` (proftrust vpp --source {:?} -- PROGRAM ARGS)",
            a.source
        );
    }
    if a.source != VppSource::Probe && (a.load.is_some() || a.compare_load.is_some()) {
        bail_options!("--load and --compare-load need --source probe: the virtual PMU and recorded LBR files do not see the machine's load");
    }
    if let Some(n) = a.load.or(a.compare_load) {
        if n == 0 || n > MAX_LOAD_THREADS {
            bail_options!("a background load of {n} threads: give 1 to {MAX_LOAD_THREADS}");
        }
    }
    if a.load.is_some() && a.compare_load.is_some() {
        bail_options!("give either --load N (one run under load) or --compare-load N (a light and a heavy run)");
    }
    if a.train.is_some() && (a.lbr_file.is_some() || a.probe_file.is_some()) {
        bail_options!("--train runs the program with the training input; it cannot be used with --lbr-file or --probe-file");
    }
    if a.source != VppSource::Lbr && a.lbr_file.is_some() {
        bail_options!("--lbr-file needs --source lbr");
    }
    if a.source != VppSource::Probe && a.probe_file.is_some() {
        bail_options!("--probe-file needs --source probe");
    }
    Ok(())
}

/// Times the program's paths (or reads the timings), ranks them by net variation and
/// compares the rankings; with `compare_load` or `train`, runs again and compares the top
/// paths. Notes and progress go to `events`; warnings are in the report.
pub fn execute(a: &VppOptions, events: &dyn Events) -> Result<VppReport> {
    check_options(a)?;
    let program: Option<Program> = match a.source {
        VppSource::Vpmu | VppSource::Lbr => Some(load_program(&a.command[0])?),
        VppSource::Probe => None,
    };
    let ref_args: Vec<String> = a.command.iter().skip(1).cloned().collect();
    let measure = |args: &[String], load: Option<usize>| -> Result<Measured> {
        match (a.source, &program) {
            (VppSource::Vpmu, Some(p)) => measure_vpmu(a, p, args, events),
            (VppSource::Lbr, Some(p)) => measure_lbr(a, p, args, events),
            _ => measure_probe(a, args, load, events),
        }
    };
    events.note(&format!(
        "vpp: source {}, seed {}, nCheck {}, nInstr {}{}",
        a.source,
        a.seed,
        a.n_check.unwrap_or(if a.source == VppSource::Probe {
            10_000
        } else {
            0
        }),
        a.n_instr,
        if a.randomize { " (jittered)" } else { "" }
    ));
    let m = measure(&ref_args, a.load)?;
    let an = analyze(&m.timings, &analysis_options(a, &m));
    let mut warnings: Vec<Warning> = program
        .as_ref()
        .map(|p| p.warnings.clone())
        .unwrap_or_default();
    warnings.extend(m.warnings.iter().cloned());
    if !an.paths.is_empty() && an.net_variation == 0 {
        warnings.push(Warning::new(
            WarningKind::Measurement,
            "no path varies: every execution of each path took the same time (with --no-cache the model has no variation; uniformly slow paths are not variational, paper 004 §1)",
        ));
    }
    if an.paths.is_empty() {
        warnings.push(Warning::new(WarningKind::FewSamples, format!(
            "no path has {} or more timed samples: nothing to rank (run longer, or lower --n-check)",
            a.min_samples
        )));
    }
    let k = a.top;
    let mut stability = Vec::new();
    if let Some(n) = a.compare_load {
        let heavy = measure(&ref_args, Some(n))?;
        let hv = analyze(&heavy.timings, &analysis_options(a, &heavy));
        warnings.extend(
            heavy
                .warnings
                .iter()
                .map(|w| Warning::new(w.kind, format!("heavy-load run: {}", w.message))),
        );
        stability.push(VppStability {
            kind: "load".to_string(),
            comparison: compare_runs(&an, &hv, k),
            a: summary(&ref_args, &m, &an, k),
            b: summary(&ref_args, &heavy, &hv, k),
        });
    }
    if let Some(targs) = &a.train {
        let tm = measure(targs, a.load)?;
        let ta = analyze(&tm.timings, &analysis_options(a, &tm));
        warnings.extend(
            tm.warnings
                .iter()
                .map(|w| Warning::new(w.kind, format!("training run: {}", w.message))),
        );
        stability.push(VppStability {
            kind: "input".to_string(),
            comparison: compare_runs(&ta, &an, k),
            a: summary(targs, &tm, &ta, k),
            b: summary(&ref_args, &m, &an, k),
        });
    }
    let histograms = top_delta_histograms(&m.timings, &an, a.histogram_paths, a.bins);
    let rankings: Vec<VppRanking> = [Ranking::Frequency, Ranking::TotalTime]
        .into_iter()
        .map(|r| {
            let d = top_k_difference(&an, r, k);
            VppRanking {
                ranking: d.ranking,
                k: d.k,
                not_in_other: d.not_in_other,
                vpp: d.vpp,
                other: d.other,
            }
        })
        .collect();
    let paths = path_rows(&m, &an, program.as_ref(), a.limit.unwrap_or(usize::MAX));
    let svg = a.svg.then(|| {
        delta_plot(
            &a.command,
            &histograms,
            &paths,
            an.unit.name(),
            m.outcome.as_ref(),
        )
    });
    let coverage = m
        .run_time
        .filter(|&t| t > 0)
        .map(|t| an.timed_time as f64 * an.executions_per_sample / t as f64);
    Ok(VppReport {
        program: a.command.clone(),
        seed: a.seed,
        unit: an.unit.name().to_string(),
        config: config(a, &m),
        outcome: m.outcome.clone(),
        samples: an.samples,
        excluded_samples: an.excluded,
        distinct_paths: m.timings.len(),
        analysed_paths: an.paths.len(),
        net_variation: an.net_variation,
        net_variation_share: an.total_share(),
        top_share: an.top_share(k),
        time_base: an.time_base_kind,
        time_base_value: an.time_base,
        executions_per_sample: an.executions_per_sample,
        run_time: m.run_time,
        timed_coverage: coverage,
        timer_resolution: m.resolution,
        timing_inflation: an.timing_inflation,
        paths,
        rankings,
        bias: m.bias.clone(),
        stability,
        histograms,
        source_stats: m.stats.clone(),
        warnings,
        min_samples_used: an.min_samples,
        svg,
    })
}

/// The analysis settings of a measured run (its bias subtracted unless `no_bias`).
fn analysis_options(a: &VppOptions, m: &Measured) -> AnalysisOptions {
    AnalysisOptions {
        min_samples: a.min_samples,
        max_time: a.max_time,
        bias: if a.no_bias {
            0
        } else {
            m.bias.as_ref().map_or(0, |b| b.subtracted)
        },
        resolution: m.resolution,
    }
}

/// The settings as the report states them.
fn config(a: &VppOptions, m: &Measured) -> VppConfig {
    VppConfig {
        source: a.source,
        top: a.top,
        min_samples: a.min_samples,
        n_check: match a.source {
            VppSource::Probe => m.stats.get("n_check").and_then(|x| x.as_u64()),
            VppSource::Vpmu => Some(a.n_check.unwrap_or(0)),
            VppSource::Lbr => None,
        },
        n_instr: a.n_instr,
        randomize: a.randomize,
        max_time: a.max_time,
        bias_subtracted: analysis_options(a, m).bias,
        cache: (a.source != VppSource::Probe && a.lbr_file.is_none() && !a.no_cache).then_some(
            VppCache {
                l1_kib: a.l1_kib,
                llc_kib: a.llc_kib,
                llc_latency: a.llc_latency,
                memory_latency: a.memory_latency,
            },
        ),
        lbr_file: a.lbr_file.as_ref().map(|p| p.display().to_string()),
        probe_file: a.probe_file.as_ref().map(|p| p.display().to_string()),
        load_threads: a.load,
    }
}

/// The top `limit` paths by net variation, with their place in the program.
fn path_rows(
    m: &Measured,
    an: &VppAnalysis,
    program: Option<&Program>,
    limit: usize,
) -> Vec<VppPath> {
    let mut sources: HashMap<u64, String> = HashMap::new();
    an.top(limit)
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let info = m.timings.info.get(&v.signature);
            let source = match program {
                Some(p) => sources
                    .entry(v.signature.entry.0)
                    // The outermost inline frame: its line is the call site of an inlined chain
                    // (a probe or helper inlined at the path's entry would otherwise name its
                    // own header line).
                    .or_insert_with(|| trace::frame_line(p.binary.frames(v.signature.entry).last()))
                    .clone(),
                None => info
                    .map(|x| x.function.rsplit('/').next().unwrap_or("").to_string())
                    .unwrap_or_default(),
            };
            let exact = m.exact.get(&v.signature);
            VppPath {
                rank: i + 1,
                signature: v.signature.clone(),
                count: v.count,
                basetime: v.basetime,
                total_time: v.total_time,
                net_variation: v.net_variation,
                share_of_time: v.share_of_time,
                share_of_timed: v.resolved.map(|_| v.share_of_timed),
                resolved: v.resolved,
                max_time: v.max_time,
                mean_time: v.mean_time,
                function: match (program, info) {
                    (Some(_), Some(x)) => x.function.clone(),
                    _ => String::new(),
                },
                source,
                blocks: info
                    .map(|x| x.blocks.iter().map(|b| format!("{:#x}", b.0)).collect())
                    .unwrap_or_default(),
                executions: exact.map(|e| e.count),
                llc_misses_per_execution: exact
                    .filter(|e| e.count > 0)
                    .map(|e| e.llc_misses as f64 / e.count as f64),
            }
        })
        .collect()
}

/// The delta histograms of the top paths (seed 004 Figs. 2 and 6) as an SVG document.
fn delta_plot(
    command: &[String],
    histograms: &[DeltaHistogram],
    rows: &[VppPath],
    unit: &str,
    outcome: Option<&RunOutcome>,
) -> String {
    let mut title = format!(
        "Delta from basetime of the top {} paths by net variation ({})",
        histograms.len(),
        command
            .first()
            .map(|p| p.rsplit('/').next().unwrap_or(p).to_string())
            .unwrap_or_default()
    );
    // A plot written on an interrupt (or of a run that died) says so where it is read.
    if let Some(w) = outcome.and_then(|o| o.sentence("the program", "the paths")) {
        title = format!("[{w}] {title}");
    }
    let plot = LinePlot {
        title,
        x_label: format!("time above the path's basetime ({unit})"),
        y_label: "share of the path's samples".into(),
        series: histograms
            .iter()
            .enumerate()
            .map(|(i, h)| {
                let n: u64 = h.counts.iter().sum::<u64>() + h.overflow;
                Series {
                    label: format!(
                        "#{} {} {}",
                        i + 1,
                        h.signature,
                        rows.get(i).map_or("", |r| r.source.as_str())
                    ),
                    points: h
                        .counts
                        .iter()
                        .enumerate()
                        .map(|(j, c)| {
                            ((j as u64 * h.bin_width) as f64, *c as f64 / n.max(1) as f64)
                        })
                        .collect(),
                }
            })
            .collect(),
    };
    render_line_plot(&plot)
}
