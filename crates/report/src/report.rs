//! [`Report`]: what every command's report offers its writer (the CLI's one output step,
//! `proftrust_cli::output::write_report`; the fleet binary; users' own tools): its JSON, its
//! text, its HTML page where it has one, its warnings and its seed.
//!
//! The methods are the report's own renderers (each type's inherent `render_text`,
//! `to_json` ...), so the bytes are the same whichever way a report is written.

use crate::Warning;
use serde::Serialize;

/// How a text report is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TextOptions {
    /// Rows per table (reports without tables ignore it).
    pub top: usize,
    /// ANSI colour (a terminal, `NO_COLOR` unset); reports without colour ignore it.
    pub color: bool,
}

/// A command's report.
pub trait Report {
    /// The JSON document, pretty-printed and ending in a newline: the `--json` output.
    fn to_json(&self) -> Result<String, serde_json::Error>;

    /// The text report: the output without `--json`.
    fn render_text(&self, o: &TextOptions) -> String;

    /// The self-contained HTML page (`--html`), for the reports that have one.
    fn render_html(&self, _o: &TextOptions) -> Option<String> {
        None
    }

    /// The report's warnings (in the JSON, and in the text where it shows them).
    fn warnings(&self) -> &[Warning] {
        &[]
    }

    /// Whether a writer of the text report says the [`Report::warnings`] on standard error
    /// (`warning: MESSAGE`): true for the reports whose text leaves them out.
    fn warnings_on_stderr(&self) -> bool {
        false
    }

    /// The seed the command drew with, for the reports of commands that draw.
    fn seed(&self) -> Option<u64> {
        None
    }
}

/// `value` as pretty-printed JSON with a final newline.
pub(crate) fn json_line<T: Serialize + ?Sized>(value: &T) -> Result<String, serde_json::Error> {
    serde_json::to_string_pretty(value).map(|s| s + "\n")
}

impl Report for crate::AuditReport {
    fn to_json(&self) -> Result<String, serde_json::Error> {
        json_line(self)
    }
    fn render_text(&self, o: &TextOptions) -> String {
        crate::render_text(self, o.color, o.top)
    }
    fn render_html(&self, _o: &TextOptions) -> Option<String> {
        Some(crate::render_html(self))
    }
    fn warnings(&self) -> &[Warning] {
        &self.warnings
    }
    fn seed(&self) -> Option<u64> {
        Some(self.config.seed)
    }
}

impl Report for crate::check::CheckReport {
    fn to_json(&self) -> Result<String, serde_json::Error> {
        crate::check::CheckReport::to_json(self)
    }
    fn render_text(&self, o: &TextOptions) -> String {
        crate::check::CheckReport::render_text(self, o.top, o.color)
    }
    fn render_html(&self, o: &TextOptions) -> Option<String> {
        Some(crate::check::CheckReport::render_html(self, o.top))
    }
    fn warnings(&self) -> &[Warning] {
        &self.warnings
    }
}

impl Report for crate::correct::CorrectReport {
    fn to_json(&self) -> Result<String, serde_json::Error> {
        crate::correct::CorrectReport::to_json(self).map(|s| s + "\n")
    }
    fn render_text(&self, _o: &TextOptions) -> String {
        crate::correct::CorrectReport::render_text(self)
    }
    fn seed(&self) -> Option<u64> {
        Some(self.seed)
    }
}

impl Report for crate::cct::CctReport {
    fn to_json(&self) -> Result<String, serde_json::Error> {
        json_line(self)
    }
    fn render_text(&self, o: &TextOptions) -> String {
        crate::cct::CctReport::render_text(self, o.top)
    }
    fn warnings(&self) -> &[Warning] {
        &self.warnings
    }
    fn warnings_on_stderr(&self) -> bool {
        true
    }
}

impl Report for crate::paths::PathsReport {
    fn to_json(&self) -> Result<String, serde_json::Error> {
        json_line(self)
    }
    fn render_text(&self, o: &TextOptions) -> String {
        crate::paths::PathsReport::render_text(self, o.top)
    }
    fn warnings(&self) -> &[Warning] {
        &self.warnings
    }
    fn warnings_on_stderr(&self) -> bool {
        true
    }
}

impl Report for crate::vpp::VppReport {
    fn to_json(&self) -> Result<String, serde_json::Error> {
        json_line(self)
    }
    fn render_text(&self, _o: &TextOptions) -> String {
        crate::vpp::VppReport::render_text(self)
    }
    fn warnings(&self) -> &[Warning] {
        &self.warnings
    }
    fn warnings_on_stderr(&self) -> bool {
        true
    }
    fn seed(&self) -> Option<u64> {
        Some(self.seed)
    }
}

impl Report for crate::read::ReadReport {
    fn to_json(&self) -> Result<String, serde_json::Error> {
        crate::read::ReadReport::to_json(self).map(|s| s + "\n")
    }
    fn render_text(&self, o: &TextOptions) -> String {
        crate::read::ReadReport::render_text(self, o.top)
    }
    fn warnings(&self) -> &[Warning] {
        crate::read::ReadReport::warnings(self)
    }
    fn warnings_on_stderr(&self) -> bool {
        true
    }
}

