//! The reports of `fleet report` and `fleet diff` (fleet-scale statistics over many hosts'
//! profiles, docs/fleet.md, docs/fleet-statistics.md): their data, which *is* the `--json`
//! schema, the text tables in the audit's style (`render_text`) and a self-contained HTML page
//! with inline SVG plots (`render_html`): shares with their intervals, the per-host spread,
//! and for a diff each function's change with its interval.
//!
//! The numbers are computed by `proftrust-metrics`' `fleet` module from per-cluster totals
//! that the query engine aggregates (`proftrust-fleet`); this module only holds and renders
//! them.

use crate::html::escape_html;
use crate::svg::{nice_step, shorten};

/// A string of the report (names, events, the store's path) as text output shows it.
fn q(s: &str) -> std::borrow::Cow<'_, str> {
    crate::quote_name(s)
}
use crate::text::Table;
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;

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
    /// Total weight of the event: its samples' periods summed, in [`FleetReport::unit`]
    /// (a sample without a period weighs 1). The shares are of weight, so hosts recorded at
    /// different rates count by what they measured.
    #[serde(default)]
    pub weight: u64,
    /// The unit of the weight: `ns` (cpu-clock, task-clock), `cycles`, `instructions`, or
    /// `events` (any other event: its count).
    #[serde(default)]
    pub unit: String,
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
    pub warnings: Vec<crate::Warning>,
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
    /// Its weight over the fleet (in the report's `unit`).
    #[serde(default)]
    pub weight: u64,
    /// Ratio estimate of its fleet share: sum over clusters of its weight / all weight.
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
    /// Its weight (of the event, in the report's `unit`).
    #[serde(default)]
    pub weight: u64,
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
    /// The function's module (as in [`FleetFunction::module`]).
    #[serde(default)]
    pub module: String,
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
    /// Rows tested (share at least `min_share` on a side); the q-values are over these.
    #[serde(default)]
    pub tested: u64,
    /// The share below which a row is not tested (on both sides).
    #[serde(default)]
    pub min_share: f64,
    /// What the design can find: the |t| a row needs to be called a change when it is the
    /// strongest of the tested rows (Benjamini-Hochberg's first step, `p <= fdr/tested`),
    /// on the most degrees of freedom this design gives (each side's effective hosts − 1,
    /// summed: Welch-Satterthwaite's upper bound). Infinite (JSON `null`) when no row is
    /// tested.
    #[serde(default)]
    pub critical_t: Option<f64>,
    /// Plain-language warnings.
    pub warnings: Vec<crate::Warning>,
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
    /// Weight matched (periods summed, in the event's unit).
    #[serde(default)]
    pub weight: u64,
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
    /// Whether the row was tested: rows whose share is below the report's `min_share` on
    /// both sides are shown but spend none of the false-discovery budget (`q` 1).
    #[serde(default = "yes")]
    pub tested: bool,
}

fn yes() -> bool {
    true
}

/// One host's share of one function, for the per-host spread of [`FleetReport::render_html_with_hosts`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostShare {
    /// Host.
    pub host: String,
    /// Function (as in [`FleetFunction::name`]).
    pub function: String,
    /// The host's samples in the function over the host's samples.
    pub share: f64,
}

fn pct(x: f64) -> String {
    format!("{:.2}%", 100.0 * x)
}

fn signed_pct(x: f64) -> String {
    format!("{:+.2}%", 100.0 * x)
}

/// A count that may be "unreachable" (`u64::MAX`, from `precision_needed`).
fn count(n: u64) -> String {
    if n == u64::MAX {
        "unreachable".into()
    } else {
        n.to_string()
    }
}

/// A p- or q-value: fixed digits down to 0.0001, scientific below.
fn pval(p: f64) -> String {
    if p.is_nan() {
        "-".into()
    } else if p >= 1e-4 || p == 0.0 {
        format!("{p:.4}")
    } else {
        format!("{p:.1e}")
    }
}

/// A critical |t|: two decimals, or a whole number when large.
fn tcrit(t: f64) -> String {
    if t >= 100.0 {
        format!("{t:.0}")
    } else {
        format!("{t:.2}")
    }
}

/// What the weight of `event` measures, for the header: `cpu-clock time`, `cycles`.
fn unit_name(unit: &str, event: &str) -> String {
    match unit {
        "ns" => format!("{event} time"),
        "events" => format!("{event} events"),
        u => u.to_string(),
    }
}

/// A weight in its unit: `5.50 s` for nanoseconds, else the count.
fn amount(w: u64, unit: &str) -> String {
    match unit {
        "ns" => format!("{:.2} s", w as f64 / 1e9),
        u => format!("{w} {u}"),
    }
}

/// A z statistic (`±f64::MAX` from a zero standard error shows as `±inf`).
fn zval(z: f64) -> String {
    if z.abs() >= f64::MAX / 2.0 {
        if z > 0.0 { "+inf" } else { "-inf" }.into()
    } else {
        format!("{z:+.2}")
    }
}

/// A "nice" linear axis from `lo` to `hi` with about five 1-2-5 ticks covering both.
fn nice_axis(lo: f64, hi: f64) -> (f64, f64, Vec<f64>) {
    let span = (hi - lo).max(1e-9);
    let step = nice_step(span / 5.0);
    let a = (lo / step + 1e-9).floor() * step;
    let b = (hi / step - 1e-9).ceil() * step;
    let n = ((b - a) / step).round().max(1.0) as usize;
    (
        a,
        a + step * n as f64,
        (0..=n).map(|k| a + step * k as f64).collect(),
    )
}

