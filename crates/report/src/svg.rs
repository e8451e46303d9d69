//! Inline SVG plots (no script, no external resources).

use crate::html::escape_html;
use crate::model::{FunctionRow, InstructionPicture, SweepPoint};
use std::fmt::Write as _;

pub(crate) const SAMPLED: &str = "#3b6fb6";
pub(crate) const EXACT: &str = "#e07b00";
const SERIES: [&str; 4] = ["#3b6fb6", "#e07b00", "#2a9d5b", "#b23a48"];

fn fmt_pct(x: f64) -> String {
    format!("{:.1}%", 100.0 * x)
}

/// Shortens a name to `max` characters (with an ellipsis); the result is *not* escaped.
pub(crate) fn shorten(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(max.saturating_sub(1)).collect();
        t.push('…');
        t
    }
}

/// The smallest 1, 2 or 5 times a power of ten at least `raw` (within a relative 1e-9).
pub(crate) fn nice_step(raw: f64) -> f64 {
    let p = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * p)
        .find(|&st| st >= raw * (1.0 - 1e-9))
        .unwrap_or(10.0 * p)
}

/// The share axis of [`function_shares`]: linear from 0 with 1-2-5 ticks, or logarithmic
/// over whole decades (ticks at 1, 2 and 5 times a power of ten) when the plotted shares span
/// more than two decades, so that 1% functions and their whiskers are not slivers beside a
/// 90% one.
#[derive(Debug, Clone, PartialEq)]
struct ShareAxis {
    log: bool,
    lo: f64,
    hi: f64,
    ticks: Vec<f64>,
}

impl ShareAxis {
    /// The axis for shares whose largest value is `max` and smallest positive one `min_pos`.
    fn new(min_pos: f64, max: f64) -> ShareAxis {
        let max = max.max(1e-9);
        if min_pos > 0.0 && max / min_pos > 100.0 {
            let (d0, d1) = (min_pos.log10().floor() as i32, max.log10().ceil() as i32);
            // 1, 2, 5 per decade over up to three decades; powers of ten alone beyond.
            let mults: &[f64] = if d1 - d0 > 3 {
                &[1.0]
            } else {
                &[1.0, 2.0, 5.0]
            };
            let mut ticks = Vec::new();
            for d in d0..d1 {
                for &m in mults {
                    ticks.push(m * 10f64.powi(d));
                }
            }
            ticks.push(10f64.powi(d1));
            return ShareAxis {
                log: true,
                lo: 10f64.powi(d0),
                hi: 10f64.powi(d1),
                ticks,
            };
        }
        // About five steps of 1, 2 or 5 times a power of ten.
        let step = nice_step(max / 5.0);
        let n = (max / step - 1e-9).ceil().max(1.0) as usize;
        ShareAxis {
            log: false,
            lo: 0.0,
            hi: step * n as f64,
            ticks: (0..=n).map(|k| step * k as f64).collect(),
        }
    }

    /// Position of `v` on the axis as a fraction 0 to 1 (values below a log axis sit at 0).
    fn frac(&self, v: f64) -> f64 {
        let f = if self.log {
            if v <= 0.0 {
                0.0
            } else {
                (v / self.lo).log10() / (self.hi / self.lo).log10()
            }
        } else {
            (v - self.lo) / (self.hi - self.lo)
        };
        f.clamp(0.0, 1.0)
    }
}

/// A share as a tick label: as few digits as the value needs (`0.01%`, `2%`, `12.5%`).
fn tick_pct(x: f64) -> String {
    let p = 100.0 * x;
    let s = if p >= 1.0 || p == 0.0 {
        format!("{p:.1}")
    } else {
        format!("{p:.3}")
    };
    let s = if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    };
    format!("{s}%")
}

