//! Named experiments: the paper's Tables 2-6 (seed 002 §5), the aliasing case where the
//! unbiasedness argument breaks (seed 001 §4's period randomisation repairs it), self-time
//! fragmentation where the binomial variance underestimates the spread, and the Wilson
//! coverage study over all of them.
//!
//! Method (why the full reproduction is fast): a cell's timeline is generated once as runs
//! (O(runs), not O(units)); every repetition draws only what the sampler observes. Without
//! jitter a profile depends on the start `t0` alone, so the sample counts of all `T` starts
//! are computed once from the runs ([`super::StartTable`]) and a repetition is O(tasks); with
//! jitter each sample is placed and found through a bucket index of the runs. Tables 2-6 at
//! 1000 repetitions cost about 0.05 s of CPU instead of 2.4e10 unit steps. Cells are
//! split into fixed chunks of repetitions, each with its own ChaCha8 stream derived from the
//! seed, the preset and the cell, and the chunks run on a small thread pool: results do not
//! depend on the number of threads.

use super::model::{piecewise_binomial, rate, timeline_moments};
use super::sampler::{
    repeat, run_capture_moments, IntervalJitter, Repeated, SamplerOptions, Start,
};
use super::timeline::{Granularity, RunIndex, Scenario, Timeline};
use crate::SimError;
use proftrust_model::named::Named;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// A named experiment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Preset {
    /// Table 2: one task at 80% utilisation, granularity 30-280, T = 100, 1M units.
    Table2,
    /// Table 3: the same at 50% and 30%.
    Table3,
    /// Table 4: the mix (idle 20%, tasks at granularity 30, 50, 150, 280).
    Table4,
    /// Table 5: the mix with noise N(0, 0.5), N(0, 1), N(0, 2) on the unit of events (eq. 10).
    Table5,
    /// Table 6: the mix with fewer samples: (N(0,2), n = 1000), (N(0,1), n = 1000),
    /// (N(0,1), n = 500).
    Table6,
    /// A periodic task commensurate with the interval, fixed start: bias, and its removal.
    Aliasing,
    /// Self time fragmented by a loop's callees: where the binomial variance underestimates.
    Fragmentation,
    /// Tables 2-6 in one run (the benchmark).
    All,
    /// Wilson 95% coverage over Tables 2-6, aliasing and fragmentation, plus the mix with a
    /// randomised period.
    Coverage,
    /// The analytic model beside the simulation for any `R`: one task at
    /// [`PresetOptions::sweep_util`] with granularity `R * T` for every `R` of
    /// [`PresetOptions::r_values`].
    Sweep,
}

/// Every preset, in display order, with its name (command line and JSON) and the line
/// `proftrust simulate sampling --help` shows.
impl Named for Preset {
    const ALL: &'static [(Self, &'static str, &'static str)] = &[
        (
            Preset::Table2,
            "table2",
            "Table 2: one task at 80% utilisation, granularity 30..280, T = 100",
        ),
        (Preset::Table3, "table3", "Table 3: 50% and 30% utilisation"),
        (
            Preset::Table4,
            "table4",
            "Table 4: the mix of four tasks and idle time",
        ),
        (
            Preset::Table5,
            "table5",
            "Table 5: the mix with noise N(0, 0.5 | 1 | 2) on the unit of events",
        ),
        (
            Preset::Table6,
            "table6",
            "Table 6: the mix with n = 1000 and 500 samples",
        ),
        (
            Preset::Aliasing,
            "aliasing",
            "Periodic task commensurate with the interval: bias with a fixed start, removed by jitter",
        ),
        (
            Preset::Fragmentation,
            "fragmentation",
            "Self time fragmented by a loop's callees: spread above the binomial model",
        ),
        (Preset::All, "all", "Tables 2-6 in one run"),
        (
            Preset::Coverage,
            "coverage",
            "Coverage of the 95% Wilson interval over every grid above",
        ),
        (
            Preset::Sweep,
            "sweep",
            "The analytic model (eqs. 1-9) beside the simulation for any R (`--r`, `--util`)",
        ),
    ];
}

impl std::str::FromStr for Preset {
    type Err = SimError;
    fn from_str(s: &str) -> Result<Preset, SimError> {
        Preset::from_name(s)
    }
}

impl Preset {
    /// Parses a preset name.
    pub fn from_name(s: &str) -> Result<Preset, SimError> {
        <Preset as Named>::from_name(s).map_err(|_| SimError::UnknownPreset {
            name: s.to_string(),
            known: Preset::ALL
                .iter()
                .map(|(_, n, _)| *n)
                .collect::<Vec<_>>()
                .join(", "),
        })
    }

    fn code(self) -> u64 {
        Preset::ALL
            .iter()
            .position(|(p, _, _)| *p == self)
            .unwrap_or(0) as u64
    }
}

