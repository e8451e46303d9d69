//! Annotated source and disassembly of one function, the way `perf annotate` shows it, with
//! the sampled share of each source line and instruction next to the exact (and corrected)
//! share, the sampled share's 95% Wilson interval, and the audit's `!` where the exact share
//! lies outside that interval.
//!
//! The data model ([`Annotation`]) is filled by `proftrust-export` (which symbolizes and
//! disassembles); this module renders it as text ([`render_annotation_text`]) and as an
//! HTML section ([`annotation_html`], used by the audit report and by
//! [`render_annotation_html`]'s standalone page).

use crate::html::escape_html;
use crate::quote_name;
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;

/// The shares of one source line or instruction within its function.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Shares {
    /// Samples there.
    pub samples: u64,
    /// Share of the function's samples.
    pub sampled: f64,
    /// 95% Wilson interval of `sampled`.
    pub ci_low: f64,
    /// Upper end of the interval.
    pub ci_high: f64,
    /// Exact count there, when an exact profile was given.
    pub exact_count: Option<u64>,
    /// Share of the function's exact count.
    pub exact: Option<f64>,
    /// Share of the function's corrected estimate, when a corrected profile was given.
    pub corrected: Option<f64>,
    /// The exact share lies outside the sampled share's interval (the audit's `!`).
    pub outside_ci: bool,
}

/// One source line of an annotated function.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AnnotatedLine {
    /// Source file.
    pub file: String,
    /// Line number.
    pub line: u32,
    /// The line's text, when the file could be read.
    pub text: Option<String>,
    /// Shares summed over the line's instructions.
    pub shares: Shares,
}

/// One instruction of an annotated function.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AnnotatedInstruction {
    /// Address (SVMA).
    pub address: u64,
    /// Disassembly (AT&T syntax, as `objdump -d`).
    pub text: String,
    /// Index into [`Annotation::lines`] of the instruction's source line (innermost inline
    /// frame), when known.
    pub line: Option<usize>,
    /// Shares of the instruction.
    pub shares: Shares,
}

/// One annotated function.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Annotation {
    /// Function name.
    pub function: String,
    /// Module (file name).
    pub module: String,
    /// Entry address.
    pub start: u64,
    /// What the sampled side counts (`cpu-clock samples`).
    pub sampled_label: String,
    /// The function's samples.
    pub samples: u64,
    /// Its share of all samples of the profile.
    pub sampled_share: f64,
    /// The function's exact count (when given).
    pub exact_total: Option<u64>,
    /// The function's corrected estimate (when given).
    pub corrected_total: Option<f64>,
    /// Source lines in line order (per file).
    pub lines: Vec<AnnotatedLine>,
    /// Instructions in address order.
    pub instructions: Vec<AnnotatedInstruction>,
}

fn pct(x: f64) -> String {
    format!("{:.2}%", 100.0 * x)
}

fn opt_pct(x: Option<f64>) -> String {
    x.map(pct).unwrap_or_default()
}

fn has_exact(a: &Annotation) -> bool {
    a.exact_total.is_some()
}

fn has_corrected(a: &Annotation) -> bool {
    a.corrected_total.is_some()
}

fn text_cells(a: &Annotation, s: &Shares) -> String {
    let mut o = format!(
        "{:>7} {:>8} [{:>7} {:>7}]",
        s.samples,
        pct(s.sampled),
        pct(s.ci_low),
        pct(s.ci_high)
    );
    if has_exact(a) {
        let _ = write!(o, " {:>8}", opt_pct(s.exact));
    }
    if has_corrected(a) {
        let _ = write!(o, " {:>9}", opt_pct(s.corrected));
    }
    o.push_str(if s.outside_ci { " !" } else { "  " });
    o
}

fn header(a: &Annotation) -> String {
    let mut o = format!("{:>7} {:>8} [{:>15}]", "samples", "sampled", "95% interval");
    if has_exact(a) {
        let _ = write!(o, " {:>8}", "exact");
    }
    if has_corrected(a) {
        let _ = write!(o, " {:>9}", "corrected");
    }
    o.push_str("  ");
    o
}