/// A tick label of a share axis (`0%`, `2.5%`, `-1%`).
fn tick(x: f64) -> String {
    let p = 100.0 * x;
    let s = format!("{p:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.').to_string();
    let s = if s == "-0" { "0".to_string() } else { s };
    format!("{s}%")
}

/// The share axis under a plot (its line at `axis_y` and the tick labels, `x` mapping a share
/// to its abscissa) and the end of the SVG element.
fn close_axis(
    s: &mut String,
    label_w: f64,
    plot_w: f64,
    axis_y: f64,
    ticks: &[f64],
    x: impl Fn(f64) -> f64,
) {
    let _ = write!(
        s,
        r##"<line x1="{label_w}" x2="{}" y1="{axis_y}" y2="{axis_y}" stroke="#444"/>"##,
        label_w + plot_w
    );
    for &t in ticks {
        let _ = write!(
            s,
            r#"<text x="{:.2}" y="{}" font-size="11" text-anchor="middle">{}</text>"#,
            x(t),
            axis_y + 16.0,
            tick(t)
        );
    }
    s.push_str("</svg>");
}

const BLUE: &str = "#3b6fb6";
const RED: &str = "#b23a48";
const GREY: &str = "#888";

/// The page head shared by both fleet pages (no script, no network).
fn page_head(title: &str) -> String {
    let mut s = String::new();
    s.push_str("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n");
    s.push_str("<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\">\n");
    let _ = writeln!(s, "<title>{}</title>", escape_html(title));
    s.push_str("<style>body{font-family:sans-serif;margin:2em;max-width:80em}table{border-collapse:collapse;margin:1em 0}td,th{padding:2px 8px;text-align:right;border-bottom:1px solid #ddd}td:first-child,th:first-child,td.l{text-align:left}.mono{font-family:monospace}.sig{color:#b23a48;font-weight:bold}.method{color:#444;font-size:90%}svg.plot{display:block;margin:1em 0}</style>\n</head><body>\n");
    s
}

/// Horizontal share plot with interval whiskers: one row per `(name, share, low, high,
/// highlighted)`, on a linear axis from `lo` (0, or negative for differences) to the largest
/// bound. `id` names the SVG element; `signed` labels the values with their sign (changes).
fn interval_plot(
    id: &str,
    legend: &str,
    rows: &[(String, f64, f64, f64, bool)],
    signed: bool,
) -> String {
    let label = |v: f64| if signed { signed_pct(v) } else { pct(v) };
    let (label_w, plot_w, row_h, top, bottom) = (260.0, 520.0, 24.0, 30.0, 36.0);
    let width = label_w + plot_w + 80.0;
    let height = top + bottom + row_h * rows.len().max(1) as f64;
    let lo = rows.iter().map(|r| r.2).fold(0.0f64, f64::min);
    let hi = rows.iter().map(|r| r.3).fold(0.0f64, f64::max);
    let (a, b, ticks) = nice_axis(lo, hi.max(lo + 1e-6));
    let x = |v: f64| label_w + plot_w * ((v - a) / (b - a)).clamp(0.0, 1.0);
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg class="plot" id="{id}" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" aria-label="{}">"#,
        escape_html(legend)
    );
    let _ = write!(
        s,
        r#"<text x="{label_w}" y="16" font-size="12" fill="{BLUE}">{}</text>"#,
        escape_html(legend)
    );
    let axis_y = top + row_h * rows.len().max(1) as f64 + 4.0;
    for &t in &ticks {
        let _ = write!(
            s,
            r##"<line x1="{0:.2}" x2="{0:.2}" y1="{top}" y2="{axis_y}" stroke="{1}"/>"##,
            x(t),
            if t.abs() < 1e-12 { "#444" } else { "#ddd" }
        );
    }
    for (i, (name, v, l, h, hl)) in rows.iter().enumerate() {
        let y = top + row_h * i as f64;
        let cy = y + row_h / 2.0;
        let colour = if *hl { RED } else { BLUE };
        let _ = write!(
            s,
            r#"<g><title>{}: {} [{}, {}]</title><text x="{}" y="{}" font-size="12" text-anchor="end" font-family="monospace">{}</text>"#,
            escape_html(name),
            label(*v),
            label(*l),
            label(*h),
            label_w - 8.0,
            cy + 4.0,
            escape_html(&shorten(name, 38))
        );
        let (x0, xv) = (x(0.0), x(*v));
        let _ = write!(
            s,
            r#"<rect x="{:.2}" y="{}" width="{:.2}" height="{}" fill="{colour}" fill-opacity="0.45"/>"#,
            x0.min(xv),
            y + 5.0,
            (xv - x0).abs(),
            row_h - 10.0
        );
        let (xl, xh) = (x(*l), x(*h));
        let _ = write!(
            s,
            r#"<line x1="{xl:.2}" x2="{xh:.2}" y1="{cy}" y2="{cy}" stroke="{colour}" stroke-width="2"/><line x1="{xl:.2}" x2="{xl:.2}" y1="{}" y2="{}" stroke="{colour}" stroke-width="2"/><line x1="{xh:.2}" x2="{xh:.2}" y1="{}" y2="{}" stroke="{colour}" stroke-width="2"/>"#,
            cy - 5.0,
            cy + 5.0,
            cy - 5.0,
            cy + 5.0
        );
        let _ = write!(
            s,
            r#"<text x="{:.2}" y="{}" font-size="11">{}</text></g>"#,
            xh.max(xv) + 4.0,
            cy + 4.0,
            label(*v)
        );
    }
    close_axis(&mut s, label_w, plot_w, axis_y, &ticks, x);
    s
}

impl FleetReport {
    /// Pretty-printed JSON (fields in the order of the struct, rows in the report's order;
    /// with a final newline).
    pub fn to_json(&self) -> Result<String, serde_json::Error> {
        serde_json::to_string_pretty(self).map(|s| s + "\n")
    }

