//! Inline SVG plots (no script, no external resources).

use crate::html::escape_html;
use crate::model::{FunctionRow, InstructionPicture, SweepPoint};
use std::fmt::Write as _;

const SAMPLED: &str = "#3b6fb6";
const EXACT: &str = "#e07b00";
const SERIES: [&str; 4] = ["#3b6fb6", "#e07b00", "#2a9d5b", "#b23a48"];

fn fmt_pct(x: f64) -> String {
    format!("{:.1}%", 100.0 * x)
}

/// Shortens a name to `max` characters (with an ellipsis); the result is *not* escaped.
fn shorten(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(max.saturating_sub(1)).collect();
        t.push('…');
        t
    }
}

/// Sampled share (bar) with its 95% Wilson interval (whisker) against the exact share
/// (diamond), one row per function.
pub(crate) fn function_shares(functions: &[FunctionRow], max_rows: usize) -> String {
    let rows: Vec<&FunctionRow> = functions.iter().take(max_rows).collect();
    let (label_w, plot_w, row_h, top, bottom) = (260.0, 520.0, 24.0, 30.0, 36.0);
    let width = label_w + plot_w + 30.0;
    let height = top + bottom + row_h * rows.len().max(1) as f64;
    let xmax = rows
        .iter()
        .map(|f| f.ci_high.max(f.exact_share).max(f.sampled_share))
        .fold(0.0f64, f64::max)
        .max(1e-9);
    let x = |v: f64| label_w + plot_w * (v / xmax).clamp(0.0, 1.0);
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg class="plot" id="plot-functions" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" aria-label="sampled versus exact share per function">"#
    );
    let _ = write!(
        s,
        r#"<text x="{label_w}" y="16" font-size="12"><tspan fill="{SAMPLED}">■ sampled share ± 95% Wilson interval</tspan>  <tspan fill="{EXACT}">◆ exact share</tspan></text>"#
    );
    for (i, f) in rows.iter().enumerate() {
        let y = top + row_h * i as f64;
        let cy = y + row_h / 2.0;
        let name = escape_html(&f.name);
        let short = escape_html(&shorten(&f.name, 38));
        let _ = write!(
            s,
            r#"<g><title>{name}: sampled {} [{}, {}], exact {}</title><text x="{}" y="{}" font-size="12" text-anchor="end" font-family="monospace">{short}</text>"#,
            fmt_pct(f.sampled_share),
            fmt_pct(f.ci_low),
            fmt_pct(f.ci_high),
            fmt_pct(f.exact_share),
            label_w - 8.0,
            cy + 4.0
        );
        let _ = write!(
            s,
            r#"<rect x="{label_w}" y="{}" width="{:.2}" height="{}" fill="{SAMPLED}" fill-opacity="0.55"/>"#,
            y + 5.0,
            x(f.sampled_share) - label_w,
            row_h - 10.0
        );
        let (lo, hi) = (x(f.ci_low), x(f.ci_high));
        let _ = write!(
            s,
            r#"<line x1="{lo:.2}" x2="{hi:.2}" y1="{cy}" y2="{cy}" stroke="{SAMPLED}" stroke-width="2"/><line x1="{lo:.2}" x2="{lo:.2}" y1="{}" y2="{}" stroke="{SAMPLED}" stroke-width="2"/><line x1="{hi:.2}" x2="{hi:.2}" y1="{}" y2="{}" stroke="{SAMPLED}" stroke-width="2"/>"#,
            cy - 5.0,
            cy + 5.0,
            cy - 5.0,
            cy + 5.0
        );
        let ex = x(f.exact_share);
        let _ = write!(
            s,
            r#"<path d="M {ex:.2} {} L {:.2} {cy} L {ex:.2} {} L {:.2} {cy} Z" fill="{EXACT}"/></g>"#,
            cy - 6.0,
            ex + 6.0,
            cy + 6.0,
            ex - 6.0
        );
    }
    let axis_y = top + row_h * rows.len().max(1) as f64 + 4.0;
    let _ = write!(
        s,
        r##"<line x1="{label_w}" x2="{}" y1="{axis_y}" y2="{axis_y}" stroke="#444"/>"##,
        label_w + plot_w
    );
    for k in 0..=4 {
        let v = xmax * k as f64 / 4.0;
        let _ = write!(
            s,
            r#"<text x="{:.2}" y="{}" font-size="11" text-anchor="middle">{}</text>"#,
            x(v),
            axis_y + 16.0,
            fmt_pct(v)
        );
    }
    s.push_str("</svg>");
    s
}

