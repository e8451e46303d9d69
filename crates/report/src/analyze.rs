//! The report of `analyze granularity` (running granularity, sampling intervals and
//! second-event variance of real samples, seed 002 §5.1, Figs. 6-9): its data, which is the
//! `--json` document (keys in field order), and the text tables (drawn by
//! `proftrust_sim::granularity`).

use proftrust_sim::granularity::{render_text, GranularityReport};
use serde::Serialize;

/// Granularity per module and per function of one sample file.
#[derive(Debug, Clone, Serialize)]
pub struct GranularityAnalysis {
    /// The file as named.
    pub file: String,
    /// Its format (`perf.data`, `samples`).
    pub format: String,
    /// Per module.
    pub module: GranularityReport,
    /// Per function.
    pub function: GranularityReport,
    /// The SVG histograms, as (file name, document), when asked for.
    #[serde(skip)]
    pub plots: Vec<(String, String)>,
}

impl GranularityAnalysis {
    /// The JSON document (keys in field order), pretty-printed, with a final newline.
    pub fn to_json(&self) -> Result<String, serde_json::Error> {
        let mut s = serde_json::to_string_pretty(self)?;
        s.push('\n');
        Ok(s)
    }

    /// The tables of both levels, `top` rows each.
    pub fn render_text(&self, top: usize) -> String {
        let mut s = render_text(&self.module, top);
        s.push('\n');
        s.push_str(&render_text(&self.function, top));
        s
    }
}
