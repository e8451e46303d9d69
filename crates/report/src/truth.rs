//! The report of `truth` (exact per-instruction counts of one run): what was counted, as
//! the notes the command prints beside the file it writes, and as JSON.

use crate::quote_name;
use serde::Serialize;

/// What an exact run counted (the counts themselves are the profile the command writes).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TruthSummary {
    /// Backend name (`qemu`, `callgrind`).
    pub backend: String,
    /// The backend's version and settings, as stored in the profile.
    pub backend_detail: String,
    /// Instructions executed.
    pub instructions: u64,
    /// Distinct instruction addresses executed.
    pub distinct: usize,
    /// Edges counted.
    pub edges: usize,
    /// Call sites counted.
    pub call_sites: usize,
    /// Modules counted.
    pub modules: usize,
    /// Set when the counts may be slightly low (several guest threads counted with
    /// non-atomic inline counters): the number of threads, or `several`.
    pub counts_may_be_low: Option<String>,
    /// The backend's warnings about the run.
    pub warnings: Vec<crate::Warning>,
    /// The process images of the run by name and how they began, when there were several
    /// (docs/processes.md, "Process trees"); empty for one process.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub processes: Vec<TruthProcesses>,
}

/// The process images of one name that began one way (`sort`, exec), in an exact run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TruthProcesses {
    /// The process name (`comm`; empty when the backend does not know it).
    pub name: String,
    /// How they began: `started`, `forked`, `exec`, with `, then exec` when an `execve`
    /// replaced them.
    pub start: String,
    /// Images.
    pub images: u64,
    /// Images counted (the others are listed, not counted).
    pub counted: u64,
    /// Their instructions.
    pub instructions: u64,
    /// Process ids.
    pub pids: Vec<u32>,
    /// Why some were not counted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_counted: Option<String>,
}

impl TruthSummary {
    /// The JSON document, pretty-printed, with a final newline.
    pub fn to_json(&self) -> Result<String, serde_json::Error> {
        let mut s = serde_json::to_string_pretty(self)?;
        s.push('\n');
        Ok(s)
    }

    /// The notes, one per line: the totals and where they were written (`written_to`), the
    /// backend's detail when `verbose`, then every caution.
    pub fn render_text(&self, written_to: &str, verbose: bool) -> String {
        let mut s = format!(
            "{} instructions executed ({} distinct, {} edges, {} call sites, {} modules) written to {}\n",
            self.instructions,
            self.distinct,
            self.edges,
            self.call_sites,
            self.modules,
            quote_name(written_to)
        );
        if verbose {
            s.push_str(&format!(
                "{}: {}\n",
                quote_name(&self.backend),
                quote_name(&self.backend_detail)
            ));
        }
        if let Some(n) = &self.counts_may_be_low {
            s.push_str(&format!(
                "{n} guest threads counted with non-atomic inline counters: counts may be slightly low where threads ran the same code at once (the run ended without the plugin's snapshot; QEMU plugin API v1)\n"
            ));
        }
        if !self.processes.is_empty() {
            let images: u64 = self.processes.iter().map(|p| p.images).sum();
            let counted: u64 = self.processes.iter().map(|p| p.counted).sum();
            s.push_str(&format!("{images} process images, {counted} counted:\n"));
            for p in &self.processes {
                s.push_str(&format!(
                    "  {} ({}) x{}: {} instructions{}\n",
                    if p.name.is_empty() { "?" } else { &p.name },
                    p.start,
                    p.images,
                    p.instructions,
                    match &p.not_counted {
                        Some(why) => format!("; {} not counted: {why}", p.images - p.counted),
                        None => String::new(),
                    }
                ));
            }
        }
        for w in &self.warnings {
            s.push_str(&format!("warning: {}\n", quote_name(&w.message)));
        }
        s
    }
}
