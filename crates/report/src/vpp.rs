//! The report of `vpp` (variational path profiling, seed 004): its data, which is the
//! `--json` document (keys in field order), and the text report.

use crate::Table;
use proftrust_model::RunOutcome;
use proftrust_vpp::{
    BiasEstimate, DeltaHistogram, PathSignature, Ranking, StabilityComparison, TimeBase,
};
use serde::Serialize;
use std::fmt::Write as _;

/// Where path timings come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum VppSource {
    /// The exact block trace under QEMU, timed by the virtual PMU (cache simulation).
    #[default]
    Vpmu,
    /// LBR branch stacks with cycle counts (a file, or the virtual PMU's).
    Lbr,
    /// The program's own probes (proftrust_probe.h), run natively.
    Probe,
}

impl proftrust_model::named::Named for VppSource {
    const ALL: &'static [(Self, &'static str, &'static str)] = &[
        (
            VppSource::Vpmu,
            "vpmu",
            "The exact block trace under QEMU, timed by the virtual PMU (cache simulation)",
        ),
        (
            VppSource::Lbr,
            "lbr",
            "LBR branch stacks with cycle counts (--lbr-file, or the virtual PMU's)",
        ),
        (
            VppSource::Probe,
            "probe",
            "The program's own probes (proftrust_probe.h), run natively",
        ),
    ];
}
proftrust_model::named_from_str!(VppSource);

/// What `vpp` found. Serialised, it is the `--json` contract (docs/vpp.md); the
/// `#[serde(skip)]` fields feed the text report and the SVG file only.
#[derive(Debug, Clone, Serialize)]
pub struct VppReport {
    /// The program and its arguments (the reference input).
    pub program: Vec<String>,
    /// Seed of the bursty-tracing jitter.
    pub seed: u64,
    /// Unit of every time (`cycles`, `ticks`).
    pub unit: String,
    /// The settings.
    pub config: VppConfig,
    /// How the main run ended (absent when a file was read).
    pub outcome: Option<RunOutcome>,
    /// Timed samples.
    pub samples: u64,
    /// Samples longer than the maximum time, left out.
    pub excluded_samples: u64,
    /// Distinct paths timed.
    pub distinct_paths: usize,
    /// Paths with enough samples to be analysed.
    pub analysed_paths: usize,
    /// Net variation of all paths.
    pub net_variation: u64,
    /// Its share of the time base.
    pub net_variation_share: f64,
    /// Net variation share of the top paths.
    pub top_share: f64,
    /// What the shares are of.
    pub time_base: TimeBase,
    /// The time base's value.
    pub time_base_value: f64,
    /// Path executions per timed sample.
    pub executions_per_sample: f64,
    /// The run's time in the unit, when known.
    pub run_time: Option<u64>,
    /// Timed paths' time extrapolated to every execution, as a share of `run_time`.
    pub timed_coverage: Option<f64>,
    /// Probes: the timer's resolution in ticks (every time is a multiple of it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timer_resolution: Option<u64>,
    /// `timed_coverage` when above 1: shares of program time are then of the extrapolated
    /// timed time (every timed time deflated by this factor).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timing_inflation: Option<f64>,
    /// The paths by net variation.
    pub paths: Vec<VppPath>,
    /// Top paths by net variation against the top by frequency and by total time.
    pub rankings: Vec<VppRanking>,
    /// The probes' instrumentation bias.
    pub bias: Option<BiasEstimate>,
    /// Stability of the top paths across loads and inputs.
    pub stability: Vec<VppStability>,
    /// Delta histograms of the top paths (seed 004 Figs. 2 and 6).
    pub histograms: Vec<DeltaHistogram>,
    /// What the source counted.
    pub source_stats: serde_json::Value,
    /// Warnings about the program, the runs and the timings.
    pub warnings: Vec<crate::Warning>,
    /// The minimum number of samples the analysis applied.
    #[serde(skip)]
    pub min_samples_used: u64,
    /// The delta histograms as a standalone SVG document, when asked for.
    #[serde(skip)]
    pub svg: Option<String>,
}