    /// The text report in the audit's style: a header, warnings, the function table (`top`
    /// rows), the host deviations and the precision rows (`top` each), and the method.
    pub fn render_text(&self, top: usize, color: bool) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "store:        {} ({})", q(&self.store), q(&self.engine));
        let _ = writeln!(
            s,
            "fleet:        {} hosts, {} recordings, {} samples of {} (rows per {})",
            self.hosts,
            self.recordings,
            self.samples,
            q(&self.event),
            q(&self.level)
        );
        if !self.unit.is_empty() {
            let _ = writeln!(
                s,
                "weights:      shares of {} ({} in all): each sample weighs its period",
                q(&unit_name(&self.unit, &self.event)),
                q(&amount(self.weight, &self.unit))
            );
        }
        let _ = writeln!(
            s,
            "intervals:    {:.0}%, hosts as clusters{}",
            self.confidence * 100.0,
            self.seed.map_or(String::new(), |x| format!("; seed {x}"))
        );
        for w in &self.warnings {
            let _ = writeln!(s, "warning:      {}", q(&w.message));
        }
        s.push('\n');
        let ci = format!("{:.0}% CI", self.confidence * 100.0);
        let mut t = Table::new([
            self.level.as_str(),
            "module",
            "samples",
            "share",
            ci.as_str(),
            "design effect",
            "hosts",
        ])
        .left_align(&[1]);
        for f in self.functions.iter().take(top) {
            t.row(
                [
                    f.name.clone(),
                    f.module.clone(),
                    f.samples.to_string(),
                    pct(f.share),
                    format!("{}..{}", pct(f.ci_low), pct(f.ci_high)),
                    format!("{:.1}", f.design_effect),
                    f.hosts.to_string(),
                ],
                false,
            );
        }
        s.push_str(&t.render(color));
        if self.functions.len() > top {
            let _ = writeln!(s, "({} more in --json)", self.functions.len() - top);
        }
        s.push('\n');
        if self.host_deviations.is_empty() {
            s.push_str("host deviations: none beyond sampling noise\n");
        } else {
            let mut t = Table::new([
                "host",
                "function",
                "module",
                "samples",
                "host share",
                "fleet share",
                "z",
                "q",
            ])
            .left_align(&[1, 2]);
            for d in self.host_deviations.iter().take(top) {
                t.row(
                    [
                        d.host.clone(),
                        d.function.clone(),
                        d.module.clone(),
                        d.samples.to_string(),
                        pct(d.host_share),
                        pct(d.fleet_share),
                        zval(d.z),
                        pval(d.q),
                    ],
                    true,
                );
            }
            s.push_str("host deviations (q: Benjamini-Hochberg over all host x function tests)\n");
            s.push_str(&t.render(color));
            if self.host_deviations.len() > top {
                let _ = writeln!(s, "({} more in --json)", self.host_deviations.len() - top);
            }
        }
        if !self.precision.is_empty() {
            s.push('\n');
            let _ = writeln!(
                s,
                "precision: for ±{:.0}% of each share (relative half-width)",
                self.precision_target * 100.0
            );
            let mut t = Table::new([
                "function",
                "share",
                "± now",
                "samples (binomial)",
                "samples (design)",
                "hosts",
            ]);
            for r in self.precision.iter().take(top) {
                t.row(
                    [
                        r.function.clone(),
                        pct(r.share),
                        format!("{:.1}%", 100.0 * r.relative_half_width),
                        count(r.samples_needed_binomial),
                        count(r.samples_needed),
                        count(r.hosts_needed),
                    ],
                    false,
                );
            }
            s.push_str(&t.render(color));
        }
        let _ = writeln!(s, "\nmethod: {}", q(&self.method));
        s
    }

    /// A self-contained HTML page (no script, no network): the summary, warnings, the
    /// function shares with their intervals as an SVG plot (`plot-shares`) and a table, the
    /// per-host spread (`plot-hosts`: the hosts that deviate, as dots beside each function's
    /// fleet interval), host deviations, precision rows and the method. Every name escaped.
    pub fn render_html(&self, top: usize) -> String {
        self.render_html_with_hosts(top, &[])
    }

    /// [`FleetReport::render_html`] with every host's share of the top functions
    /// (`host_shares`, any order) drawn as dots in the per-host spread; hosts listed in
    /// `host_deviations` are drawn (red) whether or not they are in `host_shares`.
    pub fn render_html_with_hosts(&self, top: usize, host_shares: &[HostShare]) -> String {
        let mut s = page_head(&format!("proftrust fleet report: {}", self.store));
        let _ = writeln!(
            s,
            "<h1>proftrust fleet report</h1>\n<table><tr><th>store</th><td class=\"l mono\">{}</td></tr><tr><th>engine</th><td class=\"l\">{}</td></tr><tr><th>fleet</th><td class=\"l\">{} hosts, {} recordings, {} samples of {} (rows per {})</td></tr><tr><th>intervals</th><td class=\"l\">{:.0}%{}</td></tr></table>",
            escape_html(&self.store),
            escape_html(&self.engine),
            self.hosts,
            self.recordings,
            self.samples,
            escape_html(&self.event),
            escape_html(&self.level),
            self.confidence * 100.0,
            self.seed.map_or(String::new(), |x| format!("; seed {x}"))
        );
        if !self.warnings.is_empty() {
            s.push_str("<h2>Warnings</h2>\n<ul>\n");
            for w in &self.warnings {
                let _ = writeln!(s, "<li>{}</li>", escape_html(&w.message));
            }
            s.push_str("</ul>\n");
        }
        let rows: Vec<&FleetFunction> = self.functions.iter().take(top).collect();
        s.push_str("<h2>Fleet shares</h2>\n");
        let plot_rows: Vec<(String, f64, f64, f64, bool)> = rows
            .iter()
            .map(|f| (f.name.clone(), f.share, f.ci_low, f.ci_high, false))
            .collect();
        s.push_str(&interval_plot(
            "plot-shares",
            &format!(
                "fleet share ± {:.0}% interval (hosts as clusters)",
                self.confidence * 100.0
            ),
            &plot_rows,
            false,
        ));
        s.push('\n');
        s.push_str("<h2>Per-host spread</h2>\n");
        s.push_str(&self.spread_plot(&rows, host_shares));
        s.push('\n');
        let _ = writeln!(s, "<table><tr><th>{}</th><th>module</th><th>samples</th><th>share</th><th>{:.0}% interval</th><th>design effect</th><th>hosts</th></tr>", escape_html(&self.level), self.confidence * 100.0);
        for f in &rows {
            let _ = writeln!(
                s,
                "<tr><td class=\"mono\">{}</td><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}..{}</td><td>{:.1}</td><td>{}</td></tr>",
                escape_html(&f.name),
                escape_html(&f.module),
                f.samples,
                pct(f.share),
                pct(f.ci_low),
                pct(f.ci_high),
                f.design_effect,
                f.hosts
            );
        }
        s.push_str("</table>\n");
        if self.functions.len() > top {
            let _ = writeln!(
                s,
                "<p>{} more rows in the JSON report.</p>",
                self.functions.len() - top
            );
        }
        s.push_str("<h2>Host deviations</h2>\n");
        if self.host_deviations.is_empty() {
            s.push_str("<p>None beyond sampling noise.</p>\n");
        } else {
            s.push_str("<table><tr><th>host</th><th>function</th><th>module</th><th>samples</th><th>host share</th><th>fleet share</th><th>z</th><th>p</th><th>q</th></tr>\n");
            for d in self.host_deviations.iter().take(top) {
                let _ = writeln!(
                    s,
                    "<tr><td class=\"mono\">{}</td><td class=\"l mono\">{}</td><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                    escape_html(&d.host),
                    escape_html(&d.function),
                    escape_html(&d.module),
                    d.samples,
                    pct(d.host_share),
                    pct(d.fleet_share),
                    zval(d.z),
                    pval(d.p),
                    pval(d.q)
                );
            }
            s.push_str("</table>\n");
        }
        if !self.precision.is_empty() {
            let _ = writeln!(
                s,
                "<h2>Precision</h2>\n<p>Samples and hosts needed for ±{:.0}% of each share (relative half-width).</p>\n<table><tr><th>function</th><th>share</th><th>± now</th><th>samples (binomial)</th><th>samples (design)</th><th>hosts</th></tr>",
                self.precision_target * 100.0
            );
            for r in self.precision.iter().take(top) {
                let _ = writeln!(
                    s,
                    "<tr><td class=\"mono\">{}</td><td>{}</td><td>{:.1}%</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                    escape_html(&r.function),
                    pct(r.share),
                    100.0 * r.relative_half_width,
                    count(r.samples_needed_binomial),
                    count(r.samples_needed),
                    count(r.hosts_needed)
                );
            }
            s.push_str("</table>\n");
        }
        let _ = writeln!(
            s,
            "<p class=\"method\">Method: {}</p>",
            escape_html(&self.method)
        );
        s.push_str("</body></html>\n");
        s
    }

    /// The per-host spread: per function a band for the fleet interval, a tick at the fleet
    /// share, and a dot per host share (grey; red for the deviating hosts).
    fn spread_plot(&self, rows: &[&FleetFunction], host_shares: &[HostShare]) -> String {
        let (label_w, plot_w, row_h, top, bottom) = (260.0, 520.0, 26.0, 30.0, 36.0);
        let width = label_w + plot_w + 40.0;
        let height = top + bottom + row_h * rows.len().max(1) as f64;
        // Dots of a function: (host, share, deviating).
        let dots = |name: &str| -> Vec<(String, f64, bool)> {
            let mut v: Vec<(String, f64, bool)> = host_shares
                .iter()
                .filter(|h| h.function == name)
                .map(|h| {
                    let dev = self
                        .host_deviations
                        .iter()
                        .any(|d| d.function == name && d.host == h.host);
                    (h.host.clone(), h.share, dev)
                })
                .collect();
            for d in self.host_deviations.iter().filter(|d| d.function == name) {
                if !v.iter().any(|x| x.0 == d.host) {
                    v.push((d.host.clone(), d.host_share, true));
                }
            }
            v
        };
        let hi = rows
            .iter()
            .flat_map(|f| {
                dots(&f.name)
                    .into_iter()
                    .map(|d| d.1)
                    .chain([f.ci_high])
                    .collect::<Vec<_>>()
            })
            .fold(0.0f64, f64::max);
        let (a, b, ticks) = nice_axis(0.0, hi.max(1e-6));
        let x = |v: f64| label_w + plot_w * ((v - a) / (b - a)).clamp(0.0, 1.0);
        let mut s = String::new();
        let _ = write!(
            s,
            r#"<svg class="plot" id="plot-hosts" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" aria-label="per-host share of each function beside the fleet interval">"#
        );
        let _ = write!(
            s,
            r#"<text x="{label_w}" y="16" font-size="12"><tspan fill="{BLUE}">▮ fleet interval, | fleet share</tspan>  <tspan fill="{GREY}">● host share</tspan>  <tspan fill="{RED}">● deviating host</tspan></text>"#
        );
        let axis_y = top + row_h * rows.len().max(1) as f64 + 4.0;
        for &t in &ticks {
            let _ = write!(
                s,
                r##"<line x1="{0:.2}" x2="{0:.2}" y1="{top}" y2="{axis_y}" stroke="#ddd"/>"##,
                x(t)
            );
        }
        for (i, f) in rows.iter().enumerate() {
            let y = top + row_h * i as f64;
            let cy = y + row_h / 2.0;
            let _ = write!(
                s,
                r#"<g><title>{}: fleet {} [{}, {}]</title><text x="{}" y="{}" font-size="12" text-anchor="end" font-family="monospace">{}</text>"#,
                escape_html(&f.name),
                pct(f.share),
                pct(f.ci_low),
                pct(f.ci_high),
                label_w - 8.0,
                cy + 4.0,
                escape_html(&shorten(&f.name, 38))
            );
            let (xl, xh, xs) = (x(f.ci_low), x(f.ci_high), x(f.share));
            let _ = write!(
                s,
                r#"<rect x="{xl:.2}" y="{}" width="{:.2}" height="{}" fill="{BLUE}" fill-opacity="0.25"/><line x1="{xs:.2}" x2="{xs:.2}" y1="{}" y2="{}" stroke="{BLUE}" stroke-width="2"/>"#,
                y + 4.0,
                (xh - xl).max(1.0),
                row_h - 8.0,
                y + 2.0,
                y + row_h - 2.0,
            );
            for (host, v, dev) in dots(&f.name) {
                let _ = write!(
                    s,
                    r#"<circle cx="{:.2}" cy="{cy}" r="3.5" fill="{}" fill-opacity="0.7"><title>{}: {}</title></circle>"#,
                    x(v),
                    if dev { RED } else { GREY },
                    escape_html(&host),
                    pct(v)
                );
            }
            s.push_str("</g>");
        }
        close_axis(&mut s, label_w, plot_w, axis_y, &ticks, x);
        s
    }
}