/// Options of a preset run.
#[derive(Debug, Clone, PartialEq)]
pub struct PresetOptions {
    /// Repetitions of the profiling per cell. Default 1000 (seed 002 §5.2.1).
    pub reps: u64,
    /// Seed of every random choice. Default `0x5eed_0002`.
    pub seed: u64,
    /// Worker threads; 0 = available parallelism. Default 0.
    pub threads: usize,
    /// `R = granularity / interval` values of the `sweep` preset; each becomes a task of
    /// granularity `round(R * 100)` units (so `R` has a resolution of 0.01). Default
    /// [`DEFAULT_SWEEP_R`].
    pub r_values: Vec<f64>,
    /// Utilisation of the task in the `sweep` preset (the rest is idle time of granularity
    /// 1). Default 0.5.
    pub sweep_util: f64,
    /// Interval noise `j` of Tables 2-6 ([`IntervalJitter::Symmetric`]: each interval
    /// `T ± U{0..j}`, seed 002 §4's "we add random noise into the sampling interval"); 0 = a
    /// fixed interval with a random start. Default 0: eq. 2's setting, the one the
    /// unbiasedness proof (§3.3) assumes, and the paper gives the noise neither a
    /// distribution nor a size; the start table (every `t0` precomputed) also needs a fixed
    /// interval, so noise makes a repetition O(samples) instead of O(tasks). Must be below
    /// the interval (100).
    pub interval_noise: u64,
}

/// `R` values of the `sweep` preset by default: below, at and above 1, integer and not,
/// with fractional parts from 0.1 to 0.9 (so `MOD(R,1)(1-MOD(R,1))` takes values from 0 to
/// its maximum 0.25).
pub const DEFAULT_SWEEP_R: [f64; 16] = [
    0.1, 0.25, 0.3, 0.5, 0.75, 0.9, 1.0, 1.25, 1.5, 2.0, 2.8, 3.3, 4.5, 5.0, 7.7, 10.0,
];

impl Default for PresetOptions {
    fn default() -> Self {
        PresetOptions {
            reps: 1000,
            seed: 0x5eed_0002,
            threads: 0,
            r_values: DEFAULT_SWEEP_R.to_vec(),
            sweep_util: 0.5,
            interval_noise: 0,
        }
    }
}

/// One line of a preset's table: one task in one setting.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Row {
    /// Which table of the paper (or `aliasing`, `fragmentation`).
    pub table: String,
    /// Column group / setting (`util 80%`, `N(0,1) n=1000`, `P=100 t0=10 fixed`).
    pub setting: String,
    /// Task name.
    pub task: String,
    /// Nominal running granularity in units (mean for random granularities).
    pub granularity: f64,
    /// `R = granularity / interval` (eq. 1).
    pub r: f64,
    /// Share the scenario asked for.
    pub target_share: f64,
    /// Actual share of the generated running states ("mean of running states").
    pub actual_mean: f64,
    /// Mean profiled share over the repetitions.
    pub profiled_mean: f64,
    /// Standard deviation of the profiled share over the repetitions.
    pub profiled_sd: f64,
    /// Smallest profiled share over the repetitions (the paper's Fig. 11 gives the range
    /// 0.7869-0.8092 for granularity 30 at 80%).
    pub profiled_min: f64,
    /// Largest profiled share over the repetitions.
    pub profiled_max: f64,
    /// Model expectation of the profiled share (eqs. 5, 7).
    pub model_mean: f64,
    /// Model standard deviation (eqs. 6, 9 summed over runs, plus eq. 10 noise).
    pub model_sd: f64,
    /// Model variance of the samples one run of exactly `granularity` units receives,
    /// `MOD(R,1)(1-MOD(R,1))` (eq. 6); `None` for random granularities.
    pub run_var_model: Option<f64>,
    /// Mean number of samples one run of exactly `granularity` units receives, measured on
    /// the timeline (10 random starts); eq. 5 predicts `R`. `None` when not applicable
    /// (random granularity, jitter, fixed start).
    pub run_mean_sim: Option<f64>,
    /// The same variance measured on the timeline (10 random starts); `None` when not
    /// applicable (random granularity, jitter, fixed start).
    pub run_var_sim: Option<f64>,
    /// Mean number of samples per profile.
    pub samples_mean: f64,
    /// Share of repetitions whose 95% Wilson interval contained `actual_mean`.
    pub wilson_coverage: f64,
    /// The same with the interval's half-widths widened by
    /// [`noise_inflation`](super::noise_inflation)`(sigma)` of the cell's unit noise (equal
    /// to `wilson_coverage` without noise): the correction `audit` should apply to shares of
    /// a non-base event.
    pub widened_coverage: f64,
}

/// A preset's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PresetReport {
    /// Preset name.
    pub preset: String,
    /// Seed of every random choice.
    pub seed: u64,
    /// Repetitions per cell.
    pub reps: u64,
    /// Sampling interval in units.
    pub interval: u64,
    /// Interval noise of Tables 2-6 (`T ± j`), when on.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub interval_noise: u64,
    /// How the simulation was done.
    pub method: String,
    /// The rows.
    pub rows: Vec<Row>,
    /// Plain-language findings (bias, variance, coverage).
    pub notes: Vec<String>,
}

fn is_zero(x: &u64) -> bool {
    *x == 0
}

enum Source {
    Random(Scenario),
    Fragmented(Fragments),
    Fixed(Timeline),
}

/// Bursts of a function whose self time is cut by its callees: within a burst of `burst`
/// units, `self_len` units of self time alternate with `callee_len` units in callees; bursts
/// are separated by other work of exponential length with mean `gap`.
#[derive(Clone, Copy)]
struct Fragments {
    units: u64,
    burst: u64,
    self_len: Granularity,
    callee_len: Granularity,
    gap: f64,
}