fn title(a: &Annotation) -> String {
    let mut t = format!(
        "{} ({}, {:#x}): {} {} ({} of all)",
        a.function,
        a.module,
        a.start,
        a.samples,
        a.sampled_label,
        pct(a.sampled_share)
    );
    if let Some(e) = a.exact_total {
        let _ = write!(t, ", {e} exact");
    }
    if let Some(c) = a.corrected_total {
        let _ = write!(t, ", {c:.0} corrected");
    }
    t
}

/// Renders annotated functions as text: per function a table by source line, then the
/// disassembly in address order under the source line each instruction belongs to.
pub fn render_annotation_text(annotations: &[Annotation]) -> String {
    let mut o = String::new();
    for a in annotations {
        let _ = writeln!(o, "== {}", quote_name(&title(a)));
        let _ = writeln!(
            o,
            "Shares are of the function's own samples / exact count; ! = the exact share lies outside the 95% interval of the sampled share."
        );
        if !a.lines.is_empty() {
            let _ = writeln!(o, "\n{}| line  source", header(a));
            let mut file = "";
            for l in &a.lines {
                if l.file != file {
                    file = &l.file;
                    let _ = writeln!(o, "{:w$}| {}", "", quote_name(&l.file), w = header(a).len());
                }
                let _ = writeln!(
                    o,
                    "{}| {:>5}  {}",
                    text_cells(a, &l.shares),
                    l.line,
                    source_text(l.text.as_deref().unwrap_or("").trim_end())
                );
            }
        }
        let _ = writeln!(o, "\n{}| address  instruction", header(a));
        let mut last: Option<usize> = None;
        for i in &a.instructions {
            if i.line != last {
                if let Some(l) = i.line.and_then(|k| a.lines.get(k)) {
                    let _ = writeln!(
                        o,
                        "{:w$}| {}:{}  {}",
                        "",
                        quote_name(short_file(&l.file)),
                        l.line,
                        source_text(l.text.as_deref().unwrap_or("").trim()),
                        w = header(a).len()
                    );
                }
                last = i.line;
            }
            let _ = writeln!(
                o,
                "{}| {:>8x}:  {}",
                text_cells(a, &i.shares),
                i.address,
                quote_name(&i.text)
            );
        }
        o.push('\n');
    }
    o
}

/// A source line as text output shows it: tabs expanded to the next multiple of 8 columns
/// (as a terminal shows them), then [`quote_name`] (a source file is input like any other).
fn source_text(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    let mut col = 0;
    for c in s.chars() {
        if c == '\t' {
            let n = 8 - col % 8;
            o.extend(std::iter::repeat_n(' ', n));
            col += n;
        } else {
            o.push(c);
            col += 1;
        }
    }
    quote_name(&o).into_owned()
}

fn short_file(f: &str) -> &str {
    f.rsplit('/').next().unwrap_or(f)
}

fn bar(share: f64, class: &str) -> String {
    let w = (share.clamp(0.0, 1.0) * 100.0).max(0.0);
    format!("<span class=\"bar {class}\" style=\"width:{w:.1}px\"></span>")
}

fn html_cells(a: &Annotation, s: &Shares) -> String {
    let mut o = format!(
        "<td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n ci\">{}–{}</td>",
        s.samples,
        pct(s.sampled),
        pct(s.ci_low),
        pct(s.ci_high)
    );
    if has_exact(a) {
        let _ = write!(o, "<td class=\"n\">{}</td>", opt_pct(s.exact));
    }
    if has_corrected(a) {
        let _ = write!(o, "<td class=\"n\">{}</td>", opt_pct(s.corrected));
    }
    let mut bars = bar(s.sampled, "s");
    if let Some(e) = s.exact {
        bars.push_str(&bar(e, "e"));
    }
    if let Some(c) = s.corrected {
        bars.push_str(&bar(c, "c"));
    }
    let _ = write!(
        o,
        "<td class=\"bars\">{bars}</td><td class=\"mark\">{}</td>",
        if s.outside_ci { "!" } else { "" }
    );
    o
}

