//! Aligned terminal tables.

use crate::model::{AuditReport, FunctionRow};
use crate::quote_name;
use std::fmt::Write as _;

/// A table of text cells, rendered with aligned columns. The first column is left-aligned,
/// the others right-aligned (numbers).
#[derive(Debug, Clone, Default)]
pub struct Table {
    headers: Vec<String>,
    left: Vec<usize>,
    rows: Vec<(Vec<String>, Option<&'static str>)>,
}

const RESET: &str = "\x1b[0m";
const BOLD: &str = "\x1b[1m";
const RED: &str = "\x1b[31m";

impl Table {
    /// A table with these column headers.
    pub fn new<S: Into<String>>(headers: impl IntoIterator<Item = S>) -> Table {
        Table {
            headers: headers
                .into_iter()
                .map(|h| quote_name(&h.into()).into_owned())
                .collect(),
            left: vec![0],
            rows: Vec::new(),
        }
    }

    /// Left-aligns these columns too (text columns); column 0 always is.
    pub fn left_align(mut self, cols: &[usize]) -> Table {
        self.left.extend_from_slice(cols);
        self
    }

    /// Adds a row; `highlight` marks it (red on a terminal, `!` in the last column otherwise
    /// is the caller's business). Cells are shown through [`quote_name`]: a name with a
    /// control character cannot break the table.
    pub fn row<S: Into<String>>(&mut self, cells: impl IntoIterator<Item = S>, highlight: bool) {
        let cells = cells
            .into_iter()
            .map(|c| {
                let c: String = c.into();
                match quote_name(&c) {
                    std::borrow::Cow::Borrowed(_) => c,
                    std::borrow::Cow::Owned(q) => q,
                }
            })
            .collect();
        self.rows.push((cells, highlight.then_some(RED)));
    }