impl Fragments {
    fn generate(&self, rng: &mut ChaCha8Rng) -> Timeline {
        let mut tl = Timeline::new(vec!["f self".into(), "f callees".into(), "other".into()]);
        let gap = Granularity::Exponential { mean: self.gap };
        while tl.len() < self.units {
            let left = self.units - tl.len();
            tl.push(2, draw(&gap, rng).min(left));
            let end = (tl.len() + self.burst).min(self.units);
            while tl.len() < end {
                let a = draw(&self.self_len, rng).min(end - tl.len());
                tl.push(0, a);
                let b = draw(&self.callee_len, rng).min(end - tl.len());
                tl.push(1, b);
            }
        }
        tl
    }
}

fn draw(g: &Granularity, rng: &mut ChaCha8Rng) -> u64 {
    match *g {
        Granularity::Constant { units } => units,
        Granularity::Exponential { mean } => {
            let u: f64 = rng.gen::<f64>();
            ((-(1.0 - u).ln() * mean).ceil() as u64).max(1)
        }
        Granularity::Uniform { lo, hi } => rng.gen_range(lo..=hi),
    }
}

struct Cell {
    table: &'static str,
    setting: String,
    source: Source,
    opts: SamplerOptions,
    /// Tasks to report (indices), with nominal granularity, whether it is constant, and
    /// target share.
    report: Vec<(usize, f64, bool, f64)>,
}

const INTERVAL: u64 = 100;
const UNITS: u64 = 1_000_000;
const CHUNKS: u64 = 8;

fn single_cells(table: &'static str, utils: &[f64]) -> Vec<Cell> {
    let mut v = Vec::new();
    for &u in utils {
        for g in [30u64, 50, 100, 150, 200, 280] {
            v.push(Cell {
                table,
                setting: format!("util {:.0}%", u * 100.0),
                source: Source::Random(Scenario::single(UNITS, u, g)),
                opts: SamplerOptions::default(),
                report: vec![(0, g as f64, true, u)],
            });
        }
    }
    v
}

fn mix_cell(table: &'static str, setting: String, units: u64, sigma: f64) -> Cell {
    let sc = Scenario::paper_mix(units);
    let report = sc
        .tasks
        .iter()
        .enumerate()
        .map(|(i, t)| (i, t.granularity.mean(), true, t.share))
        .collect();
    Cell {
        table,
        setting,
        source: Source::Random(sc),
        opts: SamplerOptions {
            unit_noise_sigma: sigma,
            ..Default::default()
        },
        report,
    }
}

/// The cells of `p`, with [`PresetOptions::interval_noise`] on the Tables 2-6 cells.
fn cells(p: Preset, o: &PresetOptions) -> Vec<Cell> {
    let mut v = preset_cells(p, o);
    let tables = matches!(
        p,
        Preset::Table2 | Preset::Table3 | Preset::Table4 | Preset::Table5 | Preset::Table6
    );
    if tables && o.interval_noise > 0 {
        for c in &mut v {
            c.opts.jitter = IntervalJitter::Symmetric(o.interval_noise);
            c.setting = format!("{}, T±{}", c.setting, o.interval_noise);
        }
    }
    v
}

fn preset_cells(p: Preset, o: &PresetOptions) -> Vec<Cell> {
    let jitter = IntervalJitter::UniformUpTo(INTERVAL / 8);
    match p {
        Preset::Table2 => single_cells("Table 2", &[0.8]),
        Preset::Table3 => single_cells("Table 3", &[0.5, 0.3]),
        Preset::Table4 => vec![mix_cell("Table 4", "mix".into(), UNITS, 0.0)],
        Preset::Table5 => [0.5, 1.0, 2.0]
            .iter()
            .map(|&s| mix_cell("Table 5", format!("N(0,{s})"), UNITS, s))
            .collect(),
        Preset::Table6 => [(2.0, 1000u64), (1.0, 1000), (1.0, 500)]
            .iter()
            .map(|&(s, n)| mix_cell("Table 6", format!("N(0,{s}) n={n}"), n * INTERVAL, s))
            .collect(),
        Preset::Aliasing => {
            let mk = |period: u64, on: u64, start: Start, jit: IntervalJitter, label: &str| Cell {
                table: "aliasing",
                setting: format!("P={period} on={on}: {label}"),
                source: Source::Fixed(Timeline::periodic(UNITS, period, on)),
                opts: SamplerOptions {
                    start,
                    jitter: jit,
                    ..Default::default()
                },
                report: vec![(0, on as f64, true, on as f64 / period as f64)],
            };
            vec![
                mk(
                    100,
                    30,
                    Start::Fixed(10),
                    IntervalJitter::None,
                    "t0=10 fixed",
                ),
                mk(100, 30, Start::Random, IntervalJitter::None, "t0 random"),
                mk(100, 30, Start::Fixed(10), jitter, "t0=10 fixed, T+U(0,T/8)"),
                mk(
                    250,
                    75,
                    Start::Fixed(10),
                    IntervalJitter::None,
                    "t0=10 fixed",
                ),
                mk(250, 75, Start::Fixed(10), jitter, "t0=10 fixed, T+U(0,T/8)"),
                mk(
                    101,
                    30,
                    Start::Fixed(10),
                    IntervalJitter::None,
                    "t0=10 fixed, P not commensurate",
                ),
            ]
        }
        Preset::Fragmentation => {
            let mk = |a: Granularity, b: Granularity, jit: IntervalJitter, label: &str| Cell {
                table: "fragmentation",
                setting: label.to_string(),
                source: Source::Fragmented(Fragments {
                    units: UNITS,
                    burst: 5000,
                    self_len: a,
                    callee_len: b,
                    gap: 5000.0,
                }),
                opts: SamplerOptions {
                    jitter: jit,
                    ..Default::default()
                },
                report: vec![(0, a.mean(), matches!(a, Granularity::Constant { .. }), 0.0)],
            };
            let c = Granularity::constant;
            vec![
                mk(
                    c(3),
                    c(7),
                    IntervalJitter::None,
                    "loop period 10 (divides T)",
                ),
                mk(c(3), c(7), jitter, "loop period 10, T+U(0,T/8)"),
                mk(
                    c(2),
                    c(5),
                    IntervalJitter::None,
                    "loop period 7 (coprime to T)",
                ),
                mk(
                    Granularity::Exponential { mean: 3.0 },
                    Granularity::Exponential { mean: 7.0 },
                    IntervalJitter::None,
                    "random fragments (mean 3 + 7)",
                ),
            ]
        }
        // `all` and `coverage` run the cells of their sub-presets (see `subs`); coverage
        // adds the mix with a randomised period, without and with unit noise: what the
        // remedy audit recommends does to coverage.
        Preset::All => Vec::new(),
        Preset::Coverage => {
            let mut v = vec![mix_cell(
                "randomised period",
                "mix, T+U(0,T/8)".into(),
                UNITS,
                0.0,
            )];
            v[0].opts.jitter = jitter;
            let mut n = mix_cell(
                "randomised period",
                "mix N(0,1), T+U(0,T/8)".into(),
                UNITS,
                1.0,
            );
            n.opts.jitter = jitter;
            v.push(n);
            v
        }
        Preset::Sweep => o
            .r_values
            .iter()
            .map(|&r| {
                let g = ((r * INTERVAL as f64).round() as u64).max(1);
                Cell {
                    table: "sweep",
                    setting: format!("util {:.0}%", o.sweep_util * 100.0),
                    source: Source::Random(Scenario::single(UNITS, o.sweep_util, g)),
                    opts: SamplerOptions::default(),
                    report: vec![(0, g as f64, true, o.sweep_util)],
                }
            })
            .collect(),
    }
}