/// One path.
#[derive(Debug, Clone, Serialize)]
pub struct VppPath {
    /// Rank by net variation, from 1.
    pub rank: usize,
    /// Signature.
    pub signature: PathSignature,
    /// Timed samples.
    pub count: u64,
    /// Fastest time.
    pub basetime: u64,
    /// Total time.
    pub total_time: u64,
    /// Total time − count × basetime.
    pub net_variation: u64,
    /// Net variation as a share of the time base.
    pub share_of_time: f64,
    /// Probes: net variation as a share of the timed paths' time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub share_of_timed: Option<f64>,
    /// Probes: whether the basetime is at least one timer step (below it the probes cannot
    /// resolve the path's fastest time from the bias).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resolved: Option<bool>,
    /// Slowest time.
    pub max_time: u64,
    /// Mean time.
    pub mean_time: f64,
    /// Function (empty when unknown).
    pub function: String,
    /// `file:line` of its entry (or the probe's file).
    pub source: String,
    /// Its blocks (hex).
    pub blocks: Vec<String>,
    /// Exact executions (trace source).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub executions: Option<u64>,
    /// Exact LLC misses per execution (trace source).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub llc_misses_per_execution: Option<f64>,
}

/// The simulated caches.
#[derive(Debug, Clone, Serialize)]
pub struct VppCache {
    /// L1D KiB.
    pub l1_kib: u32,
    /// LLC KiB.
    pub llc_kib: u32,
    /// LLC hit latency.
    pub llc_latency: u32,
    /// Memory latency.
    pub memory_latency: u32,
}

/// The settings of the run.
#[derive(Debug, Clone, Serialize)]
pub struct VppConfig {
    /// Where timings came from.
    pub source: VppSource,
    /// Top paths compared.
    pub top: usize,
    /// Samples a path needs.
    pub min_samples: u64,
    /// Bursty tracing nCheck.
    pub n_check: Option<u64>,
    /// Bursty tracing nInstr.
    pub n_instr: u64,
    /// nCheck jittered.
    pub randomize: bool,
    /// Longer samples left out.
    pub max_time: Option<u64>,
    /// Bias subtracted from every sample.
    pub bias_subtracted: u64,
    /// The simulated caches (virtual PMU runs).
    pub cache: Option<VppCache>,
    /// The LBR file read.
    pub lbr_file: Option<String>,
    /// The probe file read.
    pub probe_file: Option<String>,
    /// Background load threads of the main run.
    pub load_threads: Option<usize>,
}

/// Top paths by net variation against another ranking (seed 004 Fig. 11).
#[derive(Debug, Clone, Serialize)]
pub struct VppRanking {
    /// The other ranking.
    pub ranking: Ranking,
    /// Paths compared.
    pub k: usize,
    /// Of the top by net variation, how many are not in the other top.
    pub not_in_other: usize,
    /// Top by net variation.
    pub vpp: Vec<PathSignature>,
    /// Top by the other ranking.
    pub other: Vec<PathSignature>,
}

/// One run of a stability comparison.
#[derive(Debug, Clone, Serialize)]
pub struct VppRunSummary {
    /// The program's arguments.
    pub args: Vec<String>,
    /// Timed samples.
    pub samples: u64,
    /// Net variation share.
    pub net_variation_share: f64,
    /// Net variation share of the top paths.
    pub top_share: f64,
    /// The top paths.
    pub top: Vec<PathSignature>,
    /// How the run ended.
    pub outcome: Option<RunOutcome>,
    /// The program's time, when known.
    pub program_time: Option<u64>,
}

/// Two runs compared (seed 004 §5.3).
#[derive(Debug, Clone, Serialize)]
pub struct VppStability {
    /// `load` or `input`.
    pub kind: String,
    /// Run a (light load / training input).
    pub a: VppRunSummary,
    /// Run b (heavy load / the main run).
    pub b: VppRunSummary,
    /// The comparison.
    pub comparison: StabilityComparison,
}

impl VppReport {
    /// The JSON document (keys in field order), pretty-printed, without a final newline.
    pub fn to_json(&self) -> Result<String, serde_json::Error> {
        serde_json::to_string_pretty(self)
    }

