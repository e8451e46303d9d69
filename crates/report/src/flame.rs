//! Flame graphs in the audit's HTML page: the sampled and the exact profile side by side,
//! and the differential flame graph of the two (widths: the exact counts; red where the
//! truth has more than the samples show, blue where less).
//!
//! The SVGs are drawn by inferno (`proftrust-export`) and embedded as `data:` images: the
//! page stays self-contained and script-free (inferno's SVG carries JavaScript for zooming,
//! which an image never runs and the page's Content-Security-Policy would refuse inline).
//! The interactive SVGs are what `proftrust export --to flamegraph` writes.

use crate::html::escape_html;
use base64::Engine as _;
use std::fmt::Write as _;

/// The flame graphs of an audit (SVG documents).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FlameGraphs {
    /// Flame graph of the samples.
    pub sampled: Option<String>,
    /// Flame graph of the exact counts.
    pub exact: Option<String>,
    /// Differential flame graph, samples -> exact.
    pub diff: Option<String>,
    /// One sentence on what the graphs show (depth, normalisation).
    pub note: String,
}

fn img(id: &str, alt: &str, svg: &str, width: &str) -> String {
    format!(
        "<img id=\"{id}\" class=\"flame\" alt=\"{}\" style=\"width:{width}\" src=\"data:image/svg+xml;base64,{}\">",
        escape_html(alt),
        base64::engine::general_purpose::STANDARD.encode(svg.as_bytes())
    )
}

/// The HTML section (`id="flamegraphs"`; images `flame-sampled`, `flame-exact`,
/// `flame-diff`).
pub fn flame_html(f: &FlameGraphs) -> String {
    let mut h = String::new();
    h.push_str("<h2 id=\"flamegraphs\">Flame graphs</h2>\n");
    if !f.note.is_empty() {
        let _ = writeln!(h, "<p>{}</p>", escape_html(&f.note));
    }
    h.push_str("<div style=\"display:flex;gap:1%;align-items:flex-start\">");
    if let Some(s) = &f.sampled {
        h.push_str(&img(
            "flame-sampled",
            "flame graph of the samples",
            s,
            "49.5%",
        ));
    }
    if let Some(s) = &f.exact {
        h.push_str(&img(
            "flame-exact",
            "flame graph of the exact counts",
            s,
            "49.5%",
        ));
    }
    h.push_str("</div>\n");
    if let Some(s) = &f.diff {
        h.push_str("<p>Differential (widths: exact counts; red: the truth has more than the samples show, blue: less; samples scaled to the exact total):</p>\n");
        h.push_str(&img("flame-diff", "differential flame graph", s, "100%"));
        h.push('\n');
    }
    h
}