/// Runs `f` over `items` on up to `threads` scoped threads; results in item order.
fn par_map<T: Sync, R: Send>(items: &[T], threads: usize, f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let out: Mutex<Vec<Option<R>>> = Mutex::new((0..items.len()).map(|_| None).collect());
    let next = AtomicUsize::new(0);
    let threads = threads.clamp(1, items.len().max(1));
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= items.len() {
                    break;
                }
                let r = f(&items[i]);
                if let Ok(mut o) = out.lock() {
                    o[i] = Some(r);
                }
            });
        }
    });
    out.into_inner()
        .unwrap_or_default()
        .into_iter()
        .flatten()
        .collect()
}

fn stream_rng(seed: u64, stream: u64) -> ChaCha8Rng {
    let mut r = ChaCha8Rng::seed_from_u64(seed);
    r.set_stream(stream);
    r
}

/// The presets `p` runs (`all` and `coverage` run several).
fn sub_presets(p: Preset) -> Vec<Preset> {
    match p {
        Preset::All => vec![
            Preset::Table2,
            Preset::Table3,
            Preset::Table4,
            Preset::Table5,
            Preset::Table6,
        ],
        Preset::Coverage => vec![
            Preset::Table2,
            Preset::Table3,
            Preset::Table4,
            Preset::Table5,
            Preset::Table6,
            Preset::Aliasing,
            Preset::Fragmentation,
            Preset::Coverage,
        ],
        q => vec![q],
    }
}

/// Bytes [`run_preset`] keeps for `o.reps` repetitions: one share per task and repetition
/// of every cell (`8 * reps * tasks`), twice at the peak when the workers' chunks are merged.
/// An `f64`, so absurd repetition counts give an absurd estimate instead of an overflow;
/// callers refuse a run that would not fit in memory before starting it.
pub fn estimated_memory(p: Preset, o: &PresetOptions) -> f64 {
    let tasks: usize = sub_presets(p)
        .into_iter()
        .flat_map(|q| cells(q, o))
        .map(|c| match &c.source {
            Source::Random(sc) => sc.tasks.len(),
            Source::Fragmented(_) => 3,
            Source::Fixed(t) => t.task_names.len(),
        })
        .sum();
    2.0 * 8.0 * o.reps as f64 * tasks as f64
}

/// Runs a preset.
pub fn run_preset(p: Preset, o: &PresetOptions) -> Result<PresetReport, SimError> {
    check_options(p, o)?;
    let threads = if o.threads == 0 {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    } else {
        o.threads
    };
    let all_cells = numbered_cells(p, o)?;
    let timelines: Vec<Timeline> = par_map(&all_cells, threads, |(id, c)| {
        let mut rng = stream_rng(o.seed, *id);
        match &c.source {
            // Validated above: generation cannot fail.
            Source::Random(sc) => sc.generate(&mut rng).unwrap_or_default(),
            Source::Fragmented(f) => f.generate(&mut rng),
            Source::Fixed(t) => t.clone(),
        }
    });
    let indexes: Vec<RunIndex> = timelines
        .iter()
        .map(|t| RunIndex::new(t, INTERVAL))
        .collect();
    let actuals: Vec<Vec<f64>> = timelines.iter().map(|t| t.actual_shares()).collect();
    let merged = repeat_cells(&all_cells, &timelines, &indexes, &actuals, o, threads);
    let mut rows = Vec::new();
    for (ci, (id, c)) in all_cells.iter().enumerate() {
        rows.extend(cell_rows(
            o.seed,
            *id,
            c,
            &timelines[ci],
            &merged[ci],
            &actuals[ci],
        ));
    }
    let notes = findings(p, &rows, o.reps);
    Ok(PresetReport {
        preset: p.name().to_string(),
        seed: o.seed,
        reps: o.reps,
        interval: INTERVAL,
        interval_noise: o.interval_noise,
        method: format!(
            "running states generated once per cell as runs; without jitter the sample counts \
             of every start t0 are precomputed from the runs (O(runs + T*tasks)) and a \
             repetition draws t0 and one normal per task for unit noise (O(tasks)); with jitter \
             every sample is placed and its run found through a bucket index (O(samples)); \
             {CHUNKS} ChaCha8 streams per cell; {threads} threads"
        ),
        rows,
        notes,
    })
}