impl FleetDiffReport {
    /// Pretty-printed JSON (fields in the order of the struct, rows in the report's order:
    /// significant first; with a final newline).
    pub fn to_json(&self) -> Result<String, serde_json::Error> {
        serde_json::to_string_pretty(self).map(|s| s + "\n")
    }

    /// The text report: the two sides, warnings, the functions (`top` rows, in the report's
    /// order: significant first, by |delta|; significant rows highlighted, in red on a
    /// terminal), and the method.
    pub fn render_text(&self, top: usize, color: bool) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "store:        {} ({})", q(&self.store), q(&self.engine));
        for (tag, side) in [("A", &self.a), ("B", &self.b)] {
            let _ = writeln!(
                s,
                "side {tag}:       {}: {} hosts, {} recordings, {} samples of {}",
                q(&side.selector),
                side.hosts,
                side.recordings,
                side.samples,
                q(&self.event)
            );
        }
        let significant = self.functions.iter().filter(|r| r.significant).count();
        let _ = writeln!(
            s,
            "changes:      {} of {} {}s tested beyond noise (false-discovery rate {:.0}%, {:.0}% intervals of B − A){}",
            significant,
            self.tested,
            q(&self.level),
            self.fdr * 100.0,
            self.confidence * 100.0,
            self.seed.map_or(String::new(), |x| format!("; seed {x}"))
        );
        let _ = writeln!(
            s,
            "tested:       the {} of {} rows with a share of at least {} on a side{}",
            self.tested,
            self.functions.len(),
            pct(self.min_share),
            match self.critical_t {
                Some(t) => format!(
                    "; the strongest needs |t| >= {} to be called a change",
                    tcrit(t)
                ),
                None => String::new(),
            }
        );
        for w in &self.warnings {
            let _ = writeln!(s, "warning:      {}", q(&w.message));
        }
        s.push('\n');
        let ci = format!("{:.0}% CI", self.confidence * 100.0);
        let mut t = Table::new([
            self.level.as_str(),
            "module",
            "share A",
            "share B",
            "delta",
            ci.as_str(),
            "z",
            "q",
            "significant",
        ])
        .left_align(&[1]);
        for r in self.functions.iter().take(top) {
            t.row(
                [
                    r.name.clone(),
                    r.module.clone(),
                    pct(r.share_a),
                    pct(r.share_b),
                    signed_pct(r.delta),
                    format!("{}..{}", signed_pct(r.ci_low), signed_pct(r.ci_high)),
                    zval(r.z),
                    pval(r.q),
                    if r.significant { "yes" } else { "no" }.to_string(),
                ],
                r.significant,
            );
        }
        s.push_str(&t.render(color));
        if self.functions.len() > top {
            let _ = writeln!(s, "({} more in --json)", self.functions.len() - top);
        }
        let _ = writeln!(
            s,
            "(significant: q <= {}, Benjamini-Hochberg over the {} tested rows; untested rows show q 1)\n\nmethod: {}",
            self.fdr,
            self.tested,
            q(&self.method)
        );
        s
    }

    /// A self-contained HTML page (no script, no network): the sides, warnings, each
    /// function's change `B − A` with its interval as an SVG plot (`plot-diff`; significant
    /// rows red) and the table with q-values. Every name escaped.
    pub fn render_html(&self, top: usize) -> String {
        let mut s = page_head(&format!("proftrust fleet diff: {}", self.store));
        let _ = writeln!(
            s,
            "<h1>proftrust fleet diff</h1>\n<table><tr><th>store</th><td class=\"l mono\">{}</td></tr><tr><th>engine</th><td class=\"l\">{}</td></tr>",
            escape_html(&self.store),
            escape_html(&self.engine)
        );
        for (tag, side) in [("A", &self.a), ("B", &self.b)] {
            let _ = writeln!(
                s,
                "<tr><th>side {tag}</th><td class=\"l\"><span class=\"mono\">{}</span>: {} hosts, {} recordings, {} samples of {}</td></tr>",
                escape_html(&side.selector),
                side.hosts,
                side.recordings,
                side.samples,
                escape_html(&self.event)
            );
        }
        let significant = self.functions.iter().filter(|r| r.significant).count();
        let _ = writeln!(
            s,
            "<tr><th>changes</th><td class=\"l\">{} of {} beyond noise (false-discovery rate {:.0}%)</td></tr></table>",
            significant,
            self.functions.len(),
            self.fdr * 100.0
        );
        if !self.warnings.is_empty() {
            s.push_str("<h2>Warnings</h2>\n<ul>\n");
            for w in &self.warnings {
                let _ = writeln!(s, "<li>{}</li>", escape_html(&w.message));
            }
            s.push_str("</ul>\n");
        }
        let rows: Vec<&DiffRow> = self.functions.iter().take(top).collect();
        s.push_str("<h2>Change B − A</h2>\n");
        let plot_rows: Vec<(String, f64, f64, f64, bool)> = rows
            .iter()
            .map(|r| (r.name.clone(), r.delta, r.ci_low, r.ci_high, r.significant))
            .collect();
        s.push_str(&interval_plot(
            "plot-diff",
            &format!(
                "share B − share A ± {:.0}% interval (red: q <= {})",
                self.confidence * 100.0,
                self.fdr
            ),
            &plot_rows,
            true,
        ));
        s.push('\n');
        let _ = writeln!(s, "<table><tr><th>{}</th><th>module</th><th>share A</th><th>share B</th><th>delta</th><th>{:.0}% interval</th><th>z</th><th>p</th><th>q</th></tr>", escape_html(&self.level), self.confidence * 100.0);
        for r in &rows {
            let _ = writeln!(
                s,
                "<tr{}><td class=\"mono\">{}</td><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}..{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                if r.significant { " class=\"sig\"" } else { "" },
                escape_html(&r.name),
                escape_html(&r.module),
                pct(r.share_a),
                pct(r.share_b),
                signed_pct(r.delta),
                signed_pct(r.ci_low),
                signed_pct(r.ci_high),
                zval(r.z),
                pval(r.p),
                pval(r.q)
            );
        }
        s.push_str("</table>\n");
        if self.functions.len() > top {
            let _ = writeln!(
                s,
                "<p>{} more rows in the JSON report.</p>",
                self.functions.len() - top
            );
        }
        let _ = writeln!(
            s,
            "<p class=\"method\">Method: {}</p>",
            escape_html(&self.method)
        );
        s.push_str("</body></html>\n");
        s
    }
}

