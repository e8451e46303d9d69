//! The report of `check` (how far to trust one profile when the run cannot be repeated):
//! its data (defined in `proftrust_check::report`, which *is* the `--json` schema,
//! docs/check.md), the text tables in the audit's style, and a self-contained HTML page.

use crate::html::escape_html;
use crate::quote_name;
use crate::text::Table;
use std::fmt::Write as _;

pub use proftrust_check::report::{
    AliasingCheck, Attribution, CheckEvent, CheckHealth, CheckRow, Granularity, ModuleAttribution,
    PhaseLock, RunInterval, TargetAdvice, Verdict,
};
use serde::Serialize;

/// What `check` found.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CheckReport {
    /// The profile as given (the first, when several recordings are checked together).
    pub profile: String,
    /// Every recording checked, when more than one was given (`check a.data b.data`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub recordings: Vec<String>,
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
    /// How the functions' intervals for another run were computed.
    pub run_interval: RunInterval,
    /// Samples needed for `--target`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<TargetAdvice>,
    /// Per function (outermost frame; code without a function per module), most samples
    /// first.
    pub functions: Vec<CheckRow>,
    /// Per inline function (innermost frame, named with the function it is inlined in), most
    /// samples first.
    pub inlines: Vec<CheckRow>,
    /// Per source line (innermost frame), most samples first.
    pub lines: Vec<CheckRow>,
    /// Per basic block, most samples first (when the binary's code was found).
    pub blocks: Vec<CheckRow>,
    /// The recurrence measurement of aliasing, when there were enough samples.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub aliasing: Option<AliasingCheck>,
    /// The phase-lock measurement of aliasing (time events with a period that is not
    /// randomised).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phase_lock: Option<PhaseLock>,
    /// Recording health.
    pub health: CheckHealth,
    /// What may be wrong, by kind.
    pub warnings: Vec<crate::Warning>,
    /// Other remarks (what was skipped and why).
    pub notes: Vec<String>,
}

fn pct(x: f64) -> String {
    format!("{:.2}%", 100.0 * x)
}