/// Per-instruction picture of one function (seed 001 Fig. 1): for each instruction address,
/// its share of the function's samples next to its share of the function's exact count.
pub(crate) fn instruction_picture(p: &InstructionPicture) -> String {
    let n = p.rows.len().max(1);
    let (left, top, bottom, plot_h) = (56.0, 30.0, 70.0, 220.0);
    let bar_w = (900.0 / n as f64).clamp(2.0, 40.0);
    let plot_w = (bar_w * n as f64).max(620.0);
    let bar_w = plot_w / n as f64;
    let width = left + plot_w + 20.0;
    let height = top + plot_h + bottom;
    let ymax = p
        .rows
        .iter()
        .map(|r| r.sampled_share.max(r.exact_share))
        .fold(0.0f64, f64::max)
        .max(1e-9);
    let y = |v: f64| top + plot_h * (1.0 - (v / ymax).clamp(0.0, 1.0));
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg class="plot" id="plot-instructions" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" aria-label="per-instruction sampled versus exact share">"#
    );
    let _ = write!(
        s,
        r#"<text x="{left}" y="16" font-size="12"><tspan fill="{SAMPLED}">■ sampled share</tspan>  <tspan fill="{EXACT}">■ exact share</tspan> (of the function, per instruction address)</text>"#
    );
    for (i, r) in p.rows.iter().enumerate() {
        let x0 = left + bar_w * i as f64;
        let half = (bar_w / 2.0 - 0.3).max(0.7);
        let _ = write!(
            s,
            r#"<g><title>{:#x}: {} samples ({}), {} executions ({})</title><rect x="{x0:.2}" y="{:.2}" width="{half:.2}" height="{:.2}" fill="{SAMPLED}"/><rect x="{:.2}" y="{:.2}" width="{half:.2}" height="{:.2}" fill="{EXACT}"/></g>"#,
            r.address,
            r.samples,
            fmt_pct(r.sampled_share),
            r.exact,
            fmt_pct(r.exact_share),
            y(r.sampled_share),
            top + plot_h - y(r.sampled_share),
            x0 + bar_w / 2.0,
            y(r.exact_share),
            top + plot_h - y(r.exact_share)
        );
    }
    let base = top + plot_h;
    let _ = write!(
        s,
        r##"<line x1="{left}" x2="{}" y1="{base}" y2="{base}" stroke="#444"/><line x1="{left}" x2="{left}" y1="{top}" y2="{base}" stroke="#444"/>"##,
        left + plot_w
    );
    for k in 0..=4 {
        let v = ymax * k as f64 / 4.0;
        let _ = write!(
            s,
            r#"<text x="{}" y="{:.2}" font-size="11" text-anchor="end">{}</text>"#,
            left - 4.0,
            y(v) + 4.0,
            fmt_pct(v)
        );
    }
    let step = (n / 8).max(1);
    for (i, r) in p.rows.iter().enumerate().step_by(step) {
        let xc = left + bar_w * i as f64 + bar_w / 2.0;
        let _ = write!(
            s,
            r#"<text x="{xc:.2}" y="{}" font-size="10" font-family="monospace" transform="rotate(45 {xc:.2} {})">{:#x}</text>"#,
            base + 14.0,
            base + 14.0,
            r.address
        );
    }
    s.push_str("</svg>");
    s
}