/// Sampled share (bar, labelled with its value) with its 95% Wilson interval (whisker)
/// against the exact share (diamond), one row per function, on a [`ShareAxis`].
pub(crate) fn function_shares(functions: &[FunctionRow], max_rows: usize) -> String {
    let rows: Vec<&FunctionRow> = functions.iter().take(max_rows).collect();
    let (label_w, plot_w, row_h, top, bottom) = (260.0, 520.0, 24.0, 30.0, 36.0);
    let width = label_w + plot_w + 70.0;
    let height = top + bottom + row_h * rows.len().max(1) as f64;
    let max = rows
        .iter()
        .map(|f| f.ci_high.max(f.exact_share).max(f.sampled_share))
        .fold(0.0f64, f64::max);
    let min_pos = rows
        .iter()
        .flat_map(|f| [f.sampled_share, f.exact_share])
        .filter(|&v| v > 0.0)
        .fold(f64::INFINITY, f64::min);
    let axis = ShareAxis::new(if min_pos.is_finite() { min_pos } else { 0.0 }, max);
    let x = |v: f64| label_w + plot_w * axis.frac(v);
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg class="plot" id="plot-functions" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" aria-label="sampled versus exact share per function">"#
    );
    let _ = write!(
        s,
        r#"<text x="{label_w}" y="16" font-size="12"><tspan fill="{SAMPLED}">■ sampled share ± 95% Wilson interval</tspan>  <tspan fill="{EXACT}">◆ exact share</tspan>{}</text>"#,
        if axis.log { "  (log scale)" } else { "" }
    );
    let axis_y = top + row_h * rows.len().max(1) as f64 + 4.0;
    for &t in &axis.ticks {
        let _ = write!(
            s,
            r##"<line class="grid" x1="{0:.2}" x2="{0:.2}" y1="{top}" y2="{axis_y}" stroke="#ddd"/>"##,
            x(t)
        );
    }
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
            r#"<path d="M {ex:.2} {} L {:.2} {cy} L {ex:.2} {} L {:.2} {cy} Z" fill="{EXACT}"/>"#,
            cy - 6.0,
            ex + 6.0,
            cy + 6.0,
            ex - 6.0
        );
        // The sampled share's value, right of the whisker and the diamond.
        let _ = write!(
            s,
            r#"<text class="value" x="{:.2}" y="{}" font-size="11">{}</text></g>"#,
            hi.max(ex + 6.0) + 4.0,
            cy + 4.0,
            fmt_pct(f.sampled_share)
        );
    }
    let _ = write!(
        s,
        r##"<line x1="{label_w}" x2="{}" y1="{axis_y}" y2="{axis_y}" stroke="#444"/>"##,
        label_w + plot_w
    );
    for &t in &axis.ticks {
        let _ = write!(
            s,
            r#"<text class="tick" x="{:.2}" y="{}" font-size="11" text-anchor="middle">{}</text>"#,
            x(t),
            axis_y + 16.0,
            tick_pct(t)
        );
    }
    s.push_str("</svg>");
    s
}

