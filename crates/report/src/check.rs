//! The report of `check` (how far to trust one profile when the run cannot be repeated):
//! its data, which *is* the `--json` schema (docs/check.md), the text tables in the audit's
//! style, and a self-contained HTML page.

use crate::html::escape_html;
use crate::quote_name;
use crate::text::Table;
use serde::Serialize;
use std::fmt::Write as _;

/// What a row (or the whole profile) can be used for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// The share is known precisely enough to act on (optimise, compare, report it).
    Act,
    /// The order against other rows holds, the size does not: rank only.
    RankOnly,
    /// Indistinguishable from sampling noise.
    Noise,
}

impl Verdict {
    /// As the text table prints it.
    pub fn label(self) -> &'static str {
        match self {
            Verdict::Act => "act on it",
            Verdict::RankOnly => "rank only",
            Verdict::Noise => "noise",
        }
    }
}

/// The sampled event and what it measures.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CheckEvent {
    /// Name as the file states it (`cpu-clock`, `cycles:pp`).
    pub name: String,
    /// Kind (`cpu-clock`, `task-clock`, `cycles`, `instructions`, `raw`, `other`).
    pub kind: String,
    /// What a sample's share estimates (`time on CPU`, `retired instructions`, ...).
    pub measures: String,
    /// Precise level (`:p` count, 0-3).
    pub precise: u8,
    /// Period as recorded (`fixed 100003`, `frequency 4000 Hz`, `unknown`).
    pub period: String,
    /// Whether the period was randomised (seed 001 §4).
    pub randomized: bool,
}

/// One row: a function, inline function, source line or basic block.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CheckRow {
    /// Name (function; `file:line`; `function@0xSTART` for a block).
    pub name: String,
    /// Samples attributed to it.
    pub samples: u64,
    /// `samples / total`.
    pub share: f64,
    /// Lower bound of the stated interval (see `interval`).
    pub ci_low: f64,
    /// Upper bound of the stated interval.
    pub ci_high: f64,
    /// Method of the stated interval: `wilson`, or `batch-means` where the row's samples
    /// cluster in time.
    pub interval: String,
    /// The Wilson score interval.
    pub wilson_low: f64,
    /// The Wilson score interval.
    pub wilson_high: f64,
    /// The batch-means interval over time slices.
    pub batch_low: f64,
    /// The batch-means interval over time slices.
    pub batch_high: f64,
    /// Batch variance over binomial variance (> 1: clustered in time).
    pub inflation: f64,
    /// Whether its share is told apart from the next row's (`None` for the last row).
    pub distinct_from_next: Option<bool>,
    /// Running states (runs of consecutive samples in this row, seed 002 §5.1.2), when the
    /// samples have time stamps.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub runs: Option<u64>,
    /// Mean running-state length over the sampling interval (`R` of seed 002 eq. 1).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub r_mean: Option<f64>,
    /// Warning kinds that apply to the row (`granularity`, `aliasing`, `skid`).
    pub flags: Vec<String>,
    /// What the row can be used for.
    pub verdict: Verdict,
    /// Why.
    pub reason: String,
}

/// One warning about the profile.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CheckWarning {
    /// `aliasing`, `skid`, `granularity`, `lost`, `throttling`, `multiplexing`,
    /// `unsymbolized`, `clustering`, `ended-early`, `input`.
    pub kind: String,
    /// What was found and what to do about it.
    pub message: String,
}

/// "Record N× longer for ±x% on the top k".
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TargetAdvice {
    /// Wanted half-width of the intervals, as a share (0.01 = ±1%).
    pub precision: f64,
    /// Rows it applies to (the top k functions).
    pub top: usize,
    /// How many times the current samples are needed (<= 1: reached).
    pub factor: f64,
    /// Samples needed.
    pub samples_needed: u64,
    /// The advice in words.
    pub message: String,
}

/// The aliasing measurement (seeds 001, 002): recurrence of sampled instruction addresses.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AliasingCheck {
    /// Consecutive-sample pairs in one function examined (same thread).
    pub pairs: u64,
    /// Lag (in samples) with the strongest excess recurrence.
    pub lag: u64,
    /// Pairs at that lag landing on the same instruction.
    pub same_observed: f64,
    /// Expected same-instruction pairs if samples were independent of the code's phase.
    pub same_expected: f64,
    /// Observed over expected.
    pub ratio: f64,
    /// `(observed - expected) / sd`.
    pub z: f64,
    /// Whether shares may be biased by aliasing.
    pub flagged: bool,
}

/// Recording health (issue 14 item 5).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CheckHealth {
    /// Samples the kernel reported lost.
    pub lost: u64,
    /// `PERF_RECORD_THROTTLE` records in the file (0 also when its format cannot hold them:
    /// `perf script` text, callgrind).
    pub throttled: Option<u64>,
    /// Time running over time enabled of the event (< 1: multiplexed), when the file carries
    /// the times (`PERF_FORMAT_TOTAL_TIME_*` read values; `proftrust record`'s files).
    pub running_ratio: Option<f64>,
    /// Share of the samples with no function name (no binary, no symbol).
    pub unsymbolized: f64,
    /// Modules with samples whose binary has no line information.
    pub no_debug_info: Vec<String>,
    /// How the program ended, when known.
    pub outcome: Option<String>,
}