    /// The text report: the summary, the path table, the rankings and the stability
    /// comparisons. Warnings are not included.
    pub fn render_text(&self) -> String {
        let mut w = String::new();
        let unit = &self.unit;
        let k = self.config.top;
        _ = writeln!(
            w,
            "variational paths of {} (source {}, seed {}): {} timed samples of {} paths, {} with >= {} samples",
            crate::quote_name(self.program.first().map_or("?", |s| s.as_str())),
            self.config.source,
            self.seed,
            self.samples,
            self.distinct_paths,
            self.analysed_paths,
            self.min_samples_used
        );
        if self.excluded_samples > 0 {
            _ = writeln!(
                w,
                "{} samples longer than --max-time {} left out",
                self.excluded_samples,
                self.config.max_time.unwrap_or(0)
            );
        }
        if let Some(b) = &self.bias {
            _ = writeln!(
                w,
                "instrumentation bias: {} {unit} = mean of the {:.0}% of {} empty paths within ±{} of their median {} (p10 {}, p90 {}; {}){}",
                b.subtracted,
                b.within * 100.0,
                b.samples,
                b.tolerance,
                b.median,
                b.p10,
                b.p90,
                if b.consistent { "consistent" } else { "NOT consistent" },
                if self.config.bias_subtracted > 0 { ", subtracted" } else { ", not subtracted" }
            );
        }
        if let Some(q) = self.timer_resolution {
            let unresolved = self
                .paths
                .iter()
                .filter(|p| p.resolved == Some(false))
                .count();
            let bias = self.config.bias_subtracted as f64;
            let dwarfed = self.paths.iter().filter(|p| p.mean_time < bias).count();
            _ = writeln!(
                w,
                "timer resolution: {q} {unit} (every time is a multiple of it); basetime = mean of a path's readings within 2 steps of its fastest, minus the bias; {unresolved} of {} listed paths below one step (*: the probes cannot resolve their basetime), {dwarfed} shorter on average than the bias",
                self.paths.len()
            );
        }
        _ = writeln!(
            w,
            "net variation: {:.2}% of the {} in all paths, {:.2}% in the top {k} (each sample ~{:.1} executions)",
            self.net_variation_share * 100.0,
            match self.time_base {
                TimeBase::Program => "run's time",
                TimeBase::TimedPaths => "timed paths' time",
            },
            self.top_share * 100.0,
            self.executions_per_sample
        );
        if let (Some(c), Some(rt)) = (self.timed_coverage, self.run_time) {
            _ = writeln!(
                w,
                "timed paths, extrapolated to every execution: {:.1}% of the run's {rt} {unit}{}",
                c * 100.0,
                match self.timing_inflation {
                    Some(f) => format!(
                        " (timing slows the timed paths: serialised TSC reads expose their memory latency; shares of the run are of the extrapolated time, every timed time deflated {f:.2}x)"
                    ),
                    None => String::new(),
                }
            );
        }
        _ = writeln!(w, "\n{}", self.path_table().render(false));
        for r in &self.rankings {
            _ = writeln!(
                w,
                "{} of the top {} by net variation are not in the top {} by {} (paper 004 Fig. 11)",
                r.not_in_other,
                r.vpp.len(),
                r.k,
                match r.ranking {
                    Ranking::Frequency => "frequency",
                    _ => "total time",
                }
            );
        }
        for s in &self.stability {
            let c = &s.comparison;
            _ = match s.kind.as_str() {
                "load" => writeln!(
                    w,
                    "\nsystem load (Fig. 4): light top-{k} {:.2}%, light NV of heavy's top-{k} {:.2}%, heavy top-{k} {:.2}%, heavy NV of light's top-{k} {:.2}%; {} of {} top paths shared",
                    c.a_top_in_a * 100.0,
                    c.b_top_in_a * 100.0,
                    c.b_top_in_b * 100.0,
                    c.a_top_in_b * 100.0,
                    c.overlap,
                    c.possible_overlap
                ),
                _ => writeln!(
                    w,
                    "\ninputs (Fig. 5): all paths {:.2}%, self-trained top-{k} {:.2}%, cross-trained (train args: {}) top-{k} {:.2}%; {} of {} top paths shared",
                    c.all_in_b * 100.0,
                    c.b_top_in_b * 100.0,
                    crate::quote_name(&s.a.args.join(" ")),
                    c.a_top_in_b * 100.0,
                    c.overlap,
                    c.possible_overlap
                ),
            };
        }
        w
    }

    fn path_table(&self) -> Table {
        let probes = self.timer_resolution.is_some();
        let mut head = vec![
            "rank",
            "signature",
            "where",
            "count",
            "basetime",
            "mean",
            "total",
            "net var",
            "share",
        ];
        if probes {
            head.push("of timed");
        }
        let mut t = Table::new(head).left_align(&[1, 2]);
        for r in &self.paths {
            let place = if r.function.is_empty() {
                r.source.clone()
            } else {
                format!("{} {}", r.function, r.source)
            };
            let mut row = vec![
                r.rank.to_string(),
                r.signature.to_string(),
                place,
                r.count.to_string(),
                format!(
                    "{}{}",
                    r.basetime,
                    if r.resolved == Some(false) { "*" } else { "" }
                ),
                format!("{:.1}", r.mean_time),
                r.total_time.to_string(),
                r.net_variation.to_string(),
                format!("{:.2}%", r.share_of_time * 100.0),
            ];
            if probes {
                row.push(format!("{:.2}%", r.share_of_timed.unwrap_or(0.0) * 100.0));
            }
            t.row(row, false);
        }
        t
    }
}