/// Refuses options [`run_preset`] cannot run with `p`, naming the fix.
fn check_options(p: Preset, o: &PresetOptions) -> Result<(), SimError> {
    if o.reps == 0 {
        return Err(SimError::InvalidSampler {
            what: "0 repetitions".into(),
            fix: "use --reps 1 or more",
        });
    }
    if o.interval_noise >= INTERVAL {
        return Err(SimError::InvalidSampler {
            what: format!(
                "interval noise ±{} >= interval {INTERVAL}",
                o.interval_noise
            ),
            fix: "keep the interval noise below the interval (0 to 99)",
        });
    }
    if p == Preset::Sweep {
        if o.r_values.is_empty() {
            return Err(SimError::InvalidSampler {
                what: "no R values for the sweep".into(),
                fix: "give at least one R (e.g. --r 0.3,1.5,2.8)",
            });
        }
        if let Some(r) = o
            .r_values
            .iter()
            .find(|r| !(r.is_finite() && **r > 0.0 && **r <= 1000.0))
        {
            return Err(SimError::InvalidSampler {
                what: format!("R = {r}"),
                fix: "use R values in (0, 1000]",
            });
        }
        if !(o.sweep_util > 0.0 && o.sweep_util < 1.0) {
            return Err(SimError::InvalidSampler {
                what: format!("sweep utilisation {}", o.sweep_util),
                fix: "use a utilisation in (0, 1)",
            });
        }
    }
    Ok(())
}

/// The cells of `p`'s sub-presets, validated, each with its random stream id. Cell ids
/// are stable per sub-preset so that `all` reproduces each table's numbers.
fn numbered_cells(p: Preset, o: &PresetOptions) -> Result<Vec<(u64, Cell)>, SimError> {
    let mut all_cells: Vec<(u64, Cell)> = Vec::new();
    for q in sub_presets(p) {
        for (i, c) in cells(q, o).into_iter().enumerate() {
            all_cells.push(((q.code() << 16 | i as u64) << 8, c));
        }
    }
    for (_, c) in &all_cells {
        c.opts.validate()?;
        if let Source::Random(sc) = &c.source {
            sc.validate()?;
        }
    }
    Ok(all_cells)
}

/// `o.reps` repetitions of every cell's sampler on its timeline, in up to [`CHUNKS`]
/// chunks per cell (each with its own stream) spread over `threads`, merged per cell.
fn repeat_cells(
    all_cells: &[(u64, Cell)],
    timelines: &[Timeline],
    indexes: &[RunIndex],
    actuals: &[Vec<f64>],
    o: &PresetOptions,
    threads: usize,
) -> Vec<Repeated> {
    let mut jobs = Vec::new();
    for ci in 0..all_cells.len() {
        for ch in 0..CHUNKS.min(o.reps) {
            let n = o.reps / CHUNKS.min(o.reps) + u64::from(ch < o.reps % CHUNKS.min(o.reps));
            jobs.push((ci, ch, n));
        }
    }
    let results = par_map(&jobs, threads, |&(ci, ch, n)| {
        let (id, c) = &all_cells[ci];
        let mut rng = stream_rng(o.seed, id + 1 + ch);
        repeat(
            &timelines[ci],
            &indexes[ci],
            &c.opts,
            &actuals[ci],
            n,
            &mut rng,
        )
    });
    let mut merged: Vec<Repeated> = (0..all_cells.len()).map(|_| Repeated::default()).collect();
    for ((ci, _, _), r) in jobs.iter().zip(results) {
        merged[*ci].extend(r);
    }
    merged
}

/// The report's rows of cell `c` (stream id `id`): its repetitions `rep` on timeline `tl`
/// against the model and the actual shares.
fn cell_rows(
    seed: u64,
    id: u64,
    c: &Cell,
    tl: &Timeline,
    rep: &Repeated,
    actual: &[f64],
) -> Vec<Row> {
    let k = tl.task_names.len();
    let model = timeline_moments(tl, c.opts.interval, c.opts.unit_noise_sigma);
    let mut rows = Vec::new();
    for &(task, g, constant, target) in &c.report {
        let (pm, psd) = rep.mean_sd(task, k);
        let r = rate(g, c.opts.interval as f64);
        let simple = c.opts.jitter == IntervalJitter::None && c.opts.start == Start::Random;
        let run_sim = (constant && simple)
            .then(|| run_moments(seed, id, tl, task, g, c.opts.interval))
            .flatten();
        let (pmin, pmax) = rep.min_max(task, k);
        let target = if target > 0.0 { target } else { actual[task] };
        rows.push(Row {
            table: c.table.to_string(),
            setting: c.setting.clone(),
            task: tl.task_names[task].clone(),
            granularity: g,
            r,
            target_share: target,
            actual_mean: actual[task],
            profiled_mean: pm,
            profiled_sd: psd,
            profiled_min: pmin,
            profiled_max: pmax,
            model_mean: model[task].mean,
            model_sd: model[task].sd,
            run_var_model: constant.then(|| piecewise_binomial(r).1),
            run_mean_sim: run_sim.map(|x| x.0),
            run_var_sim: run_sim.map(|x| x.1),
            samples_mean: rep.samples as f64 / rep.reps.max(1) as f64,
            wilson_coverage: rep.covered[task] as f64 / rep.reps.max(1) as f64,
            widened_coverage: rep.covered_widened[task] as f64 / rep.reps.max(1) as f64,
        });
    }
    rows
}