/// Per-instruction picture of one function (seed 001 Fig. 1): for each instruction address,
/// its share of the function's samples next to its share of the function's exact count.
pub(crate) fn instruction_picture(p: &InstructionPicture) -> String {
    if p.rows.len() <= LISTING_ROWS && p.rows.iter().any(|r| r.text.is_some()) {
        return instruction_listing(p);
    }
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

/// Functions of up to this many instructions are drawn as a listing (one labelled row per
/// instruction, its disassembly beside its bars); longer ones as the column chart.
const LISTING_ROWS: usize = 160;

/// The per-instruction picture as an annotated listing, the way `perf annotate` shows a
/// function: one row per instruction with its address and disassembly, then its sampled and
/// exact shares of the function as two bars with the values written out.
fn instruction_listing(p: &InstructionPicture) -> String {
    let n = p.rows.len();
    let (row_h, top, text_w, bar_w) = (14.0, 34.0, 430.0, 300.0);
    let left = 8.0;
    let bars_x = left + text_w;
    let width = bars_x + bar_w + 150.0;
    let height = top + row_h * n as f64 + 12.0;
    let smax = p
        .rows
        .iter()
        .map(|r| r.sampled_share.max(r.exact_share))
        .fold(0.0f64, f64::max)
        .max(1e-9);
    let len = |v: f64| bar_w * (v / smax).clamp(0.0, 1.0);
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg class="plot" id="plot-instructions" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" aria-label="per-instruction sampled versus exact share, with the disassembly">"#
    );
    let _ = write!(
        s,
        r#"<text x="{left}" y="14" font-size="12">address and instruction</text><text x="{bars_x}" y="14" font-size="12"><tspan fill="{SAMPLED}">■ sampled share</tspan>  <tspan fill="{EXACT}">■ exact share</tspan> (of the function)</text>"#
    );
    for (i, r) in p.rows.iter().enumerate() {
        let y0 = top + row_h * i as f64;
        let text = r.text.as_deref().unwrap_or("");
        let _ = write!(
            s,
            r#"<g><title>{:#x}: {} samples ({}), {} executions ({})</title><text x="{left}" y="{:.1}" font-size="10" font-family="monospace">{:x}  {}</text><rect x="{bars_x}" y="{:.1}" width="{:.2}" height="5" fill="{SAMPLED}"/><rect x="{bars_x}" y="{:.1}" width="{:.2}" height="5" fill="{EXACT}"/><text x="{:.1}" y="{:.1}" font-size="9">{} / {}</text></g>"#,
            r.address,
            r.samples,
            fmt_pct(r.sampled_share),
            r.exact,
            fmt_pct(r.exact_share),
            y0 + 10.0,
            r.address,
            escape_html(&shorten(text, 56)),
            y0 + 1.0,
            len(r.sampled_share),
            y0 + 6.5,
            len(r.exact_share),
            bars_x + bar_w + 6.0,
            y0 + 10.0,
            fmt_pct(r.sampled_share),
            fmt_pct(r.exact_share)
        );
    }
    let _ = write!(
        s,
        r##"<line x1="{bars_x}" x2="{bars_x}" y1="{top}" y2="{:.1}" stroke="#444"/>"##,
        top + row_h * n as f64
    );
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::InstructionRow;

    /// Whether `v` is 1, 2 or 5 times a power of ten (to rounding).
    fn one_two_five(v: f64) -> bool {
        let p = 10f64.powf(v.log10().floor());
        [1.0, 2.0, 5.0, 10.0]
            .iter()
            .any(|m| (v / p - m).abs() < 1e-6 * m)
    }

    /// With disassembly, every instruction gets its own row: its address and text (escaped)
    /// beside two bars whose lengths are the shares over the largest share, and the values
    /// written out; without it, the column chart.
    #[test]
    fn instruction_listing_labels_every_instruction_with_its_disassembly() {
        let ins = |address: u64, samples: u64, exact: u64, text: &str| InstructionRow {
            address,
            samples,
            sampled_share: samples as f64 / 10.0,
            exact,
            exact_share: exact as f64 / 100.0,
            text: Some(text.to_string()),
        };
        let mut p = InstructionPicture {
            function: "f".into(),
            rows: vec![
                ins(0x1000, 2, 50, "mov (%rdi),%rax"),
                ins(0x1003, 8, 25, "cmp %rax,%rsi"),
                ins(0x1006, 0, 25, "jb 1000 <f>"),
            ],
        };
        let svg = instruction_picture(&p);
        for label in [
            "1000  mov (%rdi),%rax",
            "1003  cmp %rax,%rsi",
            "1006  jb 1000 &lt;f&gt;",
        ] {
            assert!(svg.contains(label), "{label} missing in {svg}");
        }
        // Largest share 0.8 (0x1003 sampled) -> 300 px; 0x1000's exact 0.5 -> 187.5 px.
        assert!(svg.contains(r#"width="300.00" height="5""#), "{svg}");
        assert!(svg.contains(r#"width="187.50" height="5""#), "{svg}");
        assert!(svg.contains("80.0% / 25.0%"), "{svg}");
        for r in &mut p.rows {
            r.text = None;
        }
        assert!(!instruction_picture(&p).contains("address and instruction"));
    }

    fn row(name: &str, sampled: f64, exact: f64) -> FunctionRow {
        FunctionRow {
            name: name.into(),
            samples: (sampled * 1000.0) as u64,
            sampled_share: sampled,
            ci_low: sampled * 0.9,
            ci_high: sampled * 1.1,
            exact_share: exact,
            ..Default::default()
        }
    }

    #[test]
    fn linear_axis_has_one_two_five_ticks_from_zero() {
        // Largest plotted value 0.373 × 1.1 = 0.4103: raw step 0.082 → 0.1, ticks 0..0.5.
        let a = ShareAxis::new(0.05, 0.4103);
        assert!(!a.log);
        let want = [0.0, 0.1, 0.2, 0.3, 0.4, 0.5];
        assert_eq!(a.ticks.len(), want.len(), "{a:?}");
        for (t, w) in a.ticks.iter().zip(want) {
            assert!((t - w).abs() < 1e-12, "{a:?}");
        }
        // 0.93: raw step 0.186 → 0.2, ticks 0..1.0.
        let a = ShareAxis::new(0.1, 0.93);
        assert_eq!(a.ticks.len(), 6, "{a:?}");
        assert!((a.hi - 1.0).abs() < 1e-12);
        // 0.0123: raw step 0.00246 → 0.005, ticks 0..0.015.
        let a = ShareAxis::new(0.01, 0.0123);
        assert!(
            (a.ticks[1] - 0.005).abs() < 1e-15 && (a.hi - 0.015).abs() < 1e-12,
            "{a:?}"
        );
        // Every tick is a whole multiple of a 1-2-5 step.
        for a in [ShareAxis::new(0.2, 0.77), ShareAxis::new(0.001, 0.0034)] {
            let step = a.ticks[1];
            assert!(one_two_five(step), "{a:?}");
            for t in &a.ticks {
                assert!(((t / step) - (t / step).round()).abs() < 1e-9, "{a:?}");
            }
        }
    }

    #[test]
    fn shares_over_more_than_two_decades_get_a_log_axis() {
        // 0.0004 to 0.9: decades 1e-4 .. 1e0, four of them → powers of ten only.
        let a = ShareAxis::new(0.0004, 0.9);
        assert!(a.log);
        assert_eq!(a.ticks, vec![1e-4, 1e-3, 1e-2, 1e-1, 1.0]);
        // 0.004 to 0.9: three decades → 1, 2, 5 per decade.
        let a = ShareAxis::new(0.004, 0.9);
        assert!(a.log && a.ticks.len() == 10 && a.ticks.iter().all(|&t| one_two_five(t)));
        assert!((a.frac(0.01) - 1.0 / 3.0).abs() < 1e-12);
        // Less than two decades stays linear.
        assert!(!ShareAxis::new(0.01, 0.9).log);
    }

    #[test]
    fn every_bar_has_a_value_label_and_ticks_are_one_two_five() {
        let rows = [
            row("hot", 0.9, 0.88),
            row("warm", 0.08, 0.1),
            row("cold", 0.015, 0.012),
            row("rare", 0.002, 0.003),
        ];
        let svg = function_shares(&rows, 10);
        let labels: Vec<&str> = svg
            .split(r#"<text class="value""#)
            .skip(1)
            .map(|t| &t[t.find('>').unwrap() + 1..t.find("</text>").unwrap()])
            .collect();
        assert_eq!(labels, ["90.0%", "8.0%", "1.5%", "0.2%"], "{svg}");
        let ticks: Vec<f64> = svg
            .split(r#"<text class="tick""#)
            .skip(1)
            .map(|t| {
                let v = &t[t.find('>').unwrap() + 1..t.find("%</text>").unwrap()];
                v.parse::<f64>().unwrap() / 100.0
            })
            .collect();
        // 0.002 to 0.99 spans more than two decades: log, 1e-3 .. 1e0, 1-2-5 ticks.
        assert!(svg.contains("(log scale)"), "{svg}");
        assert_eq!(ticks.len(), 10, "{ticks:?}");
        assert!(ticks.iter().all(|&t| one_two_five(t)), "{ticks:?}");
        // Inside the viewBox (width 850): every tick and label x lies within it.
        for part in svg.split("<text ").skip(1) {
            if let Some(i) = part.find("x=\"") {
                let rest = &part[i + 4..];
                let x: f64 = rest[..rest.find('"').unwrap()].parse().unwrap();
                assert!((0.0..=850.0).contains(&x), "{part}");
            }
        }
    }
}