/// The finest granularity whose rows can be acted on, and why not finer.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Granularity {
    /// `function`, `inline`, `line`, `block`, `instruction`, or `none`.
    pub level: String,
    /// Why the next finer level is not trustworthy.
    pub reason: String,
}

/// What `check` found.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CheckReport {
    /// The profile as given.
    pub profile: String,
    /// Verdict for the profile.
    pub verdict: Verdict,
    /// Why.
    pub reason: String,
    /// Samples of the checked event.
    pub samples: u64,
    /// The checked event.
    pub event: CheckEvent,
    /// Confidence level of every interval (0.95).
    pub confidence: f64,
    /// Time slices of the batch-means intervals.
    pub slices: usize,
    /// The smallest share the profile tells from zero: a location below it may have no
    /// sample at all.
    pub smallest_share: f64,
    /// Down to which granularity the profile can be trusted.
    pub trustworthy_at: Granularity,
    /// Samples needed for `--target`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<TargetAdvice>,
    /// Per function (outermost frame; code without symbols per module), most samples first.
    pub functions: Vec<CheckRow>,
    /// Per inline function (innermost frame), most samples first.
    pub inlines: Vec<CheckRow>,
    /// Per source line (innermost frame), most samples first.
    pub lines: Vec<CheckRow>,
    /// Per basic block, most samples first (when the binary's code was found).
    pub blocks: Vec<CheckRow>,
    /// The aliasing measurement, when there were enough samples.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub aliasing: Option<AliasingCheck>,
    /// Recording health.
    pub health: CheckHealth,
    /// What may be wrong, by kind.
    pub warnings: Vec<CheckWarning>,
    /// Other remarks (what was skipped and why).
    pub notes: Vec<String>,
}

fn pct(x: f64) -> String {
    format!("{:.2}%", 100.0 * x)
}

fn table(rows: &[CheckRow], what: &str, top: usize, color: bool) -> String {
    let mut t = Table::new([
        what, "samples", "share", "95% CI", "interval", "R", "next", "verdict", "reason",
    ])
    .left_align(&[4, 7, 8]);
    for r in rows.iter().take(top) {
        t.row(
            [
                r.name.clone(),
                r.samples.to_string(),
                pct(r.share),
                format!("{}..{}", pct(r.ci_low), pct(r.ci_high)),
                r.interval.clone(),
                r.r_mean.map_or("-".into(), |x| format!("{x:.1}")),
                match r.distinct_from_next {
                    Some(true) => ">".into(),
                    Some(false) => "~".into(),
                    None => String::new(),
                },
                r.verdict.label().into(),
                r.reason.clone(),
            ],
            r.verdict == Verdict::Noise,
        );
    }
    let mut s = t.render(color);
    if rows.len() > top {
        let _ = writeln!(s, "({} more in --json)", rows.len() - top);
    }
    s
}

impl CheckReport {
    /// Pretty-printed JSON (with a final newline).
    pub fn to_json(&self) -> Result<String, serde_json::Error> {
        serde_json::to_string_pretty(self).map(|s| s + "\n")
    }

    /// The text report: header, warnings, the function table, the inline and line tables
    /// (`top` rows each), the blocks when known.
    pub fn render_text(&self, top: usize, color: bool) -> String {
        let mut s = String::new();
        let e = &self.event;
        // Every string here may hold names from the profile (event, functions, paths).
        let q = |s: &str| quote_name(s).into_owned();
        let _ = writeln!(s, "profile:      {}", q(&self.profile));
        let _ = writeln!(
            s,
            "samples:      {} ({}, {}; period {}{})",
            self.samples,
            q(&e.name),
            q(&e.measures),
            q(&e.period),
            if e.randomized { ", randomised" } else { "" }
        );
        let _ = writeln!(
            s,
            "verdict:      {} ({})",
            self.verdict.label(),
            q(&self.reason)
        );
        let _ = writeln!(
            s,
            "trust down to: {} ({})",
            q(&self.trustworthy_at.level),
            q(&self.trustworthy_at.reason)
        );
        let _ = writeln!(
            s,
            "resolution:   shares under {} may have no sample at all; {:.0}% intervals ({} time slices for batch means)",
            pct(self.smallest_share),
            self.confidence * 100.0,
            self.slices
        );
        if let Some(t) = &self.target {
            let _ = writeln!(s, "target:       {}", q(&t.message));
        }
        for w in &self.warnings {
            let _ = writeln!(s, "warning:      [{}] {}", q(&w.kind), q(&w.message));
        }
        for n in &self.notes {
            let _ = writeln!(s, "note:         {}", q(n));
        }
        s.push('\n');
        s.push_str(&table(&self.functions, "function", top, color));
        for (rows, what) in [
            (&self.inlines, "inline function"),
            (&self.lines, "source line"),
            (&self.blocks, "basic block"),
        ] {
            if !rows.is_empty() {
                s.push('\n');
                s.push_str(&table(rows, what, top, color));
            }
        }
        s.push_str(
            "(next: > the share differs from the next row's, ~ it does not at 95%; R: mean running-state length in sampling periods, paper 002)\n",
        );
        s
    }