/// Mean and variance of the samples per run of exactly `g` units of `task`, pooled over
/// 10 random starts (eqs. 5-6); `None` when no run was sampled.
fn run_moments(
    seed: u64,
    id: u64,
    tl: &Timeline,
    task: usize,
    g: f64,
    interval: u64,
) -> Option<(f64, f64)> {
    let mut rng = stream_rng(seed, id + 255);
    let (mut n, mut s, mut s2) = (0u64, 0.0, 0.0);
    for _ in 0..10 {
        let t0 = rng.gen_range(0..interval);
        let (m, mean, var) = run_capture_moments(tl, task as u32, g as u64, t0, interval);
        n += m;
        s += mean * m as f64;
        s2 += (var + mean * mean) * m as f64;
    }
    (n > 0).then(|| {
        let mean = s / n as f64;
        (mean, s2 / n as f64 - mean * mean)
    })
}

/// Whether a row's mean is within `z` standard errors of the actual share (the unbiasedness
/// check; a zero spread needs an exact match within 1e-9 plus the O(1/n) edge effect).
pub fn is_unbiased(row: &Row, reps: u64, z: f64) -> bool {
    let se = row.profiled_sd / (reps.max(1) as f64).sqrt();
    let edge = 1.0 / row.samples_mean.max(1.0);
    (row.profiled_mean - row.actual_mean).abs() <= z * se + edge + 1e-9
}

fn findings(p: Preset, rows: &[Row], reps: u64) -> Vec<String> {
    let mut v = Vec::new();
    let biased: Vec<&Row> = rows.iter().filter(|r| !is_unbiased(r, reps, 4.0)).collect();
    if biased.is_empty() {
        v.push(format!(
            "unbiased: every profiled mean is within 4 standard errors (+1/n) of the actual share ({} rows)",
            rows.len()
        ));
    } else {
        for r in &biased {
            v.push(format!(
                "BIASED: {} / {} / task {}: profiled {:.4} vs actual {:.4} (bias {:+.4})",
                r.table,
                r.setting,
                r.task,
                r.profiled_mean,
                r.actual_mean,
                r.profiled_mean - r.actual_mean
            ));
        }
    }
    for r in rows {
        if r.model_sd > 0.0 && r.profiled_sd > 1.5 * r.model_sd && r.profiled_sd > 1e-4 {
            v.push(format!(
                "SPREAD UNDERESTIMATED: {} / {} / task {}: measured SD {:.2e} is {:.1}x the binomial model's {:.2e}",
                r.table,
                r.setting,
                r.task,
                r.profiled_sd,
                r.profiled_sd / r.model_sd,
                r.model_sd
            ));
        }
    }
    // Aliasing and fragmentation are the cases where runs are not captured independently of
    // the start; their per-run moments are reported in their own rows, not in this summary.
    let per_run: Vec<(f64, f64)> = rows
        .iter()
        .filter(|r| r.table != "aliasing" && r.table != "fragmentation")
        .filter_map(|r| {
            let (e, v) = piecewise_binomial(r.r);
            Some(((r.run_mean_sim? - e).abs(), (r.run_var_sim? - v).abs()))
        })
        .collect();
    if !per_run.is_empty() {
        v.push(format!(
            "per-run model (eqs. 5-6) on {} rows: max |E sim - R| = {:.4}, max |V sim - MOD(R,1)(1-MOD(R,1))| = {:.4}",
            per_run.len(),
            per_run.iter().map(|x| x.0).fold(0.0, f64::max),
            per_run.iter().map(|x| x.1).fold(0.0, f64::max)
        ));
    }
    let low: Vec<&Row> = rows.iter().filter(|r| r.wilson_coverage < 0.95).collect();
    if matches!(p, Preset::Coverage | Preset::All) || !low.is_empty() {
        let low_w = rows.iter().filter(|r| r.widened_coverage < 0.95).count();
        v.push(format!(
            "Wilson 95% coverage below 0.95 in {} of {} rows ({} with the half-width widened by sqrt(1+sigma^2) for unit noise)",
            low.len(),
            rows.len(),
            low_w
        ));
    }
    v
}

fn sci(x: f64) -> String {
    format!("{x:.2e}")
}

fn opt(x: Option<f64>) -> String {
    x.map_or_else(|| "-".into(), |v| format!("{v:.4}"))
}