/// The binary's warnings are said by the pipeline as it opens the binary, so not again.
impl Report for crate::inspect::InspectReport {
    fn to_json(&self) -> Result<String, serde_json::Error> {
        json_line(self)
    }
    fn render_text(&self, _o: &TextOptions) -> String {
        crate::inspect::InspectReport::render_text(self)
    }
    fn warnings(&self) -> &[Warning] {
        &self.warnings
    }
}

impl Report for crate::analyze::GranularityAnalysis {
    fn to_json(&self) -> Result<String, serde_json::Error> {
        crate::analyze::GranularityAnalysis::to_json(self)
    }
    fn render_text(&self, o: &TextOptions) -> String {
        crate::analyze::GranularityAnalysis::render_text(self, o.top)
    }
}

impl Report for crate::calibrate::CalibrateReport {
    fn to_json(&self) -> Result<String, serde_json::Error> {
        crate::calibrate::CalibrateReport::to_json(self)
    }
    fn render_text(&self, _o: &TextOptions) -> String {
        crate::calibrate::CalibrateReport::render_text(self)
    }
    fn seed(&self) -> Option<u64> {
        Some(self.seed)
    }
}

impl Report for crate::simulate::SimulationReport {
    fn to_json(&self) -> Result<String, serde_json::Error> {
        crate::simulate::to_json(self)
    }
    fn render_text(&self, _o: &TextOptions) -> String {
        crate::simulate::render_text(self)
    }
    fn seed(&self) -> Option<u64> {
        Some(self.seed)
    }
}

impl Report for crate::fleet::FleetReport {
    fn to_json(&self) -> Result<String, serde_json::Error> {
        crate::fleet::FleetReport::to_json(self)
    }
    fn render_text(&self, o: &TextOptions) -> String {
        crate::fleet::FleetReport::render_text(self, o.top, o.color)
    }
    fn render_html(&self, o: &TextOptions) -> Option<String> {
        Some(crate::fleet::FleetReport::render_html(self, o.top))
    }
    fn warnings(&self) -> &[Warning] {
        &self.warnings
    }
    fn seed(&self) -> Option<u64> {
        self.seed
    }
}

impl Report for crate::fleet::FleetDiffReport {
    fn to_json(&self) -> Result<String, serde_json::Error> {
        crate::fleet::FleetDiffReport::to_json(self)
    }
    fn render_text(&self, o: &TextOptions) -> String {
        crate::fleet::FleetDiffReport::render_text(self, o.top, o.color)
    }
    fn render_html(&self, o: &TextOptions) -> Option<String> {
        Some(crate::fleet::FleetDiffReport::render_html(self, o.top))
    }
    fn warnings(&self) -> &[Warning] {
        &self.warnings
    }
    fn seed(&self) -> Option<u64> {
        self.seed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{AuditReport, WarningKind};

    /// Through the trait, a report is the bytes its own renderers give: the audit's JSON
    /// is `write_json`'s, its text `render_text`'s; the warnings and the seed are the
    /// report's.
    #[test]
    fn the_trait_gives_the_reports_own_bytes() {
        let mut r = AuditReport {
            warnings: vec![Warning::new(WarningKind::Lost, "3 samples were lost")],
            ..Default::default()
        };
        r.config.seed = 7;
        let mut json = Vec::new();
        crate::write_json(&mut json, &r).unwrap();
        assert_eq!(Report::to_json(&r).unwrap().into_bytes(), json);
        let o = TextOptions {
            top: 5,
            color: false,
        };
        assert_eq!(
            Report::render_text(&r, &o),
            crate::render_text(&r, false, 5)
        );
        assert!(Report::render_text(&r, &o).contains("warning:      3 samples were lost"));
        assert_eq!(Report::render_html(&r, &o), Some(crate::render_html(&r)));
        assert_eq!((r.warnings().len(), r.seed()), (1, Some(7)));
        assert!(!r.warnings_on_stderr());
        let v: serde_json::Value = serde_json::from_str(&Report::to_json(&r).unwrap()).unwrap();
        assert_eq!(v["warnings"][0]["kind"], "lost");
        assert_eq!(v["config"]["seed"], 7);
    }

    /// An audit report of an earlier release, whose warnings were strings, reads back with
    /// kind `other`.
    #[test]
    fn an_older_audit_report_reads_back() {
        let mut v = serde_json::to_value(AuditReport::default()).unwrap();
        v["warnings"] = serde_json::json!(["the profiled program was killed by SIGKILL"]);
        let r: AuditReport = serde_json::from_value(v).unwrap();
        assert_eq!(
            r.warnings,
            vec![Warning::new(
                WarningKind::Other,
                "the profiled program was killed by SIGKILL"
            )]
        );
    }
}
