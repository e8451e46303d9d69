//! Self-contained HTML report.

use crate::model::AuditReport;
use crate::svg;
use std::fmt::Write as _;

/// Escapes `&`, `<`, `>`, `"` and `'` for HTML text and attribute values (and XML
/// character data); control characters (which HTML and XML forbid) are shown as
/// [`quote_name`](crate::quote_name) shows them (`\x1b`, `\n`). The one escaper of every
/// page and SVG: `proftrust_model::escape_markup`.
pub use proftrust_model::escape_markup as escape_html;

fn opt(x: Option<f64>) -> String {
    x.map(|v| format!("{v:.4}")).unwrap_or_else(|| "n/a".into())
}

fn pct(x: f64) -> String {
    format!("{:.2}%", 100.0 * x)
}

/// What the audit page shows beyond the report itself (built by `proftrust-export`).
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct HtmlExtras {
    /// Flame graphs: sampled and exact side by side, differential.
    pub flamegraphs: Option<crate::flame::FlameGraphs>,
    /// Annotated source and disassembly of the hottest functions.
    pub annotations: Vec<crate::annotate::Annotation>,
}

/// Renders one self-contained HTML page: no scripts, no external resources (styles inline,
/// plots as inline SVG), every name from the profile escaped with [`escape_html`].
pub fn render_html(r: &AuditReport) -> String {
    render_html_with(r, &HtmlExtras::default())
}

/// [`render_html`] with flame graphs and annotated source ([`HtmlExtras`]) after the
/// per-instruction picture.
pub fn render_html_with(r: &AuditReport, extras: &HtmlExtras) -> String {
    let mut h = String::new();
    let title = format!("proftrust audit: {}", r.config.binary);
    page_head(&mut h, &title);
    let _ = writeln!(h, "<h1>{}</h1>", escape_html(&title));
    config_html(&mut h, r);
    processes_html(&mut h, r);
    metrics_html(&mut h, r);
    functions_html(&mut h, r);
    if let Some(p) = &r.hottest {
        let _ = writeln!(
            h,
            "<h2>Per instruction: <span class=\"mono\">{}</span></h2>\n<p>As in paper 001 (Wu &amp; Mencer) Fig. 1: each instruction address of the hottest function, its share of the function's samples next to its share of the function's exact executions.</p>",
            escape_html(&p.function)
        );
        h.push_str(&svg::instruction_picture(p));
    }
    if let Some(f) = &extras.flamegraphs {
        h.push_str(&crate::flame::flame_html(f));
    }
    if !extras.annotations.is_empty() {
        h.push_str("<h2 id=\"annotated\">Annotated source and disassembly</h2>\n");
        h.push_str(&crate::annotate::annotation_html(&extras.annotations));
    }
    sweep_html(&mut h, r);
    h.push_str("</body></html>\n");
    h
}