fn html_header(a: &Annotation, what: &str) -> String {
    let mut o = String::from("<tr><th>samples</th><th>sampled</th><th>95% interval</th>");
    if has_exact(a) {
        o.push_str("<th>exact</th>");
    }
    if has_corrected(a) {
        o.push_str("<th>corrected</th>");
    }
    let _ = write!(o, "<th></th><th></th><th>{what}</th></tr>");
    o
}

/// CSS the annotation sections need (the audit page and the standalone page include it).
/// The sampled and exact bars have the per-instruction chart's colours (`svg::SAMPLED`
/// blue, `svg::EXACT` orange; issue 31 item 14: they were swapped).
pub const ANNOTATION_CSS: &str =
    "table.annot td{padding:0 6px;border:none;white-space:pre}table.annot th{text-align:left}\
table.annot tr.src td{background:#f4f4f4}table.annot tr.out td{color:#b00}\
table.annot td.ci{color:#777}table.annot td.mark{color:#b00;font-weight:bold}\
span.bar{display:inline-block;height:4px;margin:0 1px 0 0;vertical-align:middle}\
span.bar.s{background:#3b6fb6}span.bar.e{background:#e07b00}span.bar.c{background:#2a6}";

/// One HTML section per annotated function: the per-line table and the disassembly
/// (`id="annotate-N"` for the N-th function). Every name and source text is escaped.
pub fn annotation_html(annotations: &[Annotation]) -> String {
    let mut h = String::new();
    for (n, a) in annotations.iter().enumerate() {
        let _ = writeln!(
            h,
            "<section class=\"annotation\" id=\"annotate-{n}\"><h3 class=\"mono\">{}</h3>",
            escape_html(&title(a))
        );
        h.push_str("<p>Bars: <span class=\"bar s\" style=\"width:20px\"></span> sampled");
        if has_exact(a) {
            h.push_str(", <span class=\"bar e\" style=\"width:20px\"></span> exact");
        }
        if has_corrected(a) {
            h.push_str(", <span class=\"bar c\" style=\"width:20px\"></span> corrected");
        }
        h.push_str(" (share of the function). <b>!</b> = the exact share lies outside the 95% interval of the sampled share.</p>\n");
        if !a.lines.is_empty() {
            let _ = writeln!(
                h,
                "<table class=\"annot mono\">{}",
                html_header(a, "line / source")
            );
            for l in &a.lines {
                let _ = writeln!(
                    h,
                    "<tr{}>{}<td>{}:{}  {}</td></tr>",
                    if l.shares.outside_ci {
                        " class=\"out\""
                    } else {
                        ""
                    },
                    html_cells(a, &l.shares),
                    escape_html(short_file(&l.file)),
                    l.line,
                    escape_html(l.text.as_deref().unwrap_or("").trim_end())
                );
            }
            h.push_str("</table>\n");
        }
        let _ = writeln!(
            h,
            "<details><summary>Disassembly ({} instructions)</summary><table class=\"annot mono\">{}",
            a.instructions.len(),
            html_header(a, "address / instruction")
        );
        let cols = 6 + has_exact(a) as usize + has_corrected(a) as usize;
        let mut last: Option<usize> = None;
        for i in &a.instructions {
            if i.line != last {
                if let Some(l) = i.line.and_then(|k| a.lines.get(k)) {
                    let _ = writeln!(
                        h,
                        "<tr class=\"src\"><td colspan=\"{}\"></td><td>{}:{}  {}</td></tr>",
                        cols - 1,
                        escape_html(short_file(&l.file)),
                        l.line,
                        escape_html(l.text.as_deref().unwrap_or("").trim())
                    );
                }
                last = i.line;
            }
            let _ = writeln!(
                h,
                "<tr{}>{}<td>{:>8x}:  {}</td></tr>",
                if i.shares.outside_ci {
                    " class=\"out\""
                } else {
                    ""
                },
                html_cells(a, &i.shares),
                i.address,
                escape_html(&i.text)
            );
        }
        h.push_str("</table></details></section>\n");
    }
    h
}