    /// A self-contained HTML page (no script, no network): the summary, warnings and the
    /// tables with the intervals drawn as bars.
    pub fn render_html(&self, top: usize) -> String {
        let mut s = String::new();
        s.push_str("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n");
        s.push_str("<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\">\n");
        let _ = writeln!(
            s,
            "<title>proftrust check: {}</title>",
            escape_html(&self.profile)
        );
        s.push_str("<style>body{font-family:sans-serif;margin:2em;max-width:70em}table{border-collapse:collapse;margin:1em 0}td,th{padding:2px 8px;text-align:right;border-bottom:1px solid #ddd}td:first-child,th:first-child,td.l{text-align:left}.act{color:#060}.rank-only{color:#a60}.noise{color:#b00}.bar{display:inline-block;position:relative;width:12em;height:0.8em;background:#eee}.bar span{position:absolute;top:0;height:100%;background:#69c}.bar i{position:absolute;top:-2px;width:2px;height:130%;background:#000}.mono{font-family:monospace}</style>\n</head><body>\n");
        let _ = writeln!(
            s,
            "<h1>proftrust check</h1>\n<table><tr><th>profile</th><td class=\"l mono\">{}</td></tr><tr><th>samples</th><td class=\"l\">{} ({}, {}; period {}{})</td></tr><tr><th>verdict</th><td class=\"l {}\">{} ({})</td></tr><tr><th>trust down to</th><td class=\"l\">{} ({})</td></tr><tr><th>smallest share</th><td class=\"l\">{}</td></tr></table>",
            escape_html(&self.profile),
            self.samples,
            escape_html(&self.event.name),
            escape_html(&self.event.measures),
            escape_html(&self.event.period),
            if self.event.randomized { ", randomised" } else { "" },
            verdict_class(self.verdict),
            self.verdict.label(),
            escape_html(&self.reason),
            escape_html(&self.trustworthy_at.level),
            escape_html(&self.trustworthy_at.reason),
            pct(self.smallest_share)
        );
        if let Some(t) = &self.target {
            let _ = writeln!(s, "<p>{}</p>", escape_html(&t.message));
        }
        if !self.warnings.is_empty() {
            s.push_str("<h2>Warnings</h2>\n<ul>\n");
            for w in &self.warnings {
                let _ = writeln!(
                    s,
                    "<li><b>{}</b>: {}</li>",
                    escape_html(&w.kind),
                    escape_html(&w.message)
                );
            }
            s.push_str("</ul>\n");
        }
        for n in &self.notes {
            let _ = writeln!(s, "<p class=\"note\">{}</p>", escape_html(n));
        }
        for (rows, what) in [
            (&self.functions, "Functions"),
            (&self.inlines, "Inline functions"),
            (&self.lines, "Source lines"),
            (&self.blocks, "Basic blocks"),
        ] {
            if rows.is_empty() {
                continue;
            }
            let max = rows
                .iter()
                .take(top)
                .map(|r| r.ci_high)
                .fold(0.0f64, f64::max)
                .max(1e-9);
            let _ = writeln!(s, "<h2>{what}</h2>\n<table><tr><th>name</th><th>samples</th><th>share</th><th>95% interval</th><th></th><th>verdict</th><th>reason</th></tr>");
            for r in rows.iter().take(top) {
                let x = |v: f64| 100.0 * v / max;
                let _ = writeln!(
                    s,
                    "<tr><td class=\"mono\">{}</td><td>{}</td><td>{}</td><td>{}..{} ({})</td><td><span class=\"bar\"><span style=\"left:{:.2}%;width:{:.2}%\"></span><i style=\"left:{:.2}%\"></i></span></td><td class=\"l {}\">{}</td><td class=\"l\">{}</td></tr>",
                    escape_html(&r.name),
                    r.samples,
                    pct(r.share),
                    pct(r.ci_low),
                    pct(r.ci_high),
                    escape_html(&r.interval),
                    x(r.ci_low),
                    (x(r.ci_high) - x(r.ci_low)).max(0.5),
                    x(r.share),
                    verdict_class(r.verdict),
                    r.verdict.label(),
                    escape_html(&r.reason)
                );
            }
            s.push_str("</table>\n");
        }
        s.push_str("</body></html>\n");
        s
    }
}

fn verdict_class(v: Verdict) -> &'static str {
    match v {
        Verdict::Act => "act",
        Verdict::RankOnly => "rank-only",
        Verdict::Noise => "noise",
    }
}