/// The document up to `<body>`: the content security policy (no scripts, nothing
/// fetched) and the inline styles.
fn page_head(h: &mut String, title: &str) {
    let _ = write!(
        h,
        r#"<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; img-src data:">
<title>{}</title>
<style>
body{{font-family:system-ui,sans-serif;margin:2em;color:#222;max-width:1100px}}
table{{border-collapse:collapse;margin:1em 0}}td,th{{padding:2px 10px;border-bottom:1px solid #ddd}}
td.n{{text-align:right;font-variant-numeric:tabular-nums}}tr.out td{{color:#b00}}
code,.mono{{font-family:monospace}}.warn{{color:#a60}}svg.plot{{display:block;margin:1em 0}}
{}
</style></head><body>
"#,
        escape_html(title),
        crate::annotate::ANNOTATION_CSS,
    );
}

/// "What was compared": the configuration table, then the interruption and warnings.
fn config_html(h: &mut String, r: &AuditReport) {
    let _ = writeln!(h, "<h2>What was compared</h2><table>");
    for (k, v) in config_rows(r) {
        let _ = writeln!(
            h,
            "<tr><th>{}</th><td class=\"mono\">{}</td></tr>",
            escape_html(k),
            escape_html(&v)
        );
    }
    h.push_str("</table>\n");
    if let Some(i) = &r.config.interrupted {
        let _ = writeln!(
            h,
            "<p class=\"warn\"><strong>Interrupted:</strong> {}</p>",
            escape_html(i)
        );
    }
    for w in &r.warnings {
        let _ = writeln!(
            h,
            "<p class=\"warn\">warning: {}</p>",
            escape_html(&w.message)
        );
    }
}

/// The rows of the configuration table: name and value (not yet escaped).
fn config_rows(r: &AuditReport) -> Vec<(&'static str, String)> {
    let (c, m) = (&r.config, &r.metrics);
    let period = match (c.period, c.frequency_hz) {
        (Some(p), _) => p.to_string(),
        (None, Some(hz)) => format!("{hz} Hz (kernel-adjusted)"),
        (None, None) => "unknown".into(),
    };
    let randomised = if c.randomized { " (randomised)" } else { "" };
    let mut rows: Vec<(&str, String)> = vec![
        ("binary", c.binary.clone()),
        (
            "build-id",
            c.build_id.clone().unwrap_or_else(|| "unknown".into()),
        ),
        ("command", c.command.join(" ")),
        (
            "samples",
            format!("{} from {}", m.samples, c.samples_source),
        ),
        ("event", format!("{} period {period}{randomised}", c.event)),
        (
            "truth",
            format!(
                "{} instructions, {} from {}",
                m.instructions, c.truth_backend, c.truth_source
            ),
        ),
        ("truth weight", c.truth_weight.clone()),
        ("seed", c.seed.to_string()),
        ("proftrust", c.proftrust_version.clone()),
    ];
    if let Some(f) = &c.truth_weight_formula {
        rows.push(("weight formula", f.clone()));
    }
    if let Some(why) = &c.binary_reason {
        rows.insert(1, ("binary chosen", why.clone()));
    }
    for (k, v) in &c.tool_versions {
        rows.push(("tool", format!("{k}: {v}")));
    }
    rows
}

/// The metric table ([`crate::metric_table`]), with the corrected column after
/// `--correct-skid` and the reason beside a metric on too few samples.
fn metrics_html(h: &mut String, r: &AuditReport) {
    match &r.corrected {
        Some(c) => {
            let _ = writeln!(
                h,
                "<h2>Metrics</h2><p>Corrected: the samples after undoing a skid of {} cycles ({} solver, paper 000), compared with the same truth.</p><table><tr><th>metric</th><th>value</th><th>corrected</th></tr>",
                c.skid,
                escape_html(&c.method)
            );
        }
        None => h.push_str("<h2>Metrics</h2><table><tr><th>metric</th><th>value</th></tr>\n"),
    }
    for row in crate::metric_table::metric_rows(r) {
        let corrected = row
            .corrected
            .map(|c| format!("<td class=\"n\">{}</td>", opt(c)))
            .unwrap_or_default();
        let note = row
            .too_few
            .map(|why| {
                format!(
                    "<td class=\"warn\">too few to judge: {}</td>",
                    escape_html(why)
                )
            })
            .unwrap_or_default();
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td class=\"n\">{}</td>{corrected}{note}</tr>",
            escape_html(row.def.label),
            opt(row.value),
        );
    }
    h.push_str("</table>\n");
}

/// The functions shown: the shares plot and table of the first 50 visible functions
/// (with the corrected share after `--correct-skid`), and how many the JSON has beyond.
fn functions_html(h: &mut String, r: &AuditReport) {
    h.push_str("<h2>Sampled against exact share per function</h2>\n");
    let visible: Vec<crate::model::FunctionRow> = r
        .functions
        .iter()
        .filter(|f| f.is_visible())
        .cloned()
        .collect();
    h.push_str(&svg::function_shares(&visible, 25));
    let _ = writeln!(
        h,
        "<table><tr><th>function</th><th>samples</th><th>sampled</th><th>95% CI</th><th>exact instructions</th><th>exact share</th><th>diff</th>{}</tr>",
        if r.corrected.is_some() {
            "<th>corrected</th><th>diff</th>"
        } else {
            ""
        }
    );
    for f in visible.iter().take(50) {
        function_row_html(h, r, f);
    }
    h.push_str("</table>\n");
    let hidden = r.functions.len() - visible.len().min(50);
    if hidden > 0 {
        let _ = writeln!(
            h,
            "<p>{hidden} more functions without samples and under 0.01% of the exact weight (or beyond the first 50) are in the JSON report.</p>"
        );
    }
}

/// One row of the functions table; a function marked as bias in red with `!`.
fn function_row_html(h: &mut String, r: &AuditReport, f: &crate::model::FunctionRow) {
    let corrected = r
        .corrected
        .as_ref()
        .map(|c| {
            let cs = c
                .functions
                .iter()
                .find(|x| x.name == f.name)
                .map_or(0.0, |x| x.corrected_share);
            format!(
                "<td class=\"n\">{}</td><td class=\"n\">{}</td>",
                pct(cs),
                crate::text::signed_pct(cs - f.exact_share)
            )
        })
        .unwrap_or_default();
    let _ = writeln!(
        h,
        "<tr{}><td class=\"mono\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{} – {}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}{}</td>{corrected}</tr>",
        if f.bias { " class=\"out\"" } else { "" },
        escape_html(&f.name),
        f.samples,
        pct(f.sampled_share),
        pct(f.ci_low),
        pct(f.ci_high),
        f.exact_instructions,
        pct(f.exact_share),
        crate::text::signed_pct(f.difference),
        if f.bias { " !" } else { "" }
    );
}

/// The period sweep (`--sweep`): two plots and the table; nothing without a sweep.
fn sweep_html(h: &mut String, r: &AuditReport) {
    if r.sweep.is_empty() {
        return;
    }
    h.push_str("<h2>Metrics against the sampling period</h2>\n<p>Solid: fixed period; dashed: randomised period (paper 001 §4).</p>\n");
    let unit = crate::text::period_unit(&r.config.event);
    h.push_str(&svg::sweep_plot(&r.sweep, false, &unit));
    h.push_str(&svg::sweep_plot(&r.sweep, true, &unit));
    h.push_str("<table><tr><th>period</th><th>randomised</th><th>samples</th><th>NRMSE_SR</th><th>SC</th><th>OD</th><th>OD prose</th><th>ε</th></tr>\n");
    for p in &r.sweep {
        let _ = writeln!(
            h,
            "<tr><td class=\"n\">{}</td><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td></tr>",
            svg::human_period(p.period),
            if p.randomized { "yes" } else { "no" },
            p.samples,
            opt(p.nrmse_sr),
            opt(p.sc),
            opt(p.od),
            opt(p.od_prose),
            opt(p.epsilon_function)
        );
    }
    h.push_str("</table>\n");
}

/// The processes table (see [`crate::render_processes_text`]).
fn processes_html(h: &mut String, r: &AuditReport) {
    if r.processes.is_empty() {
        return;
    }
    h.push_str("<h2>Processes</h2>\n<p>Process images by name on both sides: the comparison covers the same processes on both (docs/processes.md).</p><table><tr><th>process</th><th>start</th><th>sampled</th><th>exact</th><th>samples</th><th>share</th><th>instructions</th><th>share</th><th>compared</th></tr>\n");
    for p in &r.processes {
        let _ = writeln!(
            h,
            "<tr><td class=\"mono\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.2}%</td><td>{}</td><td>{:.2}%</td><td>{}</td></tr>",
            escape_html(&p.name),
            escape_html(&p.start),
            p.sampled_images,
            p.exact_images,
            p.samples,
            100.0 * p.sampled_share,
            p.exact_instructions,
            100.0 * p.exact_share,
            match &p.left_out {
                None => "yes".to_string(),
                Some(why) => format!("no: {}", escape_html(why)),
            }
        );
    }
    h.push_str("</table>\n");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::*;

    fn sample_report() -> AuditReport {
        AuditReport {
            config: AuditConfig {
                binary: "/tmp/<evil>&\"bin\"".into(),
                seed: 42,
                ..Default::default()
            },
            metrics: Metrics {
                epsilon_function: Some(0.125),
                ..Default::default()
            },
            attribution: Vec::new(),
            functions: vec![FunctionRow {
                name: "operator<<(std::ostream&, <script>alert(1)</script>)".into(),
                samples: 3,
                sampled_share: 0.75,
                ci_low: 0.3,
                ci_high: 0.95,
                exact_instructions: 10,
                exact_weight: 10,
                exact_share: 0.5,
                difference: 0.25,
                outside_ci: false,
                bias: false,
            }],
            hottest: Some(InstructionPicture {
                function: "f<int>".into(),
                rows: vec![InstructionRow {
                    address: 0x1130,
                    samples: 1,
                    sampled_share: 1.0,
                    exact: 5,
                    exact_share: 1.0,
                    text: None,
                }],
            }),
            sweep: vec![
                SweepPoint {
                    period: 65536,
                    randomized: false,
                    samples: 10,
                    nrmse_sr: Some(0.1),
                    sc: Some(0.5),
                    od: Some(1.0),
                    od_prose: Some(2.0),
                    epsilon_function: Some(0.2),
                },
                SweepPoint {
                    period: 131072,
                    randomized: true,
                    samples: 5,
                    nrmse_sr: Some(0.2),
                    sc: Some(0.4),
                    od: Some(2.0),
                    od_prose: Some(4.0),
                    epsilon_function: Some(0.3),
                },
            ],
            warnings: vec![crate::Warning::new(
                crate::WarningKind::Other,
                "a <warning>",
            )],
            corrected: Some(CorrectedSide {
                skid: 30.0,
                method: "<flow>".into(),
                metrics: Metrics {
                    epsilon_function: Some(0.0625),
                    ..Default::default()
                },
                functions: vec![CorrectedFunction {
                    name: "operator<<(std::ostream&, <script>alert(1)</script>)".into(),
                    corrected_instructions: 8.0,
                    corrected_share: 0.6,
                }],
            }),
            processes: vec![ProcessRow {
                name: "<sh>".into(),
                start: "forked, then exec".into(),
                sampled_images: 3,
                exact_images: 3,
                samples: 0,
                sampled_share: 0.0,
                exact_instructions: 15681,
                exact_share: 0.0,
                sampled_pids: vec![1, 2, 3],
                exact_pids: vec![4, 5, 6],
                left_out: Some("a <reason>".into()),
            }],
        }
    }

    /// The processes table: one row per group, names and reasons escaped.
    #[test]
    fn processes_rows_are_shown_escaped() {
        let h = render_html(&sample_report());
        assert!(h.contains("<h2>Processes</h2>"), "{h}");
        assert!(h.contains("&lt;sh&gt;") && !h.contains("<sh>"), "{h}");
        assert!(h.contains("no: a &lt;reason&gt;"), "{h}");
        assert!(h.contains("15681"), "{h}");
    }

    #[test]
    fn corrected_side_is_shown_beside_the_raw_one() {
        let r = sample_report();
        let h = render_html(&r);
        assert!(h.contains("<th>corrected</th>"));
        assert!(h.contains("&lt;flow&gt;") && !h.contains("<flow>"));
        // raw 0.1250 and corrected 0.0625 epsilon in one row; the function's corrected
        // share 60.00% and its difference from the exact share (see the row above).
        assert!(h.contains("0.1250</td><td class=\"n\">0.0625"), "{h}");
        let exact = r.functions[0].exact_share;
        assert!(h.contains(&format!(
            "60.00%</td><td class=\"n\">{}",
            crate::text::signed_pct(0.6 - exact)
        )));
        let t = crate::render_text(&r, false, 10);
        let row = t
            .lines()
            .find(|l| l.starts_with("epsilon (function)"))
            .unwrap();
        let cells: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(&cells[2..4], ["0.1250", "0.0625"]);
        assert!(t.contains("60.00%"));
    }

    #[test]
    fn escapes_every_name_and_has_plots() {
        let h = render_html(&sample_report());
        assert!(!h.contains("<script"), "unescaped name leaked");
        assert!(!h.contains("<evil>"));
        assert!(h.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
        assert!(h.contains("f&lt;int&gt;"));
        assert!(h.contains("a &lt;warning&gt;"));
        for id in [
            "plot-functions",
            "plot-instructions",
            "plot-sweep",
            "plot-sweep-od",
        ] {
            assert!(h.contains(&format!("id=\"{id}\"")), "missing {id}");
        }
        // no network: nothing refers to http(s) except the SVG namespace
        let without_ns = h.replace("http://www.w3.org/2000/svg", "");
        assert!(!without_ns.contains("http://") && !without_ns.contains("https://"));
    }

    #[test]
    fn escape_html_all_specials() {
        assert_eq!(
            escape_html(r#"<a href="x">&'"#),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
    }

    #[test]
    fn json_has_contract_fields() {
        let mut v = Vec::new();
        crate::write_json(&mut v, &sample_report()).unwrap();
        let j: serde_json::Value = serde_json::from_slice(&v).unwrap();
        assert_eq!(j["config"]["seed"], 42);
        for k in [
            "nrmse_sr",
            "sc",
            "od",
            "epsilon_function",
            "epsilon_inline",
            "epsilon_block",
            "epsilon_instruction",
            "kendall_tau",
            "top10_overlap",
            "coverage",
        ] {
            assert!(j["metrics"].get(k).is_some(), "metrics.{k} missing");
        }
        for k in [
            "name",
            "samples",
            "sampled_share",
            "ci_low",
            "ci_high",
            "exact_instructions",
            "exact_share",
        ] {
            assert!(
                j["functions"][0].get(k).is_some(),
                "functions[].{k} missing"
            );
        }
    }
}
