//! The reports of `fleet report` and `fleet diff` (fleet-scale statistics over many hosts'
//! profiles, docs/fleet.md): their data, which *is* the `--json` schema, and (to come in the
//! same module) the text tables in the audit's style and a self-contained HTML page.
//!
//! The numbers are computed by `proftrust-metrics`' `fleet` module from per-cluster totals
//! that the query engine aggregates (`proftrust-fleet`); this module only holds and renders
//! them.

use serde::{Deserialize, Serialize};

/// Version of the fleet report JSON schema (bumped on any incompatible change).
pub const FLEET_REPORT_VERSION: u32 = 1;

/// What `fleet report DIR` prints: fleet shares with intervals, per-host deviations, and the
/// samples or hosts needed for a target precision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FleetReport {
    /// [`FLEET_REPORT_VERSION`].
    pub version: u32,
    /// The store that was read (the `DIR` argument).
    pub store: String,
    /// `embedded` or `ballista://HOST:PORT`.
    pub engine: String,
    /// Rows are aggregated at this level: `function`, `inline` or `line`.
    pub level: String,
    /// Events included (as the files name them); the shares are of one event's weight.
    pub event: String,
    /// Number of distinct hosts.
    pub hosts: u64,
    /// Number of recordings (a host may contribute several).
    pub recordings: u64,
    /// Total samples (sum of the rows' counts) of the event.
    pub samples: u64,
    /// Confidence level of every interval (0.95).
    pub confidence: f64,
    /// How the intervals are computed, named and cited (shown under the table).
    pub method: String,
    /// Seed of any resampling, when the method draws random numbers (`None` otherwise).
    pub seed: Option<u64>,
    /// One row per function (or inline function, or line), hottest first.
    pub functions: Vec<FleetFunction>,
    /// One row per host: its samples and labels.
    pub host_table: Vec<FleetHost>,
    /// Hosts whose share of a function lies outside what sampling explains, most extreme
    /// first (after false-discovery-rate control over all host × function tests).
    pub host_deviations: Vec<HostDeviation>,
    /// Samples and hosts needed for a target precision of the top rows.
    pub precision: Vec<PrecisionRow>,
    /// Target relative half-width the `precision` rows are computed for (e.g. 0.1).
    pub precision_target: f64,
    /// Plain-language warnings (few clusters, tiny functions, mixed events...).
    pub warnings: Vec<String>,
}

/// One function's fleet share.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FleetFunction {
    /// Function name (demangled), `file:line`, or `module+0xADDR` when unresolved.
    pub name: String,
    /// Module (file name of the binary or library).
    pub module: String,
    /// Samples attributed to it over the fleet.
    pub samples: u64,
    /// Ratio estimate of its fleet share: sum over clusters of its samples / all samples.
    pub share: f64,
    /// Lower bound of the interval (clamped to [0, 1]).
    pub ci_low: f64,
    /// Upper bound of the interval (clamped to [0, 1]).
    pub ci_high: f64,
    /// Standard error of `share` (cluster-robust).
    pub se: f64,
    /// Cluster-robust variance over the binomial variance of the same share and samples
    /// (1: samples behave as independent draws; > 1: hosts/recordings differ).
    pub design_effect: f64,
    /// Hosts with at least one sample in it.
    pub hosts: u64,
}

/// One host.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FleetHost {
    /// Host name as ingested.
    pub host: String,
    /// Its recordings.
    pub recordings: u64,
    /// Its samples (of the event).
    pub samples: u64,
    /// Labels, `k=v`, sorted (the union over its recordings).
    pub labels: Vec<String>,
}

/// A host whose share of a function deviates beyond sampling noise.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostDeviation {
    /// Host.
    pub host: String,
    /// Function (as in [`FleetFunction::name`]).
    pub function: String,
    /// Its samples in the function.
    pub samples: u64,
    /// Its share of its own samples.
    pub host_share: f64,
    /// The fleet's share of the function (leave-one-host-out or overall; see `method`).
    pub fleet_share: f64,
    /// Standardised deviation.
    pub z: f64,
    /// Two-sided p-value.
    pub p: f64,
    /// Benjamini-Hochberg adjusted p-value (q-value) over all host × function tests.
    pub q: f64,
}

/// Samples or hosts needed for a row's interval half-width to fall to the target.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PrecisionRow {
    /// Function.
    pub function: String,
    /// Its current share.
    pub share: f64,
    /// Current relative half-width (half-width / share).
    pub relative_half_width: f64,
    /// Samples needed if samples were independent (seed 002's binomial analysis).
    pub samples_needed_binomial: u64,
    /// Samples needed given the fleet's design effect (same samples per host as now).
    pub samples_needed: u64,
    /// Hosts needed at today's samples per host.
    pub hosts_needed: u64,
}

/// What `fleet diff DIR --a k=v --b k=v` prints: per function, side A against side B.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FleetDiffReport {
    /// [`FLEET_REPORT_VERSION`].
    pub version: u32,
    /// The store.
    pub store: String,
    /// `embedded` or `ballista://HOST:PORT`.
    pub engine: String,
    /// Aggregation level (as in [`FleetReport::level`]).
    pub level: String,
    /// Event compared.
    pub event: String,
    /// Side A: its selector, hosts, recordings and samples.
    pub a: DiffSide,
    /// Side B.
    pub b: DiffSide,
    /// Confidence level of the intervals of the difference.
    pub confidence: f64,
    /// False-discovery rate targeted over all functions (Benjamini-Hochberg), e.g. 0.05.
    pub fdr: f64,
    /// How the test is computed, named and cited.
    pub method: String,
    /// Seed of any resampling (`None` when nothing random is drawn).
    pub seed: Option<u64>,
    /// Every function seen on either side, significant ones first, by |delta|.
    pub functions: Vec<DiffRow>,
    /// Plain-language warnings.
    pub warnings: Vec<String>,
}

/// One side of a diff.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DiffSide {
    /// The selector as given (`build=A`).
    pub selector: String,
    /// Hosts matched.
    pub hosts: u64,
    /// Recordings matched.
    pub recordings: u64,
    /// Samples matched.
    pub samples: u64,
}

/// One function in a diff.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DiffRow {
    /// Function.
    pub name: String,
    /// Module.
    pub module: String,
    /// Share on side A.
    pub share_a: f64,
    /// Share on side B.
    pub share_b: f64,
    /// `share_b - share_a`.
    pub delta: f64,
    /// Interval of the difference.
    pub ci_low: f64,
    /// Interval of the difference.
    pub ci_high: f64,
    /// Test statistic.
    pub z: f64,
    /// Two-sided p-value.
    pub p: f64,
    /// Benjamini-Hochberg q-value over all functions.
    pub q: f64,
    /// `q <= fdr`.
    pub significant: bool,
}