/// Renders a report as text tables laid out like the paper's (extra model columns on the
/// right).
pub fn render_text(rep: &PresetReport) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "preset {}  seed {}  reps {}  interval {}",
        rep.preset, rep.seed, rep.reps, rep.interval
    );
    let tables: Vec<String> = {
        let mut t: Vec<String> = Vec::new();
        for r in &rep.rows {
            if !t.contains(&r.table) {
                t.push(r.table.clone());
            }
        }
        t
    };
    for t in tables {
        let rows: Vec<&Row> = rep.rows.iter().filter(|r| r.table == t).collect();
        let _ = writeln!(s);
        if rep.preset == "coverage" {
            render_coverage(&mut s, &t, &rows);
            continue;
        }
        match t.as_str() {
            "Table 2" => render_single(&mut s, &t, &rows),
            "Table 3" => render_side_by_side(&mut s, &t, &rows),
            "Table 4" => render_mix(&mut s, &t, &rows),
            "Table 5" | "Table 6" => render_noise(&mut s, &t, &rows),
            "sweep" => render_sweep(&mut s, &rows),
            _ => render_generic(&mut s, &t, &rows),
        }
    }
    let _ = writeln!(s);
    for n in &rep.notes {
        let _ = writeln!(s, "* {n}");
    }
    let _ = writeln!(s, "method: {}", rep.method);
    s
}

fn render_single(s: &mut String, t: &str, rows: &[&Row]) {
    let mut settings: Vec<&str> = Vec::new();
    for r in rows {
        if !settings.contains(&r.setting.as_str()) {
            settings.push(&r.setting);
        }
    }
    for set in settings {
        let _ = writeln!(s, "{t}: different running granularity, {set} (T = 100)");
        let _ = writeln!(
            s,
            "{:>11} {:>4} {:>9} {:>9} {:>9} | {:>9} {:>9} {:>8} {:>8} {:>6} {:>15}",
            "granularity",
            "R",
            "running",
            "profiled",
            "SD",
            "model E",
            "model SD",
            "V/run",
            "V/run",
            "Wilson",
            "profiled"
        );
        let _ = writeln!(
            s,
            "{:>11} {:>4} {:>9} {:>9} {:>9} | {:>9} {:>9} {:>8} {:>8} {:>6} {:>15}",
            "", "", "mean", "mean", "", "eq.5,7", "eq.6,9", "eq.6", "sim", "cover", "min..max"
        );
        for r in rows.iter().filter(|r| r.setting == set) {
            let _ = writeln!(
                s,
                "{:>11} {:>4.1} {:>9.4} {:>9.4} {:>9} | {:>9.4} {:>9} {:>8} {:>8} {:>6.3} {:>15}",
                r.granularity,
                r.r,
                r.actual_mean,
                r.profiled_mean,
                sci(r.profiled_sd),
                r.model_mean,
                sci(r.model_sd),
                opt(r.run_var_model),
                opt(r.run_var_sim),
                r.wilson_coverage,
                format!("{:.4}..{:.4}", r.profiled_min, r.profiled_max)
            );
        }
    }
}

fn render_side_by_side(s: &mut String, t: &str, rows: &[&Row]) {
    let mut settings: Vec<&str> = Vec::new();
    for r in rows {
        if !settings.contains(&r.setting.as_str()) {
            settings.push(&r.setting);
        }
    }
    let _ = writeln!(
        s,
        "{t}: the profiling results of conditions with {} (T = 100); per column group: \
         actual, profiled mean, SD, model SD",
        settings.join(" and ")
    );
    let _ = write!(s, "{:>11}", "granularity");
    for set in &settings {
        let _ = write!(s, " | {:^37}", set);
    }
    let _ = writeln!(s);
    let _ = write!(s, "{:>11}", "");
    for _ in &settings {
        let _ = write!(
            s,
            " | {:>8} {:>8} {:>9} {:>9}",
            "actual", "mean", "SD", "model SD"
        );
    }
    let _ = writeln!(s);
    let mut grans: Vec<f64> = Vec::new();
    for r in rows {
        if !grans.contains(&r.granularity) {
            grans.push(r.granularity);
        }
    }
    for g in grans {
        let _ = write!(s, "{g:>11}");
        for set in &settings {
            match rows
                .iter()
                .find(|r| r.granularity == g && r.setting == *set)
            {
                Some(r) => {
                    let _ = write!(
                        s,
                        " | {:>8.4} {:>8.4} {:>9} {:>9}",
                        r.actual_mean,
                        r.profiled_mean,
                        sci(r.profiled_sd),
                        sci(r.model_sd)
                    );
                }
                None => {
                    let _ = write!(s, " | {:>37}", "-");
                }
            }
        }
        let _ = writeln!(s);
    }
}

fn render_mix(s: &mut String, t: &str, rows: &[&Row]) {
    let _ = writeln!(s, "{t}: the simulation results of mixed tasks (T = 100)");
    let _ = writeln!(
        s,
        "{:>5} {:>11} {:>10} {:>9} {:>9} {:>9} | {:>9} {:>8} {:>8} {:>6}",
        "task",
        "granularity",
        "proportion",
        "running",
        "profiled",
        "SD",
        "model SD",
        "V/run",
        "V/run",
        "Wilson"
    );
    let _ = writeln!(
        s,
        "{:>5} {:>11} {:>10} {:>9} {:>9} {:>9} | {:>9} {:>8} {:>8} {:>6}",
        "", "", "(%)", "mean", "mean", "", "eq.6,9", "eq.6", "sim", "cover"
    );
    for r in rows {
        let _ = writeln!(
            s,
            "{:>5} {:>11} {:>10.0} {:>9.4} {:>9.4} {:>9} | {:>9} {:>8} {:>8} {:>6.3}",
            r.task,
            r.granularity,
            r.target_share * 100.0,
            r.actual_mean,
            r.profiled_mean,
            sci(r.profiled_sd),
            sci(r.model_sd),
            opt(r.run_var_model),
            opt(r.run_var_sim),
            r.wilson_coverage
        );
    }
}

