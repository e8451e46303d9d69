//! The report of `simulate sampling` (seed 002's running-state simulation): the preset's
//! tables, whose data is the `--json` document (keys in field order; the seed among them)
//! and whose text `proftrust_sim` draws.

pub use proftrust_sim::sampling::PresetReport as SimulationReport;

/// The JSON document, pretty-printed, with a final newline.
pub fn to_json(r: &SimulationReport) -> Result<String, serde_json::Error> {
    let mut s = serde_json::to_string_pretty(r)?;
    s.push('\n');
    Ok(s)
}

/// The tables, headed by the preset, the seed and the repetitions.
pub fn render_text(r: &SimulationReport) -> String {
    proftrust_sim::sampling::render_text(r)
}
