//! A generic line chart as a standalone SVG document (used by `proftrust vpp` for the delta
//! histograms of seed 004 Figs. 2 and 6). Same conventions as the audit plots: no script, no
//! external resource, every label escaped.

use crate::html::escape_html;
use std::fmt::Write as _;

const COLORS: [&str; 8] = [
    "#3b6fb6", "#e07b00", "#2a9d5b", "#b23a48", "#7a4eb0", "#8c6d31", "#c2549d", "#4a4a4a",
];

/// One line of a [`LinePlot`].
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// Legend text.
    pub label: String,
    /// Points in drawing order.
    pub points: Vec<(f64, f64)>,
}

/// A line chart with numeric axes starting at 0.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct LinePlot {
    /// Title above the plot.
    pub title: String,
    /// Label of the x axis.
    pub x_label: String,
    /// Label of the y axis.
    pub y_label: String,
    /// The lines.
    pub series: Vec<Series>,
}

/// A round step for about `n` ticks over `[0, max]`: 1, 2 or 5 times a power of ten
/// ([`crate::svg::nice_step`], the one rule of every plot).
fn nice_step(max: f64, n: f64) -> f64 {
    crate::svg::nice_step((max / n).max(f64::MIN_POSITIVE))
}

fn tick_label(v: f64) -> String {
    if v.abs() >= 1e6 {
        format!("{:.3e}", v)
    } else if v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

/// Renders `p` as a standalone SVG document (`<svg xmlns=...>`).
pub fn render_line_plot(p: &LinePlot) -> String {
    let (left, top, plot_w, plot_h, bottom) = (70.0, 40.0, 620.0, 280.0, 56.0);
    let legend_w = 260.0;
    let width = left + plot_w + legend_w;
    let height = top + plot_h + bottom;
    let pts = p.series.iter().flat_map(|s| s.points.iter());
    let (xmax, ymax) = pts.fold((0.0f64, 0.0f64), |(a, b), &(x, y)| {
        (
            if x.is_finite() { a.max(x) } else { a },
            if y.is_finite() { b.max(y) } else { b },
        )
    });
    let xstep = nice_step(xmax.max(1e-9), 6.0);
    let ystep = nice_step(ymax.max(1e-9), 5.0);
    let xtop = (xmax / xstep).ceil().max(1.0) * xstep;
    let ytop = (ymax / ystep).ceil().max(1.0) * ystep;
    let x = |v: f64| left + plot_w * (v / xtop).clamp(0.0, 1.0);
    let y = |v: f64| top + plot_h * (1.0 - (v / ytop).clamp(0.0, 1.0));
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" aria-label="{}" font-family="sans-serif">"#,
        escape_html(&p.title)
    );
    let _ = write!(
        s,
        r##"<rect width="{width}" height="{height}" fill="#fff"/><text x="{left}" y="22" font-size="14">{}</text>"##,
        escape_html(&p.title)
    );
    let base = top + plot_h;
    let _ = write!(
        s,
        r##"<line x1="{left}" x2="{}" y1="{base}" y2="{base}" stroke="#444"/><line x1="{left}" x2="{left}" y1="{top}" y2="{base}" stroke="#444"/>"##,
        left + plot_w
    );
    let mut v = 0.0;
    while v <= xtop + xstep * 1e-9 {
        let _ = write!(
            s,
            r##"<line x1="{0:.2}" x2="{0:.2}" y1="{base}" y2="{1}" stroke="#444"/><text x="{0:.2}" y="{2}" font-size="11" text-anchor="middle">{3}</text>"##,
            x(v),
            base + 4.0,
            base + 17.0,
            tick_label(v)
        );
        v += xstep;
    }
    let mut v = 0.0;
    while v <= ytop + ystep * 1e-9 {
        let _ = write!(
            s,
            r##"<line x1="{}" x2="{left}" y1="{1:.2}" y2="{1:.2}" stroke="#444"/><text x="{2}" y="{3:.2}" font-size="11" text-anchor="end">{4}</text>"##,
            left - 4.0,
            y(v),
            left - 7.0,
            y(v) + 4.0,
            tick_label(v)
        );
        v += ystep;
    }
    let _ = write!(
        s,
        r#"<text x="{:.2}" y="{}" font-size="12" text-anchor="middle">{}</text>"#,
        left + plot_w / 2.0,
        base + 40.0,
        escape_html(&p.x_label)
    );
    let _ = write!(
        s,
        r#"<text x="16" y="{0:.2}" font-size="12" text-anchor="middle" transform="rotate(-90 16 {0:.2})">{1}</text>"#,
        top + plot_h / 2.0,
        escape_html(&p.y_label)
    );
    // Series that coincide stay visible: each has its own colour, dash pattern and marker
    // shape (on the line and in the legend), and later lines are thinner.
    const DASHES: [&str; 4] = ["", "7 4", "2 3", "9 3 2 3"];
    let marker = |i: usize, cx: f64, cy: f64, color: &str| -> String {
        match i % 4 {
            0 => format!(
                r#"<circle class="marker" cx="{cx:.2}" cy="{cy:.2}" r="3" fill="{color}"/>"#
            ),
            1 => format!(
                r#"<rect class="marker" x="{:.2}" y="{:.2}" width="6" height="6" fill="none" stroke="{color}" stroke-width="1.5"/>"#,
                cx - 3.0,
                cy - 3.0
            ),
            2 => format!(
                r#"<path class="marker" d="M{:.2},{:.2}L{:.2},{:.2}L{:.2},{:.2}Z" fill="{color}"/>"#,
                cx,
                cy - 4.0,
                cx + 4.0,
                cy + 3.0,
                cx - 4.0,
                cy + 3.0
            ),
            _ => format!(
                r#"<path class="marker" d="M{:.2},{:.2}L{:.2},{:.2}L{:.2},{:.2}L{:.2},{:.2}Z" fill="none" stroke="{color}" stroke-width="1.5"/>"#,
                cx,
                cy - 4.0,
                cx + 4.0,
                cy,
                cx,
                cy + 4.0,
                cx - 4.0,
                cy
            ),
        }
    };
    for (i, ser) in p.series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let dash = match DASHES[i % DASHES.len()] {
            "" => String::new(),
            d => format!(r#" stroke-dasharray="{d}""#),
        };
        let width = (2.4 - 0.4 * i as f64).max(1.2);
        let pts: Vec<(f64, f64)> = ser
            .points
            .iter()
            .filter(|(a, b)| a.is_finite() && b.is_finite())
            .map(|&(a, b)| (x(a), y(b)))
            .collect();
        let coords: Vec<String> = pts.iter().map(|(a, b)| format!("{a:.2},{b:.2}")).collect();
        let _ = write!(
            s,
            r#"<polyline points="{}" fill="none" stroke="{color}" stroke-width="{width:.1}"{dash}><title>{}</title></polyline>"#,
            coords.join(" "),
            escape_html(&ser.label)
        );
        for &(cx, cy) in &pts {
            s.push_str(&marker(i, cx, cy, color));
        }
        let ly = top + 10.0 + 18.0 * i as f64;
        let lx = left + plot_w + 16.0;
        let _ = write!(
            s,
            r#"<line x1="{lx}" x2="{}" y1="{ly}" y2="{ly}" stroke="{color}" stroke-width="{width:.1}"{dash}/>{}<text x="{}" y="{}" font-size="11" font-family="monospace">{}</text>"#,
            lx + 22.0,
            marker(i, lx + 11.0, ly, color),
            lx + 28.0,
            ly + 4.0,
            escape_html(&ser.label)
        );
    }
    s.push_str("</svg>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plot_has_series_ticks_and_escaped_labels() {
        let p = LinePlot {
            title: "deltas <top 2>".into(),
            x_label: "delta (cycles)".into(),
            y_label: "samples".into(),
            series: vec![
                Series {
                    label: "0x10-1 f&g".into(),
                    points: vec![(0.0, 5.0), (10.0, 2.0), (20.0, 0.0)],
                },
                Series {
                    label: "0x20".into(),
                    points: vec![(0.0, 1.0), (10.0, 9.0)],
                },
            ],
        };
        let s = render_line_plot(&p);
        assert!(s.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
        assert!(s.trim_end().ends_with("</svg>"));
        assert_eq!(s.matches("<polyline").count(), 2);
        assert!(s.contains("deltas &lt;top 2&gt;"));
        assert!(s.contains("0x10-1 f&amp;g"));
        assert!(!s.contains("f&g"));
        // x: max 20, step 5 (20/6 = 3.3 -> 5): ticks 0..20; y: max 9, step 2 -> top 10.
        assert!(s.contains(">20</text>") && s.contains(">10</text>"));
        assert_eq!(nice_step(20.0, 6.0), 5.0);
        assert_eq!(nice_step(9.0, 5.0), 2.0);
        assert_eq!(nice_step(0.9, 5.0), 0.2);
        // First series' first point: x = 70, y = 40 + 280 * (1 - 5/10) = 180.
        assert!(s.contains("points=\"70.00,180.00 "), "{s}");
        // Coinciding series stay apart: the second is dashed with square markers (one per
        // point and one in the legend), the first solid with round ones.
        assert_eq!(s.matches("stroke-dasharray=\"7 4\"").count(), 2);
        assert_eq!(s.matches("<circle class=\"marker\"").count(), 3 + 1);
        assert_eq!(s.matches("<rect class=\"marker\"").count(), 2 + 1);
    }
}
