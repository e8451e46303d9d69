//! # proftrust-report
//!
//! Presents the result of an audit (a sampled profile compared with the exact truth):
//!
//! * [`AuditReport`] — the data model, which *is* the `--json` schema (documented in
//!   `docs/audit.md`); [`write_json`] writes it.
//! * [`render_text`] — an aligned terminal table of the top functions plus the metrics
//!   (ANSI colour only when the caller says the output is a terminal).
//! * [`render_html`] — one self-contained HTML page: no network, no script, every name
//!   escaped, plots as inline SVG (sampled vs exact share per function with Wilson whiskers,
//!   the per-instruction picture of the hottest function after seed 001 Fig. 1, metrics
//!   against the sampling period for sweeps).
//!
//! * [`render_html_with`] — the same page with [`HtmlExtras`]: flame graphs (sampled and
//!   exact side by side, differential) and annotated source and disassembly
//!   ([`Annotation`], also as text: [`render_annotation_text`]), built by
//!   `proftrust-export`.
//!
//! * [`quote_name`] — how every text output shows a name from a binary or profile (control
//!   characters escaped, as `git` and `perf` do), used by every command's text output.
//!
//! * [`check::CheckReport`] — the report of `check` (one profile on its own: intervals,
//!   aliasing, granularity, skid, recording health, verdicts), text, JSON and HTML.
//!
//! * [`fleet::FleetReport`], [`fleet::FleetDiffReport`] — the reports of `fleet report` and
//!   `fleet diff` (fleet shares with cluster-robust intervals, host deviations, precision;
//!   changes between two label sets with q-values), text, JSON and HTML.
//!
//! * [`record`], [`truth`], [`simulate`], [`calibrate`] — the reports of those commands
//!   (text and JSON); [`correct`], [`paths`], [`cct`], [`vpp`], [`read`], [`inspect`],
//!   [`analyze`] likewise.
//!
//! * [`attribution::attribution_lines`] — how every report states, per module, the share of
//!   samples in no function and in functions recovered without a name.
//!
//! * [`render_line_plot`] — a generic line chart as a standalone SVG document (the delta
//!   histograms of `proftrust vpp`).
//!
//! * [`Report`] — what every command's report offers its writer: JSON, text, HTML where it
//!   has a page, its warnings ([`Warning`]: a [`WarningKind`] and a message) and its seed;
//!   implemented by each report above, so the CLI writes every report through one function.
//!
//! Writers take `std::io::Write` or return `String`; the crate opens no files.
//!
//! Entry points: [`render_text`], [`render_html`] and [`write_json`] of an [`AuditReport`]
//! (made by `proftrust_pipeline::audit::execute`); a generic [`render_line_plot`]:
//!
//! ```
//! use proftrust_report::{render_line_plot, LinePlot, Series};
//!
//! let mut plot = LinePlot::default();
//! plot.series.push(Series {
//!     label: "epsilon".into(),
//!     points: vec![(1.0, 0.2), (2.0, 0.1)],
//! });
//! let svg = render_line_plot(&plot);
//! assert!(svg.starts_with("<svg") && svg.contains("epsilon"));
//! ```
#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod analyze;
mod annotate;
pub mod attribution;
pub mod calibrate;
pub mod cct;
pub mod check;
pub mod correct;
mod flame;
pub mod fleet;
mod html;
pub mod inspect;
mod metric_table;
mod model;
pub mod paths;
mod plot;
pub mod read;
pub mod record;
mod report;
pub mod simulate;
mod svg;
mod text;
pub mod truth;
pub mod vpp;

pub use annotate::{
    annotation_html, render_annotation_html, render_annotation_text, AnnotatedInstruction,
    AnnotatedLine, Annotation, Shares, ANNOTATION_CSS,
};
pub use flame::{flame_html, FlameGraphs};
pub use html::{escape_html, render_html, render_html_with, HtmlExtras};
pub use model::{
    AuditConfig, AuditReport, CorrectedFunction, CorrectedSide, FunctionRow, InstructionPicture,
    InstructionRow, Metrics, ProcessRow, SweepPoint,
};
pub use plot::{render_line_plot, LinePlot, Series};
pub use proftrust_model::{quote_name, Warning, WarningKind};
pub use report::{Report, TextOptions};
pub use text::{render_processes_text, render_sweep_text, render_text, Table};

/// Why a report could not be written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReportError {
    /// Serialising or writing the JSON failed.
    #[error("cannot write the JSON report: {0}")]
    Json(#[from] serde_json::Error),
    /// Writing to the output failed.
    #[error("cannot write the {what} report: {source}")]
    Io {
        /// Which report (`text`, `html`).
        what: &'static str,
        /// The I/O error.
        source: std::io::Error,
    },
}

/// Writes `report` as pretty-printed JSON followed by a newline.
pub fn write_json<W: std::io::Write>(mut w: W, report: &AuditReport) -> Result<(), ReportError> {
    serde_json::to_writer_pretty(&mut w, report)?;
    w.write_all(b"\n").map_err(|source| ReportError::Io {
        what: "json",
        source,
    })
}