fn render_noise(s: &mut String, t: &str, rows: &[&Row]) {
    let mut settings: Vec<&str> = Vec::new();
    for r in rows {
        if !settings.contains(&r.setting.as_str()) {
            settings.push(&r.setting);
        }
    }
    let title = if t == "Table 5" {
        "introduce noise into the unit of events (eq. 10)"
    } else {
        "reducing the number of samples"
    };
    let _ = writeln!(
        s,
        "{t}: {title}; cells: profiled Mean(SD) [model SD] {{actual}}"
    );
    let _ = write!(s, "{:>5}", "task");
    for set in &settings {
        let _ = write!(s, " {:>42}", set);
    }
    let _ = writeln!(s);
    let mut tasks: Vec<&str> = Vec::new();
    for r in rows {
        if !tasks.contains(&r.task.as_str()) {
            tasks.push(&r.task);
        }
    }
    for task in tasks {
        let _ = write!(s, "{task:>5}");
        for set in &settings {
            if let Some(r) = rows.iter().find(|r| r.task == task && r.setting == *set) {
                let cell = format!(
                    "{:.4}({}) [{}] {{{:.4}}}",
                    r.profiled_mean,
                    sci(r.profiled_sd),
                    sci(r.model_sd),
                    r.actual_mean
                );
                let _ = write!(s, " {cell:>42}");
            }
        }
        let _ = writeln!(s);
    }
}

fn render_generic(s: &mut String, t: &str, rows: &[&Row]) {
    let _ = writeln!(s, "{t}");
    let _ = writeln!(
        s,
        "{:<44} {:>10} {:>6} {:>8} {:>9} {:>9} {:>9} {:>9} {:>6}",
        "setting", "task", "gran", "actual", "profiled", "bias", "SD", "model SD", "Wilson"
    );
    for r in rows {
        let _ = writeln!(
            s,
            "{:<44} {:>10} {:>6.1} {:>8.4} {:>9.4} {:>+9.4} {:>9} {:>9} {:>6.3}",
            r.setting,
            r.task,
            r.granularity,
            r.actual_mean,
            r.profiled_mean,
            r.profiled_mean - r.actual_mean,
            sci(r.profiled_sd),
            sci(r.model_sd),
            r.wilson_coverage
        );
    }
}

fn render_coverage(s: &mut String, t: &str, rows: &[&Row]) {
    let _ = writeln!(
        s,
        "{t}: coverage of the 95% Wilson interval of the profiled share (widened: half-width x sqrt(1+sigma^2))"
    );
    let _ = writeln!(
        s,
        "{:<46} {:>10} {:>9} {:>9} {:>9} {:>8} {:>8}",
        "granularity / setting", "task", "SD", "binom SD", "SD/binom", "coverage", "widened"
    );
    for r in rows {
        let binom = (r.actual_mean * (1.0 - r.actual_mean) / r.samples_mean.max(1.0)).sqrt();
        let ratio = if binom > 0.0 {
            r.profiled_sd / binom
        } else {
            0.0
        };
        let flag = if r.wilson_coverage < 0.95 {
            "  < 0.95"
        } else {
            ""
        };
        let _ = writeln!(
            s,
            "{:<46} {:>10} {:>9} {:>9} {:>9.2} {:>8.3} {:>8.3}{flag}",
            format!("{:.1} {}", r.granularity, r.setting),
            r.task,
            sci(r.profiled_sd),
            sci(binom),
            ratio,
            r.wilson_coverage,
            r.widened_coverage
        );
    }
}

fn render_sweep(s: &mut String, rows: &[&Row]) {
    let set = rows.first().map_or("", |r| r.setting.as_str());
    let _ = writeln!(
        s,
        "sweep: the analytic model (eqs. 1-9) beside the simulation, one task at {set}, T = 100"
    );
    let _ = writeln!(
        s,
        "{:>5} {:>11} {:>8} {:>9} {:>9} {:>9} | {:>7} {:>7} {:>7} {:>7} {:>9} {:>6}",
        "R",
        "granularity",
        "running",
        "profiled",
        "SD",
        "model SD",
        "E/run",
        "E/run",
        "V/run",
        "V/run",
        "V n=1e4",
        "Wilson"
    );
    let _ = writeln!(
        s,
        "{:>5} {:>11} {:>8} {:>9} {:>9} {:>9} | {:>7} {:>7} {:>7} {:>7} {:>9} {:>6}",
        "eq.1", "", "mean", "mean", "", "eq.6,9", "eq.5", "sim", "eq.6", "sim", "eq.9", "cover"
    );
    for r in rows {
        let (e5, v6) = piecewise_binomial(r.r);
        let _ = writeln!(
            s,
            "{:>5.2} {:>11} {:>8.4} {:>9.4} {:>9} {:>9} | {:>7.3} {:>7} {:>7.4} {:>7} {:>9} {:>6.3}",
            r.r,
            r.granularity,
            r.actual_mean,
            r.profiled_mean,
            sci(r.profiled_sd),
            sci(r.model_sd),
            e5,
            r.run_mean_sim.map_or_else(|| "-".into(), |v| format!("{v:.3}")),
            v6,
            opt(r.run_var_sim),
            sci(super::model::sample_moments(r.r, 10_000).1),
            r.wilson_coverage
        );
    }
}