/// A self-contained HTML page of annotated functions (`proftrust export --to
/// annotate-html`): no script, no external resource.
pub fn render_annotation_html(title: &str, annotations: &[Annotation]) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\">\n<title>{t}</title>\n<style>body{{font-family:system-ui,sans-serif;margin:2em;color:#222}}.mono{{font-family:monospace}}td.n{{text-align:right}}{css}</style></head><body>\n<h1>{t}</h1>\n{body}</body></html>\n",
        t = escape_html(title),
        css = ANNOTATION_CSS,
        body = annotation_html(annotations)
    )
}

#[cfg(test)]
mod tests {
    /// The annotated source's bars and the per-instruction chart give sampled and exact
    /// the same colours.
    #[test]
    fn bars_have_the_charts_colours() {
        let css = super::ANNOTATION_CSS;
        assert!(
            css.contains(&format!("span.bar.s{{background:{}}}", crate::svg::SAMPLED)),
            "{css}"
        );
        assert!(
            css.contains(&format!("span.bar.e{{background:{}}}", crate::svg::EXACT)),
            "{css}"
        );
    }

    use super::*;

    fn sample() -> Annotation {
        let s = |samples, sampled, exact, outside| Shares {
            samples,
            sampled,
            ci_low: sampled * 0.8,
            ci_high: (sampled * 1.2).min(1.0),
            exact_count: Some(10),
            exact: Some(exact),
            corrected: None,
            outside_ci: outside,
        };
        Annotation {
            function: "f<int>".into(),
            module: "prog".into(),
            start: 0x1130,
            sampled_label: "cpu-clock samples".into(),
            samples: 10,
            sampled_share: 0.5,
            exact_total: Some(100),
            corrected_total: None,
            lines: vec![
                AnnotatedLine {
                    file: "/src/a.c".into(),
                    line: 3,
                    text: Some("  for (i = 0; i < n; i++) x <<= 1;".into()),
                    shares: s(8, 0.8, 0.4, true),
                },
                AnnotatedLine {
                    file: "/src/a.c".into(),
                    line: 4,
                    text: None,
                    shares: s(2, 0.2, 0.6, true),
                },
            ],
            instructions: vec![
                AnnotatedInstruction {
                    address: 0x1130,
                    text: "add $0x1,%eax".into(),
                    line: Some(0),
                    shares: s(8, 0.8, 0.4, true),
                },
                AnnotatedInstruction {
                    address: 0x1133,
                    text: "ret".into(),
                    line: Some(1),
                    shares: s(2, 0.2, 0.6, true),
                },
            ],
        }
    }

    #[test]
    fn text_marks_lines_outside_the_interval() {
        let t = render_annotation_text(&[sample()]);
        let row = t
            .lines()
            .find(|l| l.contains("x <<= 1") && l.contains("|     3"))
            .unwrap();
        assert!(
            row.contains("80.00%") && row.contains("40.00%") && row.contains(" !"),
            "{t}"
        );
        assert!(t.contains("1130:  add $0x1,%eax"), "{t}");
        assert!(t.contains("a.c:3  for (i = 0; i < n; i++) x <<= 1;"), "{t}");
    }

    #[test]
    fn html_escapes_and_has_sections() {
        let h = render_annotation_html("annotate <x>", &[sample()]);
        assert!(h.contains("id=\"annotate-0\""));
        assert!(h.contains("f&lt;int&gt;") && !h.contains("f<int>"));
        assert!(h.contains("x &lt;&lt;= 1"));
        assert!(h.contains("<td class=\"mark\">!</td>"));
        assert!(!h.contains("<script"));
    }
}