/// Metrics against the sampling period (seed 001 Figs. 2-4): one polyline per metric and
/// randomisation setting; `od` selects the order-deviation plot (its own scale) instead of
/// the share-valued metrics (NRMSE_SR, SC, ε).
pub(crate) fn sweep_plot(points: &[SweepPoint], od: bool, unit: &str) -> String {
    let mut periods: Vec<u64> = points.iter().map(|p| p.period).collect();
    periods.sort_unstable();
    periods.dedup();
    let (left, top, plot_w, plot_h, bottom) = (60.0, 34.0, 560.0, 220.0, 50.0);
    let width = left + plot_w + 190.0;
    let height = top + plot_h + bottom;
    type Getter = fn(&SweepPoint) -> Option<f64>;
    let metrics: Vec<(&str, Getter)> = if od {
        vec![("OD", |p| p.od)]
    } else {
        vec![
            ("NRMSE_SR", |p| p.nrmse_sr),
            ("SC", |p| p.sc),
            ("epsilon", |p| p.epsilon_function),
        ]
    };
    let ymax = if od {
        points
            .iter()
            .filter_map(|p| p.od)
            .fold(0.0f64, f64::max)
            .max(1e-9)
            * 1.1
    } else {
        1.0
    };
    let xi = |period: u64| -> f64 {
        let i = periods.iter().position(|&q| q == period).unwrap_or(0);
        if periods.len() <= 1 {
            left + plot_w / 2.0
        } else {
            left + plot_w * i as f64 / (periods.len() - 1) as f64
        }
    };
    let y = |v: f64| top + plot_h * (1.0 - (v / ymax).clamp(0.0, 1.0));
    let id = if od { "plot-sweep-od" } else { "plot-sweep" };
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg class="plot" id="{id}" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" aria-label="metrics against sampling period">"#
    );
    let base = top + plot_h;
    let _ = write!(
        s,
        r##"<line x1="{left}" x2="{}" y1="{base}" y2="{base}" stroke="#444"/><line x1="{left}" x2="{left}" y1="{top}" y2="{base}" stroke="#444"/>"##,
        left + plot_w
    );
    for k in 0..=4 {
        let v = ymax * k as f64 / 4.0;
        let _ = write!(
            s,
            r#"<text x="{}" y="{:.2}" font-size="11" text-anchor="end">{v:.2}</text>"#,
            left - 4.0,
            y(v) + 4.0
        );
    }
    for &p in &periods {
        let _ = write!(
            s,
            r#"<text x="{:.2}" y="{}" font-size="10" text-anchor="middle">{}</text>"#,
            xi(p),
            base + 16.0,
            human_period(p)
        );
    }
    let _ = write!(
        s,
        r#"<text x="{:.2}" y="{}" font-size="11" text-anchor="middle">sampling period ({})</text>"#,
        left + plot_w / 2.0,
        base + 36.0,
        escape_html(unit)
    );
    let mut legend_y = top;
    for (mi, (name, get)) in metrics.iter().enumerate() {
        let color = SERIES[mi % SERIES.len()];
        for randomized in [false, true] {
            let mut pts: Vec<&SweepPoint> = points
                .iter()
                .filter(|p| p.randomized == randomized && get(p).is_some())
                .collect();
            if pts.is_empty() {
                continue;
            }
            pts.sort_by_key(|p| p.period);
            let coords: Vec<String> = pts
                .iter()
                .map(|p| format!("{:.2},{:.2}", xi(p.period), y(get(p).unwrap_or(0.0))))
                .collect();
            let dash = if randomized {
                r#" stroke-dasharray="6 4""#
            } else {
                ""
            };
            let _ = write!(
                s,
                r#"<polyline points="{}" fill="none" stroke="{color}" stroke-width="2"{dash}/>"#,
                coords.join(" ")
            );
            for c in &coords {
                let (cx, cy) = c.split_once(',').unwrap_or(("0", "0"));
                let _ = write!(s, r#"<circle cx="{cx}" cy="{cy}" r="3" fill="{color}"/>"#);
            }
            let label = format!("{name}{}", if randomized { " (randomised)" } else { "" });
            let lx = left + plot_w + 14.0;
            let _ = write!(
                s,
                r#"<line x1="{lx}" x2="{}" y1="{legend_y}" y2="{legend_y}" stroke="{color}" stroke-width="2"{dash}/><text x="{}" y="{}" font-size="11">{}</text>"#,
                lx + 24.0,
                lx + 30.0,
                legend_y + 4.0,
                escape_html(&label)
            );
            legend_y += 18.0;
        }
    }
    s.push_str("</svg>");
    s
}

/// `65536` → `64K`, `16777216` → `16M`.
pub(crate) fn human_period(p: u64) -> String {
    if p >= 1 << 20 && p % (1 << 20) == 0 {
        format!("{}M", p >> 20)
    } else if p >= 1 << 10 && p % (1 << 10) == 0 {
        format!("{}K", p >> 10)
    } else {
        p.to_string()
    }
}