/// A small hand-built fleet report and diff for the unit tests here and the HTML check in
/// `tests/fleet_html.rs` (names with markup to prove the escaping).
#[doc(hidden)]
pub fn sample_reports() -> (FleetReport, FleetDiffReport) {
    let report = FleetReport {
        version: FLEET_REPORT_VERSION,
        store: "/data/fleet <store>".into(),
        engine: "embedded".into(),
        level: "function".into(),
        event: "cpu-clock".into(),
        hosts: 3,
        recordings: 4,
        samples: 1000,
        weight: 1_000_000_000,
        unit: "ns".into(),
        confidence: 0.95,
        method: "ratio estimator & cluster-robust variance".into(),
        seed: None,
        functions: vec![
            FleetFunction {
                name: "parse<script>alert(1)</script>".into(),
                module: "app".into(),
                samples: 600,
                weight: 600_000_000,
                share: 0.6,
                ci_low: 0.5,
                ci_high: 0.7,
                se: 0.05,
                design_effect: 10.4,
                hosts: 3,
            },
            FleetFunction {
                name: "std::vector<int>::push_back".into(),
                module: "libstdc++.so.6".into(),
                samples: 300,
                weight: 300_000_000,
                share: 0.3,
                ci_low: 0.25,
                ci_high: 0.35,
                se: 0.025,
                design_effect: 3.0,
                hosts: 2,
            },
            FleetFunction {
                name: "idle".into(),
                module: "[kernel]".into(),
                samples: 100,
                weight: 100_000_000,
                share: 0.1,
                ci_low: 0.08,
                ci_high: 0.12,
                se: 0.01,
                design_effect: 1.1,
                hosts: 3,
            },
        ],
        host_table: vec![FleetHost {
            host: "web-1".into(),
            recordings: 2,
            samples: 500,
            weight: 500_000_000,
            labels: vec!["build=A".into()],
        }],
        host_deviations: vec![HostDeviation {
            host: "web<2>".into(),
            function: "std::vector<int>::push_back".into(),
            module: "libstdc++.so.6".into(),
            samples: 150,
            host_share: 0.5,
            fleet_share: 0.3,
            z: 5.1,
            p: 3.4e-7,
            q: 1.0e-6,
        }],
        precision: vec![PrecisionRow {
            function: "idle".into(),
            share: 0.1,
            relative_half_width: 0.2,
            samples_needed_binomial: 3458,
            samples_needed: 3804,
            hosts_needed: u64::MAX,
        }],
        precision_target: 0.1,
        warnings: vec![crate::Warning::new(
            crate::WarningKind::FewSamples,
            "only 3 hosts: <few>",
        )],
    };
    let diff = FleetDiffReport {
        version: FLEET_REPORT_VERSION,
        store: "/data/fleet".into(),
        engine: "embedded".into(),
        level: "function".into(),
        event: "cpu-clock".into(),
        a: DiffSide {
            selector: "build=A".into(),
            hosts: 20,
            recordings: 20,
            samples: 100_000,
            weight: 100_000,
        },
        b: DiffSide {
            selector: "build=<B>".into(),
            hosts: 22,
            recordings: 25,
            samples: 120_000,
            weight: 120_000,
        },
        confidence: 0.95,
        fdr: 0.05,
        method: "Welch t, BH".into(),
        seed: None,
        functions: vec![
            DiffRow {
                name: "hash<K>".into(),
                module: "app".into(),
                share_a: 0.10,
                share_b: 0.15,
                delta: 0.05,
                ci_low: 0.03,
                ci_high: 0.07,
                z: 4.9,
                p: 1e-6,
                q: 4e-6,
                significant: true,
                tested: true,
            },
            DiffRow {
                name: "memcpy".into(),
                module: "libc.so.6".into(),
                share_a: 0.20,
                share_b: 0.18,
                delta: -0.02,
                ci_low: -0.05,
                ci_high: 0.01,
                z: -1.3,
                p: 0.19,
                q: 0.38,
                significant: false,
                tested: true,
            },
        ],
        tested: 2,
        min_share: 0.001,
        critical_t: Some(2.36),
        warnings: vec![],
    };
    (report, diff)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every element opened is closed in order (void elements excepted), attributes quoted,
    /// no raw `<` or `&` in text: the page parses as the XML-compatible HTML it is written as.
    pub(crate) fn assert_well_formed(h: &str) {
        const VOID: [&str; 4] = ["meta", "br", "hr", "img"];
        let body = h.strip_prefix("<!DOCTYPE html>\n").expect("doctype");
        let mut stack: Vec<String> = Vec::new();
        let mut rest = body;
        while let Some(i) = rest.find(['<', '&']) {
            let (text, tail) = rest.split_at(i);
            assert!(!text.contains('>'), "raw > in text near {text:?}");
            if let Some(t) = tail.strip_prefix('&') {
                let end = t.find(';').expect("entity without ;");
                let ent = &t[..end];
                assert!(
                    ["lt", "gt", "amp", "quot", "#39"].contains(&ent),
                    "unknown entity &{ent};"
                );
                rest = &t[end + 1..];
                continue;
            }
            let end = tail.find('>').expect("unclosed tag");
            let tag = &tail[1..end];
            rest = &tail[end + 1..];
            assert!(!tag.contains('<'), "< inside tag {tag:?}");
            assert_eq!(
                tag.matches('"').count() % 2,
                0,
                "unbalanced quotes in {tag:?}"
            );
            if let Some(name) = tag.strip_prefix('/') {
                let open = stack.pop().unwrap_or_else(|| panic!("stray </{name}>"));
                assert_eq!(open, name, "</{name}> closes <{open}>");
            } else {
                let name: String = tag
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric())
                    .collect();
                if !tag.ends_with('/') && !VOID.contains(&name.as_str()) {
                    stack.push(name);
                }
            }
        }
        assert!(stack.is_empty(), "unclosed elements: {stack:?}");
    }

    /// Issue 32 item 1: names, events, hosts, labels and the store's path from ingested
    /// files reach the text without a raw control character or a line of their own, and
    /// the HTML without one either.
    #[test]
    fn hostile_strings_stay_escaped() {
        let bad = "ev\x1b]0;t\x07\nFAKE 99.99% row\u{202e}\u{9b}";
        let (mut r, mut d) = sample_reports();
        r.store = bad.into();
        r.event = bad.into();
        r.warnings
            .push(crate::Warning::new(crate::WarningKind::Other, bad));
        r.functions[0].name = bad.into();
        r.functions[0].module = bad.into();
        r.host_deviations[0].host = bad.into();
        r.host_deviations[0].function = bad.into();
        r.precision[0].function = bad.into();
        d.store = bad.into();
        d.event = bad.into();
        d.a.selector = bad.into();
        d.warnings
            .push(crate::Warning::new(crate::WarningKind::Other, bad));
        d.functions[0].name = bad.into();
        for (what, text) in [
            ("report text", r.render_text(10, false)),
            ("report text, colour", r.render_text(10, true)),
            ("diff text", d.render_text(10, false)),
            ("report html", r.render_html(10)),
            ("diff html", d.render_html(10)),
        ] {
            assert!(
                !text.lines().any(|l| l.trim_start().starts_with("FAKE")),
                "{what}: forged line"
            );
            assert!(
                !text.contains(['\x07', '\u{202e}', '\u{9b}', '\r']),
                "{what}: raw control character"
            );
            // ESC only as the colour codes the renderer writes itself.
            let no_colour = text
                .replace("\x1b[0m", "")
                .replace("\x1b[1m", "")
                .replace("\x1b[31m", "");
            assert!(!no_colour.contains('\x1b'), "{what}: raw ESC");
            assert!(
                text.contains("ev\\x1b]0;t\\x07\\nFAKE"),
                "{what}: escaped form"
            );
        }
    }

    #[test]
    fn json_keeps_the_cli_contract() {
        let (r, d) = sample_reports();
        let j: serde_json::Value = serde_json::from_str(&r.to_json().unwrap()).unwrap();
        assert_eq!(j["hosts"], 3);
        assert_eq!(j["samples"], 1000);
        let f = &j["functions"][1];
        assert_eq!(f["name"], "std::vector<int>::push_back");
        assert_eq!(
            (f["samples"].as_u64(), f["share"].as_f64()),
            (Some(300), Some(0.3))
        );
        assert_eq!(
            (f["ci_low"].as_f64(), f["ci_high"].as_f64()),
            (Some(0.25), Some(0.35))
        );
        // Stable order: the struct's field order, rows as given; a round trip is lossless.
        let text = r.to_json().unwrap();
        assert!(text.find("\"version\"").unwrap() < text.find("\"functions\"").unwrap());
        assert!(text.ends_with("}\n"));
        let back: FleetReport = serde_json::from_str(&text).unwrap();
        assert_eq!(back, r);
        let back: FleetDiffReport = serde_json::from_str(&d.to_json().unwrap()).unwrap();
        assert_eq!(back, d);
    }

    #[test]
    fn report_text_has_the_table_deviations_and_precision() {
        let (r, _) = sample_reports();
        let t = r.render_text(2, false);
        assert!(
            t.contains("3 hosts, 4 recordings, 1000 samples of cpu-clock"),
            "{t}"
        );
        assert!(t.contains("warning:      only 3 hosts"));
        // The first table row: name, module, samples, share, interval, design effect, hosts.
        let row = t
            .lines()
            .find(|l| l.starts_with("parse<script>"))
            .expect("row");
        let cells: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(
            cells[1..],
            ["app", "600", "60.00%", "50.00%..70.00%", "10.4", "3"]
        );
        // top = 2: the third function is left to the JSON.
        let functions = &t[..t.find("(1 more in --json)").expect("more")];
        assert!(!functions.contains("\nidle "), "{functions}");
        let dev = t
            .lines()
            .find(|l| l.starts_with("web<2>"))
            .expect("deviation");
        assert!(dev.contains("50.00%") && dev.contains("30.00%") && dev.contains("+5.10"));
        assert!(dev.contains("1.0e-6"), "{dev}");
        let prec = t
            .lines()
            .find(|l| l.starts_with("idle"))
            .expect("precision");
        let cells: Vec<&str> = prec.split_whitespace().collect();
        assert_eq!(
            cells[1..],
            ["10.00%", "20.0%", "3458", "3804", "unreachable"]
        );
        assert!(t.contains("for ±10% of each share"));
        assert!(t
            .trim_end()
            .ends_with("method: ratio estimator & cluster-robust variance"));
        // Colour only on request.
        assert!(!t.contains('\x1b') && r.render_text(2, true).contains('\x1b'));
    }

    #[test]
    fn report_html_escapes_and_plots() {
        let (r, _) = sample_reports();
        let h = r.render_html(10);
        assert_well_formed(&h);
        assert!(!h.contains("<script"), "unescaped name leaked");
        assert!(h.contains("parse&lt;script&gt;alert(1)&lt;/script&gt;"));
        assert!(h.contains("web&lt;2&gt;") && h.contains("&lt;few&gt;"));
        assert!(h.contains("/data/fleet &lt;store&gt;"));
        for id in ["plot-shares", "plot-hosts"] {
            assert!(h.contains(&format!("id=\"{id}\"")), "missing {id}");
        }
        // Three share rows with whiskers; the deviating host as a red dot.
        let shares = &h[h.find("id=\"plot-shares\"").unwrap()..];
        let shares = &shares[..shares.find("</svg>").unwrap()];
        assert_eq!(shares.matches("<g>").count(), 3);
        let hosts = &h[h.find("id=\"plot-hosts\"").unwrap()..];
        let hosts = &hosts[..hosts.find("</svg>").unwrap()];
        assert_eq!(hosts.matches("<circle").count(), 1);
        assert!(hosts.contains(&format!(
            "fill=\"{RED}\" fill-opacity=\"0.7\"><title>web&lt;2&gt;: 50.00%"
        )));
        // Every host's share given: one dot each, the deviating one still red.
        let spread: Vec<HostShare> = [("web-1", 0.55), ("web<2>", 0.5), ("db", 0.7)]
            .iter()
            .map(|(h, s)| HostShare {
                host: h.to_string(),
                function: "std::vector<int>::push_back".into(),
                share: *s,
            })
            .collect();
        let h2 = r.render_html_with_hosts(10, &spread);
        assert_well_formed(&h2);
        let hosts = &h2[h2.find("id=\"plot-hosts\"").unwrap()..];
        let hosts = &hosts[..hosts.find("</svg>").unwrap()];
        assert_eq!(hosts.matches("<circle").count(), 3);
        assert_eq!(hosts.matches(&format!("fill=\"{RED}\"")).count(), 1 + 1); // legend + dot
                                                                              // No network: nothing refers to http(s) except the SVG namespace.
        let without_ns = h2.replace("http://www.w3.org/2000/svg", "");
        assert!(!without_ns.contains("http://") && !without_ns.contains("https://"));
    }

    #[test]
    fn diff_text_and_html() {
        let (_, d) = sample_reports();
        let t = d.render_text(10, false);
        assert!(t.contains("side A:       build=A: 20 hosts, 20 recordings, 100000 samples"));
        assert!(t.contains("1 of 2 functions tested beyond noise"), "{t}");
        let row = t.lines().find(|l| l.starts_with("hash<K>")).expect("row");
        let cells: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(
            cells[1..],
            [
                "app",
                "10.00%",
                "15.00%",
                "+5.00%",
                "+3.00%..+7.00%",
                "+4.90",
                "4.0e-6",
                "yes"
            ]
        );
        let row = t.lines().find(|l| l.starts_with("memcpy")).expect("row");
        assert!(row.contains("-2.00%") && row.contains("0.3800") && row.ends_with(" no"));
        assert!(t.contains("(significant: q <= 0.05, Benjamini-Hochberg over the 2 tested rows; untested rows show q 1)"), "{t}");
        assert!(t.lines().all(|l| !l.ends_with(' ')), "trailing spaces");
        let h = d.render_html(10);
        assert_well_formed(&h);
        assert!(h.contains("id=\"plot-diff\""));
        assert!(h.contains("build=&lt;B&gt;") && h.contains("hash&lt;K&gt;"));
        assert!(!h.contains("<B>") && !h.contains("<K>"));
        // The significant row is red in the plot and the table; the other blue.
        let plot = &h[h.find("id=\"plot-diff\"").unwrap()..];
        let plot = &plot[..plot.find("</svg>").unwrap()];
        assert_eq!(plot.matches(&format!("fill=\"{RED}\"")).count(), 1);
        assert_eq!(h.matches("<tr class=\"sig\">").count(), 1);
        // The zero line of a difference axis is drawn dark.
        assert!(plot.contains("stroke=\"#444\""));
        assert!(plot.contains(">+5.00%</text>") && plot.contains(">-2.00%</text>"));
    }

    #[test]
    fn helpers_by_hand() {
        assert_eq!(
            nice_axis(0.0, 0.7),
            (0.0, 0.8, vec![0.0, 0.2, 0.4, 0.6000000000000001, 0.8])
        );
        let (a, b, t) = nice_axis(-0.05, 0.07);
        // Span 0.12: raw step 0.024 -> 0.05; from −1·0.05 to 2·0.05 (ticks −5%, 0, 5%, 10%).
        assert!((a + 0.05).abs() < 1e-12 && (b - 0.1).abs() < 1e-12 && t.len() == 4);
        assert_eq!(tick(0.025), "2.5%");
        assert_eq!(tick(-0.0), "0%");
        assert_eq!(pval(3.4e-7), "3.4e-7");
        assert_eq!(pval(0.5), "0.5000");
        assert_eq!(zval(f64::MAX), "+inf");
        assert_eq!(count(u64::MAX), "unreachable");
    }
}