/// A per-row measurement beyond the fixed columns: its header and its cell. A column shows
/// only in tables where some row has it. A new measurement of every row (e.g. another kind of
/// time) is an `Option` field on [`CheckRow`] plus one entry in [`EXTRA_COLUMNS`].
type ExtraColumn = (&'static str, fn(&CheckRow) -> Option<String>);

/// The extra columns, in order, placed after the stated interval.
const EXTRA_COLUMNS: &[ExtraColumn] = &[
    ("next run", |r| {
        Some(format!("{}..{}", pct(r.run_low?), pct(r.run_high?)))
    }),
    // The time the branch stacks' cycle counts measured (issue 34), where the samples had them.
    ("hw time", |r| r.hardware_time.map(pct)),
    ("hw 95% CI", |r| {
        Some(format!(
            "{}..{}",
            pct(r.hardware_time_low?),
            pct(r.hardware_time_high?)
        ))
    }),
];

fn table(rows: &[CheckRow], what: &str, top: usize, color: bool) -> String {
    let shown = &rows[..rows.len().min(top)];
    let extra: Vec<&ExtraColumn> = EXTRA_COLUMNS
        .iter()
        .filter(|c| shown.iter().any(|r| (c.1)(r).is_some()))
        .collect();
    let mut headers = vec![what, "samples", "share", "95% CI"];
    headers.extend(extra.iter().map(|c| c.0));
    headers.extend(["interval", "R", "next", "verdict", "reason"]);
    let k = extra.len();
    let mut t = Table::new(headers).left_align(&[4 + k, 7 + k, 8 + k]);
    for r in shown {
        let mut cells = vec![
            r.name.clone(),
            r.samples.to_string(),
            pct(r.share),
            format!("{}..{}", pct(r.ci_low), pct(r.ci_high)),
        ];
        cells.extend(extra.iter().map(|c| (c.1)(r).unwrap_or_else(|| "-".into())));
        cells.extend([
            r.interval.clone(),
            r.r_mean.map_or("-".into(), |x| format!("{x:.1}")),
            match r.distinct_from_next {
                Some(true) => ">".into(),
                Some(false) => "~".into(),
                None => String::new(),
            },
            r.verdict.label().into(),
            r.reason.clone(),
        ]);
        t.row(cells, r.verdict == Verdict::Noise);
    }
    let mut s = t.render(color);
    if rows.len() > top {
        let _ = writeln!(s, "({} more in --json)", rows.len() - top);
    }
    s
}

impl CheckReport {
    /// The share of samples without a function, per module, in words (issue 29: every report
    /// states it).
    pub fn attribution_summary(&self) -> String {
        let h = &self.health;
        if h.unattributed.is_empty() {
            return "every sample is in a function".into();
        }
        let per: Vec<String> = h
            .unattributed
            .iter()
            .map(|m| format!("{} {} of its {}", m.module, pct(m.share), m.samples))
            .collect();
        format!(
            "{} of the samples in no function ({})",
            pct(h.unsymbolized),
            per.join(", ")
        )
    }

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
        if !self.recordings.is_empty() {
            let recordings: Vec<String> = self.recordings.iter().map(|r| q(r)).collect();
            let _ = writeln!(s, "recordings:   {}", recordings.join(", "));
        }
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
        let _ = writeln!(
            s,
            "next run:     {} ({})",
            self.run_interval.method, self.run_interval.note
        );
        let _ = writeln!(s, "functions:    {}", self.attribution_summary());
        if let Some(t) = &self.target {
            let _ = writeln!(s, "target:       {}", q(&t.message));
        }
        for w in &self.warnings {
            let _ = writeln!(s, "warning:      [{}] {}", w.kind, q(&w.message));
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
            "<h1>proftrust check</h1>\n<table><tr><th>profile</th><td class=\"l mono\">{}</td></tr><tr><th>samples</th><td class=\"l\">{} ({}, {}; period {}{})</td></tr><tr><th>verdict</th><td class=\"l {}\">{} ({})</td></tr><tr><th>trust down to</th><td class=\"l\">{} ({})</td></tr><tr><th>smallest share</th><td class=\"l\">{}</td></tr><tr><th>next run</th><td class=\"l\">{} ({})</td></tr><tr><th>functions</th><td class=\"l\">{}</td></tr></table>",
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
            pct(self.smallest_share),
            escape_html(&self.run_interval.method),
            escape_html(&self.run_interval.note),
            escape_html(&self.attribution_summary())
        );
        if let Some(t) = &self.target {
            let _ = writeln!(s, "<p>{}</p>", escape_html(&t.message));
        }
        if !self.warnings.is_empty() {
            s.push_str("<h2>Warnings</h2>\n<ul>\n");
            for w in &self.warnings {
                let _ = writeln!(s, "<li><b>{}</b>: {}</li>", w.kind, escape_html(&w.message));
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
            let extra: Vec<&ExtraColumn> = EXTRA_COLUMNS
                .iter()
                .filter(|c| rows.iter().take(top).any(|r| (c.1)(r).is_some()))
                .collect();
            let extra_th: String = extra
                .iter()
                .map(|c| format!("<th>{}</th>", escape_html(c.0)))
                .collect();
            let _ = writeln!(s, "<h2>{what}</h2>\n<table><tr><th>name</th><th>samples</th><th>share</th><th>95% interval</th><th></th>{extra_th}<th>verdict</th><th>reason</th></tr>");
            for r in rows.iter().take(top) {
                let x = |v: f64| 100.0 * v / max;
                let extra_td: String = extra
                    .iter()
                    .map(|c| format!("<td>{}</td>", escape_html(&(c.1)(r).unwrap_or_default())))
                    .collect();
                let _ = writeln!(
                    s,
                    "<tr><td class=\"mono\">{}</td><td>{}</td><td>{}</td><td>{}..{} ({})</td><td><span class=\"bar\"><span style=\"left:{:.2}%;width:{:.2}%\"></span><i style=\"left:{:.2}%\"></i></span></td>{}<td class=\"l {}\">{}</td><td class=\"l\">{}</td></tr>",
                    escape_html(&r.name),
                    r.samples,
                    pct(r.share),
                    pct(r.ci_low),
                    pct(r.ci_high),
                    escape_html(&r.interval),
                    x(r.ci_low),
                    (x(r.ci_high) - x(r.ci_low)).max(0.5),
                    x(r.share),
                    extra_td,
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