    /// Renders the table; `color` adds ANSI colour (bold header, red highlighted rows).
    pub fn render(&self, color: bool) -> String {
        let ncol = self
            .rows
            .iter()
            .map(|r| r.0.len())
            .chain([self.headers.len()])
            .max()
            .unwrap_or(0);
        let mut width = vec![0usize; ncol];
        for cells in std::iter::once(&self.headers).chain(self.rows.iter().map(|r| &r.0)) {
            for (i, c) in cells.iter().enumerate() {
                width[i] = width[i].max(c.chars().count());
            }
        }
        let line = |cells: &[String]| -> String {
            let mut s = String::new();
            for (i, w) in width.iter().enumerate() {
                let c = cells.get(i).map(String::as_str).unwrap_or("");
                if i > 0 {
                    s.push_str("  ");
                }
                let pad = w - c.chars().count();
                if self.left.contains(&i) {
                    s.push_str(c);
                    if i + 1 < ncol {
                        s.extend(std::iter::repeat_n(' ', pad));
                    }
                } else {
                    s.extend(std::iter::repeat_n(' ', pad));
                    s.push_str(c);
                }
            }
            s
        };
        let mut out = String::new();
        let h = line(&self.headers);
        if color {
            let _ = writeln!(out, "{BOLD}{h}{RESET}");
        } else {
            let _ = writeln!(out, "{h}");
        }
        for (cells, hl) in &self.rows {
            let l = line(cells);
            match (color, hl) {
                (true, Some(c)) => {
                    let _ = writeln!(out, "{c}{l}{RESET}");
                }
                _ => {
                    let _ = writeln!(out, "{l}");
                }
            }
        }
        out
    }
}

fn pct(x: f64) -> String {
    format!("{:.2}%", 100.0 * x)
}

/// `+1.25%`, `-0.40%`, and `0.00%` for differences that round to zero.
pub(crate) fn signed_pct(x: f64) -> String {
    if (100.0 * x).abs() < 0.005 {
        "0.00%".to_string()
    } else {
        format!("{:+.2}%", 100.0 * x)
    }
}

fn opt(x: Option<f64>, digits: usize) -> String {
    match x {
        Some(v) => format!("{v:.digits$}"),
        None => "n/a".to_string(),
    }
}

/// Renders the terminal report: what was compared, the metrics, and the `top` functions
/// by exact share. Rows whose exact share is outside the sampled share's 95% interval on
/// enough samples to call it bias are marked `!` (and red when `color`); a metric on too few
/// samples says so in its meaning column (`Metrics::too_few`).
pub fn render_text(r: &AuditReport, color: bool, top: usize) -> String {
    let mut out = String::new();
    config_text(&mut out, r);
    let _ = writeln!(out);
    if !r.processes.is_empty() {
        out.push_str(&render_processes_text(r, color));
        let _ = writeln!(out);
    }
    out.push_str(&metrics_text(r, color));
    let _ = writeln!(out);
    functions_text(&mut out, r, color, top);
    interval_notes(&mut out, r);
    if !r.sweep.is_empty() {
        let _ = writeln!(out);
        out.push_str(&render_sweep_text(r, color));
    }
    out
}

/// What was compared, one `label: value` line each, then the interruption, the samples'
/// attribution and the warnings. Names are shown through [`quote_name`].
fn config_text(out: &mut String, r: &AuditReport) {
    let (c, m) = (&r.config, &r.metrics);
    let q = |s: &str| quote_name(s).into_owned();
    let _ = writeln!(out, "binary:       {}", q(&c.binary));
    if let Some(why) = &c.binary_reason {
        let _ = writeln!(out, "              {}", q(why));
    }
    if let Some(b) = &c.build_id {
        let _ = writeln!(out, "build-id:     {b}");
    }
    let period = match (c.period, c.frequency_hz) {
        (Some(p), _) => format!("period {p}"),
        // As check says it (issue 31 item 14: audit said "period unknown").
        (None, Some(hz)) => format!("{hz} Hz (kernel-adjusted)"),
        (None, None) => "period unknown".to_string(),
    };
    let _ = writeln!(
        out,
        "samples:      {} ({} event, {}{}) from {}",
        m.samples,
        q(&c.event),
        period,
        if c.randomized { ", randomised" } else { "" },
        q(&c.samples_source)
    );
    if c.truth_missing {
        let _ = writeln!(out, "truth:        {}", q(&c.truth_source));
    } else {
        let _ = writeln!(
            out,
            "truth:        {} instructions from {}",
            m.instructions,
            q(&c.truth_source)
        );
    }
    let _ = writeln!(out, "backend:      {}", q(&c.truth_backend));
    let _ = writeln!(out, "truth weight: {}", c.truth_weight);
    if let Some(f) = &c.truth_weight_formula {
        let _ = writeln!(out, "              {f}");
    }
    let _ = writeln!(out, "seed:         {}", c.seed);
    if let Some(i) = &c.interrupted {
        let _ = writeln!(out, "INTERRUPTED:  {}", q(i));
    }
    for (label, l) in crate::attribution::attribution_lines(&r.attribution) {
        let _ = writeln!(out, "{:<14}{}", format!("{label}:"), q(&l));
    }
    for w in &r.warnings {
        let _ = writeln!(out, "warning:      {}", q(&w.message));
    }
}

/// The metric table ([`crate::metric_table`]): value, corrected value after
/// `--correct-skid`, and the meaning, or why the metric rests on too few samples.
fn metrics_text(r: &AuditReport, color: bool) -> String {
    let mut t = match r.corrected {
        Some(_) => Table::new(["metric", "value", "corrected", "meaning"]).left_align(&[3]),
        None => Table::new(["metric", "value", "meaning"]).left_align(&[2]),
    };
    for row in crate::metric_table::metric_rows(r) {
        let mut cells = vec![row.def.name.to_string(), opt(row.value, 4)];
        if let Some(c) = row.corrected {
            cells.push(opt(c, 4));
        }
        // A metric on too few samples keeps its value, but says it is no evidence (and why).
        match row.too_few {
            Some(why) => cells.push(format!("too few to judge: {why}")),
            None => cells.push(row.def.meaning.to_string()),
        }
        t.row(cells, false);
    }
    t.render(color)
}

/// The table of the first `top` visible functions (bias rows marked), and how many more
/// the JSON has.
fn functions_text(out: &mut String, r: &AuditReport, color: bool, top: usize) {
    let mut headers = vec![
        "function", "samples", "sampled", "95% CI", "exact", "diff", "",
    ];
    if r.corrected.is_some() {
        headers.extend(["corrected", "diff"]);
    }
    let mut t = Table::new(headers);
    let visible: Vec<_> = r.functions.iter().filter(|f| f.is_visible()).collect();
    for f in visible.iter().take(top) {
        t.row(function_cells(r, f), f.bias);
    }
    out.push_str(&t.render(color));
    let shown = visible.len().min(top);
    if r.functions.len() > shown {
        let _ = writeln!(
            out,
            "({} more functions in --json: beyond --top, or no samples and under 0.01% exact)",
            r.functions.len() - shown
        );
    }
}

/// The cells of one function's row: samples, sampled share and its interval, exact share
/// and difference (`-` without truth), and the corrected share after `--correct-skid`.
fn function_cells(r: &AuditReport, f: &FunctionRow) -> Vec<String> {
    let mut cells = vec![
        f.name.clone(),
        f.samples.to_string(),
        pct(f.sampled_share),
        format!("{}..{}", pct(f.ci_low), pct(f.ci_high)),
    ];
    if r.config.truth_missing {
        cells.extend(["-".to_string(), "-".to_string(), String::new()]);
    } else {
        cells.extend([
            pct(f.exact_share),
            signed_pct(f.difference),
            if f.bias { "!" } else { "" }.to_string(),
        ]);
    }
    if let Some(c) = &r.corrected {
        let cs = c
            .functions
            .iter()
            .find(|x| x.name == f.name)
            .map_or(0.0, |x| x.corrected_share);
        cells.push(pct(cs));
        cells.push(signed_pct(cs - f.exact_share));
    }
    cells
}

/// How many functions lie outside their interval (as bias, and on too few samples), and
/// the caveat of a fixed period.
fn interval_notes(out: &mut String, r: &AuditReport) {
    let (c, m) = (&r.config, &r.metrics);
    let _ = writeln!(
        out,
        "{} of {} functions: exact share outside the sampled 95% interval (!)",
        m.functions_biased,
        r.functions.len()
    );
    let thin = m.functions_outside_ci.saturating_sub(m.functions_biased);
    if thin > 0 {
        // proftrust_metrics::evidence::MIN_BIAS_SAMPLES
        let _ = writeln!(
            out,
            "{thin} more outside it on fewer than 5 samples (observed and expected): too few to call bias, not marked"
        );
    }
    if !c.randomized && c.period.is_some() {
        // docs/sampling-theory.md, "Wilson coverage": with a fixed period the 95% intervals
        // covered 87-91% on mixed tasks and far less on code periodic with the sampler.
        let _ = writeln!(
            out,
            "(the intervals assume samples independent of the program's phase; a fixed period can alias with periodic code: --randomize)"
        );
    }
}

/// The processes table of an audit (docs/processes.md, "Process trees"): per process name
/// and how its images began, the images on each side, their samples and exact
/// instructions, and whether they were compared.
pub fn render_processes_text(r: &AuditReport, color: bool) -> String {
    let mut t = Table::new([
        "process",
        "start",
        "sampled",
        "exact",
        "samples",
        "share",
        "instructions",
        "share",
        "compared",
    ])
    .left_align(&[1, 8]);
    for p in &r.processes {
        t.row(
            vec![
                p.name.clone(),
                p.start.clone(),
                p.sampled_images.to_string(),
                p.exact_images.to_string(),
                p.samples.to_string(),
                pct(p.sampled_share),
                p.exact_instructions.to_string(),
                pct(p.exact_share),
                match &p.left_out {
                    None => "yes".into(),
                    Some(why) => format!("no: {why}"),
                },
            ],
            false,
        );
    }
    t.render(color)
}

/// The unit of an event's sampling period, as the sweep labels it:
/// [`proftrust_model::PeriodUnit::label`] (`ns` for the clocks, `cycles`, `instructions`,
/// else `NAME events`).
pub fn period_unit(event: &str) -> String {
    proftrust_model::PeriodUnit::label(event)
}

/// Renders the sweep table (metrics against period).
pub fn render_sweep_text(r: &AuditReport, color: bool) -> String {
    let period = format!("period ({})", period_unit(&r.config.event));
    let mut t = Table::new([
        period.as_str(),
        "randomised",
        "samples",
        "NRMSE_SR",
        "SC",
        "OD",
        "OD prose",
        "epsilon",
    ]);
    for p in &r.sweep {
        t.row(
            [
                p.period.to_string(),
                if p.randomized { "yes" } else { "no" }.to_string(),
                p.samples.to_string(),
                opt(p.nrmse_sr, 4),
                opt(p.sc, 4),
                opt(p.od, 3),
                opt(p.od_prose, 3),
                opt(p.epsilon_function, 4),
            ],
            false,
        );
    }
    t.render(color)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_align() {
        let mut t = Table::new(["name", "n"]);
        t.row(["main", "1234"], false);
        t.row(["a_longer_name", "5"], true);
        let s = t.render(false);
        // first column left, others right; trailing cell not padded
        let expected = "name              n\nmain           1234\na_longer_name     5\n";
        assert_eq!(s, expected);
        let c = t.render(true);
        assert!(c.starts_with("\x1b[1mname"));
        assert!(c.contains("\x1b[31ma_longer_name     5\x1b[0m"));
        let mut t = Table::new(["a", "text", "n"]).left_align(&[1]);
        t.row(["x", "ab", "10"], false);
        assert_eq!(t.render(false), "a  text   n\nx  ab    10\n");
        assert_eq!(signed_pct(-0.00001), "0.00%");
        assert_eq!(signed_pct(0.0125), "+1.25%");
    }

    /// Issue 31 item 14: a frequency-sampled recording's period is said as check says it,
    /// not "period unknown".
    #[test]
    fn the_sampling_rate_is_said_as_check_says_it() {
        let mut r = AuditReport::default();
        r.config.event = "cpu-clock".into();
        r.config.frequency_hz = Some(4000);
        let t = render_text(&r, false, 5);
        assert!(
            t.contains("(cpu-clock event, 4000 Hz (kernel-adjusted)) from"),
            "{t}"
        );
        r.config.frequency_hz = None;
        r.config.period = Some(250000);
        assert!(render_text(&r, false, 5).contains("period 250000"));
        r.config.period = None;
        assert!(render_text(&r, false, 5).contains("period unknown"));
    }
}
